//! [`RedisEngine`]: the [`Engine`] contract on Redis, one Lua script per state change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_core::limits::{
    at_too_far, check_at, check_count, check_delay, check_reason, check_ttr, delay_ms_ceil,
};
use delayq_core::{
    Cursor, Delivery, DeliveryMode, Engine, Error, Job, JobId, JobState, Lease, LeaseToken, Limits,
    Nack, NackOutcome, NewJob, Page, Pushed, Reserve, Result, Schedule, Settle, Settled,
    SettledAndReserved, Timestamp, Topic, TopicStats, async_trait, check_ack_batch,
    check_push_batch, check_settle_and_reserve, duration_ms,
};
use rand::Rng;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, Value};
use tokio::sync::oneshot;

use crate::RedisConfig;
use crate::codec::{self, Status, decode_job, decode_jobs, state_code, state_from_code};
use crate::error::map_redis_err;
use crate::keys::KeySpace;
use crate::library;
use crate::wait::Waiters;

/// Jobs per push script call: bounds the size of one script's work and arguments.
const PUSH_CHUNK: usize = 100;
/// Bytes of bodies per push script call.
const PUSH_CHUNK_BYTES: usize = 4 << 20;

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
    inner: Arc<Inner>,
}

struct Inner {
    conn: ConnectionManager,
    keys: KeySpace,
    limits: Limits,
    tick_batch: usize,
    safety_wake: Duration,
    waiters: Waiters,
    rotate: AtomicUsize,
    /// Topics this process has put in the registry (or seen there).
    registered: std::sync::Mutex<std::collections::HashSet<Topic>>,
    /// Dropping it stops the waker task.
    _stop: oneshot::Sender<()>,
}

