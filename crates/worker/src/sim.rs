//! A simulated store for the throughput guard (paused tokio time): one topic of ready jobs
//! behind a network round trip and a single-threaded server, as Redis is.
//!
//! Every `settle_and_reserve` travels half a round trip, waits its turn at the server (which
//! answers one call at a time, for a fixed cost per call and a cost per job it settles or
//! hands out), and travels back. Under paused time the worker's own CPU costs nothing, so
//! the jobs per virtual second a worker reaches depend only on how well it keeps calls on
//! their way: a worker that waits for one answer before it sends the next call, or that
//! sends too few jobs' worth per call, shows here as a lower rate, the same on every run.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{
    Backoff, Bury, Cursor, Delivery, Engine, Error, Job, JobId, JobState, Lease, LeaseToken, Nack,
    NackOutcome, NewJob, Page, Pushed, Release, Reserve, Result, Schedule, Settle, Settled,
    SettledAndReserved, Timestamp, Topic, TopicConfig, TopicStats, async_trait,
};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep, sleep_until};

/// The store's costs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Costs {
    /// The network's round trip (half each way).
    pub(crate) round_trip: Duration,
    /// The server's time for one call, whatever it carries.
    pub(crate) per_call: Duration,
    /// The server's time for each job a call settles or hands out.
    pub(crate) per_job: Duration,
}

struct State {
    costs: Costs,
    /// Ready jobs, by number.
    ready: VecDeque<u64>,
    /// The server is busy with earlier calls until then.
    busy_until: Instant,
    next_token: u64,
    acked: u64,
    calls: u64,
}

/// The simulated store. Cloning shares it.
#[derive(Clone)]
pub(crate) struct SimStore {
    state: Arc<Mutex<State>>,
    acked: Arc<Notify>,
}

