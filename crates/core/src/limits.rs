//! Ranges of the contract and the configurable [`Limits`], with the checks every engine runs
//! before it writes anything.

use std::time::Duration;

use crate::time::duration_ms;
use crate::{Error, Schedule, Timestamp};

/// The longest delay: 10 years of 365.25 days.
pub const MAX_DELAY: Duration = Duration::from_millis(315_576_000_000);
/// The shortest lease.
pub const MIN_TTR: Duration = Duration::from_secs(1);
/// The longest lease.
pub const MAX_TTR: Duration = Duration::from_secs(24 * 3600);
/// The default lease.
pub const DEFAULT_TTR: Duration = Duration::from_secs(30);
/// The default number of deliveries before a job goes dead.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The largest accepted `max_attempts`.
pub const MAX_MAX_ATTEMPTS: u32 = 10_000;
/// The default largest body.
pub const DEFAULT_MAX_BODY: usize = 256 * 1024;
/// The largest body limit a topic may set (Redis keeps strings up to 512 MiB).
pub const MAX_TOPIC_BODY: usize = 512 * 1024 * 1024;
/// The most done jobs a topic may keep ([`crate::Retention::max_jobs`]).
pub const MAX_RETAINED: u32 = 100_000;
/// The shortest time a topic may keep its done jobs.
pub const MIN_RETENTION_AGE: Duration = Duration::from_secs(1);
/// The longest time a topic may keep its done jobs: 30 days.
pub const MAX_RETENTION_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The most jobs in one `push_batch`, one `reserve` or one `ack_batch`, and the largest page.
pub const MAX_BATCH: usize = 1_000;
/// The most topics one `reserve` may wait on.
pub const MAX_RESERVE_TOPICS: usize = 64;
/// The longest a `reserve` may wait.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);
/// The longest failure reason kept with a job, in bytes.
pub const MAX_REASON: usize = 4096;
/// Absolute due times before this (2000-01-01) are refused: they are almost always seconds
/// where milliseconds were meant.
pub const MIN_ABSOLUTE: Timestamp = Timestamp::from_millis(946_684_800_000);

