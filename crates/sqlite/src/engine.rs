//! [`SqliteEngine`]: the [`Engine`] contract on SQLite, every write through one
//! group-committing writer thread, reads on their own connections.

use std::fs::File;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use delayq_core::limits::{
    MAX_DELAY, at_too_far, check_count, check_reason, check_ttr, delay_ms_ceil,
};
use delayq_core::{
    Bury, Cursor, Delivery, Destinations, Engine, Error, Job, JobId, JobSchedule, JobState, Lease,
    Limits, ListKey, Nack, NackOutcome, NewJob, Numbers, Page, Pushed, Release, Reserve, Result,
    Retention, Schedule, ScheduleName, Schedules, Settle, Settled, SettledAndReserved,
    StoredDestination, StoredSchedule, Timestamp, Topic, TopicConfig, TopicStats, async_trait,
    check_ack_batch, check_claim, check_destination_doc, check_push_batch,
    check_settle_and_reserve, detach_lease, duration_ms,
};
use rusqlite::Connection;
use tokio::sync::{Notify, oneshot};

use crate::checkpoint::Checkpointer;
use crate::clock::Clock;
use crate::config::SqliteConfig;
use crate::ops::settle::{self as settling, Settlement};
use crate::ops::{admin, destinations, lease, numbers, push, reserve, schedules};
use crate::readers::Readers;
use crate::shared::Shared;
use crate::tx::Tx;
use crate::writer::{Call, Request, Writer};
use crate::{diagnose, open, read};

/// Dead jobs kicked per writer request by `kick_all`, so a large kick does not hold up the
/// writer's other requests.
const KICK_CHUNK: usize = 1000;

/// The embedded engine. Cheap to clone; clones share one store, one writer thread and one
/// timer. The store is closed (and its directory unlocked) when the last clone is dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> delayq_core::Result<()> {
/// use std::time::Duration;
/// use delayq_core::{Engine, NewJob, Reserve, Topic};
/// use delayq_sqlite::{SqliteConfig, SqliteEngine};
///
/// let dir = std::env::temp_dir().join(format!("delayq-doc-{}", std::process::id()));
/// let engine = SqliteEngine::open(SqliteConfig::dir(&dir))?;
/// let topic = Topic::new("orders")?;
/// engine.push(NewJob::new(topic.clone(), "cancel 42").with_delay(Duration::from_millis(20))).await?;
/// let jobs = engine.reserve(&Reserve::new(topic).wait(Duration::from_secs(5))).await?;
/// for d in &jobs {
///     if let Some(lease) = &d.lease {
///         engine.ack(lease).await?;
///     }
/// }
/// # drop(engine);
/// # let _ = std::fs::remove_dir_all(&dir);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteEngine {
    inner: Arc<Inner>,
    limits: Limits,
}

struct Inner {
    shared: Arc<Shared>,
    sender: Option<mpsc::Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    /// Read connections; `None` in memory, where the writer's connection serves reads.
    readers: Option<Readers>,
    /// `None` in memory, where there is no log.
    checkpointer: Option<Checkpointer>,
    rotate: AtomicUsize,
    lock: Option<File>,
    /// The data directory; `None` in memory.
    dir: Option<std::path::PathBuf>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Readers and the checkpointer first, so that the writer's connection is the last
        // one and checkpoints the log as it closes; the lock last, so that no other engine
        // opens the directory before this one has let go of it.
        if let Some(r) = &self.readers {
            r.close();
        }
        if let Some(c) = &mut self.checkpointer {
            c.stop();
        }
        self.sender.take();
        if let Some(w) = self.writer.take()
            && w.join().is_err()
        {
            tracing::error!("the delayq writer thread panicked");
        }
        self.lock.take();
    }
}

