//! The systems measured side by side, behind one trait: [`System`].
//!
//! Each system starts what it needs (its own redis-server, beanstalkd, delayq server or
//! Node process, on free loopback ports) and stops it when dropped. Every Redis-based
//! system gets the same redis-server binary with the same options: the one
//! `DELAYQ_REDIS_SERVER` names (bench/run.sh sets it to the Redis 8.6 that
//! bench/install-redis.sh installs, since ChasquiMQ needs 8.6).

mod beanstalk;
mod bullmq;
pub(crate) mod chasquimq;
mod delayq_http;
mod delayq_lib;
mod seeds;
mod tally;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_bench::lateness::Lateness;
use delayq_testkit::{RedisOptions, RedisServer};

pub(crate) use beanstalk::{
    BeanstalkClient, STALLS as BEANSTALKD_STALLS, version as beanstalkd_version,
};
pub(crate) use seeds::Seeds;
pub(crate) use tally::Tally;

/// Receives the member (TOPIC:ID) and body of each job a consumer took.
pub(crate) type SeenJob = std::sync::Arc<dyn Fn(&str, &[u8]) + Send + Sync>;

/// Which system.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Kind {
    /// delayq's Redis engine, used as a library (worker runtime in this process).
    DelayqRedis,
    /// delayq's embedded engine (SQLite), used as a library.
    DelayqEmbedded,
    /// The delayq server over HTTP, on Redis.
    HttpRedis,
    /// The delayq server over HTTP, on the embedded engine.
    HttpEmbedded,
    /// The delayq server over HTTP, on Redis, with batch consumers that settle in reserve.
    HttpRedisBatch,
    /// The delayq server over HTTP, on the embedded engine, with batch consumers.
    HttpEmbeddedBatch,
    /// ChasquiMQ (Rust, Redis Streams), used as a library.
    Chasquimq,
    /// BullMQ on Node.
    Bullmq,
    /// beanstalkd, in memory.
    Beanstalkd,
    /// beanstalkd with its binlog (`-b`).
    BeanstalkdBinlog,
    /// The seeds' design (ZSET + mover + ready LIST + BLPOP), written here from the articles.
    Seeds,
}

impl Kind {
    /// True for the HTTP consumers that reserve in batches: the same server and store as
    /// their one-job twin, so only the workloads that measure consumers (W1, W2, W7) run them.
    pub(crate) fn is_batch_consumer(self) -> bool {
        matches!(self, Kind::HttpRedisBatch | Kind::HttpEmbeddedBatch)
    }

    /// Every system, in table order.
    pub(crate) const ALL: [Kind; 11] = [
        Kind::DelayqRedis,
        Kind::DelayqEmbedded,
        Kind::HttpRedis,
        Kind::HttpEmbedded,
        Kind::HttpRedisBatch,
        Kind::HttpEmbeddedBatch,
        Kind::Chasquimq,
        Kind::Bullmq,
        Kind::Beanstalkd,
        Kind::BeanstalkdBinlog,
        Kind::Seeds,
    ];

    /// The name in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::DelayqRedis => "delayq, Redis (library)",
            Kind::DelayqEmbedded => "delayq, embedded (library)",
            Kind::HttpRedis => "delayq server, Redis (HTTP)",
            Kind::HttpEmbedded => "delayq server, embedded (HTTP)",
            Kind::HttpRedisBatch => "delayq server, Redis (HTTP, batch consumer)",
            Kind::HttpEmbeddedBatch => "delayq server, embedded (HTTP, batch consumer)",
            Kind::Chasquimq => "ChasquiMQ",
            Kind::Bullmq => "BullMQ",
            Kind::Beanstalkd => "beanstalkd (memory)",
            Kind::BeanstalkdBinlog => "beanstalkd (-b binlog)",
            Kind::Seeds => "seeds' design (ZSET + mover + LIST)",
        }
    }

    /// The short name in results.json and plots.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Kind::DelayqRedis => "delayq-redis",
            Kind::DelayqEmbedded => "delayq-embedded",
            Kind::HttpRedis => "http-redis",
            Kind::HttpEmbedded => "http-embedded",
            Kind::HttpRedisBatch => "http-redis-batch",
            Kind::HttpEmbeddedBatch => "http-embedded-batch",
            Kind::Chasquimq => "chasquimq",
            Kind::Bullmq => "bullmq",
            Kind::Beanstalkd => "beanstalkd",
            Kind::BeanstalkdBinlog => "beanstalkd-binlog",
            Kind::Seeds => "seeds",
        }
    }

    /// Parses [`Kind::key`].
    pub(crate) fn from_key(key: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.key() == key)
    }
}

