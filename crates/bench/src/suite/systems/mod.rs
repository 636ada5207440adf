//! The systems measured side by side, behind one trait: [`System`].
//!
//! Each system starts what it needs (its own redis-server, PostgreSQL, beanstalkd, delayq
//! server, Node process or client worker script, on free loopback ports) and stops it when
//! dropped. The HTTP systems run the suite's own `serve-http` child; the beanstalkd-protocol
//! ones run the `delayq` binary's `delayq serve --beanstalk` (`serve`, which W10 starts too).
//! Every Redis-based system gets the same redis-server binary with the same options: the one
//! `DELAYQ_REDIS_SERVER` names (bench/run.sh sets it to the Redis 8.6 that
//! bench/install-redis.sh installs, since ChasquiMQ needs 8.6). Every PostgreSQL-based
//! system (delayq's PostgreSQL engine, pg-boss) gets its own [`postgres_server`]: the
//! testkit's cluster, made by the same `initdb` and run with the same settings.
//!
//! The Node peers (BullMQ, pg-boss) are driven through `node` ([`node::NodeDriver`]): one
//! script each in `bench/`, answering one JSON line per command.

mod beanstalk;
mod bullmq;
pub(crate) mod chasquimq;
mod client_worker;
mod delayq_beanstalk;
pub(crate) mod delayq_http;
mod delayq_lib;
mod node;
mod pgboss;
mod seeds;
pub(crate) mod serve;
mod tally;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_bench::lateness::Lateness;
use delayq_testkit::{PostgresServer, RedisOptions, RedisServer};

pub(crate) use beanstalk::{
    BeanstalkClient, STALLS as BEANSTALKD_STALLS, version as beanstalkd_version,
};
pub(crate) use delayq_beanstalk::STALLS as DELAYQ_BEANSTALK_STALLS;
pub(crate) use seeds::Seeds;
pub(crate) use tally::Tally;

use super::procs::{CpuMeter, Proc};

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
    /// delayq's PostgreSQL engine, used as a library, on its own PostgreSQL.
    DelayqPostgres,
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
    /// pg-boss on Node, on its own PostgreSQL: W1 to W3 and W5.
    PgBoss,
    /// beanstalkd, in memory.
    Beanstalkd,
    /// beanstalkd with its binlog (`-b`).
    BeanstalkdBinlog,
    /// The delayq server (`delayq serve --beanstalk`) on Redis, driven over beanstalkd's
    /// protocol by beanstalkd's pipelined client: W1, W2 and W7 only.
    DelayqBeanstalkRedis,
    /// The same on the embedded engine.
    DelayqBeanstalkEmbedded,
    /// The seeds' design (ZSET + mover + ready LIST + BLPOP), written here from the articles.
    Seeds,
    /// The Python client's asyncio `Worker` (clients/python) on the delayq server on Redis:
    /// W1 only, through the client's own drain script.
    ClientPython,
    /// The Node client's `Worker` (clients/node) on the delayq server on Redis: W1 only,
    /// through the client's own drain script.
    ClientNode,
}

/// The consumer counts of W1 at which the client workers run (those of the plan among them).
pub(crate) const CLIENT_CONSUMERS: [usize; 2] = [10, 50];

impl Kind {
    /// True for the HTTP consumers that reserve in batches: the same server and store as
    /// their one-job twin, so only the workloads that measure consumers (W1, W2, W7) run them.
    pub(crate) fn is_batch_consumer(self) -> bool {
        matches!(self, Kind::HttpRedisBatch | Kind::HttpEmbeddedBatch)
    }

    /// True for the delayq server driven over its beanstalkd port: the same server and store
    /// as the HTTP systems, so only the workloads that measure consumers (W1, W2, W7) run it.
    pub(crate) fn is_delayq_beanstalk(self) -> bool {
        matches!(
            self,
            Kind::DelayqBeanstalkRedis | Kind::DelayqBeanstalkEmbedded
        )
    }

    /// True for the systems that run in W1, W2 and W7 only: the HTTP batch consumers and
    /// the delayq server's beanstalkd port.
    pub(crate) fn consumers_only(self) -> bool {
        self.is_batch_consumer() || self.is_delayq_beanstalk()
    }

    /// True for the official clients' workers, which run only in W1 (at
    /// [`CLIENT_CONSUMERS`]): their drain scripts measure a drain and nothing else.
    pub(crate) fn is_client_worker(self) -> bool {
        matches!(self, Kind::ClientPython | Kind::ClientNode)
    }

    /// The consumer counts of the plan's W1 at which this system runs.
    pub(crate) fn w1_consumers(self, plan: &[usize]) -> Vec<usize> {
        plan.iter()
            .copied()
            .filter(|c| !self.is_client_worker() || CLIENT_CONSUMERS.contains(c))
            .collect()
    }

    /// True for the systems whose store is a PostgreSQL server of their own.
    pub(crate) fn is_postgres(self) -> bool {
        matches!(self, Kind::DelayqPostgres | Kind::PgBoss)
    }

