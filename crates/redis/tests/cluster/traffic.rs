//! The traffic of `failover::failover_under_traffic`: the flows it runs ([`Flow`]), who
//! pushes and who reserves what ([`Traffic`]), the producers and consumers themselves
//! ([`produce`], [`consume`]) and what each records.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_core::{
    Backoff, Engine, Error, NewJob, Reserve, Settle, Topic, TopicConfig, partition_of,
};
use delayq_redis::RedisEngine;
use delayq_testkit::{RedisCluster, key_slot};

use crate::{id, topic, topics_per_primary};

/// Push calls of 10 jobs each in [`failover_under_traffic`].
pub(crate) const BATCH: usize = 10;

/// The primary [`failover_under_traffic`] kills (of `RedisCluster::primaries`).
pub(crate) const KILLED: usize = 1;

/// The lease length of [`failover_under_traffic`]'s jobs. Short, so that deliveries whose
/// reply was lost (a reserve answered `not_replicated`, or sent to the primary as it died)
/// come back within the test.
const FAILOVER_TTR: Duration = Duration::from_secs(5);

/// What one producer of [`failover_under_traffic`] did.
pub(crate) struct Produced {
    /// The jobs whose push answered success.
    pub(crate) answered: HashSet<String>,
    /// Each push call: when it was first sent, when it answered success, its jobs.
    pub(crate) calls: Vec<(Instant, Instant, Vec<String>)>,
    /// Push calls that answered an error and were sent again.
    pub(crate) failed: usize,
    /// The longest a call took to answer success, its retries included.
    pub(crate) longest: Duration,
}

/// One delivery a consumer of [`failover_under_traffic`] received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// When the call that brought it returned.
    pub(crate) at: Instant,
    pub(crate) attempt: u32,
    /// The lease's fencing token.
    pub(crate) token: u64,
}

/// What one consumer of [`failover_under_traffic`] saw.
#[derive(Default)]
pub(crate) struct Consumed {
    /// Each job's deliveries, in the order received.
    pub(crate) deliveries: HashMap<String, Vec<Seen>>,
    /// Each ack that answered success: its job, and when its call was sent.
    pub(crate) acked: HashMap<String, Vec<Instant>>,
    /// Jobs whose ack went in a call that answered an error (applied or not: unknown), or
    /// answered `NOT_FOUND` (applied by the same call sent again through the failover).
    pub(crate) ack_unknown: HashSet<String>,
    /// Acks that answered `LEASE_LOST` (the lease had expired meanwhile).
    pub(crate) lease_lost: usize,
    /// Calls that answered an error (`not_replicated`, `unavailable`).
    pub(crate) errors: usize,
}

/// The traffic of [`failover_under_traffic`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flow {
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
pub(crate) struct Producer {
    /// The topics its jobs go to, in turn.
    topics: Vec<Topic>,
    /// The id of its `n`-th job, of a partition on its primary.
    ids: Box<dyn Fn(usize) -> String + Send>,
    /// Its pause after each batch answered (zero: none).
    pace: Duration,
}

/// Who pushes what and who reserves what in [`failover_under_traffic`], from a [`Flow`].
pub(crate) struct Traffic {
    /// What it is called in the figures.
    pub(crate) name: String,
    /// Per primary (of `RedisCluster::primaries`), what its producer pushes.
    pub(crate) producers: Vec<Producer>,
    /// Each consumer: what it is called in the figures, the topics it reserves, and whether
    /// they hold jobs of a healthy primary (then it must receive some during the failover).
    pub(crate) consumers: Vec<(String, Vec<Topic>, bool)>,
    /// Every topic: the consumers stop once all are empty.
    pub(crate) every: Vec<Topic>,
}

impl Traffic {
    pub(crate) async fn new(flow: Flow, cluster: &RedisCluster, e: &RedisEngine) -> Self {
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

/// One producer of [`failover_under_traffic`]: pushes batches of 10 of its jobs, each until
/// it answers success, `batches` of them and on until `promoted`, counting each answered
/// job in `pushed`.
pub(crate) async fn produce(
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
pub(crate) async fn consume(
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
