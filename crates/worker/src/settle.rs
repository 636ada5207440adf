//! A delivery's outcome as the engine records it: ack, nack or bury after the handler, release
//! at shutdown, each sent through the worker's [`Settler`] (so it rides with the next reserve)
//! and retried there while the engine is unavailable and the lease lasts; and the outcome
//! event of the job's span.

use std::time::Duration;

use delayq_core::limits::{MAX_DELAY, MAX_REASON};
use delayq_core::{Error, Lease, Nack, NackOutcome, Settle, Settled};
use tokio::time::Instant;

use crate::handler::{Failure, FailureKind};
use crate::renew::millis;
use crate::report::Outcome;
use crate::settler::Settler;

/// The most one release at shutdown is retried, so an unreachable engine cannot hold the
/// shutdown for a whole lease (the lease then ends by itself).
pub(crate) const RELEASE_BUDGET: Duration = Duration::from_secs(10);

/// Acks a successful delivery that ran for `ran`.
pub(crate) async fn ack(
    settler: &Settler,
    lease: &Lease,
    until: Instant,
    ran: Duration,
) -> Outcome {
    match settler
        .settle(Settle::Ack(lease.clone()), until, Some(ran))
        .await
    {
        Ok(_) => {
            tracing::debug!(outcome = "acked", elapsed_ms = millis(ran), "job done");
            Outcome::Acked
        }
        Err(e) => not_recorded("ack", &e),
    }
}

/// Nacks (retry or dead, as the engine decides) or buries a failed delivery.
pub(crate) async fn fail(
    settler: &Settler,
    lease: &Lease,
    failure: Failure,
    until: Instant,
    ran: Duration,
) -> Outcome {
    let reason = cut_reason(&failure.message);
    let (what, settle) = match failure.kind {
        FailureKind::Permanent => ("bury", Settle::Bury(lease.clone(), Some(reason.clone()))),
        kind => {
            let delay = match kind {
                FailureKind::RetryAfter(d) => Some(d.min(MAX_DELAY)),
                _ => None,
            };
            let nack = Nack {
                delay,
                reason: Some(reason.clone()),
            };
            ("nack", Settle::Nack(lease.clone(), nack))
        }
    };
    let elapsed_ms = millis(ran);
    match settler.settle(settle, until, Some(ran)).await {
        Ok(Settled::Nacked(NackOutcome::Retry { ready_at })) => {
            tracing::warn!(outcome = "retried", elapsed_ms, retry_at_ms = ready_at.as_millis(), reason = %reason, "job failed: retry scheduled");
            Outcome::Retried
        }
        Ok(Settled::Nacked(NackOutcome::Dead)) => {
            tracing::error!(outcome = "dead", elapsed_ms, reason = %reason, "job failed on its last attempt: sent to dead");
            Outcome::Buried
        }
        Ok(_) => {
            tracing::error!(outcome = "buried", elapsed_ms, reason = %reason, "job failed permanently: sent to dead");
            Outcome::Buried
        }
        Err(e) => not_recorded(what, &e),
    }
}

/// Releases a delivery at shutdown: ready again at once, attempt not counted.
pub(crate) async fn release(settler: &Settler, lease: &Lease, lease_end: Instant) -> Outcome {
    let until = lease_end.min(Instant::now() + RELEASE_BUDGET);
    match settler
        .settle(Settle::Release(lease.clone()), until, None)
        .await
    {
        Ok(_) => {
            tracing::info!(
                outcome = "released",
                "shutdown: job given back to the engine"
            );
            Outcome::Released
        }
        Err(e) => not_recorded("release", &e),
    }
}

/// Gives back a job no handler started (its lease could not be renewed first); not counted.
pub(crate) async fn give_back(settler: &Settler, lease: &Lease, lease_end: Instant) {
    match settler
        .settle(Settle::Release(lease.clone()), lease_end, None)
        .await
    {
        Ok(_) => tracing::info!("job given back to the engine before its handler started"),
        Err(e) => {
            not_recorded("release", &e);
        }
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
