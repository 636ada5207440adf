//! [`PostgresEngine`]: the [`Engine`] contract on PostgreSQL. It checks the caller's input
//! and dispatches to `ops` (one module per group of operations, each owning its calls of
//! the library `sql/*.sql`); it owns the tasks beside the pool (the listener of `waiters`,
//! the sweeper, the vacuum), which stop when the last clone is dropped.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use deadpool_postgres::Object;
use delayq_core::limits::{check_reason, check_ttr};
use delayq_core::{
    Bury, Cursor, Delivery, Destinations, Engine, Job, JobId, JobSchedule, JobState, Lease, Nack,
    NackOutcome, NewJob, Numbers, Page, Pushed, Release, Reserve, Result, Schedule, ScheduleName,
    Schedules, Settle, SettledAndReserved, StoredDestination, StoredSchedule, Timestamp, Topic,
    TopicConfig, TopicStats, async_trait, check_ack_batch, check_claim, check_destination_doc,
    check_push_batch, check_settle_and_reserve,
};

use crate::config::PostgresConfig;
use crate::connect::Connector;
use crate::library;
use crate::ops::{Ops, admin, destinations, lease, numbers, push, reserve, schedules, topics};
use crate::sweeper::Sweeper;
use crate::vacuum::Vacuum;
use crate::waiters::Waiters;

/// The PostgreSQL engine. Cheap to clone; clones share one pool and one listener.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> delayq_core::Result<()> {
/// use std::time::Duration;
/// use delayq_core::{Engine, NewJob, Reserve, Topic};
/// use delayq_postgres::{PostgresConfig, PostgresEngine};
///
/// let engine = PostgresEngine::connect(PostgresConfig::new("postgres://app@127.0.0.1/app")).await?;
/// let topic = Topic::new("orders")?;
/// engine.push(NewJob::new(topic.clone(), "cancel 42").with_delay(Duration::from_millis(20))).await?;
/// for d in engine.reserve(&Reserve::new(topic).wait(Duration::from_secs(5))).await? {
///     if let Some(lease) = &d.lease {
///         engine.ack(lease).await?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresEngine {
    inner: Arc<Inner>,
}

struct Inner {
    ops: Arc<Ops>,
    listener: tokio::task::JoinHandle<()>,
    sweeping: tokio::task::JoinHandle<()>,
    vacuuming: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
        self.sweeping.abort();
        self.vacuuming.abort();
    }
}

impl PostgresEngine {
    /// Connects, brings the database to this build's schema (creating it in the schema
    /// `delayq` when missing) and starts listening for signals.
    ///
    /// Fails with [`delayq_core::Error::InvalidConfig`] for an unreadable URL or CA file,
    /// or a database set up by a newer delayq; with [`delayq_core::Error::Unavailable`]
    /// when PostgreSQL cannot be reached.
    pub async fn connect(config: PostgresConfig) -> Result<Self> {
        let connector = Connector::new(&config)?;
        let mut client = connector.connect().await?;
        library::install(&mut client).await?;
        drop(client);
        let pool = connector.pool(config.pool_size)?;
        let waiters = Arc::new(Waiters::default());
        let listener = tokio::spawn(crate::waiters::listen(connector, Arc::downgrade(&waiters)));
        let sweeper = Arc::new(Sweeper::default());
        let sweeping = tokio::spawn(crate::sweeper::run(pool.clone(), Arc::downgrade(&sweeper)));
        let vacuum = Arc::new(Vacuum::default());
        let vacuuming = tokio::spawn(crate::vacuum::run(pool.clone(), Arc::downgrade(&vacuum)));
        Ok(PostgresEngine {
            inner: Arc::new(Inner {
                ops: Arc::new(Ops {
                    pool,
                    limits: config.limits,
                    waiters,
                    sweeper,
                    vacuum,
                    rotate: AtomicUsize::new(0),
                }),
                listener,
                sweeping,
                vacuuming,
            }),
        })
    }

    /// A pooled connection.
    async fn client(&self) -> Result<Object> {
        self.inner.ops.client().await
    }

    /// Pushes `job` inside the caller's own transaction: the job exists if and only if
    /// `tx` commits (and a waiting reserver hears of it at the commit). A refusal (a body
    /// over the topic's limit, a due time too far ahead) rolls back to a savepoint taken
    /// first, so it leaves the caller's transaction usable and changes nothing.
    pub async fn push_in(
        &self,
        tx: &mut tokio_postgres::Transaction<'_>,
        job: NewJob,
    ) -> Result<Pushed> {
        check_push_batch(std::slice::from_ref(&job), &self.inner.ops.limits)?;
        push::push_in(tx, job, &self.inner.ops.limits).await
    }
}

