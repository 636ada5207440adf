//! The one error type of the contract: every engine returns it, every message says what to do.

use crate::{JobId, JobState, Topic};

/// A boxed error from a lower layer (a Redis client, SQLite, the OS).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The result of every engine operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything an engine operation can fail with.
///
/// The variants are distinct so that callers can match on them: a worker retries on
/// [`Error::Unavailable`] and [`Error::Full`], gives up a job on [`Error::LeaseLost`], and reports the
/// `Invalid*` variants to whoever sent the input. Bad input is rejected before anything
/// is written, so an `Invalid*` error or [`Error::BodyTooLarge`] always means "nothing changed".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The topic name is empty, too long or has a character outside `[A-Za-z0-9_.:-]`.
    #[error(
        "invalid topic {topic:?}: {reason}; use 1 to 200 characters from A-Z, a-z, 0-9, '_', '.', ':' and '-'"
    )]
    InvalidTopic {
        /// The rejected name (cut to 160 characters).
        topic: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The job id is empty, too long or has a character outside visible ASCII.
    #[error(
        "invalid job id {id:?}: {reason}; use 1 to 200 visible ASCII characters (0x21 to 0x7e), or let delayq generate one"
    )]
    InvalidId {
        /// The rejected id (cut to 240 characters).
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The delay or absolute due time is out of range.
    #[error("invalid delay: {reason}")]
    InvalidDelay {
        /// What is wrong and what range is accepted.
        reason: String,
    },

    /// The lease length (time to run) is out of range.
    #[error("invalid ttr {ttr_ms} ms: the lease length must be between 1 s and 24 h")]
    InvalidTtr {
        /// The rejected value in milliseconds.
        ttr_ms: u64,
    },

    /// Another argument is out of range (max attempts, back-off, batch size, page size ...).
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// What is wrong and what range is accepted.
        reason: String,
    },

    /// The job body is larger than the configured limit.
    #[error(
        "job body is {size} bytes, over the limit of {limit} bytes; store large payloads elsewhere and push a reference, or raise the engine's body limit"
    )]
    BodyTooLarge {
        /// The size of the rejected body.
        size: usize,
        /// The configured limit.
        limit: usize,
    },

    /// No job with this id exists in this topic (it was never pushed, or was acked, deleted or purged).
    #[error(
        "job {id} not found in topic {topic}: it was never pushed, or it was acked, deleted or purged"
    )]
    NotFound {
        /// The topic.
        topic: Topic,
        /// The id.
        id: JobId,
    },

    /// The lease token is not the job's current lease: it expired, the job was acked (it may
    /// be kept as done), nacked, released, buried or deleted, or it was redelivered to
    /// someone else.
    #[error(
        "lease lost on job {id} in topic {topic}: the lease expired or the job moved on (acked, redelivered, deleted); stop working on it, another delivery may already be running; renew long jobs with touch before the ttr runs out"
    )]
    LeaseLost {
        /// The topic.
        topic: Topic,
        /// The id.
        id: JobId,
    },

    /// A live job with this id already exists (returned by [`crate::Engine::push_new`]).
    #[error(
        "job {id} already exists in topic {topic}; push is idempotent on (topic, id): use another id, or delete the existing job first"
    )]
    AlreadyExists {
        /// The topic.
        topic: Topic,
        /// The id.
        id: JobId,
    },

    /// The job exists but is in a state where this operation does not apply
    /// (for example rescheduling a reserved job, or kicking a job that is not dead).
    #[error("cannot {operation} job {id} in topic {topic}: it is {state}; {hint}")]
    WrongState {
        /// The topic.
        topic: Topic,
        /// The id.
        id: JobId,
        /// The job's current state.
        state: JobState,
        /// The refused operation.
        operation: &'static str,
        /// What to do instead.
        hint: &'static str,
    },

    /// A topic's partition count cannot change while the topic holds jobs (any state, done
    /// jobs kept by a retention included): they were placed by the old count, and a get or
    /// delete by id would look in the wrong partition. Nothing was changed.
    #[error(
        "cannot change the partitions of topic {topic} from {from} to {to}: it holds jobs; keep its count ({from}), or change it once the topic is empty (drain or purge it), or use a new topic"
    )]
    PartitionsInUse {
        /// The topic.
        topic: Topic,
        /// Its partition count.
        from: u16,
        /// The count asked for.
        to: u16,
    },

    /// The engine's store cannot be reached or failed (Redis down or too slow, an I/O error, a
    /// connection reset; a full store is [`Error::Full`]).
    /// Retrying later may succeed; the operation may or may not have been applied.
    #[error(
        "engine unavailable: {message}; check that the store is running and reachable, then retry"
    )]
    Unavailable {
        /// What failed.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },

    /// The engine's store is full: Redis reached its `maxmemory` (with `noeviction`), the
    /// disk holding the embedded engine's data is full, or its database reached the
    /// configured `max_db_bytes`. Nothing was written. Reads still work, and so do the
    /// operations that free space (ack, delete, purge); once space is freed, retrying
    /// succeeds.
    #[error(
        "engine full: {message}; nothing was written; free space (ack, delete or purge jobs), raise Redis maxmemory, or free disk space or raise max_db_bytes, then retry"
    )]
    Full {
        /// What was refused and which limit was reached.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },

    /// The write was applied on the engine's primary, but fewer replicas than the engine's
    /// wait-replicas setting acknowledged it within its wait timeout (Redis `WAIT`). The
    /// write may or may not survive a failover. Retrying is safe: a push is idempotent on
    /// `(topic, id)`, and a settlement that had landed answers as a repeated one does
    /// ([`Error::NotFound`] or [`Error::LeaseLost`]).
    #[error(
        "not replicated: the write was applied but {acked} of the {wanted} replicas asked for acknowledged it in time, so it may not survive a failover; retry (a push is idempotent), and check the replicas' health and the wait timeout"
    )]
    NotReplicated {
        /// How many replicas acknowledged the write.
        acked: usize,
        /// How many the engine's setting asks for.
        wanted: usize,
    },

    /// The engine configuration is invalid (bad URL, unreadable data directory ...).
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// The store answered something delayq did not expect: a bug or a store written by another
    /// program or version. The message names what was unexpected.
    #[error(
        "internal error: {0}; this is a bug or the store holds data delayq did not write, please report it"
    )]
    Internal(String),
}

