//! [`Queue`]: the producer API over any engine (push with options, batch push, get, delete,
//! reschedule) and the door to workers.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{
    Backoff, Engine, Error, Job, JobId, NewJob, Pushed, Result, Schedule, Store, Timestamp, Topic,
};
use delayq_worker::{Handler, Json, Payload, Worker, WorkerConfig};

use crate::open::{OpenOptions, open_with};

/// A handle on a delay queue: push jobs, read and change them by id, and start workers.
/// Cheap to clone; clones share the engine.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> delayq::Result<()> {
/// use std::time::Duration;
/// let queue = delayq::Queue::open("memory://").await?;
/// let pushed = queue
///     .push_json("orders.cancel", serde_json::json!({ "order": 42 }))
///     .id("order-42")
///     .delay(Duration::from_secs(30 * 60))
///     .await?;
/// assert!(pushed.created);
/// // Pushing the same id again is a no-op: the id is the idempotency key.
/// assert!(!queue.push_json("orders.cancel", 0).id("order-42").await?.created);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Queue {
    engine: Arc<dyn Store>,
}

impl Queue {
    /// Opens the engine a URL points to: `redis://` / `rediss://`, `redis+cluster://h1:p1,h2:p2`
    /// / `rediss+cluster://…` (Redis Cluster), `postgres://…` (PostgreSQL),
    /// `sqlite:///path/to/dir` or a plain directory path, `memory://`.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, &OpenOptions::default()).await
    }

    /// Opens with options (limits, Redis key prefix, embedded durability).
    pub async fn open_with(url: &str, options: &OpenOptions) -> Result<Self> {
        Ok(Queue {
            engine: open_with(url, options).await?,
        })
    }

    /// A queue over an engine you built yourself.
    pub fn new(engine: impl Store) -> Self {
        Queue {
            engine: Arc::new(engine),
        }
    }

    /// The engine, for every operation of the contract (reserve, stats, list, purge ...).
    pub fn engine(&self) -> &Arc<dyn Store> {
        &self.engine
    }

    /// Starts a push of `payload` (encoded by its [`Payload`] type) to `topic`; set options on
    /// the returned [`Push`], then `.await` it. Defaults: a generated id, due now, ttr 30 s,
    /// 3 attempts, exponential back-off from 1 s, priority 0.
    pub fn push<P: Payload>(&self, topic: &str, payload: P) -> Push<'_> {
        let job = Topic::new(topic).and_then(|t| {
            let body = payload
                .encode()
                .map_err(|e| Error::invalid("body", format!("cannot encode the payload: {e}")))?;
            Ok(NewJob::new(t, body))
        });
        Push { queue: self, job }
    }

    /// Starts a push of a value serialized as JSON.
    pub fn push_json<T>(&self, topic: &str, value: T) -> Push<'_>
    where
        T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        self.push(topic, Json(value))
    }

    /// Pushes up to 1000 jobs in one round trip; answers in order.
    pub async fn push_batch<'q>(
        &'q self,
        pushes: impl IntoIterator<Item = Push<'q>>,
    ) -> Result<Vec<Pushed>> {
        let jobs = pushes
            .into_iter()
            .map(Push::into_job)
            .collect::<Result<Vec<_>>>()?;
        self.engine.push_batch(jobs).await
    }

    /// Pushes up to 1000 jobs in one round trip, answering each job apart: on a Redis
    /// Cluster whose primary is down, its jobs answer [`Error::Unavailable`] while the other
    /// primaries' jobs are stored ([`Engine::push_each`]). Give each job its id
    /// ([`Push::id`]) and send a failed one again with it: a push is idempotent by its id.
    pub async fn push_each<'q>(
        &'q self,
        pushes: impl IntoIterator<Item = Push<'q>>,
    ) -> Result<Vec<Result<Pushed>>> {
        let jobs = pushes
            .into_iter()
            .map(Push::into_job)
            .collect::<Result<Vec<_>>>()?;
        self.engine.push_each(jobs).await
    }

    /// Reads a job, or `None`.
    pub async fn get(&self, topic: &str, id: &str) -> Result<Option<Job>> {
        self.engine.get(&Topic::new(topic)?, &JobId::new(id)?).await
    }

    /// Deletes (cancels) a job in any state; false when there was none.
    pub async fn delete(&self, topic: &str, id: &str) -> Result<bool> {
        self.engine
            .delete(&Topic::new(topic)?, &JobId::new(id)?)
            .await
    }

    /// Moves a delayed or ready job to a new due time (a [`Duration`] from now, or a
    /// [`Timestamp`] / `SystemTime`); answers the new due time.
    pub async fn reschedule(
        &self,
        topic: &str,
        id: &str,
        when: impl Into<Schedule>,
    ) -> Result<Timestamp> {
        self.engine
            .reschedule(&Topic::new(topic)?, &JobId::new(id)?, when.into())
            .await
    }

    /// A worker over `topics` with the default [`WorkerConfig`]; run it with [`Worker::run`].
    pub fn worker<P, H>(&self, topics: &[&str], handler: H) -> Result<Worker<Arc<dyn Store>, P, H>>
    where
        P: Payload,
        H: Handler<P>,
    {
        self.worker_with(topics, WorkerConfig::default(), handler)
    }

    /// A worker over `topics` with a configuration.
    pub fn worker_with<P, H>(
        &self,
        topics: &[&str],
        config: WorkerConfig,
        handler: H,
    ) -> Result<Worker<Arc<dyn Store>, P, H>>
    where
        P: Payload,
        H: Handler<P>,
    {
        let topics = topics
            .iter()
            .map(|t| Topic::new(*t))
            .collect::<Result<Vec<_>>>()?;
        Worker::with_config(self.engine.clone(), topics, config, handler)
    }
}

