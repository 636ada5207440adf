//! W8's failover under load (issue 37): what a primary's death costs the other primaries'
//! topics, and how soon its own topics are served again.
//!
//! On a fresh cluster of 3 primaries and 3 replicas, six topics, two per primary. Jobs in
//! W2's shape: `plan.w8_flow_jobs` of them, due evenly over `plan.w8_flow_spread`, each
//! pushed [`LEAD`] before it is due, by one producer per primary (batches of [`BATCH`] over
//! its two topics: a push call over several slots waits for its slowest one, so a producer
//! that mixed primaries would stall its healthy jobs with the dead ones). Consumers settle
//! (ack) and reserve in one call, at most 50 jobs and a 200 ms wait: one per primary over its
//! two topics, and [`ALL_TOPICS`] over all six, as a deployment whose workers take every
//! topic does. A third of the way through, primary 1 gets SIGKILL; its replica takes over
//! after `cluster-node-timeout` (2 s here: the promotion is when a node's `CLUSTER NODES`
//! first shows it, polled every 50 ms); then the old primary is started again and rejoins
//! as its replica (until then, with wait-replicas 1, the new primary's writes answer
//! `not_replicated`).
//!
//! Measured, on the host clock: the lateness of the healthy primaries' jobs due between the
//! kill and the promotion (and of those due before the kill, for comparison); the longest
//! call on healthy topics in that window (a reserve of one healthy primary's topics, a push
//! to one) and the longest reserve over all six topics; when the dead primary's topics
//! deliver again, after the promotion and after the old primary rejoined.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::core::Settle;
use delayq::{Engine, NewJob, Reserve, Topic};
use delayq_bench::clock;
use delayq_bench::lateness::Lateness;
use delayq_bench::stats::Spread;
use delayq_testkit::{ClusterOptions, RedisCluster};

use super::cluster::connect;
use super::plan::Plan;
use super::say;

/// How long before its due time each job is pushed.
pub(crate) const LEAD: Duration = Duration::from_secs(1);
/// Jobs per push call.
pub(crate) const BATCH: usize = 50;
/// Consumers over all six topics (besides one per primary over its own two).
pub(crate) const ALL_TOPICS: usize = 2;
/// The primary killed (of `RedisCluster::primaries`).
const KILLED: usize = 1;
/// Jobs per reserve, and how long a reserve waits for one.
const RESERVE_MAX: usize = 50;
const RESERVE_WAIT: Duration = Duration::from_millis(200);
/// The longest one run may take before it is given up as failed.
const RUN_CAP: Duration = Duration::from_secs(120);

/// One configuration's figures over the repetitions.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct FlowRow {
    /// The nodes' `cluster-require-full-coverage`.
    pub full_coverage: bool,
    pub wait_replicas: usize,
    /// From the kill until the cluster had settled with the replica promoted, and until the
    /// old primary was back as its replica, in s.
    pub promotion_s: Spread,
    pub rejoin_s: Spread,
    /// The healthy primaries' jobs due between the kill and the promotion (delivered).
    pub healthy_in_window: Spread,
    /// Their lateness, p99 and largest, in ms.
    pub healthy_p99_ms: Spread,
    pub healthy_max_ms: Spread,
    /// The lateness p99 of the healthy primaries' jobs due before the kill, in ms.
    pub before_p99_ms: Spread,
    /// The longest call begun in the window: a reserve (with its acks) of one healthy
    /// primary's topics, a push to one, a reserve over all six topics; in ms. Reserves that
    /// brought no job are left out (they may have waited their long-poll for one).
    pub longest_healthy_reserve_ms: Spread,
    pub longest_healthy_push_ms: Spread,
    pub longest_all_topics_reserve_ms: Spread,
    /// From the kill to the first delivery of the dead primary's topics by a reserve sent
    /// after the kill, in s.
    pub dead_served_s: Spread,
    /// Calls that answered an error (pushes sent again, reserves whose acks were lost).
    pub failed_calls: Spread,
}

/// One delivery: its job, its topic's primary, when it was due, when the reserve that
/// brought it began and when it answered (µs, host clock).
struct Seen {
    id: String,
    primary: usize,
    due_us: u64,
    asked_us: u64,
    at_us: u64,
}

