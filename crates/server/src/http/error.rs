//! [`ApiError`]: every failure as JSON `{ "error": { "code", "message" } }` with a stable
//! code per typed error and the right status. Internal details are logged, never echoed.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq_core::Error;
use serde::Serialize;
use utoipa::ToSchema;

/// The JSON body of every error response.
#[derive(Serialize, ToSchema, Debug)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// One error: a stable machine-readable code and a message for people.
#[derive(Serialize, ToSchema, Debug)]
pub struct ErrorDetail {
    /// Stable code: `invalid_topic`, `invalid_id`, `invalid_delay`, `invalid_ttr`,
    /// `invalid_argument`, `invalid_request`, `body_too_large`, `unauthorized`, `not_found`,
    /// `lease_lost`, `already_exists`, `wrong_state`, `unavailable`, `timeout`, `overloaded`,
    /// `method_not_allowed`, `internal`.
    pub code: String,
    /// What went wrong and what to do.
    pub message: String,
}

/// An error answered to an HTTP client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with an explicit status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request`: the request could not be read (bad JSON, unknown field ...).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 400 `invalid_argument`: a value is out of range.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The code and message, as the body carries them and as batch answers list them.
    pub fn detail(&self) -> ErrorDetail {
        ErrorDetail {
            code: self.code.to_string(),
            message: self.message.clone(),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.detail(),
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, code) = match &e {
            Error::InvalidTopic { .. } => (StatusCode::BAD_REQUEST, "invalid_topic"),
            Error::InvalidId { .. } => (StatusCode::BAD_REQUEST, "invalid_id"),
            Error::InvalidDelay { .. } => (StatusCode::BAD_REQUEST, "invalid_delay"),
            Error::InvalidTtr { .. } => (StatusCode::BAD_REQUEST, "invalid_ttr"),
            Error::InvalidArgument { .. } => (StatusCode::BAD_REQUEST, "invalid_argument"),
            Error::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Error::LeaseLost { .. } => (StatusCode::CONFLICT, "lease_lost"),
            Error::AlreadyExists { .. } => (StatusCode::CONFLICT, "already_exists"),
            Error::WrongState { .. } => (StatusCode::CONFLICT, "wrong_state"),
            Error::Unavailable { .. } => {
                crate::bursts::log(crate::bursts::Level::Warn, e.to_string());
                return Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the queue's store is unavailable; retry later",
                );
            }
            _ => {
                crate::bursts::log(crate::bursts::Level::Error, format!("internal error: {e}"));
                return Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error; the server log has the details",
                );
            }
        };
        Self::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
