//! Maps Redis `TIME` to this process's monotonic clock, so a waiter can sleep until a due
//! time on a local timer and wake no earlier than Redis reaches it.
//!
//! Every reserve reply carries Redis's "now" (µs). A reply received at local instant `t`
//! says Redis read `R` no later than `t`, so Redis time `X` comes no later than
//! `t + (X - R)`: an upper bound. The tightest recent bound is kept (largest `R - t`); it is
//! replaced when a new sample is as tight or when it is older than [`MAX_AGE`], so drift
//! between the two clocks cannot accumulate.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the tightest sample is trusted before a newer one replaces it.
const MAX_AGE: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(crate) struct Clock {
    base: Instant,
    best: Mutex<Option<Sample>>,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Redis µs minus local µs since `base`, at the sample.
    offset_us: i128,
    taken: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            base: Instant::now(),
            best: Mutex::new(None),
        }
    }

    /// Records a function reply carrying Redis time `redis_us`, received at `received`.
    pub(crate) fn observe(&self, redis_us: u64, received: Instant) {
        let local_us = received.saturating_duration_since(self.base).as_micros() as i128;
        let offset_us = i128::from(redis_us) - local_us;
        let sample = Sample {
            offset_us,
            taken: received,
        };
        let mut best = self.best.lock().unwrap_or_else(|e| e.into_inner());
        match *best {
            Some(b) if b.offset_us > offset_us && received.duration_since(b.taken) < MAX_AGE => {}
            _ => *best = Some(sample),
        }
    }

    /// The local instant by which Redis's clock will have reached `redis_ms`, rounded up to
    /// the next millisecond; `None` before any sample.
    pub(crate) fn local_instant(&self, redis_ms: u64) -> Option<Instant> {
        let best = (*self.best.lock().unwrap_or_else(|e| e.into_inner()))?;
        let local_us = i128::from(redis_ms) * 1000 - best.offset_us;
        let local_us = (local_us.max(0) as u128).div_ceil(1000) * 1000;
        Some(self.base + Duration::from_micros(u64::try_from(local_us).unwrap_or(u64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_is_never_early_and_keeps_the_tightest_sample() {
        let clock = Clock::new();
        assert!(clock.local_instant(1).is_none());
        let t0 = clock.base + Duration::from_millis(10);
        // Redis read 1_000_000 µs, we received the reply at base + 10 ms.
        clock.observe(1_000_000, t0);
        // Redis ms 1_050 is 50 ms after the sample: no earlier than t0 + 50 ms.
        let at = clock.local_instant(1_050).unwrap_or(t0);
        assert_eq!(at, t0 + Duration::from_millis(50));
        // A looser sample (reply delayed by 3 ms) does not replace the tight one.
        clock.observe(1_001_000, t0 + Duration::from_millis(4));
        assert_eq!(
            clock.local_instant(1_050),
            Some(t0 + Duration::from_millis(50))
        );
        // A tighter one does.
        clock.observe(1_002_000, t0 + Duration::from_millis(1));
        assert_eq!(
            clock.local_instant(1_050),
            Some(t0 + Duration::from_millis(49))
        );
    }

    #[test]
    fn stale_samples_are_replaced() {
        let clock = Clock::new();
        let t0 = clock.base;
        clock.observe(5_000_000, t0);
        let later = t0 + MAX_AGE + Duration::from_millis(1);
        clock.observe(5_000_000, later);
        assert_eq!(clock.local_instant(5_000), Some(later));
    }
}
