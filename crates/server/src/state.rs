//! [`AppState`]: what every handler shares: the engine, the settings, the metrics and the
//! shutdown signal that ends open long-polls.

use std::sync::Arc;

use delayq_core::Engine;
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
}

impl AppState {
    /// State over an engine.
    pub fn new(engine: Arc<dyn Engine>, config: ServerConfig) -> Self {
        AppState {
            engine,
            config: Arc::new(config),
            metrics: Arc::new(Metrics::new()),
            shutdown: CancellationToken::new(),
        }
    }
}
