//! One delivery from reserve to settlement: decode and run the handler in its own task,
//! renew the lease while it runs, then ack, nack, bury or (at shutdown) release.
//!
//! All user code (decoding, the handler, the handler error's `Display`) runs in the handler
//! task, so a panic there is a failed attempt and never takes the supervisor down with it.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{Delivery, Engine, Lease};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{Instant, timeout};
use tracing::Instrument;

use crate::context::{Cancel, CancelReason};
use crate::handler::{Failure, FailureKind, classify};
use crate::renew::{RenewPolicy, Renewal, millis};
use crate::report::Outcome;
use crate::worker::Shared;
use crate::{Handler, Job, Payload, settle};

/// How long a handler gets to return by itself after its token fired at shutdown, before
/// it is aborted.
pub(crate) const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// How long an aborted handler task gets to unwind before the supervisor moves on without
/// it (a handler that blocks its thread never unwinds).
pub(crate) const ABORT_WAIT: Duration = Duration::from_secs(1);

/// What the handler task produced.
enum Ran {
    Done,
    Failed(Failure),
    Undecodable(String),
}

/// How the supervisor stopped waiting for the handler.
enum End {
    Ran(Result<Ran, JoinError>),
    LeaseOver,
    Shutdown,
}

/// Supervises one delivery; `permit` is its concurrency slot, freed only once the engine
/// has recorded the outcome (so the worker never holds more deliveries than slots).
pub(crate) async fn supervise<E, P, H>(
    shared: Arc<Shared<E, H>>,
    delivery: Delivery,
    received: Instant,
    permit: OwnedSemaphorePermit,
) where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let span = tracing::info_span!(
        "job",
        topic = %delivery.job.topic,
        id = %delivery.job.id,
        attempt = delivery.job.attempts,
        lateness_ms = millis(delivery.lateness),
    );
    let (topic, id) = (delivery.job.topic.clone(), delivery.job.id.clone());
    let outcome = run::<E, P, H>(&shared, delivery, received)
        .instrument(span)
        .await;
    shared.tally.record(outcome, &topic, &id);
    drop(permit);
}

async fn run<E, P, H>(shared: &Arc<Shared<E, H>>, d: Delivery, received: Instant) -> Outcome
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let started = Instant::now();
    let cancel = Cancel::default();
    let ttr = d.job.ttr;
    let lease = d.lease.clone();
    let mut handle = spawn_handler::<E, P, H>(shared, d, cancel.clone());
    let Some(lease) = lease else {
        return at_most_once(shared, &mut handle, &cancel).await;
    };

    let policy = RenewPolicy {
        fraction: shared.config.renew_fraction,
        max_extension: shared.config.max_extension,
        retry_initial: shared.config.retry_initial,
    };
    let mut renewal = Renewal::new(&shared.engine, &lease, &cancel, ttr, received, policy);
    let end = tokio::select! {
        biased;
        r = &mut handle => End::Ran(r),
        () = renewal.run() => End::LeaseOver,
        () = shared.hard_stop.cancelled() => End::Shutdown,
    };
    let (lost, until) = (renewal.lost(), renewal.lease_end());
    match end {
        End::Ran(_) if lost => {
            tracing::warn!(
                outcome = "lease_lost",
                "the handler finished after its lease was lost: not acked or nacked"
            );
            Outcome::Failed
        }
        End::Ran(r) => settle(shared, &lease, r, until, started).await,
        End::LeaseOver => {
            // The token fired when renewal stopped; the lease is over now: no more waiting.
            stop(&mut handle, Duration::ZERO).await;
            tracing::warn!(
                outcome = "lease_ended",
                elapsed_ms = millis(started.elapsed()),
                "the handler was still running when its lease ended: stopped it; the engine will redeliver the job (or bury it after its last attempt)"
            );
            Outcome::Failed
        }
        End::Shutdown => {
            cancel.fire(CancelReason::Shutdown);
            match stop(&mut handle, CANCEL_WAIT).await {
                _ if lost => Outcome::Failed,
                // It finished before the abort took effect: the work is done.
                Some(r @ Ok(Ran::Done)) => settle(shared, &lease, r, until, started).await,
                // A failure now is most likely the cancellation itself, so it does not count
                // as an attempt: the job is given back like one that was still running.
                Some(_) | None => settle::release(&shared.engine, &lease, until).await,
            }
        }
    }
}

