//! W5: idle workers. For each system, `w5_workers` workers wait on an empty queue for
//! `w5_idle`; the store counts the commands they send (Redis `INFO commandstats`, commands
//! run inside scripts included; beanstalkd's `stats`; PostgreSQL's transactions in
//! `pg_stat_database`), and `/proc` the CPU of every process (of a PostgreSQL server: its
//! postmaster and all its descendants).
//! Every system and every repetition idles at the same time, each on its own servers: idle
//! processes hardly compete for the CPU.

use std::time::{Duration, Instant};

use delayq_bench::stats::Spread;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::pg_info;
use super::plan::Plan;
use super::procs::{self, CpuMeter, Owned, Proc};
use super::redis_info::{self, CommandStats};
use super::say;
use super::systems::{self, BeanstalkClient, Env, Kind, System};

/// One W5 row.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct IdleRow {
    pub system: Kind,
    /// The partition count of the workers' topic (delayq on Redis; 1 elsewhere).
    #[serde(default = "one")]
    pub partitions: u16,
    pub workers: usize,
    /// Commands the store received per second per idle worker.
    pub commands_per_worker_s: Spread,
    /// CPU of the store, the workers' process and the delayq server, in % of one core.
    pub store_cpu_pct: Spread,
    pub workers_cpu_pct: Spread,
    pub server_cpu_pct: Option<Spread>,
    /// What the commands were (first repetition): `(command, calls per worker per minute)`.
    pub breakdown: Vec<(String, f64)>,
}

fn one() -> u16 {
    1
}

/// The partition count of W5's extra row of delayq on Redis (issue 18).
pub(crate) const PARTITIONED: u16 = 16;

impl IdleRow {
    /// The system, with the partition count when its topic has several.
    pub(crate) fn name(&self) -> String {
        match self.partitions {
            0 | 1 => self.system.name().to_string(),
            n => format!("{}, a topic of {n} partitions", self.system.name()),
        }
    }
}

struct Setup {
    kind: Kind,
    partitions: u16,
    sys: Option<Box<dyn System>>,
    redis: Option<delayq_testkit::RedisServer>,
    /// delayq's PostgreSQL engine's server, and its postmaster's process tree.
    postgres: Option<(delayq_testkit::PostgresServer, Proc)>,
    _dir: Option<tempfile::TempDir>,
    child: Option<Owned>,
    beanstalk_port: Option<u16>,
}

impl Setup {
    async fn start(
        env: &Env,
        (kind, partitions): (Kind, u16),
        workers: usize,
    ) -> anyhow::Result<Setup> {
        let mut s = Setup {
            kind,
            partitions,
            sys: None,
            redis: None,
            postgres: None,
            _dir: None,
            child: None,
            beanstalk_port: None,
        };
        let target = match kind {
            Kind::DelayqRedis | Kind::Seeds => {
                let r = systems::redis_server();
                let url = r.url();
                s.redis = Some(r);
                url
            }
            Kind::DelayqEmbedded => {
                let d = tempfile::Builder::new()
                    .prefix("delayq-bench-idle-")
                    .tempdir_in(&env.work)?;
                let url = format!("sqlite://{}", d.path().display());
                s._dir = Some(d);
                url
            }
            Kind::DelayqPostgres => {
                let server = systems::postgres_server().await?;
                let tree = pg_info::server_tree(&server).await?;
                let url = server.url();
                s.postgres = Some((server, tree));
                url
            }
            _ => {
                let mut sys = systems::start(kind, env).await?;
                if sys.start_idle_workers(workers).await? {
                    s.sys = Some(sys);
                    return Ok(s);
                }
                let t = sys.endpoint();
                if matches!(kind, Kind::Beanstalkd | Kind::BeanstalkdBinlog) {
                    s.beanstalk_port = t.parse().ok();
                }
                s.sys = Some(sys);
                t
            }
        };
        let mut child = Owned::spawn(
            "idle workers",
            &procs::self_exe()?,
            &[
                "idle".into(),
                "--system".into(),
                kind.key().into(),
                "--target".into(),
                target,
                "--workers".into(),
                workers.to_string(),
                "--partitions".into(),
                partitions.to_string(),
            ],
            None,
            Some(&env.work.join(format!("idle-{}.log", kind.key()))),
        )?;
        let out = child
            .child()
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("idle child's stdout"))?;
        let mut lines = BufReader::new(out).lines();
        let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
        if !matches!(ready, Ok(Ok(Some(ref l))) if l == "ready") {
            anyhow::bail!(
                "the idle workers of {} did not start (see {})",
                kind.name(),
                env.work.join(format!("idle-{}.log", kind.key())).display()
            );
        }
        s.child = Some(child);
        Ok(s)
    }

    fn redis(&self) -> Option<&delayq_testkit::RedisServer> {
        self.redis
            .as_ref()
            .or_else(|| self.sys.as_ref().and_then(|s| s.redis()))
    }

    /// Its PostgreSQL server: delayq's engine's own, or the system's (pg-boss).
    fn postgres(&self) -> Option<&delayq_testkit::PostgresServer> {
        self.postgres
            .as_ref()
            .map(|(server, _)| server)
            .or_else(|| self.sys.as_ref().and_then(|s| s.postgres()))
    }

    /// (store, workers' process, delayq server)
    fn pids(&self) -> (Option<Proc>, Option<Proc>, Option<Proc>) {
        let child = self.child.as_ref().map(|c| Proc::One(c.pid()));
        match (&self.sys, self.kind) {
            (Some(s), Kind::HttpRedis | Kind::HttpEmbedded) => {
                (s.pids().store, child, Some(Proc::One(s.pids().queue)))
            }
            // Their idle workers run in the system's own Node process.
            (Some(s), Kind::Bullmq | Kind::PgBoss) => {
                (s.pids().store, Some(Proc::One(s.pids().queue)), None)
            }
            (Some(s), _) => (s.pids().store, child, None),
            (None, _) => {
                let redis = self.redis.as_ref().and_then(|r| r.pid()).map(Proc::One);
                let postgres = self.postgres.as_ref().map(|(_, tree)| *tree);
                (redis.or(postgres), child, None)
            }
        }
    }

    async fn commands(&self) -> anyhow::Result<CommandStats> {
        if let Some(r) = self.redis() {
            return redis_info::command_stats(r).await;
        }
        if let Some(pg) = self.postgres() {
            let n = pg_info::transactions(pg).await?;
            return Ok(CommandStats([("transactions".to_string(), (n, 0))].into()));
        }
        if let Some(port) = self.beanstalk_port {
            let mut c = BeanstalkClient::connect(port).await?;
            let n = c.commands().await?;
            return Ok(CommandStats([("beanstalkd".to_string(), (n, 0))].into()));
        }
        Ok(CommandStats::default())
    }
}

