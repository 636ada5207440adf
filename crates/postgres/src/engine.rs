//! [`PostgresEngine`]: the [`Engine`] contract on PostgreSQL. Each operation checks its
//! arguments, then calls one function of the engine's library (`sql/*.sql`) in one round
//! trip on a pooled connection; a worker's cycle (`settle_and_reserve`) calls its
//! settlements' functions and the reserve's in one transaction. Reserves that find nothing
//! wait as `waiters` describes.
//!
//! The file is long because every operation of the contract is here; issue 38 moves them
//! into `ops/` modules that own their calls, as the Redis and SQLite engines have.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deadpool_postgres::{GenericClient as CachingClient, Object, Pool};
use delayq_core::limits::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_TTR, MAX_DELAY, at_too_far, check_reason, check_ttr,
    delay_ms_ceil,
};
use delayq_core::{
    Backoff, Bury, Cursor, Delivery, DeliveryMode, Destinations, Engine, Error, Expiry, Job, JobId,
    JobSchedule, JobState, Lease, Limits, Nack, NackOutcome, NewJob, Numbers, OnConflict, OnExpire,
    Page, Pushed, Release, Reserve, Result, Schedule, ScheduleName, Schedules, Settle, Settled,
    SettledAndReserved, StoredDestination, StoredSchedule, Timestamp, Topic, TopicConfig,
    TopicStats, async_trait, check_ack_batch, check_claim, check_destination_doc, check_push_batch,
    check_settle_and_reserve, detach_lease, duration_ms,
};
use tokio_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use crate::config::PostgresConfig;
use crate::connect::Connector;
use crate::error::{db_err, pool_err, refusal};
use crate::row::{JOB_COLS, RawJob, signed, unsigned};
use crate::sweeper::Sweeper;
use crate::vacuum::Vacuum;
use crate::waiters::{OFFLINE_WAKE, SAFETY_WAKE, Waiters};
use crate::{admin, library, store, topics};

/// The most expired leases and expired jobs of a topic a reserve fails before taking jobs.
const TICK_BUDGET: i32 = 100;

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
    pool: Pool,
    limits: Limits,
    waiters: Arc<Waiters>,
    listener: tokio::task::JoinHandle<()>,
    sweeper: Arc<Sweeper>,
    sweeping: tokio::task::JoinHandle<()>,
    vacuum: Arc<Vacuum>,
    vacuuming: tokio::task::JoinHandle<()>,
    rotate: AtomicUsize,
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
    /// Fails with [`Error::InvalidConfig`] for an unreadable URL or CA file, or a database
    /// set up by a newer delayq; with [`Error::Unavailable`] when PostgreSQL cannot be
    /// reached.
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
                pool,
                limits: config.limits,
                waiters,
                listener,
                sweeper,
                sweeping,
                vacuum,
                vacuuming,
                rotate: AtomicUsize::new(0),
            }),
        })
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object> {
        self.inner
            .pool
            .get()
            .await
            .map_err(|e| pool_err("getting a connection", e))
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
        let jobs = vec![job];
        check_push_batch(&jobs, &self.inner.limits)?;
        let sp = tx
            .savepoint("delayq_push")
            .await
            .map_err(|e| db_err("taking a savepoint", e))?;
        match push_run(&sp, &jobs, &self.inner.limits).await {
            Ok(mut out) => {
                sp.commit()
                    .await
                    .map_err(|e| db_err("releasing a savepoint", e))?;
                out.pop()
                    .ok_or_else(|| Error::Internal("push answered nothing for one job".into()))
            }
            Err(e) => {
                let _ = sp.rollback().await;
                Err(e)
            }
        }
    }

    /// One reserve round trip over `topics` in this order; the sweeper learns of the
    /// earliest deadline of the leases it made.
    async fn reserve_once(
        &self,
        topics: Vec<Topic>,
        max: usize,
        mode: DeliveryMode,
    ) -> Result<Vec<Delivery>> {
        let got = self.reserve_trip(topics, max, mode).await?;
        self.note_leases(&got);
        Ok(got)
    }

    /// [`Self::reserve_once`]'s round trip, in a task of its own: when the caller is
    /// dropped before the answer, the jobs it leased are given back ([`detach_lease`]).
    async fn reserve_trip(
        &self,
        topics: Vec<Topic>,
        max: usize,
        mode: DeliveryMode,
    ) -> Result<Vec<Delivery>> {
        let engine = self.clone();
        let give_back = self.clone();
        detach_lease(
            async move {
                let client = engine.client().await?;
                reserve_on(&client, &topics, max, mode).await
            },
            |d| d,
            move |leases| async move {
                for l in leases {
                    give_back.release(&l).await?;
                }
                Ok(())
            },
        )
        .await
    }

    /// Tells the sweeper of the earliest deadline of the leases in `got`, and the vacuum
    /// how many jobs were handed out.
    fn note_leases(&self, got: &[Delivery]) {
        self.inner.vacuum.note(got.len());
        if let Some(d) = got.iter().filter_map(|d| d.job.deadline).min() {
            self.inner
                .sweeper
                .note(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        }
    }

    /// When a waiter on `topics` should look again, and now, in ms on the database's clock.
    async fn next_wake(&self, topics: &[Topic]) -> Result<(Option<i64>, i64)> {
        let client = self.client().await?;
        let names: Vec<&str> = topics.iter().map(Topic::as_str).collect();
        let stmt = client
            .prepare_cached("SELECT wake, now_ms FROM delayq.next_wake($1)")
            .await
            .map_err(|e| db_err("finding the next wake-up", e))?;
        let row = client
            .query_one(&stmt, &[&names])
            .await
            .map_err(|e| db_err("finding the next wake-up", e))?;
        Ok((row.get(0), row.get(1)))
    }
}

