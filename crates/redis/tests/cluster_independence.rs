//! Per-slot independence on a Redis Cluster (issue 37): a primary that hangs (SIGSTOP: its
//! connections stay open and nothing answers) holds up only its own topics. A reserve over
//! topics of two primaries answers the healthy one's jobs, an ack batch mixing them acks
//! the healthy leases and fails only the stopped slot's, a settle-and-reserve answers each
//! settlement from its own slot, and a long-poll over both wakes for a push to the healthy
//! one. Once the primary is continued, its jobs are delivered again, the ones a timed-out
//! reserve leased late among them (given back at once, not after their ttr), and every job
//! is delivered once and acked once.
//!
//! A pass over several topics of the stopped primary waits for it once: the other slots of
//! its shard are skipped, by later passes too for as long as the primary does not answer the
//! probe of its shard, and no longer once it does.
//!
//! The bounds are about hanging or not, not speed: the stopped primary would hold a call for
//! the whole stop (the response timeout is 10 s), the slot timeout is 500 ms (2 s in the
//! test that counts the waits, where one wait and two are far apart).
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delayq_core::{Delivery, Engine, Error, JobId, Lease, NewJob, Reserve, Settle, Settled, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisCluster, Stopped, key_slot};

/// How long a call that must not wait on the stopped primary may take at most: the slot
/// timeout (500 ms) and the healthy primary's answer, with room for a busy machine.
const NOT_HELD: Duration = Duration::from_millis(2500);

/// The jobs' lease length: a job stranded by a lease nobody holds would come back only
/// after this, far beyond the test's bounds.
const TTR: Duration = Duration::from_secs(120);

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