impl SqliteEngine {
    /// Opens the store (creating it when missing), recovers every job it holds and starts
    /// the writer thread. Blocks while it opens: call it at start-up, or from
    /// `spawn_blocking`.
    ///
    /// Fails with [`Error::InvalidConfig`] when the directory cannot be created or written,
    /// or holds a corrupt, foreign or newer database, with [`Error::Unavailable`] when
    /// another engine owns the directory, and with [`Error::Full`] when the disk is full.
    pub fn open(config: SqliteConfig) -> Result<Self> {
        config.validate()?;
        let mut store = open::open_store(&config)?;
        let label = store
            .path
            .clone()
            .unwrap_or_else(|| std::path::PathBuf::from(":memory:"));
        let mark =
            crate::clock::read_mark(&store.conn).map_err(|e| crate::error::open_err(&label, e))?;
        let shared = Arc::new(Shared::new(Clock::start(mark)));
        open::recover(&store.conn, &shared, &label)?;
        let checkpointer = match &store.path {
            Some(path) => Some(Checkpointer::start(path, &mut store.conn)?),
            None => None,
        };
        let dir = store
            .path
            .as_deref()
            .and_then(std::path::Path::parent)
            .map(std::path::Path::to_path_buf);
        let writer = Writer {
            conn: store.conn,
            shared: shared.clone(),
            tick_batch: config.tick_batch,
            max_group: config.max_group,
            tick_pause: None,
            dir: dir.clone(),
        };
        let (sender, rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("delayq-sqlite-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| Error::unavailable("cannot start the writer thread", e))?;
        Ok(SqliteEngine {
            inner: Arc::new(Inner {
                dir,
                shared,
                sender: Some(sender),
                writer: Some(handle),
                readers: store.path.map(|p| Readers::new(p, config.readers)),
                checkpointer,
                rotate: AtomicUsize::new(0),
                lock: store.lock,
            }),
            limits: config.limits,
        })
    }

    /// Another handle on the same engine with other input limits.
    pub fn with_limits(&self, limits: Limits) -> Self {
        SqliteEngine {
            inner: self.inner.clone(),
            limits,
        }
    }

    fn clock(&self) -> Clock {
        self.inner.shared.clock
    }

    /// The retention of a topic's done jobs, for the reads to show only those it keeps.
    fn retention(&self, topic: &Topic) -> Option<Retention> {
        self.inner.shared.registry.config_of(topic).retention
    }

    fn send(&self, r: Request) -> Result<()> {
        self.inner
            .sender
            .as_ref()
            .ok_or_else(stopped)?
            .send(r)
            .map_err(|_| stopped())
    }

    /// Runs `f` in the writer's next group transaction (again, if the group had to start
    /// over without another request); answers after the commit.
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut Tx<'_>) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.send(Request::Write(Box::new(Call::new(f, tx))))?;
        match (rx.await.map_err(|_| stopped())?, &self.inner.dir) {
            (Err(e @ Error::Unavailable { .. }), Some(dir)) => Err(diagnose::explain(e, dir)),
            (out, _) => out,
        }
    }

    /// Runs `f` on a read connection, after letting the writer fail the leases that expired
    /// (so the states read are those time gives; a due time needs no write).
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        if self.inner.readers.is_none() {
            let (tx, rx) = oneshot::channel();
            self.send(Request::Read(Box::new(move |conn: &Connection| {
                let _ = tx.send(f(conn));
            })))?;
            return rx.await.map_err(|_| stopped())?;
        }
        let expired = self.inner.shared.timers().earliest_lease();
        if expired.is_some_and(|t| t <= self.clock().now_ms()) {
            self.write(|_| Ok(())).await?;
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || match &inner.readers {
            Some(readers) => readers.with(f),
            None => Err(Error::Internal(
                "a file-backed engine has no readers".into(),
            )),
        })
        .await
        .map_err(|e| Error::Internal(format!("a read task failed: {e}")))?
    }

