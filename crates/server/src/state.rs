//! [`AppState`]: what every handler shares: the engine, the settings, the metrics, the
//! shutdown signal that ends open long-polls, and the ack batcher that coalesces the acks of
//! concurrent requests.

use std::sync::Arc;

use delayq_core::{Acker, Engine, ack_batcher, run_acks};
use tokio_util::sync::CancellationToken;

use crate::ServerConfig;
use crate::metrics::Metrics;

/// Shared state of the HTTP server. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub engine: Arc<dyn Engine>,
    /// The HTTP settings.
    pub config: Arc<ServerConfig>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Cancelled when the server shuts down: open long-polls return empty at once.
    pub shutdown: CancellationToken,
    /// Acks of concurrent requests go to the engine together (one `ack_batch` per round
    /// trip); each request is answered as `Engine::ack` would answer it.
    pub acker: Acker,
}

impl AppState {
    /// State over an engine. Call it inside a Tokio runtime: it starts the task that sends
    /// batched acks, which ends when the last clone of the state is dropped.
    pub fn new(engine: Arc<dyn Engine>, config: ServerConfig) -> Self {
        let (acker, acks) = ack_batcher();
        let batches = engine.clone();
        tokio::spawn(async move { run_acks(batches.as_ref(), acks).await });
        AppState {
            acker,
            engine,
            config: Arc::new(config),
            metrics: Arc::new(Metrics::new()),
            shutdown: CancellationToken::new(),
        }
    }
}
