//! One delivery from the buffer to its settlement: renew the lease first if it waited too
//! long, decode and run the handler in its own task, renew the lease while it runs, free the
//! handler slot as soon as the handler ended, then answer the ack, nack, bury or (at
//! shutdown) release for the fetch loop to send.
//!
//! The supervisor is a future the fetch loop drives itself (no task of its own), and it
//! ends as soon as its handler has: the settlement goes into the fetch loop's outbox and no
//! one waits for its answer. The handler is polled once in place and moves to a task of its
//! own only if it is not done by then (see `run`), so a quick handler costs no hand-off
//! between tasks, and a slow one two (its task's start and its end).
//!
//! All user code (decoding, the handler, the handler error's `Display`) runs under
//! `catch_unwind` (in place) or in the handler task, so a panic there is a failed attempt and
//! never takes the fetch loop down with it.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{Delivery, Engine, Error, Lease};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, timeout, timeout_at};
use tracing::Instrument;

use crate::context::{Cancel, CancelReason};
use crate::handler::{Failure, FailureKind, classify};
use crate::renew::{RenewPolicy, Renewal, millis};
use crate::report::Outcome;
use crate::run::{HandlerRun, Stopped};
use crate::settle::Outgoing;
use crate::shared::Shared;
use crate::{Handler, Job, Payload, settle};

/// How long a handler gets to return by itself after its token fired at shutdown, before
/// it is aborted.
pub(crate) const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// How long an aborted handler task gets to unwind before the supervisor moves on without
/// it (a handler that blocks its thread never unwinds).
pub(crate) const ABORT_WAIT: Duration = Duration::from_secs(1);

/// A job the fetch loop hands to a handler slot.
pub(crate) struct Handover {
    pub(crate) delivery: Delivery,
    /// The early estimate of the lease end.
    pub(crate) lease_end: Instant,
    /// Less than `min_lease_left` of the lease is left: renew it before the handler starts.
    pub(crate) renew_first: bool,
}

/// What the handler's run produced.
enum Ran {
    Done,
    Failed(Failure),
    Undecodable(String),
}

/// How the supervisor stopped waiting for the handler.
enum End {
    Ran(Result<Ran, Stopped>),
    LeaseOver,
    Shutdown,
}

/// What a supervisor ends with: a settlement for the fetch loop to send, or an outcome that
/// needs none (already counted), or nothing at all.
pub(crate) type Supervised = Option<Outgoing>;

/// Supervises one delivery; `slot` is its handler slot, freed as soon as the handler task
/// has ended. Answers the settlement to send, if any; outcomes that need none are counted
/// here.
pub(crate) async fn supervise<E, P, H>(
    shared: Arc<Shared<E, H>>,
    handover: Handover,
    slot: OwnedSemaphorePermit,
) -> Supervised
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let d = &handover.delivery;
    let span = tracing::info_span!(
        "job",
        topic = %d.job.topic,
        id = %d.job.id,
        attempt = d.job.attempts,
        lateness_ms = millis(d.lateness),
    );
    let (topic, id) = (d.job.topic.clone(), d.job.id.clone());
    match run::<E, P, H>(&shared, handover, slot)
        .instrument(span)
        .await
    {
        Step::Send(out) => Some(out),
        Step::Done(outcome) => {
            shared.tally.record(outcome, &topic, &id);
            None
        }
        Step::Nothing => None,
    }
}

/// How a delivery ended.
enum Step {
    /// With a settlement to send; its answer decides the outcome.
    Send(Outgoing),
    /// With an outcome and nothing to send.
    Done(Outcome),
    /// Without a handler run (its lease was lost before it could start).
    Nothing,
}