/// A reserve of up to 100 jobs over `topics`, and how long it took to answer.
async fn timed_reserve(engine: &RedisEngine, topics: &[Topic]) -> (Vec<Delivery>, Duration) {
    let t0 = Instant::now();
    let got = engine
        .reserve(&Reserve::topics(topics.to_vec()).max(100))
        .await
        .unwrap();
    (got, t0.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_primary_holds_up_only_its_own_topics_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    let (stopped_node, healthy_node) = &cluster.stoppable_and_healthy();
    let stalled = Topic::new(stopped_node.topic_named("stalled")).unwrap();
    let healthy = Topic::new(healthy_node.topic_named("healthy")).unwrap();
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

    // (a) A reserve naming both topics answers the healthy topic's 6 other jobs, and none
    // of the stopped one's, after one slot timeout. It asks for more than the healthy topic
    // holds, so it also calls the stopped slot, whose call times out: when it runs late, it
    // leases the stopped topic's 6 free jobs, which must be given back (d).
    let (got, took) = timed_reserve(&engine, &both).await;
    println!("a reserve over both topics answered in {took:?}");
    assert!(took < NOT_HELD, "the reserve took {took:?}");
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(got.iter().all(|d| d.job.topic == healthy), "{got:?}");
    seen.add(&got);

    // (b) An ack batch mixing both topics' leases: the healthy ones are acked (and gone),
    // the stopped slot's fail with its own error (the slot is skipped now: its probe gets
    // no answer).
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

    // Again, now that the healthy topic is empty: nothing, not an error, and no wait (the
    // stopped slot is skipped while its probe gets no answer).
    let (none, took) = timed_reserve(&engine, &both).await;
    assert!(none.is_empty(), "{none:?}");
    assert!(took < NOT_HELD, "took {took:?}");

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

/// A hung primary costs a reserve pass one slot timeout, however many of the request's
/// topics it serves: once one of its slots has not answered in time, the others of its
/// shard are skipped without a wait (they would only wait again), for as long as it does
/// not answer its probe, so later passes do not wait on it either; once it answers, its
/// topics are served again at once. Before, each of its slots cost a slot timeout in turn,
/// a mark ran out after 1 s, shorter than the slot timeout with wait-replicas, while the
/// pass still waited on the next slot, and later a skip ran out while the primary was
/// still down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_primary_costs_a_reserve_one_slot_timeout_whatever_its_topics_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    let (stopped_node, healthy_node) = &cluster.stoppable_and_healthy();
    let stalled: Vec<Topic> = ["one", "two", "three"]
        .iter()
        .map(|n| Topic::new(stopped_node.topic_named(n)).unwrap())
        .collect();
    let slots: std::collections::HashSet<u16> = stalled
        .iter()
        .map(|t| key_slot(format!("delayq:{{{t}}}:wake")))
        .collect();
    assert_eq!(slots.len(), 3, "{stalled:?} share a slot");
    let healthy = Topic::new(healthy_node.topic_named("healthy")).unwrap();
    let mut every = stalled.clone();
    every.push(healthy.clone());
    // A slot timeout long enough that one wait and several are far apart on a busy
    // machine: 2 s, where the stopped primary's three slots in turn would take 6 s.
    let slot_timeout = Duration::from_secs(2);
    let mut config = RedisConfig::new(cluster.url()).with_slot_timeout(slot_timeout);
    config.response_timeout = Duration::from_secs(30);
    let engine = RedisEngine::connect(config).await.unwrap();
    for i in 0..10 {
        let id = JobId::new(format!("h-{i}")).unwrap();
        let job = NewJob::new(healthy.clone(), "x").with_id(id).with_ttr(TTR);
        assert!(engine.push(job).await.unwrap().created);
    }
    // Every topic's layout known (and registered) while every primary answers.
    let warm = engine
        .reserve(&Reserve::topics(every.clone()).max(1))
        .await
        .unwrap();
    assert_eq!(warm.len(), 1, "{warm:?}");
    let mut held = warm;

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);

    // One wait for the stopped primary, then its other slots skipped. The reserve asks for
    // more than there is, so that it looks at every topic.
    let (got, took) = timed_reserve(&engine, &every).await;
    println!("a reserve over 3 topics of a stopped primary and a healthy one took {took:?}");
    assert_eq!(got.len(), 9, "{got:?}");
    assert!(got.iter().all(|d| d.job.topic == healthy), "{got:?}");
    assert!(
        took < 2 * slot_timeout,
        "the reserve took {took:?}: it waited on the stopped primary more than once"
    );
    held.extend(got);

    // The next pass skips all of them: no wait (and nothing left on the healthy topic).
    let (got, took) = timed_reserve(&engine, &every).await;
    println!("the next reserve took {took:?}");
    assert!(got.is_empty(), "{got:?}");
    assert!(took < slot_timeout, "the next reserve took {took:?}");

    // A request of the stopped primary's topics only: all of them unreachable, so the pass
    // asks again, and waits once, not once per topic.
    let t0 = Instant::now();
    let r = engine
        .reserve(&Reserve::topics(stalled.clone()).max(5))
        .await;
    let took = t0.elapsed();
    println!("a reserve over the stopped primary's 3 topics alone took {took:?}");
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
    assert!(
        took < 2 * slot_timeout,
        "the reserve took {took:?}: it waited on the stopped primary more than once"
    );

    // The primary stays stopped past the skip period (twice the slot timeout): the probe of
    // its shard gets no answer, so its topics stay skipped and a pass over every topic
    // still does not wait on it. Before the probe, the skip ran out and such a pass waited
    // a slot timeout again, once per skip period for as long as the primary was down.
    tokio::time::sleep(2 * slot_timeout + Duration::from_secs(1)).await;
    assert_eq!(engine.unreachable(&every), stalled);
    let (got, took) = timed_reserve(&engine, &every).await;
    println!("a reserve past the skip period took {took:?}");
    assert!(got.is_empty(), "{got:?}");
    assert!(took < slot_timeout, "the reserve took {took:?}");

    // It answers again: the probe's PING is answered, and the topics are no longer skipped,
    // without waiting for a skip period to run out and without a call of their own.
    drop(stop);
    let continued = Instant::now();
    while !engine.unreachable(&every).is_empty() {
        assert!(
            continued.elapsed() < slot_timeout,
            "still skipped {:?} after the primary was continued",
            continued.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "the stopped primary's topics were reachable again {:?} after it was continued",
        continued.elapsed()
    );

    for r in engine.ack_batch(&leases(&held)).await.unwrap() {
        r.unwrap();
    }
    let stats = engine.stats(&healthy).await.unwrap();
    assert_eq!(stats, delayq_core::TopicStats::default(), "{stats:?}");
}

/// A killed primary (no replica takes its slots over, and the others do not mark it failed
/// within the test) stays skipped for as long as it is dead: the probe of its shard reads a
/// key of its slot, which no other node answers. A `PING` probe was answered (redis-rs sends
/// a call for a node it cannot connect to another node), ended the skip at once, and every
/// pass over its topics waited a slot timeout again: W8's failover under load found it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_stays_skipped_while_it_is_dead_issue_37() {
    // See: issue 37
    let mut cluster = RedisCluster::start_for_stopping().await;
    let (dead_node, healthy_node) = cluster.stoppable_and_healthy();
    let dead = Topic::new(dead_node.topic_named("dead")).unwrap();
    let healthy = Topic::new(healthy_node.topic_named("healthy")).unwrap();
    let both = vec![dead.clone(), healthy.clone()];
    let engine = RedisEngine::connect(RedisConfig::new(cluster.url()))
        .await
        .unwrap();
    for t in &both {
        let job = NewJob::new(t.clone(), "x").with_ttr(TTR);
        assert!(engine.push(job).await.unwrap().created);
    }
    let warm = engine
        .reserve(&Reserve::topics(both.clone()).max(2))
        .await
        .unwrap();
    assert_eq!(warm.len(), 2, "{warm:?}");

    cluster.kill_node(dead_node.port);
    let pushed = NewJob::new(healthy.clone(), "after the kill").with_ttr(TTR);
    assert!(engine.push(pushed).await.unwrap().created);
    let (got, took) = timed_reserve(&engine, &both).await;
    println!("the first reserve after the kill took {took:?}");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].job.topic, healthy, "{got:?}");
    assert_eq!(engine.unreachable(&both), vec![dead.clone()]);

    // Three skip periods (1 s each) later it is still skipped, every time it is asked.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        assert_eq!(
            engine.unreachable(&both),
            vec![dead.clone()],
            "reachable again {:?} after the first reserve, with its primary dead",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first call over topics of several primaries that meets a killed primary does not
