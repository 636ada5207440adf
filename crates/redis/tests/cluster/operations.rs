//! Every operation on topics of every primary, the functions loaded again where a primary
//! lost them, and a reserve waiting across primaries (issue 13).

use std::collections::HashMap;
use std::time::Duration;

use delayq_core::{
    Engine, Error, JobState, Nack, NackOutcome, NewJob, Reserve, Settle, Settled, Topic,
};
use delayq_redis::RedisConfig;
use delayq_testkit::{RedisCluster, key_slot};

use crate::{engine, engine_with, id, libraries_on, topics_per_primary, wake_key, woken_by_a_push};

#[tokio::test]
async fn every_operation_works_on_topics_of_every_primary_issue_13() {
    // See: issue 13
    let cluster = RedisCluster::start();
    let e = engine(&cluster).await;
    let topics = topics_per_primary(&cluster, "ops");
    // The library is on every node: loaded on each primary, replicated to its replica (once
    // the replica caught up: replication is asynchronous).
    cluster.wait_replicated().await;
    for node in cluster.nodes() {
        assert!(
            !libraries_on(&cluster, node.port).await.is_empty(),
            "no delayq library on {node:?}"
        );
    }

    // One batch over the three primaries: one pipeline per slot, sent concurrently.
    let jobs: Vec<NewJob> = topics
        .iter()
        .flat_map(|t| {
            (0..150).map(move |i| {
                NewJob::new(t.clone(), format!("body {i}")).with_id(id(&format!("j{i}")))
            })
        })
        .collect();
    let pushed = e.push_batch(jobs).await.unwrap();
    assert_eq!(pushed.len(), 450);
    assert!(
        pushed
            .iter()
            .all(|p| p.created && p.state == JobState::Ready)
    );
    // Pushed again: idempotent per id.
    let again = e
        .push(NewJob::new(topics[1].clone(), "x").with_id(id("j0")))
        .await
        .unwrap();
    assert!(!again.created);

    for t in &topics {
        let job = e.get(t, &id("j7")).await.unwrap().unwrap();
        assert_eq!(job.body.as_ref(), b"body 7");
        let stats = e.stats(t).await.unwrap();
        assert_eq!(stats.ready, 150, "{t}");
        let page = e.list(t, JobState::Ready, 10, None).await.unwrap();
        assert_eq!(page.jobs.len(), 10);
        let next = e
            .list(t, JobState::Ready, 500, page.next.as_ref())
            .await
            .unwrap();
        assert_eq!(next.jobs.len(), 140);
    }

    // The registry (one SET in one slot) lists every topic.
    let listed = e.topics().await.unwrap();
    for t in &topics {
        assert!(listed.contains(t), "{t} missing from {listed:?}");
    }

    // Reserve without waiting, from each topic and across all three.
    let mut leases = Vec::new();
    for t in &topics {
        let got = e.reserve(&Reserve::new(t.clone()).max(5)).await.unwrap();
        assert_eq!(got.len(), 5, "{t}");
        leases.extend(got.into_iter().map(|d| d.lease.unwrap()));
    }
    let across = e
        .reserve(&Reserve::topics(topics.clone()).max(20))
        .await
        .unwrap();
    assert_eq!(across.len(), 20);

    // An ack batch over the three primaries (one call per topic, pipelined per slot).
    let acks = e.ack_batch(&leases).await.unwrap();
    assert!(acks.iter().all(|r| r.is_ok()), "{acks:?}");
    let again = e.ack_batch(&leases).await.unwrap();
    assert!(
        again
            .iter()
            .all(|r| matches!(r, Err(Error::NotFound { .. }))),
        "{again:?}"
    );

    // Nack, bury, release and settle-and-reserve, whose settlements lie on other primaries
    // than the topic it reserves from.
    let mut by_topic: HashMap<Topic, Vec<delayq_core::Lease>> = HashMap::new();
    for d in across {
        let l = d.lease.unwrap();
        by_topic.entry(l.topic.clone()).or_default().push(l);
    }
    let mut settle = Vec::new();
    for (k, t) in topics.iter().enumerate() {
        let mut more = e.reserve(&Reserve::new(t.clone()).max(3)).await.unwrap();
        let l = more.remove(0).lease.unwrap();
        match k {
            0 => {
                let out = e
                    .nack(
                        &l,
                        Nack {
                            delay: Some(Duration::from_secs(60)),
                            reason: None,
                        },
                    )
                    .await
                    .unwrap();
                assert!(matches!(out, NackOutcome::Retry { .. }), "{out:?}");
            }
            1 => e.bury(&l, Some("broken".into())).await.unwrap(),
            _ => e.release(&l).await.unwrap(),
        }
        e.touch(&more[0].lease.clone().unwrap(), None)
            .await
            .unwrap();
        settle.extend(more.into_iter().map(|d| Settle::Ack(d.lease.unwrap())));
    }
    let first = topics[0].clone();
    let sr = e
        .settle_and_reserve(&settle, &Reserve::topics(topics.clone()).max(4))
        .await
        .unwrap();
    assert_eq!(sr.settled.len(), settle.len());
    assert!(
        sr.settled.iter().all(|s| matches!(s, Ok(Settled::Acked))),
        "{:?}",
        sr.settled
    );
    assert_eq!(sr.deliveries.len(), 4);
    assert_eq!(e.stats(&first).await.unwrap().delayed, 1);
    assert_eq!(e.stats(&topics[1]).await.unwrap().dead, 1);
    assert_eq!(e.kick_all(&topics[1]).await.unwrap(), 1);

    // Delete, reschedule, purge.
    assert!(e.delete(&topics[2], &id("j149")).await.unwrap());
    e.reschedule(
        &topics[2],
        &id("j148"),
        delayq_core::Schedule::Delay(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    assert_eq!(e.stats(&topics[2]).await.unwrap().delayed, 1);
    for t in &topics {
        let stats = e.stats(t).await.unwrap();
        let total = stats.delayed + stats.ready + stats.reserved + stats.dead;
        assert_eq!(e.purge(t).await.unwrap(), total, "{t}");
        assert_eq!(e.stats(t).await.unwrap().ready, 0);
    }
    e.now().await.unwrap();
}

#[tokio::test]
async fn a_primary_that_lost_the_functions_gets_them_again_issue_13() {
    // See: issue 13
    let cluster = RedisCluster::start();
    let e = engine(&cluster).await;
    let topics = topics_per_primary(&cluster, "flush");
    let primaries = cluster.primaries();

    // One call: the primary of topic 0 lost the library.
    let mut direct = cluster.server(primaries[0].port).connection().await;
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut direct)
        .await
        .unwrap();
    assert!(libraries_on(&cluster, primaries[0].port).await.is_empty());
    e.push(NewJob::new(topics[0].clone(), "a").with_id(id("a")))
        .await
        .unwrap();
    assert!(!libraries_on(&cluster, primaries[0].port).await.is_empty());

    // A pipeline over every primary, two of which lost it: only their calls are resent.
    for p in &primaries[1..] {
        let mut direct = cluster.server(p.port).connection().await;
        let _: () = redis::cmd("FUNCTION")
            .arg("FLUSH")
            .query_async(&mut direct)
            .await
            .unwrap();
    }
    let jobs: Vec<NewJob> = topics
        .iter()
        .map(|t| NewJob::new(t.clone(), "b").with_id(id("b")))
        .collect();
    let pushed = e.push_batch(jobs).await.unwrap();
    assert!(pushed.iter().all(|p| p.created), "{pushed:?}");
    let got = e
        .reserve(&Reserve::topics(topics.clone()).max(10))
        .await
        .unwrap();
    assert_eq!(got.len(), 4);
    for p in &primaries {
        assert!(!libraries_on(&cluster, p.port).await.is_empty(), "{p:?}");
    }
}

/// The calls the nodes on `ports` served so far, by `INFO commandstats`, leaving out INFO
/// itself (the test's own reads) and REPLCONF (replicas acknowledging their stream every
/// second).
async fn calls_on(cluster: &RedisCluster, ports: &[u16]) -> u64 {
    let mut total = 0;
    for &port in ports {
        let mut direct = cluster.server(port).connection().await;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut direct)
            .await
            .unwrap();
        total += info
            .lines()
            .filter(|l| l.starts_with("cmdstat_"))
            .filter(|l| !l.starts_with("cmdstat_info:") && !l.starts_with("cmdstat_replconf:"))
            .filter_map(|l| l.split("calls=").nth(1))
            .filter_map(|rest| rest.split(',').next())
            .filter_map(|n| n.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// A reserve waiting on topics of three primaries (one wait per slot, each on the node that
/// serves it) wakes at once for a job pushed by another process, costs nothing while idle,
/// and keeps waking after its topic's slot migrated and after its primary failed over.
#[tokio::test]
async fn a_wait_across_primaries_wakes_at_once_for_pushes_from_elsewhere_issue_13() {
    // See: issue 13
    let mut cluster = RedisCluster::start();
    // A safety wake longer than every wait here: only a signal can wake the waiter in time.
    let waiter = engine_with(
        &cluster,
        RedisConfig::new(cluster.url()).with_safety_wake(Duration::from_secs(120)),
    )
    .await;
    let producer = engine(&cluster).await;
    let topics = topics_per_primary(&cluster, "wait");
    let req = Reserve::topics(topics.clone()).wait(Duration::from_secs(20));
    let wait_for = |body: &'static str, on: Topic| {
        woken_by_a_push(&waiter, &producer, &req, on, body, async {})
    };
    for (k, t) in topics.iter().enumerate() {
        let got = wait_for(["zero", "one", "two"][k], t.clone()).await;
        waiter.ack(got[0].lease.as_ref().unwrap()).await.unwrap();
    }

    // Idle: the waits block on their nodes; nothing polls.
    let (w, r) = (waiter.clone(), req.clone());
    let idle = tokio::spawn(async move { w.reserve(&r).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ports: Vec<u16> = cluster.primaries().iter().map(|p| p.port).collect();
    let before = calls_on(&cluster, &ports).await;
    let window = Duration::from_secs(3);
    tokio::time::sleep(window).await;
    let calls = calls_on(&cluster, &ports).await - before;
    println!("idle cost on the cluster: {calls} calls in {window:?} for one waiter on 3 topics");
    assert!(
        calls as f64 / window.as_secs_f64() <= 0.2,
        "{calls} calls in {window:?} while idle"
    );
    producer
        .push(NewJob::new(topics[1].clone(), "ends the idle wait"))
        .await
        .unwrap();
    let got = idle.await.unwrap().unwrap();
    waiter.ack(got[0].lease.as_ref().unwrap()).await.unwrap();

    // Topic 0's slot moves to another primary: the wait follows the MOVED answer there.
    let primaries = cluster.primaries();
    let slot = key_slot(wake_key(topics[0].as_str()));
    cluster
        .migrate_slot(slot, &primaries[0], &primaries[2])
        .await;
    let got = wait_for("moved", topics[0].clone()).await;
    waiter.ack(got[0].lease.as_ref().unwrap()).await.unwrap();

    // Topic 1's primary dies: the wait finds the promoted replica.
    cluster.kill_primary(1).await;
    let got = wait_for("failed over", topics[1].clone()).await;
    waiter.ack(got[0].lease.as_ref().unwrap()).await.unwrap();
}
