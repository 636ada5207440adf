//! `reserve`, `reserve-with-timeout` and `reserve-job`: one waiting reserve of the engine over
//! the watched tubes' topics (event-driven, no polling), cut short when a job this
//! connection holds comes within a second of its deadline (`DEADLINE_SOON`, as beanstalkd).
//! On one watched tube the reserve first waits its turn in the tube's line (`line.rs`), so
//! that the connection that has waited longest gets the next job, as in beanstalkd.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::proto::Reply;
use crate::session::{Held, Session, failure};
use delayq_core::limits::MAX_RESERVE_TOPICS;
use delayq_core::{Delivery, DeliveryMode, Error, JobState, Reserve, Topic};

/// beanstalkd's safety margin: a held job this close to its deadline makes a reserve answer
/// `DEADLINE_SOON` instead of waiting.
const SAFETY_MARGIN: Duration = Duration::from_secs(1);
/// The longest one engine wait of a `reserve` without a timeout (it waits again after).
const STEP: Duration = Duration::from_secs(300);

/// Counts one more while it lives.
struct Counted<'a>(&'a AtomicU64);

impl<'a> Counted<'a> {
    fn new(c: &'a AtomicU64) -> Self {
        c.fetch_add(1, Ordering::Relaxed);
        Counted(c)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Session {
    /// Forgets the held jobs whose ttr has run out: they are no longer this connection's
    /// (the engine hands them out again), as in beanstalkd.
    fn forget_expired(&mut self) {
        let now = Instant::now();
        self.held.retain(|_, h| h.deadline > now);
    }

    /// When the first held job enters its safety margin.
    fn margin_at(&self) -> Option<Instant> {
        self.held
            .values()
            .map(|h| h.deadline.checked_sub(SAFETY_MARGIN).unwrap_or(h.deadline))
            .min()
    }

    /// `reserve` (`timeout` None) and `reserve-with-timeout`.
    pub(crate) async fn reserve(&mut self, timeout: Option<Duration>) -> Reply {
        self.became_worker();
        let started = Instant::now();
        // A reserve waits on at most MAX_RESERVE_TOPICS topics; beyond, the first ones
        // watched are served (a documented difference).
        let topics: Vec<Topic> = self
            .watched
            .iter()
            .take(MAX_RESERVE_TOPICS)
            .map(|(_, t)| t.clone())
            .collect();
        let shared = self.shared.clone();
        let _waiting = shared.tubes.waiting(&self.watched);
        let _counted = Counted::new(&shared.stats.waiting);
        let mut first = true;
        // At the head of the one watched tube's line (`line.rs`): only then wait on the engine.
        let mut head = None;
        loop {
            self.forget_expired();
            let wait = self.wait_left(timeout, started);
            if topics.len() > 1 {
                match self.most_urgent(&topics).await {
                    Ok(Some(d)) => return self.delivered(d),
                    Ok(None) => {}
                    Err(e) => return failure("reserve", &e),
                }
            } else if first && wait > Duration::ZERO {
                // A ready job first, with the other connections asking now (`delayq_core::Coalescers`);
                // only then a wait of this connection's own.
                let once = self
                    .shared
                    .coalescers
                    .serve(&topics[..1], DeliveryMode::AtLeastOnce, 1, None)
                    .await;
                match once.map(|s| s.jobs.into_iter().next()) {
                    Ok(Some(d)) => return self.delivered(d),
                    Ok(None) => {}
                    Err(e) => return failure("reserve", &e),
                }
            }
            first = false;
            if topics.len() == 1 && head.is_none() && wait > Duration::ZERO {
                // Behind the reserves that began to wait on the tube before this one, for as
                // long as the timeout and the held jobs' margin allow.
                let turn = shared.lines.wait_turn(&topics[0]);
                let until = [timeout.map(|t| started + t), self.margin_at()]
                    .into_iter()
                    .flatten()
                    .min();
                head = match until {
                    Some(at) => tokio::time::timeout_at(at.into(), turn).await.ok(),
                    None => Some(turn.await),
                };
            }
            if head.is_some() || topics.len() > 1 || wait.is_zero() {
                let wait = self.wait_left(timeout, started);
                let req = Reserve::topics(topics.clone()).max(1).wait(wait);
                match self.shared.engine.reserve(&req).await {
                    Ok(d) => {
                        if let Some(d) = d.into_iter().next() {
                            return self.delivered(d);
                        }
                    }
                    Err(e) => return failure("reserve", &e),
                }
            }
            self.forget_expired();
            let now = Instant::now();
            if self.margin_at().is_some_and(|at| at <= now) {
                return Reply::DeadlineSoon;
            }
            if timeout.is_some_and(|t| now - started >= t) || self.shared.draining() {
                return Reply::TimedOut;
            }
        }
    }

    /// How long a reserve that began at `started` may still wait on the engine: what is left
    /// of its timeout (a step of [`STEP`] without one), no later than the first held job's
    /// margin, and not at all while the server drains.
    fn wait_left(&self, timeout: Option<Duration>, started: Instant) -> Duration {
        if self.shared.draining() {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let wait = match timeout {
            Some(t) => t.saturating_sub(now - started),
            None => STEP,
        };
        match self.margin_at() {
            Some(at) => wait.min(at.saturating_duration_since(now)),
            None => wait,
        }
    }

    /// Over several watched tubes, beanstalkd hands out the most urgent ready job of them
    /// all (the lowest priority number, then the smallest id: here, as within a tube, the
    /// earliest due, then the smallest number); an engine reserve over several
    /// topics takes them in turn instead. So a reserve over several tubes first looks at the
    /// head of each unpaused tube's ready jobs and reserves the most urgent by its id
    /// (`Engine::reserve_job`), again if another reserver took it first. `None`: no tube has
    /// a ready job (the caller waits).
    ///
    /// The tubes' counts are read together (`Engine::stats_each`): on a Redis Cluster a tube
    /// whose primary is dead or hung answers `unavailable` within the slot timeout, or at
    /// once while it is skipped, and is passed over as the engine's reserve over several
    /// topics passes over it: the other tubes' jobs are served (issue 37). Only when no
    /// tube's counts could be read does the reserve fail.
    async fn most_urgent(&self, topics: &[Topic]) -> delayq_core::Result<Option<Delivery>> {
        let engine = &self.shared.engine;
        for _ in 0..8 {
            // The engine's ready order across tubes: priority, then due time, then number.
            let mut best: Option<((u32, u64, u64), delayq_core::Job)> = None;
            let mut read = Vec::with_capacity(topics.len());
            let mut unavailable = None;
            for (topic, stats) in topics.iter().zip(engine.stats_each(topics).await) {
                match stats {
                    Ok(s) => read.push((topic, s)),
                    Err(e @ Error::Unavailable { .. }) => {
                        unavailable.get_or_insert(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            if let (true, Some(e)) = (read.is_empty(), unavailable) {
                return Err(e);
            }
            for (topic, stats) in read {
                if stats.ready == 0 || stats.paused_until.is_some() {
                    continue;
                }
                let Some(job) = engine
                    .list(topic, JobState::Ready, 1, None)
                    .await?
                    .jobs
                    .into_iter()
                    .next()
                else {
                    continue;
                };
                let n = self.shared.numbers.number_of(&job.topic, &job.id);
                let rank = (job.priority, job.ready_at.as_millis(), n);
                if best.as_ref().is_none_or(|(b, _)| rank < *b) {
                    best = Some((rank, job));
                }
            }
            let Some((_, job)) = best else {
                return Ok(None);
            };
            match engine.reserve_job(&job.topic, &job.id).await {
                Ok(d) => return Ok(Some(d)),
                // Taken (or gone) meanwhile: look again.
                Err(Error::NotFound { .. } | Error::WrongState { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The topic of the one watched tube.
    fn used_or_watched_topic(&self) -> Topic {
        self.watched
            .first()
            .map_or_else(|| self.used.1.clone(), |(_, t)| t.clone())
    }

    /// Whether this connection holds the job numbered `n`.
    pub(crate) fn holds(&self, n: u64) -> bool {
        self.held.contains_key(&n)
    }

    /// `delete <n>` of a held job, then a first look for the next job of the watched tubes,
    /// in one engine call (`Engine::settle_and_reserve`): the delete's answer, and the
    /// reserve's when a job was ready (else `None`: the reserve runs as usual, waiting).
    pub(crate) async fn delete_then_reserve(&mut self, n: u64) -> (Reply, Option<Reply>) {
        let Some(h) = self.held.remove(&n) else {
            return (self.delete(n).await, None);
        };
        // One watched tube (the caller checks): served with the other connections' asks.
        let topic = self.used_or_watched_topic();
        let answer = match self
            .shared
            .coalescers
            .serve(
                std::slice::from_ref(&topic),
                DeliveryMode::AtLeastOnce,
                1,
                Some(h.lease.clone()),
            )
            .await
        {
            Ok(a) => a,
            Err(e) => return (failure("delete", &e), None),
        };
        let deleted = match answer.acked {
            Some(Ok(_)) => {
                self.deleted(&h.lease.topic);
                Reply::Deleted
            }
            // The lease ran out: as `delete` of a job this connection does not hold.
            Some(Err(e)) if e.ends_delivery() => self.delete(n).await,
            Some(Err(e)) => failure("delete", &e),
            None => Reply::InternalError,
        };
        let reserved = answer.jobs.into_iter().next().map(|d| {
            self.became_worker();
            self.delivered(d)
        });
        (deleted, reserved)
    }

    /// `reserve-job <id>`: a delayed, ready or buried job, leased by its number.
    pub(crate) async fn reserve_job(&mut self, n: u64) -> Reply {
        if self.held.contains_key(&n) {
            return Reply::NotFound;
        }
        let found = match self.shared.numbers.find(n).await {
            Ok(Some(f)) => f,
            Ok(None) => return Reply::NotFound,
            Err(e) => return failure("finding a job by its number", &e),
        };
        match self
            .shared
            .engine
            .reserve_job(&found.topic, &found.id)
            .await
        {
            Ok(d) => {
                self.became_worker();
                self.delivered(d)
            }
            Err(Error::NotFound { .. } | Error::WrongState { .. }) => Reply::NotFound,
            Err(e) => failure("reserve-job", &e),
        }
    }

    fn became_worker(&mut self) {
        if !self.worker {
            self.worker = true;
            self.shared.stats.workers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Keeps a delivery's lease and answers it.
    fn delivered(&mut self, d: Delivery) -> Reply {
        let n = self.shared.numbers.number_of(&d.job.topic, &d.job.id);
        self.shared.stats.reserved();
        if let Some(lease) = d.lease {
            self.held.insert(
                n,
                Held {
                    lease,
                    deadline: Instant::now() + d.job.ttr,
                    ttr: d.job.ttr,
                },
            );
        }
        Reply::Reserved {
            id: n,
            body: d.job.body,
        }
    }
}
