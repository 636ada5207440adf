//! delayq used as a library: the Redis, the embedded or the PostgreSQL engine, with the
//! worker runtime in this process (what a Rust service runs), through the shared driver.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use delayq::{Store, Topic};
use delayq_bench::driver::{self, DelayedSpec, Delays, DrainReport};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::{PostgresServer, RedisServer};
use indicatif::ProgressBar;
use tempfile::TempDir;

use super::{DelayedRun, Env, Footprint, Kind, Pids, System};
use crate::suite::procs::{self, Proc};
use crate::suite::{pg_info, redis_info};

/// The schema the PostgreSQL engine keeps its tables and functions in.
const POSTGRES_SCHEMA: &str = "delayq";

/// delayq as a library, on one engine.
pub(crate) struct DelayqLib {
    kind: Kind,
    engine: Option<Arc<dyn Store>>,
    topic: Topic,
    redis: Option<RedisServer>,
    dir: Option<TempDir>,
    /// The PostgreSQL server, and its postmaster's process tree (the store's CPU).
    postgres: Option<(PostgresServer, Proc)>,
}

impl DelayqLib {
    /// On a fresh redis-server.
    pub(crate) async fn redis() -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let engine = delayq::open(&redis.url()).await?;
        Ok(DelayqLib {
            kind: Kind::DelayqRedis,
            engine: Some(engine),
            topic: Topic::new("bench")?,
            redis: Some(redis),
            dir: None,
            postgres: None,
        })
    }

    /// On a fresh PostgreSQL server, with the engine's default settings. Its pool of 16
    /// connections is enough for every workload: the worker runtime multiplexes its C
    /// handler slots over one fetch loop (at most a few calls on their way at once, not
    /// one per slot), a fill has four pushes in flight, and waiting reservers wait on the
    /// engine's one `LISTEN` connection, not on a pooled connection each.
    pub(crate) async fn postgres() -> anyhow::Result<Self> {
        let server = super::postgres_server().await?;
        let tree = pg_info::server_tree(&server).await?;
        let engine: Arc<dyn Store> =
            Arc::new(PostgresEngine::connect(PostgresConfig::new(server.url())).await?);
        Ok(DelayqLib {
            kind: Kind::DelayqPostgres,
            engine: Some(engine),
            topic: Topic::new("bench")?,
            redis: None,
            dir: None,
            postgres: Some((server, tree)),
        })
    }

    /// On a fresh data directory.
    pub(crate) fn embedded(env: &Env) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("delayq-bench-")
            .tempdir_in(&env.work)?;
        let engine: Arc<dyn Store> = Arc::new(delayq_sqlite::SqliteEngine::open(
            delayq_sqlite::SqliteConfig::dir(dir.path()),
        )?);
        Ok(DelayqLib {
            kind: Kind::DelayqEmbedded,
            engine: Some(engine),
            topic: Topic::new("bench")?,
            redis: None,
            dir: Some(dir),
            postgres: None,
        })
    }

    fn engine(&self) -> anyhow::Result<&Arc<dyn Store>> {
        self.engine
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the engine was closed to measure its files"))
    }
}

#[async_trait]
impl System for DelayqLib {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn pids(&self) -> Pids {
        let redis = self
            .redis
            .as_ref()
            .and_then(RedisServer::pid)
            .map(Proc::One);
        Pids {
            store: redis.or(self.postgres.as_ref().map(|(_, tree)| *tree)),
            queue: procs::own_pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        self.redis.as_ref()
    }

    fn postgres(&self) -> Option<&PostgresServer> {
        self.postgres.as_ref().map(|(server, _)| server)
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
        match (&self.redis, &self.dir, &self.postgres) {
            (Some(r), _, _) => r.url(),
            (None, Some(d), _) => format!("sqlite://{}", d.path().display()),
            (None, None, Some((p, _))) => p.url(),
            (None, None, None) => String::new(),
        }
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        if let Some(redis) = &self.redis {
            return Ok(Footprint {
                memory: redis_info::used_memory(redis).await?,
                disk: None,
            });
        }
        if let Some((server, _)) = &self.postgres {
            // The engine stays open: PostgreSQL's files grow as rows go in, not at a close.
            return Ok(Footprint {
                memory: 0,
                disk: Some(pg_info::schema_bytes(server, POSTGRES_SCHEMA).await?),
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
