//! What a failed command is: the exit codes, [`Failure`] (a failure with its exit code and
//! the stable code `--json` prints), and any error as `--json` prints it, in the server's
//! error body (`delayq_server::http::error`). It names no other module of the crate: the HTTP client (`client`), the TLS set-up (`tls`) and the
//! subcommands all build their failures from here.

use std::fmt;

use delayq_server::http::error::{ErrorBody, ErrorDetail};
use serde_json::Value;

/// Exit codes, documented in `delayq --help`.
pub mod exit {
    /// Any other error.
    pub const ERROR: i32 = 1;
    /// Bad usage (clap's own errors end with this code too).
    pub const USAGE: i32 = 2;
    /// The job (or route) does not exist.
    pub const NOT_FOUND: i32 = 3;
    /// Lease lost, wrong state, partitions in use (and `already_exists`, which no route
    /// answers today).
    pub const CONFLICT: i32 = 4;
    /// The server cannot be reached, its store is unavailable or full (`engine_full`), or a
    /// write was not acknowledged by the replicas asked for (`not_replicated`): retry later.
    pub const UNAVAILABLE: i32 = 5;
    /// `delayq reserve` got no job (none was due within --wait): not an error, but not a
    /// token either, so `token=$(delayq reserve … -q)` stops a `set -e` script.
    pub const NO_JOB: i32 = 6;
}

/// A failed command, with the exit code it should end with.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: i32,
    /// The stable code `--json` prints: the server's (`not_found`, `lease_lost` ...) or the
    /// command's own (`usage`, `unreachable`, `tls`, `error`).
    pub kind: String,
    /// What went wrong and what to do.
    pub message: String,
    /// The server's `field`, when it named the request field at fault.
    pub field: Option<String>,
    /// The server's `index`, when that field is in an item of a list.
    pub index: Option<usize>,
    /// Whether the server said it (then the text starts with its code).
    pub from_server: bool,
}

impl Failure {
    /// A failure of the command itself.
    pub fn new(code: i32, kind: &str, message: impl Into<String>) -> Self {
        Failure {
            code,
            kind: kind.to_string(),
            message: message.into(),
            field: None,
            index: None,
            from_server: false,
        }
    }

    /// Bad usage (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure::new(exit::USAGE, "usage", message)
    }

    /// The failure as `--json` prints it on standard error: the shape of the server's
    /// errors, `{"error": {"code", "message", "field"?, "index"?}}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!(ErrorBody {
            error: ErrorDetail {
                code: self.kind.clone(),
                message: self.message.clone(),
                field: self.field.clone(),
                index: self.index,
            },
        })
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.from_server {
            write!(f, "{}: {}", self.kind, self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Failure {}

/// Any error of a command as `--json` prints it: a [`Failure`] as itself, anything else as
/// `{"error": {"code": "error", "message"}}`.
pub fn error_json(e: &anyhow::Error) -> Value {
    match e.downcast_ref::<Failure>() {
        Some(f) => f.to_json(),
        None => serde_json::json!({ "error": { "code": "error", "message": format!("{e:#}") } }),
    }
}
