//! The two answers a real beanstalkd cannot be made to give on purpose, so the differential
//! tests cannot compare them (issue 19): `OUT_OF_MEMORY` when the engine's store is full,
//! `INTERNAL_ERROR` when the engine fails. Each changes nothing, leaves the connection
//! usable, and the same connection works again once the engine does.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::Store;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_sqlite::{SqliteConfig, SqliteEngine};
use delayq_testkit::{Persistence, RedisOptions, RedisServer};

mod common;

use common::{BOUND, Client, put};

/// `current-jobs-ready` of `tube`, read from `stats-tube`.
async fn ready(c: &mut Client, tube: &str) -> u64 {
    let (l, body) = c.call(&format!("stats-tube {tube}\r\n")).await;
    assert!(l.starts_with("OK "), "stats-tube answered {l:?}");
    let yaml = String::from_utf8(body).expect("utf-8");
    yaml.lines()
        .find_map(|l| l.strip_prefix("current-jobs-ready: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no current-jobs-ready in {yaml}"))
}

/// A store at its size cap answers `OUT_OF_MEMORY` to a put and stores nothing; reads,
/// reserves of what is there and deletes still work, and the space they free takes puts
/// again, on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_answers_out_of_memory_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine: Arc<dyn Store> = Arc::new(
        SqliteEngine::open(SqliteConfig::dir(dir.path()).with_max_db_bytes(512 * 1024))
            .expect("engine"),
    );
    let addr = common::serve(engine).await;
    let mut c = Client::connect(addr).await;
    assert_eq!(c.line("use full\r\n").await, "USING full");

    let body = "x".repeat(4000);
    let mut ids = Vec::new();
    let refused = loop {
        let l = c.line(&put(&body)).await;
        match l.strip_prefix("INSERTED ") {
            Some(n) => ids.push(n.parse::<u64>().expect("id")),
            None => break l,
        }
        assert!(
            ids.len() < 1000,
            "a 512 KiB store took {} puts of 4 kB",
            ids.len()
        );
    };
    assert_eq!(refused, "OUT_OF_MEMORY");
    assert!(!ids.is_empty(), "the first put was refused already");

    // The refused put stored nothing, and the connection answers on.
    assert_eq!(ready(&mut c, "full").await, ids.len() as u64);
    assert_eq!(c.line("list-tube-used\r\n").await, "USING full");
    let (l, got) = c.call(&format!("peek {}\r\n", ids[0])).await;
    assert_eq!(l, format!("FOUND {} 4000", ids[0]));
    assert_eq!(got, body.as_bytes());

    // Deletes free space the next puts take.
    for id in &ids {
        assert_eq!(c.line(&format!("delete {id}\r\n")).await, "DELETED");
    }
    let l = c.line(&put("after")).await;
    assert!(l.starts_with("INSERTED "), "a put after the deletes: {l:?}");
    assert_eq!(ready(&mut c, "full").await, 1);
}

/// An engine that fails (Redis killed) answers `INTERNAL_ERROR` to every command that needs
/// it while the connection stays open and commands that need no engine answer; once Redis
/// is back, the same connection puts and reserves again, and nothing the failed puts sent
/// was stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_engine_answers_internal_error_and_recovers() {
    let mut redis = RedisServer::start_with(RedisOptions {
        persistence: Persistence::AofAlways,
        ..RedisOptions::default()
    });
    let engine: Arc<dyn Store> = Arc::new(
        RedisEngine::connect(RedisConfig::new(redis.url()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", redis.log())),
    );
    let addr = common::serve(engine).await;
    let mut c = Client::connect(addr).await;
    assert_eq!(c.line("use down\r\n").await, "USING down");
    let first = c.line(&put("before")).await;
    assert!(first.starts_with("INSERTED "), "{first:?}");

    redis.kill();
    assert_eq!(c.line(&put("lost")).await, "INTERNAL_ERROR");
    assert_eq!(c.line("stats-tube down\r\n").await, "INTERNAL_ERROR");
    assert_eq!(c.line("list-tube-used\r\n").await, "USING down");
    assert_eq!(c.line("watch down\r\n").await, "WATCHING 2");

    redis.restart();
    let deadline = tokio::time::Instant::now() + BOUND;
    let again = loop {
        let l = c.line(&put("after")).await;
        if l != "INTERNAL_ERROR" || tokio::time::Instant::now() > deadline {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        again.starts_with("INSERTED "),
        "a put after Redis came back: {again:?}\nlog:\n{}",
        redis.log()
    );
    assert_eq!(c.line("ignore default\r\n").await, "WATCHING 1");
    let mut bodies = Vec::new();
    loop {
        let (l, body) = c.call("reserve-with-timeout 0\r\n").await;
        if l == "TIMED_OUT" {
            break;
        }
        let id = l.split(' ').nth(1).expect("id").to_string();
        assert_eq!(c.line(&format!("delete {id}\r\n")).await, "DELETED");
        bodies.push(String::from_utf8(body).expect("utf-8"));
    }
    bodies.sort();
    assert_eq!(
        bodies,
        ["after", "before"],
        "only the answered puts are stored"
    );
}
