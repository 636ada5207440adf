//! The Redis engine on a real Redis Cluster (3 primaries, 3 replicas, started by the test):
//! every operation on topics of different primaries, pipelines that mix slots, the topic
//! registry, the functions library reloaded after a `FUNCTION FLUSH` and after a failover,
//! a slot migration under traffic, the wait-replicas option across a failover (one and under
//! 10,000 jobs of traffic), waits across primaries that follow a migration and a failover,
//! and all of it over TLS with an ACL user (issue 13); readiness as the cluster's own verdict
//! (issue 36; the cluster going down under a server is `delayq-server`'s `tests/readyz.rs`);
//! a primary killed under traffic with and without wait-replicas: the other primaries'
//! topics, and a partitioned topic's partitions on them, flow on through the failover and
//! lease tokens only grow (issue 37).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_core::{
    Backoff, Delivery, Engine, Error, JobId, JobState, Nack, NackOutcome, NewJob, Readiness,
    Reserve, Settle, Settled, Topic, TopicConfig, partition_of,
};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{
    AclUser, ClusterNode, ClusterOptions, RedisCluster, RedisOptions, RedisServer, key_slot,
};

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

/// A topic named `<name>-<n>` whose keys live on `primary`.
fn topic_on(primary: &ClusterNode, name: &str) -> Topic {
    (0..)
        .map(|n| format!("{name}-{n}"))
        .find(|t| primary.serves(key_slot(wake_key(t))))
        .map(|t| topic(&t))
        .unwrap()
}

/// One topic per primary, in the order of `RedisCluster::primaries`.
fn topics_per_primary(cluster: &RedisCluster, name: &str) -> Vec<Topic> {
    let topics: Vec<Topic> = cluster
        .primaries()
        .iter()
        .map(|p| topic_on(p, name))
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

#[tokio::test]
async fn jobs_and_functions_survive_a_failover_issue_13() {
    // See: issue 13
    let mut cluster = RedisCluster::start();
    // Every write waits for its primary's replica (item 6): only then does the contract
    // promise that what was answered survives a failover, so no other wait is needed here.
    let e = engine_with(
        &cluster,
        RedisConfig::new(cluster.url()).with_wait_replicas(1, Duration::from_secs(2)),
    )
    .await;
    let topics = topics_per_primary(&cluster, "failover");
    let victim = topics[1].clone();
    for t in &topics {
        let jobs = (0..20)
            .map(|i| NewJob::new(t.clone(), "x").with_id(id(&format!("f{i}"))))
            .collect();
        e.push_batch(jobs).await.unwrap();
    }
    let held = e
        .reserve(&Reserve::new(victim.clone()).max(2))
        .await
        .unwrap();
    assert_eq!(held.len(), 2);
    let failover = cluster.kill_primary(1).await;
    // Redis replicates FUNCTION LOAD before the acknowledged writes that followed it.
    assert!(
        !libraries_on(&cluster, failover.promoted.port)
            .await
            .is_empty(),
        "the promoted replica {:?} has no delayq library",
        failover.promoted
    );
    // The same engine reads the victim's topic from the new primary: nothing answered was
    // lost, the two leases included.
    let stats = e.stats(&victim).await.unwrap();
    assert_eq!((stats.ready, stats.reserved), (18, 2), "{stats:?}");

    // The new primary has no replica yet: a write there is applied but not acknowledged.
    match e
        .push(NewJob::new(victim.clone(), "alone").with_id(id("alone")))
        .await
    {
        Err(Error::NotReplicated { acked, wanted }) => assert_eq!((acked, wanted), (0, 1)),
        other => panic!("{other:?}"),
    }
    // The killed node comes back as its replica; the retried push is acknowledged, once.
    let back = cluster.restart(failover.killed.port).await;
    assert_eq!(back.primary_id.as_ref(), Some(&failover.promoted.id));
    let again = e
        .push(NewJob::new(victim.clone(), "alone").with_id(id("alone")))
        .await
        .unwrap();
    assert!(!again.created);

    for d in &held {
        e.ack(d.lease.as_ref().unwrap()).await.unwrap();
    }
    let got = e
        .reserve(&Reserve::new(victim.clone()).max(100))
        .await
        .unwrap();
    assert_eq!(got.len(), 19);
    let leases: Vec<_> = got.iter().map(|d| d.lease.clone().unwrap()).collect();
    assert!(
        e.ack_batch(&leases)
            .await
            .unwrap()
            .iter()
            .all(|r| r.is_ok())
    );

    // A new primary without the library (as after a failover to a replica that missed it):
    // the first call loads it there.
    let mut promoted = cluster.server(failover.promoted.port).connection().await;
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut promoted)
        .await
        .unwrap();
    e.push(NewJob::new(victim.clone(), "after").with_id(id("after")))
        .await
        .unwrap();
    // And a fresh engine connects to the cluster.
    let fresh = engine(&cluster).await;
    assert_eq!(fresh.stats(&victim).await.unwrap().ready, 1);
    assert_eq!(fresh.stats(&topics[0]).await.unwrap().ready, 20);
}