impl RedisEngine {
    /// Connects, checks that the server is Redis 7.0 or newer, loads the functions library
    /// and starts the waker task. Warns (through `tracing`) when
    /// the server's `maxmemory-policy` may evict keys: jobs would then vanish silently.
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
        let client = client(&config)?;
        let cm_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.connect_timeout))
            .set_number_of_retries(3);
        let mut conn = client
            .get_connection_manager_with_config(cm_config)
            .await
            .map_err(|e| map_redis_err("connecting to Redis", e))?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await
            .map_err(|e| map_redis_err("reading the Redis version", e))?;
        library::check_version(&info)?;
        library::load(&mut conn)
            .await
            .map_err(|e| map_redis_err("loading the delayq functions", e))?;
        warn_on_eviction(&mut conn).await;

        let (stop_tx, stop_rx) = oneshot::channel();
        let waiters = Waiters::start(client, conn.clone(), keys.clone(), stop_rx);
        Ok(RedisEngine {
            inner: Arc::new(Inner {
                conn,
                keys,
                limits: config.limits,
                tick_batch: config.tick_batch,
                safety_wake: config.safety_wake,
                waiters,
                rotate: AtomicUsize::new(0),
                registered: std::sync::Mutex::new(std::collections::HashSet::new()),
                _stop: stop_tx,
            }),
        })
    }

    /// An `FCALL` of `function` with the topic's keys; the caller adds the arguments.
    fn invocation(&self, function: &str, topic: &Topic) -> Cmd {
        let keys = self.inner.keys.topic(topic);
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(function).arg(keys.len());
        for k in keys {
            cmd.arg(k);
        }
        cmd
    }

    /// Runs one function call; when Redis answers that the function is missing (restarted
    /// without persistence, `FUNCTION FLUSH`, a failover), loads the library and calls again.
    async fn call(&self, cmd: &Cmd, what: &'static str) -> Result<Value> {
        let mut conn = self.inner.conn.clone();
        let reply = match cmd.query_async::<Value>(&mut conn).await {
            Err(e) if library::is_missing(&e) => {
                library::load(&mut conn)
                    .await
                    .map_err(|e| map_redis_err("reloading the delayq functions", e))?;
                cmd.query_async(&mut conn).await
            }
            r => r,
        };
        reply.map_err(|e| map_redis_err(what, e))
    }

    /// Runs several function calls in one round trip. When some come back "function not
    /// found", the library is loaded and just those calls are resent (the others ran).
    async fn pipeline(&self, invs: &[Cmd], what: &'static str) -> Result<Vec<Value>> {
        let mut conn = self.inner.conn.clone();
        let mut pipe = redis::pipe();
        for inv in invs {
            pipe.add_command(inv.clone());
        }
        pipe.ignore_errors();
        let mut replies: Vec<Value> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| map_redis_err(what, e))?;
        let missing: Vec<usize> = replies
            .iter()
            .enumerate()
            .filter(|(_, v)| library::is_missing_reply(v))
            .map(|(i, _)| i)
            .collect();
        if !missing.is_empty() {
            library::load(&mut conn)
                .await
                .map_err(|e| map_redis_err("reloading the delayq functions", e))?;
            let mut retry = redis::pipe();
            for &i in &missing {
                retry.add_command(invs[i].clone());
            }
            retry.ignore_errors();
            let again: Vec<Value> = retry
                .query_async(&mut conn)
                .await
                .map_err(|e| map_redis_err(what, e))?;
            for (i, v) in missing.into_iter().zip(again) {
                replies[i] = v;
            }
        }
        replies
            .into_iter()
            .map(|v| match v {
                Value::ServerError(e) => Err(map_redis_err(what, e.into())),
                v => Ok(v),
            })
            .collect()
    }

    /// A reserve script call on `topic` for up to `want` jobs (0: settle only), carrying the
    /// settlements of that topic.
    fn reserve_invocation(
        &self,
        topic: &Topic,
        want: usize,
        mode: DeliveryMode,
        settle: &[&Settle],
    ) -> Cmd {
        let mut inv = self.invocation(library::RESERVE, topic);
        inv.arg(want)
            .arg(u8::from(mode == DeliveryMode::AtMostOnce))
            .arg(self.inner.tick_batch)
            .arg(settle.len());
        for s in settle {
            let (lease, delay, reason) = match s {
                Settle::Ack(l) | Settle::Release(l) => (l, None, None),
                Settle::Nack(l, n) => (l, Some(n.delay), n.reason.as_deref()),
                Settle::Bury(l, r) => (l, None, r.as_deref()),
            };
            let delay = match delay.flatten() {
                Some(d) => delay_ms_ceil(d).to_string(),
                None => "-1".to_string(),
            };
            inv.arg(codec::settle_kind(s))
                .arg(lease.id.as_str())
                .arg(lease.token.0)
                .arg(delay)
                .arg(reason.unwrap_or(""));
        }
        inv
    }

    /// Decodes a reserve script's reply: what it said of the topic's next event, the answers
    /// to its settlements (`settle[idx[k]]` is its k-th, answered into `settled[idx[k]]`) and
    /// its jobs as deliveries.
    fn take_reserve_reply(
        topic: &Topic,
        mode: DeliveryMode,
        (reply, received): (Vec<Value>, Instant),
        (settle, idx): (&[Settle], &[usize]),
        settled: &mut [Option<Result<Settled>>],
    ) -> Result<(Observation, Vec<Delivery>)> {
        if reply.len() < 4 {
            return Err(Error::Internal("short reserve reply".into()));
        }
        let now_us = codec::uint(&reply[0])?;
        let next = codec::opt_uint(&reply[1])?;
        let s = codec::uint(&reply[3])? as usize;
        if s != idx.len() || reply.len() < 4 + 2 * s {
            return Err(Error::Internal(
                "reserve reply has the wrong number of settlements".into(),
            ));
        }
        for (k, &i) in idx.iter().enumerate() {
            let (status, value) = (&reply[4 + 2 * k], &reply[5 + 2 * k]);
            settled[i] = Some(codec::settled(&settle[i], status, value)?);
        }
        let jobs = decode_jobs(topic, reply.into_iter().skip(4 + 2 * s).collect())?;
        let deliveries = jobs
            .into_iter()
            .map(|(job, token)| {
                let lateness =
                    Duration::from_micros(now_us.saturating_sub(job.ready_at.as_millis() * 1000));
                let lease = (mode == DeliveryMode::AtLeastOnce).then(|| Lease {
                    topic: topic.clone(),
                    id: job.id.clone(),
                    token: LeaseToken(token),
                });
                Delivery {
                    job,
                    lease,
                    lateness,
                }
            })
            .collect();
        let seen = Observation {
            topic: topic.clone(),
            now_us,
            next,
            received,
        };
        Ok((seen, deliveries))
    }

    /// One pass over the topics (rotating the first), without waiting, after settling
    /// `settle`. The first round trip is one pipeline: a settle-only call for each other
    /// topic that has settlements, then the first topic's call, which settles that topic's
    /// leases and reserves. With `req.max == 0` it only settles. Also answers what each
    /// reserve said of its topic's next event, for a waiter that registers after this pass.
    async fn reserve_once(
        &self,
        req: &Reserve,
        settle: &[Settle],
    ) -> Result<(Vec<Delivery>, Vec<Observation>, Vec<Result<Settled>>)> {
        let n = req.topics.len();
        let start = self.inner.rotate.fetch_add(1, Ordering::Relaxed) % n;
        let first = &req.topics[start];
        let mut groups: BTreeMap<&Topic, Vec<usize>> = BTreeMap::new();
        for (i, s) in settle.iter().enumerate() {
            groups.entry(&s.lease().topic).or_default().push(i);
        }
        let mut settled: Vec<Option<Result<Settled>>> = settle.iter().map(|_| None).collect();
        let mut out = Vec::new();
        let mut seen = Vec::new();

        // The first round trip: every settlement, and the first topic's reserve.
        let mut calls: Vec<(&Topic, usize, Vec<usize>)> = groups
            .iter()
            .filter(|(t, _)| req.max == 0 || **t != first)
            .map(|(t, idx)| (*t, 0, idx.clone()))
            .collect();
        if req.max > 0 {
            calls.push((
                first,
                req.max,
                groups.get(first).cloned().unwrap_or_default(),
            ));
        }
        if !calls.is_empty() {
            let invs: Vec<Cmd> = calls
                .iter()
                .map(|(t, want, idx)| {
                    let of: Vec<&Settle> = idx.iter().map(|&i| &settle[i]).collect();
                    self.reserve_invocation(t, *want, req.mode, &of)
                })
                .collect();
            let replies = self.pipeline(&invs, "settling and reserving").await?;
            let received = Instant::now();
            for ((topic, want, idx), reply) in calls.iter().zip(replies) {
                let reply = codec::array(reply)?;
                let (o, ds) = Self::take_reserve_reply(
                    topic,
                    req.mode,
                    (reply, received),
                    (settle, idx),
                    &mut settled,
                )?;
                if *want > 0 {
                    self.inner
                        .waiters
                        .observe(topic, o.now_us, o.next, o.received);
                    seen.push(o);
                    out.extend(ds);
                }
            }
        }
        let settled = settled
            .into_iter()
            .map(|s| s.unwrap_or_else(|| Err(Error::Internal("a settlement got no answer".into()))))
            .collect();
        if req.max == 0 {
            return Ok((out, seen, settled));
        }

        for k in 1..n {
            let want = req.max - out.len();
            if want == 0 {
                break;
            }
            let topic = &req.topics[(start + k) % n];
            let inv = self.reserve_invocation(topic, want, req.mode, &[]);
            let reply = match self.call(&inv, "reserving").await.and_then(codec::array) {
                Ok(r) => r,
                // Jobs already taken from earlier topics are leased (or removed): hand them
                // out rather than drop them; the caller sees the failure on its next call.
                Err(e) if !out.is_empty() => {
                    tracing::warn!(topic = %topic, error = %e, "reserve failed on one topic; returning what the others gave");
                    break;
                }
                Err(e) => return Err(e),
            };
            let received = Instant::now();
            let (o, ds) =
                Self::take_reserve_reply(topic, req.mode, (reply, received), (&[], &[]), &mut [])?;
            self.inner
                .waiters
                .observe(topic, o.now_us, o.next, o.received);
            seen.push(o);
            out.extend(ds);
        }
        Ok((out, seen, settled))
    }

    /// Settles `settle` and reserves with `req`'s long-poll: the settlements go in the first
    /// pass only; a later pass (after a wake) just reserves.
    async fn settle_then_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        let deadline = Instant::now() + req.wait;
        let (first, seen, settled) = self.reserve_once(req, settle).await?;
        let answer = |deliveries| SettledAndReserved {
            settled,
            deliveries,
        };
        if !first.is_empty() || req.wait.is_zero() || req.max == 0 {
            return Ok(answer(first));
        }
        // Only a reserver that found nothing registers, so busy workers never involve the
        // waker. It starts from what its first pass learnt of each topic's next event; a
        // signal sent meanwhile is still in its wake key.
        let guard = self.inner.waiters.register(&req.topics);
        for o in seen {
            self.inner
                .waiters
                .observe(&o.topic, o.now_us, o.next, o.received);
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(answer(Vec::new()));
            }
            // The safety wake, never sooner than configured and jittered later, so that many
            // idle processes do not look in step, and a caller whose wait is no longer than
            // the safety interval never pays for it (its next call's first pass looks).
            let jitter = rand::rng().random_range(1.0..1.4);
            let safety = now + self.inner.safety_wake.mul_f64(jitter);
            let until = deadline.min(safety);
            tokio::select! {
                _ = guard.notified() => {}
                _ = tokio::time::sleep_until(until.into()) => {
                    if until == deadline {
                        return Ok(answer(Vec::new()));
                    }
                }
            }
            let (out, _, _) = self.reserve_once(req, &[]).await?;
            if !out.is_empty() {
                return Ok(answer(out));
            }
        }
    }

    /// Runs a lease script and maps its status; returns the rest of the reply.
    async fn lease_call(
        &self,
        function: &str,
        lease: &Lease,
        extra: &[Vec<u8>],
        what: &'static str,
    ) -> Result<Vec<Value>> {
        let mut inv = self.invocation(function, &lease.topic);
        inv.arg(lease.id.as_str()).arg(lease.token.0);
        for a in extra {
            inv.arg(a.as_slice());
        }
        let mut reply = codec::array(self.call(&inv, what).await?)?.into_iter();
        match Status::from_code(codec::int(&reply.next().unwrap_or(Value::Nil))?)? {
            Status::Ok => Ok(reply.collect()),
            Status::LeaseLost => Err(Error::LeaseLost {
                topic: lease.topic.clone(),
                id: lease.id.clone(),
            }),
            other => Err(Error::Internal(format!(
                "{what}: unexpected status {other:?}"
            ))),
        }
    }

    /// Adds topics this process has not registered yet to the topic registry. Runs after the
    /// push succeeded, so a refused push never registers a topic; the registry key has no
    /// topic's hash tag, so no script may write it.
    async fn register<'t>(&self, topics: impl Iterator<Item = &'t Topic>) -> Result<()> {
        let new: Vec<Topic> = {
            let known = self
                .inner
                .registered
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            topics.filter(|t| !known.contains(*t)).cloned().collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut conn = self.inner.conn.clone();
        let mut cmd = redis::cmd("SADD");
        cmd.arg(self.inner.keys.registry());
        for t in &new {
            cmd.arg(t.as_str());
        }
        let _: i64 = cmd
            .query_async(&mut conn)
            .await
            .map_err(|e| map_redis_err("registering a topic", e))?;
        self.inner
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(new);
        Ok(())
    }

    /// Checks absolute times of a multi-call batch against Redis's clock before any call
    /// writes, so that a batch is refused whole rather than half written.
    async fn check_batch_times(&self, jobs: &[NewJob]) -> Result<()> {
        let latest = jobs
            .iter()
            .filter_map(|j| match j.schedule {
                Schedule::At(at) => Some(at),
                Schedule::Delay(_) => None,
            })
            .max();
        if let Some(at) = latest {
            let now = self.now().await?;
            if at > now.plus(delayq_core::limits::MAX_DELAY) {
                return Err(at_too_far(at, now));
            }
        }
        Ok(())
    }
}

