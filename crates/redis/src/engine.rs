//! [`RedisEngine`]: the [`Engine`] contract on Redis. It checks the caller's input and
//! dispatches to `ops` (one module per group of operations); `conn` owns the connection
//! and the functions library.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::limits::{check_count, check_reason, check_ttr};
use delayq_core::{
    Bury, Cursor, Delivery, Destinations, Engine, Error, Job, JobId, JobSchedule, JobState, Lease,
    Nack, NackOutcome, NewJob, Numbers, Page, Pushed, Readiness, Release, Reserve, Result,
    Schedule, ScheduleName, Schedules, Settle, SettledAndReserved, StoredDestination,
    StoredSchedule, Timestamp, Topic, TopicConfig, TopicStats, async_trait, check_ack_batch,
    check_claim, check_destination_doc, check_push_batch, check_settle_and_reserve,
};
use tokio::sync::oneshot;

use crate::RedisConfig;
use crate::conn::Conn;
use crate::keys::KeySpace;
use crate::ops::Ops;
use crate::wait::Waiters;

/// The Redis engine. Cheap to clone; clones share one connection and one waker task, which
/// stops when the last clone is dropped.
///
/// ```no_run
/// # async fn demo() -> delayq_core::Result<()> {
/// use std::time::Duration;
/// use delayq_core::{Engine, NewJob, Reserve, Topic};
/// use delayq_redis::{RedisConfig, RedisEngine};
///
/// let engine = RedisEngine::connect(RedisConfig::new("redis://127.0.0.1:6379")).await?;
/// let topic = Topic::new("orders")?;
/// engine.push(NewJob::new(topic.clone(), "cancel 42").with_delay(Duration::from_secs(2))).await?;
/// let jobs = engine.reserve(&Reserve::new(topic).wait(Duration::from_secs(5))).await?;
/// for d in &jobs {
///     if let Some(lease) = &d.lease {
///         engine.ack(lease).await?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisEngine {
    ops: Arc<Ops>,
}

impl RedisEngine {
    /// Connects, checks that the server is Redis 7.0 or newer, loads the functions library
    /// and starts the waker task. Warns (through `tracing`) when the server's
    /// `maxmemory-policy` may evict keys: jobs would then vanish silently.
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        let keys = KeySpace::new(&config.prefix)?;
        if config.tick_batch == 0 || config.tick_batch > 100_000 {
            return Err(Error::InvalidConfig {
                reason: format!("tick_batch {} is outside 1 to 100000", config.tick_batch),
            });
        }
        if config.safety_wake < Duration::from_millis(100) {
            return Err(Error::InvalidConfig {
                reason: "safety_wake must be at least 100 ms".into(),
            });
        }
        let (conn, client) = Conn::connect(&config).await?;
        let (stop_tx, stop_rx) = oneshot::channel();
        let waiters = Waiters::start(client, conn.clone(), keys.clone(), stop_rx);
        Ok(RedisEngine {
            ops: Arc::new(Ops {
                conn,
                keys,
                limits: config.limits,
                tick_batch: config.tick_batch,
                safety_wake: config.safety_wake,
                waiters,
                rotate: AtomicUsize::new(0),
                registered: Mutex::new(HashMap::new()),
                layouts: Mutex::new(HashMap::new()),
                listed: Mutex::new([None, None]),
                registering: Arc::default(),
                quiet: Mutex::new(HashMap::new()),
                _stop: stop_tx,
            }),
        })
    }
}

