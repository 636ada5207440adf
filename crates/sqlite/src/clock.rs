//! The engine clock: the wall clock read once when the engine opens, advanced by the
//! monotonic clock from then on, and never earlier than the time the data directory was
//! last written at.
//!
//! A step of the system clock (NTP, an operator running `date`) after the engine opened
//! therefore neither fires jobs early nor holds them back; the engine's time moves at the
//! pace of the monotonic clock, and a lease keeps its real length.
//!
//! A reopen anchors again, so the engine follows the wall clock across restarts, with one
//! exception: its time never goes backwards. Every group commit that writes also raises a
//! high-water mark, the engine's time at that commit, kept in the `meta` table (written
//! inside the commit it belongs to: no extra write to disk, no extra fsync). Opening anchors
//! at `max(wall clock, mark)` and logs a warning when the wall clock is behind the mark. So
//! when the system clock was set back before a restart, the engine carries on from where
//! it stopped: a lease granted before still ends after its real length, not an hour later,
//! and a job's due time stays where it was on the engine's time line; meanwhile the
//! engine's time runs ahead of the wall clock by the step, until the next reopen after the
//! wall clock has caught up.
//!
//! What cannot be told apart: a system clock stepped *forward* while the engine was closed
//! looks exactly like time that really passed. After such a restart, jobs due within the
//! step fire at once and leases within it expire (their jobs are retried, as after a long
//! stop). A step forward while the engine runs changes nothing until the next reopen.
//! The mark only moves at commits that write, so reads of `now()` after the last such
//! commit (which persist nothing) may be ahead of the time a reopen starts from.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_core::Timestamp;
use rusqlite::Connection;

/// The engine's clock. Copied freely; every copy reads the same time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    base: Instant,
    base_us: u64,
}

impl Clock {
    /// Anchors the clock to the wall clock now, or to `mark_ms` (the high-water mark of a
    /// data directory, 0 for none) when the wall clock is behind it, with a warning.
    pub(crate) fn start(mark_ms: u64) -> Self {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let wall_us = u64::try_from(wall.as_micros()).unwrap_or(0);
        let mark_us = mark_ms.saturating_mul(1000);
        if wall_us < mark_us {
            tracing::warn!(
                behind_ms = (mark_us - wall_us) / 1000,
                "the system clock is behind the time this data directory was last written at (was it set back?); the engine's time goes on from that time instead, so no job fires early and no lease lasts longer than its ttr; check the machine's time synchronisation"
            );
        }
        Clock::anchored(Instant::now(), wall_us.max(mark_us))
    }

    /// A clock that reads `base_us` (µs since the Unix epoch) at the instant `base`.
    pub(crate) fn anchored(base: Instant, base_us: u64) -> Self {
        Clock { base, base_us }
    }

    /// Microseconds since the Unix epoch.
    pub(crate) fn now_us(&self) -> u64 {
        let elapsed = u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.base_us.saturating_add(elapsed)
    }

    /// Milliseconds since the Unix epoch.
    pub(crate) fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// Now as a timestamp.
    pub(crate) fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.now_ms())
    }

    /// The first instant at which [`Clock::now_ms`] reads `ms` or later: a timer set to it
    /// never fires before the engine's time reaches `ms`.
    pub(crate) fn instant_of(&self, ms: u64) -> Instant {
        let target_us = ms.saturating_mul(1000);
        match target_us.checked_sub(self.base_us) {
            Some(ahead) => self
                .base
                .checked_add(Duration::from_micros(ahead))
                // Centuries ahead: a timer that never fires in this process's life.
                .unwrap_or_else(|| self.base + Duration::from_secs(100 * 365 * 86_400)),
            None => self.base,
        }
    }
}

/// The high-water mark stored in the database: the engine's time (ms) at its last commit
/// that wrote.
pub(crate) fn read_mark(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT value FROM meta WHERE key = 'clock_ms'", [], |r| {
        r.get(0)
    })
}

/// Raises the high-water mark to `now_ms`, inside the writer's open transaction.
pub(crate) fn write_mark(conn: &Connection, now_ms: u64) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'clock_ms' AND value < ?1")?
        .execute([now_ms])
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_anchor_plus_monotonic_time() {
        let base = Instant::now();
        let clock = Clock::anchored(base, 1_700_000_000_000_000);
        let ms = clock.now_ms();
        assert!((1_700_000_000_000..1_700_000_010_000).contains(&ms), "{ms}");
    }

    #[test]
    fn a_timer_never_fires_before_its_time() {
        let base = Instant::now();
        // The anchor is 0.7 ms into millisecond 1_000.
        let clock = Clock::anchored(base, 1_000_700);
        assert_eq!(clock.instant_of(1_001), base + Duration::from_micros(300));
        assert_eq!(clock.instant_of(1_000), base);
        assert_eq!(clock.instant_of(5), base);
        // At the instant for a time, now reads at least that time.
        let target = clock.now_ms() + 3;
        let at = clock.instant_of(target);
        while Instant::now() < at {
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(clock.now_ms() >= target);
    }

    #[test]
    fn never_starts_before_the_mark() {
        let wall = Clock::start(0).now_ms();
        let ahead = wall + 3_600_000;
        let clock = Clock::start(ahead);
        let now = clock.now_ms();
        assert!(
            (ahead..ahead + 10_000).contains(&now),
            "{now} vs mark {ahead}"
        );
        // A mark behind the wall clock changes nothing.
        let now = Clock::start(wall - 3_600_000).now_ms();
        assert!((wall..wall + 10_000).contains(&now), "{now} vs wall {wall}");
    }

    #[test]
    fn the_mark_only_rises() {
        let mut conn = Connection::open_in_memory().expect("open");
        crate::schema::migrate(&mut conn, std::path::Path::new(":memory:")).expect("migrate");
        assert_eq!(read_mark(&conn).expect("read"), 0);
        write_mark(&conn, 5_000).expect("write");
        write_mark(&conn, 4_000).expect("write");
        assert_eq!(read_mark(&conn).expect("read"), 5_000);
    }

    #[test]
    fn far_times_do_not_overflow() {
        let clock = Clock::start(0);
        assert!(clock.instant_of(u64::MAX) > Instant::now());
    }
}