/// Builds the redis-rs client from the URL and the TLS files.
fn client(config: &RedisConfig) -> Result<Client> {
    let tls = config.url.starts_with("rediss://");
    let bad_url = |e: redis::RedisError| Error::InvalidConfig {
        reason: format!(
            "cannot use the Redis URL: {e}; use redis://[user:password@]host[:port][/db], or rediss:// for TLS"
        ),
    };
    if !tls {
        if config.tls_ca_file.is_some() || config.tls_client_cert.is_some() {
            return Err(Error::InvalidConfig {
                reason: "TLS certificate files are set but the URL is not rediss://; use a rediss:// URL".into(),
            });
        }
        return Client::open(config.url.as_str()).map_err(bad_url);
    }
    // redis-rs leaves the choice of TLS crypto provider to the application; ring needs no C
    // toolchain. An application that installed its own provider keeps it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if config.tls_ca_file.is_none() && config.tls_client_cert.is_none() {
        return Client::open(config.url.as_str()).map_err(bad_url);
    }
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path).map_err(|e| Error::InvalidConfig {
            reason: format!("cannot read the TLS {what} file {}: {e}", path.display()),
        })
    };
    let root_cert = match &config.tls_ca_file {
        Some(p) => Some(read(p, "CA certificate")?),
        None => None,
    };
    let client_tls = match &config.tls_client_cert {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert, "client certificate")?,
            client_key: read(key, "client key")?,
        }),
        None => None,
    };
    Client::build_with_tls(
        config.url.as_str(),
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(bad_url)
}

