//! delayq used as a library: the Redis or the embedded engine, with the worker runtime in
//! this process (what a Rust service runs), through the shared driver.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use delayq::{Engine, Topic};
use delayq_bench::driver::{self, DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;
use indicatif::ProgressBar;
use tempfile::TempDir;

use super::{DelayedRun, Env, Footprint, Kind, Pids, System};
use crate::suite::{procs, redis_info};

/// delayq as a library, on one engine.
pub(crate) struct DelayqLib {
    engine: Option<Arc<dyn Engine>>,
    topic: Topic,
    redis: Option<RedisServer>,
    dir: Option<TempDir>,
}

impl DelayqLib {
    /// On a fresh redis-server.
    pub(crate) async fn redis() -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let engine = delayq::open(&redis.url()).await?;
        Ok(DelayqLib {
            engine: Some(engine),
            topic: Topic::new("bench")?,
            redis: Some(redis),
            dir: None,
        })
    }

    /// On a fresh data directory.
    pub(crate) fn embedded(env: &Env) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("delayq-bench-")
            .tempdir_in(&env.work)?;
        let engine: Arc<dyn Engine> = Arc::new(delayq_sqlite::SqliteEngine::open(
            delayq_sqlite::SqliteConfig::dir(dir.path()),
        )?);
        Ok(DelayqLib {
            engine: Some(engine),
            topic: Topic::new("bench")?,
            redis: None,
            dir: Some(dir),
        })
    }

    fn engine(&self) -> anyhow::Result<&Arc<dyn Engine>> {
        self.engine
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the engine was closed to measure its files"))
    }
}

#[async_trait]
impl System for DelayqLib {
    fn kind(&self) -> Kind {
        if self.redis.is_some() {
            Kind::DelayqRedis
        } else {
            Kind::DelayqEmbedded
        }
    }

    fn pids(&self) -> Pids {
        Pids {
            store: self.redis.as_ref().and_then(RedisServer::pid),
            queue: procs::own_pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        self.redis.as_ref()
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        driver::fill(
            self.engine()?,
            &self.topic,
            n,
            delays,
            body,
            &ProgressBar::hidden(),
        )
        .await?;
        Ok(())
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        driver::drain(
            self.engine()?,
            &self.topic,
            n,
            consumers,
            cap,
            &ProgressBar::hidden(),
        )
        .await
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        let r = driver::delayed(self.engine()?, &self.topic, spec, &ProgressBar::hidden()).await?;
        Ok(DelayedRun {
            pushed: r.pushed,
            push_elapsed: r.push_elapsed,
            delivered: r.delivered,
            elapsed: r.elapsed,
            host: r.host,
            own: Some(r.engine),
        })
    }

    fn endpoint(&self) -> String {
        match (&self.redis, &self.dir) {
            (Some(r), _) => r.url(),
            (None, Some(d)) => format!("sqlite://{}", d.path().display()),
            (None, None) => String::new(),
        }
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        if let Some(redis) = &self.redis {
            return Ok(Footprint {
                memory: redis_info::used_memory(redis).await?,
                disk: None,
            });
        }
        // Close the engine first, so that its log is checkpointed into the database file,
        // as a restarted server would find it.
        if let Some(engine) = self.engine.take() {
            tokio::task::spawn_blocking(move || drop(engine)).await?;
        }
        let dir = self.dir.as_ref().map(|d| procs::disk_bytes(d.path()));
        Ok(Footprint {
            memory: 0,
            disk: dir,
        })
    }
}