/// One reserve call on `client` over `topics` in this order: the jobs taken, in the
/// contract's order.
async fn reserve_on<C: CachingClient>(
    client: &C,
    topics: &[Topic],
    max: usize,
    mode: DeliveryMode,
) -> Result<Vec<Delivery>> {
    let names: Vec<&str> = topics.iter().map(Topic::as_str).collect();
    let stmt = client
        .prepare_cached(&format!(
            "SELECT pos, token, now_us, {JOB_COLS} FROM delayq.reserve($1, $2, $3, $4)"
        ))
        .await
        .map_err(|e| db_err("reserving", e))?;
    let n = i32::try_from(max).unwrap_or(i32::MAX);
    let at_most_once = mode == DeliveryMode::AtMostOnce;
    let rows = client
        .query(&stmt, &[&names, &n, &at_most_once, &TICK_BUDGET])
        .await
        .map_err(|e| db_err("reserving", e))?;
    let mut taken = Vec::with_capacity(rows.len());
    for r in &rows {
        let pos: i32 = r.get(0);
        let token: i64 = r.get(1);
        let now_us: i64 = r.get(2);
        taken.push((pos, token, now_us, RawJob::read(r, 3)?));
    }
    taken.sort_by_key(|(pos, _, _, j)| (*pos, j.priority, j.ready_at, j.seq));
    taken
        .into_iter()
        .map(|(pos, token, now_us, raw)| {
            let topic = usize::try_from(pos - 1)
                .ok()
                .and_then(|i| topics.get(i))
                .ok_or_else(|| Error::Internal(format!("reserve answered topic position {pos}")))?;
            raw.into_delivery(topic, token, now_us)
        })
        .collect()
}

/// Applies `settle` (checked already: `Settle::validate`) in order on `client` (a run of
/// acks as one call): one answer each; a retryable failure of the engine ends the call.
async fn settle_on<C: CachingClient>(
    client: &C,
    settle: &[Settle],
) -> Result<Vec<Result<Settled>>> {
    let mut out = Vec::with_capacity(settle.len());
    let mut acks: Vec<Lease> = Vec::new();
    for s in settle.iter().map(Some).chain([None]) {
        if let Some(Settle::Ack(l)) = s {
            acks.push(l.clone());
            continue;
        }
        if !acks.is_empty() {
            let answers = ack_on(client, &acks).await?;
            out.extend(answers.into_iter().map(|r| r.map(|()| Settled::Acked)));
            acks.clear();
        }
        let r = match s {
            None | Some(Settle::Ack(_)) => continue,
            Some(Settle::Nack(l, n)) => nack_on(client, l, n.clone()).await.map(Settled::Nacked),
            Some(Settle::Bury(l, reason)) => {
                let bury = Bury {
                    reason: reason.clone(),
                    priority: None,
                };
                bury_on(client, l, bury).await.map(|()| Settled::Buried)
            }
            Some(Settle::Release(l)) => release_on(client, l, Release::default())
                .await
                .map(|()| Settled::Released),
        };
        match r {
            Err(e) if e.is_retryable() => return Err(e),
            r => out.push(r),
        }
    }
    Ok(out)
}

