//! The `jobs` row: state codes, the column lists and their decoding into [`Job`] and
//! [`Meta`], mirrored from `migrations/0001_init.sql` and `0003_waiting.sql`.

use std::time::Duration;

use delayq_core::{
    Backoff, Bytes, Error, Job, JobId, JobState, OnExpire, Result, Timestamp, Topic,
};
use rusqlite::Row;

/// Stored state codes (`jobs.state`). A waiting job is delayed before its due time and
/// ready from it on: time, not a write, makes it due. (Code 2, the ready state of schema
/// versions 1 and 2, is no longer written; migration 0003 turned it into waiting.)
pub(crate) const WAITING: i64 = 1;
pub(crate) const RESERVED: i64 = 3;
pub(crate) const DEAD: i64 = 4;
/// An acked job its topic keeps (`0006_done.sql`).
pub(crate) const DONE: i64 = 5;

/// The state of a stored code at `now`: a waiting job is ready when due, delayed before.
pub(crate) fn state_of(code: i64, ready_at: u64, now: u64) -> Result<JobState> {
    Ok(match code {
        WAITING if ready_at <= now => JobState::Ready,
        WAITING => JobState::Delayed,
        RESERVED => JobState::Reserved,
        DEAD => JobState::Dead,
        DONE => JobState::Done,
        other => return Err(Error::Internal(format!("unknown stored job state {other}"))),
    })
}

/// The stored code of [`OnExpire`] (`jobs.on_expire`, `0009_expiry.sql`).
pub(crate) fn on_expire_code(o: OnExpire) -> i64 {
    match o {
        OnExpire::Dead => 0,
        OnExpire::Drop => 1,
    }
}

/// The [`OnExpire`] of a stored code.
pub(crate) fn on_expire_of(code: i64) -> OnExpire {
    if code == 1 {
        OnExpire::Drop
    } else {
        OnExpire::Dead
    }
}

/// Every column a [`Job`] is read from, in [`job`]'s order.
pub(crate) const JOB_COLS: &str = "id, state, priority, ready_at, seq, ttr_ms, max_attempts, \
     attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, created_at, token, deadline, \
     last_error, body, expires_at, on_expire";

/// The columns of [`Meta`], in [`meta`]'s order.
pub(crate) const META_COLS: &str = "jid, state, ready_at, ttr_ms, max_attempts, attempts, \
     bo_base_ms, bo_factor, bo_max_ms, bo_jitter, token, deadline, expires_at";

/// What state changes need of a job: everything but its id, body and last error.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    pub(crate) jid: i64,
    pub(crate) state: i64,
    pub(crate) ready_at: u64,
    pub(crate) ttr_ms: u64,
    pub(crate) max_attempts: u32,
    pub(crate) attempts: u32,
    pub(crate) backoff: Backoff,
    pub(crate) token: u64,
    pub(crate) deadline: u64,
    /// The expiry in ms, 0 for none.
    pub(crate) expires_at: u64,
}

/// Decodes [`META_COLS`] starting at column `at`.
pub(crate) fn meta(r: &Row<'_>, at: usize) -> rusqlite::Result<Meta> {
    Ok(Meta {
        jid: r.get(at)?,
        state: r.get(at + 1)?,
        ready_at: r.get(at + 2)?,
        ttr_ms: r.get(at + 3)?,
        max_attempts: r.get(at + 4)?,
        attempts: r.get(at + 5)?,
        backoff: Backoff::from_parts(
            r.get(at + 6)?,
            r.get(at + 7)?,
            r.get(at + 8)?,
            r.get(at + 9)?,
        ),
        token: r.get(at + 10)?,
        deadline: r.get(at + 11)?,
        expires_at: r.get(at + 12)?,
    })
}

/// A job row as read, before its id is validated.
pub(crate) struct RawJob {
    pub(crate) id: String,
    pub(crate) state: i64,
    pub(crate) priority: u32,
    pub(crate) ready_at: u64,
    pub(crate) seq: u64,
    pub(crate) ttr_ms: u64,
    pub(crate) max_attempts: u32,
    pub(crate) attempts: u32,
    pub(crate) backoff: Backoff,
    pub(crate) created_at: u64,
    pub(crate) token: u64,
    pub(crate) deadline: u64,
    pub(crate) last_error: String,
    pub(crate) body: Vec<u8>,
    /// The expiry in ms, 0 for none.
    pub(crate) expires_at: u64,
    /// 1 when the job is dropped at its expiry, 0 when it goes dead.
    pub(crate) on_expire: i64,
}

/// Decodes [`JOB_COLS`] starting at column `at`.
pub(crate) fn job(r: &Row<'_>, at: usize) -> rusqlite::Result<RawJob> {
    Ok(RawJob {
        id: r.get(at)?,
        state: r.get(at + 1)?,
        priority: r.get(at + 2)?,
        ready_at: r.get(at + 3)?,
        seq: r.get(at + 4)?,
        ttr_ms: r.get(at + 5)?,
        max_attempts: r.get(at + 6)?,
        attempts: r.get(at + 7)?,
        backoff: Backoff::from_parts(
            r.get(at + 8)?,
            r.get(at + 9)?,
            r.get(at + 10)?,
            r.get(at + 11)?,
        ),
        created_at: r.get(at + 12)?,
        token: r.get(at + 13)?,
        deadline: r.get(at + 14)?,
        last_error: r.get(at + 15)?,
        body: r.get(at + 16)?,
        expires_at: r.get(at + 17)?,
        on_expire: r.get(at + 18)?,
    })
}

