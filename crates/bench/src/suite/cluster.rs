//! W8: delayq on a Redis Cluster beside one node, in the same run (issue 13).
//!
//! Four deployments, one after the other, each on its own servers: one node; a cluster of 3
//! primaries (no replicas, so the comparison with one node is of primaries alone); one
//! primary with one replica; the same with wait-replicas 1. On each, W1's drain (C = 50) and
//! W2's delayed delivery over three topics, one per primary of the cluster (the same names on
//! every deployment). For each run: jobs/s, and for every node its CPU and its commands per
//! job. Then what a failover loses: on a cluster of 3 primaries and 3 replicas, producers
//! push to a topic of one primary, which is killed with SIGKILL, or whose replica takes its
//! slots over while it still runs (`CLUSTER FAILOVER TAKEOVER`: what the majority side of a
//! partition does); every push answered with success is then looked up (without
//! wait-replicas, and with wait-replicas 1).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::{Engine, JobId, NewJob, Topic};
use delayq_bench::driver::{self, Delays};
use delayq_bench::stats::Spread;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisCluster, RedisOptions, RedisServer, key_slot};
use indicatif::ProgressBar;

use super::plan::Plan;
use super::procs::{self, CpuMeter};
use super::redis_info::{self, CommandStats};
use super::say;

/// The drain's consumers (W1 at C = 50).
pub(super) const W8_CONSUMERS: usize = 50;
/// The timeout of wait-replicas 1.
const WAIT_TIMEOUT: Duration = Duration::from_secs(1);
/// Producers pushing during the failover, and jobs per push call.
pub(crate) const FAILOVER_PRODUCERS: usize = 4;
pub(crate) const FAILOVER_BATCH: usize = 100;

/// One W8 run: a deployment and a workload.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ClusterRow {
    /// "one node", "cluster, 3 primaries", ...
    pub deployment: String,
    /// "W1 C=50" or "W2".
    pub workload: String,
    /// Jobs/s: drained (W1), delivered from the first push to the last delivery (W2).
    pub rate: Spread,
    /// W2: host-clock lateness p99 in ms.
    pub p99_ms: Option<Spread>,
    /// CPU of this benchmark's process (workers and producer) in % of one core.
    pub client_cpu_pct: Spread,
    /// Each node: primaries first, then replicas.
    pub nodes: Vec<NodeLoad>,
}

/// What one node did during a run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct NodeLoad {
    /// "primary", "primary 2", "replica", ...
    pub node: String,
    /// CPU in % of one core.
    pub cpu_pct: Spread,
    /// Commands (`INFO commandstats`, calls inside functions included) per job.
    pub commands_per_job: Spread,
}

/// How the primary is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Loss {
    /// SIGKILL; its replica takes over after `cluster-node-timeout`.
    Kill,
    /// Its replica takes over at once while it still runs and takes writes until it hears
    /// of it (as after a partition), then becomes a replica and drops what it took since.
    Takeover,
}

impl Loss {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Loss::Kill => "kill -9 of the primary",
            Loss::Takeover => "replica takeover while the primary runs (a partition)",
        }
    }
}

/// What a failover lost.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct FailoverRow {
    #[serde(default = "kill")]
    pub how: Loss,
    pub wait_replicas: usize,
    /// Pushes answered with success to the killed primary's topic.
    pub answered: usize,
    /// Of them, jobs that were not there after the failover.
    pub lost: usize,
    /// Push calls that answered an error (retried by nobody; not counted as answered).
    pub failed_calls: usize,
}

fn kill() -> Loss {
    Loss::Kill
}

/// The servers of one deployment, stopped on drop.
pub(super) enum Store {
    Node(RedisServer),
    Pair {
        primary: RedisServer,
        replica: RedisServer,
    },
    Cluster(RedisCluster),
}

