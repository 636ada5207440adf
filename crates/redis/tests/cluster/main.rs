//! The Redis engine on a real Redis Cluster (3 primaries, 3 replicas, started by the test):
//! every operation on topics of different primaries, pipelines that mix slots, the topic
//! registry, the functions library reloaded after a `FUNCTION FLUSH` and after a failover,
//! a slot migration under traffic, the wait-replicas option across a failover (one and under
//! 10,000 jobs of traffic), waits across primaries that follow a migration and a failover,
//! and all of it over TLS with an ACL user (issue 13); readiness as the cluster's own verdict
//! (issue 36; the cluster going down under a server is `delayq-server`'s `tests/readyz.rs`);
//! a primary killed under traffic with and without wait-replicas: the other primaries'
//! topics, and a partitioned topic's partitions on them, flow on through the failover and
//! lease tokens only grow (issue 37). One test binary, by subject:
//!
//! - `operations`: every operation on topics of every primary (batches, acks and a
//!   settle-and-reserve over all three, the registry), the functions loaded again on a
//!   primary that lost them (`FUNCTION FLUSH`), and a reserve waiting across primaries
//!   (woken at once by a push from elsewhere, idle at no cost, through a slot migration and
//!   a failover);
//! - `failover`: jobs, leases and the functions through a failover with wait-replicas, and a
//!   primary killed under traffic (`failover_under_traffic`: what every run must keep), over
//!   topics of every primary with and without wait-replicas and over a partitioned topic;
//! - `traffic`: the traffic of `failover_under_traffic`: its flows, the producers and
//!   consumers, and what they record;
//! - `migration`: a slot migrating twice under 10,000 jobs, nothing lost or duplicated;
//! - `connect`: TLS with an ACL user on every primary, a wrong password or an untrusted CA,
//!   a plain `redis://` URL at a cluster node, readiness with and without the permission to
//!   read `CLUSTER INFO`.
//!
//! What they share is here: a topic on each primary, an engine on the cluster, the
//! libraries a node holds, a reserve woken by a push.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod connect;
mod failover;
mod migration;
mod operations;
mod traffic;

use std::time::Duration;

use delayq_core::{Delivery, Engine, JobId, NewJob, Reserve, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisCluster;

fn topic(s: &str) -> Topic {
    Topic::new(s).unwrap()
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// The wake key of a topic under the default prefix (every key of a topic shares its slot).
fn wake_key(t: &str) -> String {
    format!("delayq:{{{t}}}:wake")
}

/// One topic per primary, in the order of `RedisCluster::primaries`: the first of
/// `<name>-0`, `<name>-1`, … on it (`ClusterNode::topic_named`).
fn topics_per_primary(cluster: &RedisCluster, name: &str) -> Vec<Topic> {
    let topics: Vec<Topic> = cluster
        .primaries()
        .iter()
        .map(|p| Topic::new(p.topic_named(name)).unwrap())
        .collect();
    for (t, p) in topics.iter().zip(cluster.primaries()) {
        assert_eq!(cluster.node_for_key(wake_key(t.as_str())).id, p.id);
    }
    topics
}

async fn engine(cluster: &RedisCluster) -> RedisEngine {
    engine_with(cluster, RedisConfig::new(cluster.url())).await
}

async fn engine_with(cluster: &RedisCluster, config: RedisConfig) -> RedisEngine {
    assert!(config.url.starts_with("redis+cluster://"), "{}", config.url);
    match RedisEngine::connect(config).await {
        Ok(e) => e,
        Err(e) => {
            let logs: Vec<String> = cluster
                .nodes()
                .iter()
                .map(|n| format!("--- {}:\n{}", n.port, cluster.server(n.port).log()))
                .collect();
            panic!("connect to the cluster: {e}\n{}", logs.join("\n"))
        }
    }
}

/// The libraries `FUNCTION LIST` shows on the node on `port`.
async fn libraries_on(cluster: &RedisCluster, port: u16) -> Vec<String> {
    let mut conn = cluster.server(port).connection().await;
    let list: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    format!("{list:?}")
        .split("delayq_")
        .skip(1)
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .filter(|v| !v.is_empty())
        .map(|v| format!("delayq_{v}"))
        .collect()
}

/// Starts `req` on `waiter` and checks that it waits; once `ready` (what must hold before the
/// push) is done, `producer` pushes `body` to `on`. Answers what the reserve got: that job
/// alone, delivered within 20 ms of being due (a signal woke the waiter, not a timer).
async fn woken_by_a_push(
    waiter: &RedisEngine,
    producer: &RedisEngine,
    req: &Reserve,
    on: Topic,
    body: &str,
    ready: impl std::future::Future<Output = ()>,
) -> Vec<Delivery> {
    let (w, r) = (waiter.clone(), req.clone());
    let waiting = tokio::spawn(async move { w.reserve(&r).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the reserve did not wait");
    ready.await;
    producer
        .push(NewJob::new(on, body.to_string()))
        .await
        .unwrap();
    let got = waiting.await.unwrap().unwrap();
    assert_eq!(got.len(), 1, "{body}");
    assert_eq!(got[0].job.body.as_ref(), body.as_bytes());
    assert!(
        got[0].lateness <= Duration::from_millis(20),
        "{body}: delivered {:?} after it was due",
        got[0].lateness
    );
    got
}
