//! [`Tally`]: what the consumers of a drain or a delayed run saw, for the systems whose
//! consumers the suite writes itself (HTTP, beanstalkd, the seeds' design).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use delayq_bench::clock;
use delayq_bench::driver::{DrainReport, lock};
use delayq_bench::lateness::Lateness;

use super::DelayedRun;

/// Counts deliveries up to a target and records their lateness.
pub(crate) struct Tally {
    target: usize,
    start: Instant,
    cap: Duration,
    done: AtomicUsize,
    finished: Mutex<Option<Duration>>,
    last: Mutex<Instant>,
    host: Mutex<Lateness>,
    own: Mutex<Lateness>,
}

impl Tally {
    /// Counts up to `target` deliveries from `start`; consumers give up `cap` after it.
    pub(crate) fn new(target: usize, start: Instant, cap: Duration) -> Arc<Tally> {
        Arc::new(Tally {
            target,
            start,
            cap,
            done: AtomicUsize::new(0),
            finished: Mutex::new(None),
            last: Mutex::new(start),
            host: Mutex::new(Lateness::new()),
            own: Mutex::new(Lateness::new()),
        })
    }

    /// When the run starts.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// Whether consumers should stop: the target was reached or the cap passed.
    pub(crate) fn stop(&self) -> bool {
        self.done.load(Ordering::Relaxed) >= self.target || self.start.elapsed() >= self.cap
    }

    /// Counts one delivery of a job with this body (which carries the due time the producer
    /// asked for); returns the host time of the delivery in µs.
    pub(crate) fn seen(&self, body: &[u8]) -> u64 {
        let at = clock::now_us();
        if let Some(due) = clock::due_ms(body) {
            lock(&self.host).record(due * 1000, at);
        }
        *lock(&self.last) = Instant::now();
        if self.done.fetch_add(1, Ordering::Relaxed) + 1 == self.target {
            *lock(&self.finished) = Some(self.start.elapsed());
        }
        at
    }

    /// The system's own lateness measure, for it to record into.
    pub(crate) fn own(&self) -> MutexGuard<'_, Lateness> {
        lock(&self.own)
    }

    /// The figures of a drain.
    pub(crate) fn drain(&self) -> DrainReport {
        DrainReport {
            jobs: self.done.load(Ordering::Relaxed).min(self.target),
            elapsed: lock(&self.finished).unwrap_or(self.cap.min(self.start.elapsed())),
        }
    }

    /// The figures of a delayed run; `own` says whether the system has its own measure.
    pub(crate) fn delayed(&self, pushed: usize, push_elapsed: Duration, own: bool) -> DelayedRun {
        DelayedRun {
            pushed,
            push_elapsed,
            delivered: self.done.load(Ordering::Relaxed),
            elapsed: lock(&self.last).saturating_duration_since(self.start),
            host: lock(&self.host).clone(),
            own: own.then(|| lock(&self.own).clone()),
        }
    }
}
