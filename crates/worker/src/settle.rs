//! A delivery's outcome as the engine records it: ack, nack or bury after the handler, release
//! at shutdown. A supervisor builds an [`Outgoing`] and hands it to the fetch loop, which
//! sends it with its next call (retried there while the engine is unavailable and the lease
//! lasts); no one waits for the answer: [`answered`] logs the outcome event and says what
//! the report counts.

use std::time::Duration;

use delayq_core::limits::{MAX_DELAY, MAX_REASON};
use delayq_core::{Error, Lease, Nack, NackOutcome, Result, Settle, Settled};
use tokio::time::Instant;

use crate::handler::{Failure, FailureKind};
use crate::renew::millis;
use crate::report::Outcome;

/// The most one release at shutdown is retried, so an unreachable engine cannot hold the
/// shutdown for a whole lease (the lease then ends by itself).
pub(crate) const RELEASE_BUDGET: Duration = Duration::from_secs(10);

/// A delivery's settlement on its way to the fetch loop's outbox.
pub(crate) struct Outgoing {
    pub(crate) settle: Settle,
    /// The fetch loop retries while the engine is unavailable, until this passes (the
    /// lease is over by then, or the release budget spent).
    pub(crate) until: Instant,
    /// How long the handler ran, for the window's estimate of handler speed.
    pub(crate) ran: Option<Duration>,
    /// What the answer means, for the log and the report.
    pub(crate) then: Then,
}

/// What a settlement was for, so that its answer can be logged and counted.
#[derive(Debug)]
pub(crate) enum Then {
    /// The handler succeeded after running for `ran`.
    Ack { ran: Duration },
    /// The handler failed: a nack (`bury` false) or a bury, with the reason sent.
    Fail {
        bury: bool,
        reason: String,
        ran: Duration,
    },
    /// Shutdown gave back a delivery whose handler was stopped: counted as released.
    Release,
    /// A job no handler started (its lease could not be renewed first): not counted.
    GiveBack,
}

/// Acks a successful delivery that ran for `ran`.
pub(crate) fn ack(lease: &Lease, until: Instant, ran: Duration) -> Outgoing {
    Outgoing {
        settle: Settle::Ack(lease.clone()),
        until,
        ran: Some(ran),
        then: Then::Ack { ran },
    }
}

/// Nacks (retry or dead, as the engine decides) or buries a failed delivery.
pub(crate) fn fail(lease: &Lease, failure: Failure, until: Instant, ran: Duration) -> Outgoing {
    let reason = cut_reason(&failure.message);
    let (bury, settle) = match failure.kind {
        FailureKind::Permanent => (true, Settle::Bury(lease.clone(), Some(reason.clone()))),
        kind => {
            let delay = match kind {
                FailureKind::RetryAfter(d) => Some(d.min(MAX_DELAY)),
                _ => None,
            };
            let nack = Nack {
                delay,
                reason: Some(reason.clone()),
            };
            (false, Settle::Nack(lease.clone(), nack))
        }
    };
    Outgoing {
        settle,
        until,
        ran: Some(ran),
        then: Then::Fail { bury, reason, ran },
    }
}

/// Releases a delivery at shutdown: ready again at once, attempt not counted.
pub(crate) fn release(lease: &Lease, lease_end: Instant) -> Outgoing {
    Outgoing {
        settle: Settle::Release(lease.clone()),
        until: lease_end.min(Instant::now() + RELEASE_BUDGET),
        ran: None,
        then: Then::Release,
    }
}

/// Gives back a job no handler started (its lease could not be renewed first).
pub(crate) fn give_back(lease: &Lease, lease_end: Instant) -> Outgoing {
    Outgoing {
        settle: Settle::Release(lease.clone()),
        until: lease_end,
        ran: None,
        then: Then::GiveBack,
    }
}

/// Logs the engine's answer `r` to the settlement of `lease` made for `then`, and says what
/// the report counts (`None` for nothing).
pub(crate) fn answered(then: Then, lease: &Lease, r: Result<Settled>) -> Option<Outcome> {
    let (topic, id) = (&lease.topic, &lease.id);
    match (then, r) {
        (Then::Ack { ran }, Ok(_)) => {
            tracing::debug!(%topic, %id, outcome = "acked", elapsed_ms = millis(ran), "job done");
            Some(Outcome::Acked)
        }
        (Then::Fail { reason, ran, .. }, Ok(Settled::Nacked(NackOutcome::Retry { ready_at }))) => {
            tracing::warn!(%topic, %id, outcome = "retried", elapsed_ms = millis(ran), retry_at_ms = ready_at.as_millis(), reason = %reason, "job failed: retry scheduled");
            Some(Outcome::Retried)
        }
        (Then::Fail { reason, ran, .. }, Ok(Settled::Nacked(NackOutcome::Dead))) => {
            tracing::error!(%topic, %id, outcome = "dead", elapsed_ms = millis(ran), reason = %reason, "job failed on its last attempt: sent to dead");
            Some(Outcome::Buried)
        }
        (Then::Fail { reason, ran, .. }, Ok(_)) => {
            tracing::error!(%topic, %id, outcome = "buried", elapsed_ms = millis(ran), reason = %reason, "job failed permanently: sent to dead");
            Some(Outcome::Buried)
        }
        (Then::Release, Ok(_)) => {
            tracing::info!(%topic, %id, outcome = "released", "shutdown: job given back to the engine");
            Some(Outcome::Released)
        }
        (Then::GiveBack, Ok(_)) => {
            tracing::info!(%topic, %id, "job given back to the engine before its handler started");
            None
        }
        (Then::GiveBack, Err(e)) => {
            not_recorded(lease, "release", &e);
            None
        }
        (then, Err(e)) => {
            let what = match then {
                Then::Ack { .. } => "ack",
                Then::Fail { bury: true, .. } => "bury",
                Then::Fail { bury: false, .. } => "nack",
                Then::Release | Then::GiveBack => "release",
            };
            Some(not_recorded(lease, what, &e))
        }
    }
}

fn not_recorded(lease: &Lease, what: &str, e: &Error) -> Outcome {
    let (topic, id) = (&lease.topic, &lease.id);
    match e {
        e if e.ends_delivery() => tracing::warn!(
            %topic, %id,
            outcome = "lease_lost",
            error = %e,
            "cannot {what}: the lease was lost (expired, deleted, or the job was redelivered); the engine decides what happens next"
        ),
        e => tracing::error!(
            %topic, %id,
            outcome = "not_recorded",
            error = %e,
            "cannot {what}: the job comes back when its lease ends"
        ),
    }
    Outcome::Failed
}

/// A failure reason the contract takes: NUL characters (which no engine stores) replaced
/// by U+FFFD, within 4 KiB, cut at a character boundary.
pub(crate) fn cut_reason(message: &str) -> String {
    let cleaned;
    let message = if message.contains('\0') {
        cleaned = message.replace('\0', "\u{FFFD}");
        cleaned.as_str()
    } else {
        message
    };
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
        let nul = cut_reason("bad\0byte");
        assert_eq!(nul, "bad\u{FFFD}byte");
        assert!(delayq_core::limits::check_reason(Some(&nul)).is_ok());
    }
}
