//! The delayq server's beanstalkd port: `delayq serve --beanstalk 127.0.0.1:PORT`
//! ([`DelayqServe`]) on a fresh redis-server or a fresh data directory, driven by the same
//! pipelined client as beanstalkd ([`Pipelined`]): batches of `put`s in one write, `delete`
//! and the next `reserve-with-timeout` in one write. W1, W2 and W7 only: the server and store
//! are those of the HTTP systems.
//!
//! delayq takes delays in whole seconds over this protocol too: a job asked for `d` ms is put
//! with `ceil(d / 1000)` s, and its lateness is measured against the asked time (`host`) and
//! against the whole second it was given (`own`), as for beanstalkd. The CPU reported is the
//! delayq server's (the queue) and, on Redis, redis-server's (the store).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;

use super::beanstalk::{BeanstalkClient, Pipelined};
use super::serve::{DelayqServe, Store};
use super::{DelayedRun, Env, Footprint, Kind, Pids, System};
use crate::suite::{procs, redis_info};

/// The largest `put` the server takes (`--beanstalk-max-job-size`): delayq's own body limit
/// (`--max-body`'s default), far above the workloads' bodies.
pub(crate) const MAX_JOB_SIZE: usize = 262_144;

/// Reserves the delayq server's beanstalkd port left unanswered, over the whole run
/// (counted apart from beanstalkd's).
pub(crate) static STALLS: AtomicU64 = AtomicU64::new(0);

/// The delayq server with its beanstalkd port, and its engine.
pub(crate) struct DelayqBeanstalk {
    kind: Kind,
    serve: DelayqServe,
    port: u16,
}

impl DelayqBeanstalk {
    /// The server on a fresh redis-server (the same binary and options as every Redis-based
    /// system).
    pub(crate) async fn redis(env: &Env, kind: Kind) -> anyhow::Result<Self> {
        Self::start(env, kind, Store::Redis).await
    }

    /// The server on the embedded engine in a fresh data directory.
    pub(crate) async fn embedded(env: &Env, kind: Kind) -> anyhow::Result<Self> {
        Self::start(env, kind, Store::Embedded).await
    }

    async fn start(env: &Env, kind: Kind, store: Store) -> anyhow::Result<Self> {
        let (http, port) = (procs::free_port()?, procs::free_port()?);
        let args = vec![
            "--listen".to_string(),
            format!("127.0.0.1:{http}"),
            "--beanstalk".into(),
            format!("127.0.0.1:{port}"),
            "--beanstalk-max-job-size".into(),
            MAX_JOB_SIZE.to_string(),
        ];
        let serve = DelayqServe::start(env, store, &format!("{}-server.log", kind.key()), args)?;
        procs::wait_for_port(port, Duration::from_secs(20), "delayq serve --beanstalk").await?;
        // The port listens before the engine is open: a first answer says it serves.
        let mut probe = BeanstalkClient::connect(port).await?;
        tokio::time::timeout(Duration::from_secs(30), probe.commands())
            .await
            .with_context(|| {
                format!(
                    "delayq serve did not answer on its beanstalkd port within 30 s (log: {})",
                    serve.log.display()
                )
            })??;
        Ok(DelayqBeanstalk { kind, serve, port })
    }

    /// The pipelined client, on this server's beanstalkd port.
    fn client(&self) -> Pipelined {
        Pipelined::new(self.port, &STALLS)
    }
}

#[async_trait]
impl System for DelayqBeanstalk {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn pids(&self) -> Pids {
        self.serve.pids()
    }

    fn redis(&self) -> Option<&RedisServer> {
        self.serve.redis.as_ref()
    }

    async fn fill(&mut self, n: usize, delays: Delays, size: usize) -> anyhow::Result<()> {
        self.client().fill(n, delays, size).await?;
        self.serve.server.check_alive()
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        self.client().drain(n, consumers, cap).await
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        self.client().delayed(spec).await
    }

    fn endpoint(&self) -> String {
        self.port.to_string()
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        match &self.serve.redis {
            Some(r) => Ok(Footprint {
                memory: redis_info::used_memory(r).await?,
                disk: None,
            }),
            None => Ok(Footprint {
                memory: procs::rss_bytes(self.serve.server.pid()),
                disk: self.serve.dir.as_ref().map(|d| procs::disk_bytes(d.path())),
            }),
        }
    }
}