/// Splits a list cursor `<state>:<score>:<member>` made for the listing of `state`.
fn parse_cursor(cursor: &str, state: u8) -> Result<(String, String)> {
    let bad = |why: &str| Error::invalid("cursor", format!("{why}; start again without a cursor"));
    let (st, rest) = cursor
        .split_once(':')
        .ok_or_else(|| bad("it is not a cursor returned by list"))?;
    let (score, member) = rest
        .split_once(':')
        .filter(|(s, m)| !m.is_empty() && s.parse::<f64>().is_ok())
        .ok_or_else(|| bad("it is not a cursor returned by list"))?;
    if st.parse::<u8>().ok() != Some(state) {
        return Err(bad("it was returned by the listing of another state"));
    }
    Ok((score.to_string(), member.to_string()))
}

/// What one reserve script said of its topic: Redis's clock and the next event.
struct Observation {
    topic: Topic,
    now_us: u64,
    next: Option<u64>,
    received: Instant,
}

/// The (kind, value) pair the scripts take for a schedule.
fn schedule_args(s: Schedule) -> (u8, u64) {
    match s {
        Schedule::Delay(d) => (0, delay_ms_ceil(d)),
        Schedule::At(at) => (1, at.as_millis()),
    }
}

fn check_schedule(s: Schedule) -> Result<()> {
    match s {
        Schedule::Delay(d) => check_delay(d),
        Schedule::At(at) => check_at(at),
    }
}