impl RawJob {
    /// The public job, in `state` (the listed or stored state).
    pub(crate) fn into_job(self, topic: &Topic, state: JobState) -> Result<Job> {
        let id = JobId::new(self.id)
            .map_err(|e| Error::Internal(format!("a stored job id is invalid: {e}")))?;
        Ok(Job {
            topic: topic.clone(),
            id,
            body: Bytes::from(self.body),
            state,
            priority: self.priority,
            ready_at: Timestamp::from_millis(self.ready_at),
            ttr: Duration::from_millis(self.ttr_ms),
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            attempts: self.attempts,
            created_at: Timestamp::from_millis(self.created_at),
            deadline: (self.deadline > 0).then(|| Timestamp::from_millis(self.deadline)),
            last_error: (!self.last_error.is_empty()).then_some(self.last_error),
            expires_at: (self.expires_at > 0).then(|| Timestamp::from_millis(self.expires_at)),
            on_expire: on_expire_of(self.on_expire),
        })
    }

    /// What state changes need of this job, stored in row `jid`.
    pub(crate) fn meta(&self, jid: i64) -> Meta {
        Meta {
            jid,
            state: self.state,
            ready_at: self.ready_at,
            ttr_ms: self.ttr_ms,
            max_attempts: self.max_attempts,
            attempts: self.attempts,
            backoff: self.backoff,
            token: self.token,
            deadline: self.deadline,
            expires_at: self.expires_at,
        }
    }

    /// The public job in its stored state at `now`.
    pub(crate) fn into_stored_job(self, topic: &Topic, now: u64) -> Result<Job> {
        let state = state_of(self.state, self.ready_at, now)?;
        self.into_job(topic, state)
    }
}

/// Fuzzed rows (issue 17): arbitrary SQLite values (any storage class, any number) in every
/// column a job or its meta is read from. Decoding never panics; a value that does not fit
/// is a rusqlite error or `Error::Internal`; a row that fits decodes to its values.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use rusqlite::types::Value as Sql;

    use super::*;

    fn value() -> impl Strategy<Value = Sql> {
        prop_oneof![
            Just(Sql::Null),
            any::<i64>().prop_map(Sql::Integer),
            prop_oneof![
                Just(0i64),
                Just(1),
                Just(-1),
                Just(i64::MAX),
                Just(i64::MIN),
                Just(u32::MAX as i64 + 1)
            ]
            .prop_map(Sql::Integer),
            (0i64..10).prop_map(Sql::Integer),
            any::<f64>().prop_map(Sql::Real),
            ".{0,12}".prop_map(Sql::Text),
            "[!-~]{1,12}".prop_map(Sql::Text),
            prop::collection::vec(any::<u8>(), 0..12).prop_map(Sql::Blob),
        ]
    }

    /// Selects `values` as one row of columns with no type affinity and decodes it.
    fn with_row<T>(values: &[Sql], decode: impl Fn(&Row<'_>) -> T) -> T {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let cols: Vec<String> = (0..values.len()).map(|i| format!("?{}", i + 1)).collect();
        let sql = format!("SELECT {}", cols.join(", "));
        let params = rusqlite::params_from_iter(values.iter());
        db.query_row(&sql, params, |r| Ok(decode(r))).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_job_rows_never_panic(values in prop::collection::vec(value(), 19), now in any::<u64>()) {
            let topic = Topic::new("t").unwrap();
            let decoded = with_row(&values, |r| job(r, 0).map(|raw| raw.into_stored_job(&topic, now)));
            if let Ok(Err(e)) = decoded {
                prop_assert!(matches!(e, Error::Internal(_)), "{e:?}");
            }
        }

        #[test]
        fn arbitrary_meta_rows_never_panic(values in prop::collection::vec(value(), 13)) {
            let _ = with_row(&values, |r| meta(r, 0).map(|m| (m.jid, m.backoff)));
        }

        /// A row as the engine writes it decodes to its values.
        #[test]
        fn written_rows_decode_to_their_values(
            n in prop::array::uniform12(0i64..=i64::from(u32::MAX)),
            id in "[!-~]{1,200}",
            err in ".{0,20}",
            body in prop::collection::vec(any::<u8>(), 0..32),
            state in prop::sample::select(vec![WAITING, RESERVED, DEAD, DONE]),
            now in any::<u32>(),
        ) {
            // `.` and `..` are not job ids (a URL path cannot name them).
            prop_assume!(id != "." && id != "..");
            let mut values = vec![Sql::Text(id.clone()), Sql::Integer(state)];
            values.extend(n.iter().map(|&x| Sql::Integer(x)));
            values.extend([Sql::Integer(n[0]), Sql::Text(err.clone()), Sql::Blob(body.clone()), Sql::Integer(n[1]), Sql::Integer(1)]);
            let topic = Topic::new("t").unwrap();
            let j = with_row(&values, |r| job(r, 0).map(|raw| raw.into_stored_job(&topic, u64::from(now))))
                .unwrap()
                .unwrap();
            let u = |x: i64| x as u64;
            prop_assert_eq!(j.id.as_str(), id.as_str());
            prop_assert_eq!(j.state, state_of(state, u(n[1]), u64::from(now)).unwrap());
            prop_assert_eq!((j.priority, j.ready_at.as_millis(), j.ttr.as_millis() as u64), (n[0] as u32, u(n[1]), u(n[3])));
            prop_assert_eq!((j.max_attempts, j.attempts), (n[4] as u32, n[5] as u32));
            prop_assert_eq!(j.backoff, Backoff::from_parts(u(n[6]), n[7] as u32, u(n[8]), n[9] as u32));
            prop_assert_eq!(j.last_error, (!err.is_empty()).then_some(err));
            prop_assert_eq!(&j.body[..], &body[..]);
            prop_assert_eq!(j.on_expire, OnExpire::Drop);
        }
    }
}
