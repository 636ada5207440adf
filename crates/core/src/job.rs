//! The job model: what a producer pushes ([`NewJob`]), what an engine stores and returns
//! ([`Job`]), and what a reserver holds ([`Delivery`], [`Lease`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;

use crate::limits::{Limits, MAX_MAX_ATTEMPTS, check_at, check_delay, check_ttr};
use crate::{Backoff, Error, JobId, LeaseToken, Schedule, Timestamp, Topic};

/// Where a job is in its life. An acked job is gone, or [`JobState::Done`] for a while when
/// its topic keeps finished jobs ([`crate::Retention`]).
///
/// ```text
/// push ──> Delayed ──(due)──> Ready ──reserve──> Reserved ──ack──> (gone, or Done)
///             ^                 ^                  │  │
///             └── nack / lease expired (back-off) ─┘  └─ attempts exhausted / bury ──> Dead
///                               └──────────────── kick ─────────────────────────────────┘
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum JobState {
    /// Waiting for its due time.
    Delayed,
    /// Due, waiting for a reserver.
    Ready,
    /// Leased to a reserver until the lease deadline.
    Reserved,
    /// Failed too often or buried; stays until kicked, deleted or purged.
    Dead,
    /// Acked, and kept because its topic retains finished jobs: readable until its
    /// retention runs out. It holds no id: a push of its id creates a new job.
    Done,
}

impl JobState {
    /// Every state, in life-cycle order.
    pub const ALL: [JobState; 5] = [
        JobState::Delayed,
        JobState::Ready,
        JobState::Reserved,
        JobState::Dead,
        JobState::Done,
    ];

    /// The number the Redis and PostgreSQL engines store and answer for the state (1
    /// delayed, 2 ready, 3 reserved, 4 dead, 5 done: `lib.lua`, `lib.sql`): its place in
    /// [`JobState::ALL`], from 1.
    #[inline]
    pub fn code(self) -> u8 {
        match self {
            JobState::Delayed => 1,
            JobState::Ready => 2,
            JobState::Reserved => 3,
            JobState::Dead => 4,
            JobState::Done => 5,
        }
    }

    /// The state of a [`JobState::code`]; `Error::Internal` for a number that is none (a
    /// store that answers it is not delayq's, or is of another version).
    #[inline]
    pub fn from_code(code: i64) -> Result<JobState, Error> {
        Ok(match code {
            1 => JobState::Delayed,
            2 => JobState::Ready,
            3 => JobState::Reserved,
            4 => JobState::Dead,
            5 => JobState::Done,
            other => return Err(Error::Internal(format!("unknown job state code {other}"))),
        })
    }

    /// The lowercase name (`delayed`, `ready`, `reserved`, `dead`, `done`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Delayed => "delayed",
            JobState::Ready => "ready",
            JobState::Reserved => "reserved",
            JobState::Dead => "dead",
            JobState::Done => "done",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "state",
                    format!("{s:?} is not one of delayed, ready, reserved, dead, done"),
                )
            })
    }
}

/// A job to push. Built with [`NewJob::new`] and the `with_*` setters; the defaults are
/// a generated id, due now, priority 0, and for ttr, max attempts and back-off the topic's
/// defaults ([`crate::TopicConfig`]), else ttr 30 s, 3 attempts, [`Backoff::default`].
///
/// ```
/// use std::time::Duration;
/// use delayq_core::{NewJob, Topic, JobId};
/// let job = NewJob::new(Topic::new("orders")?, "cancel order 42")
///     .with_id(JobId::new("order-42")?)
///     .with_delay(Duration::from_secs(30 * 60))
///     .with_max_attempts(5);
/// # Ok::<(), delayq_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    /// The topic.
    pub topic: Topic,
    /// The id; also the idempotency key: pushing a live `(topic, id)` again changes nothing.
    pub id: JobId,
    /// The payload.
    pub body: Bytes,
    /// When it becomes due.
    pub schedule: Schedule,
    /// The lease length (time to run) of each delivery; `None`: the topic's default, else
    /// 30 s.
    pub ttr: Option<Duration>,
    /// How many deliveries before it goes dead (1 = no retry); `None`: the topic's default,
    /// else 3.
    pub max_attempts: Option<u32>,
    /// The delay before each retry; `None`: the topic's default, else
    /// [`Backoff::default`].
    pub backoff: Option<Backoff>,
    /// Among due jobs, lower runs first.
    pub priority: u32,
    /// What the push does when a live job with this id exists (default: keep it).
    pub on_conflict: OnConflict,
    /// The latest the job may be delivered ([`Expiry`]); `None`: no limit.
    pub expiry: Option<Expiry>,
    /// What happens to the job when its expiry passes before a delivery (default: it goes
    /// dead with the reason `expired`).
    pub on_expire: OnExpire,
}

