//! [`Lateness`]: how late (and how often early) jobs were delivered.
//!
//! Values are microseconds in an HDR histogram (3 significant digits, up to 1 hour). Early
//! deliveries are counted apart and never enter the histogram.

use hdrhistogram::Histogram;

/// The highest value the histograms track: one hour, in µs.
const MAX_US: u64 = 3_600_000_000;

/// A recorder of lateness: delivery minus due time.
#[derive(Clone, Debug)]
pub struct Lateness {
    hist: Histogram<u64>,
    early: u64,
    earliest_us: u64,
}

/// What a [`Lateness`] recorded, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LatenessSummary {
    /// Deliveries recorded (on time or late).
    pub count: u64,
    /// Median lateness.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// The latest delivery.
    pub max_ms: f64,
    /// Deliveries before their due time.
    pub early: u64,
    /// How early the earliest of those was.
    pub earliest_ms: f64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness::new()
    }
}

impl Lateness {
    /// An empty recorder.
    pub fn new() -> Self {
        Lateness {
            // Constant bounds that hdrhistogram accepts: this cannot fail.
            hist: Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"),
            early: 0,
            earliest_us: 0,
        }
    }

    /// Records a delivery at `at_us` of a job due at `due_us` (both on one clock).
    pub fn record(&mut self, due_us: u64, at_us: u64) {
        if at_us < due_us {
            self.early += 1;
            self.earliest_us = self.earliest_us.max(due_us - at_us);
        } else {
            self.record_late(at_us - due_us);
        }
    }

    /// Records a delivery `late_us` after its due time.
    pub fn record_late(&mut self, late_us: u64) {
        self.hist.saturating_record(late_us.clamp(1, MAX_US));
    }

    /// Adds what `other` recorded.
    pub fn merge(&mut self, other: &Lateness) {
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
        self.early += other.early;
        self.earliest_us = self.earliest_us.max(other.earliest_us);
    }

    /// Deliveries recorded, on time, late or early.
    pub fn count(&self) -> u64 {
        self.hist.len() + self.early
    }

    /// The percentiles, in milliseconds.
    pub fn summary(&self) -> LatenessSummary {
        let ms = |us: u64| us as f64 / 1000.0;
        let q = |q: f64| {
            if self.hist.is_empty() {
                0.0
            } else {
                ms(self.hist.value_at_quantile(q))
            }
        };
        LatenessSummary {
            count: self.count(),
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            max_ms: if self.hist.is_empty() {
                0.0
            } else {
                ms(self.hist.max())
            },
            early: self.early,
            earliest_ms: ms(self.earliest_us),
        }
    }

    /// The cumulative distribution as `(lateness in ms, fraction of deliveries)` points,
    /// dense in the tail, for plotting.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        let mut qs: Vec<f64> = (0..=90).map(|i| i as f64 / 100.0).collect();
        qs.extend((0..90).map(|i| 0.9 + i as f64 / 1000.0));
        qs.extend((0..=100).map(|i| 0.99 + i as f64 / 10_000.0));
        qs.into_iter()
            .map(|q| (self.hist.value_at_quantile(q) as f64 / 1000.0, q))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_deliveries_are_counted_apart() {
        let mut l = Lateness::new();
        for late in [1_000, 2_000, 3_000, 4_000] {
            l.record(10_000, 10_000 + late);
        }
        l.record(10_000, 9_500);
        let s = l.summary();
        assert_eq!((s.count, s.early), (5, 1));
        assert!((s.earliest_ms - 0.5).abs() < 1e-9);
        assert!((s.max_ms - 4.0).abs() < 0.01, "{s:?}");
        let mut m = Lateness::new();
        m.merge(&l);
        assert_eq!(m.count(), 5);
        assert!(!m.cdf().is_empty());
    }
}