impl Store {
    /// Every node with its name: primaries first (a cluster's in slot order), then replicas.
    pub(super) fn nodes(&self) -> Vec<(String, &RedisServer)> {
        match self {
            Store::Node(s) => vec![("primary".into(), s)],
            Store::Pair { primary, replica } => {
                vec![("primary".into(), primary), ("replica".into(), replica)]
            }
            Store::Cluster(c) => {
                let primaries = c.primaries();
                let mut out: Vec<(String, &RedisServer)> = primaries
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (format!("primary {}", i + 1), c.server(p.port)))
                    .collect();
                for r in c.replicas() {
                    let of = primaries
                        .iter()
                        .position(|p| Some(&p.id) == r.primary_id.as_ref())
                        .map_or(0, |i| i + 1);
                    out.push((format!("replica of {of}"), c.server(r.port)));
                }
                out
            }
        }
    }

    pub(super) fn url(&self) -> String {
        match self {
            Store::Node(s) => s.url(),
            Store::Pair { primary, .. } => primary.url(),
            Store::Cluster(c) => c.url(),
        }
    }
}

/// Three topic names whose hash slots lie on the three primaries `redis-cli --cluster
/// create` makes (slots 0–5460, 5461–10922, 10923–16383), in that order.
fn spread_topics() -> anyhow::Result<Vec<Topic>> {
    let bounds = [0u16, 5461, 10923, 16384];
    (0..3)
        .map(|i| {
            let name = (0..)
                .map(|n| format!("w8-{n}"))
                .find(|t| {
                    let s = key_slot(format!("delayq:{{{t}}}:wake"));
                    (bounds[i]..bounds[i + 1]).contains(&s)
                })
                .context("no topic name for a primary")?;
            Ok(Topic::new(name)?)
        })
        .collect()
}

/// A primary and its replica, the replica synced and its stream flowing.
async fn primary_and_replica() -> anyhow::Result<Store> {
    let primary = tokio::task::spawn_blocking(|| {
        RedisServer::start_with(RedisOptions {
            extra_args: vec!["--repl-diskless-sync-delay".into(), "0".into()],
            ..RedisOptions::default()
        })
    })
    .await?;
    let port = primary.port();
    let replica = tokio::task::spawn_blocking(move || {
        RedisServer::start_with(RedisOptions {
            extra_args: vec!["--replicaof".into(), "127.0.0.1".into(), port.to_string()],
            ..RedisOptions::default()
        })
    })
    .await?;
    // A WAIT on the connection that wrote: only a write the replica acknowledged counts.
    let mut conn = primary.connection().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (acked,): (usize,) = redis::pipe()
            .cmd("SET")
            .arg("bench:sync")
            .arg(1)
            .ignore()
            .cmd("DEL")
            .arg("bench:sync")
            .ignore()
            .cmd("WAIT")
            .arg(1)
            .arg(100)
            .query_async(&mut conn)
            .await
            .context("waiting for the replica")?;
        if acked == 1 {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the replica did not sync");
    }
    Ok(Store::Pair { primary, replica })
}

pub(super) async fn connect(
    url: &str,
    wait_replicas: usize,
) -> anyhow::Result<Arc<dyn delayq::Store>> {
    let mut config = RedisConfig::new(url);
    if wait_replicas > 0 {
        config = config.with_wait_replicas(wait_replicas, WAIT_TIMEOUT);
    }
    let engine = RedisEngine::connect(config)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    Ok(Arc::new(engine))
}

/// Measures a run on every node of `store`: their CPU and commands, and this process's CPU.
pub(super) struct Meter {
    cpu: CpuMeter,
    before: Vec<CommandStats>,
    wall: Instant,
}

/// What a [`Meter`] read: CPU % per node, commands per node, this process's CPU %.
pub(super) struct Reading {
    node_cpu_pct: Vec<f64>,
    node_calls: Vec<u64>,
    client_cpu_pct: f64,
}

impl Reading {
    /// Each node's CPU, rounded, for a progress line.
    pub(super) fn cpu_rounded(&self) -> Vec<f64> {
        self.node_cpu_pct.iter().map(|c| c.round()).collect()
    }
}