/// The latest a job may be delivered (issue 14): a job that could not be delivered by then
/// (no reserver in time, a paused topic, a retry due after it) is not delivered; it goes
/// dead with the reason [`EXPIRED`] or is dropped ([`OnExpire`]), and its topic counts it
/// ([`crate::TopicStats::expired_jobs`]). The engine's clock decides; a delivery made in
/// time runs to its end, however long it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// At this absolute time on the engine's clock, which must be after the job's due time.
    At(Timestamp),
    /// This long after the job's due time at its push (`max_lateness`): at least 1 ms, at
    /// most 10 years. A retry does not move it.
    AfterDue(Duration),
}

/// What an engine does with a job whose [`Expiry`] passed before it was delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum OnExpire {
    /// It goes dead with the reason [`EXPIRED`] (and can be kicked). The default.
    #[default]
    Dead,
    /// It is deleted.
    Drop,
}

impl OnExpire {
    /// The lowercase name (`dead`, `drop`).
    pub fn as_str(self) -> &'static str {
        match self {
            OnExpire::Dead => "dead",
            OnExpire::Drop => "drop",
        }
    }
}

impl FromStr for OnExpire {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "dead" => Ok(OnExpire::Dead),
            "drop" => Ok(OnExpire::Drop),
            _ => Err(Error::invalid(
                "on_expire",
                format!("{s:?} is not one of dead, drop"),
            )),
        }
    }
}

/// The reason ([`Job::last_error`]) of a job that went dead because its [`Expiry`] passed.
pub const EXPIRED: &str = "expired";

/// What a push does when a live job with its id exists (issue 14). Whatever it says, a
/// reserved (or dead) job is never touched: the answer gives its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnConflict {
    /// Leave the existing job as it is (the idempotent push). The default.
    #[default]
    Keep,
    /// Replace a waiting (delayed or ready) job's body, due time and options with this
    /// push's; its id, attempts and creation time stay, and it goes behind the jobs already
    /// due at its new due time.
    Replace,
    /// As `Replace`, with the due time of each push counted from that push (its delay moves
    /// the job back), but never later than `max_wait` after the job was first pushed (none:
    /// no bound). A burst of pushes with one id runs once, after the burst goes quiet.
    Debounce {
        /// The latest a debounced job may become due, counted from its first push.
        max_wait: Option<Duration>,
    },
}

impl NewJob {
    /// A job with a generated id and the defaults.
    pub fn new(topic: Topic, body: impl Into<Bytes>) -> Self {
        NewJob {
            topic,
            id: JobId::generate(),
            body: body.into(),
            schedule: Schedule::NOW,
            ttr: None,
            max_attempts: None,
            backoff: None,
            priority: 0,
            on_conflict: OnConflict::Keep,
            expiry: None,
            on_expire: OnExpire::Dead,
        }
    }

