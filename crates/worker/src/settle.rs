//! Settling a delivery with the engine: ack, nack, bury or release, retried while the engine
//! is unavailable and the lease lasts, and the outcome event of the job's span.

use std::future::Future;
use std::time::Duration;

use delayq_core::limits::{MAX_DELAY, MAX_REASON};
use delayq_core::{Acker, Engine, Error, Lease, Nack, NackOutcome};
use tokio::time::{Instant, sleep};

use crate::handler::{Failure, FailureKind};
use crate::renew::millis;
use crate::report::Outcome;

/// The most one release at shutdown is retried, so an unreachable engine cannot hold the
/// shutdown for a whole lease (the lease then ends by itself).
pub(crate) const RELEASE_BUDGET: Duration = Duration::from_secs(10);

/// Acks a successful delivery (batched with the other deliveries' acks).
pub(crate) async fn ack(
    acker: &Acker,
    lease: &Lease,
    until: Instant,
    elapsed: Duration,
) -> Outcome {
    match retry(until, || acker.ack(lease)).await {
        Ok(()) => {
            tracing::debug!(outcome = "acked", elapsed_ms = millis(elapsed), "job done");
            Outcome::Acked
        }
        Err(e) => not_recorded("ack", &e),
    }
}

/// Nacks (retry or dead, as the engine decides) or buries a failed delivery.
pub(crate) async fn fail<E: Engine + ?Sized>(
    engine: &E,
    lease: &Lease,
    failure: Failure,
    until: Instant,
    elapsed: Duration,
) -> Outcome {
    let reason = cut_reason(&failure.message);
    let delay = match failure.kind {
        FailureKind::Permanent => {
            return match retry(until, || engine.bury(lease, Some(reason.clone()))).await {
                Ok(()) => {
                    tracing::error!(outcome = "buried", elapsed_ms = millis(elapsed), reason = %reason, "job failed permanently: sent to dead");
                    Outcome::Buried
                }
                Err(e) => not_recorded("bury", &e),
            };
        }
        FailureKind::Retry => None,
        FailureKind::RetryAfter(d) => Some(d.min(MAX_DELAY)),
    };
    let nack = Nack {
        delay,
        reason: Some(reason.clone()),
    };
    match retry(until, || engine.nack(lease, nack.clone())).await {
        Ok(NackOutcome::Retry { ready_at }) => {
            tracing::warn!(outcome = "retried", elapsed_ms = millis(elapsed), retry_at_ms = ready_at.as_millis(), reason = %reason, "job failed: retry scheduled");
            Outcome::Retried
        }
        Ok(NackOutcome::Dead) => {
            tracing::error!(outcome = "dead", elapsed_ms = millis(elapsed), reason = %reason, "job failed on its last attempt: sent to dead");
            Outcome::Buried
        }
        Err(e) => not_recorded("nack", &e),
    }
}

/// Releases a delivery at shutdown: ready again at once, attempt not counted.
pub(crate) async fn release<E: Engine + ?Sized>(
    engine: &E,
    lease: &Lease,
    lease_end: Instant,
) -> Outcome {
    let until = lease_end.min(Instant::now() + RELEASE_BUDGET);
    match retry(until, || engine.release(lease)).await {
        Ok(()) => {
            tracing::info!(
                outcome = "released",
                "shutdown: job given back to the engine"
            );
            Outcome::Released
        }
        Err(e) => not_recorded("release", &e),
    }
}

fn not_recorded(what: &str, e: &Error) -> Outcome {
    match e {
        Error::LeaseLost { .. } => tracing::warn!(
            outcome = "lease_lost",
            "cannot {what}: the lease was lost (expired, deleted, or the job was redelivered); the engine decides what happens next"
        ),
        e => tracing::error!(
            outcome = "not_recorded",
            error = %e,
            "cannot {what}: the job comes back when its lease ends"
        ),
    }
    Outcome::Failed
}

/// Runs `call` until it succeeds, fails with something other than `Unavailable`, or
/// `until` passes (then the last error is returned).
pub(crate) async fn retry<T, F, Fut>(until: Instant, mut call: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut pause = Duration::from_millis(50);
    loop {
        match call().await {
            Err(e) if e.is_retryable() && Instant::now() + pause < until => {
                tracing::warn!(error = %e, retry_in_ms = millis(pause), "engine unavailable; retrying");
                sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => return other,
        }
    }
}

/// A failure reason within the contract's 4 KiB, cut at a character boundary.
pub(crate) fn cut_reason(message: &str) -> String {
    if message.len() <= MAX_REASON {
        return message.to_owned();
    }
    const MARK: &str = "...";
    let mut end = MAX_REASON - MARK.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_cut_to_the_limit_at_a_char_boundary() {
        assert_eq!(cut_reason("short"), "short");
        let exact = "x".repeat(MAX_REASON);
        assert_eq!(cut_reason(&exact), exact);
        let long = "é".repeat(MAX_REASON);
        let cut = cut_reason(&long);
        assert!(cut.len() <= MAX_REASON, "{}", cut.len());
        assert!(cut.ends_with("..."));
        assert!(delayq_core::limits::check_reason(Some(&cut)).is_ok());
    }
}
