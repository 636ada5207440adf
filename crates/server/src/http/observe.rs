//! Middleware that counts every answered request and its latency, by method, route
//! template and status (`delayq_http_requests_total`, `delayq_http_request_duration_seconds`).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::AppState;

/// Records the request in the metrics once it is answered.
pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let response = next.run(request).await;
    state.metrics.http(
        method.as_str(),
        route.as_deref(),
        response.status().as_u16(),
        start.elapsed(),
    );
    response
}