#[tokio::test]
async fn a_slot_migrating_under_traffic_loses_and_duplicates_nothing_issue_13() {
    // See: issue 13
    let cluster = RedisCluster::start();
    let e = engine(&cluster).await;
    let primaries = cluster.primaries();
    let busy = topic_on(&primaries[0], "busy");
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

/// Push calls of 10 jobs each in [`failover_under_traffic`].
const BATCH: usize = 10;

/// The primary [`failover_under_traffic`] kills (of `RedisCluster::primaries`).
const KILLED: usize = 1;

/// The lease length of [`failover_under_traffic`]'s jobs. Short, so that deliveries whose
/// reply was lost (a reserve answered `not_replicated`, or sent to the primary as it died)
/// come back within the test.
const FAILOVER_TTR: Duration = Duration::from_secs(5);

/// What one producer of [`failover_under_traffic`] did.
struct Produced {
    /// The jobs whose push answered success.
    answered: HashSet<String>,
    /// Each push call: when it was first sent, when it answered success, its jobs.
    calls: Vec<(Instant, Instant, Vec<String>)>,
    /// Push calls that answered an error and were sent again.
    failed: usize,
    /// The longest a call took to answer success, its retries included.
    longest: Duration,
}

/// One delivery a consumer of [`failover_under_traffic`] received.
#[derive(Clone, Debug)]
struct Seen {
    /// When the call that brought it returned.
    at: Instant,
    attempt: u32,
    /// The lease's fencing token.
    token: u64,
}

/// What one consumer of [`failover_under_traffic`] saw.
#[derive(Default)]
struct Consumed {
    /// Each job's deliveries, in the order received.
    deliveries: HashMap<String, Vec<Seen>>,
    /// Each ack that answered success: its job, and when its call was sent.
    acked: HashMap<String, Vec<Instant>>,
    /// Jobs whose ack went in a call that answered an error (applied or not: unknown), or
    /// answered `NOT_FOUND` (applied by the same call sent again through the failover).
    ack_unknown: HashSet<String>,
    /// Acks that answered `LEASE_LOST` (the lease had expired meanwhile).
    lease_lost: usize,
    /// Calls that answered an error (`not_replicated`, `unavailable`).
    errors: usize,
}

/// What [`failover_under_traffic`] saw, for the checks of each variant.
struct Run {
    /// The jobs whose push answered success, each with the primary (an index of
    /// `RedisCluster::primaries`) of its partition.
    answered: HashMap<String, usize>,
    /// The jobs of the push call to the killed primary that was on its way at the kill: the
    /// only ones a push sent again through the failover may create again.
    spanning: HashSet<String>,
    /// Each job's deliveries, all consumers' merged and sorted by the time received.
    ///
    /// A job is delivered again only once its lease expired (ttr 5 s after it was taken,
    /// while a reserve hands out what it took within one slot bound per primary it waits on,
    /// 2.5 s with wait-replicas for the dead one, whose other slots it then skips; a late
    /// reply is given back, not handed out), or once the lease was lost with the dead
    /// primary, or once it was acked and pushed again: each time after the earlier delivery
    /// was received. So the order received is the order
    /// the engine handed them out, whichever consumers got them.
    deliveries: HashMap<String, Vec<Seen>>,
    /// Each job's acks that answered success, by when their call was sent.
    acked: HashMap<String, Vec<Instant>>,
    /// As [`Consumed::ack_unknown`], for every consumer.
    ack_unknown: HashSet<String>,
}

impl Run {
    /// The primary (an index of `RedisCluster::primaries`) of job `id`'s partition.
    fn primary(&self, id: &str) -> usize {
        *self
            .answered
            .get(id)
            .unwrap_or_else(|| panic!("{id} was delivered, but no push of it answered success"))
    }

    /// A job's deliveries split into lives: a new life begins with the first delivery
    /// received after an ack of the job answered success was sent (a push created the job
    /// again, or the ack was lost). Sound across consumers: while a lease is live nobody
    /// else gets the job, and its ack answers success only while it is live.
    fn lives(&self, id: &str) -> Vec<&[Seen]> {
        let ds = self.deliveries.get(id).map_or(&[][..], Vec::as_slice);
        let acked = self.acked.get(id).map_or(&[][..], Vec::as_slice);
        let acks_before = |at: Instant| acked.iter().filter(|&&sent| sent < at).count();
        let mut lives = Vec::new();
        let mut start = 0;
        for i in 1..ds.len() {
            if acks_before(ds[i].at) > acks_before(ds[i - 1].at) {
                lives.push(&ds[start..i]);
                start = i;
            }
        }
        if start < ds.len() {
            lives.push(&ds[start..]);
        }
        lives
    }

    /// The jobs delivered again after an ack that answered success.
    fn recreated(&self) -> Vec<&String> {
        let mut ids: Vec<&String> = self
            .deliveries
            .keys()
            .filter(|i| self.lives(i).len() > 1)
            .collect();
        ids.sort();
        ids
    }

    /// The answered pushes whose job no ack acked: none answered success, and none of
    /// unknown outcome (after which, the engine says, no job is left).
    fn unacked(&self) -> Vec<&String> {
        let mut ids: Vec<&String> = self
            .answered
            .keys()
            .filter(|i| !self.acked.contains_key(*i) && !self.ack_unknown.contains(*i))
            .collect();
        ids.sort();
        ids
    }

    /// Each pair of deliveries of one life of a job in which the later one's attempt is not
    /// higher: the job came again without a lease expiry.
    fn same_attempt(&self) -> Vec<(&String, &Seen, &Seen)> {
        let mut pairs = Vec::new();
        for i in self.deliveries.keys() {
            for life in self.lives(i) {
                for w in life.windows(2) {
                    if w[1].attempt <= w[0].attempt {
                        pairs.push((i, &w[0], &w[1]));
                    }
                }
            }
        }
        pairs
    }
}

/// The traffic of [`failover_under_traffic`].
#[derive(Clone, Copy, Debug)]
enum Flow {
    /// Two topics of one partition on each primary. One producer per primary pushes batches
    /// over its two topics (a push call over several slots is one pipeline, held up by its
    /// slowest slot, so a mixed producer would stall the healthy topics with the dead one);
    /// one consumer per primary reserves its topics, and one reserves every topic.
    TopicsPerPrimary,
    /// One topic of this many partitions, with partitions on every primary (asserted). One
    /// producer per primary pushes batches of ids whose partitions are on it (a job's
    /// partition follows its id; a batch over every primary would stall with the dead one,
    /// as above); two consumers reserve the topic, a call over every primary.
    Partitioned(u16),
}

/// What one producer of [`failover_under_traffic`] pushes.
struct Producer {
    /// The topics its jobs go to, in turn.
    topics: Vec<Topic>,
    /// The id of its `n`-th job, of a partition on its primary.
    ids: Box<dyn Fn(usize) -> String + Send>,
    /// Its pause after each batch answered (zero: none).
    pace: Duration,
}

/// Who pushes what and who reserves what in [`failover_under_traffic`], from a [`Flow`].
struct Traffic {
    /// What it is called in the figures.
    name: String,
    /// Per primary (of `RedisCluster::primaries`), what its producer pushes.
    producers: Vec<Producer>,
    /// Each consumer: what it is called in the figures, the topics it reserves, and whether
    /// they hold jobs of a healthy primary (then it must receive some during the failover).
    consumers: Vec<(String, Vec<Topic>, bool)>,
    /// Every topic: the consumers stop once all are empty.
    every: Vec<Topic>,
}

impl Traffic {
    async fn new(flow: Flow, cluster: &RedisCluster, e: &RedisEngine) -> Self {
        match flow {
            Flow::TopicsPerPrimary => {
                let topics: Vec<Vec<Topic>> = topics_per_primary(cluster, "flow")
                    .into_iter()
                    .zip(topics_per_primary(cluster, "more"))
                    .map(|(a, b)| vec![a, b])
                    .collect();
                let every = topics.concat();
                let producers = topics
                    .iter()
                    .enumerate()
                    .map(|(p, mine)| Producer {
                        topics: mine.clone(),
                        ids: Box::new(move |n| format!("f{p}-{n}")),
                        pace: Duration::ZERO,
                    })
                    .collect();
                let consumers = topics
                    .iter()
                    .enumerate()
                    .map(|(c, mine)| (format!("primary {c}'s consumer"), mine.clone(), c != KILLED))
                    .chain([("the all-topics consumer".to_string(), every.clone(), true)])
                    .collect();
                Traffic {
                    name: "two topics per primary".to_string(),
                    producers,
                    consumers,
                    every,
                }
            }
            Flow::Partitioned(n) => {
                let t = topic("parted");
                let config = TopicConfig {
                    partitions: Some(n),
                    ..TopicConfig::default()
                };
                e.set_topic_config(&t, &config).await.unwrap();
                let on = partition_primaries(cluster, e, &t, n).await;
                let producers = (0..cluster.primaries().len())
                    .map(|p| {
                        let on = on.clone();
                        Producer {
                            topics: vec![t.clone()],
                            ids: Box::new(move |k| {
                                (0..)
                                    .map(|s| format!("f{p}-{k}-{s}"))
                                    .find(|i| on[usize::from(partition_of(&id(i), n))] == p)
                                    .unwrap()
                            }),
                            // At most 500 jobs a second each, so that the healthy ones,
                            // which push on until the promotion, stay at a few thousand.
                            pace: Duration::from_millis(20),
                        }
                    })
                    .collect();
                let consumers = (0..2)
                    .map(|c| (format!("consumer {c}"), vec![t.clone()], true))
                    .collect();
                Traffic {
                    name: format!("one topic of {n} partitions (their primaries {on:?})"),
                    producers,
                    consumers,
                    every: vec![t],
                }
            }
        }
    }
}

/// The primary (an index of `RedisCluster::primaries`) of each of the `n` partitions of
/// the empty topic `t`, found where a job pushed to each partition landed; asserts that
/// every primary holds one at least. Those jobs are then taken and acked: `t` is left empty.
async fn partition_primaries(
    cluster: &RedisCluster,
    e: &RedisEngine,
    t: &Topic,
    n: u16,
) -> Vec<usize> {
    let seeds: Vec<NewJob> = (0..n)
        .map(|p| {
            let i = (0..)
                .map(|k| id(&format!("seed-{k}")))
                .find(|i| partition_of(i, n) == p)
                .unwrap();
            NewJob::new(t.clone(), "seed").with_id(i)
        })
        .collect();
    e.push_batch(seeds).await.unwrap();
    let primaries = cluster.primaries();
    let mut on = vec![None; usize::from(n)];
    for (q, node) in primaries.iter().enumerate() {
        let mut conn = cluster.server(node.port).connection().await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("delayq:{{{t}~*}}:jobs"))
            .query_async(&mut conn)
            .await
            .unwrap();
        for k in keys {
            assert!(node.serves(key_slot(&k)), "{k} is on {node:?}");
            // A partition's tag is `<topic>~<index>~<salt>`.
            let p: usize = k.split('~').nth(1).unwrap().parse().unwrap();
            assert_eq!(
                on[p].replace(q),
                None,
                "partition {p} of {t} on two primaries"
            );
        }
    }
    let on: Vec<usize> = on
        .into_iter()
        .enumerate()
        .map(|(p, q)| q.unwrap_or_else(|| panic!("partition {p} of {t} is on no primary")))
        .collect();
    for q in 0..primaries.len() {
        assert!(
            on.contains(&q),
            "no partition of {t} on primary {q}: {on:?}"
        );
    }
    let got = e
        .reserve(&Reserve::new(t.clone()).max(usize::from(n)))
        .await
        .unwrap();
    assert_eq!(got.len(), usize::from(n));
    let leases: Vec<_> = got.into_iter().map(|d| d.lease.unwrap()).collect();
    let acks = e.ack_batch(&leases).await.unwrap();
    assert!(acks.iter().all(|r| r.is_ok()), "{acks:?}");
    on
}

