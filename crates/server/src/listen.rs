//! How connections are served, over plain TCP and over TLS alike: the timeouts that cut a
//! client that never finishes a request head, and the graceful shutdown.
//!
//! A connection must send a whole request head within the request timeout: its first one
//! from when it is accepted (before hyper even knows the protocol), each later one from when
//! the previous answer went out, so an idle keep-alive connection is closed after the
//! request timeout too. A client that sends half a head, or trickles it a byte at a time, is
//! cut then (hyper answers `408` as it closes); once the head is in, the request timeout of
//! the router bounds the rest (a body that never comes is answered `503 timeout`).
//!
//! Every HTTP/1 answer says so (`Keep-Alive: timeout=N`, N the request timeout in whole
//! seconds, as Node's own server does), so that a client drops an idle connection before the
//! server closes it rather than sending its next request into the close: with a request
//! timeout shorter than a client's own idle timeout (4 s in Node's `fetch`), a request could
//! otherwise fail with "other side closed" without having reached the server.

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use axum_server::Server;

use crate::AppState;

/// `server` with its connections bounded by the request timeout of `state`, stopping on
/// `shutdown`: it then stops accepting, cancels the state's shutdown token (open
/// long-polls answer an empty list), and lets in-flight requests finish, at most the request
/// timeout.
pub(crate) fn bounded<Acc>(
    server: Server<SocketAddr, Acc>,
    state: &AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Server<SocketAddr, Acc> {
    let timeout = state.config.request_timeout;
    let token = state.shutdown.clone();
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        token.cancel();
        stopper.graceful_shutdown(Some(timeout));
    });
    let mut server = server.handle(handle).first_request_timeout(timeout);
    // axum-server installs hyper's timer, which the header timeout needs.
    server.http_builder().http1().header_read_timeout(timeout);
    server
}

/// The `Keep-Alive` value that announces `request_timeout` as the idle timeout of a
/// connection, in whole seconds rounded down (a hint must not promise more than the server
/// keeps: `timeout=0` tells a client not to reuse the connection at all).
pub(crate) fn keep_alive_hint(request_timeout: std::time::Duration) -> HeaderValue {
    // Digits and ASCII only: always a valid header value.
    HeaderValue::try_from(format!("timeout={}", request_timeout.as_secs()))
        .unwrap_or(HeaderValue::from_static("timeout=0"))
}

/// Adds `hint` as `Keep-Alive` to the answers of HTTP/1 requests whose connection stays
/// open (HTTP/2 forbids the header).
pub(crate) async fn announce_idle_timeout(
    State(hint): State<HeaderValue>,
    request: Request,
    next: Next,
) -> Response {
    let http1 = matches!(request.version(), Version::HTTP_10 | Version::HTTP_11);
    let mut response = next.run(request).await;
    let closing = response
        .headers()
        .get(header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    if http1 && !closing {
        response
            .headers_mut()
            .insert(HeaderName::from_static("keep-alive"), hint);
    }
    response
}