impl Error {
    /// [`Error::WrongState`] for a reschedule of a job that is not delayed or ready.
    pub fn cannot_reschedule(topic: &Topic, id: &JobId, state: JobState) -> Self {
        Error::WrongState {
            topic: topic.clone(),
            id: id.clone(),
            state,
            operation: "reschedule",
            hint: "only delayed and ready jobs can be rescheduled; nack a reserved job with a delay, kick a dead one",
        }
    }

    /// [`Error::WrongState`] for a lease operation (`operation`: ack, nack, touch, bury or
    /// release) on a job that has no delivery to settle: it is not reserved and has had no
    /// delivery since it was pushed, released or kicked. A job that was delivered and then
    /// moved on (its lease expired, or it was nacked, acked or redelivered) answers
    /// [`Error::LeaseLost`] instead: the lease existed and is gone.
    pub fn not_reserved(
        topic: &Topic,
        id: &JobId,
        state: JobState,
        operation: &'static str,
    ) -> Self {
        Error::WrongState {
            topic: topic.clone(),
            id: id.clone(),
            state,
            operation,
            hint: "only a reserved job has a lease to settle, and this one has not been delivered since it was pushed, released or kicked; reserve it to get a lease",
        }
    }

    /// [`Error::WrongState`] for a bury without a lease ([`crate::Engine::bury_waiting`]) of
    /// a job that is not delayed or ready.
    pub fn cannot_bury_waiting(topic: &Topic, id: &JobId, state: JobState) -> Self {
        Error::WrongState {
            topic: topic.clone(),
            id: id.clone(),
            state,
            operation: "bury",
            hint: "only delayed and ready jobs can be buried without a lease; a reserved job is buried by its holder with its lease, a dead one is already dead",
        }
    }

