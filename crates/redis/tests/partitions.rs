//! Partitioned topics on Redis (issue 18): where the jobs of a topic of several partitions
//! live (a partition each, by a hash of the id), by-id operations that stay exact, the topic
//! operations over every partition, a reserve that spreads over the partitions and serves a
//! quiet one while another is flooded, changes of the count (refused while jobs exist,
//! followed by a process that still holds the old count), and the partitions spread over a
//! cluster's primaries.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_core::{
    Engine, Error, JobId, JobState, NewJob, Reserve, Schedule, Settle, Timestamp, Topic,
    TopicConfig, partition_of,
};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisCluster, RedisServer, commands_run, key_slot};
use redis::AsyncCommands;

fn topic(s: &str) -> Topic {
    Topic::new(s).unwrap()
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

async fn engine(url: String) -> RedisEngine {
    RedisEngine::connect(RedisConfig::new(url)).await.unwrap()
}

fn partitions(n: u16) -> TopicConfig {
    TopicConfig {
        partitions: Some(n),
        ..TopicConfig::default()
    }
}

/// Ids `<prefix>-<i>` whose partition among `n` is `p`, `count` of them.
fn ids_in(prefix: &str, n: u16, p: u16, count: usize) -> Vec<JobId> {
    (0..)
        .map(|i| id(&format!("{prefix}-{i}")))
        .filter(|j| partition_of(j, n) == p)
        .take(count)
        .collect()
}

/// Acks every delivery of `got` in one batch; each ack answers success.
async fn ack_all(e: &RedisEngine, got: &[delayq_core::Delivery]) {
    let leases: Vec<_> = got.iter().map(|d| d.lease.clone().unwrap()).collect();
    let acks = e.ack_batch(&leases).await.unwrap();
    assert!(acks.iter().all(|r| r.is_ok()), "{acks:?}");
}

/// Every `jobs` hash of topic `t` (its home and its partitions), with the ids it holds.
async fn jobs_hashes(
    conn: &mut redis::aio::MultiplexedConnection,
    t: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let keys: Vec<String> = conn.keys(format!("delayq:{{{t}*}}:jobs")).await.unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let fields: Vec<String> = conn.hkeys(&k).await.unwrap();
        // A leased job's token field is " <id>": not a job of its own.
        let ids = fields.into_iter().filter(|f| !f.starts_with(' ')).collect();
        out.insert(k, ids);
    }
    out
}

