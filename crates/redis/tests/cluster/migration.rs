//! A slot migrating under traffic, twice: the engine follows the redirections, nothing is
//! lost or delivered twice (issue 13).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delayq_core::{Engine, NewJob, Reserve, Settle, Topic};
use delayq_testkit::{RedisCluster, key_slot};

use crate::{engine, id, wake_key};

#[tokio::test]
async fn a_slot_migrating_under_traffic_loses_and_duplicates_nothing_issue_13() {
    // See: issue 13
    let cluster = RedisCluster::start();
    let e = engine(&cluster).await;
    let primaries = cluster.primaries();
    let busy = Topic::new(primaries[0].topic_named("busy")).unwrap();
    let slot = key_slot(wake_key(busy.as_str()));
    const JOBS: usize = 10_000;

    let producer = {
        let (e, busy) = (e.clone(), busy.clone());
        tokio::spawn(async move {
            for chunk in 0..JOBS / 10 {
                let jobs = (0..10)
                    .map(|i| {
                        NewJob::new(busy.clone(), "m")
                            .with_id(id(&format!("m{}", chunk * 10 + i)))
                            .with_ttr(Duration::from_secs(600))
                    })
                    .collect();
                let pushed = e.push_batch(jobs).await.unwrap();
                assert!(pushed.iter().all(|p| p.created), "{pushed:?}");
            }
        })
    };
    let consumer = {
        let (e, busy) = (e.clone(), busy.clone());
        tokio::spawn(async move {
            let mut seen: HashMap<String, usize> = HashMap::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut settle = Vec::new();
            while seen.len() < JOBS && Instant::now() < deadline {
                let sr = e
                    .settle_and_reserve(
                        &settle,
                        &Reserve::new(busy.clone())
                            .max(50)
                            .wait(Duration::from_millis(200)),
                    )
                    .await
                    .unwrap();
                assert!(sr.settled.iter().all(|s| s.is_ok()), "{:?}", sr.settled);
                settle.clear();
                for d in sr.deliveries {
                    *seen.entry(d.job.id.as_str().to_string()).or_default() += 1;
                    settle.push(Settle::Ack(d.lease.unwrap()));
                }
            }
            let acks: Vec<_> = settle.iter().map(|s| s.lease().clone()).collect::<Vec<_>>();
            assert!(e.ack_batch(&acks).await.unwrap().iter().all(|r| r.is_ok()));
            seen
        })
    };

    // Move the busy topic's slot to another primary and back while both run.
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster
        .migrate_slot(slot, &primaries[0], &primaries[1])
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now_on = cluster.node_for_key(wake_key(busy.as_str()));
    assert_eq!(now_on.id, primaries[1].id);
    cluster.migrate_slot(slot, &now_on, &primaries[2]).await;

    producer.await.unwrap();
    let seen = consumer.await.unwrap();
    // The traffic met the migrations: the nodes answered redirections (ASK, TRYAGAIN, MOVED)
    // that the engine followed without an error reaching the caller.
    let mut redirections = 0;
    for p in cluster.primaries() {
        let mut direct = cluster.server(p.port).connection().await;
        let info: String = redis::cmd("INFO")
            .arg("errorstats")
            .query_async(&mut direct)
            .await
            .unwrap();
        redirections += info
            .lines()
            .filter(|l| {
                ["errorstat_ASK:", "errorstat_TRYAGAIN:", "errorstat_MOVED:"]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .filter_map(|l| l.split("count=").nth(1))
            .filter_map(|n| n.trim().parse::<u64>().ok())
            .sum::<u64>();
    }
    assert!(
        redirections > 0,
        "no redirection happened during the migrations"
    );
    assert_eq!(seen.len(), JOBS, "jobs lost");
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    let stats = e.stats(&busy).await.unwrap();
    assert_eq!(
        (stats.ready, stats.reserved, stats.delayed, stats.dead),
        (0, 0, 0, 0),
        "{stats:?}"
    );
}
