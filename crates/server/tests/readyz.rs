//! `/readyz` end to end on a Redis Cluster: a real server on a free port over a cluster of
//! the test's own, which goes down and comes back. (One Redis that goes away is
//! `api/engine_faults.rs`'s `readyz_answers_at_once_while_redis_is_down_issue_12`.)

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, code};
use delayq_server::ServerConfig;
use delayq_testkit::{ClusterNode, RedisCluster, key_slot};
use serde_json::{Value, json};

/// How long the cluster may take to mark a dead primary failed (its `cluster-node-timeout`
/// is 2 s, then a gossip round) or to settle back: far above what it takes, so only a
/// cluster that never gets there fails the test.
const CONVERGE: Duration = Duration::from_secs(30);

/// The longest one `/readyz` may take: the server waits 80 ms for the engine; the rest is
/// slack for a busy machine.
const PROBE: Duration = Duration::from_millis(600);

/// `/readyz` answers 503, saying why, while the Redis Cluster under the server reports
/// itself down (a primary without a replica killed: its slots have no primary, so the
/// cluster refuses every call and every push answers 503), and 200 again once the primary is
/// back. Before, it answered 200 throughout: it read the clock, which any live node answers.
/// With `cluster-require-full-coverage no` the cluster stays up without that primary and
/// serves the topics of the others; `/readyz` then stays 200, and only pushes to the dead
/// primary's topics answer 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_503_while_the_redis_cluster_is_down_issue_36() {
    // See: issue 36 (bug 7)
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(0))
        .await
        .unwrap();
    let mut config = delayq_redis::RedisConfig::new(cluster.url());
    // A call on a cluster that is down is retried until this passes, then answers 503.
    config.response_timeout = Duration::from_secs(1);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    let primaries = cluster.primaries();
    let (victim, survivor) = (primaries[1].clone(), primaries[0].port);
    let lost = topic_on(&victim, "lost");
    let kept = topic_on(&primaries[0], "kept");
    assert_eq!(probe(&s).await, (200, Value::String("ready\n".into())));
    assert_eq!(push(&s, &kept).await.0, 201);

    // The primary dies; once the cluster says it is down, so does /readyz, and stays so.
    cluster.kill_node(victim.port);
    wait_for_cluster(&cluster, survivor, "down", |i| state(i) == "fail").await;
    let start = Instant::now();
    let mut last = probe(&s).await;
    while last.0 != 503 {
        assert!(
            start.elapsed() < CONVERGE,
            "/readyz still answers {last:?} while the cluster is down"
        );
        last = probe(&s).await;
    }
    for _ in 0..5 {
        let (st, v) = probe(&s).await;
        assert_eq!((st, code(&v)), (503, "unavailable"), "{v}");
        let why = v["error"]["message"].as_str().unwrap();
        assert!(
            why.contains("cluster_state:fail")
                && why.contains(&format!(
                    "{} of its 16384 hash slots are on a failed primary",
                    victim.slot_count()
                ))
                && why.ends_with("retry later"),
            "{why}"
        );
        assert!(!why.contains("127.0.0.1"), "an address leaked: {why}");
    }
    let (st, v) = push(&s, &kept).await;
    assert_eq!(
        (st, code(&v)),
        (503, "unavailable"),
        "a push on a live primary: {v}"
    );

    // The primary comes back: ready again.
    cluster.restart(victim.port).await;
    wait_ready(&s).await;
    assert_eq!(push(&s, &kept).await.0, 201);

    // Without full coverage required, the same loss leaves the cluster up: ready, and the
    // topics of the live primaries are served.
    for n in cluster.nodes() {
        let mut admin = cluster.server(n.port).connection().await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-require-full-coverage")
            .arg("no")
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    cluster.kill_node(victim.port);
    wait_for_cluster(
        &cluster,
        survivor,
        "up with slots on a failed primary",
        |i| state(i) == "ok" && field(i, "cluster_slots_fail").is_some_and(|n| n != "0"),
    )
    .await;
    let (st, v) = push(&s, &lost).await;
    assert_eq!(
        (st, code(&v)),
        (503, "unavailable"),
        "a push on the dead primary: {v}"
    );
    for _ in 0..5 {
        assert_eq!(probe(&s).await, (200, Value::String("ready\n".into())));
    }
    assert_eq!(push(&s, &kept).await.0, 201);
}

/// A topic whose slot `primary` serves, named `name` and a number.
fn topic_on(primary: &ClusterNode, name: &str) -> String {
    (0..)
        .map(|k| format!("{name}-{k}"))
        .find(|t| primary.serves(key_slot(format!("{{{t}}}"))))
        .unwrap()
}

/// `/readyz` once, answered within [`PROBE`]: its status and body (JSON, else the text).
async fn probe(s: &TestServer) -> (u16, Value) {
    let start = Instant::now();
    let (st, text) = s.text("/readyz").await;
    let took = start.elapsed();
    assert!(took < PROBE, "/readyz took {took:?} ({st} {text})");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (st, body)
}

/// Pushes one job to `topic`.
async fn push(s: &TestServer, topic: &str) -> (u16, Value) {
    s.post(&format!("/v1/topics/{topic}/jobs"), json!({"body": "x"}))
        .await
}

/// Waits (at most [`CONVERGE`]) until `/readyz` answers 200.
async fn wait_ready(s: &TestServer) {
    let start = Instant::now();
    loop {
        let (st, v) = probe(s).await;
        if st == 200 {
            return;
        }
        assert!(start.elapsed() < CONVERGE, "not ready again: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most [`CONVERGE`]) until the node on `port` answers a `CLUSTER INFO` that
/// `done` accepts.
async fn wait_for_cluster(
    cluster: &RedisCluster,
    port: u16,
    what: &str,
    done: impl Fn(&str) -> bool,
) {
    let mut conn = cluster.server(port).connection().await;
    let start = Instant::now();
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut conn)
            .await
            .unwrap();
        if done(&info) {
            return;
        }
        assert!(
            start.elapsed() < CONVERGE,
            "the cluster is not {what} after {CONVERGE:?}:\n{info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A field of a `CLUSTER INFO` answer.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
}

/// The `cluster_state` of a `CLUSTER INFO` answer.
fn state(info: &str) -> &str {
    field(info, "cluster_state").unwrap_or("")
}
