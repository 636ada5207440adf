//! The delayq server's beanstalkd port: `delayq serve --beanstalk 127.0.0.1:PORT` (the
//! product's own binary, [`procs::delayq_bin`]) on a fresh redis-server or a fresh data
//! directory, driven by the same pipelined client as beanstalkd ([`Pipelined`]): batches of
//! `put`s in one write, `delete` and the next `reserve-with-timeout` in one write. W1, W2 and
//! W7 only: the server and store are those of the HTTP systems.
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
use tempfile::TempDir;

use super::beanstalk::{BeanstalkClient, Pipelined};
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
    server: procs::Owned,
    port: u16,
    redis: Option<RedisServer>,
    dir: Option<TempDir>,
}

impl DelayqBeanstalk {
    /// The server on a fresh redis-server (the same binary and options as every Redis-based
    /// system).
    pub(crate) async fn redis(env: &Env, kind: Kind) -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let engine = vec!["--redis".to_string(), redis.url()];
        let mut s = Self::start(env, kind, engine).await?;
        s.redis = Some(redis);
        Ok(s)
    }

    /// The server on the embedded engine in a fresh data directory.
    pub(crate) async fn embedded(env: &Env, kind: Kind) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("delayq-bench-beanstalk-")
            .tempdir_in(&env.work)?;
        let engine = vec!["--data-dir".to_string(), dir.path().display().to_string()];
        let mut s = Self::start(env, kind, engine).await?;
        s.dir = Some(dir);
        Ok(s)
    }

    async fn start(env: &Env, kind: Kind, engine: Vec<String>) -> anyhow::Result<Self> {
        let (http, port) = (procs::free_port()?, procs::free_port()?);
        let log = env.work.join(format!("{}-server.log", kind.key()));
        let mut args = vec![
            "serve".to_string(),
            "--listen".into(),
            format!("127.0.0.1:{http}"),
            "--beanstalk".into(),
            format!("127.0.0.1:{port}"),
            "--beanstalk-max-job-size".into(),
            MAX_JOB_SIZE.to_string(),
        ];
        args.extend(engine);
        // Every setting is on the command line: none comes from a DELAYQ_* variable of the
        // suite's environment (a DELAYQ_REDIS_URL would take the embedded one to Redis).
        let server = procs::Owned::spawn_with(
            "delayq serve",
            &env.delayq,
            &args,
            None,
            Some(&log),
            |cmd| {
                for (k, _) in std::env::vars_os() {
                    if k.to_string_lossy().starts_with("DELAYQ_") {
                        cmd.env_remove(k);
                    }
                }
            },
        )?;
        procs::wait_for_port(port, Duration::from_secs(20), "delayq serve --beanstalk").await?;
        // The port listens before the engine is open: a first answer says it serves.
        let mut probe = BeanstalkClient::connect(port).await?;
        tokio::time::timeout(Duration::from_secs(30), probe.commands())
            .await
            .with_context(|| {
                format!(
                    "delayq serve did not answer on its beanstalkd port within 30 s (log: {})",
                    log.display()
                )
            })??;
        Ok(DelayqBeanstalk {
            kind,
            server,
            port,
            redis: None,
            dir: None,
        })
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
        Pids {
            store: self.redis.as_ref().and_then(RedisServer::pid),
            queue: self.server.pid(),
            client: Some(procs::own_pid()),
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        self.redis.as_ref()
    }

    async fn fill(&mut self, n: usize, delays: Delays, size: usize) -> anyhow::Result<()> {
        self.client().fill(n, delays, size).await?;
        self.server.check_alive()
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
        match &self.redis {
            Some(r) => Ok(Footprint {
                memory: redis_info::used_memory(r).await?,
                disk: None,
            }),
            None => Ok(Footprint {
                memory: procs::rss_bytes(self.server.pid()),
                disk: self.dir.as_ref().map(|d| procs::disk_bytes(d.path())),
            }),
        }
    }
}