    /// Sets the id (the idempotency key).
    pub fn with_id(mut self, id: JobId) -> Self {
        self.id = id;
        self
    }
    /// Due `delay` after the engine receives the push.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.schedule = Schedule::Delay(delay);
        self
    }
    /// Due at an absolute time on the engine's clock.
    pub fn with_ready_at(mut self, at: Timestamp) -> Self {
        self.schedule = Schedule::At(at);
        self
    }
    /// Sets the schedule.
    pub fn with_schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }
    /// Sets the lease length (1 s to 24 h).
    pub fn with_ttr(mut self, ttr: Duration) -> Self {
        self.ttr = Some(ttr);
        self
    }
    /// Sets the number of deliveries before the job goes dead (1 to 10,000).
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }
    /// Sets the retry back-off.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }
    /// Sets the priority (lower runs first among due jobs).
    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }
    /// Sets what the push does when a live job with this id exists ([`OnConflict`]).
    pub fn with_on_conflict(mut self, on_conflict: OnConflict) -> Self {
        self.on_conflict = on_conflict;
        self
    }
    /// Not delivered after `at` on the engine's clock ([`Expiry::At`]).
    pub fn with_expires_at(mut self, at: Timestamp) -> Self {
        self.expiry = Some(Expiry::At(at));
        self
    }
    /// Not delivered more than `lateness` after its due time ([`Expiry::AfterDue`]).
    pub fn with_max_lateness(mut self, lateness: Duration) -> Self {
        self.expiry = Some(Expiry::AfterDue(lateness));
        self
    }
    /// Sets what happens when its expiry passes before a delivery ([`OnExpire`]).
    pub fn with_on_expire(mut self, on_expire: OnExpire) -> Self {
        self.on_expire = on_expire;
        self
    }

    /// Checks everything that needs no clock and no topic settings. Engines call this
    /// before writing anything, then check absolute times against their own clock and the
    /// body against the topic's limit ([`crate::TopicConfig::check_body`]).
    pub fn validate(&self, limits: &Limits) -> Result<(), Error> {
        if self.body.len() > limits.max_body {
            return Err(Error::BodyTooLarge {
                size: self.body.len(),
                limit: limits.max_body,
            });
        }
        match self.schedule {
            Schedule::Delay(d) => check_delay(d)?,
            Schedule::At(at) => check_at(at)?,
        }
        if let Some(ttr) = self.ttr {
            check_ttr(ttr)?;
        }
        if let Some(n) = self.max_attempts {
            check_max_attempts(n)?;
        }
        if let OnConflict::Debounce { max_wait: Some(w) } = self.on_conflict {
            check_delay(w).map_err(|_| {
                Error::invalid(
                    "max_wait",
                    "a debounce's max_wait is over 10 years; give at most 10 years, or none",
                )
            })?;
        }
        if let Some(e) = self.expiry {
            check_expiry_value(e)?;
        }
        match &self.backoff {
            Some(b) => b.validate(),
            None => Ok(()),
        }
    }
}

/// Checks an expiry on its own (a job's or a schedule's): an `expires_at` from 2000 on, a
/// `max_lateness` of 1 ms to 10 years.
pub fn check_expiry_value(expiry: Expiry) -> Result<(), Error> {
    match expiry {
        Expiry::At(at) => check_at(at).map_err(|_| {
            Error::invalid(
                "expires_at",
                format!(
                    "{} ms is before 2000-01-01; pass milliseconds since the Unix epoch, not seconds",
                    at.as_millis()
                ),
            )
        }),
        Expiry::AfterDue(d) => check_max_lateness(d),
    }
}

/// Checks a `max_lateness`: 1 ms to 10 years.
pub fn check_max_lateness(d: Duration) -> Result<(), Error> {
    if d < Duration::from_millis(1) || check_delay(d).is_err() {
        return Err(Error::invalid(
            "max_lateness",
            "is outside 1 ms to 10 years; give how late the job may still run, e.g. 30s",
        ));
    }
    Ok(())
}

/// The refusal of a job whose expiry is not after its due time: it could never run.
pub fn expiry_before_due() -> Error {
    Error::invalid(
        "expires_at",
        "is not after the job's due time, so the job could never run; give a later expires_at or an earlier due time",
    )
}

impl NewJob {
    /// Checks an absolute expiry against the due time this push gives the job at the
    /// engine's time `now` (its schedule's, never before `now`): an expiry not after it is
    /// refused ([`expiry_before_due`]), as the job could never run. Engines call this with
    /// their own clock before writing.
    pub fn check_expiry(&self, now: Timestamp) -> Result<(), Error> {
        let Some(Expiry::At(at)) = self.expiry else {
            return Ok(());
        };
        // The engines round a delay's sub-millisecond part up (never early), so this does too:
        // an expiry at `now` plus the delay rounded down would pass here and be refused by
        // the engine's own check.
        let due = match self.schedule {
            Schedule::Delay(d) => Timestamp::from_millis(
                now.as_millis()
                    .saturating_add(crate::limits::delay_ms_ceil(d)),
            ),
            Schedule::At(a) => a.max(now),
        };
        if at <= due {
            return Err(expiry_before_due());
        }
        Ok(())
    }

    /// The job's absolute expiry once its due time is `ready_at`, if it has one.
    pub fn expires_at(&self, ready_at: Timestamp) -> Option<Timestamp> {
        self.expiry.map(|e| match e {
            Expiry::At(at) => at,
            Expiry::AfterDue(d) => ready_at.plus(d),
        })
    }
}

/// Checks `max_attempts`: 1 to 10,000.
pub fn check_max_attempts(n: u32) -> Result<(), Error> {
    if n == 0 || n > MAX_MAX_ATTEMPTS {
        return Err(Error::invalid(
            "max_attempts",
            format!("{n} is outside 1 to {MAX_MAX_ATTEMPTS}"),
        ));
    }
    Ok(())
}