    /// One pass over the topics (the first one rotating per call), without waiting; the
    /// settlements, if any, run first in the same writer request. The request is made from
    /// a task of its own ([`detach_lease`]): when the caller is dropped before the answer
    /// comes, the jobs it leased are released at once instead of waiting for their ttr.
    async fn reserve_once(
        &self,
        req: &Reserve,
        settlements: Option<Vec<Settlement>>,
    ) -> Result<(Vec<Result<Settled>>, Vec<Delivery>)> {
        let n = req.topics.len();
        let start = self.inner.rotate.fetch_add(1, Ordering::Relaxed) % n;
        let topics: Vec<Topic> = (0..n)
            .map(|k| req.topics[(start + k) % n].clone())
            .collect();
        let (max, mode) = (req.max, req.mode);
        let (engine, back) = (self.clone(), self.clone());
        let trip = async move {
            match settlements {
                None => engine
                    .write(move |tx| reserve::reserve(tx, &topics, max, mode))
                    .await
                    .map(|d| (Vec::new(), d)),
                Some(items) => {
                    engine
                        .write(move |tx| {
                            let settled = settling::settle(tx, &items)?;
                            let got = reserve::reserve(tx, &topics, max, mode)?;
                            Ok((settled, got))
                        })
                        .await
                }
            }
        };
        detach_lease(
            trip,
            |(_, deliveries)| deliveries,
            move |leases: Vec<Lease>| async move {
                let items: Vec<Settlement> = leases.into_iter().map(Settlement::Release).collect();
                back.write(move |tx| settling::settle(tx, &items))
                    .await
                    .map(|_| ())
            },
        )
        .await
    }

    /// A reserve with its wait: the first pass carries the settlements; when it hands out
    /// nothing, the caller waits on the topics' wake-ups and looks again until the wait ends.
    async fn reserve_waiting(
        &self,
        req: &Reserve,
        settlements: Option<Vec<Settlement>>,
    ) -> Result<(Vec<Result<Settled>>, Vec<Delivery>)> {
        if req.wait.is_zero() {
            return self.reserve_once(req, settlements).await;
        }
        let deadline = Instant::now() + req.wait;
        // Registered before the first look, and each wake-up enabled before each look, so
        // that a job made ready in between is never missed.
        let registration = self.inner.shared.waiters.register(&req.topics);
        let mut settlements = settlements;
        let mut settled = Vec::new();
        loop {
            let mut wakes: Vec<Pin<Box<tokio::sync::futures::Notified<'_>>>> = registration
                .notifies()
                .iter()
                .map(|n: &Arc<Notify>| Box::pin(n.notified()))
                .collect();
            for w in &mut wakes {
                w.as_mut().enable();
            }
            let (s, out) = self.reserve_once(req, settlements.take()).await?;
            if !s.is_empty() {
                settled = s;
            }
            if !out.is_empty() || Instant::now() >= deadline {
                return Ok((settled, out));
            }
            // A paused topic's waiters also wake when its pause ends (an earlier end, or a
            // resume, wakes them through the registry's effect).
            let now_ms = self.clock().now_ms();
            let registry = &self.inner.shared.registry;
            let wake_at = req
                .topics
                .iter()
                .filter_map(|t| registry.paused_until_of(t, now_ms))
                .min()
                .map(|end| Instant::now() + Duration::from_millis(end - now_ms))
                .map_or(deadline, |at| at.min(deadline));
            tokio::select! {
                _ = futures_util::future::select_all(wakes) => {}
                _ = tokio::time::sleep_until(wake_at.into()) => {}
            }
        }
    }

    /// Refuses an absolute time more than 10 years after the engine's now.
    fn check_not_too_far(&self, schedule: Schedule) -> Result<()> {
        if let Schedule::At(at) = schedule {
            let now = self.clock().now();
            if at > now.plus(MAX_DELAY) {
                return Err(at_too_far(at, now));
            }
        }
        Ok(())
    }
}

fn stopped() -> Error {
    Error::Unavailable {
        message: "the engine's writer thread has stopped (see the log for a panic); open the engine again".into(),
        source: None,
    }
}