impl Meter {
    pub(super) async fn start(store: &Store) -> anyhow::Result<Meter> {
        let nodes = store.nodes();
        let mut pids: Vec<u32> = nodes.iter().filter_map(|(_, s)| s.pid()).collect();
        anyhow::ensure!(pids.len() == nodes.len(), "a node is not running");
        pids.push(procs::own_pid());
        let mut before = Vec::new();
        for (_, s) in &nodes {
            before.push(redis_info::command_stats(s).await?);
        }
        Ok(Meter {
            cpu: CpuMeter::start(&pids),
            before,
            wall: Instant::now(),
        })
    }

    pub(super) async fn stop(self, store: &Store) -> anyhow::Result<Reading> {
        let cpu = self.cpu.stop();
        let wall = self.wall.elapsed().as_secs_f64().max(1e-9);
        let mut node_calls = Vec::new();
        for ((_, s), before) in store.nodes().iter().zip(&self.before) {
            node_calls.push(redis_info::command_stats(s).await?.since(before).calls());
        }
        let pct = |s: f64| s / wall * 100.0;
        Ok(Reading {
            node_cpu_pct: cpu[..cpu.len() - 1].iter().map(|&s| pct(s)).collect(),
            node_calls,
            client_cpu_pct: pct(cpu[cpu.len() - 1]),
        })
    }
}

/// The samples of one deployment and workload, turned into a row at the end.
pub(super) struct Samples {
    rate: Vec<f64>,
    pub(super) p99: Vec<f64>,
    client: Vec<f64>,
    node_cpu: Vec<Vec<f64>>,
    node_per_job: Vec<Vec<f64>>,
}

impl Samples {
    pub(super) fn new(nodes: usize) -> Samples {
        Samples {
            rate: Vec::new(),
            p99: Vec::new(),
            client: Vec::new(),
            node_cpu: vec![Vec::new(); nodes],
            node_per_job: vec![Vec::new(); nodes],
        }
    }

    pub(super) fn add(&mut self, rate: f64, jobs: usize, r: &Reading) {
        self.rate.push(rate);
        self.client.push(r.client_cpu_pct);
        for (i, (&cpu, &calls)) in r.node_cpu_pct.iter().zip(&r.node_calls).enumerate() {
            self.node_cpu[i].push(cpu);
            self.node_per_job[i].push(calls as f64 / jobs.max(1) as f64);
        }
    }

    pub(super) fn row(self, deployment: &str, workload: &str, names: &[String]) -> ClusterRow {
        ClusterRow {
            deployment: deployment.into(),
            workload: workload.into(),
            rate: Spread::of(self.rate),
            p99_ms: (!self.p99.is_empty()).then(|| Spread::of(self.p99)),
            client_cpu_pct: Spread::of(self.client),
            nodes: names
                .iter()
                .zip(self.node_cpu.into_iter().zip(self.node_per_job))
                .map(|(n, (cpu, per))| NodeLoad {
                    node: n.clone(),
                    cpu_pct: Spread::of(cpu),
                    commands_per_job: Spread::of(per),
                })
                .collect(),
        }
    }
}

/// W8's throughput part: every deployment, W1 (C = 50) then W2, `plan.reps` times each.
pub(crate) async fn w8(plan: &Plan) -> anyhow::Result<Vec<ClusterRow>> {
    let topics = spread_topics()?;
    let mut rows = Vec::new();
    let deployments: [(&str, usize); 4] = [
        ("one node", 0),
        ("cluster, 3 primaries", 0),
        ("1 primary + 1 replica", 0),
        ("1 primary + 1 replica, wait-replicas 1", 1),
    ];
    for (i, &(name, wait)) in deployments.iter().enumerate() {
        let store = match i {
            0 => Store::Node(tokio::task::spawn_blocking(super::systems::redis_server).await?),
            1 => Store::Cluster(
                tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(0)).await?,
            ),
            _ => primary_and_replica().await?,
        };
        if let Store::Cluster(c) = &store {
            // The three topics are on three different primaries.
            let on: HashSet<String> = topics
                .iter()
                .map(|t| c.node_for_key(format!("delayq:{{{t}}}:wake")).id)
                .collect();
            anyhow::ensure!(on.len() == 3, "the W8 topics share a primary");
        }
        let engine = connect(&store.url(), wait).await?;
        rows.push(drain_run(&store, &engine, &topics, plan, ("W8", name)).await?);
        rows.push(delayed_run(&store, &engine, &topics, plan, ("W8", name)).await?);
    }
    Ok(rows)
}

