//! Fencing tokens never go back, even when a Redis Cluster failover loses writes.
//!
//! Without wait-replicas a write acknowledged just before its primary dies can be missing on
//! the replica that takes over. A lease is such a write: its token came from the topic's
//! counter, and the promoted replica's counter is behind it. The job is ready again there
//! (its lease was lost with the write), and when it is leased again its token must still be
//! greater than the lost one: a holder of the old lease must never be able to ack, touch or
//! nack the new one. Here the lost write is made for certain: the replica is stopped
//! (SIGSTOP) and its link dropped before the reserve, its primary killed (SIGKILL) after it, then the replica is
//! continued and takes over.
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::time::{Duration, Instant};

use delayq_core::{Engine, Error, JobId, NewJob, Reserve, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisCluster, Stopped};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_in_a_failover_is_never_followed_by_a_smaller_token_issue_37() {
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let primary = cluster.primaries()[0].clone();
    let replica = cluster
        .replicas()
        .into_iter()
        .find(|r| r.primary_id.as_ref() == Some(&primary.id))
        .unwrap();
    let t = Topic::new(primary.topic_named("fenced")).unwrap();
    let e = RedisEngine::connect(RedisConfig::new(cluster.url()))
        .await
        .unwrap();
    // Leases before the fault make the counter count on both nodes.
    for i in 0..20 {
        let other = JobId::new(format!("warm-{i}")).unwrap();
        e.push(NewJob::new(t.clone(), "x").with_id(other))
            .await
            .unwrap();
    }
    let warm = e
        .reserve(&Reserve::new(t.clone()).max(20).wait(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(warm.len(), 20);
    let id = JobId::new("order-7").unwrap();
    e.push(NewJob::new(t.clone(), "cancel order 7").with_id(id.clone()))
        .await
        .unwrap();
    cluster.wait_replicated().await;

    // The replica stops, and its primary drops the link to it (a stopped process still
    // receives into its socket buffer): the lease of order-7 reaches its primary only.
    let replica_pid = cluster.server(replica.port).pid().unwrap();
    let stopped = Stopped::new(replica_pid);
    let mut conn = cluster.server(primary.port).connection().await;
    let dropped: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(dropped, 1, "the primary had one replica link");
    let mut lost = None;
    for _ in 0..10 {
        let got = e
            .reserve(&Reserve::new(t.clone()).max(1000).wait(Duration::ZERO))
            .await
            .unwrap();
        if let Some(d) = got.into_iter().find(|d| d.job.id == id) {
            lost = d.lease.map(|l| l.token);
            break;
        }
    }
    let lost = lost.expect("order-7 was leased");
    cluster.kill_node(primary.port);
    drop(stopped);

    // The replica takes over without the lease: order-7 is handed out again.
    let deadline = Instant::now() + Duration::from_secs(60);
    let again = loop {
        assert!(
            Instant::now() < deadline,
            "order-7 was not handed out again within 60 s of the failover"
        );
        match e
            .reserve(&Reserve::new(t.clone()).max(1000).wait(Duration::ZERO))
            .await
        {
            Ok(got) => {
                if let Some(d) = got.into_iter().find(|d| d.job.id == id) {
                    break d.lease.unwrap().token;
                }
            }
            Err(Error::Unavailable { .. }) => {}
            Err(other) => panic!("reserve during the failover: {other}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        again > lost,
        "order-7 was leased with token {} before the failover and {} after it: a token went back",
        lost.0,
        again.0
    );
}