/// Limits an engine enforces on input, configurable per engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest job body in bytes (default 256 KiB).
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// Milliseconds of a delay, rounded up so that a job is never due early.
pub fn delay_ms_ceil(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// The due time (ms) of a job asked for `delay_ms` after `now_us` (µs, the operation's one
/// reading of the engine's clock): `now_us` rounded **up** to the millisecond, plus the
/// delay, so that it is never before `now_us` + delay (a job pushed at 1000.6 ms with a 1 s
/// delay is due at 2001 ms, not 2000). A delay of 0 is due at `now_us` rounded down: it is
/// due already, and rounding up would only hold it back. Every engine computes due times
/// this way (the Redis functions' `due_in` and the PostgreSQL engine's
/// `delayq.due_after_us` mirror it).
pub fn due_after(now_us: u64, delay_ms: u64) -> u64 {
    if delay_ms == 0 {
        now_us / 1000
    } else {
        now_us.div_ceil(1000).saturating_add(delay_ms)
    }
}

/// Checks a relative delay: 0 ms to 10 years.
pub fn check_delay(d: Duration) -> Result<(), Error> {
    if d > MAX_DELAY {
        return Err(Error::InvalidDelay {
            reason: format!(
                "a delay of {} ms is over the maximum of 10 years ({} ms)",
                duration_ms(d),
                duration_ms(MAX_DELAY)
            ),
        });
    }
    Ok(())
}

/// Checks the parts of an absolute due time that need no clock: not before 2000-01-01.
/// Engines check "at most 10 years ahead" against their own clock.
pub fn check_at(at: Timestamp) -> Result<(), Error> {
    if at < MIN_ABSOLUTE {
        return Err(Error::InvalidDelay {
            reason: format!(
                "the absolute time {} ms is before 2000-01-01; pass milliseconds since the Unix epoch, not seconds",
                at.as_millis()
            ),
        });
    }
    Ok(())
}

impl Schedule {
    /// Checks what can be checked without a clock: a delay of at most 10 years, an absolute
    /// time not before 2000. Whether an absolute time is more than 10 years ahead needs the
    /// engine's clock; engines check it before their first write. (Here, beside the limits
    /// it checks, so that `time` does not depend on `limits`.)
    pub fn validate(self) -> Result<(), Error> {
        match self {
            Schedule::Delay(d) => check_delay(d),
            Schedule::At(at) => check_at(at),
        }
    }
}

/// The error for an absolute time more than 10 years after the engine's `now`.
pub fn at_too_far(at: Timestamp, now: Timestamp) -> Error {
    Error::InvalidDelay {
        reason: format!(
            "the absolute time {} ms is more than 10 years after the engine's clock ({} ms)",
            at.as_millis(),
            now.as_millis()
        ),
    }
}

/// Checks a lease length: 1 s to 24 h.
pub fn check_ttr(ttr: Duration) -> Result<(), Error> {
    if ttr < MIN_TTR || ttr > MAX_TTR {
        return Err(Error::InvalidTtr {
            ttr_ms: duration_ms(ttr),
        });
    }
    Ok(())
}

/// Checks a failure reason: at most 4 KiB, without a NUL character (which PostgreSQL's
/// text cannot hold, so no engine takes it).
pub fn check_reason(reason: Option<&str>) -> Result<(), Error> {
    match reason {
        Some(r) if r.len() > MAX_REASON => Err(Error::invalid(
            "reason",
            format!(
                "it is {} bytes, the limit is {MAX_REASON}; shorten it",
                r.len()
            ),
        )),
        Some(r) if r.contains('\0') => Err(Error::invalid(
            "reason",
            "it holds a NUL character (U+0000); remove it or replace it",
        )),
        _ => Ok(()),
    }
}

/// Checks a count of items in one call (batch push, reserve, ack batch, page size): 1 to 1000.
pub fn check_count(what: &'static str, n: usize) -> Result<(), Error> {
    if n == 0 || n > MAX_BATCH {
        return Err(Error::invalid(
            what,
            format!("{n} is outside 1 to {MAX_BATCH}; split larger work into several calls"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_round_up_to_the_millisecond_issue_36() {
        // See: issue 36.
        assert_eq!(due_after(1_000_600, 1000), 2001);
        assert_eq!(due_after(1_000_000, 1000), 2000);
        assert_eq!(due_after(1_000_001, 1), 1002);
        assert_eq!(due_after(1_000_999, 0), 1000);
    }

    #[test]
    fn delay_ranges() {
        assert!(check_delay(Duration::ZERO).is_ok());
        assert!(check_delay(MAX_DELAY).is_ok());
        assert!(matches!(
            check_delay(MAX_DELAY + Duration::from_millis(1)),
            Err(Error::InvalidDelay { .. })
        ));
        assert_eq!(delay_ms_ceil(Duration::from_micros(1)), 1);
        assert_eq!(delay_ms_ceil(Duration::from_millis(7)), 7);
    }

    #[test]
    fn absolute_seconds_are_refused() {
        let err = check_at(Timestamp::from_millis(1_700_000_000)).err();
        assert!(
            err.map(|e| e.to_string())
                .unwrap_or_default()
                .contains("not seconds")
        );
        assert!(check_at(Timestamp::from_millis(1_700_000_000_000)).is_ok());
    }

    #[test]
    fn ttr_ranges() {
        assert!(check_ttr(MIN_TTR).is_ok());
        assert!(check_ttr(MAX_TTR).is_ok());
        assert!(check_ttr(Duration::from_millis(999)).is_err());
        assert!(check_ttr(MAX_TTR + Duration::from_millis(1)).is_err());
    }
}