/// Runs one delivery.
async fn run<E, P, H>(
    shared: &Arc<Shared<E, H>>,
    handover: Handover,
    slot: OwnedSemaphorePermit,
) -> Step
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let Handover {
        delivery: d,
        mut lease_end,
        renew_first,
    } = handover;
    let cancel = Cancel::default();
    let ttr = d.job.ttr;
    let Some(lease) = d.lease.clone() else {
        let mut handle = start_handler::<E, P, H>(shared, d, lease_end, cancel.clone()).await;
        let outcome = at_most_once(shared, &mut handle, &cancel).await;
        drop(slot);
        return Step::Done(outcome);
    };
    if renew_first {
        match renew_before_start(&shared.engine, &lease, ttr, lease_end).await {
            Ok(end) => lease_end = end,
            Err(e) if e.ends_delivery() => {
                tracing::warn!(
                    outcome = "lease_lost",
                    error = %e,
                    "the lease of a buffered job was lost before its handler started: not run"
                );
                return Step::Nothing;
            }
            Err(e) => {
                drop(slot);
                tracing::warn!(error = %e, "cannot renew a buffered job's lease before its handler starts: giving it back");
                return Step::Send(settle::give_back(&lease, lease_end));
            }
        }
    }

    let started = Instant::now();
    let mut handle = start_handler::<E, P, H>(shared, d, lease_end, cancel.clone()).await;
    let policy = RenewPolicy {
        fraction: shared.config.renew_fraction,
        max_extension: shared.config.max_extension,
        retry_initial: shared.config.retry_initial,
    };
    let mut renewal = Renewal::new(&shared.engine, &lease, &cancel, ttr, lease_end, policy);
    let end = tokio::select! {
        biased;
        r = &mut handle => End::Ran(r),
        () = renewal.run() => End::LeaseOver,
        () = shared.hard_stop.cancelled() => End::Shutdown,
    };
    let (lost, until) = (renewal.lost(), renewal.lease_end());
    match end {
        End::Ran(_) if lost => {
            drop(slot);
            tracing::warn!(
                outcome = "lease_lost",
                "the handler finished after its lease was lost: not acked or nacked"
            );
            Step::Done(Outcome::Failed)
        }
        End::Ran(r) => {
            drop(slot);
            settle(&lease, r, until, started.elapsed())
        }
        End::LeaseOver => {
            // The token fired when renewal stopped; the lease is over now: no more waiting.
            stop(&mut handle, Duration::ZERO).await;
            drop(slot);
            tracing::warn!(
                outcome = "lease_ended",
                elapsed_ms = millis(started.elapsed()),
                "the handler was still running when its lease ended: stopped it; the engine will redeliver the job (or bury it after its last attempt)"
            );
            Step::Done(Outcome::Failed)
        }
        End::Shutdown => {
            cancel.fire(CancelReason::Shutdown);
            let r = stop(&mut handle, CANCEL_WAIT).await;
            drop(slot);
            match r {
                _ if lost => Step::Done(Outcome::Failed),
                // It finished before the abort took effect: the work is done.
                Some(r @ Ok(Ran::Done)) => settle(&lease, r, until, started.elapsed()),
                // A failure now is most likely the cancellation itself, so it does not count
                // as an attempt: the job is given back like one that was still running.
                Some(_) | None => Step::Send(settle::release(&lease, until)),
            }
        }
    }
}

/// Renews the lease of a job that waited in the buffer, before its handler starts; answers
/// the new (early) lease end. Bounded by the current lease.
async fn renew_before_start<E: Engine>(
    engine: &E,
    lease: &Lease,
    ttr: Duration,
    lease_end: Instant,
) -> Result<Instant, Error> {
    let sent = Instant::now();
    match timeout_at(lease_end, engine.touch(lease, None)).await {
        Ok(Ok(_)) => Ok(sent + ttr),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::Unavailable {
            message: "the lease ended before the engine answered a touch".into(),
            source: None,
        }),
    }
}

/// Starts the handler's run: decode, build the [`Job`] (its lease estimated to end at
/// `lease_end`), call the handler, read its error.
async fn start_handler<E, P, H>(
    shared: &Arc<Shared<E, H>>,
    d: Delivery,
    lease_end: Instant,
    cancel: Cancel,
) -> HandlerRun<Ran>
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
        let lease = d.lease.map(|l| (l, lease_end));
        let job = Job::new(payload, d.job, lease, d.lateness, cancel);
        match owner.handler.call(job).await {
            Ok(()) => Ran::Done,
            Err(e) => Ran::Failed(classify(e)),
        }
    };
    let task = task.instrument(tracing::Span::current());
    HandlerRun::start(task, &shared.in_place, &shared.handlers).await
}

/// Gives the handler task `patience` to return by itself, then aborts it and waits a little:
/// `Some` with its result when it finished (or panicked) first, `None` when it was stopped or
/// does not unwind.
async fn stop(handle: &mut HandlerRun<Ran>, patience: Duration) -> Option<Result<Ran, Stopped>> {
    if !patience.is_zero()
        && let Ok(r) = timeout(patience, &mut *handle).await
    {
        return Some(r);
    }
    handle.abort();
    match timeout(ABORT_WAIT, handle).await {
        Ok(Err(Stopped::Cancelled)) => None,
        Ok(r) => Some(r),
        Err(_) => {
            tracing::error!(
                "the handler does not stop: it blocks its thread (use spawn_blocking for blocking work)"
            );
            None
        }
    }
}

/// The settlement of a handler's result.
fn settle(lease: &Lease, ran: Result<Ran, Stopped>, until: Instant, elapsed: Duration) -> Step {
    let failure = match ran {
        Ok(Ran::Done) => return Step::Send(settle::ack(lease, until, elapsed)),
        Ok(Ran::Failed(f)) => f,
        Ok(Ran::Undecodable(msg)) => Failure {
            kind: FailureKind::Permanent,
            message: format!("payload did not decode: {msg}"),
        },
        Err(Stopped::Panicked(payload)) => Failure {
            kind: FailureKind::Retry,
            message: format!("handler panicked: {}", panic_message(payload)),
        },
        Err(Stopped::Cancelled) => {
            tracing::error!(outcome = "cancelled", "the handler task was cancelled");
            return Step::Done(Outcome::Failed);
        }
    };
    Step::Send(settle::fail(lease, failure, until, elapsed))
}

/// At-most-once: the job is already gone from the engine; only the outcome is logged.
async fn at_most_once<E, H>(
    shared: &Shared<E, H>,
    handle: &mut HandlerRun<Ran>,
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
        Some(Err(Stopped::Panicked(payload))) => {
            format!("handler panicked: {}", panic_message(payload))
        }
        Some(Err(Stopped::Cancelled)) | None => "stopped at shutdown".to_owned(),
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