/// A topic of 8 partitions: each job is stored in exactly one partition, the one its id
/// hashes to (generated ids too), and the 8 partitions are 8 keys of their own; push by id
/// is idempotent, get, delete and reschedule find each job; stats add every partition up;
/// list walks every partition with one cursor, in the sets' order; one batch reserve takes
/// from several partitions; pause, kick-all and purge act on all of them.
#[tokio::test]
async fn a_topic_of_eight_partitions_keeps_every_operation_exact_issue_18() {
    let server = RedisServer::start();
    let e = engine(server.url()).await;
    let mut conn = server.connection().await;
    let t = topic("orders.cancel");
    e.set_topic_config(&t, &partitions(8)).await.unwrap();

    // 120 jobs with ids in one batch (many partitions: checked whole first), 40 without.
    let named: Vec<NewJob> = (0..120)
        .map(|i| {
            NewJob::new(t.clone(), format!("body {i}"))
                .with_id(id(&format!("o-{i}")))
                .with_delay(Duration::from_secs(3600 + i))
        })
        .collect();
    let pushed = e.push_batch(named.clone()).await.unwrap();
    assert!(pushed.iter().all(|p| p.created));
    let mut generated = Vec::new();
    for i in 0..40 {
        let p = e
            .push(NewJob::new(t.clone(), format!("gen {i}")).with_delay(Duration::from_secs(7200)))
            .await
            .unwrap();
        generated.push(p.id);
    }
    let again = e.push_batch(named.clone()).await.unwrap();
    assert!(
        again.iter().all(|p| !p.created),
        "a second push of the same ids created a job"
    );

    let hashes = jobs_hashes(&mut conn, t.as_str()).await;
    assert_eq!(
        hashes.len(),
        8,
        "8 partitions hold jobs: {:?}",
        hashes.keys()
    );
    assert!(
        !hashes.contains_key("delayq:{orders.cancel}:jobs"),
        "the home holds no job when there are partitions"
    );
    let mut seen = BTreeSet::new();
    let mut indexes = BTreeSet::new();
    for ids in hashes.values() {
        let parts: BTreeSet<u16> = ids.iter().map(|j| partition_of(&id(j), 8)).collect();
        assert_eq!(parts.len(), 1, "one hash holds jobs of several partitions");
        indexes.extend(parts);
        for j in ids {
            assert!(seen.insert(j.clone()), "{j} is stored twice");
        }
    }
    assert_eq!(indexes.len(), 8);
    assert_eq!(seen.len(), 160);

    for (i, j) in named.iter().enumerate() {
        let got = e.get(&t, &j.id).await.unwrap().unwrap();
        assert_eq!(
            (got.topic.clone(), got.body.as_ref()),
            (t.clone(), format!("body {i}").as_bytes())
        );
    }
    for g in &generated {
        assert!(e.get(&t, g).await.unwrap().is_some(), "{g}");
    }
    for j in &named[..10] {
        assert!(e.delete(&t, &j.id).await.unwrap());
        assert!(!e.delete(&t, &j.id).await.unwrap());
        assert!(e.get(&t, &j.id).await.unwrap().is_none());
    }
    for j in &named[10..20] {
        e.reschedule(&t, &j.id, Schedule::Delay(Duration::ZERO))
            .await
            .unwrap();
    }
    let stats = e.stats(&t).await.unwrap();
    assert_eq!((stats.delayed, stats.ready), (140, 10), "{stats:?}");

    // List the delayed jobs 7 at a time: each once, in (due time, id) order.
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let page = e
            .list(&t, JobState::Delayed, 7, cursor.as_ref())
            .await
            .unwrap();
        assert!(page.jobs.len() <= 7);
        listed.extend(page.jobs);
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(listed.len(), 140);
    let keys: Vec<(u64, String)> = listed
        .iter()
        .map(|j| (j.ready_at.as_millis(), j.id.as_str().to_string()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        keys, sorted,
        "the merged pages are in (due, id) order, each job once"
    );

    // One reserve of up to 50 takes the 10 ready jobs from their several partitions.
    let got = e.reserve(&Reserve::new(t.clone()).max(50)).await.unwrap();
    let parts: BTreeSet<u16> = got.iter().map(|d| partition_of(&d.job.id, 8)).collect();
    assert_eq!(got.len(), 10);
    assert!(parts.len() > 1, "{parts:?}");
    ack_all(&e, &got).await;

    // Pause: every partition stops handing out jobs until resumed.
    e.pause(&t, None).await.unwrap();
    for j in &named[20..30] {
        e.reschedule(&t, &j.id, Schedule::Delay(Duration::ZERO))
            .await
            .unwrap();
    }
    assert!(
        e.reserve(&Reserve::new(t.clone()).max(50))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(e.stats(&t).await.unwrap().paused_until.is_some());
    e.pause(&t, Some(Timestamp::from_millis(1))).await.unwrap();
    assert_eq!(
        e.reserve(&Reserve::new(t.clone()).max(50))
            .await
            .unwrap()
            .len(),
        10
    );

    // Bury 20 waiting jobs across the partitions; kick-all brings every one back.
    for j in &named[40..60] {
        e.bury_waiting(&t, &j.id, Some("test".into()))
            .await
            .unwrap();
    }
    assert_eq!(e.stats(&t).await.unwrap().dead, 20);
    assert_eq!(e.kick_all(&t).await.unwrap(), 20);
    assert_eq!(e.stats(&t).await.unwrap().dead, 0);

    // Purge empties every partition and takes the topic out of the list.
    assert!(e.topics().await.unwrap().contains(&t));
    let total = e.stats(&t).await.unwrap();
    let n = total.delayed + total.ready + total.reserved + total.dead;
    assert_eq!(e.purge(&t).await.unwrap(), n);
    assert!(jobs_hashes(&mut conn, t.as_str()).await.is_empty());
    assert!(!e.topics().await.unwrap().contains(&t));
    assert_eq!(e.topic_config(&t).await.unwrap(), partitions(8));
}

/// A process that read a topic's count before it changed still stores each job where the
/// new count puts it (the partition it writes answers the new count, and it routes again),
/// and finds a job by id that another process pushed under the new count. A change refused
/// because the topic holds jobs leaves every partition's settings as they were.
#[tokio::test]
async fn a_process_holding_the_old_count_follows_a_change_issue_18() {
    let server = RedisServer::start();
    let (admin, stale) = (engine(server.url()).await, engine(server.url()).await);
    let mut conn = server.connection().await;
    let t = topic("resized");

    // `stale` reads the count (1) with a push, then the topic empties and gets 8.
    stale
        .push(NewJob::new(t.clone(), "warm").with_id(id("warm")))
        .await
        .unwrap();
    admin.delete(&t, &id("warm")).await.unwrap();
    admin.set_topic_config(&t, &partitions(8)).await.unwrap();
    let jobs: Vec<NewJob> = (0..64)
        .map(|i| NewJob::new(t.clone(), "x").with_id(id(&format!("s-{i}"))))
        .collect();
    assert!(
        stale
            .push_batch(jobs.clone())
            .await
            .unwrap()
            .iter()
            .all(|p| p.created)
    );
    let hashes = jobs_hashes(&mut conn, t.as_str()).await;
    assert!(
        !hashes.contains_key("delayq:{resized}:jobs"),
        "a job went to the home"
    );
    for ids in hashes.values() {
        let parts: BTreeSet<u16> = ids.iter().map(|j| partition_of(&id(j), 8)).collect();
        assert_eq!(parts.len(), 1, "a job went to another partition: {ids:?}");
    }
    for j in &jobs {
        assert!(admin.get(&t, &j.id).await.unwrap().is_some(), "{}", j.id);
    }

    // `stale` holds 8; the topic empties, is paused and gets 3: the pause holds on the new
    // partitions; `admin` pushes; `stale` finds it.
    assert_eq!(admin.purge(&t).await.unwrap(), 64);
    admin.pause(&t, None).await.unwrap();
    admin.set_topic_config(&t, &partitions(3)).await.unwrap();
    assert_eq!(
        admin.stats(&t).await.unwrap().paused_until,
        Some(Timestamp::NEVER)
    );
    for i in 0..12 {
        let j = NewJob::new(t.clone(), "p").with_id(id(&format!("p-{i}")));
        admin.push(j).await.unwrap();
    }
    let got = stale
        .reserve(&Reserve::new(t.clone()).max(50))
        .await
        .unwrap();
    assert!(
        got.is_empty(),
        "a paused topic delivered {} jobs",
        got.len()
    );
    admin.resume(&t).await.unwrap();
    assert_eq!(admin.purge(&t).await.unwrap(), 12);
    admin
        .push(NewJob::new(t.clone(), "new").with_id(id("after")))
        .await
        .unwrap();
    assert!(stale.get(&t, &id("after")).await.unwrap().is_some());

    // Refused while a job exists: nothing written anywhere.
    let configs = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let keys: Vec<String> = conn.keys("delayq:{resized*}:config").await.unwrap();
            let mut all = BTreeMap::new();
            for k in keys {
                let h: BTreeMap<String, String> = conn.hgetall(&k).await.unwrap();
                all.insert(k, h);
            }
            all
        }
    };
    let before = configs(&mut conn).await;
    match stale.set_topic_config(&t, &partitions(4)).await {
        Err(Error::PartitionsInUse { from: 3, to: 4, .. }) => {}
        other => panic!("expected partitions_in_use 3 -> 4, got {other:?}"),
    }
    assert_eq!(configs(&mut conn).await, before, "a refused change wrote");
    // Other settings still change with the count kept.
    let with_ttr = TopicConfig {
        ttr: Some(Duration::from_secs(5)),
        ..partitions(3)
    };
    stale.set_topic_config(&t, &with_ttr).await.unwrap();
    assert_eq!(configs(&mut conn).await.len(), before.len());
    let mut parts = BTreeSet::new();
    for i in 0..20 {
        let j = id(&format!("late-{i}"));
        stale
            .push(NewJob::new(t.clone(), "y").with_id(j.clone()))
            .await
            .unwrap();
        let job = admin.get(&t, &j).await.unwrap().unwrap();
        assert_eq!(
            job.ttr,
            Duration::from_secs(5),
            "every partition has the new ttr"
        );
        parts.insert(partition_of(&j, 3));
    }
    assert_eq!(parts.len(), 3);
}