/// Kills primary 1 while jobs flow (`flow`) over every primary, and checks what holds with
/// and without wait-replicas; answers what it saw for the checks that hold for one of them.
/// `wait_replicas`: the engine's option, or none; `jobs`: at least so many are pushed (the
/// healthy primaries' producers push on until the replica has taken over); `within`: the
/// run fails if it has not drained by then.
///
/// Each producer pushes batches of 10 jobs, all of them of partitions on its primary.
/// Consumers settle (ack) and reserve. Each delivery's time received, attempt and token are
/// kept.
///
/// Asserted: the healthy primaries' jobs keep flowing between the kill and the promotion
/// (each consumer whose topics hold some receives some of them then: a count, not a
/// timing); every job's lease tokens strictly increase in the order delivered, across its
/// lives too (a token is larger than every token its partition handed out before, whatever
/// the dead primary lost: `lib.lua` `fresh_tokens`); an ack answers success at most once per
/// life of a job; the healthy primaries lose nothing (every answered push to them acked)
/// and create no job again; a job comes again without a lease expiry only on the killed
/// primary's partitions, after a delivery received before the promotion (a lease the dead
/// primary had not passed on, without wait-replicas); and the run drains every job.
///
/// Printed: each consumer's longest stretch of that window without a healthy delivery.
/// Every node refuses every call (`CLUSTERDOWN`, under the default
/// `cluster-require-full-coverage yes`) from when the cluster marks the dead primary failed
/// until its replica takes over, about a second here, so no consumer flows throughout.
async fn failover_under_traffic(
    flow: Flow,
    wait_replicas: Option<usize>,
    jobs: usize,
    within: Duration,
) -> Run {
    let started = Instant::now();
    let mut cluster = RedisCluster::start();
    let mut config = RedisConfig::new(cluster.url());
    if let Some(n) = wait_replicas {
        // The default slot timeout: a reserve over several slots waits for the dead primary
        // at most once per pass, 500 ms plus this wait timeout, however many of the
        // request's slots it served (its shard is skipped whole once one slot timed out).
        config = config.with_wait_replicas(n, Duration::from_secs(2));
    }
    let e = engine_with(&cluster, config).await;
    let Traffic {
        name,
        producers,
        consumers,
        every,
    } = Traffic::new(flow, &cluster, &e).await;
    let deadline = Instant::now() + within;
    let batches = jobs.div_ceil(BATCH * producers.len());
    let pushed: Vec<Arc<AtomicUsize>> = producers.iter().map(|_| Arc::default()).collect();
    let promoted = Arc::new(AtomicBool::new(false));
    let producers_done = Arc::new(AtomicBool::new(false));

    let producing: Vec<_> = producers
        .into_iter()
        .zip(&pushed)
        .map(|(producer, pushed)| {
            let (e, pushed, promoted) = (e.clone(), pushed.clone(), promoted.clone());
            tokio::spawn(produce(e, producer, batches, pushed, promoted, deadline))
        })
        .collect();
    let consuming: Vec<_> = consumers
        .iter()
        .map(|(_, mine, _)| {
            let (e, mine, every, done) = (
                e.clone(),
                mine.clone(),
                every.clone(),
                producers_done.clone(),
            );
            tokio::spawn(consume(e, mine, every, done, deadline))
        })
        .collect();

    // Kill primary 1 once the traffic is well under way, then bring it back as the new
    // primary's replica (until then, with wait-replicas, its partitions' writes answer
    // `not_replicated`).
    let total = || {
        pushed
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum::<usize>()
    };
    while total() < jobs / 5 {
        assert!(Instant::now() < deadline, "the producers did not get going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        pushed[KILLED].load(Ordering::Relaxed) < batches * BATCH,
        "the killed primary's producer finished before the failover"
    );
    let failover = cluster.kill_primary(KILLED).await;
    let promoted_at = Instant::now();
    // From the SIGKILL on: a call begun before it may still have been answered, but only
    // one begun before the process was reaped may have reached it.
    let killed_at = failover.signalled;
    promoted.store(true, Ordering::Release);
    cluster.restart(failover.killed.port).await;

    let mut produced = Vec::new();
    for p in producing {
        produced.push(p.await.unwrap());
    }
    producers_done.store(true, Ordering::Release);
    let mut consumed = Vec::new();
    for c in consuming {
        consumed.push(c.await.unwrap());
    }

    let mut run = Run {
        answered: HashMap::new(),
        // The calls that may have reached the killed primary and lost its answer: begun
        // before it was gone, answered after the SIGKILL. (Not those that spanned the
        // moment `kill_primary` was called: it reads the cluster's view first, and a call
        // begun meanwhile that the dead primary had applied was sent again and created its
        // jobs again, which CI saw.)
        spanning: produced[KILLED]
            .calls
            .iter()
            .filter(|(start, end, _)| *start < failover.gone && *end > failover.signalled)
            .flat_map(|(_, _, ids)| ids.iter().cloned())
            .collect(),
        deliveries: HashMap::new(),
        acked: HashMap::new(),
        ack_unknown: HashSet::new(),
    };
    for (p, pr) in produced.iter().enumerate() {
        run.answered
            .extend(pr.answered.iter().map(|i| (i.clone(), p)));
    }
    // The healthy primaries' jobs flowed while the dead one failed over: each consumer of
    // them got some in the meantime.
    let mut window = Vec::new();
    for ((who, _, healthy), seen) in consumers.iter().zip(&consumed) {
        if !healthy {
            continue;
        }
        let mut times: Vec<Instant> = seen
            .deliveries
            .iter()
            .filter(|(i, _)| run.primary(i) != KILLED)
            .flat_map(|(_, ds)| ds.iter().map(|s| s.at))
            .filter(|at| (killed_at..=promoted_at).contains(at))
            .collect();
        times.sort();
        let count = times.len();
        // The longest stretch of the window without one (from the kill to the first, between
        // two, from the last to the promotion): printed, not asserted.
        times.insert(0, killed_at);
        times.push(promoted_at);
        let gap = times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default();
        window.push((who, count, gap));
    }

    let (mut errors, mut lease_lost) = (0, 0);
    for seen in consumed {
        for (i, ds) in seen.deliveries {
            run.deliveries.entry(i).or_default().extend(ds);
        }
        for (i, sent) in seen.acked {
            run.acked.entry(i).or_default().extend(sent);
        }
        run.ack_unknown.extend(seen.ack_unknown);
        (errors, lease_lost) = (errors + seen.errors, lease_lost + seen.lease_lost);
    }
    for ds in run.deliveries.values_mut() {
        ds.sort_by_key(|s| s.at);
    }
    for sent in run.acked.values_mut() {
        sent.sort();
    }

    let recreated = run.recreated();
    let after_expiry: usize = run
        .deliveries
        .keys()
        .flat_map(|i| run.lives(i))
        .map(|life| life.len() - 1)
        .sum();
    let durability = wait_replicas.map_or("without wait-replicas".to_string(), |n| {
        format!("with wait-replicas {n}")
    });
    let flow: Vec<String> = window
        .iter()
        .map(|(who, n, gap)| format!("{who} {n} (longest stretch without one {gap:?})"))
        .collect();
    println!(
        "failover under traffic, {name}, {durability}: {} pushes answered with success, \
         the longest batch took {:?}, {} batches retried, {errors} consumer calls failed, {} \
         acks of unknown outcome, {lease_lost} acks after a lease expiry, {after_expiry} \
         deliveries after a lease expiry, {} jobs delivered again after an ack answered \
         success ({} pushed by the killed primary's call that spanned the kill); {:?} from \
         the kill to the promotion, in which the healthy primaries' deliveries were: {}; \
         {:?} in all",
        run.answered.len(),
        produced.iter().map(|p| p.longest).max().unwrap_or_default(),
        produced.iter().map(|p| p.failed).sum::<usize>(),
        run.ack_unknown.len(),
        recreated.len(),
        run.spanning.len(),
        promoted_at - killed_at,
        flow.join(", "),
        started.elapsed(),
    );

    for (who, n, _) in &window {
        assert!(
            *n > 0,
            "{who} got none of the healthy primaries' jobs between the kill and the promotion"
        );
    }
    // Tokens strictly increase, in the order the engine handed the job out.
    for (i, ds) in &run.deliveries {
        assert!(
            ds.windows(2).all(|w| w[1].token > w[0].token),
            "{i}'s tokens did not strictly increase: {ds:?}"
        );
    }
    // At most one ack answered success per life of a job.
    for (i, sent) in &run.acked {
        let lives = run.lives(i).len();
        assert!(
            sent.len() <= lives,
            "{i} acked with success {} times in {lives} lives",
            sent.len()
        );
    }
    // The healthy primaries lost nothing and created nothing again.
    let lost: Vec<&String> = run
        .unacked()
        .into_iter()
        .filter(|i| run.answered[*i] != KILLED)
        .collect();
    assert!(
        lost.is_empty(),
        "never acked on a healthy primary: {lost:?}"
    );
    for i in &recreated {
        let ds = &run.deliveries[*i];
        assert!(
            run.primary(i) == KILLED,
            "{i} of a healthy primary delivered again after an ack answered success: {ds:?}"
        );
    }
    // A job came again without a lease expiry only where the dead primary may have lost
    // its lease: on its partitions, delivered before the promotion.
    for (i, earlier, later) in run.same_attempt() {
        assert!(
            run.primary(i) == KILLED && earlier.at < promoted_at,
            "{i} delivered twice without a lease expiry: {earlier:?} then {later:?}"
        );
    }
    run
}

/// One producer of [`failover_under_traffic`]: pushes batches of 10 of its jobs, each until
/// it answers success, `batches` of them and on until `promoted`, counting each answered
/// job in `pushed`.
async fn produce(
    e: RedisEngine,
    producer: Producer,
    batches: usize,
    pushed: Arc<AtomicUsize>,
    promoted: Arc<AtomicBool>,
    deadline: Instant,
) -> Produced {
    let mut done = Produced {
        answered: HashSet::new(),
        calls: Vec::new(),
        failed: 0,
        longest: Duration::ZERO,
    };
    let Producer { topics, ids, pace } = producer;
    let mut b = 0;
    while b < batches || !promoted.load(Ordering::Acquire) {
        let jobs: Vec<NewJob> = (b * BATCH..(b + 1) * BATCH)
            .map(|n| {
                NewJob::new(topics[n % topics.len()].clone(), "f")
                    .with_id(id(&ids(n)))
                    .with_ttr(FAILOVER_TTR)
                    .with_max_attempts(1000)
                    .with_backoff(Backoff::fixed(Duration::ZERO))
            })
            .collect();
        // A push is idempotent while its job is live: send again the jobs not stored until
        // each is answered with success, and only those. (A job stored and since acked
        // would be created again.) A slot whose primary died fails its own jobs within the
        // slot timeout; the engine retries a batch of one slot through the failover within
        // its response timeout, and with wait-replicas a new primary without a replica yet
        // answers `not_replicated`.
        let start = Instant::now();
        let mut left = jobs.clone();
        loop {
            match e.push_each(left.clone()).await {
                Ok(results) => {
                    let mut again = Vec::new();
                    for (job, r) in left.into_iter().zip(results) {
                        match r {
                            Ok(p) => {
                                done.answered.insert(p.id.to_string());
                            }
                            Err(Error::NotReplicated { .. } | Error::Unavailable { .. }) => {
                                again.push(job);
                            }
                            Err(err) => panic!("push: {err}"),
                        }
                    }
                    if again.is_empty() {
                        break;
                    }
                    left = again;
                }
                Err(Error::NotReplicated { .. } | Error::Unavailable { .. }) => {}
                Err(err) => panic!("push: {err}"),
            }
            done.failed += 1;
            assert!(Instant::now() < deadline, "pushes keep failing");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        done.longest = done.longest.max(start.elapsed());
        let ids = jobs.iter().map(|j| j.id.to_string()).collect();
        done.calls.push((start, Instant::now(), ids));
        pushed.fetch_add(BATCH, Ordering::Relaxed);
        b += 1;
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
    }
    done
}

/// One consumer of [`failover_under_traffic`]: acks what it got in its next
/// settle-and-reserve of `topics`, until the producers are done and no job is left in any
/// of `every` topic.
async fn consume(
    e: RedisEngine,
    topics: Vec<Topic>,
    every: Vec<Topic>,
    producers_done: Arc<AtomicBool>,
    deadline: Instant,
) -> Consumed {
    let req = Reserve::topics(topics)
        .max(50)
        .wait(Duration::from_millis(200));
    let mut seen = Consumed::default();
    let mut settle: Vec<(String, Settle)> = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "a consumer did not finish");
        let settles: Vec<Settle> = settle.iter().map(|(_, s)| s.clone()).collect();
        let sent = Instant::now();
        let got = match e.settle_and_reserve(&settles, &req).await {
            Ok(got) => got,
            Err(Error::NotReplicated { .. } | Error::Unavailable { .. }) => {
                seen.errors += 1;
                seen.ack_unknown.extend(settle.drain(..).map(|(i, _)| i));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(err) => panic!("settle and reserve: {err}"),
        };
        let at = Instant::now();
        for ((i, _), r) in settle.drain(..).zip(got.settled) {
            match r {
                Ok(_) => seen.acked.entry(i).or_default().push(sent),
                Err(Error::LeaseLost { .. }) => seen.lease_lost += 1,
                // Nothing else deletes jobs here: our own ack already applied. A pipeline
                // sent to a primary that died before it answered is sent again by redis-rs
                // to the promoted replica, which has the ack.
                Err(Error::NotFound { .. }) => {
                    seen.ack_unknown.insert(i);
                }
                // The dead primary's slot alone failed or did not answer within the slot
                // timeout while the other slots answered (issue 37): as for a call that
                // failed whole, the ack's outcome is unknown.
                Err(Error::NotReplicated { .. } | Error::Unavailable { .. }) => {
                    seen.ack_unknown.insert(i);
                }
                Err(err) => panic!("ack of {i}: {err}"),
            }
        }
        let idle = got.deliveries.is_empty();
        for d in got.deliveries {
            let (i, attempt) = (d.job.id.to_string(), d.attempt());
            let lease = d.lease.unwrap();
            seen.deliveries.entry(i.clone()).or_default().push(Seen {
                at,
                attempt,
                token: lease.token.0,
            });
            settle.push((i, Settle::Ack(lease)));
        }
        if idle && settle.is_empty() && producers_done.load(Ordering::Acquire) {
            // Nothing came: done once no job is left anywhere (leases whose delivery was
            // lost must expire and come again first).
            let mut left = 0;
            for t in &every {
                if let Ok(s) = e.stats(t).await {
                    left += s.ready + s.reserved + s.delayed + s.dead;
                } else {
                    left += 1;
                }
            }
            if left == 0 {
                return seen;
            }
        }
    }
}

/// Kill -9 a primary while at least 10,000 jobs flow over topics of all three primaries,
/// with wait-replicas 1: besides what [`failover_under_traffic`] checks, nothing is lost
/// ([`assert_nothing_lost`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_traffic_loses_no_acknowledged_job_issue_13() {
    // See: issue 13, issue 37
    let run = failover_under_traffic(
        Flow::TopicsPerPrimary,
        Some(1),
        10_000,
        Duration::from_secs(240),
    )
    .await;
    assert_nothing_lost(&run);
}