/// W5 for every system.
pub(crate) async fn w5(env: &Env, plan: &Plan, kinds: &[Kind]) -> anyhow::Result<Vec<IdleRow>> {
    // Every system, and delayq on Redis again with a topic of 16 partitions.
    let mut variants: Vec<(Kind, u16)> = kinds.iter().map(|&k| (k, 1)).collect();
    if kinds.contains(&Kind::DelayqRedis) {
        variants.push((Kind::DelayqRedis, PARTITIONED));
    }
    let mut setups = Vec::new();
    for _ in 0..plan.reps {
        for &variant in &variants {
            setups.push(Setup::start(env, variant, plan.w5_workers).await?);
        }
    }
    // Let every worker settle into its wait before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut before = Vec::new();
    for s in &setups {
        let (a, b, c) = s.pids();
        let pids: Vec<Proc> = [a, b, c].into_iter().flatten().collect();
        before.push((s.commands().await?, CpuMeter::of(&pids), pids));
    }
    let t = Instant::now();
    tokio::time::sleep(plan.w5_idle).await;
    let secs = t.elapsed().as_secs_f64();
    // (system, commands per worker per s, CPU % of store, workers, server; breakdown)
    type Sample = ((Kind, u16), f64, [Option<f64>; 3], Vec<(String, f64)>);
    let mut samples: Vec<Sample> = Vec::new();
    for (s, (cmd0, meter, pids)) in setups.iter().zip(before) {
        let stats = s.commands().await?.since(&cmd0);
        let cpu = meter.stop();
        let (a, b, c) = s.pids();
        let pct = |p: Option<Proc>| {
            p.and_then(|p| pids.iter().position(|&x| x == p))
                .map(|i| cpu[i] / secs * 100.0)
        };
        let workers = plan.w5_workers as f64;
        let breakdown = stats
            .by_time()
            .into_iter()
            .map(|(name, calls, _)| (name, calls as f64 / workers / secs * 60.0))
            .collect();
        samples.push((
            (s.kind, s.partitions),
            stats.calls() as f64 / secs / workers,
            [pct(a), pct(b), pct(c)],
            breakdown,
        ));
    }
    drop(setups);
    let mut rows = Vec::new();
    for &(kind, partitions) in &variants {
        let mine: Vec<_> = samples
            .iter()
            .filter(|s| s.0 == (kind, partitions))
            .collect();
        let col = |i: usize| Spread::of(mine.iter().filter_map(|s| s.2[i]));
        let row = IdleRow {
            system: kind,
            partitions,
            workers: plan.w5_workers,
            commands_per_worker_s: Spread::of(mine.iter().map(|s| s.1)),
            store_cpu_pct: col(0),
            workers_cpu_pct: col(1),
            server_cpu_pct: mine.iter().any(|s| s.2[2].is_some()).then(|| col(2)),
            breakdown: mine.first().map(|s| s.3.clone()).unwrap_or_default(),
        };
        say(&format!(
            "W5 {}: {} commands/s per idle worker",
            row.name(),
            row.commands_per_worker_s.show(3)
        ));
        rows.push(row);
    }
    Ok(rows)
}
