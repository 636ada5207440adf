//! [`ServerConfig`]: what the HTTP layer enforces (limits, auth, long-poll bound).

use std::time::Duration;

/// Settings of the HTTP layer. The engine is configured separately.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Bearer tokens accepted on the API, each at least 16 characters; empty means no
    /// authentication. `/healthz`, `/readyz` and `/v1/openapi.json` stay open either way.
    pub tokens: Vec<String>,
    /// Leave `/metrics` open when tokens are set (for Prometheus scrapers without a token).
    pub metrics_public: bool,
    /// The largest request body in bytes (default 1 MiB; a job body is also checked against
    /// the engine's own limit).
    pub max_request_bytes: usize,
    /// The longest a reserve waits (default 30 s); a longer `wait_ms` is cut to it.
    pub max_wait: Duration,
    /// The longest any request may take (default 60 s; must be longer than `max_wait`).
    pub request_timeout: Duration,
    /// The most requests handled at once by the whole server, reserves aside; more get
    /// `503 overloaded` (default 1024). `/healthz` is not counted.
    pub concurrency: usize,
    /// The most reserves (long-polls) open at once, counted apart from `concurrency` so that
    /// waiting workers cannot starve pushes and acks; more get `503 overloaded` (default
    /// 1024).
    pub max_long_polls: usize,
    /// The dashboard at `/ui`: on (default), read-only, or off.
    pub ui: crate::UiMode,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tokens: Vec::new(),
            metrics_public: false,
            max_request_bytes: 1 << 20,
            max_wait: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            concurrency: 1024,
            max_long_polls: 1024,
            ui: crate::UiMode::On,
        }
    }
}

impl ServerConfig {
    /// Checks that the settings fit together.
    pub fn validate(&self) -> Result<(), String> {
        if self.request_timeout <= self.max_wait {
            return Err(format!(
                "the request timeout ({} ms) must be longer than the longest reserve wait ({} ms)",
                self.request_timeout.as_millis(),
                self.max_wait.as_millis()
            ));
        }
        if self.concurrency == 0 {
            return Err("concurrency must be at least 1".into());
        }
        if self.max_long_polls == 0 {
            return Err("max_long_polls must be at least 1".into());
        }
        if self.max_request_bytes < 1024 {
            return Err("max_request_bytes must be at least 1024".into());
        }
        if self.tokens.iter().any(|t| t.len() < 16) {
            return Err("every auth token must be at least 16 characters long".into());
        }
        Ok(())
    }
}
