//! "Never early" over the beanstalkd port, as greenstalk's `test_delays` checks it: a job
//! put with a delay of 1 s is not reserved before 1 s has passed on the client's clock since
//! it sent the put. Before the engines rounded their now up, 18 of 80 such jobs came up to
//! 0.4 ms early (real beanstalkd: none). Run on every engine.
//!
//! See: issue 36.

use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq_core::Store;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod common;
use common::{memory_engine, serve};

const JOBS: usize = 40;

async fn line(r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> String {
    let mut l = String::new();
    tokio::time::timeout(Duration::from_secs(10), r.read_line(&mut l))
        .await
        .expect("an answer within 10 s")
        .expect("read");
    l.trim_end().to_string()
}

/// Puts `JOBS` jobs with a delay of 1 s, each with the client's clock just before its put,
/// then reserves them all: none comes before its put's time plus 1 s.
async fn never_early(engine: Arc<dyn Store>) {
    let addr = serve(engine).await;
    let (r, mut w) = TcpStream::connect(addr)
        .await
        .expect("connect")
        .into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"use later\r\nwatch later\r\nignore default\r\n")
        .await
        .expect("use");
    assert_eq!(line(&mut r).await, "USING later");
    assert_eq!(line(&mut r).await, "WATCHING 2");
    assert_eq!(line(&mut r).await, "WATCHING 1");
    let mut put_at = std::collections::HashMap::new();
    for i in 0..JOBS {
        let body = format!("job {i}");
        let at = Instant::now();
        w.write_all(format!("put 0 1 30 {}\r\n{body}\r\n", body.len()).as_bytes())
            .await
            .expect("put");
        let l = line(&mut r).await;
        let id: u64 = l
            .strip_prefix("INSERTED ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("put answered {l:?}"));
        put_at.insert(id, at);
        // Spread the puts over the millisecond, so that some fall late in one.
        tokio::time::sleep(Duration::from_micros(230)).await;
    }
    let mut early = Vec::new();
    for _ in 0..JOBS {
        w.write_all(b"reserve-with-timeout 5\r\n")
            .await
            .expect("reserve");
        let l = line(&mut r).await;
        let now = Instant::now();
        let mut words = l.split(' ');
        assert_eq!(words.next(), Some("RESERVED"), "{l}");
        let id: u64 = words.next().and_then(|n| n.parse().ok()).expect("an id");
        let size: usize = words.next().and_then(|n| n.parse().ok()).expect("a size");
        let mut body = vec![0; size + 2];
        r.read_exact(&mut body).await.expect("body");
        let waited = now - put_at[&id];
        if waited < Duration::from_secs(1) {
            early.push(format!(
                "job {id} reserved {} µs before 1 s",
                (Duration::from_secs(1) - waited).as_micros()
            ));
        }
        w.write_all(format!("delete {id}\r\n").as_bytes())
            .await
            .expect("delete");
        assert_eq!(line(&mut r).await, "DELETED");
    }
    assert!(
        early.is_empty(),
        "{} of {JOBS} early: {early:?}",
        early.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_put_with_a_delay_is_never_reserved_early_embedded() {
    never_early(memory_engine()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_put_with_a_delay_is_never_reserved_early_on_redis() {
    let redis = RedisServer::start();
    never_early(Arc::new(
        RedisEngine::connect(RedisConfig::new(redis.url()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", redis.log())),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_put_with_a_delay_is_never_reserved_early_on_postgres() {
    let server = tokio::task::spawn_blocking(delayq_testkit::PostgresServer::start)
        .await
        .unwrap_or_else(|e| panic!("start PostgreSQL: {e}"));
    let engine = delayq_postgres::PostgresEngine::connect(delayq_postgres::PostgresConfig::new(
        server.url(),
    ))
    .await
    .unwrap_or_else(|e| panic!("connect: {e}"));
    never_early(Arc::new(engine)).await;
}
