//! Per-slot independence on a Redis Cluster (issue 37): a primary that hangs (SIGSTOP: its
//! connections stay open and nothing answers) holds up only its own topics. A reserve over
//! topics of two primaries answers the healthy one's jobs, an ack batch mixing them acks
//! the healthy leases and fails only the stopped slot's, a settle-and-reserve answers each
//! settlement from its own slot, and a long-poll over both wakes for a push to the healthy
//! one. Once the primary is continued, its jobs are delivered again, the ones a timed-out
//! reserve leased late among them (given back at once, not after their ttr), and every job
//! is delivered once and acked once.
//!
//! The bounds are about hanging or not, not speed: the stopped primary would hold a call for
//! the whole stop (the response timeout is 10 s), the slot timeout is 500 ms.
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delayq_core::{Delivery, Engine, Error, JobId, Lease, NewJob, Reserve, Settle, Settled, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{ClusterNode, RedisCluster, key_slot};

/// How long a call that must not wait on the stopped primary may take at most: the slot
/// timeout (500 ms) and the healthy primary's answer, with room for a busy machine.
const NOT_HELD: Duration = Duration::from_millis(2500);

/// The jobs' lease length: a job stranded by a lease nobody holds would come back only
/// after this, far beyond the test's bounds.
const TTR: Duration = Duration::from_secs(120);

/// A topic named `<name>-<n>` whose keys (under the default prefix) live on `primary`.
fn topic_on(primary: &ClusterNode, name: &str) -> Topic {
    (0..)
        .map(|n| format!("{name}-{n}"))
        .find(|t| primary.serves(key_slot(format!("delayq:{{{t}}}:wake"))))
        .map(|t| Topic::new(t).unwrap())
        .unwrap()
}

/// A SIGSTOPped process, continued (SIGCONT) when dropped, so that a failing test leaves no
/// stopped process behind.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Self {
        signal(pid, "-STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// Counts every delivery the test receives, by job id.
#[derive(Default)]
struct Seen(HashMap<String, usize>);

impl Seen {
    fn add(&mut self, ds: &[Delivery]) {
        for d in ds {
            *self.0.entry(d.job.id.as_str().to_string()).or_default() += 1;
        }
    }
}

fn leases(ds: &[Delivery]) -> Vec<Lease> {
    ds.iter().map(|d| d.lease.clone().unwrap()).collect()
}

/// Three primaries, no replicas (nobody to fail over to: the stopped primary stays the
/// owner of its slots), and a `cluster-node-timeout` longer than the test, so that the
/// others do not mark the stopped primary failed and the cluster stays up.
async fn cluster() -> RedisCluster {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(0))
        .await
        .unwrap();
    for node in cluster.nodes() {
        let mut c = cluster.server(node.port).connection().await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-node-timeout")
            .arg(120_000)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_primary_holds_up_only_its_own_topics_issue_37() {
    // See: issue 37
    let cluster = cluster().await;
    // The stopped primary does not hold the topic registry, which every process's first
    // push to a topic writes to.
    let registry = key_slot("delayq:topics");
    let primaries = cluster.primaries();
    let stopped_node = primaries.iter().find(|p| !p.serves(registry)).unwrap();
    let healthy_node = primaries.iter().find(|p| p.id != stopped_node.id).unwrap();
    let stalled = topic_on(stopped_node, "stalled");
    let healthy = topic_on(healthy_node, "healthy");
    let both = vec![stalled.clone(), healthy.clone()];
    // A response timeout longer than the stop, so that the calls the stopped primary holds
    // are answered when it is continued (a late reply that outlives it is lost, and the
    // jobs it leased wait for their ttr).
    let mut config = RedisConfig::new(cluster.url());
    config.response_timeout = Duration::from_secs(30);
    let engine = RedisEngine::connect(config.clone()).await.unwrap();
    let producer = RedisEngine::connect(config).await.unwrap();
    let mut seen = Seen::default();

    // The producer registers the healthy topic now, while every primary answers.
    producer
        .push(NewJob::new(healthy.clone(), "registers").with_ttr(TTR))
        .await
        .unwrap();
    let registers = engine
        .reserve(&Reserve::new(healthy.clone()).max(1))
        .await
        .unwrap();
    assert_eq!(registers[0].job.body.as_ref(), b"registers");
    engine
        .ack(registers[0].lease.as_ref().unwrap())
        .await
        .unwrap();

    let mut pushed = Vec::new();
    for t in &both {
        for i in 0..10 {
            let id = JobId::new(format!("{t}-{i}")).unwrap();
            let job = NewJob::new(t.clone(), "x").with_id(id).with_ttr(TTR);
            assert!(engine.push(job).await.unwrap().created);
            pushed.push((t.clone(), format!("{t}-{i}")));
        }
    }

    // Leases held across the stop: 4 of each topic.
    let held_s = engine
        .reserve(&Reserve::new(stalled.clone()).max(4))
        .await
        .unwrap();
    let held_h = engine
        .reserve(&Reserve::new(healthy.clone()).max(4))
        .await
        .unwrap();
    assert_eq!((held_s.len(), held_h.len()), (4, 4));
    seen.add(&held_s);
    seen.add(&held_h);

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);

    // (b) An ack batch mixing both topics' leases: the healthy ones are acked (and gone),
    // the stopped slot's fail with its own error once the slot timeout has passed.
    let (ride_s, held_s) = held_s.split_at(1);
    let (ride_h, held_h) = held_h.split_at(1);
    let mut batch = leases(held_h);
    batch.extend(leases(held_s));
    let t0 = Instant::now();
    let acked = engine.ack_batch(&batch).await.unwrap();
    let took = t0.elapsed();
    println!("an ack batch over both topics answered in {took:?}");
    assert!(took < NOT_HELD, "the ack batch took {took:?}");
    for (lease, r) in batch.iter().zip(&acked) {
        if lease.topic == healthy {
            assert!(r.is_ok(), "{lease:?}: {r:?}");
            assert!(engine.get(&healthy, &lease.id).await.unwrap().is_none());
        } else {
            assert!(
                matches!(r, Err(Error::Unavailable { .. })),
                "{lease:?}: {r:?}"
            );
        }
    }

    // (a) Once the stopped slot is no longer skipped (1 s after it timed out), a reserve
    // naming both topics answers the healthy topic's 6 other jobs, and none of the stopped
    // one's, without waiting for the stopped primary. It asks for more than the healthy
    // topic holds, so it also calls the stopped slot, whose call times out: when it runs
    // late, it leases the stopped topic's 6 free jobs, which must be given back (d).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let t0 = Instant::now();
    let got = engine
        .reserve(&Reserve::topics(both.clone()).max(100))
        .await
        .unwrap();
    let took = t0.elapsed();
    println!("a reserve over both topics answered in {took:?}");
    assert!(took < NOT_HELD, "the reserve took {took:?}");
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(got.iter().all(|d| d.job.topic == healthy), "{got:?}");
    seen.add(&got);

    // Again, now that the healthy topic is empty: nothing, not an error, and no wait (the
    // stopped slot is skipped for a while).
    let t0 = Instant::now();
    let none = engine
        .reserve(&Reserve::topics(both.clone()).max(100))
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    assert!(t0.elapsed() < NOT_HELD, "took {:?}", t0.elapsed());

    // A settle-and-reserve with settlements of both slots: each answers from its own slot.
    let mut settle = vec![Settle::Ack(leases(ride_s)[0].clone())];
    settle.extend(leases(ride_h).into_iter().map(Settle::Ack));
    settle.extend(leases(&got).into_iter().map(Settle::Ack));
    let t0 = Instant::now();
    let out = engine
        .settle_and_reserve(&settle, &Reserve::new(healthy.clone()).max(5))
        .await
        .unwrap();
    assert!(t0.elapsed() < NOT_HELD, "took {:?}", t0.elapsed());
    assert!(
        matches!(out.settled[0], Err(Error::Unavailable { .. })),
        "{:?}",
        out.settled
    );
    for (s, r) in settle.iter().zip(&out.settled).skip(1) {
        assert!(matches!(r, Ok(Settled::Acked)), "{s:?}: {r:?}");
        assert!(engine.get(&healthy, &s.lease().id).await.unwrap().is_none());
    }
    assert!(out.deliveries.is_empty(), "{:?}", out.deliveries);

    // (Waiting) A long-poll over both topics wakes for a push to the healthy one from
    // another process: the wait neither blocks on the stopped primary nor fails.
    let (w, req) = (
        engine.clone(),
        Reserve::topics(both.clone())
            .max(10)
            .wait(Duration::from_secs(20)),
    );
    let waiting = tokio::spawn(async move { w.reserve(&req).await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "the long-poll did not wait");
    let late_id = JobId::new("pushed-while-stopped").unwrap();
    producer
        .push(
            NewJob::new(healthy.clone(), "woken")
                .with_id(late_id.clone())
                .with_ttr(TTR),
        )
        .await
        .unwrap();
    let t0 = Instant::now();
    let woken = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the long-poll was not woken by the push to the healthy topic")
        .unwrap()
        .unwrap();
    println!("the long-poll was woken {:?} after the push", t0.elapsed());
    assert!(t0.elapsed() < NOT_HELD, "woken after {:?}", t0.elapsed());
    assert_eq!(woken.len(), 1, "{woken:?}");
    assert_eq!(woken[0].job.id, late_id);
    seen.add(&woken);
    engine.ack(woken[0].lease.as_ref().unwrap()).await.unwrap();

    // (c, d) The primary is back: the stopped topic's 6 jobs that no one held are
    // delivered again, those the timed-out reserve leased late among them, given back at
    // once rather than after their ttr (120 s).
    drop(stop);
    let continued = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut back = Vec::new();
    while back.len() < 6 && Instant::now() < deadline {
        let ds = engine
            .reserve(
                &Reserve::new(stalled.clone())
                    .max(10)
                    .wait(Duration::from_secs(2)),
            )
            .await
            .unwrap();
        back.extend(ds);
    }
    assert_eq!(
        back.len(),
        6,
        "the stopped topic's free jobs did not all come back: {back:?}"
    );
    println!(
        "the stopped topic's jobs came back within {:?} of the SIGCONT",
        continued.elapsed()
    );
    seen.add(&back);
    for r in engine.ack_batch(&leases(&back)).await.unwrap() {
        r.unwrap();
    }
    // The leases held across the stop: acked now (or already, by an ack sent during the
    // stop that ran once the primary was back, although it answered an error then).
    let mut rest = leases(held_s);
    rest.extend(leases(ride_s));
    for (lease, r) in rest.iter().zip(engine.ack_batch(&rest).await.unwrap()) {
        assert!(
            r.is_ok() || matches!(r, Err(Error::NotFound { .. })),
            "{lease:?}: {r:?}"
        );
    }

    // Every job was delivered exactly once, and none is left.
    for (t, id) in &pushed {
        assert_eq!(seen.0.get(id), Some(&1), "{id}: {:?}", seen.0.get(id));
        assert!(
            engine
                .get(t, &JobId::new(id.as_str()).unwrap())
                .await
                .unwrap()
                .is_none(),
            "{id} is left"
        );
    }
    assert!(seen.0.values().all(|&n| n == 1), "{:?}", seen.0);
    for t in &both {
        let stats = engine.stats(t).await.unwrap();
        assert_eq!(stats, delayq_core::TopicStats::default(), "{t}: {stats:?}");
    }
}