#[async_trait]
impl Engine for SqliteEngine {
    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        check_push_batch(&jobs, &self.limits)?;
        let registry = &self.inner.shared.registry;
        for j in &jobs {
            self.check_not_too_far(j.schedule)?;
            j.check_expiry(self.clock().now())?;
            registry.config_of(&j.topic).check_body(j, &self.limits)?;
        }
        self.write(move |tx| push::push(tx, &jobs)).await
    }

    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        let (topic, id) = (topic.clone(), id.clone());
        let clock = self.clock();
        let keep = self.retention(&topic);
        self.read(move |conn| read::get(conn, &topic, &id, clock.now_ms(), keep))
            .await
    }

    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        let (topic, id) = (topic.clone(), id.clone());
        self.write(move |tx| admin::delete(tx, &topic, &id)).await
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp> {
        when.validate()?;
        self.check_not_too_far(when)?;
        let (topic, id) = (topic.clone(), id.clone());
        self.write(move |tx| admin::reschedule(tx, &topic, &id, when))
            .await
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        req.validate()?;
        Ok(self.reserve_waiting(req, None).await?.1)
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        check_settle_and_reserve(settle, req)?;
        let items: Vec<Settlement> = settle.iter().map(Settlement::from_checked).collect();
        if req.max == 0 {
            let settled = self.write(move |tx| settling::settle(tx, &items)).await?;
            return Ok(SettledAndReserved {
                settled,
                deliveries: Vec::new(),
            });
        }
        let (settled, deliveries) = self.reserve_waiting(req, Some(items)).await?;
        Ok(SettledAndReserved {
            settled,
            deliveries,
        })
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases)?;
        let leases = leases.to_vec();
        self.write(move |tx| lease::ack_batch(tx, &leases)).await
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        nack.validate()?;
        let lease = lease.clone();
        let delay = nack.delay.map(delay_ms_ceil);
        let reason = nack.reason.unwrap_or_default();
        self.write(move |tx| lease::nack(tx, &lease, delay, &reason))
            .await
    }

    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()> {
        release.validate()?;
        let lease = lease.clone();
        let (delay, priority) = (release.delay.map(delay_ms_ceil), release.priority);
        self.write(move |tx| lease::release(tx, &lease, delay, priority))
            .await
    }

    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        if let Some(ttr) = ttr {
            check_ttr(ttr)?;
        }
        let lease = lease.clone();
        let ttr = ttr.map(duration_ms);
        self.write(move |tx| lease::touch(tx, &lease, ttr)).await
    }

    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        check_reason(bury.reason.as_deref())?;
        let lease = lease.clone();
        let (reason, priority) = (bury.reason.unwrap_or_default(), bury.priority);
        self.write(move |tx| lease::bury(tx, &lease, &reason, priority))
            .await
    }

    async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery> {
        let (topic, id) = (topic.clone(), id.clone());
        self.write(move |tx| reserve::reserve_job(tx, &topic, &id))
            .await
    }

    async fn bury_waiting(&self, topic: &Topic, id: &JobId, reason: Option<String>) -> Result<()> {
        check_reason(reason.as_deref())?;
        let (topic, id) = (topic.clone(), id.clone());
        let reason = reason.unwrap_or_default();
        self.write(move |tx| admin::bury_waiting(tx, &topic, &id, &reason))
            .await
    }

    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        let (topic, id) = (topic.clone(), id.clone());
        self.write(move |tx| admin::kick(tx, &topic, &id)).await
    }

    async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        // Each round is its own request. Jobs that die while the rounds run may be kicked
        // too; the rounds stop at the first short one, or after as many as the dead jobs
        // found at the start need, plus one, so a topic whose jobs keep dying cannot keep
        // this call going.
        let count_topic = topic.clone();
        let dead = self
            .read(move |conn| read::count(conn, &count_topic, JobState::Dead, 0))
            .await?;
        let mut rounds = dead / KICK_CHUNK as u64 + 1;
        let mut total = 0;
        loop {
            let t = topic.clone();
            let kicked = self
                .write(move |tx| admin::kick_some(tx, &t, KICK_CHUNK))
                .await?;
            total += kicked;
            rounds -= 1;
            if kicked < KICK_CHUNK as u64 || rounds == 0 {
                return Ok(total);
            }
        }
    }

    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        check_count("limit", limit)?;
        let key = ListKey::resume(after, state)?;
        let topic = topic.clone();
        let clock = self.clock();
        let keep = self.retention(&topic);
        self.read(move |conn| read::list(conn, &topic, (state, keep), limit, key, clock.now_ms()))
            .await
    }

    async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        let topic = topic.clone();
        let clock = self.clock();
        let keep = self.retention(&topic);
        let registry_topic = topic.clone();
        let mut stats = self
            .read(move |conn| read::stats(conn, &topic, clock.now_ms(), keep))
            .await?;
        stats.paused_until = self
            .inner
            .shared
            .registry
            .paused_until_of(&registry_topic, clock.now_ms())
            .map(Timestamp::from_millis);
        Ok(stats)
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        let mut topics = self.read(read::topics).await?;
        // A paused topic is listed, jobs or not: its pause lives in the registry.
        let now_ms = self.clock().now_ms();
        topics.extend(self.inner.shared.registry.paused_topics(now_ms));
        topics.sort();
        topics.dedup();
        Ok(topics)
    }

    async fn purge(&self, topic: &Topic) -> Result<u64> {
        let topic = topic.clone();
        self.write(move |tx| admin::purge(tx, &topic)).await
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock().now())
    }

    async fn topic_config(&self, topic: &Topic) -> Result<TopicConfig> {
        Ok(self.inner.shared.registry.config_of(topic))
    }

    async fn set_topic_config(&self, topic: &Topic, config: &TopicConfig) -> Result<()> {
        config.validate()?;
        let (topic, config) = (topic.clone(), *config);
        self.write(move |tx| admin::set_config(tx, &topic, &config))
            .await
    }

    async fn pause(&self, topic: &Topic, until: Option<Timestamp>) -> Result<()> {
        let until = until.unwrap_or(Timestamp::NEVER);
        let now = self.clock().now();
        if until != Timestamp::NEVER && until > now.plus(MAX_DELAY) {
            return Err(Error::invalid(
                "until",
                "the pause would end more than 10 years from now; pause without an end instead",
            ));
        }
        let topic = topic.clone();
        let until = until.as_millis();
        self.write(move |tx| admin::pause(tx, &topic, until)).await
    }

    /// None: every topic lives in one store, where a failure fails the whole call.
    fn unreachable(&self, _topics: &[Topic]) -> Vec<Topic> {
        Vec::new()
    }
}