/// One call: who made it, on which primary's topics (`None`: all six), when it began (µs,
/// host clock), how long it took, whether it failed and the jobs a reserve brought.
struct Call {
    push: bool,
    primary: Option<usize>,
    began_us: u64,
    took: Duration,
    failed: bool,
    jobs: usize,
}

impl Call {
    /// A call that waited only on the engine: a push, or a reserve that failed or brought
    /// jobs (a reserve that brought none may have waited its long-poll for them).
    fn counts(&self) -> bool {
        self.push || self.failed || self.jobs > 0
    }
}

/// W8's failover under load with `cluster-require-full-coverage` yes (Redis's default) and
/// no, each without and with wait-replicas 1, `plan.reps` times each.
pub(crate) async fn w8_flow(plan: &Plan) -> anyhow::Result<Vec<FlowRow>> {
    let mut rows = Vec::new();
    for (full_coverage, wait) in [(true, 0), (true, 1), (false, 0), (false, 1)] {
        let mut runs = Vec::new();
        for rep in 0..plan.reps {
            let r = flow_once(plan, full_coverage, wait).await?;
            say(&format!(
                "W8 failover under load, full coverage {full_coverage}, wait-replicas {wait}, rep {}: promotion after {:.2} s, the old primary back as a replica after {:.2} s; healthy jobs due meanwhile {} at p99 {:.1} ms (max {:.1}; before the kill p99 {:.1}); longest healthy reserve {:.0} ms, push {:.0} ms, all-topics reserve {:.0} ms; the dead primary's topics delivered again {:.2} s after the kill; {} calls failed",
                rep + 1,
                r.promotion_s,
                r.rejoin_s,
                r.healthy_in_window,
                r.healthy_p99_ms,
                r.healthy_max_ms,
                r.before_p99_ms,
                r.longest_healthy_reserve_ms,
                r.longest_healthy_push_ms,
                r.longest_all_topics_reserve_ms,
                r.dead_served_s,
                r.failed_calls
            ));
            runs.push(r);
        }
        let spread = |f: fn(&Once) -> f64| Spread::of(runs.iter().map(f));
        rows.push(FlowRow {
            full_coverage,
            wait_replicas: wait,
            promotion_s: spread(|r| r.promotion_s),
            rejoin_s: spread(|r| r.rejoin_s),
            healthy_in_window: spread(|r| r.healthy_in_window as f64),
            healthy_p99_ms: spread(|r| r.healthy_p99_ms),
            healthy_max_ms: spread(|r| r.healthy_max_ms),
            before_p99_ms: spread(|r| r.before_p99_ms),
            longest_healthy_reserve_ms: spread(|r| r.longest_healthy_reserve_ms),
            longest_healthy_push_ms: spread(|r| r.longest_healthy_push_ms),
            longest_all_topics_reserve_ms: spread(|r| r.longest_all_topics_reserve_ms),
            dead_served_s: spread(|r| r.dead_served_s),
            failed_calls: spread(|r| r.failed_calls as f64),
        });
    }
    Ok(rows)
}

/// One run's figures.
struct Once {
    promotion_s: f64,
    rejoin_s: f64,
    healthy_in_window: usize,
    healthy_p99_ms: f64,
    healthy_max_ms: f64,
    before_p99_ms: f64,
    longest_healthy_reserve_ms: f64,
    longest_healthy_push_ms: f64,
    longest_all_topics_reserve_ms: f64,
    dead_served_s: f64,
    failed_calls: usize,
}