/// Acks `leases` (checked already) on `client`: one call per topic, one answer per lease.
async fn ack_on<C: CachingClient>(client: &C, leases: &[Lease]) -> Result<Vec<Result<()>>> {
    let stmt = client
        .prepare_cached("SELECT status, pstate FROM delayq.ack($1, $2, $3)")
        .await
        .map_err(|e| db_err("acking", e))?;
    let mut out: Vec<Option<Result<()>>> = (0..leases.len()).map(|_| None).collect();
    let mut done = vec![false; leases.len()];
    for i in 0..leases.len() {
        if done[i] {
            continue;
        }
        let topic = &leases[i].topic;
        let run: Vec<usize> = (i..leases.len())
            .filter(|&k| !done[k] && &leases[k].topic == topic)
            .collect();
        let ids: Vec<&str> = run.iter().map(|&k| leases[k].id.as_str()).collect();
        let tokens: Vec<i64> = run.iter().map(|&k| signed(leases[k].token.0)).collect();
        let rows = client
            .query(&stmt, &[&topic.as_str(), &ids, &tokens])
            .await
            .map_err(|e| db_err("acking", e))?;
        if rows.len() != run.len() {
            return Err(Error::Internal(
                "ack answered another number of rows".into(),
            ));
        }
        for (&k, r) in run.iter().zip(&rows) {
            done[k] = true;
            out[k] = Some(lease_status(&leases[k], "ack", r.get(0), r.get(1)));
        }
    }
    out.into_iter()
        .map(|o| o.ok_or_else(|| Error::Internal("an ack was not answered".into())))
        .collect()
}

/// Nacks `lease` on `client` (`nack` checked already).
async fn nack_on<C: CachingClient>(client: &C, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
    let delay = nack.delay.map(|d| signed(delay_ms_ceil(d)));
    let reason = nack.reason.unwrap_or_default();
    let value = lease_call(
        client,
        lease,
        "nack",
        "SELECT status, pstate, value FROM delayq.nack($1, $2, $3, $4, $5)",
        &[&delay, &reason],
    )
    .await?;
    Ok(if value < 0 {
        NackOutcome::Dead
    } else {
        NackOutcome::Retry {
            ready_at: Timestamp::from_millis(unsigned(value, "due time")?),
        }
    })
}

/// Releases `lease` on `client` (`release` checked already).
async fn release_on<C: CachingClient>(client: &C, lease: &Lease, release: Release) -> Result<()> {
    let delay = release.delay.map(|d| signed(delay_ms_ceil(d)));
    let priority = release.priority.map(i64::from);
    lease_call(
        client,
        lease,
        "release",
        "SELECT status, pstate, value FROM delayq.release($1, $2, $3, $4, $5)",
        &[&delay, &priority],
    )
    .await
    .map(|_| ())
}

/// Buries `lease` on `client` (`bury` checked already).
async fn bury_on<C: CachingClient>(client: &C, lease: &Lease, bury: Bury) -> Result<()> {
    let reason = bury.reason.unwrap_or_default();
    let priority = bury.priority.map(i64::from);
    lease_call(
        client,
        lease,
        "bury",
        "SELECT status, pstate, value FROM delayq.bury($1, $2, $3, $4, $5)",
        &[&reason, &priority],
    )
    .await
    .map(|_| ())
}

/// Calls one lease function (`nack`, `release`, `touch`, `bury`) on `client`: its (status,
/// state, value), the status turned into the refusal it names.
async fn lease_call<C: CachingClient>(
    client: &C,
    lease: &Lease,
    operation: &'static str,
    sql: &str,
    extra: &[&(dyn ToSql + Sync)],
) -> Result<i64> {
    let stmt = client
        .prepare_cached(sql)
        .await
        .map_err(|e| db_err(operation, e))?;
    let (topic, id, token) = (
        lease.topic.as_str(),
        lease.id.as_str(),
        signed(lease.token.0),
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&topic, &id, &token];
    params.extend_from_slice(extra);
    let row = client
        .query_one(&stmt, &params)
        .await
        .map_err(|e| db_err(operation, e))?;
    lease_status(lease, operation, row.get(0), row.get(1))?;
    Ok(row.get(2))
}

