//! The outbox: settlements waiting for the fetch loop's next call, coalesced by size
//! ([`FLUSH_SIZE`]) and time ([`LINGER`]), and the answering of each once the call returns
//! (or its retry while the engine is unavailable). No task waits for an answer: each
//! settlement carries what its answer means, and the answer is logged and counted here.

use std::collections::VecDeque;
use std::time::Duration;

use delayq_core::limits::MAX_BATCH;
use delayq_core::{Error, Result, Settle, Settled};
use tokio::time::Instant;

use crate::report::{Outcome, Tally};
use crate::settle::{Then, answered};

/// The longest a settlement waits for company before it is sent on its own.
pub(crate) const LINGER: Duration = Duration::from_millis(5);
/// Settlements that are sent at once, without waiting for [`LINGER`].
pub(crate) const FLUSH_SIZE: usize = 256;

/// What a settlement's answer means.
pub(crate) enum Reply {
    /// The outcome of a delivery a handler was started on (or was to be).
    Delivery(Then),
    /// No one: the fetch loop gave back a buffered job no handler had started. At shutdown
    /// it is reported as released.
    Buffered { at_shutdown: bool },
}

struct Meta {
    until: Instant,
    reply: Reply,
}

/// The settlements not sent yet.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: VecDeque<(Settle, Meta)>,
    /// When the oldest waiting settlement arrived.
    since: Option<Instant>,
}

impl Outbox {
    pub(crate) fn push(&mut self, settle: Settle, until: Instant, reply: Reply, now: Instant) {
        self.since.get_or_insert(now);
        self.queue.push_back((settle, Meta { until, reply }));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Settlements waiting: leases the engine still counts as held.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// When the waiting settlements should go even without a reserve to ride with.
    pub(crate) fn flush_at(&self) -> Option<Instant> {
        let since = self.since?;
        Some(if self.queue.len() >= FLUSH_SIZE {
            since
        } else {
            since + LINGER
        })
    }

    /// True when the waiting settlements should go now.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.flush_at().is_some_and(|at| at <= now)
    }

    /// Takes up to one call's worth of settlements, oldest first.
    pub(crate) fn take(&mut self) -> Batch {
        let n = self.queue.len().min(MAX_BATCH);
        let (settles, metas) = self.queue.drain(..n).unzip();
        self.since = if self.queue.is_empty() {
            None
        } else {
            self.since
        };
        Batch { settles, metas }
    }

    /// Puts back settlements that failed, ahead of newer ones, due at `due` (or sooner, with
    /// the settlements already waiting).
    fn put_back(&mut self, items: Vec<(Settle, Meta)>, due: Instant) {
        if items.is_empty() {
            return;
        }
        for item in items.into_iter().rev() {
            self.queue.push_front(item);
        }
        let since = self.since.map_or(due, |s| s.min(due));
        self.since = Some(since.checked_sub(LINGER).unwrap_or(since));
    }
}

/// The settlements of one call.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) settles: Vec<Settle>,
    metas: Vec<Meta>,
}

impl Batch {
    /// Answers every settlement with the engine's answer to it. A settlement answered with
    /// a retryable error of its own while the call succeeded (on a Redis Cluster, its
    /// slot's primary was down or too slow while the others answered) goes back to the
    /// outbox, due at `retry_at`, when its `until` is after that, as the settlements of a
    /// failed call do.
    pub(crate) fn answer(
        self,
        settled: Vec<Result<Settled>>,
        retry_at: Instant,
        outbox: &mut Outbox,
        tally: &Tally,
    ) {
        let (n, got) = (self.settles.len(), settled.len());
        let mut settled = settled.into_iter();
        let mut again = Vec::new();
        for (settle, meta) in self.settles.into_iter().zip(self.metas) {
            let r = settled.next().unwrap_or_else(|| {
                Err(Error::Internal(format!(
                    "the engine answered {got} of {n} settlements (an engine bug)"
                )))
            });
            match r {
                Err(e) if e.is_retryable() && meta.until > retry_at => again.push((settle, meta)),
                r => deliver(&settle, meta.reply, r, tally),
            }
        }
        outbox.put_back(again, retry_at);
    }

    /// The call failed as a whole with `e`. While the engine is unavailable, settlements
    /// whose `until` is after `retry_at` go back to the outbox for the next call (settling
    /// twice is safe: the second answers lease lost); the others are answered with `e`.
    pub(crate) fn failed(self, e: &Error, retry_at: Instant, outbox: &mut Outbox, tally: &Tally) {
        let mut again = Vec::new();
        for (settle, meta) in self.settles.into_iter().zip(self.metas) {
            if e.is_retryable() && meta.until > retry_at {
                again.push((settle, meta));
            } else {
                deliver(&settle, meta.reply, Err(copy(e)), tally);
            }
        }
        // Due at once: the pause after the failure already spaced the attempts.
        outbox.put_back(again, Instant::now());
    }
}