/// wait the slot timeout: such calls go through a connection that gives up after few
/// retries, so the refused connection (and the other nodes' `MOVED` to the dead address)
/// ends the dead slot's call within milliseconds, and its shard is skipped from then on.
/// With a slot timeout of 5 s, the reserve answers the healthy topic's job and names the
/// dead one unreachable in well under half of it, and so does an ack batch over both; with
/// one connection (its long retries) the reserve waited the whole 5 s. How long it takes under
/// load is W8's to measure (BENCHMARKS.md), not this test's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_that_meets_a_killed_primary_does_not_wait_the_slot_timeout_issue_37() {
    // See: issue 37
    const SLOT_TIMEOUT: Duration = Duration::from_secs(5);
    let mut cluster = RedisCluster::start_for_stopping().await;
    let (dead_node, healthy_node) = cluster.stoppable_and_healthy();
    let dead = Topic::new(dead_node.topic_named("dead")).unwrap();
    let healthy = Topic::new(healthy_node.topic_named("healthy")).unwrap();
    let both = vec![dead.clone(), healthy.clone()];
    let config = RedisConfig::new(cluster.url()).with_slot_timeout(SLOT_TIMEOUT);
    let engine = RedisEngine::connect(config).await.unwrap();
    for t in both.iter().chain(&both) {
        let job = NewJob::new(t.clone(), "x").with_ttr(TTR);
        assert!(engine.push(job).await.unwrap().created);
    }
    // One job of each topic leased, one of each left.
    let mut warm = Vec::new();
    for t in &both {
        warm.extend(engine.reserve(&Reserve::new(t.clone())).await.unwrap());
    }
    assert_eq!(warm.len(), 2, "{warm:?}");

    cluster.kill_node(dead_node.port);
    let (got, took) = timed_reserve(&engine, &both).await;
    println!("the first reserve after the kill took {took:?}");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].job.topic, healthy, "{got:?}");
    assert!(
        took < SLOT_TIMEOUT / 2,
        "the first reserve after the kill took {took:?}: it waited for the dead primary (slot timeout {SLOT_TIMEOUT:?})"
    );
    assert_eq!(engine.unreachable(&both), vec![dead.clone()]);

    // The warm leases, one of each topic, in one batch: the healthy one is acked, the dead
    // one answers unavailable, and the batch does not wait for it either.
    let t0 = Instant::now();
    let acks = engine.ack_batch(&leases(&warm)).await.unwrap();
    let took = t0.elapsed();
    for (d, r) in warm.iter().zip(&acks) {
        if d.job.topic == healthy {
            assert!(r.is_ok(), "{r:?}");
        } else {
            assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
        }
    }
    assert!(took < SLOT_TIMEOUT / 2, "the ack batch took {took:?}");
}

