//! Time on the engine's clock: [`Timestamp`] (Unix milliseconds) and [`Schedule`] (when a job is due).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time in whole milliseconds since the Unix epoch, on the engine's clock
/// (Redis `TIME` for the Redis engine, the engine process's clock for the embedded one).
///
/// Every value up to the year 287,396 fits a double exactly, so Redis sorted-set scores
/// hold it without rounding.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// "Never": the largest millisecond count a Lua number (a double) and SQLite hold
    /// exactly (2^53 - 1, some 285,000 years from now); an indefinite pause ends then.
    pub const NEVER: Timestamp = Timestamp((1 << 53) - 1);

    /// A timestamp from milliseconds since the Unix epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// This machine's wall clock now. Engines use their own clock to decide when jobs are due;
    /// this is for producers that compute absolute times (`Schedule::At`).
    pub fn now() -> Self {
        SystemTime::now().into()
    }

    /// `self + d`, saturating.
    pub fn plus(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_ms(d)))
    }

    /// The time from `earlier` to `self`, or zero when `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        Timestamp(t.duration_since(UNIX_EPOCH).map(duration_ms).unwrap_or(0))
    }
}

impl From<Timestamp> for SystemTime {
    fn from(t: Timestamp) -> Self {
        UNIX_EPOCH + Duration::from_millis(t.0)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0)
    }
}

/// A duration in whole milliseconds, saturating at `u64::MAX`.
pub fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// When a job becomes due.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Schedule {
    /// Due this long after the engine receives the push (0 ms to 10 years, ms resolution;
    /// sub-millisecond parts are rounded up so a job is never due early).
    Delay(Duration),
    /// Due at this absolute time on the engine's clock (at most 10 years ahead). A time in the
    /// past means "due now"; times before 2000-01-01 are refused because they are almost
    /// always seconds passed where milliseconds were meant.
    At(Timestamp),
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule::Delay(Duration::ZERO)
    }
}

impl Schedule {
    /// Due now.
    pub const NOW: Schedule = Schedule::Delay(Duration::ZERO);
}

impl From<Duration> for Schedule {
    fn from(d: Duration) -> Self {
        Schedule::Delay(d)
    }
}

impl From<Timestamp> for Schedule {
    fn from(t: Timestamp) -> Self {
        Schedule::At(t)
    }
}

impl From<SystemTime> for Schedule {
    fn from(t: SystemTime) -> Self {
        Schedule::At(t.into())
    }
}