/// The processes whose CPU a system costs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pids {
    /// The store: redis-server or beanstalkd.
    pub store: Option<u32>,
    /// The queue's own process: this one for the Rust libraries (worker and producer run
    /// here), Node for BullMQ, the delayq server for HTTP.
    pub queue: u32,
    /// A separate client, when the queue is a server: this process (HTTP, beanstalkd).
    pub client: Option<u32>,
}

/// What a delayed-delivery run measured.
#[derive(Clone, Debug, Default)]
pub(crate) struct DelayedRun {
    pub pushed: usize,
    pub push_elapsed: Duration,
    pub delivered: usize,
    /// From the first push to the last delivery.
    pub elapsed: Duration,
    /// Delivery minus the due time the producer asked for, on the host clock.
    pub host: Lateness,
    /// The system's own measure, when it has one (delayq: its engine clock).
    pub own: Option<Lateness>,
}

/// What pending jobs cost a system.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Footprint {
    /// Redis `used_memory`, or the resident memory of beanstalkd.
    pub memory: u64,
    /// Bytes on disk (embedded engine, beanstalkd's binlog).
    pub disk: Option<u64>,
}

/// A system under test. Dropping it stops every process it started.
#[async_trait]
pub(crate) trait System: Send {
    /// Which system.
    fn kind(&self) -> Kind;
    /// Its processes.
    fn pids(&self) -> Pids;
    /// Its redis-server, for `INFO`.
    fn redis(&self) -> Option<&RedisServer>;
    /// Pushes `n` jobs of `body` bytes as fast as its batch interface allows.
    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()>;
    /// `consumers` consumers take ready jobs (handle: nothing; then acknowledge) until `n`
    /// were handled or `cap` passed.
    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport>;
    /// Consumers run while one producer pushes delayed jobs in batches.
    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun>;
    /// What its pending jobs cost now.
    async fn footprint(&mut self) -> anyhow::Result<Footprint>;
    /// Where its clients connect: a Redis URL, the delayq server's base URL, or
    /// beanstalkd's port.
    fn endpoint(&self) -> String;
    /// Starts `workers` idle workers in its own client process, when it has one (BullMQ's
    /// Node process); false when the suite must start them.
    async fn start_idle_workers(&mut self, workers: usize) -> anyhow::Result<bool> {
        let _ = workers;
        Ok(false)
    }
}

/// Where the suite finds what it runs.
#[derive(Clone, Debug)]
pub(crate) struct Env {
    /// `node`.
    pub node: PathBuf,
    /// The `bench/` folder: `bullmq.mjs` and its `node_modules`.
    pub bench_dir: PathBuf,
    /// `beanstalkd`.
    pub beanstalkd: PathBuf,
    /// Where logs and data directories go.
    pub work: PathBuf,
}

/// The redis-server every Redis-based system gets: the same binary and options.
pub(crate) fn redis_server() -> RedisServer {
    RedisServer::start_with(RedisOptions::default())
}

/// Starts a system.
pub(crate) async fn start(kind: Kind, env: &Env) -> anyhow::Result<Box<dyn System>> {
    Ok(match kind {
        Kind::DelayqRedis => Box::new(delayq_lib::DelayqLib::redis().await?),
        Kind::DelayqEmbedded => Box::new(delayq_lib::DelayqLib::embedded(env)?),
        Kind::HttpRedis => {
            Box::new(delayq_http::DelayqHttp::redis(env, kind, delayq_http::Loop::One).await?)
        }
        Kind::HttpEmbedded => {
            Box::new(delayq_http::DelayqHttp::embedded(env, kind, delayq_http::Loop::One).await?)
        }
        Kind::HttpRedisBatch => {
            Box::new(delayq_http::DelayqHttp::redis(env, kind, delayq_http::Loop::Batch).await?)
        }
        Kind::HttpEmbeddedBatch => {
            Box::new(delayq_http::DelayqHttp::embedded(env, kind, delayq_http::Loop::Batch).await?)
        }
        Kind::Chasquimq => Box::new(chasquimq::Chasquimq::start().await?),
        Kind::Bullmq => Box::new(bullmq::Bullmq::start(env).await?),
        Kind::Beanstalkd => Box::new(beanstalk::Beanstalk::start(env, false).await?),
        Kind::BeanstalkdBinlog => Box::new(beanstalk::Beanstalk::start(env, true).await?),
        Kind::Seeds => Box::new(seeds::SeedsSystem::start().await?),
    })
}
