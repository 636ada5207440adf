//! pg-boss on Node 20: `bench/pgboss.mjs`, a long-lived child process driven through
//! [`NodeDriver`] (the commands of `bench/bullmq.mjs`), on a PostgreSQL server of its own
//! made as delayq's PostgreSQL engine gets it ([`super::postgres_server`]).
//!
//! pg-boss polls: its consumers look for jobs again after its polling interval, set to the
//! least it accepts (0.5 s). The drains and the delayed runs use `fetch` (one job, pg-boss's
//! default batch) and `complete` in a loop that fetches again at once after a job and waits
//! the interval after an empty fetch, since `work()` waits the interval after every batch;
//! the idle workers are `work()` itself. Jobs go in with `insert` (per-job `startAfter`).
//! pg-boss is measured in W1, W2, W3 and W5; its fetch sorts every ready job of the queue
//! (its order, priority then creation time, is not that of an index), so the 20,000 ready
//! jobs of each W4 probe would take minutes: W4 measures delayq's engines alone.

use std::time::Duration;

use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::{PostgresServer, RedisServer};

use super::node::{NodeDriver, Script};
use super::{DelayedRun, Env, Footprint, Kind, Pids, System};
use crate::suite::pg_info;
use crate::suite::procs::Proc;

/// The script that drives pg-boss.
const SCRIPT: Script = Script {
    file: "pgboss.mjs",
    package: "pg-boss",
    what: "node (pg-boss driver)",
};

/// The schema pg-boss keeps its tables in (its default).
const SCHEMA: &str = "pgboss";

/// A Node process driving pg-boss against its own PostgreSQL server.
pub(crate) struct PgBoss {
    node: NodeDriver,
    /// The server, and its postmaster's process tree (the store's CPU).
    postgres: (PostgresServer, Proc),
}

impl PgBoss {
    /// A PostgreSQL server and a Node driver on it; pg-boss makes its schema and the
    /// benchmark's queue before the driver answers its first command.
    pub(crate) async fn start(env: &Env) -> anyhow::Result<Self> {
        let server = super::postgres_server().await?;
        let tree = pg_info::server_tree(&server).await?;
        let node = NodeDriver::start(env, SCRIPT, &server.url(), "pgboss-node.log").await?;
        Ok(PgBoss {
            node,
            postgres: (server, tree),
        })
    }
}

#[async_trait]
impl System for PgBoss {
    fn kind(&self) -> Kind {
        Kind::PgBoss
    }

    fn pids(&self) -> Pids {
        Pids {
            store: Some(self.postgres.1),
            queue: self.node.pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        None
    }

    fn postgres(&self) -> Option<&PostgresServer> {
        Some(&self.postgres.0)
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        self.node.fill(n, delays, body).await
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        self.node.drain(n, consumers, cap).await
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        self.node.delayed(spec).await
    }

    fn endpoint(&self) -> String {
        self.postgres.0.url()
    }

    async fn start_idle_workers(&mut self, workers: usize) -> anyhow::Result<bool> {
        self.node.idle(workers).await?;
        Ok(true)
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        Ok(Footprint {
            memory: 0,
            disk: Some(pg_info::schema_bytes(&self.postgres.0, SCHEMA).await?),
        })
    }
}
