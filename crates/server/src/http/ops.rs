//! Operations endpoints outside the versioned API: health, readiness, metrics and the
//! OpenAPI document.

use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use delayq_core::Readiness;

use super::error::ApiError;
use crate::AppState;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// How long `/readyz` waits for the engine. A store that needs longer to answer is not
/// ready to serve; and a readiness probe must get its answer in time while the store is
/// down and the client is busy reconnecting.
const READY_WAIT: Duration = Duration::from_millis(80);

/// `GET /readyz`: 200 `ready` when the engine's store can serve calls
/// ([`delayq_core::Engine::readiness`]: one Redis node, the embedded engine and PostgreSQL
/// answer; a Redis Cluster also reports `cluster_state:ok`), within [`READY_WAIT`]. Otherwise
/// 503 `unavailable` with why in the message: no answer in time, the store unavailable, or
/// what the store answered (a Redis Cluster that is down, and which of its slots lack a
/// primary).
pub async fn readyz(State(state): State<AppState>) -> Response {
    match tokio::time::timeout(READY_WAIT, state.engine.readiness()).await {
        Ok(Ok(Readiness::Ready)) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Ok(Readiness::NotReady { reason })) => {
            crate::bursts::log(crate::bursts::Level::Warn, format!("not ready: {reason}"));
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", reason).into_response()
        }
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "the queue's store did not answer within {} ms; retry later",
                READY_WAIT.as_millis()
            ),
        )
        .into_response(),
    }
}

/// `GET /metrics`: Prometheus (OpenMetrics) text.
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let body = state.metrics.render(state.engine.as_ref()).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response())
}
