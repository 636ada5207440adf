//! The buffer: leased jobs reserved ahead of the handlers, in the order the engine handed
//! them out, each with the worker's early estimate of when its lease ends.

use std::collections::VecDeque;
use std::time::Duration;

use delayq_core::Delivery;
use tokio::time::Instant;

/// A job waiting for a handler.
#[derive(Debug)]
pub(crate) struct Buffered {
    pub(crate) delivery: Delivery,
    /// The local estimate of the lease end, on the early side (see `renew`).
    pub(crate) lease_end: Instant,
}

impl Buffered {
    /// The lease left at `now` (zero once the estimate passed).
    pub(crate) fn left(&self, now: Instant) -> Duration {
        self.lease_end.saturating_duration_since(now)
    }

    /// True when the lease is over by the estimate: nothing may be written for it.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.delivery.lease.is_some() && self.lease_end <= now
    }

    /// True when a handler may not start on it before its lease is renewed: no more than
    /// `min_share` of its ttr is left. At-most-once jobs have no lease and never are.
    pub(crate) fn low(&self, now: Instant, min_share: f64) -> bool {
        self.delivery.lease.is_some() && self.left(now) <= self.margin(min_share)
    }

    fn margin(&self, min_share: f64) -> Duration {
        self.delivery.job.ttr.mul_f64(min_share)
    }

    /// When it becomes [`Buffered::low`]; `None` without a lease.
    fn low_at(&self, min_share: f64) -> Option<Instant> {
        self.delivery.lease.as_ref()?;
        Some(
            self.lease_end
                .checked_sub(self.margin(min_share))
                .unwrap_or(self.lease_end),
        )
    }
}

/// The jobs reserved ahead of the handlers, in the order the engine handed them out.
#[derive(Debug)]
pub(crate) struct Buffer {
    jobs: VecDeque<Buffered>,
    /// The share of its ttr a job must have left when a handler starts on it.
    min_share: f64,
    /// No job becomes low before this (it may be earlier than needed, never later).
    next_low: Option<Instant>,
}

impl Buffer {
    pub(crate) fn new(min_share: f64) -> Self {
        Buffer {
            jobs: VecDeque::new(),
            min_share,
            next_low: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The share of its ttr a job must have left when a handler starts on it.
    pub(crate) fn min_share(&self) -> f64 {
        self.min_share
    }

    pub(crate) fn push(&mut self, delivery: Delivery, lease_end: Instant) {
        let b = Buffered {
            delivery,
            lease_end,
        };
        if let Some(at) = b.low_at(self.min_share) {
            self.next_low = Some(self.next_low.map_or(at, |n| n.min(at)));
        }
        // Two reserves on their way at once may reach the engine in either order; a topic's
        // lease tokens grow in the order its jobs are handed out, so a job goes in before
        // the jobs of its topic that the engine handed out after it (usually none: the
        // scan stops at the topic's last job).
        let mut at = self.jobs.len();
        if let Some(lease) = &b.delivery.lease {
            for (i, x) in self.jobs.iter().enumerate().rev() {
                match &x.delivery.lease {
                    Some(l) if l.topic == lease.topic && l.token > lease.token => at = i,
                    Some(l) if l.topic == lease.topic => break,
                    _ => {}
                }
            }
        }
        self.jobs.insert(at, b);
    }

    /// The next job for a handler.
    pub(crate) fn pop(&mut self) -> Option<Buffered> {
        let b = self.jobs.pop_front();
        if self.jobs.is_empty() {
            self.next_low = None;
        }
        b
    }

    /// When the next job may become low.
    pub(crate) fn next_low(&self) -> Option<Instant> {
        self.next_low
    }

    /// Takes out every job that is low at `now`, keeping the others in order.
    pub(crate) fn take_low(&mut self, now: Instant) -> Vec<Buffered> {
        let min_share = self.min_share;
        let (low, keep): (Vec<Buffered>, Vec<Buffered>) =
            self.jobs.drain(..).partition(|b| b.low(now, min_share));
        self.jobs = keep.into();
        self.next_low = self
            .jobs
            .iter()
            .filter_map(|b| b.low_at(self.min_share))
            .min();
        low
    }

    /// Takes out every job.
    pub(crate) fn take_all(&mut self) -> Vec<Buffered> {
        self.next_low = None;
        self.jobs.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use delayq_core::{Backoff, Job, JobId, JobState, Lease, LeaseToken, Timestamp, Topic};

    fn delivery(id: &str, ttr: Duration, leased: bool) -> Delivery {
        delivery_of("t", id, ttr, leased.then_some(1))
    }

    fn delivery_of(topic: &str, id: &str, ttr: Duration, token: Option<u64>) -> Delivery {
        let topic = Topic::new(topic).unwrap_or_else(|e| panic!("{e}"));
        let id = JobId::new(id).unwrap_or_else(|e| panic!("{e}"));
        Delivery {
            job: Job {
                topic: topic.clone(),
                id: id.clone(),
                body: Bytes::new(),
                state: JobState::Reserved,
                priority: 0,
                ready_at: Timestamp::from_millis(0),
                ttr,
                max_attempts: 1,
                backoff: Backoff::default(),
                attempts: 1,
                created_at: Timestamp::from_millis(0),
                deadline: None,
                last_error: None,
                expires_at: None,
                on_expire: delayq_core::OnExpire::Dead,
            },
            lease: token.map(|token| Lease {
                topic,
                id,
                token: LeaseToken(token),
            }),
            lateness: Duration::ZERO,
        }
    }

    #[test]
    fn low_jobs_are_taken_out_and_the_next_time_follows() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut b = Buffer::new(0.5);
        b.push(delivery("a", 10 * s, true), t0 + 10 * s); // Low at t0 + 5 s.
        b.push(delivery("b", 2 * s, true), t0 + 2 * s); // Low at t0 + 1 s.
        b.push(delivery("c", 2 * s, false), t0 + 2 * s); // No lease: never low.
        assert_eq!(b.next_low(), Some(t0 + s));
        assert!(b.take_low(t0).is_empty());
        let low = b.take_low(t0 + s);
        assert_eq!(low.len(), 1);
        assert_eq!(low[0].delivery.job.id.as_str(), "b");
        assert!(!low[0].expired(t0 + s));
        assert!(low[0].expired(t0 + 2 * s));
        assert_eq!(b.next_low(), Some(t0 + 5 * s));
        assert_eq!(b.len(), 2);
        let order: Vec<String> = b
            .take_all()
            .iter()
            .map(|x| x.delivery.job.id.to_string())
            .collect();
        assert_eq!(order, ["a", "c"]);
        assert!(b.is_empty() && b.next_low().is_none());
    }

    /// Batches that crossed on their way (the later call's jobs came back first) are taken
    /// in the engine's order, topic by topic; jobs without a lease keep their arrival order.
    #[test]
    fn crossed_batches_go_back_in_the_engines_order() {
        let t0 = Instant::now();
        let s = Duration::from_secs(30);
        let mut b = Buffer::new(0.5);
        for (topic, id, token) in [
            ("t", "c", Some(3)),
            ("t", "d", Some(4)),
            ("u", "x", Some(9)),
            ("t", "a", Some(1)),
            ("t", "b", Some(2)),
            ("u", "w", Some(8)),
            ("t", "m", None),
        ] {
            b.push(delivery_of(topic, id, s, token), t0 + s);
        }
        let order: Vec<String> = b
            .take_all()
            .iter()
            .map(|x| x.delivery.job.id.to_string())
            .collect();
        assert_eq!(order, ["a", "b", "c", "d", "w", "x", "m"]);
    }
}
