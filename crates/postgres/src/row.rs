//! Job rows as the engine's functions answer them, decoded into [`Job`] and [`Delivery`];
//! the stored state codes as lib.sql names them (the statuses are `status.rs`'s).

use std::time::Duration;

use delayq_core::{
    Backoff, Bytes, Delivery, Error, Job, JobId, JobState, Lease, LeaseToken, OnExpire, Result,
    Timestamp, Topic,
};
use tokio_postgres::Row;

/// A count, time or token the database holds as bigint, back to u64 (a negative one was
/// not written by delayq).
pub(crate) fn unsigned(v: i64, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| Error::Internal(format!("a stored {what} is negative: {v}")))
}

/// A u64 the contract allows as a bigint parameter (times, tokens and counts stay far below
/// i64::MAX; a larger one saturates, which matches nothing stored).
pub(crate) fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The stored state of a reserved job (lib.sql: 1 waiting, 3 reserved, 4 dead, 5 done).
pub(crate) const STORED_RESERVED: i16 = 3;
/// The stored state of a dead job.
pub(crate) const STORED_DEAD: i16 = 4;
/// The stored state of a done job.
pub(crate) const STORED_DONE: i16 = 5;

/// The columns a job is read from, in [`RawJob::read`]'s order (after the ones the caller
/// puts first).
pub(crate) const JOB_COLS: &str = "id, priority, ready_at, seq, ttr_ms, max_attempts, attempts, \
     bo_base_ms, bo_factor, bo_max_ms, bo_jitter, created_at, deadline, last_error, body, \
     expires_at, on_expire";

/// A job row as read.
pub(crate) struct RawJob {
    pub(crate) id: String,
    pub(crate) priority: i64,
    pub(crate) ready_at: i64,
    pub(crate) seq: i64,
    pub(crate) ttr_ms: i64,
    pub(crate) max_attempts: i64,
    pub(crate) attempts: i64,
    pub(crate) backoff: [i64; 4],
    pub(crate) created_at: i64,
    pub(crate) deadline: i64,
    pub(crate) last_error: String,
    pub(crate) body: Vec<u8>,
    pub(crate) expires_at: i64,
    pub(crate) on_expire: i16,
}

impl RawJob {
    /// Decodes [`JOB_COLS`] starting at column `at`.
    pub(crate) fn read(r: &Row, at: usize) -> Result<Self> {
        let get = |e: tokio_postgres::Error| Error::Internal(format!("a job row: {e}"));
        Ok(RawJob {
            id: r.try_get(at).map_err(get)?,
            priority: r.try_get(at + 1).map_err(get)?,
            ready_at: r.try_get(at + 2).map_err(get)?,
            seq: r.try_get(at + 3).map_err(get)?,
            ttr_ms: r.try_get(at + 4).map_err(get)?,
            max_attempts: r.try_get(at + 5).map_err(get)?,
            attempts: r.try_get(at + 6).map_err(get)?,
            backoff: [
                r.try_get(at + 7).map_err(get)?,
                r.try_get(at + 8).map_err(get)?,
                r.try_get(at + 9).map_err(get)?,
                r.try_get(at + 10).map_err(get)?,
            ],
            created_at: r.try_get(at + 11).map_err(get)?,
            deadline: r.try_get(at + 12).map_err(get)?,
            last_error: r.try_get(at + 13).map_err(get)?,
            body: r.try_get(at + 14).map_err(get)?,
            expires_at: r.try_get(at + 15).map_err(get)?,
            on_expire: r.try_get(at + 16).map_err(get)?,
        })
    }

    /// The public job of `topic`, in `state`.
    pub(crate) fn into_job(self, topic: &Topic, state: JobState) -> Result<Job> {
        let id = JobId::new(self.id)
            .map_err(|e| Error::Internal(format!("a stored job id is invalid: {e}")))?;
        let small = |v: i64, what: &str| {
            u32::try_from(v)
                .map_err(|_| Error::Internal(format!("a stored {what} is out of range: {v}")))
        };
        let [base, factor, max, jitter] = self.backoff;
        Ok(Job {
            topic: topic.clone(),
            id,
            body: Bytes::from(self.body),
            state,
            priority: small(self.priority, "priority")?,
            ready_at: Timestamp::from_millis(unsigned(self.ready_at, "due time")?),
            ttr: Duration::from_millis(unsigned(self.ttr_ms, "ttr")?),
            max_attempts: small(self.max_attempts, "max attempts")?,
            backoff: Backoff::from_parts(
                unsigned(base, "back-off")?,
                small(factor, "back-off factor")?,
                unsigned(max, "back-off")?,
                small(jitter, "back-off jitter")?,
            ),
            attempts: small(self.attempts, "attempt count")?,
            created_at: Timestamp::from_millis(unsigned(self.created_at, "creation time")?),
            deadline: (self.deadline > 0)
                .then(|| unsigned(self.deadline, "deadline").map(Timestamp::from_millis))
                .transpose()?,
            last_error: (!self.last_error.is_empty()).then_some(self.last_error),
            expires_at: (self.expires_at > 0)
                .then(|| unsigned(self.expires_at, "expiry").map(Timestamp::from_millis))
                .transpose()?,
            on_expire: if self.on_expire == 1 {
                OnExpire::Drop
            } else {
                OnExpire::Dead
            },
        })
    }

    /// The delivery of this job of `topic`, taken at `now_us`, leased under `token` (0: at
    /// most once, no lease).
    pub(crate) fn into_delivery(self, topic: &Topic, token: i64, now_us: i64) -> Result<Delivery> {
        let lateness = Duration::from_micros(
            unsigned(now_us, "clock")?
                .saturating_sub(unsigned(self.ready_at, "due time")?.saturating_mul(1000)),
        );
        let job = self.into_job(topic, JobState::Reserved)?;
        Ok(Delivery {
            lease: (token > 0).then(|| Lease {
                topic: topic.clone(),
                id: job.id.clone(),
                token: LeaseToken(unsigned(token, "lease token").unwrap_or_default()),
            }),
            job,
            lateness,
        })
    }
}