/// A push being built; `.await` it (or call [`Push::send`]). Invalid input (topic, id,
/// payload) is reported when it is sent, and nothing is written then.
#[must_use = "a push does nothing until it is awaited"]
pub struct Push<'q> {
    queue: &'q Queue,
    job: Result<NewJob>,
}

impl<'q> Push<'q> {
    fn map(mut self, f: impl FnOnce(NewJob) -> Result<NewJob>) -> Self {
        self.job = self.job.and_then(f);
        self
    }

    /// Sets the id: the idempotency key (a live job with this id is never duplicated).
    pub fn id(self, id: &str) -> Self {
        let id = JobId::new(id);
        self.map(|j| Ok(j.with_id(id?)))
    }

    /// Due `delay` after the engine receives the push (0 ms to 10 years).
    pub fn delay(self, delay: Duration) -> Self {
        self.map(|j| Ok(j.with_delay(delay)))
    }

    /// Due at an absolute time (`Timestamp` or `SystemTime`), on the engine's clock.
    pub fn at(self, at: impl Into<Timestamp>) -> Self {
        let at = at.into();
        self.map(|j| Ok(j.with_ready_at(at)))
    }

    /// The lease length of each delivery (1 s to 24 h).
    pub fn ttr(self, ttr: Duration) -> Self {
        self.map(|j| Ok(j.with_ttr(ttr)))
    }

    /// Deliveries before the job goes dead (1 = no retry).
    pub fn max_attempts(self, n: u32) -> Self {
        self.map(|j| Ok(j.with_max_attempts(n)))
    }

    /// The retry back-off.
    pub fn backoff(self, backoff: Backoff) -> Self {
        self.map(|j| Ok(j.with_backoff(backoff)))
    }

    /// Among due jobs, lower runs first.
    pub fn priority(self, priority: u32) -> Self {
        self.map(|j| Ok(j.with_priority(priority)))
    }

    /// The job this push would create (for [`Queue::push_batch`] or the engine directly).
    pub fn into_job(self) -> Result<NewJob> {
        self.job
    }

    /// Sends the push.
    pub async fn send(self) -> Result<Pushed> {
        let job = self.job?;
        self.queue.engine.push(job).await
    }
}

impl<'q> IntoFuture for Push<'q> {
    type Output = Result<Pushed>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Pushed>> + Send + 'q>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}
