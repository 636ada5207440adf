//! The delayq HTTP server: every operation of the contract as JSON under `/v1`, a long-poll
//! reserve, the OpenAPI document, Prometheus metrics, health and readiness.
//!
//! # Layout
//!
//! [`app`] is the whole axum `Router` (tests can drive it without a socket); [`serve`] runs
//! it until the shutdown future resolves ([`serve_tls`] over HTTPS).
//!
//! - `http/mod.rs`: the router: API v1 built with `utoipa-axum` so that every route is in the
//!   OpenAPI document served at `/v1/openapi.json` (a handler's name is its `operationId`, so
//!   names are unique across modules: `list_jobs`, `list_schedules`; `tests/openapi.rs` runs
//!   `openapi-spec-validator` on the served document); `/healthz`, `/readyz` (`http/ops.rs`:
//!   `Engine::readiness` within 80 ms, a `Readiness::NotReady` reason shown as the 503's
//!   message), `/metrics`; layers
//!   for auth, request body limit and timeout. `http/limit.rs`: load shedding with two shared
//!   semaphores, one for every request of the server and one for reserves (long-polls), so
//!   open long-polls never starve pushes and acks; a request with no permit left gets `503
//!   overloaded` at once.
//! - `http/jobs.rs`, `http/leases.rs`, `http/topics.rs`: one handler per operation.
//!   A topic is *known* when it is on `Engine::topics` (pushed to since it was created or
//!   last purged, or paused now) or has settings: `http/topics.rs` answers a purge or a
//!   resume of an unknown one 404 `not_found` (a typo, most likely) and changes nothing, and
//!   lets a pause of one through, saying `known: false`; the engines need no notion of it.
//!   `http/manage.rs`: an operator's actions on jobs no worker holds (issue 15), its wire
//!   types beside its handlers: `POST …/archive`, a bury without a lease
//!   (`Engine::bury_waiting`), a route of its own because a bury with a lease is a worker's
//!   answer for a delivery and fenced by its token, this one is not; and `POST
//!   /v1/topics/{topic}/bulk`, one action (kick, delete, run now, bury) on listed ids or on
//!   the jobs of a state that match a prefix (found by `http/scan.rs`), one engine call per
//!   job, 16 at a time; a job the action does not apply to is counted, an engine failure
//!   fails the request (what was done stays done; the jobs acted on have left the state, so
//!   sending it again with the cursor does the rest).
//!   `http/scan.rs`: the id-prefix filter of a listing, done in the server over
//!   `Engine::list` (the engines have no such query): it walks the state a page of 1000 at a
//!   time and answers an engine cursor where it stopped (reading the last page again up to the
//!   last match when it stops inside one).
//!   `http/schedules.rs`: `/v1/schedules` (issue 14), its wire types beside its handlers; a put
//!   or delete goes through `delayq_worker::put_schedule` / `delete_schedule` and wakes the
//!   server's `Scheduler`, which `AppState::new` starts (every server runs the schedules; it
//!   stops with the shutdown token).
//!   `POST /v1/reserve` settles the leases its `settle` lists and takes a first look in one
//!   engine call that does not wait (`Engine::settle_and_reserve`), so no settlement's answer
//!   is lost to a shutdown; only when that finds nothing does it long-poll. A reserve with
//!   nothing to settle (a client that reserves one job and acks it apart) takes its first look
//!   through `AppState::coalescers` (`delayq_core::Coalescers`): the requests for the same
//!   topics and mode that arrive while one such call is on its way share the next one, as the
//!   single acks share `ack_batch` calls (`AppState::acker`); a request that finds none on its
//!   way makes its own at once, in its own task, so a lone client pays no hop.
//! - `ui.rs` and `crates/server/ui/` (issue 15): the dashboard, `index.html`, `app.js` and
//!   `app.css` built into the binary with `include_str!` and served at `/ui` (open routes, like `/healthz`); plain
//!   JavaScript over the API, no build step. `UiMode` (`--ui on|read-only|off`); in read-only
//!   mode a middleware on the API refuses changes that carry the page's `x-delayq-ui` header.
//!   Tested in headless Chromium through chromedriver (`tests/ui.rs`), which also takes the
//!   README's screenshots (`docs/ui/`, with `scripts/screenshots.sh`). The overview's charts are
//!   inline SVG that `app.js` draws from `GET /v1/series`. The topic page filters on the server
//!   (`?prefix=`) and acts through `POST …/bulk` (on the selected ids, or on every match,
//!   repeating while the answer says more remain), never by walking the state itself.
//! - `http/series.rs`: `GET /v1/series`, the time series of `series.rs` as JSON, its wire
//!   types beside its handler.
//! - `http/dto.rs`: the JSON wire types and their conversions (bodies as UTF-8 or base64,
//!   times as RFC 3339 in one form, UTC with milliseconds and `+00:00`, beside their `_ms`
//!   twins; a delivery says each fact once: the attempt is `job.attempts`, the lease deadline
//!   `job.deadline`); `http/params.rs`: path and query parameters and the documented
//!   error responses; `http/receipt.rs`: a delivery's receipt, the unpadded base64url of
//!   (layout version, token, topic length, topic, id), which every lease operation takes in
//!   place of topic, id and token. It is not signed: it says nothing a client could not send in
//!   the other form, and the token is the fence.
//! - `http/error.rs`: `ApiError`, the one error shape `{"error": {"code", "message", "field"?,
//!   "index"?}}` with a stable code per `delayq_core::Error` variant; `field` is the JSON pointer
//!   of the request field at fault, `index` the item of a list (a job of a batch ...).
//!   `http/extract.rs`: `Json`, `Path`, `Query` extractors whose rejections are `ApiError`s;
//!   `Json` decodes with `serde_path_to_error`, and `http/fields.rs` turns a failure into the
//!   field's pointer, its own code and what it accepts (one table for every request, so a bad
//!   `delay_ms` is `invalid_delay` wherever it is and whatever is wrong with it).
//! - `listen.rs`: what plain and TLS serving share (both through `axum-server`). A connection
//!   must send a whole request head within the request timeout: the first from when it is
//!   accepted (before the protocol is known), each later one from when the previous answer went
//!   out. A half-sent or trickled head, or an idle keep-alive connection, is closed then (hyper
//!   answers 408); once the head is in, the router's timeout bounds the rest (a body that never
//!   comes is answered `503 timeout`). Every HTTP/1 answer announces that idle limit
//!   (`keep-alive: timeout=N`, the request timeout in whole seconds), so a client that honours
//!   it (Node's `fetch`) drops the connection before the server does instead of sending a
//!   request into the close (`answers_announce_how_long_an_idle_connection_stays_open` in
//!   `crates/server/tests/api/limits.rs`). On shutdown the server stops accepting, cancels the
//!   shutdown token (open long-polls answer empty) and waits for in-flight requests for at most
//!   the request timeout. There is no cap of its own on open connections: at the process's
//!   file limit, accepting backs off and new clients wait in the kernel's backlog; request load
//!   is capped by the two semaphores of `http/limit.rs`. Tested by `crates/cli/tests/limits.rs`
//!   (2,000 idle connections, 600 slow clients and 1,000 long-polls at once, three rounds:
//!   every slow client cut at the timeout, `/healthz` answering, memory and descriptors
//!   bounded). HTTP/2 connections are bounded until their first request, not while idle after.
//! - `tls.rs`: `serve_tls` (HTTPS with rustls through `axum-server`) and `reload_on_sighup`: the
//!   certificate and key are read again on SIGHUP; new connections get the new certificate, and
//!   one that does not load leaves the old in use.
//! - `bursts.rs`: repeated errors (an outage fails every request the same way) are logged
//!   once, then counted, one line per 10 s while they last. `build.rs` (with the crate's build
//!   script): version, git commit and build date.
//! - `auth.rs`: bearer tokens compared in constant time; `metrics.rs`: counters of what this
//!   server did, histograms of lateness and time reserved, per-state gauges and the engine's
//!   expired-lease count read at each scrape (prometheus-client, one registry per server; the
//!   per-topic series follow the engine's topic list), HTTP requests by route template and
//!   status (`http/observe.rs`), the build; `process.rs`: the standard process metrics, read
//!   from `/proc` at each scrape (`procfs`).
//! - `state.rs`, `config.rs`: `AppState` (engine, settings, metrics, shutdown token, and the
//!   `Acker` through which `POST …/ack` goes, so that the acks of concurrent requests share
//!   `ack_batch` calls; its task ends with the last clone of the state), `ServerConfig`.
//! - `series.rs`: the dashboard's time series, per topic what this server pushed, delivered,
//!   acked and sent to dead and its deliveries' lateness histogram (the buckets of `/metrics`),
//!   in two rings per topic (60 one-second samples, 60 one-minute sums) for at most 256 topics
//!   (the least recently active dropped first; a topic that leaves the engine's list goes with
//!   its Prometheus series). `Metrics`' methods feed it, so the two never disagree. Its sampler,
//!   a task `AppState::new` starts and the shutdown token stops, files the live counts at the
//!   end of each second while there are any and sleeps while there are none.
//!
//! The engine is any [`delayq_core::Engine`]; [`serve`] (or [`serve_tls`]) runs the app until a
//! shutdown future resolves, then lets open long-polls answer empty and in-flight requests finish.
//!
//! # Invariants
//!
//! **Architecture Invariant:** a request looks at a bounded number of jobs: a filtered listing
//! at most 10,000, a bulk action at most 10,000, whatever the topic holds.
//!
//! **Architecture Invariant:** no client holds a connection without sending a request within
//! the request timeout.
//!
//! **Architecture Invariant:** the dashboard's time series is per server, since it started:
//! kept in the server's memory, bounded, never stored in the engine.
//!
//! **Architecture Invariant:** no serde message reaches a client: decode errors are answered
//! in `http/fields.rs`'s words.
//!
//! **Architecture Invariant:** `delayq-server` is the only crate with JSON wire types; core
//! types never derive `Serialize`.
//!
//! **Architecture Invariant:** internal details are logged, never echoed: `Internal` and
//! `Unavailable` errors answer a fixed message; the log has the cause.
//!
//! **Architecture Invariant:** a long-poll never outlives the server: the request timeout is
//! checked to be longer than the longest wait, and shutdown cancels the token every open
//! reserve waits on, so it answers an empty list at once.
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