async fn warn_on_eviction(conn: &mut ConnectionManager) {
    let policy: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await;
    match policy {
        Ok(kv) => {
            if let Some(p) = kv.get(1).filter(|p| may_evict_jobs(p)) {
                tracing::warn!(
                    maxmemory_policy = %p,
                    "Redis may evict any key when it reaches maxmemory: delayq jobs would vanish silently; set maxmemory-policy noeviction"
                );
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot read maxmemory-policy (CONFIG may be disabled)")
        }
    }
}

/// True for eviction policies that can remove delayq's keys. delayq's keys have no TTL, so
/// the `volatile-*` policies never pick them; `allkeys-*` ones may.
pub(crate) fn may_evict_jobs(policy: &str) -> bool {
    policy.starts_with("allkeys-")
}

#[async_trait]
impl Engine for RedisEngine {
    async fn push(&self, job: NewJob) -> Result<Pushed> {
        let mut out = self.push_batch(vec![job]).await?;
        out.pop()
            .ok_or_else(|| Error::Internal("push returned no answer".into()))
    }

    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        check_push_batch(&jobs, &self.inner.limits)?;

        // Group by topic (keeping each job's index), then cut into bounded script calls.
        let mut by_topic: BTreeMap<&Topic, Vec<usize>> = BTreeMap::new();
        for (i, j) in jobs.iter().enumerate() {
            by_topic.entry(&j.topic).or_default().push(i);
        }
        let mut chunks: Vec<(&Topic, Vec<usize>)> = Vec::new();
        for (topic, idx) in &by_topic {
            let mut cur: Vec<usize> = Vec::new();
            let mut bytes = 0;
            for &i in idx {
                let len = jobs[i].body.len();
                if !cur.is_empty() && (cur.len() == PUSH_CHUNK || bytes + len > PUSH_CHUNK_BYTES) {
                    chunks.push((topic, std::mem::take(&mut cur)));
                    bytes = 0;
                }
                cur.push(i);
                bytes += len;
            }
            chunks.push((topic, cur));
        }
        if chunks.len() > 1 {
            self.check_batch_times(&jobs).await?;
        }

        let invs: Vec<Cmd> = chunks
            .iter()
            .map(|(topic, idx)| {
                let mut inv = self.invocation(library::PUSH, topic);
                inv.arg(idx.len());
                for &i in idx {
                    let j = &jobs[i];
                    let (kind, value) = schedule_args(j.schedule);
                    inv.arg(j.id.as_str())
                        .arg(j.body.as_ref())
                        .arg(kind)
                        .arg(value)
                        .arg(j.priority)
                        .arg(duration_ms(j.ttr))
                        .arg(j.max_attempts)
                        .arg(j.backoff.base_ms())
                        .arg(j.backoff.factor())
                        .arg(j.backoff.max_ms())
                        .arg(j.backoff.jitter_permille());
                }
                inv
            })
            .collect();
        let replies = self.pipeline(&invs, "pushing").await?;

        let mut answers: Vec<Option<Pushed>> = vec![None; jobs.len()];
        for ((topic, idx), reply) in chunks.iter().zip(replies) {
            let reply = codec::array(reply)?;
            let status = Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)?;
            match status {
                Status::Ok => {}
                Status::InvalidDelay => {
                    let k = codec::uint(reply.get(1).unwrap_or(&Value::Nil))? as usize;
                    let j = idx.get(k.saturating_sub(1)).map(|&i| &jobs[i]);
                    let at = match j.map(|j| j.schedule) {
                        Some(Schedule::At(at)) => at,
                        _ => Timestamp::EPOCH,
                    };
                    return Err(at_too_far(at, self.now().await.unwrap_or(Timestamp::EPOCH)));
                }
                other => {
                    return Err(Error::Internal(format!(
                        "push: unexpected status {other:?}"
                    )));
                }
            }
            let vals = &reply[1..];
            if vals.len() != idx.len() * 3 {
                return Err(Error::Internal("push reply has the wrong length".into()));
            }
            for (k, &i) in idx.iter().enumerate() {
                let state = state_from_code(codec::int(&vals[3 * k + 1])?)?;
                let ready_at = codec::uint(&vals[3 * k + 2])?;
                let created = codec::int(&vals[3 * k])? == 1;
                if created && matches!(state, JobState::Ready | JobState::Delayed) {
                    self.inner
                        .waiters
                        .pushed(topic, ready_at, state == JobState::Ready);
                }
                answers[i] = Some(Pushed {
                    id: jobs[i].id.clone(),
                    created,
                    state,
                    ready_at: Timestamp::from_millis(ready_at),
                });
            }
        }
        let answers = answers
            .into_iter()
            .map(|a| a.ok_or_else(|| Error::Internal("a pushed job got no answer".into())))
            .collect::<Result<Vec<_>>>()?;
        self.register(by_topic.keys().copied()).await?;
        Ok(answers)
    }

    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        let mut inv = self.invocation(library::GET, topic);
        inv.arg(id.as_str()).arg(self.inner.tick_batch);
        let reply = codec::array(self.call(&inv, "reading a job").await?)?;
        if reply.is_empty() {
            return Ok(None);
        }
        Ok(Some(decode_job(topic, &mut reply.into_iter())?.0))
    }

    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        let mut inv = self.invocation(library::DELETE, topic);
        inv.arg(id.as_str());
        Ok(codec::int(&self.call(&inv, "deleting a job").await?)? == 1)
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp> {
        check_schedule(when)?;
        let (kind, value) = schedule_args(when);
        let mut inv = self.invocation(library::RESCHEDULE, topic);
        inv.arg(id.as_str()).arg(kind).arg(value);
        let reply = codec::array(self.call(&inv, "rescheduling a job").await?)?;
        let code = codec::int(reply.first().unwrap_or(&Value::Nil))?;
        match Status::from_code(code)? {
            Status::Ok => {
                let ready_at = codec::uint(reply.get(1).unwrap_or(&Value::Nil))?;
                let state = state_from_code(codec::int(reply.get(2).unwrap_or(&Value::Nil))?)?;
                self.inner
                    .waiters
                    .pushed(topic, ready_at, state == JobState::Ready);
                Ok(Timestamp::from_millis(ready_at))
            }
            Status::NotFound => Err(Error::NotFound {
                topic: topic.clone(),
                id: id.clone(),
            }),
            Status::WrongState => Err(Error::WrongState {
                topic: topic.clone(),
                id: id.clone(),
                state: state_from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
                operation: "reschedule",
                hint: "only delayed and ready jobs can be rescheduled; nack a reserved job with a delay, kick a dead one",
            }),
            Status::InvalidDelay => {
                let at = match when {
                    Schedule::At(at) => at,
                    Schedule::Delay(_) => Timestamp::EPOCH,
                };
                Err(at_too_far(at, self.now().await.unwrap_or(Timestamp::EPOCH)))
            }
            Status::LeaseLost => Err(Error::Internal("reschedule: unexpected status".into())),
        }
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        req.validate()?;
        Ok(self.settle_then_reserve(&[], req).await?.deliveries)
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        check_settle_and_reserve(settle, req)?;
        self.settle_then_reserve(settle, req).await
    }

    async fn ack(&self, lease: &Lease) -> Result<()> {
        let mut out = self.ack_batch(std::slice::from_ref(lease)).await?;
        out.pop()
            .unwrap_or_else(|| Err(Error::Internal("ack returned no answer".into())))
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases)?;
        let mut by_topic: BTreeMap<&Topic, Vec<usize>> = BTreeMap::new();
        for (i, l) in leases.iter().enumerate() {
            by_topic.entry(&l.topic).or_default().push(i);
        }
        let groups: Vec<(&Topic, Vec<usize>)> = by_topic.into_iter().collect();
        let invs: Vec<Cmd> = groups
            .iter()
            .map(|(topic, idx)| {
                let mut inv = self.invocation(library::ACK, topic);
                inv.arg(idx.len());
                for &i in idx {
                    inv.arg(leases[i].id.as_str()).arg(leases[i].token.0);
                }
                inv
            })
            .collect();
        let replies = self.pipeline(&invs, "acking").await?;
        let mut out: Vec<Result<()>> = leases.iter().map(|_| Ok(())).collect();
        for ((_, idx), reply) in groups.iter().zip(replies) {
            let codes = codec::array(reply)?;
            if codes.len() != idx.len() {
                return Err(Error::Internal("ack reply has the wrong length".into()));
            }
            for (&i, code) in idx.iter().zip(&codes) {
                out[i] = match Status::from_code(codec::int(code)?)? {
                    Status::Ok => Ok(()),
                    Status::LeaseLost => Err(Error::LeaseLost {
                        topic: leases[i].topic.clone(),
                        id: leases[i].id.clone(),
                    }),
                    other => Err(Error::Internal(format!("ack: unexpected status {other:?}"))),
                };
            }
        }
        Ok(out)
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        nack.validate()?;
        let delay = nack
            .delay
            .map(|d| delay_ms_ceil(d).to_string())
            .unwrap_or_else(|| "-1".into());
        let reason = nack.reason.unwrap_or_default();
        let rest = self
            .lease_call(
                library::NACK,
                lease,
                &[delay.into_bytes(), reason.into_bytes()],
                "nacking",
            )
            .await?;
        match codec::opt_uint(rest.first().unwrap_or(&Value::Nil))? {
            Some(ms) => {
                let ready_at = Timestamp::from_millis(ms);
                Ok(NackOutcome::Retry { ready_at })
            }
            None => Ok(NackOutcome::Dead),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<()> {
        self.lease_call(library::RELEASE, lease, &[], "releasing")
            .await?;
        Ok(())
    }

    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        if let Some(ttr) = ttr {
            check_ttr(ttr)?;
        }
        let ttr = ttr
            .map(|t| duration_ms(t).to_string())
            .unwrap_or_else(|| "-1".into());
        let rest = self
            .lease_call(library::TOUCH, lease, &[ttr.into_bytes()], "touching")
            .await?;
        Ok(Timestamp::from_millis(codec::uint(
            rest.first().unwrap_or(&Value::Nil),
        )?))
    }

    async fn bury(&self, lease: &Lease, reason: Option<String>) -> Result<()> {
        check_reason(reason.as_deref())?;
        let reason = reason.unwrap_or_default();
        self.lease_call(library::BURY, lease, &[reason.into_bytes()], "burying")
            .await?;
        Ok(())
    }

    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        let mut inv = self.invocation(library::KICK, topic);
        inv.arg(id.as_str()).arg(1);
        let reply = codec::array(self.call(&inv, "kicking a job").await?)?;
        match Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)? {
            Status::Ok => {
                self.inner.waiters.pushed(topic, 0, true);
                Ok(())
            }
            Status::NotFound => Err(Error::NotFound {
                topic: topic.clone(),
                id: id.clone(),
            }),
            Status::WrongState => Err(Error::WrongState {
                topic: topic.clone(),
                id: id.clone(),
                state: state_from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
                operation: "kick",
                hint: "only dead jobs can be kicked; reschedule a delayed or ready job instead",
            }),
            other => Err(Error::Internal(format!(
                "kick: unexpected status {other:?}"
            ))),
        }
    }

    async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        let mut total = 0;
        // Bounded: each call kicks up to 1000; jobs that die meanwhile may be kicked too, but
        // the loop stops after as many rounds as the first count needs, plus one.
        let mut rounds_left: Option<u64> = None;
        loop {
            let mut inv = self.invocation(library::KICK, topic);
            inv.arg("").arg(1000);
            let reply = codec::array(self.call(&inv, "kicking dead jobs").await?)?;
            let kicked = codec::uint(reply.get(1).unwrap_or(&Value::Nil))?;
            let left = codec::uint(reply.get(2).unwrap_or(&Value::Nil))?;
            total += kicked;
            let rounds = rounds_left.get_or_insert(left / 1000 + 1);
            if kicked > 0 {
                self.inner.waiters.pushed(topic, 0, true);
            }
            if left == 0 || kicked == 0 || *rounds == 0 {
                return Ok(total);
            }
            *rounds -= 1;
        }
    }

    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        check_count("limit", limit)?;
        let code = state_code(state);
        let (score, member) = match after {
            None => ("0".to_string(), String::new()),
            Some(c) => parse_cursor(&c.0, code)?,
        };
        let mut inv = self.invocation(library::LIST, topic);
        inv.arg(code)
            .arg(score)
            .arg(member)
            .arg(limit)
            .arg(self.inner.tick_batch);
        let mut reply = codec::array(self.call(&inv, "listing jobs").await?)?.into_iter();
        let mut head = || reply.next().unwrap_or(Value::Nil);
        let has_next = codec::int(&head())? == 1;
        let next_score = codec::string(head())?;
        let next_member = codec::string(head())?;
        let jobs = decode_jobs(topic, reply.collect())?
            .into_iter()
            .map(|(j, _)| j)
            .collect();
        Ok(Page {
            jobs,
            next: has_next.then(|| Cursor(format!("{code}:{next_score}:{next_member}"))),
        })
    }

    async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        let mut inv = self.invocation(library::STATS, topic);
        inv.arg(self.inner.tick_batch);
        let r = codec::array(self.call(&inv, "reading stats").await?)?;
        if r.len() != 8 {
            return Err(Error::Internal("stats reply has the wrong length".into()));
        }
        let now = codec::uint(&r[0])?;
        Ok(TopicStats {
            delayed: codec::uint(&r[1])?,
            ready: codec::uint(&r[2])?,
            reserved: codec::uint(&r[3])?,
            dead: codec::uint(&r[4])?,
            oldest_overdue: codec::opt_uint(&r[5])?
                .map(|due| Duration::from_millis(now.saturating_sub(due))),
            next_due: codec::opt_uint(&r[6])?.map(Timestamp::from_millis),
            expired_leases: codec::uint(&r[7])?,
        })
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        let mut conn = self.inner.conn.clone();
        let names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.inner.keys.registry())
            .query_async(&mut conn)
            .await
            .map_err(|e| map_redis_err("listing topics", e))?;
        let mut topics: Vec<Topic> = names
            .into_iter()
            .filter_map(|n| Topic::new(n).ok())
            .collect();
        topics.sort();
        Ok(topics)
    }

    async fn purge(&self, topic: &Topic) -> Result<u64> {
        let inv = self.invocation(library::PURGE, topic);
        codec::uint(&self.call(&inv, "purging a topic").await?)
    }

    async fn now(&self) -> Result<Timestamp> {
        let mut conn = self.inner.conn.clone();
        let (sec, usec): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(|e| map_redis_err("reading the Redis clock", e))?;
        Ok(Timestamp::from_millis(sec * 1000 + usec / 1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_policies() {
        for p in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            assert!(may_evict_jobs(p), "{p}");
        }
        for p in [
            "noeviction",
            "volatile-lru",
            "volatile-ttl",
            "volatile-random",
        ] {
            assert!(!may_evict_jobs(p), "{p}");
        }
    }
}
