//! The delayq HTTP server: every operation of the contract as JSON under `/v1`, a long-poll
//! reserve, the OpenAPI document, Prometheus metrics, health and readiness.
//!
//! # Layout
//!
//! - `http`: the router ([`app`]); one module per resource (`jobs`, `leases`, `topics`),
//!   `dto` (the only place with JSON wire types), `error` ([`http::error::ApiError`], the one
//!   error shape), `extract` (extractors whose rejections are `ApiError`s), `fields` (what each
//!   request field accepts, and decode errors in those words), `receipt` (one string per
//!   delivery that names its lease), `params` (path and query parameters and the documented
//!   error responses), `ops` (health, metrics), `limit` (one limit on concurrent requests for
//!   the whole server, another on open reserves), `series` (`GET /v1/series`).
//! - `auth`: optional bearer tokens, compared in constant time.
//! - `bursts`: repeated errors logged once, then counted (one line per window).
//! - `metrics`: counters, histograms (lateness, time reserved), per-state gauges, HTTP
//!   requests by route and status, the build; `process`: CPU, memory, file descriptors.
//! - `series`: the dashboard's time series, the last hour of what this server did per topic in
//!   memory (a ring buffer fed by `metrics`, filed each second by a sampler task).
//! - `state`: [`AppState`]; `config`: [`ServerConfig`]; `build`: version, commit and build
//!   date.
//! - `tls`: HTTPS with rustls ([`serve_tls`]), the certificate reloaded on SIGHUP.
//! - `listen`: what plain and TLS serving share: a connection that does not send a whole
//!   request head within the request timeout is closed; graceful shutdown.
//!
//! The engine is any [`delayq_core::Engine`]; [`serve`] (or [`serve_tls`]) runs the app until a
//! shutdown future resolves, then lets open long-polls answer empty and in-flight requests finish.
#![deny(missing_docs)]

mod auth;
pub mod build;
mod bursts;
mod config;
pub mod http;
mod listen;
mod metrics;
mod process;
mod series;
mod state;
mod tls;
pub mod ui;

use std::future::Future;

pub use config::ServerConfig;
pub use http::{app, openapi_json};
pub use state::{AppState, Shared};
pub use tls::{Tls, TlsError, reload_on_sighup, serve_tls};
pub use ui::UiMode;

/// Serves `state` on `listener` until `shutdown` resolves, then stops accepting, ends open
/// long-polls (they answer an empty list) and waits for in-flight requests, at most the
/// request timeout.
///
/// A connection that does not send a whole request head within the request timeout (a
/// client that stalls halfway, or an idle keep-alive connection) is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let server = axum_server::from_tcp(listener.into_std()?)?;
    listen::bounded(server, &state, shutdown)
        .serve(app(state).into_make_service())
        .await
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
