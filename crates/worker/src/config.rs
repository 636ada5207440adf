//! [`WorkerConfig`]: concurrency, prefetch, long-poll, renewal, shutdown and retry settings,
//! checked once when the worker is built.

use std::time::Duration;

use delayq_core::limits::MAX_WAIT;
use delayq_core::{DeliveryMode, Error, Result};

/// The largest accepted concurrency.
pub const MAX_CONCURRENCY: usize = 100_000;
/// The shortest accepted reserve wait: a worker long-polls, it never polls in a loop.
pub const MIN_WAIT: Duration = Duration::from_millis(100);
/// The largest accepted [`WorkerConfig::prefetch`].
pub const MAX_PREFETCH: usize = 100_000;
/// The default [`WorkerConfig::prefetch`].
pub const DEFAULT_PREFETCH: usize = 1000;
/// The accepted range of [`WorkerConfig::min_lease_left`]: a job handed to a handler with
/// less than 5 % of its lease left would need renewing at once; asking for more than 90 %
/// would renew nearly every buffered job before it starts.
pub const MIN_LEASE_LEFT_RANGE: std::ops::RangeInclusive<f64> = 0.05..=0.9;
/// The accepted range of [`WorkerConfig::renew_fraction`]: more often would touch the lease
/// in a tight loop, later would leave too little of the lease to renew in time.
pub const RENEW_FRACTION_RANGE: std::ops::RangeInclusive<f64> = 0.05..=0.75;

/// How a [`crate::Worker`] runs. Start from [`WorkerConfig::default`] and change what you
/// need with the `with_*` setters.
///
/// ```
/// use std::time::Duration;
/// use delayq_worker::WorkerConfig;
///
/// let config = WorkerConfig::default()
///     .with_concurrency(32)
///     .with_grace(Duration::from_secs(10));
/// assert_eq!(config.concurrency, 32);
/// assert_eq!(config.wait, Duration::from_secs(30));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// The most handlers running at once (default 10, at most 100,000).
    pub concurrency: usize,
    /// The most jobs the worker holds leased at once: those waiting in its local buffer
    /// plus those whose handler runs (default 1000; from `concurrency` to 100,000).
    ///
    /// The worker reserves in batches ahead of its handlers, so that fetching does not wait
    /// for handlers and handlers do not wait for round trips. How far ahead adapts: about
    /// the work of the next 100 ms at the handlers' observed speed, never less than
    /// `concurrency`, never more than `prefetch`; it falls back when reserves come back
    /// short, so workers sharing a short queue all get work. Lower it to keep fewer jobs
    /// away from other workers; at-most-once workers never hold more than `concurrency`
    /// (a buffered job is lost if the worker crashes). [`WorkerConfig::with_concurrency`]
    /// raises it to the concurrency when it is below.
    pub prefetch: usize,
    /// The least share of its lease a buffered job must have left when a handler starts on
    /// it (default 1/2; 0.05 to 0.9). A job that waited longer in the buffer is touched
    /// (its lease renewed) before the handler starts, or given back to the engine when no
    /// handler is free, so a handler always starts with at least this much of the ttr.
    pub min_lease_left: f64,
    /// How long one reserve waits for a job before asking again (default 30 s; 100 ms to 1 h).
    /// Waiting is event-driven in the engine: a due job ends the wait at once, so a long
    /// wait only makes an idle worker cheaper (it looks at the engine once per wait).
    /// Shutdown does not wait for it: an open reserve is abandoned.
    pub wait: Duration,
    /// At-least-once (the default: leases, acks, renewal, retries) or at-most-once.
    ///
    /// **At-most-once loses jobs**: the engine removes each job as it hands it out, so a
    /// handler that fails or panics, a worker that crashes or is killed, and a shutdown
    /// that ends while handlers run all lose the jobs involved; failures are logged and
    /// counted in [`crate::Report::dropped`], never retried. Use it only when losing a job
    /// is better than running it twice.
    pub mode: DeliveryMode,
    /// When to renew a running job's lease, as a fraction of its ttr (default 1/3: a job
    /// with a 30 s ttr is touched every 10 s; 0.05 to 0.75).
    pub renew_fraction: f64,
    /// The most a lease is extended beyond its first deadline by renewals (default 1 h).
    /// After that the worker stops renewing and fires the job's cancellation token; the
    /// handler has the rest of the lease to finish. Zero disables renewal: the lease is
    /// never touched while the handler runs, the handler has the whole of it (one ttr, at
    /// most) and its token fires only when it ends, as the handler is aborted.
    pub max_extension: Duration,
    /// How long shutdown waits for running handlers before it cancels them and releases
    /// their jobs (default 20 s). After it, a handler gets 1 s more to return once its token
    /// fired, and releasing takes one round trip: keep the sum below your orchestrator's kill
    /// timeout (Kubernetes: 30 s).
    pub grace: Duration,
    /// The first pause after the engine is unavailable (default 100 ms). It doubles after
    /// each failure up to [`WorkerConfig::retry_max`] and resets after a success.
    pub retry_initial: Duration,
    /// The longest pause between attempts while the engine is unavailable (default 5 s).
    pub retry_max: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: 10,
            prefetch: DEFAULT_PREFETCH,
            min_lease_left: 0.5,
            wait: Duration::from_secs(30),
            mode: DeliveryMode::AtLeastOnce,
            renew_fraction: 1.0 / 3.0,
            max_extension: Duration::from_secs(3600),
            grace: Duration::from_secs(20),
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(5),
        }
    }
}

