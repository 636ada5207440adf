//! `delayq serve`, the product's binary ([`procs::delayq_bin`]), on a fresh redis-server or
//! a fresh data directory: what the beanstalkd-protocol systems and W10 (push delivery)
//! start. Every setting is on the command line.

use std::path::PathBuf;

use delayq_testkit::RedisServer;
use tempfile::TempDir;

use super::{Env, Pids};
use crate::suite::procs;

/// Which engine a `delayq serve` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Store {
    /// A fresh redis-server (the same binary and options as every Redis-based system).
    Redis,
    /// The embedded engine in a fresh data directory.
    Embedded,
}

impl Store {
    /// The name in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Store::Redis => "Redis",
            Store::Embedded => "embedded",
        }
    }
}

/// A running `delayq serve` and its engine; dropping it stops the server, then its
/// redis-server, then removes its data directory.
pub(crate) struct DelayqServe {
    pub server: procs::Owned,
    /// Where its stderr goes.
    pub log: PathBuf,
    pub redis: Option<RedisServer>,
    pub dir: Option<TempDir>,
}

impl DelayqServe {
    /// Starts `delayq serve` with `args` (its listeners) on a fresh engine of `store`, its
    /// stderr in `log` under the work directory. It may not listen yet when this returns.
    pub(crate) fn start(
        env: &Env,
        store: Store,
        log: &str,
        mut args: Vec<String>,
    ) -> anyhow::Result<DelayqServe> {
        let (redis, dir) = match store {
            Store::Redis => {
                let redis = super::redis_server();
                args.extend(["--redis".to_string(), redis.url()]);
                (Some(redis), None)
            }
            Store::Embedded => {
                let dir = tempfile::Builder::new()
                    .prefix("delayq-bench-serve-")
                    .tempdir_in(&env.work)?;
                args.extend(["--data-dir".to_string(), dir.path().display().to_string()]);
                (None, Some(dir))
            }
        };
        args.insert(0, "serve".into());
        let log = env.work.join(log);
        // None comes from a DELAYQ_* variable of the suite's environment (a
        // DELAYQ_REDIS_URL would take the embedded one to Redis).
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
        Ok(DelayqServe {
            server,
            log,
            redis,
            dir,
        })
    }

    /// Its processes: redis-server (the store), the server (the queue) and this process (the
    /// client).
    pub(crate) fn pids(&self) -> Pids {
        Pids {
            store: self
                .redis
                .as_ref()
                .and_then(RedisServer::pid)
                .map(procs::Proc::One),
            queue: self.server.pid(),
            client: Some(procs::own_pid()),
        }
    }
}