/// W1's drain (C = 50) over `topics`, `plan.reps` times, each topped up to `plan.w8_jobs`
/// ready jobs dealt over them first; every node of `store` measured. The row is
/// `deployment`'s; `workload` ("W8") names the runs in the progress lines.
pub(super) async fn drain_run(
    store: &Store,
    engine: &Arc<dyn delayq::Store>,
    topics: &[Topic],
    plan: &Plan,
    (workload, deployment): (&str, &str),
) -> anyhow::Result<ClusterRow> {
    let label = format!("{workload} {deployment}");
    let names: Vec<String> = store.nodes().into_iter().map(|(n, _)| n).collect();
    let mut drain = Samples::new(names.len());
    for rep in 0..plan.reps {
        // The engine's count: a drain stops at its target, but jobs its worker had already
        // taken by then are handled and acked too.
        let mut backlog = 0;
        for t in topics {
            backlog += engine.stats(t).await?.ready as usize;
        }
        if backlog < plan.w8_jobs {
            let per = (plan.w8_jobs - backlog).div_ceil(topics.len());
            for t in topics {
                driver::fill(
                    engine,
                    t,
                    per,
                    Delays::Ready,
                    plan.body,
                    &ProgressBar::hidden(),
                )
                .await?;
            }
        }
        let meter = Meter::start(store).await?;
        let r = driver::drain_topics(
            engine,
            topics,
            plan.w8_jobs,
            W8_CONSUMERS,
            plan.w1_cap,
            &ProgressBar::hidden(),
        )
        .await?;
        let reading = meter.stop(store).await?;
        anyhow::ensure!(r.jobs > 0, "{label}: the drain delivered nothing");
        drain.add(r.rate(), r.jobs, &reading);
        say(&format!(
            "{label} W1 C={W8_CONSUMERS} rep {}: {:.0} jobs/s ({} jobs); node CPU % {:?}",
            rep + 1,
            r.rate(),
            r.jobs,
            reading.cpu_rounded()
        ));
    }
    // What the drain left must not be delivered as W2's jobs.
    for t in topics {
        engine.purge(t).await?;
    }
    Ok(drain.row(deployment, &format!("W1 C={W8_CONSUMERS}"), &names))
}

/// W2's delayed jobs over `topics`, `plan.reps` times; every node of `store` measured.
pub(super) async fn delayed_run(
    store: &Store,
    engine: &Arc<dyn delayq::Store>,
    topics: &[Topic],
    plan: &Plan,
    (workload, deployment): (&str, &str),
) -> anyhow::Result<ClusterRow> {
    let label = format!("{workload} {deployment}");
    let names: Vec<String> = store.nodes().into_iter().map(|(n, _)| n).collect();
    let mut delayed = Samples::new(names.len());
    for rep in 0..plan.reps {
        let meter = Meter::start(store).await?;
        let r =
            driver::delayed_topics(engine, topics, plan.w2_spec(), &ProgressBar::hidden()).await?;
        let reading = meter.stop(store).await?;
        let rate = r.delivered as f64 / r.elapsed.as_secs_f64().max(1e-9);
        let s = r.host.summary();
        delayed.add(rate, r.delivered, &reading);
        delayed.p99.push(s.p99_ms);
        say(&format!(
            "{label} W2 rep {}: delivered {} of {} at {rate:.0}/s, p99 {:.2} ms; node CPU % {:?}",
            rep + 1,
            r.delivered,
            r.pushed,
            s.p99_ms,
            reading.cpu_rounded()
        ));
        for t in topics {
            engine.purge(t).await?;
        }
    }
    Ok(delayed.row(deployment, "W2", &names))
}

