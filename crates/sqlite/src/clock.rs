//! The engine clock: the wall clock read once when the engine opens, advanced by the
//! monotonic clock from then on.
//!
//! A step of the system clock (NTP, an operator running `date`) after the engine opened
//! therefore neither fires jobs early nor holds them back; the engine's time moves at the
//! pace of the monotonic clock. A reopen anchors again, so the engine follows the wall
//! clock across restarts.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_core::Timestamp;

/// The engine's clock. Copied freely; every copy reads the same time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    base: Instant,
    base_us: u64,
}

impl Clock {
    /// Anchors the clock to the wall clock now.
    pub(crate) fn start() -> Self {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Clock::anchored(Instant::now(), u64::try_from(wall.as_micros()).unwrap_or(0))
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
    fn far_times_do_not_overflow() {
        let clock = Clock::start();
        assert!(clock.instant_of(u64::MAX) > Instant::now());
    }
}