/// Kill -9 the primary of some partitions of a topic whose partitions lie on all three
/// primaries, while at least 3,000 jobs flow over it, with wait-replicas 1: the healthy
/// partitions keep delivering between the kill and the promotion (a reserve of the topic
/// is a call over every primary, which skips the dead one's partitions), besides what
/// [`failover_under_traffic`] checks (tokens strictly increase per job, at most one
/// successful ack per life, everything drained) and what [`assert_nothing_lost`] does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_topic_keeps_delivering_from_its_healthy_partitions_through_a_failover_issue_37()
 {
    // See: issue 37
    let run = failover_under_traffic(
        Flow::Partitioned(6),
        Some(1),
        3_000,
        Duration::from_secs(90),
    )
    .await;
    assert_nothing_lost(&run);
}

/// What a failover under traffic with wait-replicas 1 keeps, besides what
/// [`failover_under_traffic`] checks: every push answered with success is delivered and
/// acked; a job comes again only after a lease expired (a higher attempt number). An ack
/// that answered success is followed by another delivery of its job only when the job's
/// push was on its way as the primary died: redis-rs sends a call whose connection broke
/// again to the new primary, and a push that had landed (and replicated) and whose job was
/// delivered and acked there meanwhile creates the job again (a push is idempotent while
/// its job is live, not after). Each such job must be a new job (attempt 1) of the push to
/// the killed primary that spanned the kill.
fn assert_nothing_lost(run: &Run) {
    // Delivered again after an ack that answered success: only a job whose push spanned the
    // kill, as a new job (attempt 1).
    for i in run.recreated() {
        let lives = run.lives(i);
        assert!(
            run.spanning.contains(i),
            "{i} delivered again after an ack answered success, but its push did not span the kill: {lives:?}"
        );
        assert!(
            lives.iter().all(|life| life[0].attempt == 1),
            "{i} came back after its ack as the old job, not a new one: {lives:?}"
        );
    }
    // Every answered push was delivered and acked: by an ack that answered success, or by
    // one of unknown outcome after which the job never came again (and, the engine says,
    // no job is left).
    let unacked = run.unacked();
    assert!(unacked.is_empty(), "never acked: {unacked:?}");
    // Within one life, a job came again only after a lease expired: each delivery a higher
    // attempt.
    let twice = run.same_attempt();
    assert!(
        twice.is_empty(),
        "delivered twice without a lease expiry: {twice:?}"
    );
}