/// W8's failover part: once without wait-replicas and once with wait-replicas 1, each on a
/// fresh cluster of 3 primaries and 3 replicas.
pub(crate) async fn w8_failover(plan: &Plan) -> anyhow::Result<Vec<FailoverRow>> {
    let mut rows = Vec::new();
    for how in [Loss::Kill, Loss::Takeover] {
        for wait in [0, 1] {
            let row = failover_once(how, wait, plan.w8_before_kill).await?;
            say(&format!(
                "W8 failover ({}), wait-replicas {wait}: {} of {} pushes answered with success lost ({} calls failed)",
                how.name(),
                row.lost,
                row.answered,
                row.failed_calls
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

async fn failover_once(
    how: Loss,
    wait: usize,
    before_kill: Duration,
) -> anyhow::Result<FailoverRow> {
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start).await?;
    let engine = connect(&cluster.url(), wait).await?;
    let victim = cluster.primaries()[1].clone();
    let topic = (0..)
        .map(|n| format!("w8-failover-{n}"))
        .find(|t| victim.serves(key_slot(format!("delayq:{{{t}}}:wake"))))
        .map(Topic::new)
        .context("no topic on the victim")??;
    let stop = Arc::new(AtomicBool::new(false));
    let mut producers = tokio::task::JoinSet::new();
    for p in 0..FAILOVER_PRODUCERS {
        let (engine, topic, stop) = (engine.clone(), topic.clone(), stop.clone());
        producers.spawn(async move {
            let (mut answered, mut failed) = (Vec::new(), 0usize);
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let ids: Vec<String> = (0..FAILOVER_BATCH)
                    .map(|i| format!("p{p}-{}", n + i))
                    .collect();
                n += FAILOVER_BATCH;
                let jobs = ids
                    .iter()
                    .map(|i| Ok(NewJob::new(topic.clone(), "f").with_id(JobId::new(i)?)))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                match engine.push_batch(jobs).await {
                    Ok(_) => answered.extend(ids),
                    Err(_) => failed += 1,
                }
            }
            anyhow::Ok((answered, failed))
        });
    }
    tokio::time::sleep(before_kill).await;
    match how {
        Loss::Kill => {
            cluster.kill_primary(1).await;
        }
        Loss::Takeover => {
            let replica = cluster
                .replicas()
                .into_iter()
                .find(|r| r.primary_id.as_ref() == Some(&victim.id))
                .context("the primary has no replica")?;
            let mut conn = cluster.server(replica.port).connection().await;
            let _: () = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .arg("TAKEOVER")
                .query_async(&mut conn)
                .await
                .context("CLUSTER FAILOVER TAKEOVER")?;
            // The old primary hears of it by gossip and turns into the new one's replica.
            let deadline = Instant::now() + Duration::from_secs(30);
            while !cluster
                .replicas()
                .iter()
                .any(|r| r.port == victim.port && r.primary_id.as_ref() == Some(&replica.id))
            {
                anyhow::ensure!(Instant::now() < deadline, "the takeover did not settle");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            cluster.wait_replicated().await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (mut answered, mut failed_calls) = (Vec::new(), 0);
    while let Some(r) = producers.join_next().await {
        let (a, f) = r.context("a producer panicked")??;
        answered.extend(a);
        failed_calls += f;
    }
    // Look every answered job up on the new primary, 16 lookups in flight.
    let answered = Arc::new(answered);
    let mut lookups = tokio::task::JoinSet::new();
    for k in 0..16 {
        let (engine, topic, answered) = (engine.clone(), topic.clone(), answered.clone());
        lookups.spawn(async move {
            let mut lost = 0usize;
            for i in answered.iter().skip(k).step_by(16) {
                if engine
                    .get(&topic, &JobId::new(i.as_str())?)
                    .await?
                    .is_none()
                {
                    lost += 1;
                }
            }
            anyhow::Ok(lost)
        });
    }
    let mut lost = 0;
    while let Some(r) = lookups.join_next().await {
        lost += r.context("a lookup panicked")??;
    }
    Ok(FailoverRow {
        how,
        wait_replicas: wait,
        answered: answered.len(),
        lost,
        failed_calls,
    })
}
