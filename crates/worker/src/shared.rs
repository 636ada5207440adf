//! [`Shared`]: what the fetch loop, every delivery's supervisor and the shutdown share.
//! It imports none of them, so they do not import each other in a ring.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::WorkerConfig;
use crate::report::Tally;
use crate::run::InPlace;

/// The state shared by the fetch loop, the supervisors and the shutdown.
pub(crate) struct Shared<E, H> {
    pub(crate) engine: E,
    pub(crate) handler: H,
    pub(crate) config: WorkerConfig,
    pub(crate) tally: Tally,
    /// One permit per handler slot: a supervisor holds one from the moment the fetch loop
    /// hands it a job until its handler task has ended.
    pub(crate) slots: Arc<Semaphore>,
    /// The per-delivery supervisors (futures the fetch loop drives), for the shutdown to
    /// wait for.
    pub(crate) supervisors: TaskTracker,
    /// The handler tasks (user code not done in its first poll).
    pub(crate) handlers: TaskTracker,
    /// Whether handlers are polled once in place before they get a task.
    pub(crate) in_place: InPlace,
    /// Fired when the grace period is over: supervisors stop their handlers and release.
    pub(crate) hard_stop: CancellationToken,
}

impl<E, H> Shared<E, H> {
    /// The shared state of a worker that has not started anything yet.
    pub(crate) fn new(engine: E, handler: H, config: WorkerConfig) -> Self {
        Shared {
            slots: Arc::new(Semaphore::new(config.concurrency)),
            engine,
            handler,
            config,
            tally: Tally::default(),
            supervisors: TaskTracker::new(),
            handlers: TaskTracker::new(),
            in_place: InPlace::default(),
            hard_stop: CancellationToken::new(),
        }
    }

    /// Handlers running now (slots taken).
    pub(crate) fn running(&self) -> usize {
        self.config
            .concurrency
            .saturating_sub(self.slots.available_permits())
    }
}
