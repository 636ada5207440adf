//! A faithful baseline of the seeds' design, written here from the articles' descriptions
//! (seed 003, with seed 004's shape: ZSET + mover + ready LIST + BLPOP):
//!
//! - push: one script puts the body in a job table (HASH) and the member in a delay bucket
//!   (ZSET) scored by a due time from the **client's clock**; a pusher that creates a new
//!   earliest due time wakes the local mover;
//! - mover: waits until the bucket's head is due (or is woken, or once a minute), then one
//!   script moves every due member to the ready LIST;
//! - consumer: takes up to its free threads at once (LRANGE + LTRIM), or blocks in BLPOP
//!   when the list is empty; each thread reads the body (HGET), runs the handler and deletes
//!   the body (HDEL). There is **no ack**: what a consumer took and did not finish is lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use delayq_bench::clock;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;
use rand::Rng;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script};
use tokio::sync::{Notify, Semaphore};

use super::{DelayedRun, Footprint, Kind, Pids, SeenJob, System, Tally};
use crate::suite::{procs, redis_info};

static PUSH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/seeds_push.lua")));
static MOVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/seeds_move.lua")));
static TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/seeds_take.lua")));

/// The keys: one hash tag for all, as the seed does ("pseudo-cluster").
const TABLE: &str = "{seeds}:table";
const BUCKET: &str = "{seeds}:bucket";
const READY: &str = "{seeds}:ready:bench";
/// The mover's safety wake (the seed: once a minute).
const SAFETY_WAKE: Duration = Duration::from_secs(60);
/// How long an idle consumer's BLPOP blocks before it is sent again.
pub(crate) const BLPOP_TIMEOUT_S: u64 = 5;

/// One client of the seeds' design: a connection, and the local mover's wake-up.
#[derive(Clone)]
pub(crate) struct Seeds {
    client: redis::Client,
    conn: MultiplexedConnection,
    next: Arc<AtomicU64>,
    wake: Arc<Notify>,
}

