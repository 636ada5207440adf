//! [`Job`]: what a handler receives: the decoded payload, the job's metadata and a
//! cancellation token that fires when the worker can no longer stand behind the delivery.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{JobId, Lease, LeaseToken, Topic};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// Why a job's cancellation token fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The engine answered that this delivery's lease is lost (it expired, or the job was
    /// deleted or redelivered), or the lease could not be renewed before it ended (the
    /// engine was unreachable). Another delivery may already be running: stop, and do not
    /// write anything more. The worker will neither ack nor nack this delivery, and stops
    /// the handler when the lease it last knew of ends.
    LeaseLost,
    /// The handler ran past [`crate::WorkerConfig::max_extension`]: the lease is no longer
    /// renewed and ends within the rest of its ttr (`1 - renew_fraction` of it). Finish or
    /// give up quickly: a result returned before the lease ends is still acked or nacked;
    /// a handler still running when it ends is aborted. Without renewal (`max_extension`
    /// zero) it fires only when the lease ends ([`Job::lease_end`]), as the handler is
    /// aborted.
    RenewalLimit,
    /// The worker is shutting down and the grace period is over. The handler has one more
    /// second: if it returns `Ok` the job is acked; if it fails or is still running (it is
    /// then aborted), the job is given back to the engine (released, attempt not counted)
    /// for another worker.
    Shutdown,
}

/// The cancellation of one delivery: the token handed to the handler and why it fired.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cancel {
    token: CancellationToken,
    reason: Arc<OnceLock<CancelReason>>,
}

impl Cancel {
    /// Fires the token; the first reason given is the one kept.
    pub(crate) fn fire(&self, reason: CancelReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    pub(crate) fn reason(&self) -> Option<CancelReason> {
        self.reason.get().copied()
    }
}

/// One delivery of a job, as a handler receives it.
///
/// It carries the payload decoded with `P` (see [`crate::Payload`]), the stored job
/// ([`delayq_core::Job`]: topic, id, attempts, body, ...), how late the delivery is, and a
/// cancellation token. The token fires when the lease is lost, when the renewal limit is
/// reached, or when the shutdown grace period ends ([`Job::cancel_reason`] says which); a
/// long handler should watch it ([`Job::cancelled`]) and pass it to the work it starts.
///
/// ```
/// use delayq_worker::{Job, Json};
///
/// async fn export(job: Job<Json<Vec<u64>>>) -> Result<(), std::io::Error> {
///     for id in job.payload().iter() {
///         tokio::select! {
///             _ = job.cancelled() => return Err(std::io::Error::other("cancelled")),
///             _ = export_one(*id) => {}
///         }
///     }
///     Ok(())
/// }
/// # async fn export_one(_: u64) {}
/// ```
#[derive(Debug)]
pub struct Job<P> {
    payload: P,
    meta: delayq_core::Job,
    lease: Option<Lease>,
    lease_end: Option<Instant>,
    lateness: Duration,
    cancel: Cancel,
}

impl<P> Job<P> {
    pub(crate) fn new(
        payload: P,
        meta: delayq_core::Job,
        lease: Option<(Lease, Instant)>,
        lateness: Duration,
        cancel: Cancel,
    ) -> Self {
        let (lease, lease_end) = lease.unzip();
        Job {
            payload,
            meta,
            lease,
            lease_end,
            lateness,
            cancel,
        }
    }

    /// The decoded payload.
    pub fn payload(&self) -> &P {
        &self.payload
    }

    /// The decoded payload, mutable.
    pub fn payload_mut(&mut self) -> &mut P {
        &mut self.payload
    }

    /// Takes the payload, dropping the rest.
    pub fn into_payload(self) -> P {
        self.payload
    }

    /// The stored job as the engine delivered it (state reserved, `attempts` counting this
    /// delivery).
    pub fn meta(&self) -> &delayq_core::Job {
        &self.meta
    }

    /// The topic.
    pub fn topic(&self) -> &Topic {
        &self.meta.topic
    }

    /// The id.
    pub fn id(&self) -> &JobId {
        &self.meta.id
    }

    /// The attempt number of this delivery (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.meta.attempts
    }

    /// Deliveries allowed before the job goes dead.
    pub fn max_attempts(&self) -> u32 {
        self.meta.max_attempts
    }

    /// True when a failure of this delivery sends the job to dead.
    pub fn is_last_attempt(&self) -> bool {
        self.meta.attempts >= self.meta.max_attempts
    }

    /// How late the delivery is: the engine's time at reserve minus the due time.
    pub fn lateness(&self) -> Duration {
        self.lateness
    }

    /// The raw body.
    pub fn body(&self) -> &Bytes {
        &self.meta.body
    }

    /// This delivery's fencing token (`None` in at-most-once mode). Tokens of a topic grow,
    /// so a downstream store can refuse writes carrying an older token than one it has seen.
    pub fn lease_token(&self) -> Option<LeaseToken> {
        self.lease.as_ref().map(|l| l.token)
    }

    /// When this delivery's lease ends, as the worker estimated it when the handler started
    /// (on the early side: the engine's deadline is no sooner); `None` in at-most-once mode.
    ///
    /// Renewals move the lease's end later, so with renewal (the default) this is only the
    /// first end. Without it ([`crate::WorkerConfig::max_extension`] zero) it is the end: a
    /// handler still running then is aborted and its job left to the engine, which counts
    /// the attempt. A handler that must fail with its own reason (a timeout of the work it
    /// waits for) returns a little before it, so that the nack arrives in time.
    pub fn lease_end(&self) -> Option<Instant> {
        self.lease_end
    }

    /// The cancellation token of this delivery; clone it into tasks the handler starts.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.cancel.token
    }

    /// Completes when the token fires.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.token.cancelled()
    }

    /// True once the token fired.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.token.is_cancelled()
    }

    /// Why the token fired, once it did.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.cancel.reason()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins() {
        let c = Cancel::default();
        assert_eq!(c.reason(), None);
        c.fire(CancelReason::RenewalLimit);
        c.fire(CancelReason::Shutdown);
        assert!(c.token.is_cancelled());
        assert_eq!(c.reason(), Some(CancelReason::RenewalLimit));
    }
}
