//! Load shedding: one limit on the requests the whole server handles at once, and a separate
//! one on reserves (long-polls), so that open long-polls cannot starve pushes and acks.
//!
//! Each limit is one semaphore shared by every route: a request takes a permit before it is
//! handled and gives it back when it is answered; with no permit left it is answered at once
//! with `503 overloaded`. `/healthz` takes none, so that a liveness probe never fails
//! because the server is busy.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;

/// The two pools of permits.
#[derive(Clone)]
pub struct Slots {
    requests: Arc<Semaphore>,
    long_polls: Arc<Semaphore>,
}

impl Slots {
    /// `requests` permits for every request but reserves, `long_polls` for reserves.
    pub fn new(requests: usize, long_polls: usize) -> Self {
        Slots {
            requests: Arc::new(Semaphore::new(requests)),
            long_polls: Arc::new(Semaphore::new(long_polls)),
        }
    }
}

/// The path of the long-poll reserve, which counts against its own limit.
const RESERVE: &str = "/v1/reserve";

/// Middleware: holds a permit of the request's pool while the request is handled.
pub async fn shed(State(slots): State<Slots>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path == "/healthz" {
        return next.run(request).await;
    }
    let long_poll = path == RESERVE;
    let pool = if long_poll {
        &slots.long_polls
    } else {
        &slots.requests
    };
    let Ok(_permit) = pool.clone().try_acquire_owned() else {
        let what = if long_poll {
            "open reserves (long-polls)"
        } else {
            "concurrent requests"
        };
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            format!("the server is handling its maximum of {what}; retry shortly"),
        )
        .into_response();
    };
    next.run(request).await
}