    /// Every system, in table order.
    pub(crate) const ALL: [Kind; 17] = [
        Kind::DelayqRedis,
        Kind::DelayqEmbedded,
        Kind::DelayqPostgres,
        Kind::HttpRedis,
        Kind::HttpEmbedded,
        Kind::HttpRedisBatch,
        Kind::HttpEmbeddedBatch,
        Kind::Chasquimq,
        Kind::Bullmq,
        Kind::PgBoss,
        Kind::Beanstalkd,
        Kind::BeanstalkdBinlog,
        Kind::DelayqBeanstalkRedis,
        Kind::DelayqBeanstalkEmbedded,
        Kind::Seeds,
        Kind::ClientPython,
        Kind::ClientNode,
    ];

    /// The name in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::DelayqRedis => "delayq, Redis (library)",
            Kind::DelayqEmbedded => "delayq, embedded (library)",
            Kind::DelayqPostgres => "delayq, PostgreSQL (library)",
            Kind::HttpRedis => "delayq server, Redis (HTTP)",
            Kind::HttpEmbedded => "delayq server, embedded (HTTP)",
            Kind::HttpRedisBatch => "delayq server, Redis (HTTP, batch consumer)",
            Kind::HttpEmbeddedBatch => "delayq server, embedded (HTTP, batch consumer)",
            Kind::Chasquimq => "ChasquiMQ",
            Kind::Bullmq => "BullMQ",
            Kind::PgBoss => "pg-boss",
            Kind::Beanstalkd => "beanstalkd (memory)",
            Kind::BeanstalkdBinlog => "beanstalkd (-b binlog)",
            Kind::DelayqBeanstalkRedis => "delayq server, Redis (beanstalkd protocol)",
            Kind::DelayqBeanstalkEmbedded => "delayq server, embedded (beanstalkd protocol)",
            Kind::Seeds => "seeds' design (ZSET + mover + LIST)",
            Kind::ClientPython => "delayq server, Redis (Python worker)",
            Kind::ClientNode => "delayq server, Redis (Node worker)",
        }
    }

    /// The short name in results.json and plots.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Kind::DelayqRedis => "delayq-redis",
            Kind::DelayqEmbedded => "delayq-embedded",
            Kind::DelayqPostgres => "delayq-postgres",
            Kind::HttpRedis => "http-redis",
            Kind::HttpEmbedded => "http-embedded",
            Kind::HttpRedisBatch => "http-redis-batch",
            Kind::HttpEmbeddedBatch => "http-embedded-batch",
            Kind::Chasquimq => "chasquimq",
            Kind::Bullmq => "bullmq",
            Kind::PgBoss => "pg-boss",
            Kind::Beanstalkd => "beanstalkd",
            Kind::BeanstalkdBinlog => "beanstalkd-binlog",
            Kind::DelayqBeanstalkRedis => "delayq-beanstalk-redis",
            Kind::DelayqBeanstalkEmbedded => "delayq-beanstalk-embedded",
            Kind::Seeds => "seeds",
            Kind::ClientPython => "client-python",
            Kind::ClientNode => "client-node",
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
    /// The store: redis-server or beanstalkd, or a PostgreSQL server's postmaster with its
    /// descendants (its auxiliary processes and the backend of every connection).
    pub store: Option<Proc>,
    /// The queue's own process: this one for the Rust libraries (worker and producer run
    /// here), Node for BullMQ and pg-boss, the delayq server for HTTP and its beanstalkd port.
    pub queue: u32,
    /// A separate client, when the queue is a server: this process (HTTP, beanstalkd's
    /// protocol).
    pub client: Option<u32>,
}

/// The CPU seconds each process of a system used over a span, and the span's wall time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpanCpu {
    /// Wall-clock seconds of the span.
    pub wall: f64,
    /// The store's CPU seconds (NaN without a store of its own).
    pub store: f64,
    /// The queue's process (0 when the store is the queue, as for beanstalkd).
    pub queue: f64,
    /// The separate client (NaN without one).
    pub client: f64,
}

/// Reads the CPU time of a system's processes at the start of a span.
pub(crate) struct SpanMeter {
    pids: Pids,
    list: Vec<Proc>,
    meter: CpuMeter,
    start: Instant,
}

impl SpanMeter {
    /// Starts the span now.
    pub(crate) fn start(pids: Pids) -> SpanMeter {
        let list: Vec<Proc> = [
            pids.store,
            Some(Proc::One(pids.queue)),
            pids.client.map(Proc::One),
        ]
        .into_iter()
        .flatten()
        .collect();
        SpanMeter {
            meter: CpuMeter::of(&list),
            pids,
            list,
            start: Instant::now(),
        }
    }

