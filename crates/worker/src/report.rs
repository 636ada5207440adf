//! [`Report`]: what a worker did between `run` and its return, counted as it goes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use delayq_core::{JobId, Topic};

/// What [`crate::Worker::run`] did, returned when it stops.
///
/// Every delivery a handler started on ends in exactly one of the counts or in `released`,
/// except one still being released when shutdown stopped waiting for it (the engine stayed
/// unreachable for the whole release budget); its lease then runs out. Jobs given back at
/// shutdown from the worker's buffer, before any handler started on them, are in
/// `released` too; jobs given back earlier because they waited in the buffer until too
/// little of their lease was left (see [`crate::WorkerConfig::min_lease_left`]) are not
/// counted: another delivery follows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Handlers that succeeded, and whose ack the engine recorded (in at-most-once mode:
    /// handlers that succeeded).
    pub acked: u64,
    /// Failed deliveries nacked for a later retry (a handler error, or a panic).
    pub retried: u64,
    /// Jobs sent to dead: a permanent error, a body that does not decode, or a failure on
    /// the last attempt.
    pub buried: u64,
    /// Deliveries whose outcome the worker could not record, so the engine decides when
    /// their lease ends (another attempt, or dead): the lease was lost, the handler overran
    /// its lease and was stopped, or the engine stayed unavailable.
    pub failed: u64,
    /// At-most-once deliveries whose handler failed, panicked, did not decode or was
    /// stopped at shutdown: these jobs are gone.
    pub dropped: u64,
    /// Jobs given back to the engine at shutdown (ready again at once, attempt not
    /// counted): those waiting in the buffer, and those whose handler was stopped.
    pub released: Vec<(Topic, JobId)>,
    /// Handler tasks still running when `run` returned: they ignored cancellation and block
    /// their thread. Their jobs were released (or their leases run out).
    pub unfinished: usize,
    /// The topics the engine could not reach at some point of the run, each once, in the
    /// order first found: a reserve answered without them (a Redis Cluster primary down or
    /// hung; `Engine::unreachable`). The worker logs a warning each time the set of such
    /// topics changes, and when they are all reachable again.
    pub unreachable: Vec<Topic>,
}

/// How one delivery ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acked,
    Retried,
    Buried,
    Failed,
    Dropped,
    Released,
}

/// The live counters behind a [`Report`].
#[derive(Debug, Default)]
pub(crate) struct Tally {
    acked: AtomicU64,
    retried: AtomicU64,
    buried: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    released: Mutex<Vec<(Topic, JobId)>>,
    unreachable: Mutex<Unreachable>,
}

/// The topics the engine cannot reach: as the last call left them, and every one found.
#[derive(Debug, Default)]
struct Unreachable {
    now: Vec<Topic>,
    ever: Vec<Topic>,
}

impl Tally {
    pub(crate) fn record(&self, outcome: Outcome, topic: &Topic, id: &JobId) {
        let counter = match outcome {
            Outcome::Acked => &self.acked,
            Outcome::Retried => &self.retried,
            Outcome::Buried => &self.buried,
            Outcome::Failed => &self.failed,
            Outcome::Dropped => &self.dropped,
            Outcome::Released => {
                // A poisoned lock only means another task panicked while pushing; the
                // list is still valid.
                let mut list = self
                    .released
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                list.push((topic.clone(), id.clone()));
                return;
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The topics the engine cannot reach after a call: `Some` of them (maybe none) when
    /// they differ from what the call before left, for the caller to log once per change.
    pub(crate) fn unreachable(&self, now: Vec<Topic>) -> Option<Vec<Topic>> {
        let mut u = self
            .unreachable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if u.now == now {
            return None;
        }
        for t in &now {
            if !u.ever.contains(t) {
                u.ever.push(t.clone());
            }
        }
        u.now.clone_from(&now);
        Some(now)
    }

    pub(crate) fn report(&self, unfinished: usize) -> Report {
        let released = self
            .released
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Report {
            acked: self.acked.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            buried: self.buried.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            released,
            unfinished,
            unreachable: self
                .unreachable
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .ever
                .clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(s: &str) -> Topic {
        Topic::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn unreachable_topics_are_answered_once_per_change_and_reported_once_each_issue_37() {
        // See: issue 37
        let tally = Tally::default();
        assert_eq!(tally.unreachable(Vec::new()), None);
        let (a, b) = (topic("a"), topic("b"));
        assert_eq!(tally.unreachable(vec![a.clone()]), Some(vec![a.clone()]));
        assert_eq!(tally.unreachable(vec![a.clone()]), None);
        assert_eq!(
            tally.unreachable(vec![a.clone(), b.clone()]),
            Some(vec![a.clone(), b.clone()])
        );
        assert_eq!(tally.unreachable(Vec::new()), Some(Vec::new()));
        assert_eq!(tally.unreachable(Vec::new()), None);
        assert_eq!(tally.unreachable(vec![b.clone()]), Some(vec![b.clone()]));
        assert_eq!(tally.report(0).unreachable, vec![a, b]);
    }
}