/// A lease function's status as the contract's answer.
pub(crate) fn lease_status(
    lease: &Lease,
    operation: &'static str,
    status: i16,
    pstate: i16,
) -> Result<()> {
    match status {
        0 => Ok(()),
        1 => Err(Error::NotFound {
            topic: lease.topic.clone(),
            id: lease.id.clone(),
        }),
        2 => Err(Error::LeaseLost {
            topic: lease.topic.clone(),
            id: lease.id.clone(),
        }),
        3 => Err(Error::not_reserved(
            &lease.topic,
            &lease.id,
            JobState::from_code(i64::from(pstate))?,
            operation,
        )),
        other => Err(Error::Internal(format!(
            "{operation} answered status {other}"
        ))),
    }
}

/// A schedule as push.sql's `whens` value: a delay in ms, or -1 - the absolute time.
fn when_value(s: Schedule) -> i64 {
    match s {
        Schedule::Delay(d) => signed(delay_ms_ceil(d)),
        Schedule::At(at) => -1 - signed(at.as_millis()),
    }
}

/// Pushes `jobs` (checked already) on `client`: one call per run of jobs of one topic.
async fn push_run<C: GenericClient>(
    client: &C,
    jobs: &[NewJob],
    limits: &Limits,
) -> Result<Vec<Pushed>> {
    let stmt = client
        .prepare(
            "SELECT code, pstate, due FROM delayq.push($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .await
        .map_err(|e| db_err("pushing", e))?;
    let backoff = Backoff::default();
    let defaults: Vec<i64> = vec![
        signed(duration_ms(DEFAULT_TTR)),
        i64::from(DEFAULT_MAX_ATTEMPTS),
        signed(backoff.base_ms()),
        i64::from(backoff.factor()),
        signed(backoff.max_ms()),
        i64::from(backoff.jitter_permille()),
        signed(duration_ms(MAX_DELAY)),
    ];
    let max_body = i64::try_from(limits.max_body).unwrap_or(i64::MAX);
    let mut out = Vec::with_capacity(jobs.len());
    let mut start = 0;
    while start < jobs.len() {
        let topic = &jobs[start].topic;
        let end = jobs[start..]
            .iter()
            .position(|j| &j.topic != topic)
            .map_or(jobs.len(), |n| start + n);
        let run = &jobs[start..end];
        let ids: Vec<&str> = run.iter().map(|j| j.id.as_str()).collect();
        let bodies: Vec<&[u8]> = run.iter().map(|j| j.body.as_ref()).collect();
        let priorities: Vec<i64> = run.iter().map(|j| i64::from(j.priority)).collect();
        let whens: Vec<i64> = run.iter().map(|j| when_value(j.schedule)).collect();
        let ttrs: Vec<Option<i64>> = run
            .iter()
            .map(|j| j.ttr.map(|t| signed(duration_ms(t))))
            .collect();
        let maxes: Vec<Option<i64>> = run.iter().map(|j| j.max_attempts.map(i64::from)).collect();
        let part = |f: fn(&Backoff) -> i64| -> Vec<Option<i64>> {
            run.iter().map(|j| j.backoff.as_ref().map(f)).collect()
        };
        let bo_bases = part(|b| signed(b.base_ms()));
        let bo_factors = part(|b| i64::from(b.factor()));
        let bo_maxes = part(|b| signed(b.max_ms()));
        let bo_jitters = part(|b| i64::from(b.jitter_permille()));
        let conflicts: Vec<i16> = run
            .iter()
            .map(|j| match j.on_conflict {
                OnConflict::Keep => 0,
                OnConflict::Replace => 1,
                OnConflict::Debounce { .. } => 2,
            })
            .collect();
        let max_waits: Vec<Option<i64>> = run
            .iter()
            .map(|j| match j.on_conflict {
                OnConflict::Debounce { max_wait } => max_wait.map(|w| signed(delay_ms_ceil(w))),
                _ => None,
            })
            .collect();
        let expiries: Vec<Option<i64>> = run
            .iter()
            .map(|j| {
                j.expiry.map(|e| match e {
                    Expiry::AfterDue(d) => signed(duration_ms(d)),
                    Expiry::At(at) => -1 - signed(at.as_millis()),
                })
            })
            .collect();
        let on_expires: Vec<i16> = run
            .iter()
            .map(|j| match j.on_expire {
                OnExpire::Dead => 0,
                OnExpire::Drop => 1,
            })
            .collect();
        let rows = client
            .query(
                &stmt,
                &[
                    &topic.as_str(),
                    &ids,
                    &bodies,
                    &priorities,
                    &whens,
                    &ttrs,
                    &maxes,
                    &bo_bases,
                    &bo_factors,
                    &bo_maxes,
                    &bo_jitters,
                    &conflicts,
                    &max_waits,
                    &expiries,
                    &on_expires,
                    &defaults,
                    &max_body,
                ],
            )
            .await
            .map_err(|e| push_refusal(e, run))?;
        if rows.len() != run.len() {
            return Err(Error::Internal(format!(
                "push answered {} rows for {} jobs",
                rows.len(),
                run.len()
            )));
        }
        for (job, r) in run.iter().zip(&rows) {
            let code: i16 = r.get(0);
            out.push(Pushed {
                id: job.id.clone(),
                created: code == 1,
                replaced: code == 2,
                state: JobState::from_code(i64::from(r.get::<_, i16>(1)))?,
                ready_at: Timestamp::from_millis(unsigned(r.get(2), "due time")?),
            });
        }
        start = end;
    }
    Ok(out)
}

/// A push's error: a refusal of push.sql as the contract's error for the job it names.
fn push_refusal(e: tokio_postgres::Error, run: &[NewJob]) -> Error {
    let Some((code, numbers)) = refusal(&e) else {
        return db_err("pushing", e);
    };
    let job = numbers
        .first()
        .and_then(|&i| usize::try_from(i).ok())
        .and_then(|i| run.get(i));
    let (Some(job), Some(&value)) = (job, numbers.get(1)) else {
        return Error::Internal(format!("push refused with {code} and no job"));
    };
    match code {
        "DQ004" => match job.schedule {
            Schedule::At(at) => at_too_far(at, Timestamp::from_millis(value)),
            Schedule::Delay(_) => Error::Internal("push refused a delay as too far".into()),
        },
        "DQ005" => Error::BodyTooLarge {
            size: job.body.len(),
            limit: usize::try_from(value).unwrap_or(usize::MAX),
        },
        "DQ006" => match job.check_expiry(Timestamp::from_millis(value)) {
            Err(e) => e,
            Ok(()) => Error::Internal("push refused an expiry the job's checks accept".into()),
        },
        other => Error::Internal(format!("push refused with {other}")),
    }
}

#[async_trait]
impl Engine for PostgresEngine {
    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        check_push_batch(&jobs, &self.inner.limits)?;
        let mut client = self.client().await?;
        let one_topic = jobs.iter().all(|j| j.topic == jobs[0].topic);
        if one_topic {
            return push_run(&**client, &jobs, &self.inner.limits).await;
        }
        // Several topics: one transaction, so that a refusal in a later run undoes nothing
        // but leaves nothing either.
        let tx = client
            .transaction()
            .await
            .map_err(|e| db_err("starting a push", e))?;
        let out = push_run(&*tx, &jobs, &self.inner.limits).await?;
        tx.commit()
            .await
            .map_err(|e| db_err("committing a push", e))?;
        Ok(out)
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
        let start = self.inner.rotate.fetch_add(1, Ordering::Relaxed) % req.topics.len();
        let mut topics = req.topics.clone();
        topics.rotate_left(start);
        let until = tokio::time::Instant::now() + req.wait;
        let registration = (!req.wait.is_zero()).then(|| self.inner.waiters.register(&req.topics));
        loop {
            let got = self.reserve_once(topics.clone(), req.max, req.mode).await?;
            let Some(reg) = &registration else {
                return Ok(got);
            };
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if !got.is_empty() || left.is_zero() {
                return Ok(got);
            }
            let (wake, now) = self.next_wake(&topics).await?;
            let cap = if self.inner.waiters.online() {
                SAFETY_WAKE
            } else {
                OFFLINE_WAKE
            };
            let mut sleep = left.min(cap);
            if let Some(w) = wake {
                // At least a millisecond: a due job another reserver holds is being taken.
                let ms = u64::try_from(w.saturating_sub(now)).unwrap_or(0).max(1);
                sleep = sleep.min(Duration::from_millis(ms));
            }
            reg.waiter.until.store(
                now.saturating_add(i64::try_from(sleep.as_millis()).unwrap_or(i64::MAX)),
                Ordering::Relaxed,
            );
            tokio::select! {
                () = reg.waiter.notify.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
            reg.waiter.until.store(i64::MAX, Ordering::Relaxed);
        }
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        check_settle_and_reserve(settle, req)?;
        let (engine, give_back) = (self.clone(), self.clone());
        let items = settle.to_vec();
        let first = req.clone();
        // The settlements and a first look are one transaction (one commit), in a task of
        // its own: a caller dropped meanwhile still has its settlements applied, and the
        // jobs that look leased are given back.
        let (settled, deliveries) = detach_lease(
            async move {
                let mut client = engine.client().await?;
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| db_err("starting a transaction", e))?;
                let settled = settle_on(&tx, &items).await?;
                let got = if first.max == 0 {
                    Vec::new()
                } else {
                    reserve_on(&tx, &first.topics, first.max, first.mode).await?
                };
                tx.commit()
                    .await
                    .map_err(|e| db_err("committing settlements and a reserve", e))?;
                engine.note_leases(&got);
                Ok((settled, got))
            },
            |(_, got)| got,
            move |leases| async move {
                for l in leases {
                    give_back.release(&l).await?;
                }
                Ok(())
            },
        )
        .await?;
        if !deliveries.is_empty() || req.max == 0 || req.wait.is_zero() {
            return Ok(SettledAndReserved {
                settled,
                deliveries,
            });
        }
        let deliveries = self.reserve(req).await?;
        Ok(SettledAndReserved {
            settled,
            deliveries,
        })
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases)?;
        ack_on(&self.client().await?, leases).await
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        nack.validate()?;
        nack_on(&self.client().await?, lease, nack).await
    }

    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()> {
        release.validate()?;
        release_on(&self.client().await?, lease, release).await
    }

    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        if let Some(t) = ttr {
            check_ttr(t)?;
        }
        let ttr = ttr.map(|t| signed(duration_ms(t)));
        let value = lease_call(
            &self.client().await?,
            lease,
            "touch",
            "SELECT status, pstate, value FROM delayq.touch($1, $2, $3, $4)",
            &[&ttr],
        )
        .await?;
        Ok(Timestamp::from_millis(unsigned(value, "deadline")?))
    }

    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        check_reason(bury.reason.as_deref())?;
        bury_on(&self.client().await?, lease, bury).await
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
        self.note_leases(std::slice::from_ref(&d));
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
        let client = self.client().await?;
        let row = client
            .query_one("SELECT delayq.now_ms()", &[])
            .await
            .map_err(|e| db_err("reading the clock", e))?;
        Ok(Timestamp::from_millis(unsigned(row.get(0), "clock")?))
    }
}

