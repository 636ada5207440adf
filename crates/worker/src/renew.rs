//! Lease renewal: while a handler runs, touch its lease every `renew_fraction` of the ttr,
//! up to `max_extension`; then fire the job's token and wait for the lease to end. A
//! `max_extension` of zero is no renewal: no touch and no early token, the handler has its
//! whole lease, and the token fires when the lease ends.
//!
//! Times are local monotonic estimates of the engine's deadlines, always on the early side:
//! a touch extends the lease to the engine's now + ttr, and the engine's now is after the
//! moment the touch was sent, so `sent + ttr` is never later than the real deadline. The
//! fetch loop estimates a reserved job's first lease end the same way, from when the reserve
//! was sent; for a long-poll, which may have waited long before the engine leased the job,
//! from when its reply arrived less a small margin for the reply's travel.

use std::time::Duration;

use delayq_core::{Engine, Lease};
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::context::{Cancel, CancelReason};

/// The margin taken off a long-poll's lease for the time its reply travelled: 2 % of the ttr,
/// between 5 ms and 1 s.
pub(crate) fn reply_margin(ttr: Duration) -> Duration {
    (ttr / 50).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

/// The renewal of one delivery's lease.
pub(crate) struct Renewal<'a, E: ?Sized> {
    engine: &'a E,
    lease: &'a Lease,
    cancel: &'a Cancel,
    ttr: Duration,
    /// The time between touches.
    interval: Duration,
    /// The latest a renewal may push the lease end to; `None` for no limit.
    limit: Option<Instant>,
    /// False for no renewal (`max_extension` zero): the lease is left to run out untouched.
    renews: bool,
    /// The pause before retrying a touch that failed with something other than lease lost.
    retry_initial: Duration,
    renew_at: Instant,
    lease_end: Instant,
    lost: bool,
}

/// The settings of a [`Renewal`], taken from the worker's configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RenewPolicy {
    pub(crate) fraction: f64,
    pub(crate) max_extension: Duration,
    pub(crate) retry_initial: Duration,
}

impl<'a, E: Engine + ?Sized> Renewal<'a, E> {
    /// A lease of `ttr` estimated to end at `lease_end`: renewed every `fraction` of the ttr
    /// counted from its start (at once when the job waited in the buffer longer than that).
    pub(crate) fn new(
        engine: &'a E,
        lease: &'a Lease,
        cancel: &'a Cancel,
        ttr: Duration,
        lease_end: Instant,
        policy: RenewPolicy,
    ) -> Self {
        let start = lease_end.checked_sub(ttr).unwrap_or(lease_end);
        let interval = ttr.mul_f64(policy.fraction).max(Duration::from_millis(1));
        Renewal {
            engine,
            lease,
            cancel,
            ttr,
            interval,
            limit: lease_end.checked_add(policy.max_extension),
            renews: !policy.max_extension.is_zero(),
            retry_initial: policy.retry_initial.min(interval),
            renew_at: start + interval,
            lease_end,
            lost: false,
        }
    }

    /// The local estimate of when the lease ends.
    pub(crate) fn lease_end(&self) -> Instant {
        self.lease_end
    }

    /// True when the lease was lost (or could not be renewed before it ended): the worker
    /// must neither ack nor nack this delivery.
    pub(crate) fn lost(&self) -> bool {
        self.lost
    }

    /// Renews the lease for as long as it may, then waits for the lease to end. When this
    /// returns, the delivery's lease is over: the worker no longer stands behind it.
    pub(crate) async fn run(&mut self) {
        if !self.renews {
            // No renewal: no limit to reach before the end, so nothing fires early.
            sleep_until(self.lease_end).await;
            self.cancel.fire(CancelReason::RenewalLimit);
            return;
        }
        let mut pause = self.retry_initial;
        loop {
            sleep_until(self.renew_at).await;
            let sent = Instant::now();
            if self.limit.is_some_and(|limit| sent + self.ttr > limit) {
                tracing::warn!(
                    lease_left_ms = millis(self.lease_end.saturating_duration_since(sent)),
                    "renewal limit reached (max_extension): the lease is no longer renewed, cancelling the handler"
                );
                self.cancel.fire(CancelReason::RenewalLimit);
                break;
            }
            match timeout_at(self.lease_end, self.engine.touch(self.lease, None)).await {
                Ok(Ok(_)) => {
                    self.lease_end = sent + self.ttr;
                    self.renew_at = sent + self.interval;
                    pause = self.retry_initial;
                    tracing::trace!("lease renewed");
                }
                Ok(Err(e)) if e.ends_delivery() => {
                    tracing::warn!(
                        error = %e,
                        "lease lost while the handler runs (expired, deleted or redelivered): cancelling the handler; this delivery will not be acked or nacked"
                    );
                    self.lose();
                    break;
                }
                Ok(Err(e)) => {
                    let now = Instant::now();
                    if now >= self.lease_end {
                        self.lose();
                        break;
                    }
                    tracing::warn!(error = %e, retry_in_ms = millis(pause), "cannot renew the lease; retrying");
                    self.renew_at = (now + pause).min(self.lease_end);
                    pause = (pause * 2).min(self.interval);
                }
                Err(_) => {
                    tracing::warn!(
                        "the lease ended before a renewal was answered: cancelling the handler; this delivery will not be acked or nacked"
                    );
                    self.lose();
                    break;
                }
            }
        }
        sleep_until(self.lease_end).await;
    }

    fn lose(&mut self) {
        self.lost = true;
        self.cancel.fire(CancelReason::LeaseLost);
    }
}

/// Whole milliseconds, for log fields.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_is_bounded() {
        assert_eq!(
            reply_margin(Duration::from_secs(1)),
            Duration::from_millis(20)
        );
        assert_eq!(
            reply_margin(Duration::from_millis(100)),
            Duration::from_millis(5)
        );
        assert_eq!(
            reply_margin(Duration::from_secs(3600)),
            Duration::from_secs(1)
        );
    }
}