#[async_trait]
impl Engine for PostgresEngine {
    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        check_push_batch(&jobs, &self.inner.ops.limits)?;
        push::push_batch(&mut self.client().await?, &jobs, &self.inner.ops.limits).await
    }

    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        admin::get(&self.client().await?, topic, id).await
    }

    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        admin::delete(&self.client().await?, topic, id).await
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp> {
        when.validate()?;
        admin::reschedule(&self.client().await?, topic, id, when).await
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        req.validate()?;
        reserve::reserve(&self.inner.ops, req).await
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        check_settle_and_reserve(settle, req)?;
        reserve::settle_and_reserve(&self.inner.ops, settle, req).await
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases)?;
        lease::ack(&self.client().await?, leases).await
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        nack.validate()?;
        lease::nack(&self.client().await?, lease, nack).await
    }

    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()> {
        release.validate()?;
        lease::release(&self.client().await?, lease, release).await
    }

    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        if let Some(t) = ttr {
            check_ttr(t)?;
        }
        lease::touch(&self.client().await?, lease, ttr).await
    }

    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        check_reason(bury.reason.as_deref())?;
        lease::bury(&self.client().await?, lease, bury).await
    }

    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        admin::kick(&self.client().await?, topic, id).await
    }

    async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        admin::kick_all(&self.client().await?, topic).await
    }

    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        admin::list(&self.client().await?, topic, state, limit, after).await
    }

    async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        admin::stats(&self.client().await?, topic).await
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        admin::topics(&self.client().await?).await
    }

    async fn purge(&self, topic: &Topic) -> Result<u64> {
        admin::purge(&self.client().await?, topic).await
    }

    async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery> {
        let d = admin::reserve_job(&self.client().await?, topic, id).await?;
        self.inner.ops.note_leases(std::slice::from_ref(&d));
        Ok(d)
    }

    async fn bury_waiting(&self, topic: &Topic, id: &JobId, reason: Option<String>) -> Result<()> {
        check_reason(reason.as_deref())?;
        admin::bury_waiting(&self.client().await?, topic, id, reason).await
    }

    async fn topic_config(&self, topic: &Topic) -> Result<TopicConfig> {
        topics::topic_config(&self.client().await?, topic).await
    }

    async fn set_topic_config(&self, topic: &Topic, config: &TopicConfig) -> Result<()> {
        config.validate()?;
        topics::set_topic_config(&self.client().await?, topic, config).await
    }

    async fn pause(&self, topic: &Topic, until: Option<Timestamp>) -> Result<()> {
        topics::pause(&self.client().await?, topic, until).await
    }

    async fn now(&self) -> Result<Timestamp> {
        admin::now(&self.client().await?).await
    }

    /// None: every topic lives in one store, where a failure fails the whole call.
    fn unreachable(&self, _topics: &[Topic]) -> Vec<Topic> {
        Vec::new()
    }
}

#[async_trait]
impl Numbers for PostgresEngine {
    async fn claim_numbers(&self, topic: &Topic, count: u64) -> Result<u64> {
        check_claim(count)?;
        numbers::claim_numbers(&self.client().await?, topic, count).await
    }

    async fn number_topic(&self, n: u64) -> Result<Option<Topic>> {
        numbers::number_topic(&self.client().await?, n).await
    }
}

#[async_trait]
impl Schedules for PostgresEngine {
    async fn put_schedule(&self, schedule: &JobSchedule) -> Result<u64> {
        schedule.validate()?;
        schedules::put_schedule(&self.client().await?, schedule).await
    }

    async fn schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        schedules::schedule(&self.client().await?, name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        schedules::schedules(&self.client().await?).await
    }

    async fn delete_schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        schedules::delete_schedule(&self.client().await?, name).await
    }

    async fn schedule_pushed(
        &self,
        name: &ScheduleName,
        revision: u64,
        through: Timestamp,
    ) -> Result<bool> {
        schedules::schedule_pushed(&self.client().await?, name, revision, through).await
    }
}

#[async_trait]
impl Destinations for PostgresEngine {
    async fn put_destination(&self, topic: &Topic, doc: &str) -> Result<()> {
        check_destination_doc(doc)?;
        destinations::put_destination(&self.client().await?, topic, doc).await
    }

    async fn destination(&self, topic: &Topic) -> Result<Option<StoredDestination>> {
        destinations::destination(&self.client().await?, topic).await
    }

    async fn destinations(&self) -> Result<Vec<StoredDestination>> {
        destinations::destinations(&self.client().await?).await
    }

    async fn delete_destination(&self, topic: &Topic) -> Result<bool> {
        destinations::delete_destination(&self.client().await?, topic).await
    }
}