    /// [`Error::WrongState`] for a kick of a job that is not dead.
    pub fn cannot_kick(topic: &Topic, id: &JobId, state: JobState) -> Self {
        Error::WrongState {
            topic: topic.clone(),
            id: id.clone(),
            state,
            operation: "kick",
            hint: "only dead jobs can be kicked; reschedule a delayed or ready job instead",
        }
    }

    /// [`Error::WrongState`] for a reserve by id ([`crate::Engine::reserve_job`]) of a job
    /// that is reserved or done.
    pub fn cannot_reserve_job(topic: &Topic, id: &JobId, state: JobState) -> Self {
        Error::WrongState {
            topic: topic.clone(),
            id: id.clone(),
            state,
            operation: "reserve",
            hint: "only a delayed, ready or dead job can be reserved by its id; a reserved one is its holder's until its lease ends",
        }
    }

    /// Builds [`Error::Unavailable`] from a lower-layer error.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Unavailable {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// Builds [`Error::Full`] from a lower-layer error.
    pub fn full(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Full {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// Builds [`Error::InvalidArgument`].
    pub fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what,
            reason: reason.into(),
        }
    }

    /// True for errors that mean "the input was rejected and nothing changed".
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidTopic { .. }
                | Error::InvalidId { .. }
                | Error::InvalidDelay { .. }
                | Error::InvalidTtr { .. }
                | Error::InvalidArgument { .. }
                | Error::BodyTooLarge { .. }
        )
    }

    /// True when retrying the same call later may succeed (the store was unreachable or
    /// full, or the replicas did not acknowledge the write in time).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable { .. } | Error::Full { .. } | Error::NotReplicated { .. }
        )
    }

    /// The same error for another caller (`Error` is not `Clone`): [`Error::NotReplicated`]
    /// and [`Error::Full`] as themselves (without the source), another retryable error as
    /// [`Error::Unavailable`] with this message, any other as [`Error::Internal`] with this
    /// message.
    pub fn copy_for_another(&self) -> Error {
        match self {
            Error::NotReplicated { acked, wanted } => Error::NotReplicated {
                acked: *acked,
                wanted: *wanted,
            },
            Error::Full { message, .. } => Error::Full {
                message: message.clone(),
                source: None,
            },
            e if e.is_retryable() => Error::Unavailable {
                message: e.to_string(),
                source: None,
            },
            e => Error::Internal(e.to_string()),
        }
    }

    /// True when a lease operation was refused because the delivery can no longer be settled:
    /// the lease is lost, the job is gone ([`Error::NotFound`]) or it has no lease
    /// ([`Error::WrongState`]). A worker stops working on such a delivery; nothing it sends
    /// for it can succeed.
    pub fn ends_delivery(&self) -> bool {
        matches!(
            self,
            Error::LeaseLost { .. } | Error::NotFound { .. } | Error::WrongState { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_store_is_retryable_says_what_to_do_and_stays_full_when_copied() {
        let e = Error::full("pushing", std::io::Error::other("OOM"));
        assert!(e.is_retryable());
        assert!(!e.is_invalid_input() && !e.ends_delivery());
        let text = e.to_string();
        for needle in ["nothing was written", "maxmemory", "max_db_bytes", "retry"] {
            assert!(text.contains(needle), "{needle:?} missing from {text}");
        }
        match e.copy_for_another() {
            Error::Full { message, source } => {
                assert_eq!(message, "pushing");
                assert!(source.is_none());
            }
            other => panic!("a copy of Full is {other:?}"),
        }
    }
}
