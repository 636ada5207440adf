//! What the library's functions answer besides rows, in one enum: the status column of the
//! functions on one job (lib.sql's conventions: 0 OK, 1 NOT_FOUND, 2 LEASE_LOST,
//! 3 WRONG_STATE) and the refusals raised as `SQLSTATE DQ0xx` (each file's header says
//! which of its functions raise which, and what the DETAIL holds). What each means for a
//! caller is decided by the operation, in `ops`.

use delayq_core::{Error, Result};

/// A status of a library function: answered as the `status` column, or raised as a
/// refusal.
///
/// - `Ok`, `NotFound`, `LeaseLost`, `WrongState`: the `status` column (`0..3`) of lease.sql's
///   functions (ack, nack, release, touch, bury; every status) and of admin.sql's functions
///   on one job by id (kick, reschedule, bury_waiting, reserve_job; never `LeaseLost`).
/// - `TooFar` (DQ004): an absolute time more than the longest delay ahead (push.sql,
///   admin.sql's reschedule, topics.sql's pause).
/// - `BodyTooLarge` (DQ005): a body over the topic's limit (push.sql).
/// - `ExpiryNotAfterDue` (DQ006): an absolute expiry not after the job's due time (push.sql).
/// - `PartitionsInUse` (DQ007): a partition count change while the topic holds jobs
///   (topics.sql's set_topic_config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Ok,
    NotFound,
    LeaseLost,
    WrongState,
    TooFar,
    BodyTooLarge,
    ExpiryNotAfterDue,
    PartitionsInUse,
}

impl Status {
    /// The status of a function's `status` column; `operation` names the function for an
    /// answer it cannot give.
    pub(crate) fn from_code(code: i16, operation: &str) -> Result<Self> {
        Ok(match code {
            0 => Status::Ok,
            1 => Status::NotFound,
            2 => Status::LeaseLost,
            3 => Status::WrongState,
            other => {
                return Err(Error::Internal(format!(
                    "{operation} answered status {other}"
                )));
            }
        })
    }

    /// The status a refusal's SQLSTATE names, or `None` for a code the library does not
    /// raise.
    fn from_sqlstate(code: &str) -> Option<Self> {
        Some(match code {
            "DQ004" => Status::TooFar,
            "DQ005" => Status::BodyTooLarge,
            "DQ006" => Status::ExpiryNotAfterDue,
            "DQ007" => Status::PartitionsInUse,
            _ => return None,
        })
    }
}

/// A refusal raised by one of the library's functions: its status and the numbers of its
/// DETAIL, in order.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: Status,
    pub(crate) numbers: Vec<u64>,
}

/// The refusal `e` is, or `None` for any other error (the caller maps it with
/// [`crate::error::db_err`]).
pub(crate) fn refusal(e: &tokio_postgres::Error) -> Option<Refusal> {
    let db = e.as_db_error()?;
    let status = Status::from_sqlstate(db.code().code())?;
    let numbers = db
        .detail()
        .unwrap_or_default()
        .split(' ')
        .filter_map(|n| n.parse().ok())
        .collect();
    Some(Refusal { status, numbers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_column_is_zero_to_three_and_nothing_else() {
        let codes: Vec<_> = (0..4).map(|c| Status::from_code(c, "ack").ok()).collect();
        assert_eq!(
            codes,
            [
                Some(Status::Ok),
                Some(Status::NotFound),
                Some(Status::LeaseLost),
                Some(Status::WrongState)
            ]
        );
        assert!(matches!(
            Status::from_code(4, "ack"),
            Err(Error::Internal(m)) if m == "ack answered status 4"
        ));
    }

    #[test]
    fn refusals_are_dq004_to_dq007() {
        assert_eq!(Status::from_sqlstate("DQ004"), Some(Status::TooFar));
        assert_eq!(Status::from_sqlstate("DQ005"), Some(Status::BodyTooLarge));
        assert_eq!(
            Status::from_sqlstate("DQ006"),
            Some(Status::ExpiryNotAfterDue)
        );
        assert_eq!(
            Status::from_sqlstate("DQ007"),
            Some(Status::PartitionsInUse)
        );
        assert_eq!(Status::from_sqlstate("DQ001"), None);
        assert_eq!(Status::from_sqlstate("23505"), None);
    }
}