#[async_trait]
impl Engine for RedisEngine {
    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        check_push_batch(&jobs, &self.ops.limits)?;
        self.ops.push_batch(jobs).await
    }

    async fn push_each(&self, jobs: Vec<NewJob>) -> Result<Vec<Result<Pushed>>> {
        check_push_batch(&jobs, &self.ops.limits)?;
        self.ops.push_each(jobs).await
    }

    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        self.ops.get(topic, id).await
    }

    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        self.ops.delete(topic, id).await
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp> {
        when.validate()?;
        self.ops.reschedule(topic, id, when).await
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        req.validate()?;
        Ok(self.ops.settle_then_reserve(&[], req).await?.deliveries)
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        check_settle_and_reserve(settle, req)?;
        self.ops.settle_then_reserve(settle, req).await
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases)?;
        self.ops.ack_batch(leases).await
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        nack.validate()?;
        self.ops.nack(lease, nack).await
    }

    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()> {
        release.validate()?;
        self.ops.release(lease, release).await
    }

    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        if let Some(ttr) = ttr {
            check_ttr(ttr)?;
        }
        self.ops.touch(lease, ttr).await
    }

    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        check_reason(bury.reason.as_deref())?;
        self.ops.bury(lease, bury).await
    }

    async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery> {
        self.ops.reserve_job(topic, id).await
    }

    async fn bury_waiting(&self, topic: &Topic, id: &JobId, reason: Option<String>) -> Result<()> {
        check_reason(reason.as_deref())?;
        self.ops.bury_waiting(topic, id, reason).await
    }

    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        self.ops.kick(topic, id).await
    }

    async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        self.ops.kick_all(topic).await
    }

    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        check_count("limit", limit)?;
        self.ops.list(topic, state, limit, after).await
    }

    async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        self.ops.stats(topic).await
    }

    async fn stats_each(&self, topics: &[Topic]) -> Vec<Result<TopicStats>> {
        self.ops.stats_each(topics).await
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        self.ops.topics().await
    }

    async fn purge(&self, topic: &Topic) -> Result<u64> {
        self.ops.purge(topic).await
    }

    async fn now(&self) -> Result<Timestamp> {
        self.ops.now().await
    }

    fn unreachable(&self, topics: &[Topic]) -> Vec<Topic> {
        self.ops.unreachable(topics)
    }

    async fn readiness(&self) -> Result<Readiness> {
        self.ops.conn.readiness().await
    }

    async fn topic_config(&self, topic: &Topic) -> Result<TopicConfig> {
        self.ops.config(topic).await
    }

    async fn set_topic_config(&self, topic: &Topic, config: &TopicConfig) -> Result<()> {
        config.validate()?;
        self.ops.set_config(topic, config).await
    }

    async fn pause(&self, topic: &Topic, until: Option<Timestamp>) -> Result<()> {
        self.ops
            .pause(topic, until.unwrap_or(Timestamp::NEVER))
            .await
    }
}

#[async_trait]
impl Numbers for RedisEngine {
    async fn claim_numbers(&self, topic: &Topic, count: u64) -> Result<u64> {
        check_claim(count)?;
        self.ops.claim_numbers(topic, count).await
    }

    async fn number_topic(&self, n: u64) -> Result<Option<Topic>> {
        self.ops.number_topic(n).await
    }
}

#[async_trait]
impl Schedules for RedisEngine {
    async fn put_schedule(&self, schedule: &JobSchedule) -> Result<u64> {
        schedule.validate()?;
        self.ops.put_schedule(schedule).await
    }

    async fn schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        self.ops.schedule(name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.ops.schedules().await
    }

    async fn delete_schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        self.ops.delete_schedule(name).await
    }

    async fn schedule_pushed(
        &self,
        name: &ScheduleName,
        revision: u64,
        through: Timestamp,
    ) -> Result<bool> {
        self.ops.schedule_pushed(name, revision, through).await
    }
}

#[async_trait]
impl Destinations for RedisEngine {
    async fn put_destination(&self, topic: &Topic, doc: &str) -> Result<()> {
        check_destination_doc(doc)?;
        self.ops.put_destination(topic, doc).await
    }

    async fn destination(&self, topic: &Topic) -> Result<Option<StoredDestination>> {
        self.ops.destination(topic).await
    }

    async fn destinations(&self) -> Result<Vec<StoredDestination>> {
        self.ops.destinations().await
    }

    async fn delete_destination(&self, topic: &Topic) -> Result<bool> {
        self.ops.delete_destination(topic).await
    }
}
