//! Operations endpoints outside the versioned API: health, readiness, metrics and the
//! OpenAPI document.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::AppState;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: the engine answers (503 when it does not).
pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.engine.now().await {
        Ok(_) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => ApiError::from(e).into_response(),
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
