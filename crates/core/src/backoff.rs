//! The retry back-off policy and the one formula both engines use.

use std::time::Duration;

use crate::Error;
use crate::limits::MAX_DELAY;
use crate::time::duration_ms;

/// How long a failed job waits before its next attempt.
///
/// The delay before attempt `n + 1`, after `n` failed attempts, is
/// `min(max, base * factor^(n - 1))`, then reduced by up to `jitter` of itself at random
/// (so jitter never makes a retry later than the policy says). [`Backoff::fixed`] is the case
/// `factor = 1`.
///
/// ```
/// use std::time::Duration;
/// use delayq_core::Backoff;
/// let b = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60));
/// assert_eq!(b.delay(1, 0.0), Duration::from_secs(1));
/// assert_eq!(b.delay(3, 0.0), Duration::from_secs(4));
/// assert_eq!(b.delay(30, 0.0), Duration::from_secs(60));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Backoff {
    base_ms: u64,
    factor: u32,
    max_ms: u64,
    jitter_permille: u32,
}

impl Default for Backoff {
    /// Exponential from 1 s, doubling, capped at 1 h, with 10 % jitter.
    fn default() -> Self {
        Backoff {
            base_ms: 1_000,
            factor: 2,
            max_ms: 3_600_000,
            jitter_permille: 100,
        }
    }
}

impl Backoff {
    /// The same delay before every retry, no jitter.
    pub fn fixed(delay: Duration) -> Self {
        let ms = duration_ms(delay);
        Backoff {
            base_ms: ms,
            factor: 1,
            max_ms: ms,
            jitter_permille: 0,
        }
    }

    /// A delay that doubles from `base` up to `max`, no jitter.
    pub fn exponential(base: Duration, max: Duration) -> Self {
        Backoff {
            base_ms: duration_ms(base),
            factor: 2,
            max_ms: duration_ms(max),
            jitter_permille: 0,
        }
    }

    /// Sets the growth factor (1 = fixed, 2 = doubling, ... up to 100).
    pub fn with_factor(mut self, factor: u32) -> Self {
        self.factor = factor;
        self
    }

    /// Sets the jitter: each delay is reduced by a random fraction of up to `ratio` of itself
    /// (0.0 to 1.0, kept to 0.1 % steps). Spreads retries of jobs that failed together.
    pub fn with_jitter(mut self, ratio: f64) -> Self {
        self.jitter_permille = if ratio.is_finite() {
            (ratio * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32
        } else {
            u32::MAX
        };
        self
    }

    /// Builds a policy from its stored parts (engines use this when reading a job back).
    pub fn from_parts(base_ms: u64, factor: u32, max_ms: u64, jitter_permille: u32) -> Self {
        Backoff {
            base_ms,
            factor,
            max_ms,
            jitter_permille,
        }
    }

    /// The first delay, in milliseconds.
    pub fn base_ms(&self) -> u64 {
        self.base_ms
    }
    /// The growth factor.
    pub fn factor(&self) -> u32 {
        self.factor
    }
    /// The cap, in milliseconds.
    pub fn max_ms(&self) -> u64 {
        self.max_ms
    }
    /// The jitter in thousandths.
    pub fn jitter_permille(&self) -> u32 {
        self.jitter_permille
    }

    /// Checks the ranges: delays within 0 ms to 10 years, `base <= max`, factor 1 to 100,
    /// jitter 0 to 1.
    pub fn validate(&self) -> Result<(), Error> {
        let max_delay = duration_ms(MAX_DELAY);
        if self.max_ms > max_delay {
            return Err(Error::invalid(
                "backoff",
                format!("the cap of {} ms is over 10 years", self.max_ms),
            ));
        }
        if self.base_ms > self.max_ms {
            return Err(Error::invalid(
                "backoff",
                format!(
                    "the base delay ({} ms) is larger than the cap ({} ms)",
                    self.base_ms, self.max_ms
                ),
            ));
        }
        if !(1..=100).contains(&self.factor) {
            return Err(Error::invalid(
                "backoff",
                format!("the factor {} is outside 1 to 100", self.factor),
            ));
        }
        if self.jitter_permille > 1000 {
            return Err(Error::invalid(
                "backoff",
                "the jitter must be between 0.0 and 1.0",
            ));
        }
        Ok(())
    }

    /// The delay after `failed_attempts` failures (1 for the first), with `rand` in `[0, 1)`
    /// choosing the jitter. The Redis engine's Lua computes the same formula.
    pub fn delay(&self, failed_attempts: u32, rand: f64) -> Duration {
        let mut ms = self.base_ms.min(self.max_ms);
        for _ in 1..failed_attempts.max(1) {
            if ms >= self.max_ms || self.factor <= 1 {
                break;
            }
            ms = ms.saturating_mul(u64::from(self.factor)).min(self.max_ms);
        }
        let jitter =
            (ms as f64) * (f64::from(self.jitter_permille) / 1000.0) * rand.clamp(0.0, 1.0);
        Duration::from_millis(ms.saturating_sub(jitter.floor() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_is_constant() {
        let b = Backoff::fixed(Duration::from_millis(1500));
        for n in [1, 2, 10, u32::MAX] {
            assert_eq!(b.delay(n, 0.9), Duration::from_millis(1500));
        }
    }

    #[test]
    fn exponential_grows_and_caps() {
        let b = Backoff::exponential(Duration::from_millis(100), Duration::from_millis(1000))
            .with_factor(3);
        let got: Vec<u64> = (1..=5)
            .map(|n| b.delay(n, 0.0).as_millis() as u64)
            .collect();
        assert_eq!(got, vec![100, 300, 900, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX, 0.0), Duration::from_millis(1000));
    }

    #[test]
    fn jitter_only_shortens() {
        let b = Backoff::fixed(Duration::from_secs(10)).with_jitter(0.5);
        assert_eq!(b.delay(1, 0.0), Duration::from_secs(10));
        assert_eq!(b.delay(1, 0.5), Duration::from_millis(7500));
        assert!(b.delay(1, 0.999_999) > Duration::from_secs(5));
    }

    #[test]
    fn validation() {
        assert!(Backoff::default().validate().is_ok());
        assert!(Backoff::fixed(Duration::ZERO).validate().is_ok());
        let bad = [
            Backoff::exponential(Duration::from_secs(2), Duration::from_secs(1)),
            Backoff::default().with_factor(0),
            Backoff::default().with_factor(101),
            Backoff::default().with_jitter(1.5),
            Backoff::default().with_jitter(f64::NAN),
            Backoff::fixed(MAX_DELAY + Duration::from_millis(1)),
        ];
        for b in bad {
            assert!(
                matches!(
                    b.validate(),
                    Err(Error::InvalidArgument {
                        what: "backoff",
                        ..
                    })
                ),
                "{b:?}"
            );
        }
    }
}
