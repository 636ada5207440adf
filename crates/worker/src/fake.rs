//! A scripted engine for the unit tests (paused tokio time): hands out queued deliveries,
//! answers touches from a script, and records every lease call the worker makes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{
    Backoff, Bury, Cursor, Delivery, Engine, Error, Job, JobId, JobState, Lease, LeaseToken, Nack,
    NackOutcome, NewJob, Page, Pushed, Release, Reserve, Result, Schedule, Settle, Settled,
    SettledAndReserved, Timestamp, Topic, TopicConfig, TopicStats, async_trait,
};
use tokio::time::Instant;

/// What the fake engine was asked.
#[derive(Clone, Default)]
pub(crate) struct Calls {
    pub(crate) reserves: Vec<Instant>,
    pub(crate) touches: Vec<Instant>,
    pub(crate) acks: Vec<JobId>,
    /// Acks sent through `ack` or `ack_batch` rather than `settle_and_reserve`.
    pub(crate) direct_acks: usize,
    /// How many `settle_and_reserve` calls carried settlements.
    pub(crate) settle_calls: usize,
    pub(crate) nacks: Vec<(JobId, Nack)>,
    pub(crate) buries: Vec<(JobId, Option<String>)>,
    pub(crate) releases: Vec<JobId>,
    /// The most reserving calls on their way at once.
    pub(crate) max_in_flight: usize,
    /// The most leases handed out and not settled yet at any time.
    pub(crate) max_leased: usize,
    in_flight: usize,
    leased: usize,
}

#[derive(Default)]
struct State {
    deliveries: VecDeque<Delivery>,
    touch_answers: VecDeque<Result<Timestamp>>,
    reserve_fails: bool,
    /// How long a reserve that hands out jobs takes.
    reserve_latency: Duration,
    /// How long the next reserves that hand out jobs take, in order (then
    /// `reserve_latency`).
    scripted_latency: VecDeque<Duration>,
    /// The lease token of the next job handed out: tokens grow in hand-out order.
    next_token: u64,
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
            expires_at: None,
            on_expire: delayq_core::OnExpire::Dead,
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

    fn ack_one(&self, lease: &Lease) -> Result<()> {
        self.state().calls.acks.push(lease.id.clone());
        Ok(())
    }

    /// Every reserve that hands out jobs takes this long to answer.
    pub(crate) fn slow_reserves(&self, latency: Duration) {
        self.state().reserve_latency = latency;
    }

    /// The next reserves that hand out jobs take these times to answer, in order (then
    /// the time `slow_reserves` set): answers can come back in another order than asked.
    pub(crate) fn script_reserve_latency(&self, latency: impl IntoIterator<Item = Duration>) {
        self.state().scripted_latency.extend(latency);
    }

    /// What the worker asked so far.
    pub(crate) fn calls(&self) -> Calls {
        self.state().calls.clone()
    }
}

/// Counts a reserve on its way, until it is answered or dropped.
struct InFlight(FakeEngine);

impl InFlight {
    fn new(engine: &FakeEngine) -> Self {
        let mut s = engine.state();
        s.calls.in_flight += 1;
        s.calls.max_in_flight = s.calls.max_in_flight.max(s.calls.in_flight);
        drop(s);
        InFlight(engine.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.state().calls.in_flight -= 1;
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
        let _on_its_way = InFlight::new(self);
        let (got, latency): (Vec<Delivery>, Duration) = {
            let mut s = self.state();
            s.calls.reserves.push(Instant::now());
            if s.reserve_fails {
                return Err(Error::Unavailable {
                    message: "the fake store is down".into(),
                    source: None,
                });
            }
            let n = req.max.min(s.deliveries.len());
            s.calls.leased += n;
            s.calls.max_leased = s.calls.max_leased.max(s.calls.leased);
            let mut got: Vec<Delivery> = s.deliveries.drain(..n).collect();
            for d in &mut got {
                if let Some(lease) = &mut d.lease {
                    s.next_token += 1;
                    lease.token = LeaseToken(s.next_token);
                }
            }
            // An empty answer waits the reserve's wait instead.
            let latency = if got.is_empty() {
                Duration::ZERO
            } else {
                let fallback = s.reserve_latency;
                s.scripted_latency.pop_front().unwrap_or(fallback)
            };
            (got, latency)
        };
        if got.is_empty() {
            tokio::time::sleep(req.wait).await;
        } else {
            tokio::time::sleep(latency).await;
        }
        Ok(got)
    }

    async fn ack(&self, lease: &Lease) -> Result<()> {
        self.state().calls.direct_acks += 1;
        self.ack_one(lease)
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        self.state().calls.direct_acks += leases.len();
        Ok(leases.iter().map(|l| self.ack_one(l)).collect())
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        delayq_core::check_settle_and_reserve(settle, req)?;
        if !settle.is_empty() {
            let mut s = self.state();
            s.calls.settle_calls += 1;
            s.calls.leased = s.calls.leased.saturating_sub(settle.len());
        }
        let mut settled = Vec::with_capacity(settle.len());
        for s in settle {
            settled.push(match s {
                Settle::Ack(l) => self.ack_one(l).map(|()| Settled::Acked),
                Settle::Nack(l, n) => self.nack(l, n.clone()).await.map(Settled::Nacked),
                Settle::Bury(l, r) => self.bury(l, r.clone()).await.map(|()| Settled::Buried),
                Settle::Release(l) => self.release(l).await.map(|()| Settled::Released),
            });
        }
        let deliveries = if req.max == 0 {
            Vec::new()
        } else {
            self.reserve(req).await?
        };
        Ok(SettledAndReserved {
            settled,
            deliveries,
        })
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        self.state().calls.nacks.push((lease.id.clone(), nack));
        Ok(NackOutcome::Retry {
            ready_at: Timestamp::from_millis(1_700_000_000_000),
        })
    }

    async fn release_with(&self, lease: &Lease, _release: Release) -> Result<()> {
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

    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        self.state()
            .calls
            .buries
            .push((lease.id.clone(), bury.reason));
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

    async fn reserve_job(&self, _topic: &Topic, _id: &JobId) -> Result<Delivery> {
        internal("reserve_job")
    }

    async fn bury_waiting(
        &self,
        _topic: &Topic,
        _id: &JobId,
        _reason: Option<String>,
    ) -> Result<()> {
        internal("bury_waiting")
    }

    async fn topic_config(&self, _topic: &Topic) -> Result<TopicConfig> {
        internal("topic_config")
    }

    async fn set_topic_config(&self, _topic: &Topic, _config: &TopicConfig) -> Result<()> {
        internal("set_topic_config")
    }

    async fn pause(&self, _topic: &Topic, _until: Option<Timestamp>) -> Result<()> {
        internal("pause")
    }

    /// None: every topic lives in one store, where a failure fails the whole call.
    fn unreachable(&self, _topics: &[Topic]) -> Vec<Topic> {
        Vec::new()
    }
}