#[async_trait]
impl Numbers for PostgresEngine {
    async fn claim_numbers(&self, topic: &Topic, count: u64) -> Result<u64> {
        check_claim(count)?;
        store::claim_numbers(&self.client().await?, topic, count).await
    }

    async fn number_topic(&self, n: u64) -> Result<Option<Topic>> {
        store::number_topic(&self.client().await?, n).await
    }
}

#[async_trait]
impl Schedules for PostgresEngine {
    async fn put_schedule(&self, schedule: &JobSchedule) -> Result<u64> {
        schedule.validate()?;
        store::put_schedule(&self.client().await?, schedule).await
    }

    async fn schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        store::schedule(&self.client().await?, name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        store::schedules(&self.client().await?).await
    }

    async fn delete_schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        store::delete_schedule(&self.client().await?, name).await
    }

    async fn schedule_pushed(
        &self,
        name: &ScheduleName,
        revision: u64,
        through: Timestamp,
    ) -> Result<bool> {
        store::schedule_pushed(&self.client().await?, name, revision, through).await
    }
}

#[async_trait]
impl Destinations for PostgresEngine {
    async fn put_destination(&self, topic: &Topic, doc: &str) -> Result<()> {
        check_destination_doc(doc)?;
        store::put_destination(&self.client().await?, topic, doc).await
    }

    async fn destination(&self, topic: &Topic) -> Result<Option<StoredDestination>> {
        store::destination(&self.client().await?, topic).await
    }

    async fn destinations(&self) -> Result<Vec<StoredDestination>> {
        store::destinations(&self.client().await?).await
    }

    async fn delete_destination(&self, topic: &Topic) -> Result<bool> {
        store::delete_destination(&self.client().await?, topic).await
    }
}