impl WorkerConfig {
    /// Sets the most handlers running at once, and raises [`WorkerConfig::prefetch`] to
    /// `n` when it is below (the worker always holds at least as many jobs as it can run).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self.prefetch = self.prefetch.max(n);
        self
    }

    /// Sets the most jobs held leased at once (buffered and running).
    pub fn with_prefetch(mut self, n: usize) -> Self {
        self.prefetch = n;
        self
    }

    /// Sets the least share of its lease a buffered job must have left when a handler
    /// starts on it.
    pub fn with_min_lease_left(mut self, fraction: f64) -> Self {
        self.min_lease_left = fraction;
        self
    }

    /// Sets how long one reserve waits.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Sets the delivery mode (see [`WorkerConfig::mode`]: at-most-once loses jobs).
    pub fn with_mode(mut self, mode: DeliveryMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets when a lease is renewed, as a fraction of the ttr.
    pub fn with_renew_fraction(mut self, fraction: f64) -> Self {
        self.renew_fraction = fraction;
        self
    }

    /// Sets the most a lease is extended by renewals.
    pub fn with_max_extension(mut self, d: Duration) -> Self {
        self.max_extension = d;
        self
    }

    /// Sets the shutdown grace period.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets the pauses while the engine is unavailable.
    pub fn with_retry(mut self, initial: Duration, max: Duration) -> Self {
        self.retry_initial = initial;
        self.retry_max = max;
        self
    }

    /// Checks the ranges; [`Error::InvalidConfig`] says what to change.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return bad(format!(
                "worker concurrency {} is outside 1 to {MAX_CONCURRENCY}",
                self.concurrency
            ));
        }
        if self.prefetch < self.concurrency || self.prefetch > MAX_PREFETCH {
            return bad(format!(
                "worker prefetch {} is outside concurrency ({}) to {MAX_PREFETCH}: the worker holds at least as many jobs as it runs; set prefetch between the two (with_prefetch)",
                self.prefetch, self.concurrency
            ));
        }
        if !MIN_LEASE_LEFT_RANGE.contains(&self.min_lease_left) {
            return bad(format!(
                "worker min_lease_left {} is outside 0.05 to 0.9 (the share of its ttr a job must have left when its handler starts; 0.5 is the default)",
                self.min_lease_left
            ));
        }
        if self.wait < MIN_WAIT || self.wait > MAX_WAIT {
            return bad(format!(
                "worker wait of {} ms is outside 100 ms to 1 h (the engine wakes a waiting reserve as soon as a job is due, so a long wait costs nothing)",
                self.wait.as_millis()
            ));
        }
        if !RENEW_FRACTION_RANGE.contains(&self.renew_fraction) {
            return bad(format!(
                "worker renew_fraction {} is outside 0.05 to 0.75 (1/3 renews three times per ttr)",
                self.renew_fraction
            ));
        }
        if self.retry_initial.is_zero() || self.retry_initial > self.retry_max {
            return bad(format!(
                "worker retry pauses must satisfy 0 < initial ({} ms) <= max ({} ms)",
                self.retry_initial.as_millis(),
                self.retry_max.as_millis()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert!(WorkerConfig::default().validate().is_ok());
    }

    #[test]
    fn concurrency_raises_a_lower_prefetch() {
        let c = WorkerConfig::default().with_concurrency(5000);
        assert_eq!(c.prefetch, 5000);
        assert!(c.validate().is_ok());
        let c = WorkerConfig::default().with_concurrency(4);
        assert_eq!(c.prefetch, DEFAULT_PREFETCH);
    }

    #[test]
    fn errors_name_the_field() {
        let e = WorkerConfig::default().with_prefetch(3).validate();
        assert!(
            matches!(&e, Err(Error::InvalidConfig { reason }) if reason.contains("prefetch")),
            "{e:?}"
        );
        let e = WorkerConfig::default().with_min_lease_left(1.0).validate();
        assert!(
            matches!(&e, Err(Error::InvalidConfig { reason }) if reason.contains("min_lease_left")),
            "{e:?}"
        );
    }

    #[test]
    fn out_of_range_is_refused() {
        let d = WorkerConfig::default;
        let bad = [
            d().with_concurrency(0),
            d().with_concurrency(MAX_CONCURRENCY + 1),
            d().with_concurrency(20).with_prefetch(19),
            d().with_prefetch(0),
            d().with_prefetch(MAX_PREFETCH + 1),
            d().with_min_lease_left(0.0),
            d().with_min_lease_left(0.95),
            d().with_min_lease_left(f64::NAN),
            d().with_wait(MAX_WAIT + Duration::from_millis(1)),
            d().with_wait(Duration::ZERO),
            d().with_renew_fraction(0.0),
            d().with_renew_fraction(0.01),
            d().with_renew_fraction(0.9),
            d().with_renew_fraction(f64::NAN),
            d().with_retry(Duration::ZERO, Duration::from_secs(1)),
            d().with_retry(Duration::from_secs(2), Duration::from_secs(1)),
        ];
        for c in bad {
            assert!(
                matches!(c.validate(), Err(Error::InvalidConfig { .. })),
                "{c:?}"
            );
        }
    }
}