    /// What each process used since [`SpanMeter::start`].
    pub(crate) fn stop(&self) -> SpanCpu {
        let wall = self.start.elapsed().as_secs_f64();
        let cpu = self.meter.stop();
        let of = |proc: Option<Proc>| {
            proc.and_then(|p| self.list.iter().position(|&x| x == p))
                .map(|i| cpu[i])
        };
        let p = self.pids;
        SpanCpu {
            wall,
            store: of(p.store).unwrap_or(f64::NAN),
            // The store and the queue are one process for beanstalkd.
            queue: if Some(Proc::One(p.queue)) == p.store {
                0.0
            } else {
                of(Some(Proc::One(p.queue))).unwrap_or(0.0)
            },
            client: of(p.client.map(Proc::One)).unwrap_or(f64::NAN),
        }
    }
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
    /// Bytes on disk (embedded engine, beanstalkd's binlog), or the bytes of a PostgreSQL
    /// system's tables with their indexes and TOAST (`pg_total_relation_size`).
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
    /// Its PostgreSQL server, for its statistics (`pg_stat_database`).
    fn postgres(&self) -> Option<&PostgresServer> {
        None
    }
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
    /// [`System::drain`], with the CPU its processes used during the drain. A system whose
    /// consumers run in a process of their own per drain measures that process instead of
    /// [`Pids::client`].
    async fn drain_metered(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<(DrainReport, SpanCpu)> {
        let meter = SpanMeter::start(self.pids());
        let r = self.drain(n, consumers, cap).await?;
        Ok((r, meter.stop()))
    }

    /// Consumers run while one producer pushes delayed jobs in batches.
    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun>;
    /// What its pending jobs cost now.
    async fn footprint(&mut self) -> anyhow::Result<Footprint>;
    /// Where its clients connect: a Redis or PostgreSQL URL, the delayq server's base URL,
    /// or the port speaking beanstalkd's protocol.
    fn endpoint(&self) -> String;
    /// Starts `workers` idle workers in its own client process, when it has one (the Node
    /// process of BullMQ or pg-boss); false when the suite must start them.
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
    /// The `bench/` folder: `bullmq.mjs`, `pgboss.mjs` and their `node_modules`.
    pub bench_dir: PathBuf,
    /// `beanstalkd`.
    pub beanstalkd: PathBuf,
    /// `delayq` (the product's binary), whose `delayq serve --beanstalk` the
    /// beanstalkd-protocol systems run.
    pub delayq: PathBuf,
    /// The `clients/` folder: the official clients and their drain scripts.
    pub clients_dir: PathBuf,
    /// The Python that runs the Python client's drain script (its venv).
    pub client_python: PathBuf,
    /// Where logs and data directories go.
    pub work: PathBuf,
}

/// The redis-server every Redis-based system gets: the same binary and options.
pub(crate) fn redis_server() -> RedisServer {
    RedisServer::start_with(RedisOptions::default())
}

/// A PostgreSQL server of its own, as every PostgreSQL-based system gets it: the testkit's
/// cluster (`initdb` in a temporary directory, a free loopback port, the `postgres` user
/// when root; the binaries of `DELAYQ_POSTGRES_BIN` or the newest Debian
/// `/usr/lib/postgresql/<version>/bin`), made off the async threads since `initdb` takes a
/// second or two.
pub(crate) async fn postgres_server() -> anyhow::Result<PostgresServer> {
    tokio::task::spawn_blocking(PostgresServer::start)
        .await
        .context("PostgreSQL did not start (see the message above; bench/run.sh installs Debian's postgresql)")
}

/// Starts a system.
pub(crate) async fn start(kind: Kind, env: &Env) -> anyhow::Result<Box<dyn System>> {
    Ok(match kind {
        Kind::DelayqRedis => Box::new(delayq_lib::DelayqLib::redis().await?),
        Kind::DelayqEmbedded => Box::new(delayq_lib::DelayqLib::embedded(env)?),
        Kind::DelayqPostgres => Box::new(delayq_lib::DelayqLib::postgres().await?),
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
        Kind::PgBoss => Box::new(pgboss::PgBoss::start(env).await?),
        Kind::Beanstalkd => Box::new(beanstalk::Beanstalk::start(env, false).await?),
        Kind::BeanstalkdBinlog => Box::new(beanstalk::Beanstalk::start(env, true).await?),
        Kind::DelayqBeanstalkRedis => {
            Box::new(delayq_beanstalk::DelayqBeanstalk::redis(env, kind).await?)
        }
        Kind::DelayqBeanstalkEmbedded => {
            Box::new(delayq_beanstalk::DelayqBeanstalk::embedded(env, kind).await?)
        }
        Kind::Seeds => Box::new(seeds::SeedsSystem::start().await?),
        Kind::ClientPython => Box::new(
            client_worker::ClientWorker::start(env, kind, client_worker::Lang::Python).await?,
        ),
        Kind::ClientNode => Box::new(
            client_worker::ClientWorker::start(env, kind, client_worker::Lang::Node).await?,
        ),
    })
}
