//! Driver and pool errors onto [`delayq_core::Error`]: a connection that cannot be made or
//! is lost is [`Error::Unavailable`] (retry), a full disk [`Error::Full`], anything else
//! [`Error::Internal`] naming what was being done.

use delayq_core::Error;
use tokio_postgres::error::SqlState;

/// A driver error while doing `what`.
pub(crate) fn db_err(what: &str, e: tokio_postgres::Error) -> Error {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::DISK_FULL
            || *code == SqlState::OUT_OF_MEMORY
            || *code == SqlState::PROGRAM_LIMIT_EXCEEDED
        {
            return Error::full(format!("{what}: PostgreSQL refused the write"), e);
        }
        if retryable(code) {
            return Error::unavailable(format!("{what}: PostgreSQL answered {}", code.code()), e);
        }
        return Error::Internal(format!(
            "{what}: PostgreSQL answered {} ({})",
            code.code(),
            db.message()
        ));
    }
    Error::unavailable(format!("{what}: the PostgreSQL connection failed"), e)
}

/// Codes after which the same call may succeed: the server is shutting down or starting,
/// the connection or the transaction was cut, or a lock or serialisation conflict.
fn retryable(code: &SqlState) -> bool {
    let c = code.code();
    c.starts_with("08") // connection exceptions
        || c.starts_with("57P") // operator intervention: shutdown, crash, cannot connect now
        || c.starts_with("53") // insufficient resources (too many connections ...)
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::LOCK_NOT_AVAILABLE
        || *code == SqlState::QUERY_CANCELED
}

/// A pool error while doing `what`: no connection could be had.
pub(crate) fn pool_err(what: &str, e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(e) => db_err(what, e),
        other => Error::unavailable(
            format!("{what}: no PostgreSQL connection could be had from the pool"),
            other,
        ),
    }
}

/// A refusal raised by one of the engine's functions (`SQLSTATE DQ0xx`, lib.sql): its code
/// and the numbers of its detail, or `None` for any other error.
pub(crate) fn refusal(e: &tokio_postgres::Error) -> Option<(&str, Vec<u64>)> {
    let db = e.as_db_error()?;
    let code = db.code().code();
    if !code.starts_with("DQ") {
        return None;
    }
    let numbers = db
        .detail()
        .unwrap_or_default()
        .split(' ')
        .filter_map(|n| n.parse().ok())
        .collect();
    Some((code, numbers))
}