#[async_trait]
impl Numbers for SqliteEngine {
    async fn claim_numbers(&self, topic: &Topic, count: u64) -> Result<u64> {
        check_claim(count)?;
        let topic = topic.clone();
        self.write(move |tx| numbers::claim(tx, &topic, count))
            .await
    }

    async fn number_topic(&self, n: u64) -> Result<Option<Topic>> {
        self.read(move |conn| numbers::topic_of(conn, n)).await
    }
}

#[async_trait]
impl Schedules for SqliteEngine {
    async fn put_schedule(&self, schedule: &JobSchedule) -> Result<u64> {
        schedule.validate()?;
        let s = schedule.clone();
        self.write(move |tx| schedules::put(tx, &s)).await
    }

    async fn schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        let name = name.clone();
        self.read(move |conn| schedules::get(conn, &name)).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.read(schedules::list).await
    }

    async fn delete_schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        let name = name.clone();
        self.write(move |tx| schedules::delete(tx, &name)).await
    }

    async fn schedule_pushed(
        &self,
        name: &ScheduleName,
        revision: u64,
        through: Timestamp,
    ) -> Result<bool> {
        let name = name.clone();
        self.write(move |tx| schedules::pushed(tx, &name, revision, through))
            .await
    }
}

#[async_trait]
impl Destinations for SqliteEngine {
    async fn put_destination(&self, topic: &Topic, doc: &str) -> Result<()> {
        check_destination_doc(doc)?;
        let (topic, doc) = (topic.clone(), doc.to_owned());
        self.write(move |tx| destinations::put(tx, &topic, &doc))
            .await
    }

    async fn destination(&self, topic: &Topic) -> Result<Option<StoredDestination>> {
        let topic = topic.clone();
        self.read(move |conn| destinations::get(conn, &topic)).await
    }

    async fn destinations(&self) -> Result<Vec<StoredDestination>> {
        self.read(destinations::list).await
    }

    async fn delete_destination(&self, topic: &Topic) -> Result<bool> {
        let topic = topic.clone();
        self.write(move |tx| destinations::delete(tx, &topic)).await
    }
}
