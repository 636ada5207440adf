//! [`AppState`]: what every handler shares: the engine, the settings, the metrics, the
//! shutdown signal that ends open long-polls, the ack batcher and the reserve coalescers that
//! serve concurrent requests with shared engine calls, and the handle that wakes the
//! server's scheduler.

use std::sync::Arc;

use delayq_core::{Acker, Coalescers, Store, ack_batcher, run_acks};
use delayq_worker::{Scheduler, SchedulerConfig};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::ServerConfig;
use crate::metrics::Metrics;

/// Shared state of the HTTP server: one pointer, so that the clone every middleware and
/// handler of every request takes is one reference count (the fields are [`Shared`]'s).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What every handler shares, behind [`AppState`].
pub struct Shared {
    /// The engine.
    pub engine: Arc<dyn Store>,
    /// The HTTP settings.
    pub config: Arc<ServerConfig>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Cancelled when the server shuts down: open long-polls return empty at once.
    pub shutdown: CancellationToken,
    /// Acks of concurrent requests go to the engine together (one `ack_batch` per round
    /// trip); each request is answered as `Engine::ack` would answer it.
    pub acker: Acker,
    /// The first looks of concurrent reserves with nothing to settle go to the engine
    /// together (one `settle_and_reserve` per round trip for the same topics and mode).
    pub coalescers: Coalescers,
    /// Wakes the server's [`Scheduler`] (every server runs the schedules the engine keeps;
    /// see `delayq_worker::Scheduler`), after a schedule changed through this server.
    pub scheduler: Arc<Notify>,
}

impl AppState {
    /// State over an engine. Call it inside a Tokio runtime: it starts the task that sends
    /// batched acks, which ends when the last clone of the state is dropped, and the
    /// scheduler and the dashboard's sampler (`series`), which end when `shutdown` is
    /// cancelled.
    pub fn new(engine: Arc<dyn Store>, config: ServerConfig) -> Self {
        let (acker, acks) = ack_batcher();
        let batches = engine.clone();
        tokio::spawn(async move { run_acks(batches.as_ref(), acks).await });
        let shutdown = CancellationToken::new();
        let scheduler = Scheduler::new(engine.clone(), SchedulerConfig::default());
        let kicker = scheduler.kicker();
        let stop = shutdown.clone();
        tokio::spawn(async move { scheduler.run(stop.cancelled_owned()).await });
        let metrics = Arc::new(Metrics::new());
        let (sampled, stop) = (metrics.clone(), shutdown.clone());
        tokio::spawn(async move { sampled.series().run(stop).await });
        match delayq_push::Forwarder::new(engine.clone(), metrics.push().clone()) {
            Ok(forwarder) => {
                tokio::spawn(forwarder.run(shutdown.clone()));
            }
            Err(e) => {
                tracing::error!(error = %e, "push delivery is off: cannot start the forwarder")
            }
        }
        AppState(Arc::new(Shared {
            acker,
            coalescers: Coalescers::new(engine.clone()),
            engine,
            config: Arc::new(config),
            metrics,
            shutdown,
            scheduler: kicker,
        }))
    }
}
