//! A scripted engine for the unit tests (paused tokio time): hands out queued deliveries,
//! answers touches from a script, and records every lease call the worker makes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{
    Backoff, Cursor, Delivery, Engine, Error, Job, JobId, JobState, Lease, LeaseToken, Nack,
    NackOutcome, NewJob, Page, Pushed, Reserve, Result, Schedule, Timestamp, Topic, TopicStats,
    async_trait,
};
use tokio::time::Instant;

/// What the fake engine was asked.
#[derive(Clone, Default)]
pub(crate) struct Calls {
    pub(crate) reserves: Vec<Instant>,
    pub(crate) touches: Vec<Instant>,
    pub(crate) acks: Vec<JobId>,
    /// How many `ack_batch` calls carried those acks.
    pub(crate) ack_batches: usize,
    pub(crate) nacks: Vec<(JobId, Nack)>,
    pub(crate) buries: Vec<(JobId, Option<String>)>,
    pub(crate) releases: Vec<JobId>,
}

#[derive(Default)]
struct State {
    deliveries: VecDeque<Delivery>,
    touch_answers: VecDeque<Result<Timestamp>>,
    reserve_fails: bool,
    calls: Calls,
}

#[derive(Clone, Default)]
pub(crate) struct FakeEngine(Arc<Mutex<State>>);

fn internal<T>(what: &str) -> Result<T> {
    Err(Error::Internal(format!("the fake engine does not {what}")))
}

impl FakeEngine {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn topic() -> Topic {
        Topic::new("fake").unwrap_or_else(|e| panic!("{e}"))
    }

    /// Queues a delivery of a job with this ttr (`lease: false` for at-most-once).
    pub(crate) fn deliver(&self, id: &str, ttr: Duration, lease: bool) {
        let id = JobId::new(id).unwrap_or_else(|e| panic!("{e}"));
        let job = Job {
            topic: Self::topic(),
            id: id.clone(),
            body: Bytes::from_static(b"body"),
            state: JobState::Reserved,
            priority: 0,
            ready_at: Timestamp::from_millis(1_700_000_000_000),
            ttr,
            max_attempts: 3,
            backoff: Backoff::default(),
            attempts: 1,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            deadline: None,
            last_error: None,
        };
        let lease = lease.then(|| Lease {
            topic: Self::topic(),
            id,
            token: LeaseToken(1),
        });
        self.state().deliveries.push_back(Delivery {
            job,
            lease,
            lateness: Duration::ZERO,
        });
    }

    /// The next touches answer these, in order (then `Ok`).
    pub(crate) fn answer_touches(&self, answers: impl IntoIterator<Item = Result<Timestamp>>) {
        self.state().touch_answers.extend(answers);
    }

    /// Every reserve fails with `Unavailable`.
    pub(crate) fn fail_reserves(&self) {
        self.state().reserve_fails = true;
    }

    /// What the worker asked so far.
    pub(crate) fn calls(&self) -> Calls {
        self.state().calls.clone()
    }
}

#[async_trait]
impl Engine for FakeEngine {
    async fn push(&self, _job: NewJob) -> Result<Pushed> {
        internal("push")
    }

    async fn push_batch(&self, _jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        internal("push")
    }

    async fn get(&self, _topic: &Topic, _id: &JobId) -> Result<Option<Job>> {
        internal("get")
    }

    async fn delete(&self, _topic: &Topic, _id: &JobId) -> Result<bool> {
        internal("delete")
    }

    async fn reschedule(&self, _topic: &Topic, _id: &JobId, _when: Schedule) -> Result<Timestamp> {
        internal("reschedule")
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        let got: Vec<Delivery> = {
            let mut s = self.state();
            s.calls.reserves.push(Instant::now());
            if s.reserve_fails {
                return Err(Error::Unavailable {
                    message: "the fake store is down".into(),
                    source: None,
                });
            }
            let n = req.max.min(s.deliveries.len());
            s.deliveries.drain(..n).collect()
        };
        if got.is_empty() {
            tokio::time::sleep(req.wait).await;
        }
        Ok(got)
    }

    async fn ack(&self, lease: &Lease) -> Result<()> {
        self.state().calls.acks.push(lease.id.clone());
        Ok(())
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        // A round trip takes time, so acks sent meanwhile gather in the next batch.
        tokio::task::yield_now().await;
        let mut s = self.state();
        s.calls.ack_batches += 1;
        s.calls.acks.extend(leases.iter().map(|l| l.id.clone()));
        Ok(leases.iter().map(|_| Ok(())).collect())
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        self.state().calls.nacks.push((lease.id.clone(), nack));
        Ok(NackOutcome::Retry {
            ready_at: Timestamp::from_millis(1_700_000_000_000),
        })
    }

    async fn release(&self, lease: &Lease) -> Result<()> {
        self.state().calls.releases.push(lease.id.clone());
        Ok(())
    }

    async fn touch(&self, _lease: &Lease, _ttr: Option<Duration>) -> Result<Timestamp> {
        let mut s = self.state();
        s.calls.touches.push(Instant::now());
        s.touch_answers
            .pop_front()
            .unwrap_or(Ok(Timestamp::from_millis(1_700_000_000_000)))
    }

    async fn bury(&self, lease: &Lease, reason: Option<String>) -> Result<()> {
        self.state().calls.buries.push((lease.id.clone(), reason));
        Ok(())
    }

    async fn kick(&self, _topic: &Topic, _id: &JobId) -> Result<()> {
        internal("kick")
    }

    async fn kick_all(&self, _topic: &Topic) -> Result<u64> {
        internal("kick")
    }

    async fn list(
        &self,
        _topic: &Topic,
        _state: JobState,
        _limit: usize,
        _after: Option<&Cursor>,
    ) -> Result<Page> {
        internal("list")
    }

    async fn stats(&self, _topic: &Topic) -> Result<TopicStats> {
        internal("stats")
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        internal("topics")
    }

    async fn purge(&self, _topic: &Topic) -> Result<u64> {
        internal("purge")
    }

    async fn now(&self) -> Result<Timestamp> {
        internal("now")
    }
}
