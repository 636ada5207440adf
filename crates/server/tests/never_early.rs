//! "Never early" where a user of the HTTP API meets it: the `ready_at_ms` a push answers,
//! against the caller's own clock read just before it sent the push, at microsecond
//! resolution, on each engine. An outside client found 12 of 200 pushes due before the
//! caller's clock plus the delay (the engines truncated their now to the millisecond).
//!
//! See: issue 36.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::TestServer;
use delayq_core::Store;
use delayq_server::ServerConfig;
use serde_json::json;

fn caller_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// 200 pushes with a 250 ms delay: each answered due no earlier than the caller's clock
/// before sending plus 250 ms, and no later than its clock when the answer came, rounded up
/// to the millisecond, plus 250 ms (the rounding adds no more than it must); then each is
/// handed out no earlier than its push plus 250 ms either.
async fn never_early(engine: Arc<dyn Store>) {
    let s = TestServer::start(engine, ServerConfig::default()).await;
    let mut asked = Vec::new();
    let mut early = Vec::new();
    let mut late = Vec::new();
    for i in 0..200 {
        let at = caller_us();
        let (st, v) = s
            .post(
                "/v1/topics/never-early/jobs",
                json!({"id": format!("j{i}"), "body": "x", "delay_ms": 250}),
            )
            .await;
        let answered = caller_us();
        assert!(st == 200 || st == 201, "{st} {v}");
        let due_us = v["ready_at_ms"].as_u64().unwrap() * 1000;
        if due_us < at + 250_000 {
            early.push(format!("j{i}: {} µs early", at + 250_000 - due_us));
        }
        let latest_us = answered.div_ceil(1000) * 1000 + 250_000;
        if due_us > latest_us {
            late.push(format!("j{i}: {} µs late", due_us - latest_us));
        }
        asked.push(at);
    }
    assert!(early.is_empty(), "pushes due early: {early:?}");
    assert!(
        late.is_empty(),
        "pushes due later than rounding up explains: {late:?}"
    );
    let start = Instant::now();
    let mut got = 0;
    while got < 200 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "only {got} of 200"
        );
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": ["never-early"], "max": 100, "wait_ms": 2000}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        let now = caller_us();
        let mut settle = Vec::new();
        for d in v["jobs"].as_array().unwrap() {
            let id = d["job"]["id"].as_str().unwrap();
            let i: usize = id[1..].parse().unwrap();
            assert!(
                now >= asked[i] + 250_000,
                "{id} handed out {} µs early on the caller's clock",
                asked[i] + 250_000 - now
            );
            settle.push(json!({"topic": "never-early", "id": id, "token": d["token"]}));
            got += 1;
        }
        if !settle.is_empty() {
            let (st, v) = s
                .post(
                    "/v1/reserve",
                    json!({"topics": ["never-early"], "max": 0, "settle": settle}),
                )
                .await;
            assert_eq!(st, 200, "{v}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_over_http_is_never_due_before_the_callers_clock_plus_its_delay_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::dir(dir.path())).unwrap();
    never_early(Arc::new(engine)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_over_http_is_never_due_before_the_callers_clock_plus_its_delay_redis() {
    let server = delayq_testkit::RedisServer::start();
    let engine = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(server.url()))
        .await
        .unwrap();
    never_early(Arc::new(engine)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_over_http_is_never_due_before_the_callers_clock_plus_its_delay_postgres() {
    let server = tokio::task::spawn_blocking(delayq_testkit::PostgresServer::start)
        .await
        .unwrap();
    let engine = delayq_postgres::PostgresEngine::connect(delayq_postgres::PostgresConfig::new(
        server.url(),
    ))
    .await
    .unwrap();
    never_early(Arc::new(engine)).await;
}
