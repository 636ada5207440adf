//! [`ApiError`]: every failure as JSON `{ "error": { "code", "message", "field"?, "index"? } }`
//! with a stable code per typed error and the right status; a failure of one request field
//! names it (a JSON pointer) and, inside a list, the item's index. Internal details are
//! logged, never echoed.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq_core::Error;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The JSON body of every error response.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// One error: a stable machine-readable code and a message for people; for a bad field of
/// the request, which field and (inside a list) which item.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ErrorDetail {
    /// Stable code: `invalid_topic`, `invalid_id`, `invalid_delay`, `invalid_ttr`,
    /// `invalid_receipt`, `invalid_argument`, `invalid_request`, `body_too_large`,
    /// `unauthorized`, `read_only`, `not_found`, `lease_lost`, `already_exists`, `wrong_state`,
    /// `partitions_in_use`, `unavailable`, `engine_full`, `not_replicated`, `timeout`,
    /// `overloaded`, `method_not_allowed`, `internal`.
    pub code: String,
    /// What went wrong and what to do; starts with the field's JSON pointer when there is one.
    pub message: String,
    /// The JSON pointer (RFC 6901) of the request field at fault, e.g. `/jobs/1/delay_ms`;
    /// absent when the error is not about one field of the request body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The index of the list item at fault (a job of a batch push, a lease or receipt of a
    /// batch ack, an item of a reserve's `settle` or `topics`); absent when the error is not
    /// about one item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
}

/// An error answered to an HTTP client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
    index: Option<usize>,
}

impl ApiError {
    /// An error with an explicit status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            index: None,
        }
    }

    /// The same error, about the request field at `pointer` (a JSON pointer such as
    /// `/delay_ms`). Inside a list item ([`ApiError::in_item`]) the pointer is relative to
    /// the item.
    pub fn at(mut self, pointer: impl Into<String>) -> Self {
        self.field = Some(pointer.into());
        self
    }

    /// The same error, about item `index` of the list `list` of the request (a job of a
    /// batch push, a lease of a batch ack ...): the field's pointer gets `/<list>/<index>` in
    /// front of it.
    pub fn in_item(mut self, list: &str, index: usize) -> Self {
        let inner = self.field.take().unwrap_or_default();
        self.field = Some(format!("/{list}/{index}{inner}"));
        self.index = Some(index);
        self
    }

    /// The same error, about item `index` of a list of the request without a field at fault
    /// in it (a job of a batch push that could not be stored), with `more` after the
    /// message.
    pub fn about_item(mut self, index: usize, more: &str) -> Self {
        self.index = Some(index);
        self.message = format!("{}; {more}", self.message);
        self
    }

    /// 400 `invalid_request`: the request could not be read (bad JSON, unknown field ...).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 400 `invalid_argument`: a value is out of range.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    /// 400 `invalid_receipt`: a string that is not a receipt this server hands out.
    pub fn invalid_receipt(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_receipt", message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message, with the field's pointer and the item's index in front when known.
    pub fn message(&self) -> String {
        match (&self.field, self.index) {
            (Some(field), Some(i)) => format!("item {i}, {field}: {}", self.message),
            (Some(field), None) => format!("{field}: {}", self.message),
            (None, Some(i)) => format!("item {i}: {}", self.message),
            (None, None) => self.message.clone(),
        }
    }

    /// The JSON pointer of the request field at fault, if the error is about one.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The code, message, field and index, as the body carries them and as batch answers
    /// list them.
    pub fn detail(&self) -> ErrorDetail {
        ErrorDetail {
            code: self.code.to_string(),
            message: self.message(),
            field: self.field.clone(),
            index: self.index,
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
            Error::PartitionsInUse { .. } => (StatusCode::CONFLICT, "partitions_in_use"),
            // A full store is the operator's to fix, and the message says how: echo it.
            Error::Full { .. } => {
                crate::bursts::log(crate::bursts::Level::Warn, e.to_string());
                (StatusCode::SERVICE_UNAVAILABLE, "engine_full")
            }
            Error::NotReplicated { .. } => {
                crate::bursts::log(crate::bursts::Level::Warn, e.to_string());
                (StatusCode::SERVICE_UNAVAILABLE, "not_replicated")
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_store_is_503_engine_full_with_its_own_message() {
        let e = ApiError::from(Error::Full {
            message: "pushing: Redis reached its maxmemory".into(),
            source: None,
        });
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code(), "engine_full");
        let m = e.message();
        assert!(m.contains("Redis reached its maxmemory"), "{m}");
        assert!(m.contains("nothing was written"), "{m}");
    }
}
