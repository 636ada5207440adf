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
        }
    }
}
