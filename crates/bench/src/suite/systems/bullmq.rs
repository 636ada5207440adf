//! BullMQ on Node 20: `bench/bullmq.mjs`, a long-lived child process driven through
//! [`NodeDriver`] (one JSON command per line). Its Worker runs with the given concurrency
//! (50 unless a workload varies it) and `removeOnComplete`.

use std::time::Duration;

use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;

use super::node::{NodeDriver, Script};
use super::{DelayedRun, Env, Footprint, Kind, Pids, System};
use crate::suite::{procs, redis_info};

/// The script that drives BullMQ.
const SCRIPT: Script = Script {
    file: "bullmq.mjs",
    package: "bullmq",
    what: "node (BullMQ driver)",
};

/// A Node process driving BullMQ against its own redis-server.
pub(crate) struct Bullmq {
    node: NodeDriver,
    redis: RedisServer,
}

impl Bullmq {
    /// A redis-server and a Node driver on it.
    pub(crate) async fn start(env: &Env) -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let node =
            NodeDriver::start(env, SCRIPT, &redis.port().to_string(), "bullmq-node.log").await?;
        Ok(Bullmq { node, redis })
    }
}

#[async_trait]
impl System for Bullmq {
    fn kind(&self) -> Kind {
        Kind::Bullmq
    }

    fn pids(&self) -> Pids {
        Pids {
            store: self.redis.pid().map(procs::Proc::One),
            queue: self.node.pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        Some(&self.redis)
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
        self.redis.url()
    }

    async fn start_idle_workers(&mut self, workers: usize) -> anyhow::Result<bool> {
        self.node.idle(workers).await?;
        Ok(true)
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        Ok(Footprint {
            memory: redis_info::used_memory(&self.redis).await?,
            disk: None,
        })
    }
}