/// Kill -9 a primary while jobs flow over topics of all three primaries, without
/// wait-replicas: writes the dead primary answered before its replica had them may be lost
/// (a push gone, an ack undone, a lease back to an older state: RELIABILITY.md), so no
/// answered push is required to be delivered there. What holds all the same is what
/// [`failover_under_traffic`] checks: the healthy primaries flow on and lose nothing, tokens
/// strictly increase per job across the lost writes, a job comes again at the same attempt
/// only after a lease the dead primary may have lost, and every job left is drained. Counted
/// and printed: the answered pushes never delivered, the acked jobs delivered again, and
/// the deliveries again at the same attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_traffic_without_wait_replicas_keeps_the_others_flowing_issue_37() {
    // See: issue 37
    let run = failover_under_traffic(
        Flow::TopicsPerPrimary,
        None,
        10_000,
        Duration::from_secs(240),
    )
    .await;
    let never_delivered = run
        .answered
        .keys()
        .filter(|i| !run.deliveries.contains_key(*i))
        .count();
    let recreated = run.recreated();
    // Created again by the push re-sent through the failover (as with wait-replicas), rather
    // than brought back by a lost ack.
    let pushed_again = recreated
        .iter()
        .filter(|i| run.spanning.contains(**i) && run.lives(i).iter().all(|l| l[0].attempt == 1))
        .count();
    println!(
        "without wait-replicas: {never_delivered} answered pushes never delivered, {} never \
         acked, {} acked jobs delivered again ({pushed_again} of them new jobs of the push \
         that spanned the kill), {} deliveries again at the same attempt",
        run.unacked().len(),
        recreated.len(),
        run.same_attempt().len()
    );
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