impl Seeds {
    /// Connects to `url`.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .context("connecting to Redis")?;
        Ok(Seeds {
            client,
            conn,
            next: Arc::new(AtomicU64::new(0)),
            wake: Arc::new(Notify::new()),
        })
    }

    /// Pushes `jobs` (due ms on the client clock, body) in one script call; wakes the local
    /// mover when one of them is due before what it waits for.
    pub(crate) async fn push(&self, jobs: &[(u64, Vec<u8>)]) -> anyhow::Result<()> {
        let mut inv = PUSH.prepare_invoke();
        inv.key(TABLE).key(BUCKET);
        let mut earliest = u64::MAX;
        for (due, body) in jobs {
            let id: u128 = rand::rng().random();
            let h = format!("{id:032x}");
            // TOPIC:ID with a 36-character id, like the seed's varchar(36) ids.
            let member = format!(
                "bench:{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            );
            inv.arg(member).arg(*due).arg(body.as_slice());
            earliest = earliest.min(*due);
        }
        let mut conn = self.conn.clone();
        let _: u64 = inv.invoke_async(&mut conn).await.context("seeds push")?;
        if earliest < self.next.fetch_min(earliest, Ordering::AcqRel) {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// The mover, until the task is dropped.
    pub(crate) async fn mover(self) -> anyhow::Result<()> {
        let mut conn = self.conn.clone();
        loop {
            let now = clock::now_ms();
            let head: Option<String> = MOVE
                .key(BUCKET)
                .key(READY)
                .arg(now)
                .invoke_async(&mut conn)
                .await
                .context("seeds move")?;
            let head = head
                .and_then(|h| h.parse::<f64>().ok())
                .map(|h| h as u64)
                .unwrap_or(u64::MAX);
            self.next.store(head, Ordering::Release);
            let wait = Duration::from_millis(head.saturating_sub(clock::now_ms())).min(SAFETY_WAKE);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    /// Consumers with `threads` threads, until `stop`; `seen` gets each member and body.
    pub(crate) async fn consume(
        &self,
        threads: usize,
        stop: impl Fn() -> bool,
        seen: SeenJob,
    ) -> anyhow::Result<()> {
        let cfg = AsyncConnectionConfig::new().set_response_timeout(None);
        let mut blocking = self
            .client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
            .context("connecting the BLPOP connection")?;
        let mut conn = self.conn.clone();
        let slots = Arc::new(Semaphore::new(threads));
        let mut running = tokio::task::JoinSet::new();
        while !stop() {
            let Ok(mut permits) = slots.clone().acquire_owned().await else {
                break;
            };
            let free = slots.available_permits();
            if free > 0
                && let Ok(more) = slots.clone().try_acquire_many_owned(free as u32)
            {
                permits.merge(more);
            }
            let mut items: Vec<String> = TAKE
                .key(READY)
                .arg(permits.num_permits())
                .invoke_async(&mut conn)
                .await
                .context("seeds take")?;
            if items.is_empty() {
                let got: Option<(String, String)> = redis::cmd("BLPOP")
                    .arg(READY)
                    // 1 s, so that a stopping run notices soon; only idle workers (W5) use
                    // the longer timeout.
                    .arg(1)
                    .query_async(&mut blocking)
                    .await
                    .context("seeds BLPOP")?;
                items.extend(got.map(|(_, m)| m));
            }
            for member in items {
                let Some(permit) = permits.split(1) else {
                    break;
                };
                let (mut conn, seen) = (conn.clone(), seen.clone());
                running.spawn(async move {
                    let body: Option<Vec<u8>> = redis::cmd("HGET")
                        .arg(TABLE)
                        .arg(&member)
                        .query_async(&mut conn)
                        .await?;
                    if let Some(b) = body {
                        seen(&member, &b);
                    }
                    let _: u64 = redis::cmd("HDEL")
                        .arg(TABLE)
                        .arg(&member)
                        .query_async(&mut conn)
                        .await?;
                    drop(permit);
                    anyhow::Ok(())
                });
            }
            while let Some(r) = running.try_join_next() {
                r??;
            }
        }
        while let Some(r) = running.join_next().await {
            r??;
        }
        Ok(())
    }

    /// An idle consumer process's loop: BLPOP with the seed's timeout, forever.
    pub(crate) async fn idle(&self) -> anyhow::Result<()> {
        let cfg = AsyncConnectionConfig::new().set_response_timeout(None);
        let mut blocking = self
            .client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await?;
        loop {
            let _: Option<(String, String)> = redis::cmd("BLPOP")
                .arg(READY)
                .arg(BLPOP_TIMEOUT_S)
                .query_async(&mut blocking)
                .await?;
        }
    }

    /// Jobs in the bucket or the ready list (not yet taken by a consumer).
    pub(crate) async fn pending(&self) -> anyhow::Result<u64> {
        let mut conn = self.conn.clone();
        let (z, l): (u64, u64) = redis::pipe()
            .cmd("ZCARD")
            .arg(BUCKET)
            .cmd("LLEN")
            .arg(READY)
            .query_async(&mut conn)
            .await?;
        Ok(z + l)
    }

    /// Jobs still in the bucket (not yet moved).
    pub(crate) async fn bucket_len(&self) -> anyhow::Result<u64> {
        let mut conn = self.conn.clone();
        Ok(redis::cmd("ZCARD")
            .arg(BUCKET)
            .query_async(&mut conn)
            .await?)
    }
}

/// The seeds' design on its own redis-server, with its mover running in this process.
pub(crate) struct SeedsSystem {
    seeds: Seeds,
    mover: tokio::task::JoinHandle<anyhow::Result<()>>,
    redis: RedisServer,
}

impl SeedsSystem {
    /// Starts a redis-server, connects and starts the mover.
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let seeds = Seeds::connect(&redis.url()).await?;
        let mover = tokio::spawn(seeds.clone().mover());
        Ok(SeedsSystem {
            seeds,
            mover,
            redis,
        })
    }

    fn jobs(n: usize, delays: Delays, size: usize) -> Vec<(u64, Vec<u8>)> {
        let now = clock::now_ms();
        let mut rng = rand::rng();
        (0..n)
            .map(|_| {
                let due = now + delays.draw(&mut rng).as_millis() as u64;
                (due, clock::body(due, size))
            })
            .collect()
    }

    fn check_mover(&mut self) -> anyhow::Result<()> {
        if self.mover.is_finished() {
            anyhow::bail!("the seeds' mover stopped");
        }
        Ok(())
    }
}

impl Drop for SeedsSystem {
    fn drop(&mut self) {
        self.mover.abort();
    }
}

#[async_trait]
impl System for SeedsSystem {
    fn kind(&self) -> Kind {
        Kind::Seeds
    }

    fn pids(&self) -> Pids {
        Pids {
            store: self.redis.pid().map(procs::Proc::One),
            queue: procs::own_pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        Some(&self.redis)
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        let mut left = n;
        while left > 0 {
            let a = left.min(1000);
            let b = (left - a).min(1000);
            let (ja, jb) = (Self::jobs(a, delays, body), Self::jobs(b, delays, body));
            let (ra, rb) = tokio::join!(self.seeds.push(&ja), async {
                if jb.is_empty() {
                    Ok(())
                } else {
                    self.seeds.push(&jb).await
                }
            });
            ra?;
            rb?;
            left -= a + b;
        }
        // Ready jobs count once the mover put them in the list, as they would for a consumer
        // that starts later.
        if delays == Delays::Ready {
            let deadline = Instant::now() + Duration::from_secs(60);
            while self.seeds.bucket_len().await? > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        self.check_mover()
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        let tally = Tally::new(n, Instant::now(), cap);
        let seen: SeenJob = {
            let tally = tally.clone();
            Arc::new(move |_: &str, b: &[u8]| {
                tally.seen(b);
            })
        };
        self.seeds.consume(consumers, || tally.stop(), seen).await?;
        self.check_mover()?;
        Ok(tally.drain())
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        let tally = Tally::new(
            spec.jobs,
            Instant::now() + Duration::from_millis(200),
            spec.cap,
        );
        let consumer = {
            let (seeds, tally) = (self.seeds.clone(), tally.clone());
            let seen: SeenJob = {
                let tally = tally.clone();
                Arc::new(move |_: &str, b: &[u8]| {
                    tally.seen(b);
                })
            };
            tokio::spawn(async move { seeds.consume(spec.consumers, || tally.stop(), seen).await })
        };
        tokio::time::sleep_until(tally.start().into()).await;
        let mut pushed = 0;
        while pushed < spec.jobs && !tally.stop() {
            let n = spec.batch.min(spec.jobs - pushed);
            self.seeds
                .push(&Self::jobs(n, Delays::Uniform(spec.spread), spec.body))
                .await?;
            pushed += n;
        }
        let push_elapsed = tally.start().elapsed();
        consumer.await??;
        self.check_mover()?;
        Ok(tally.delayed(pushed, push_elapsed, false))
    }

    fn endpoint(&self) -> String {
        self.redis.url()
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        Ok(Footprint {
            memory: redis_info::used_memory(&self.redis).await?,
            disk: None,
        })
    }
}