async fn flow_once(plan: &Plan, full_coverage: bool, wait: usize) -> anyhow::Result<Once> {
    let options = ClusterOptions {
        full_coverage,
        ..ClusterOptions::default()
    };
    let mut cluster =
        tokio::task::spawn_blocking(move || RedisCluster::start_with(options)).await?;
    let engine = connect(&cluster.url(), wait).await?;
    // Two topics on each primary (a name lies in one slot, so the primaries' never meet).
    let topics: Vec<Vec<Topic>> = cluster
        .primaries()
        .iter()
        .map(|p| {
            ["w8-flow-a", "w8-flow-b"]
                .map(|name| Topic::new(p.topic_named(name)).context("a topic name"))
                .into_iter()
                .collect()
        })
        .collect::<anyhow::Result<_>>()?;
    let every: Vec<Topic> = topics.concat();
    let primary_of = |t: &Topic| topics.iter().position(|mine| mine.contains(t));

    // Jobs per primary (each producer's share).
    let per = plan.w8_flow_jobs.div_ceil(topics.len());
    let spread_us = plan.w8_flow_spread.as_micros() as u64;
    // The first job is due a lead (and a moment to start) from now.
    let first_due_us = clock::now_us() + LEAD.as_micros() as u64 + 200_000;
    let last_due_us = first_due_us + spread_us;
    let deadline = Instant::now() + RUN_CAP;
    let stop = Arc::new(AtomicBool::new(false));
    let delivered = Arc::new(AtomicUsize::new(0));

    let mut producers = tokio::task::JoinSet::new();
    for (p, mine) in topics.iter().enumerate() {
        let (engine, mine) = (engine.clone(), mine.clone());
        let body = plan.body;
        producers.spawn(async move {
            let mut calls = Vec::new();
            let mut k = 0;
            while k < per {
                let n = BATCH.min(per - k);
                let due_of = |i: usize| first_due_us + spread_us * i as u64 / per as u64;
                // Push the batch a lead before its first job is due.
                let at = due_of(k).saturating_sub(LEAD.as_micros() as u64);
                let now = clock::now_us();
                if at > now {
                    tokio::time::sleep(Duration::from_micros(at - now)).await;
                }
                loop {
                    anyhow::ensure!(Instant::now() < deadline, "a producer did not finish");
                    let now_ms = clock::now_ms();
                    let jobs: Vec<NewJob> = (k..k + n)
                        .map(|i| {
                            let due_ms = due_of(i) / 1000;
                            NewJob::new(mine[i % mine.len()].clone(), clock::body(due_ms, body))
                                .with_delay(Duration::from_millis(due_ms.saturating_sub(now_ms)))
                        })
                        .collect();
                    let began_us = clock::now_us();
                    let t = Instant::now();
                    let r = engine.push_batch(jobs).await;
                    calls.push(Call {
                        push: true,
                        primary: Some(p),
                        began_us,
                        took: t.elapsed(),
                        failed: r.is_err(),
                        jobs: 0,
                    });
                    if r.is_ok() {
                        break;
                    }
                    // The dead primary's jobs: sent again until its replica takes them.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                k += n;
            }
            anyhow::Ok(calls)
        });
    }

    let mut consumers = tokio::task::JoinSet::new();
    let mine_of: Vec<(Option<usize>, Vec<Topic>)> = topics
        .iter()
        .enumerate()
        .map(|(p, mine)| (Some(p), mine.clone()))
        .chain((0..ALL_TOPICS).map(|_| (None, every.clone())))
        .collect();
    for (primary, mine) in mine_of {
        let (engine, stop, delivered) = (engine.clone(), stop.clone(), delivered.clone());
        let owner: Vec<(Topic, usize)> = mine
            .iter()
            .filter_map(|t| primary_of(t).map(|p| (t.clone(), p)))
            .collect();
        consumers.spawn(async move {
            let req = Reserve::topics(mine).max(RESERVE_MAX).wait(RESERVE_WAIT);
            let (mut seen, mut calls) = (Vec::new(), Vec::new());
            let mut settle: Vec<Settle> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let began_us = clock::now_us();
                let t = Instant::now();
                let got = engine.settle_and_reserve(&settle, &req).await;
                let at_us = clock::now_us();
                calls.push(Call {
                    push: false,
                    primary,
                    began_us,
                    took: t.elapsed(),
                    failed: got.is_err(),
                    jobs: got.as_ref().map_or(0, |g| g.deliveries.len()),
                });
                settle.clear();
                let Ok(got) = got else {
                    // Its acks are lost with it: those jobs come again after their lease.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                delivered.fetch_add(got.deliveries.len(), Ordering::Relaxed);
                for d in got.deliveries {
                    let due_ms =
                        clock::due_ms(&d.job.body).context("a job without its due time")?;
                    let p = owner
                        .iter()
                        .find(|(t, _)| *t == d.job.topic)
                        .map(|(_, p)| *p)
                        .context("a job of a topic not asked for")?;
                    seen.push(Seen {
                        id: d.job.id.to_string(),
                        primary: p,
                        due_us: due_ms * 1000,
                        asked_us: began_us,
                        at_us,
                    });
                    if let Some(lease) = d.lease {
                        settle.push(Settle::Ack(lease));
                    }
                }
            }
            anyhow::Ok((seen, calls))
        });
    }

    // The kill, a third of the way through the due times.
    let kill_at_us = first_due_us + spread_us / 3;
    let now = clock::now_us();
    if kill_at_us > now {
        tokio::time::sleep(Duration::from_micros(kill_at_us - now)).await;
    }
    let victim = cluster
        .primaries()
        .get(KILLED)
        .cloned()
        .context("no primary to kill")?;
    let first_slot = victim.slots.first().map_or(0, |r| *r.start());
    cluster.kill_node(victim.port);
    // SIGKILL sent and the process reaped: nothing it answers after this.
    let killed_us = clock::now_us();
    // The promotion: as soon as a node's view has another primary serve the dead one's
    // slots (polled every 50 ms).
    while !cluster
        .primaries()
        .iter()
        .any(|p| p.port != victim.port && p.serves(first_slot))
    {
        anyhow::ensure!(Instant::now() < deadline, "no replica took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let promoted_us = clock::now_us();
    cluster.restart(victim.port).await;
    let rejoined_us = clock::now_us();

    let mut calls = Vec::new();
    while let Some(r) = producers.join_next().await {
        calls.extend(r.context("a producer panicked")??);
    }
    // Every job is due by now plus the spread; wait until deliveries stop coming a second
    // after the last due time (the dead primary may have lost jobs, without wait-replicas).
    let mut last = delivered.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = delivered.load(Ordering::Relaxed);
        if (now == last && clock::now_us() > last_due_us + 1_000_000) || Instant::now() > deadline {
            break;
        }
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    while let Some(r) = consumers.join_next().await {
        let (s, c) = r.context("a consumer panicked")??;
        seen.extend(s);
        calls.extend(c);
    }
    drop(cluster);

    // A job's first delivery counts: one whose ack was lost with a failed call comes again
    // a lease later, which is not lateness.
    seen.sort_by_key(|s| s.at_us);
    let mut first = HashSet::new();
    seen.retain(|s| first.insert(s.id.clone()));
    let (mut window, mut before) = (Lateness::new(), Lateness::new());
    let mut healthy_in_window = 0;
    for s in seen.iter().filter(|s| s.primary != KILLED) {
        if (killed_us..=promoted_us).contains(&s.due_us) {
            window.record(s.due_us, s.at_us);
            healthy_in_window += 1;
        } else if s.due_us < killed_us {
            before.record(s.due_us, s.at_us);
        }
    }
    let in_window = |c: &&Call| (killed_us..=promoted_us).contains(&c.began_us);
    let longest = |pick: &dyn Fn(&Call) -> bool| {
        calls
            .iter()
            .filter(in_window)
            .filter(|c| c.counts() && pick(c))
            .map(|c| c.took.as_secs_f64() * 1000.0)
            .fold(0.0, f64::max)
    };
    let healthy = |c: &Call| c.primary.is_some_and(|p| p != KILLED);
    let first_dead_us = seen
        .iter()
        .filter(|s| s.primary == KILLED && s.asked_us > killed_us)
        .map(|s| s.at_us)
        .min()
        .context("the dead primary's topics never delivered again")?;
    let secs = |to: u64| to.saturating_sub(killed_us) as f64 / 1e6;
    let (w, b) = (window.summary(), before.summary());
    Ok(Once {
        promotion_s: secs(promoted_us),
        rejoin_s: secs(rejoined_us),
        healthy_in_window,
        healthy_p99_ms: w.p99_ms,
        healthy_max_ms: w.max_ms,
        before_p99_ms: b.p99_ms,
        longest_healthy_reserve_ms: longest(&|c| !c.push && healthy(c)),
        longest_healthy_push_ms: longest(&|c| c.push && healthy(c)),
        longest_all_topics_reserve_ms: longest(&|c| !c.push && c.primary.is_none()),
        dead_served_s: secs(first_dead_us),
        failed_calls: calls.iter().filter(|c| c.failed).count(),
    })
}