/// A batch push over a topic of a stopped primary and one of a healthy primary stores the
/// healthy topic's jobs within the slot timeout and fails only the stopped one's
/// (`Engine::push_each`); `push_batch` answers the stopped slot's error as fast. Sent again
/// with the same ids once the primary answers, every job is stored once. Both once waited
/// for the stopped primary for the response timeout (30 s here) and failed whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_push_fails_only_the_jobs_of_a_stopped_primary_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    let (stopped_node, healthy_node) = &cluster.stoppable_and_healthy();
    let stalled = Topic::new(stopped_node.topic_named("stalled")).unwrap();
    let healthy = Topic::new(healthy_node.topic_named("healthy")).unwrap();
    let mut config = RedisConfig::new(cluster.url());
    config.response_timeout = Duration::from_secs(30);
    let engine = RedisEngine::connect(config).await.unwrap();
    let jobs = || -> Vec<NewJob> {
        [&stalled, &healthy, &stalled, &healthy]
            .iter()
            .enumerate()
            .flat_map(|(k, t)| {
                (0..5).map(move |i| {
                    let id = JobId::new(format!("{t}-{k}-{i}")).unwrap();
                    NewJob::new((*t).clone(), "x").with_id(id).with_ttr(TTR)
                })
            })
            .collect()
    };
    // Both topics registered (and their counts read) while every primary answers.
    for t in [&stalled, &healthy] {
        engine.push(NewJob::new(t.clone(), "first")).await.unwrap();
    }

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);
    let t0 = Instant::now();
    let answers = engine.push_each(jobs()).await.unwrap();
    let took = t0.elapsed();
    println!("a batch push over both topics answered in {took:?}");
    assert!(took < NOT_HELD, "the batch push took {took:?}");
    assert_eq!(answers.len(), 20);
    for (job, answer) in jobs().iter().zip(&answers) {
        match answer {
            Ok(p) => {
                assert_eq!(job.topic, healthy, "{p:?}");
                assert!(p.created, "{p:?}");
                assert_eq!(p.id, job.id);
            }
            Err(e) => {
                assert_eq!(job.topic, stalled, "{e}");
                assert!(matches!(e, Error::Unavailable { .. }), "{e}");
            }
        }
    }
    assert_eq!(answers.iter().filter(|a| a.is_ok()).count(), 10);
    let t0 = Instant::now();
    let whole = engine.push_batch(jobs()).await;
    assert!(matches!(whole, Err(Error::Unavailable { .. })), "{whole:?}");
    assert!(
        t0.elapsed() < NOT_HELD,
        "push_batch took {:?}",
        t0.elapsed()
    );
    let got = engine
        .reserve(&Reserve::new(healthy.clone()).max(100))
        .await
        .unwrap();
    assert_eq!(got.len(), 11, "the healthy topic's jobs: {got:?}");

    // Continued: sent again, the stalled topic's jobs are stored once; the healthy ones
    // exist (leased now).
    drop(stop);
    let deadline = Instant::now() + Duration::from_secs(30);
    let answers = loop {
        match engine.push_each(jobs()).await {
            Ok(a) if a.iter().all(Result::is_ok) => break a,
            other => {
                assert!(Instant::now() < deadline, "30 s after SIGCONT: {other:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    for (job, answer) in jobs().iter().zip(answers) {
        let p = answer.unwrap();
        if job.topic == healthy {
            assert!(!p.created, "{p:?}");
        }
    }
    let stats = engine.stats(&stalled).await.unwrap();
    assert_eq!(stats.ready, 11, "{stats:?}");
    let stats = engine.stats(&healthy).await.unwrap();
    assert_eq!((stats.ready, stats.reserved), (0, 11), "{stats:?}");
}

/// The primary holding the topic registry (`delayq:topics`) stops answering: the first push
/// of a topic on a healthy primary (which registers the topic) is stored and answered within
/// the slot timeout, its job delivered, and the topic is listed once the primary answers
/// again (the registration went on in a task of its own). The push once waited for the
/// registry's primary for the response timeout (30 s here), then failed although its job
/// was stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_push_does_not_wait_on_a_stopped_registry_primary_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    let registry_node = cluster.node_for_key("delayq:topics");
    let healthy_node = cluster
        .primaries()
        .into_iter()
        .find(|p| p.id != registry_node.id)
        .unwrap();
    let healthy = Topic::new(healthy_node.topic_named("first")).unwrap();
    let mut config = RedisConfig::new(cluster.url());
    config.response_timeout = Duration::from_secs(30);
    let engine = RedisEngine::connect(config).await.unwrap();

    let pid = cluster.server(registry_node.port).pid().unwrap();
    let stop = Stopped::new(pid);
    let t0 = Instant::now();
    let pushed = engine
        .push(NewJob::new(healthy.clone(), "x").with_ttr(TTR))
        .await
        .unwrap();
    let took = t0.elapsed();
    println!("the first push of a topic answered in {took:?} with the registry's primary stopped");
    assert!(pushed.created);
    assert!(took < NOT_HELD, "the push waited on the registry: {took:?}");
    let got = engine
        .reserve(&Reserve::new(healthy.clone()).max(1))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    engine.ack(got[0].lease.as_ref().unwrap()).await.unwrap();

    drop(stop);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(topics) = engine.topics().await
            && topics.contains(&healthy)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "30 s after SIGCONT the topic is not listed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