/// Starts the handler task: decode, build the [`Job`], call the handler, read its error.
fn spawn_handler<E, P, H>(
    shared: &Arc<Shared<E, H>>,
    d: Delivery,
    cancel: Cancel,
) -> JoinHandle<Ran>
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let owner = Arc::clone(shared);
    let task = async move {
        let payload = match P::decode(&d.job.body) {
            Ok(p) => p,
            Err(e) => return Ran::Undecodable(e.to_string()),
        };
        let job = Job::new(payload, d.job, d.lease, d.lateness, cancel);
        match owner.handler.call(job).await {
            Ok(()) => Ran::Done,
            Err(e) => Ran::Failed(classify(e)),
        }
    };
    shared
        .handlers
        .spawn(task.instrument(tracing::Span::current()))
}

/// Gives the handler task `patience` to return by itself, then aborts it and waits a little:
/// `Some` with its result when it finished (or panicked) first, `None` when it was stopped or
/// does not unwind.
async fn stop(handle: &mut JoinHandle<Ran>, patience: Duration) -> Option<Result<Ran, JoinError>> {
    if !patience.is_zero()
        && let Ok(r) = timeout(patience, &mut *handle).await
    {
        return Some(r);
    }
    handle.abort();
    match timeout(ABORT_WAIT, handle).await {
        Ok(Err(e)) if e.is_cancelled() => None,
        Ok(r) => Some(r),
        Err(_) => {
            tracing::error!(
                "the handler does not stop: it blocks its thread (use spawn_blocking for blocking work)"
            );
            None
        }
    }
}

async fn settle<E: Engine, H>(
    shared: &Shared<E, H>,
    lease: &Lease,
    ran: Result<Ran, JoinError>,
    until: Instant,
    started: Instant,
) -> Outcome {
    let elapsed = started.elapsed();
    let engine = &shared.engine;
    let failure = match ran {
        Ok(Ran::Done) => return settle::ack(&shared.acker, lease, until, elapsed).await,
        Ok(Ran::Failed(f)) => f,
        Ok(Ran::Undecodable(msg)) => Failure {
            kind: FailureKind::Permanent,
            message: format!("payload did not decode: {msg}"),
        },
        Err(e) if e.is_panic() => Failure {
            kind: FailureKind::Retry,
            message: format!("handler panicked: {}", panic_message(e.into_panic())),
        },
        Err(_) => {
            tracing::error!(outcome = "cancelled", "the handler task was cancelled");
            return Outcome::Failed;
        }
    };
    settle::fail(engine, lease, failure, until, elapsed).await
}

/// At-most-once: the job is already gone from the engine; only the outcome is logged.
async fn at_most_once<E, H>(
    shared: &Shared<E, H>,
    handle: &mut JoinHandle<Ran>,
    cancel: &Cancel,
) -> Outcome {
    let ran = tokio::select! {
        biased;
        r = &mut *handle => Some(r),
        () = shared.hard_stop.cancelled() => None,
    };
    let ran = match ran {
        Some(r) => Some(r),
        None => {
            cancel.fire(CancelReason::Shutdown);
            stop(handle, CANCEL_WAIT).await
        }
    };
    let reason = match ran {
        Some(Ok(Ran::Done)) => {
            tracing::debug!(outcome = "done", "job done (at-most-once)");
            return Outcome::Acked;
        }
        Some(Ok(Ran::Failed(f))) => f.message,
        Some(Ok(Ran::Undecodable(msg))) => format!("payload did not decode: {msg}"),
        Some(Err(e)) if e.is_panic() => {
            format!("handler panicked: {}", panic_message(e.into_panic()))
        }
        Some(Err(_)) | None => "stopped at shutdown".to_owned(),
    };
    tracing::error!(outcome = "dropped", reason = %reason, "job failed in at-most-once mode: it is lost");
    Outcome::Dropped
}

/// The text of a panic payload.
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => "a panic with a payload that is not a string".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages() {
        assert_eq!(panic_message(Box::new("static")), "static");
        assert_eq!(panic_message(Box::new(String::from("owned"))), "owned");
        assert!(panic_message(Box::new(42u8)).contains("not a string"));
    }
}