/// The ACL user of the TLS clusters below (`delayq_testkit::ACL_RULES`: what delayq needs).
fn app_user() -> AclUser {
    AclUser::new("delayq-app", "app-s3cret")
}

/// A cluster that speaks only TLS, with [`app_user`] on every node.
fn tls_cluster(replicas: usize) -> RedisCluster {
    RedisCluster::start_with(ClusterOptions {
        replicas,
        tls: true,
        acl: Some(app_user()),
        ..ClusterOptions::default()
    })
}

/// The engine on a cluster that speaks only TLS and has an ACL user with just what delayq
/// needs: it connects with `rediss+cluster://user:password@...` and the CA, serves topics on
/// every primary, and a reserve waiting across primaries (one blocking connection per slot,
/// each over TLS as that user) wakes at once for a push from another engine.
#[tokio::test]
async fn works_over_tls_as_an_acl_user_on_every_primary_issue_13() {
    // See: issue 13
    let cluster = tls_cluster(1);
    let url = cluster.url();
    let prefix = format!("rediss+cluster://{}@127.0.0.1:", app_user().userinfo());
    assert!(url.starts_with(&prefix), "{url}");
    let config = || RedisConfig::new(cluster.url()).with_tls_ca_file(cluster.tls_ca_file());
    // A safety wake longer than every wait here: only a signal can wake the waiter in time.
    let waiter = RedisEngine::connect(config().with_safety_wake(Duration::from_secs(120)))
        .await
        .unwrap();
    let producer = RedisEngine::connect(config()).await.unwrap();
    let topics = topics_per_primary(&cluster, "tls");

    // A push to each primary, one reserve across them all, an ack of each.
    for (k, t) in topics.iter().enumerate() {
        let job = NewJob::new(t.clone(), format!("job {k}")).with_id(id(&format!("j{k}")));
        assert!(producer.push(job).await.unwrap().created);
    }
    let got = waiter
        .reserve(&Reserve::topics(topics.clone()).max(10))
        .await
        .unwrap();
    let mut bodies: Vec<&[u8]> = got.iter().map(|d| d.job.body.as_ref()).collect();
    bodies.sort();
    assert_eq!(bodies, [&b"job 0"[..], b"job 1", b"job 2"]);
    for d in &got {
        waiter.ack(d.lease.as_ref().unwrap()).await.unwrap();
    }
    for (k, t) in topics.iter().enumerate() {
        let left = producer.get(t, &id(&format!("j{k}"))).await.unwrap();
        assert!(left.is_none(), "acked, yet still there: {left:?}");
    }

    // Waits across the primaries: each wakes for a job pushed by the other engine.
    let req = Reserve::topics(topics.clone()).wait(Duration::from_secs(20));
    for (k, t) in topics.iter().enumerate() {
        let ready = blocked_as_app_user_on_every_primary(&cluster);
        let got = woken_by_a_push(
            &waiter,
            &producer,
            &req,
            t.clone(),
            &format!("woken {k}"),
            ready,
        )
        .await;
        waiter.ack(got[0].lease.as_ref().unwrap()).await.unwrap();
    }
}

