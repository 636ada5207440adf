//! How connections are served, over plain TCP and over TLS alike: the timeouts that cut a
//! client that never finishes a request head, and the graceful shutdown.
//!
//! A connection must send a whole request head within the request timeout: its first one
//! from when it is accepted (before hyper even knows the protocol), each later one from when
//! the previous answer went out, so an idle keep-alive connection is closed after the
//! request timeout too. A client that sends half a head, or trickles it a byte at a time, is
//! cut then (hyper answers `408` as it closes); once the head is in, the request timeout of
//! the router bounds the rest (a body that never comes is answered `503 timeout`).

use std::future::Future;
use std::net::SocketAddr;

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