impl SimStore {
    /// A store holding `jobs` ready jobs.
    pub(crate) fn new(costs: Costs, jobs: u64) -> Self {
        SimStore {
            state: Arc::new(Mutex::new(State {
                costs,
                ready: (0..jobs).collect(),
                busy_until: Instant::now(),
                next_token: 0,
                acked: 0,
                calls: 0,
            })),
            acked: Arc::new(Notify::new()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn topic() -> Topic {
        Topic::new("sim").unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until `n` jobs were acked.
    pub(crate) async fn acked(&self, n: u64) {
        loop {
            let wake = self.acked.notified();
            if self.state().acked >= n {
                return;
            }
            wake.await;
        }
    }

    /// Calls the server answered.
    pub(crate) fn calls(&self) -> u64 {
        self.state().calls
    }
}

fn delivery(n: u64, token: u64) -> Delivery {
    let topic = SimStore::topic();
    let id = JobId::new(format!("job-{n}")).unwrap_or_else(|e| panic!("{e}"));
    let at = Timestamp::from_millis(1_700_000_000_000);
    Delivery {
        lease: Some(Lease {
            topic: topic.clone(),
            id: id.clone(),
            token: LeaseToken(token),
        }),
        job: Job {
            topic,
            id,
            body: Bytes::from_static(b"sim"),
            state: JobState::Reserved,
            priority: 0,
            ready_at: at,
            ttr: Duration::from_secs(30),
            max_attempts: 3,
            backoff: Backoff::default(),
            attempts: 1,
            created_at: at,
            deadline: None,
            last_error: None,
            expires_at: None,
            on_expire: delayq_core::OnExpire::Dead,
        },
        lateness: Duration::ZERO,
    }
}

fn unsupported<T>(what: &str) -> Result<T> {
    Err(Error::Internal(format!(
        "the simulated store does not {what}"
    )))
}

#[async_trait]
impl Engine for SimStore {
    async fn push_batch(&self, _jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        unsupported("push")
    }

    async fn get(&self, _topic: &Topic, _id: &JobId) -> Result<Option<Job>> {
        unsupported("get")
    }

    async fn delete(&self, _topic: &Topic, _id: &JobId) -> Result<bool> {
        unsupported("delete")
    }

    async fn reschedule(&self, _topic: &Topic, _id: &JobId, _when: Schedule) -> Result<Timestamp> {
        unsupported("reschedule")
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        Ok(self.settle_and_reserve(&[], req).await?.deliveries)
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        delayq_core::check_settle_and_reserve(settle, req)?;
        let half = self.state().costs.round_trip / 2;
        sleep(half).await;
        let (settled, deliveries, answered) = {
            let mut s = self.state();
            let mut settled = Vec::with_capacity(settle.len());
            for x in settle {
                settled.push(match x {
                    Settle::Ack(_) => {
                        s.acked += 1;
                        Ok(Settled::Acked)
                    }
                    _ => unsupported("settle anything but acks"),
                });
            }
            let taken = req.max.min(s.ready.len());
            let mut deliveries = Vec::with_capacity(taken);
            for _ in 0..taken {
                let Some(n) = s.ready.pop_front() else { break };
                s.next_token += 1;
                deliveries.push(delivery(n, s.next_token));
            }
            let work = settle.len() + taken;
            let jobs = u32::try_from(work).unwrap_or(u32::MAX);
            let start = s.busy_until.max(Instant::now());
            s.busy_until = start + s.costs.per_call + s.costs.per_job * jobs;
            s.calls += 1;
            (settled, deliveries, s.busy_until + half)
        };
        if !settle.is_empty() {
            self.acked.notify_waiters();
        }
        sleep_until(answered).await;
        if deliveries.is_empty() && !req.wait.is_zero() {
            sleep(req.wait).await;
        }
        Ok(SettledAndReserved {
            settled,
            deliveries,
        })
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        let settle: Vec<Settle> = leases.iter().cloned().map(Settle::Ack).collect();
        let req = Reserve {
            max: 0,
            ..Reserve::new(Self::topic())
        };
        let out = self.settle_and_reserve(&settle, &req).await?;
        Ok(out.settled.into_iter().map(|r| r.map(|_| ())).collect())
    }

    async fn nack(&self, _lease: &Lease, _nack: Nack) -> Result<NackOutcome> {
        unsupported("nack")
    }

    async fn release_with(&self, _lease: &Lease, _release: Release) -> Result<()> {
        unsupported("release")
    }

    async fn touch(&self, _lease: &Lease, _ttr: Option<Duration>) -> Result<Timestamp> {
        unsupported("touch")
    }

    async fn bury_with(&self, _lease: &Lease, _bury: Bury) -> Result<()> {
        unsupported("bury")
    }

    async fn kick(&self, _topic: &Topic, _id: &JobId) -> Result<()> {
        unsupported("kick")
    }

    async fn kick_all(&self, _topic: &Topic) -> Result<u64> {
        unsupported("kick")
    }

    async fn list(
        &self,
        _topic: &Topic,
        _state: JobState,
        _limit: usize,
        _after: Option<&Cursor>,
    ) -> Result<Page> {
        unsupported("list")
    }

    async fn stats(&self, _topic: &Topic) -> Result<TopicStats> {
        unsupported("stats")
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        unsupported("topics")
    }

    async fn purge(&self, _topic: &Topic) -> Result<u64> {
        unsupported("purge")
    }

    async fn now(&self) -> Result<Timestamp> {
        unsupported("now")
    }

    async fn reserve_job(&self, _topic: &Topic, _id: &JobId) -> Result<Delivery> {
        unsupported("reserve_job")
    }

    async fn bury_waiting(
        &self,
        _topic: &Topic,
        _id: &JobId,
        _reason: Option<String>,
    ) -> Result<()> {
        unsupported("bury_waiting")
    }

    async fn topic_config(&self, _topic: &Topic) -> Result<TopicConfig> {
        unsupported("topic_config")
    }

    async fn set_topic_config(&self, _topic: &Topic, _config: &TopicConfig) -> Result<()> {
        unsupported("set_topic_config")
    }

    async fn pause(&self, _topic: &Topic, _until: Option<Timestamp>) -> Result<()> {
        unsupported("pause")
    }

    /// None: every topic lives in one store, where a failure fails the whole call.
    fn unreachable(&self, _topics: &[Topic]) -> Vec<Topic> {
        Vec::new()
    }
}
