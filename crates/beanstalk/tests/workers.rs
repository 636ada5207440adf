//! Many workers on one tube, each in beanstalkd's pipelined cycle (`delete` the job it holds
//! and `reserve-with-timeout` the next in one write), on both engines: the server serves
//! the reserves that arrive together with one engine call (`delayq_core::Coalescers`), and still every
//! job is delivered exactly once and acknowledged, none left behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{Engine, Store};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod common;
use common::{memory_engine, serve};

const JOBS: usize = 3000;
const WORKERS: usize = 30;
const BOUND: Duration = Duration::from_secs(20);

async fn line(r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> String {
    let mut l = String::new();
    tokio::time::timeout(BOUND, r.read_line(&mut l))
        .await
        .expect("an answer within the bound")
        .expect("read");
    l.trim_end().to_string()
}

/// One worker: reserves and deletes until a reserve times out; the ids it deleted.
async fn worker(addr: std::net::SocketAddr) -> Vec<u64> {
    let (r, mut w) = TcpStream::connect(addr)
        .await
        .expect("connect")
        .into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"watch work\r\nignore default\r\nreserve-with-timeout 1\r\n")
        .await
        .expect("write");
    assert_eq!(line(&mut r).await, "WATCHING 2");
    assert_eq!(line(&mut r).await, "WATCHING 1");
    let mut done = Vec::new();
    loop {
        let l = line(&mut r).await;
        if l == "TIMED_OUT" {
            return done;
        }
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts[0], "RESERVED", "{l}");
        let id: u64 = parts[1].parse().expect("id");
        let mut body = vec![0; parts[2].parse::<usize>().expect("length") + 2];
        r.read_exact(&mut body).await.expect("body");
        w.write_all(format!("delete {id}\r\nreserve-with-timeout 1\r\n").as_bytes())
            .await
            .expect("write");
        assert_eq!(line(&mut r).await, "DELETED", "delete {id}");
        done.push(id);
    }
}

async fn every_job_once(engine: Arc<dyn Store>) {
    let addr = serve(engine.clone()).await;
    let (r, mut w) = TcpStream::connect(addr)
        .await
        .expect("connect")
        .into_split();
    let mut r = BufReader::new(r);
    let mut puts = b"use work\r\n".to_vec();
    for i in 0..JOBS {
        let body = format!("job {i}");
        puts.extend_from_slice(format!("put 0 0 30 {}\r\n{body}\r\n", body.len()).as_bytes());
    }
    w.write_all(&puts).await.expect("puts");
    assert_eq!(line(&mut r).await, "USING work");
    let mut put = HashSet::new();
    for _ in 0..JOBS {
        let l = line(&mut r).await;
        let id: u64 = l
            .strip_prefix("INSERTED ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("put answered {l:?}"));
        assert!(put.insert(id), "number {id} given twice");
    }
    let workers: Vec<_> = (0..WORKERS).map(|_| tokio::spawn(worker(addr))).collect();
    let mut deleted = HashSet::new();
    for w in workers {
        for id in w.await.expect("worker") {
            assert!(
                deleted.insert(id),
                "job {id} was delivered and deleted twice"
            );
        }
    }
    assert_eq!(deleted, put, "every job delivered once and deleted");
    let topic = delayq_core::Topic::new("work").expect("topic");
    let stats = engine.stats(&topic).await.expect("stats");
    assert_eq!(
        (stats.ready, stats.reserved, stats.delayed, stats.dead),
        (0, 0, 0, 0),
        "nothing left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pipelined_workers_get_every_job_once_embedded() {
    every_job_once(memory_engine()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pipelined_workers_get_every_job_once_on_redis() {
    let redis = RedisServer::start();
    every_job_once(Arc::new(
        RedisEngine::connect(RedisConfig::new(redis.url()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", redis.log())),
    ))
    .await;
}