/// A stored job as an engine returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// The topic.
    pub topic: Topic,
    /// The id.
    pub id: JobId,
    /// The payload.
    pub body: Bytes,
    /// The current state.
    pub state: JobState,
    /// Among due jobs, lower runs first.
    pub priority: u32,
    /// When it is (or was) due, on the engine's clock.
    pub ready_at: Timestamp,
    /// The lease length of each delivery.
    pub ttr: Duration,
    /// Deliveries allowed before it goes dead.
    pub max_attempts: u32,
    /// The retry back-off.
    pub backoff: Backoff,
    /// Deliveries so far (a reserve counts one; a release gives it back); for a done job,
    /// the delivery that was acked included.
    pub attempts: u32,
    /// When it was pushed.
    pub created_at: Timestamp,
    /// The lease deadline while reserved; when it went dead while dead; when it was acked
    /// while done.
    pub deadline: Option<Timestamp>,
    /// The reason given by the last nack or bury, "lease expired", or [`EXPIRED`].
    pub last_error: Option<String>,
    /// The latest it may be delivered ([`Expiry`]), on the engine's clock; `None`: no limit.
    pub expires_at: Option<Timestamp>,
    /// What happens when `expires_at` passes before a delivery.
    pub on_expire: OnExpire,
}

/// The identity of one delivery: what ack, nack, touch, bury and release need.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The topic.
    pub topic: Topic,
    /// The id.
    pub id: JobId,
    /// The fencing token of this delivery.
    pub token: LeaseToken,
}

/// A job handed to a reserver.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// The job, in state [`JobState::Reserved`] with `attempts` counting this delivery
    /// (or already removed, in at-most-once mode).
    pub job: Job,
    /// The lease to ack, nack, touch, bury or release with; `None` in at-most-once mode.
    pub lease: Option<Lease>,
    /// How late the delivery is: engine time at reserve minus `ready_at`.
    pub lateness: Duration,
}

impl Delivery {
    /// The attempt number of this delivery (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.job.attempts
    }
}

/// The answer to a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The job's id (generated or given).
    pub id: JobId,
    /// True when this push created the job; false when a live job with this id existed.
    pub created: bool,
    /// True when a live job with this id existed and this push replaced it
    /// ([`OnConflict::Replace`] or [`OnConflict::Debounce`] of a waiting job); false when it
    /// created the job or left the existing one as it was.
    pub replaced: bool,
    /// The job's state after the push.
    pub state: JobState,
    /// The job's due time after the push.
    pub ready_at: Timestamp,
}

/// What a nack did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackOutcome {
    /// The job will be delivered again at this time.
    Retry {
        /// The next due time.
        ready_at: Timestamp,
    },
    /// The job had used all its attempts and went dead.
    Dead,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored state codes are 1 to 5 in life-cycle order, each read back as its state;
    /// any other number is refused (`lib.lua` and `lib.sql` use these numbers).
    #[test]
    fn state_codes_round_trip_and_nothing_else_reads() {
        let codes: Vec<u8> = JobState::ALL.iter().map(|s| s.code()).collect();
        assert_eq!(codes, [1, 2, 3, 4, 5]);
        for st in JobState::ALL {
            assert_eq!(JobState::from_code(i64::from(st.code())).ok(), Some(st));
        }
        for bad in [0, 6, -1, i64::MAX] {
            let e = JobState::from_code(bad).err();
            assert!(matches!(e, Some(Error::Internal(_))), "{bad}: {e:?}");
        }
    }

    /// A delay's sub-millisecond part counts as a whole millisecond, as the engines count it:
    /// an expiry at `now` + 101 ms cannot be after the due time of a 100.5 ms delay. (Checked
    /// with the delay rounded down, it passed here while the PostgreSQL engine refused it,
    /// and the refusal became an internal error.)
    ///
    /// See: issue 36.
    #[test]
    fn a_sub_millisecond_delay_counts_as_a_whole_millisecond_for_the_expiry_issue_36() {
        let topic = Topic::new("t").unwrap_or_else(|e| panic!("{e}"));
        let now = Timestamp::from_millis(1_800_000_000_000);
        let job = |at_ms: u64| {
            NewJob::new(topic.clone(), "b")
                .with_delay(Duration::from_micros(100_500))
                .with_expires_at(Timestamp::from_millis(now.as_millis() + at_ms))
        };
        assert!(
            matches!(
                job(101).check_expiry(now),
                Err(Error::InvalidArgument {
                    what: "expires_at",
                    ..
                })
            ),
            "an expiry at the rounded due time is accepted"
        );
        assert!(job(102).check_expiry(now).is_ok());
    }
}
