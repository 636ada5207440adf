//! A Redis Cluster primary that stops answering holds up only its own topics: over HTTP,
//! the single acks of a topic on a healthy primary are answered while an ack for the
//! stalled primary's topic is still waiting. The server coalesces the single acks of all its
//! clients; they were once sent in one batch at a time, so the healthy topic's acks waited
//! behind the stalled one (about 6 s each in the fault runs of issue 37).
//!
//! The primary is stopped with SIGSTOP (its connections stay open and nothing answers), then
//! continued, so the test orders events instead of timing them: the healthy acks must be
//! answered before the stalled one is.
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TestServer;
use delayq_server::ServerConfig;
use delayq_testkit::{ClusterNode, RedisCluster, Stopped, key_slot};
use serde_json::{Value, json};

/// A topic named `<name>-<n>` whose keys (under the default prefix) live on `primary`.
fn topic_on(primary: &ClusterNode, name: &str) -> String {
    (0..)
        .map(|n| format!("{name}-{n}"))
        .find(|t| primary.serves(key_slot(format!("delayq:{{{t}}}:wake"))))
        .unwrap()
}

/// Pushes one job to `topic` and reserves it; its ack request's body.
async fn leased(s: &TestServer, topic: &str) -> Value {
    let (st, v) = s
        .post(&format!("/v1/topics/{topic}/jobs"), json!({"body": "x"}))
        .await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": [topic], "wait_ms": 5000}))
        .await;
    assert_eq!(st, 200, "{v}");
    let job = &v["jobs"][0];
    assert_eq!(job["job"]["topic"], topic, "{v}");
    json!({"token": job["token"].clone(), "id": job["job"]["id"].clone()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_primary_holds_only_its_own_topics_acks_issue_37() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(0))
        .await
        .unwrap();
    let primaries = cluster.primaries();
    let (stalled_node, healthy_node) = (&primaries[0], &primaries[1]);
    let stalled = topic_on(stalled_node, "stalled");
    let healthy = topic_on(healthy_node, "healthy");
    let engine = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(cluster.url()))
        .await
        .unwrap();
    let s = Arc::new(TestServer::start(Arc::new(engine), ServerConfig::default()).await);

    let stuck = leased(&s, &stalled).await;
    let fine: Vec<Value> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(leased(&s, &healthy).await);
        }
        v
    };

    let pid = cluster.server(stalled_node.port).pid().unwrap();
    let stopped = Stopped::new(pid);
    // The stalled topic's ack goes out first and stays on its way.
    let stuck_ack = {
        let s = s.clone();
        tokio::spawn(async move {
            let path = format!(
                "/v1/topics/{stalled}/jobs/{}/ack",
                stuck["id"].as_str().unwrap()
            );
            s.post(&path, json!({"token": stuck["token"]})).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stuck_ack.is_finished(), "the stalled primary answered");

    // The healthy topic's acks, one after another, are each answered (204) meanwhile.
    for f in &fine {
        let path = format!(
            "/v1/topics/{healthy}/jobs/{}/ack",
            f["id"].as_str().unwrap()
        );
        let (st, v) = s.post(&path, json!({"token": f["token"]})).await;
        assert_eq!(st, 204, "{v}");
        assert!(
            !stuck_ack.is_finished(),
            "the healthy topic's ack was answered only after the stalled one's"
        );
    }
    let (st, v) = s
        .get(&format!("/v1/topics/{healthy}/jobs?state=reserved"))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(0), "{v}");

    // Once the primary answers again, the stalled ack is answered too.
    drop(stopped);
    let (st, v) = tokio::time::timeout(Duration::from_secs(30), stuck_ack)
        .await
        .unwrap()
        .unwrap();
    assert!(st == 204 || st == 503, "{st} {v}");
}