/// The id of the quiet job: in partition 2 of 4, the flood is in 0.
fn quiet_id() -> JobId {
    ids_in("quiet", 4, 2, 1).remove(0)
}

/// A job due in a quiet partition is delivered while another partition of the topic is
/// flooded with ready jobs: reserves start at a random partition, so the quiet one is looked
/// at long before the flood is drained (with one partition, the job, due last, would come
/// after every flooded job).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_partition_is_served_while_another_is_flooded_issue_18() {
    let server = RedisServer::start();
    let e = engine(server.url()).await;
    let t = topic("flood");
    e.set_topic_config(&t, &partitions(4)).await.unwrap();
    const FLOOD: usize = 20_000;
    let flood = ids_in("f", 4, 0, FLOOD);
    for chunk in flood.chunks(1000) {
        let jobs = chunk
            .iter()
            .map(|j| NewJob::new(t.clone(), "flood").with_id(j.clone()))
            .collect();
        e.push_batch(jobs).await.unwrap();
    }

    let delivered = Arc::new(AtomicUsize::new(0));
    let consumer = {
        let (e, t, delivered) = (e.clone(), t.clone(), delivered.clone());
        tokio::spawn(async move {
            let mut settle = Vec::new();
            let started = Instant::now();
            loop {
                let req = Reserve::new(t.clone())
                    .max(10)
                    .wait(Duration::from_millis(500));
                let got = e.settle_and_reserve(&settle, &req).await.unwrap();
                settle.clear();
                for d in &got.deliveries {
                    if d.job.id == quiet_id() {
                        return (
                            delivered.load(Ordering::SeqCst),
                            d.lateness,
                            started.elapsed(),
                        );
                    }
                    delivered.fetch_add(1, Ordering::SeqCst);
                    settle.push(Settle::Ack(d.lease.clone().unwrap()));
                }
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "the quiet job never came"
                );
            }
        })
    };
    while delivered.load(Ordering::SeqCst) < 500 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    e.push(
        NewJob::new(t.clone(), "quiet")
            .with_id(quiet_id())
            .with_delay(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    let (before, lateness, _) = consumer.await.unwrap();
    println!(
        "the quiet partition's job came {lateness:?} after its due time, {before} of {FLOOD} flooded jobs delivered by then"
    );
    assert!(
        before < FLOOD * 9 / 10,
        "the quiet job waited for {before} of {FLOOD} flooded jobs"
    );
}

/// Redis commands per second per reserver of 20 reservers looping on empty topics of `n`
/// partitions (each its own topic, 5 s long-polls, as a worker does), over 12 s after
/// every reserver's first call.
async fn idle_cost(server: &RedisServer, n: u16) -> f64 {
    let engines = [engine(server.url()).await, engine(server.url()).await];
    let mut tasks = Vec::new();
    for i in 0..20 {
        let e = engines[i % 2].clone();
        let t = topic(&format!("idle-{n}-{i}"));
        e.set_topic_config(&t, &partitions(n)).await.unwrap();
        tasks.push(tokio::spawn(async move {
            loop {
                let got = e
                    .reserve(&Reserve::new(t.clone()).wait(Duration::from_secs(5)))
                    .await
                    .unwrap();
                assert!(got.is_empty(), "nothing was pushed");
            }
        }));
    }
    let mut conn = server.connection().await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let before = commands_run(&mut conn).await;
    let window = Duration::from_secs(12);
    tokio::time::sleep(window).await;
    // The INFO call that read `before` is counted in the second.
    let commands = commands_run(&mut conn).await - before - 1;
    for t in &tasks {
        assert!(!t.is_finished(), "a reserver stopped: {t:?}");
    }
    for t in tasks {
        t.abort();
    }
    commands as f64 / 20.0 / window.as_secs_f64()
}

/// A reserver waiting on a topic of 16 partitions costs Redis no more commands than one on
/// a topic of one (goal: at most 0.2 per second for a worker's 30 s long-polls; these loop
/// every 5 s, six times as often): its first call looks at every partition, and a call that
/// follows a long-poll that ended with nothing looks at one, the others' events coming as
/// signals to its wait (`reserve::Look::First`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_reserver_on_sixteen_partitions_costs_what_one_costs_issue_18() {
    let server = RedisServer::start();
    let one = idle_cost(&server, 1).await;
    let sixteen = idle_cost(&server, 16).await;
    println!(
        "idle cost per reserver, 5 s long-polls: {one:.3} commands/s on 1 partition, {sixteen:.3} on 16"
    );
    assert!(
        sixteen <= one * 1.25 + 0.05,
        "16 partitions: {sixteen:.3} commands/s, 1 partition: {one:.3}"
    );
    // A worker's long-polls last 30 s: six times fewer calls than these.
    assert!(sixteen / 6.0 <= 0.2, "{sixteen:.3}");
}

