//! The HTTP API end to end: a real server on a free port, a real HTTP client. Most tests run
//! on each engine (Redis, the embedded engine, PostgreSQL and a Redis Cluster: the modules
//! `on_redis`, `on_sqlite`, `on_postgres` and `on_cluster` of each subject); the rest on the
//! one engine they are about. One test binary, by subject:
//!
//! - `jobs`: push (`on_conflict`, expiry), batch, get, list (cursor, id prefix);
//! - `leases`: reserve, touch, nack, bury, kick, release, ack, batch ack, a reserve's
//!   `settle`, receipts, what a delivery says; and, on what a lease session leaves, topic
//!   stats, list, delete and purge, and the routes in the OpenAPI document;
//! - `long_poll`: a long-poll answering when a job is due, cut to the server's limit, ended
//!   by a graceful shutdown;
//! - `topics`: the list of topics, pause and resume, unknown topics, settings, retention;
//! - `schedules`: `/v1/schedules`;
//! - `actions`: the dashboard's archive and bulk actions, and its read-only mode;
//! - `errors`: every error code, decode errors naming the field, batch errors naming the
//!   item;
//! - `auth`: bearer tokens on and off, the scheme's case, `metrics_public`;
//! - `metrics`: `/metrics` and `/v1/series`;
//! - `limits`: `--concurrency`, long-polls apart, and how long an idle connection stays;
//! - `engine_faults`: Redis down, too few replicas, a full store;
//! - `destinations`: a topic's push destination through the API.
//!
//! The server and its client are `tests/common` (shared with the other test binaries); the
//! engines, and the macro that runs a scenario on each, are here.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

#[path = "../common/mod.rs"]
mod common;

/// Runs scenarios as tests on each engine. Each `name(limits)` names an
/// `async fn name(setup: Setup)` of the calling module, which becomes the test
/// `on_<engine>::name` there, on an engine with those limits: Redis (`on_redis`), the
/// embedded engine (`on_sqlite`), PostgreSQL (`on_postgres`) and a Redis Cluster
/// (`on_cluster`).
macro_rules! engine_tests {
    ($($test:ident($limits:expr)),+ $(,)?) => {
        engine_tests!(@on on_redis, redis, $($test($limits)),+);
        engine_tests!(@on on_sqlite, sqlite, $($test($limits)),+);
        engine_tests!(@on on_postgres, postgres, $($test($limits)),+);
        engine_tests!(@on on_cluster, cluster, $($test($limits)),+);
    };
    (@on $module:ident, $setup:ident, $($test:ident($limits:expr)),+) => {
        mod $module {
            use super::*;

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::$setup($limits).await).await;
                }
            )+
        }
    };
}

mod actions;
mod auth;
mod destinations;
mod engine_faults;
mod errors;
mod jobs;
mod leases;
mod limits;
mod long_poll;
mod metrics;
mod schedules;
mod topics;

use std::sync::Arc;

use common::TestServer;
use delayq_core::{Limits, Store};
use serde_json::{Value, json};

/// Everything one engine needs to stay alive for a test.
pub(crate) struct Setup {
    pub(crate) engine: Arc<dyn Store>,
    pub(crate) _guard: Box<dyn std::any::Any + Send>,
}

pub(crate) async fn redis(limits: Limits) -> Setup {
    let server = delayq_testkit::RedisServer::start();
    let config = delayq_redis::RedisConfig::new(server.url()).with_limits(limits);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(server),
    }
}

/// The Redis engine on a Redis Cluster (3 primaries, 3 replicas): the tests running at the
/// same time share one (`RedisCluster::shared`), each under a key prefix of its own, which
/// also keeps their topic registries and schedules apart. The topics the tests name
/// ("orders", "mail", "t", ...) hash to slots of every primary.
pub(crate) async fn cluster(limits: Limits) -> Setup {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cluster = tokio::task::spawn_blocking(delayq_testkit::RedisCluster::shared)
        .await
        .unwrap();
    let config = delayq_redis::RedisConfig::new(cluster.url())
        .with_prefix(format!("api-{n}"))
        .with_limits(limits);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(cluster),
    }
}

pub(crate) async fn sqlite(limits: Limits) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let config = delayq_sqlite::SqliteConfig::dir(dir.path().join("data")).with_limits(limits);
    let engine = delayq_sqlite::SqliteEngine::open(config).unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(dir),
    }
}

/// The PostgreSQL engine on a PostgreSQL of the test's own.
pub(crate) async fn postgres(limits: Limits) -> Setup {
    let server = tokio::task::spawn_blocking(delayq_testkit::PostgresServer::start)
        .await
        .unwrap();
    let config = delayq_postgres::PostgresConfig::new(server.url()).with_limits(limits);
    let engine = delayq_postgres::PostgresEngine::connect(config)
        .await
        .unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(server),
    }
}

pub(crate) fn small_limits() -> Limits {
    Limits { max_body: 2048 }
}

/// Pushes `ids` to `topic`, ready now, 1000 per request.
pub(crate) async fn push_ids(s: &TestServer, topic: &str, ids: &[String]) {
    for chunk in ids.chunks(1000) {
        let jobs: Vec<Value> = chunk
            .iter()
            .map(|id| json!({"id": id, "body": "x"}))
            .collect();
        let (st, v) = s
            .post(
                &format!("/v1/topics/{topic}/batch"),
                json!({ "jobs": jobs }),
            )
            .await;
        assert_eq!(st, 200, "{v}");
    }
}
