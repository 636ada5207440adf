//! The first looks of concurrent single-job reserves share engine calls
//! (`delayq_core::Coalescers`), and nothing is lost or handed out twice on the way: many HTTP
//! clients reserving one job and acking it apart get every job once, with fewer Redis
//! function calls than jobs (each reserve was one call before), and a requester that goes
//! away while its call is on its way (its own, or one shared with others) leaves no job
//! stranded until its ttr.
//!
//! See: issue 35 (the HTTP single-job consumer).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use delayq_core::{Coalescers, DeliveryMode, Engine, NewJob, Store, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_server::ServerConfig;
use delayq_testkit::RedisServer;
use serde_json::json;

const JOBS: usize = 400;
const CLIENTS: usize = 20;

/// Redis's count of `FCALL`s so far (`INFO commandstats`).
async fn fcalls(redis: &RedisServer) -> u64 {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut c)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn engine(redis: &RedisServer) -> Arc<dyn Store> {
    Arc::new(
        RedisEngine::connect(RedisConfig::new(redis.url()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", redis.log())),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_reserves_of_many_clients_share_calls_and_each_job_goes_once() {
    let redis = RedisServer::start();
    let s = TestServer::start(engine(&redis).await, ServerConfig::default()).await;
    let jobs: Vec<_> = (0..JOBS)
        .map(|i| json!({"id": format!("j{i}"), "body": "x"}))
        .collect();
    let (st, v) = s
        .post("/v1/topics/orders/batch", json!({"jobs": jobs}))
        .await;
    assert_eq!(st, 200, "{v}");

    let before = fcalls(&redis).await;
    let s = Arc::new(s);
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let s = s.clone();
        clients.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let (st, v) = s
                    .post("/v1/reserve", json!({"topics": ["orders"], "max": 1}))
                    .await;
                assert_eq!(st, 200, "{v}");
                let Some(d) = v["jobs"].as_array().unwrap().first().cloned() else {
                    return got;
                };
                let id = d["job"]["id"].as_str().unwrap().to_string();
                let (st, v) = s
                    .post(
                        &format!("/v1/topics/orders/jobs/{id}/ack"),
                        json!({"token": d["token"]}),
                    )
                    .await;
                assert_eq!(st, 204, "{v}");
                got.push(id);
            }
        }));
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for c in clients {
        for id in c.await.unwrap() {
            *seen.entry(id).or_default() += 1;
        }
    }
    let calls = fcalls(&redis).await - before;
    assert_eq!(seen.len(), JOBS, "jobs delivered");
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let (st, v) = s.get("/v1/topics/orders/stats").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["ready"].as_u64(), v["reserved"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    // One call per reserve would be JOBS + CLIENTS calls before any ack.
    assert!(
        calls < JOBS as u64,
        "{calls} function calls for {JOBS} single reserves and their acks: the reserves were not served together"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requesters_gone_while_their_calls_are_on_their_way_strand_no_job() {
    let redis = RedisServer::start();
    let engine = engine(&redis).await;
    let topic = Topic::new("orders").unwrap();
    for _ in 0..2 {
        engine
            .push(NewJob::new(topic.clone(), "x").with_ttr(Duration::from_secs(600)))
            .await
            .unwrap();
    }
    let coalescers = Arc::new(Coalescers::new(engine.clone()));
    let pid = redis.pid().unwrap().to_string();
    let signal = |sig: &str| {
        let st = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(st.success(), "kill {sig} {pid}");
    };
    let before = fcalls(&redis).await;
    // Redis stops answering. The first request makes its own call, the second queues behind
    // it, to be served by the key's task once the first is back; both give up meanwhile.
    signal("-STOP");
    let ask = |c: Arc<Coalescers>, topic: Topic| async move {
        tokio::time::timeout(
            Duration::from_millis(300),
            c.serve(
                std::slice::from_ref(&topic),
                DeliveryMode::AtLeastOnce,
                1,
                None,
            ),
        )
        .await
    };
    let first = tokio::spawn(ask(coalescers.clone(), topic.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = tokio::spawn(ask(coalescers.clone(), topic.clone()));
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    signal("-CONT");
    assert!(
        first.is_err() && second.is_err(),
        "a reserve answered while Redis was stopped"
    );
    // The first call then leases a job for nobody (its engine call runs detached and gives
    // it back), the queued one's shared call another (the coalescer gives it back): both
    // must come back at once, not after their 10-minute ttr.
    let start = Instant::now();
    let mut got = 0;
    while got < 2 {
        let served = coalescers
            .serve(
                std::slice::from_ref(&topic),
                DeliveryMode::AtLeastOnce,
                1,
                None,
            )
            .await
            .unwrap();
        got += served.jobs.len();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a job stayed leased for a requester that went away: {:?}",
            engine.stats(&topic).await
        );
        if served.jobs.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Two reserves for requesters gone, a release each, and the reserves since.
    assert!(fcalls(&redis).await - before >= 6);
}