/// Waits (at most 10 s) until every primary holds a blocked `BZPOPMIN` of the application's
/// user: the waker's per-node waits are up, each over TLS as that user. A wait starts at a
/// seed and follows MOVED to the slot's primary, two TLS handshakes that a busy machine may
/// stretch; a job pushed before then is still found, but later than a signal would bring it.
async fn blocked_as_app_user_on_every_primary(cluster: &RedisCluster) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in cluster.primaries() {
        let mut admin = cluster.server(p.port).connection().await;
        loop {
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut admin)
                .await
                .unwrap();
            let user = format!(" user={} ", app_user().name);
            if clients.lines().any(|l| {
                l.contains(&user) && l.contains(" cmd=bzpopmin ") && l.contains(" flags=b ")
            }) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no blocked wait of the ACL user on port {}:\n{clients}",
                p.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// On a TLS cluster with an ACL user, a wrong password is a configuration error that says
/// to check the credentials, and a client that does not trust the cluster's CA cannot
/// connect: both answer within the connect timeout, neither hangs.
#[tokio::test]
async fn a_wrong_password_or_an_untrusted_ca_fails_at_connect_issue_13() {
    // See: issue 13
    let cluster = tls_cluster(0);
    let user = app_user();
    let bounded = |what: &str, started: Instant| {
        let took = started.elapsed();
        assert!(took < Duration::from_secs(8), "{what} took {took:?}");
    };

    let wrong = cluster
        .url()
        .replace(&user.userinfo(), &format!("{}:wrong", user.name));
    assert_ne!(wrong, cluster.url());
    let started = Instant::now();
    let r =
        RedisEngine::connect(RedisConfig::new(wrong).with_tls_ca_file(cluster.tls_ca_file())).await;
    bounded("a wrong password", started);
    assert!(
        matches!(r, Err(Error::InvalidConfig { ref reason }) if reason.contains("password")),
        "{:?}",
        r.err()
    );

    // No credentials: the default user is password-protected.
    let anonymous = cluster.url().replace(&format!("{}@", user.userinfo()), "");
    let started = Instant::now();
    let r =
        RedisEngine::connect(RedisConfig::new(anonymous).with_tls_ca_file(cluster.tls_ca_file()))
            .await;
    bounded("no credentials", started);
    assert!(
        matches!(r, Err(Error::InvalidConfig { ref reason }) if reason.contains("password")),
        "{:?}",
        r.err()
    );

    // Another CA than the one that signed the nodes' certificates, then the system's roots.
    let other = RedisServer::start_with(RedisOptions {
        tls: true,
        ..RedisOptions::default()
    });
    for config in [
        RedisConfig::new(cluster.url()).with_tls_ca_file(other.tls_ca_file()),
        RedisConfig::new(cluster.url()),
    ] {
        let started = Instant::now();
        let r = RedisEngine::connect(config).await;
        bounded("an untrusted CA", started);
        let e = r
            .err()
            .expect("a certificate from an untrusted CA was accepted");
        assert!(e.to_string().contains("certificate"), "{e:?}");
    }
}

/// A plain `redis://` URL pointed at a cluster node is refused at connect, saying to use
/// `redis+cluster://`, instead of starting and then answering 503 to everything.
// See: issue 36
#[tokio::test]
async fn a_plain_redis_url_at_a_cluster_node_says_to_use_redis_cluster_issue_36() {
    let cluster = RedisCluster::start();
    let node = &cluster.primaries()[0];
    let r =
        RedisEngine::connect(RedisConfig::new(format!("redis://127.0.0.1:{}", node.port))).await;
    match r {
        Err(delayq_core::Error::InvalidConfig { reason }) => {
            assert!(reason.contains("redis+cluster://"), "{reason}");
        }
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("a plain URL at a cluster node was accepted"),
    }
}

/// Readiness on a cluster is the cluster's own verdict, which it reads with `CLUSTER INFO`
/// (allowed by `delayq_testkit::ACL_RULES`). A Redis user that may not run it (rules
/// written before readiness needed it) gets the check of one node, `TIME`, rather than an
/// error that would take every server out of its load balancer on upgrade. Nor does such a
/// user's connect fail on `CLUSTER SHARDS`, which those rules predate too (issue 37): a
/// slot found unreachable then takes only itself out, not its shard.
#[tokio::test]
async fn readiness_reads_the_cluster_state_or_without_the_permission_checks_a_node_issue_36() {
    // See: issue 36 (bug 7)
    let user = app_user();
    let cluster = RedisCluster::start_with(ClusterOptions {
        replicas: 0,
        acl: Some(user.clone()),
        ..ClusterOptions::default()
    });
    let old_rules = delayq_testkit::ACL_RULES
        .replace(" +cluster|info", "")
        .replace(" +cluster|shards", "");
    for rule in ["+cluster|info", "+cluster|shards"] {
        assert!(delayq_testkit::ACL_RULES.contains(rule) && !old_rules.contains(rule));
    }
    let mut admins = Vec::new();
    for n in cluster.nodes() {
        let mut admin = cluster.server(n.port).connection().await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("delayq-old")
            .arg("on")
            .arg(">old-s3cret")
            .arg(old_rules.split_whitespace().collect::<Vec<_>>())
            .query_async(&mut admin)
            .await
            .unwrap();
        admins.push(admin);
    }
    // Which of CLUSTER INFO and CLUSTER SHARDS some node refused.
    let denied = |admins: Vec<redis::aio::MultiplexedConnection>| async move {
        let mut log = String::new();
        for mut admin in admins {
            let entries: redis::Value = redis::cmd("ACL")
                .arg("LOG")
                .query_async(&mut admin)
                .await
                .unwrap();
            log.push_str(&format!("{entries:?}"));
        }
        (log.contains("cluster|info"), log.contains("cluster|shards"))
    };

    let app = engine(&cluster).await;
    assert_eq!(app.readiness().await.unwrap(), Readiness::Ready);
    assert_eq!(denied(admins.clone()).await, (false, false), "refused");

    let old_url = cluster
        .url()
        .replace(&user.userinfo(), "delayq-old:old-s3cret");
    let old = engine_with(&cluster, RedisConfig::new(old_url)).await;
    assert_eq!(old.readiness().await.unwrap(), Readiness::Ready);
    assert_eq!(denied(admins).await, (true, true), "not tried");
}