/// On a 3-primary cluster, a topic of 6 partitions keeps 2 partitions on each primary; each
/// operation works across them.
#[tokio::test]
async fn six_partitions_spread_two_per_primary_on_a_cluster_issue_18() {
    let cluster = RedisCluster::shared();
    let e = engine(cluster.url()).await;
    let t = topic("spread-w9");
    e.set_topic_config(&t, &partitions(6)).await.unwrap();
    let jobs: Vec<NewJob> = (0..600)
        .map(|i| NewJob::new(t.clone(), "x").with_id(id(&format!("c-{i}"))))
        .collect();
    e.push_batch(jobs.clone()).await.unwrap();

    let mut per_primary: HashMap<String, usize> = HashMap::new();
    let mut total = 0;
    for node in cluster.primaries() {
        let client = redis::Client::open(node.url()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = c.keys("delayq:{spread-w9~*}:jobs").await.unwrap();
        for k in &keys {
            assert!(node.serves(key_slot(k)));
            let n: usize = c.hlen(k).await.unwrap();
            total += n;
        }
        per_primary.insert(node.url(), keys.len());
    }
    assert_eq!(total, 600);
    assert!(
        per_primary.values().all(|&n| n == 2),
        "partitions per primary: {per_primary:?}"
    );

    let got = e.reserve(&Reserve::new(t.clone()).max(1000)).await.unwrap();
    assert_eq!(got.len(), 600, "one reserve takes from every partition");
    ack_all(&e, &got).await;
    assert_eq!(
        e.stats(&t).await.unwrap(),
        delayq_core::TopicStats::default()
    );
    e.purge(&t).await.unwrap();
}
