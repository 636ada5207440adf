//! [`Worker`]: one handler over one or more topics; `run` drives the fetch loop until the
//! shutdown future completes, shuts down gracefully, then returns a [`Report`].

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use delayq_core::{Engine, Reserve, Result, Topic};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use crate::settle::RELEASE_BUDGET;
use crate::shared::Shared;
use crate::{Handler, Payload, Report, WorkerConfig, fetch, shutdown};

/// A worker: runs a [`Handler`] for the jobs of one or more topics of an engine, at most
/// [`WorkerConfig::concurrency`] at a time.
///
/// Generic over the engine (`E: Engine`): calls are dispatched statically, and wrappers
/// (metrics, fault injection in tests) are plain engines. The worker keeps the engine in
/// an `Arc` with its other shared state, so the engine need not be `Clone`.
///
/// ```no_run
/// use delayq_core::Topic;
/// use delayq_redis::{RedisConfig, RedisEngine};
/// use delayq_worker::{Job, JobError, Json, Worker, WorkerConfig};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct CancelOrder { order_id: u64 }
///
/// async fn cancel_order(job: Job<Json<CancelOrder>>) -> Result<(), JobError> {
///     println!("cancelling order {} (attempt {})", job.payload().order_id, job.attempt());
///     Ok(())
/// }
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = RedisEngine::connect(RedisConfig::new("redis://127.0.0.1:6379")).await?;
/// let worker = Worker::with_config(
///     engine,
///     [Topic::new("orders.cancel")?],
///     WorkerConfig::default().with_concurrency(16),
///     cancel_order,
/// )?;
/// let report = worker.run(async { tokio::signal::ctrl_c().await.ok(); }).await;
/// println!("{} acked, {} released", report.acked, report.released.len());
/// # Ok(()) }
/// ```
pub struct Worker<E, P, H> {
    engine: E,
    topics: Vec<Topic>,
    config: WorkerConfig,
    handler: H,
    payload: PhantomData<fn() -> P>,
}

impl<E, P, H> Worker<E, P, H>
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    /// A worker with the default configuration ([`WorkerConfig::default`]).
    pub fn new(engine: E, topics: impl IntoIterator<Item = Topic>, handler: H) -> Result<Self> {
        Self::with_config(engine, topics, WorkerConfig::default(), handler)
    }

    /// A worker with a configuration. Fails with `InvalidConfig` for out-of-range settings
    /// and `InvalidArgument` for an empty or repeated topic list (1 to 64 topics).
    pub fn with_config(
        engine: E,
        topics: impl IntoIterator<Item = Topic>,
        config: WorkerConfig,
        handler: H,
    ) -> Result<Self> {
        config.validate()?;
        let topics: Vec<Topic> = topics.into_iter().collect();
        base_request(&topics, &config).validate()?;
        Ok(Worker {
            engine,
            topics,
            config,
            handler,
            payload: PhantomData,
        })
    }

    /// The topics this worker takes jobs from.
    pub fn topics(&self) -> &[Topic] {
        &self.topics
    }

    /// The configuration.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// Runs until `shutdown` completes, then shuts down gracefully and reports.
    ///
    /// Shutdown stops reserving at once (an open long-poll is abandoned) and gives the
    /// jobs waiting in the worker's buffer back to the engine at once; it waits up to
    /// [`WorkerConfig::grace`] for running handlers to finish and settles them as usual,
    /// then fires the tokens of those still running. A handler that then returns `Ok`
    /// within 1 s is acked; the others are stopped and their jobs released (ready again at
    /// once for another worker, attempt not counted). Pass `token.cancelled_owned()` to
    /// drive it with a [`crate::CancellationToken`].
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Report {
        let base = base_request(&self.topics, &self.config);
        tracing::info!(
            topics = ?self.topics,
            concurrency = self.config.concurrency,
            prefetch = self.config.prefetch,
            mode = ?self.config.mode,
            "worker started"
        );
        let shared = Arc::new(Shared::new(self.engine, self.handler, self.config));
        let stop = CancellationToken::new();
        let fetch = fetch::run::<E, P, H>(Arc::clone(&shared), base, stop.clone());
        let drain = async {
            shutdown.await;
            stop.cancel();
            shutdown::drain(&shared).await
        };
        tokio::pin!(fetch, drain);
        // The fetch loop sends the supervisors' outcomes, so it runs beside the drain; it
        // ends by itself once the last supervisor is done.
        let mut fetched = false;
        let unfinished = loop {
            tokio::select! {
                unfinished = &mut drain => break unfinished,
                () = &mut fetch, if !fetched => fetched = true,
            }
        };
        if !fetched && timeout(RELEASE_BUDGET, fetch).await.is_err() {
            tracing::error!(
                "shutdown: some outcomes could not be sent in time; their leases will run out"
            );
        }
        let report = shared.tally.report(unfinished);
        tracing::info!(
            acked = report.acked,
            retried = report.retried,
            buried = report.buried,
            failed = report.failed,
            dropped = report.dropped,
            released = report.released.len(),
            unreachable = report.unreachable.len(),
            "worker stopped"
        );
        report
    }
}

fn base_request(topics: &[Topic], config: &WorkerConfig) -> Reserve {
    Reserve::topics(topics.iter().cloned())
        .wait(config.wait)
        .mode(config.mode)
}