fn deliver(settle: &Settle, reply: Reply, r: Result<Settled>, tally: &Tally) {
    let lease = settle.lease();
    match reply {
        Reply::Delivery(then) => {
            if let Some(outcome) = answered(then, lease, r) {
                tally.record(outcome, &lease.topic, &lease.id);
            }
        }
        Reply::Buffered { at_shutdown } => match r {
            Ok(_) if at_shutdown => {
                tracing::info!(topic = %lease.topic, id = %lease.id, outcome = "released", "shutdown: buffered job given back to the engine");
                tally.record(Outcome::Released, &lease.topic, &lease.id);
            }
            Ok(_) => {
                tracing::info!(topic = %lease.topic, id = %lease.id, "a buffered job waited too long for a handler: given back to the engine");
            }
            Err(e) => {
                tracing::warn!(topic = %lease.topic, id = %lease.id, error = %e, "cannot give back a buffered job; it comes back when its lease ends");
            }
        },
    }
}

/// The same error for another settlement of the call (`Error` is not `Clone`).
fn copy(e: &Error) -> Error {
    e.copy_for_another()
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayq_core::{JobId, Lease, LeaseToken, Topic};

    fn ack(id: &str) -> Settle {
        Settle::Ack(Lease {
            topic: Topic::new("t").unwrap_or_else(|e| panic!("{e}")),
            id: JobId::new(id).unwrap_or_else(|e| panic!("{e}")),
            token: LeaseToken(1),
        })
    }

    fn acked() -> Reply {
        Reply::Delivery(Then::Ack {
            ran: Duration::ZERO,
        })
    }

    fn down() -> Error {
        Error::Unavailable {
            message: "down".into(),
            source: None,
        }
    }

    #[test]
    fn coalesced_by_time_and_by_size() {
        let t0 = Instant::now();
        let mut o = Outbox::default();
        assert_eq!(o.flush_at(), None);
        o.push(ack("a"), t0, Reply::Buffered { at_shutdown: false }, t0);
        assert_eq!(o.flush_at(), Some(t0 + LINGER));
        assert!(!o.due(t0) && o.due(t0 + LINGER));
        for i in 1..FLUSH_SIZE {
            o.push(
                ack(&format!("j{i}")),
                t0,
                Reply::Buffered { at_shutdown: false },
                t0,
            );
        }
        assert!(o.due(t0), "a full batch goes at once");
        let b = o.take();
        assert_eq!(b.settles.len(), FLUSH_SIZE);
        assert!(o.is_empty() && o.flush_at().is_none());
    }

    /// A full store (Redis at maxmemory, a full disk).
    fn full() -> Error {
        Error::Full {
            message: "full".into(),
            source: None,
        }
    }

    #[test]
    fn a_failed_call_is_retried_while_the_lease_lasts() {
        for e in [down(), full()] {
            a_call_failed_with_is_retried_while_the_lease_lasts(&e);
        }
    }

    fn a_call_failed_with_is_retried_while_the_lease_lasts(e: &Error) {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let tally = Tally::default();
        let mut o = Outbox::default();
        o.push(ack("late"), t0 + 10 * s, acked(), t0);
        o.push(ack("soon"), t0 + s, acked(), t0);
        o.take().failed(e, t0 + 2 * s, &mut o, &tally);
        let r = tally.report(0);
        assert_eq!(
            (r.failed, r.acked),
            (1, 0),
            "the soon one is answered with the error {e}"
        );
        assert!(o.due(Instant::now()), "put back due at once");
        let b = o.take();
        assert_eq!(b.settles, vec![ack("late")]);
        b.answer(vec![Ok(Settled::Acked)], t0, &mut o, &tally);
        let r = tally.report(0);
        assert_eq!((r.failed, r.acked), (1, 1));
    }

    /// See: issue 37 (per-slot independence on a Redis Cluster).
    #[test]
    fn a_settlement_answered_alone_with_a_retryable_error_is_retried_while_its_lease_lasts_issue_37()
     {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let tally = Tally::default();
        let mut o = Outbox::default();
        o.push(ack("fine"), t0 + 10 * s, acked(), t0);
        o.push(ack("slot-down"), t0 + 10 * s, acked(), t0);
        o.push(ack("slot-down-soon"), t0 + s, acked(), t0);
        let retry_at = Instant::now() + 2 * s;
        o.take().answer(
            vec![Ok(Settled::Acked), Err(down()), Err(down())],
            retry_at,
            &mut o,
            &tally,
        );
        let r = tally.report(0);
        assert_eq!(
            (r.failed, r.acked),
            (1, 1),
            "the healthy one is acked, the one whose lease ends first is answered the error"
        );
        assert!(!o.due(Instant::now()), "put back due after the pause");
        assert!(o.due(retry_at));
        let b = o.take();
        assert_eq!(b.settles, vec![ack("slot-down")]);
        b.answer(vec![Ok(Settled::Acked)], retry_at, &mut o, &tally);
        assert_eq!(tally.report(0).acked, 2);
        assert!(o.is_empty());
    }

    #[test]
    fn missing_answers_are_errors_and_shutdown_releases_are_reported() {
        let t0 = Instant::now();
        let tally = Tally::default();
        let mut o = Outbox::default();
        o.push(ack("r"), t0, Reply::Buffered { at_shutdown: true }, t0);
        o.push(ack("x"), t0, acked(), t0);
        o.take()
            .answer(vec![Ok(Settled::Released)], t0, &mut o, &tally);
        let r = tally.report(0);
        assert_eq!(r.released.len(), 1);
        assert_eq!(
            (r.failed, r.acked),
            (1, 0),
            "the unanswered ack is not counted as acked"
        );
    }
}
