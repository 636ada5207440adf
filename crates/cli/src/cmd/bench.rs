//! `delayq bench`: the benchmark driver of `delayq-bench` (the same code as the side-by-side
//! suite's delayq rows) against the user's own engine, with a progress bar per phase.

use std::sync::Arc;

use anyhow::{Context, bail};
use delayq::{Engine, Store, Topic};
use delayq_bench::clock;
use delayq_bench::driver::{self, DelayedSpec, Delays};
use delayq_bench::lateness::LatenessSummary;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cli::BenchArgs;
use crate::cmd::serve::without_password;

/// The most jobs one phase may push: the command stays a bounded load.
const MAX_JOBS: usize = 1_000_000;

fn bar(len: usize, phase: &str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>8} [{bar:30}] {pos}/{len} jobs, {per_sec}, {elapsed}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(phase.to_string());
    pb
}

fn check(a: &BenchArgs) -> anyhow::Result<()> {
    if a.jobs == 0 || a.jobs > MAX_JOBS || a.delayed > MAX_JOBS {
        bail!("--jobs must be 1 to {MAX_JOBS} and --delayed 0 to {MAX_JOBS}");
    }
    if a.consumers == 0 || a.consumers > 10_000 {
        bail!("--consumers must be 1 to 10000");
    }
    if a.body < 16 {
        bail!("--body must be at least 16 bytes: each body carries its due time");
    }
    Ok(())
}

pub async fn run(a: BenchArgs) -> anyhow::Result<()> {
    check(&a)?;
    let temp;
    let url = match &a.engine {
        Some(u) => u.clone(),
        None => {
            temp = tempfile::Builder::new().prefix("delayq-bench-").tempdir()?;
            format!("sqlite://{}", temp.path().display())
        }
    };
    let engine = delayq::open(&url)
        .await
        .with_context(|| format!("cannot open the engine at {}", without_password(&url)))?;
    let topic = Topic::new(format!("bench.{}", clock::now_us()))?;
    let result = measure(&engine, &topic, &a).await;
    // Always leave the user's engine as it was, even after a failed phase.
    let purged = engine.purge(&topic).await;
    let figures = result?;
    purged.with_context(|| format!("cannot purge the benchmark's topic {topic}"))?;
    if a.json {
        // As a JSON value, whose members print sorted by name (as they always have).
        println!("{}", serde_json::to_value(&figures)?);
    } else {
        print(&figures, &a);
    }
    Ok(())
}

async fn measure(engine: &Arc<dyn Store>, topic: &Topic, a: &BenchArgs) -> anyhow::Result<Figures> {
    let pb = bar(a.jobs, "push");
    let pushed = driver::fill(engine, topic, a.jobs, Delays::Ready, a.body, &pb).await?;
    pb.finish();
    let pb = bar(a.jobs, "drain");
    let drained = driver::drain(engine, topic, a.jobs, a.consumers, a.timeout, &pb).await?;
    pb.finish();
    if drained.jobs < a.jobs {
        bail!(
            "only {} of {} jobs were delivered within {:?}",
            drained.jobs,
            a.jobs,
            a.timeout
        );
    }
    let mut out = Figures {
        engine: a
            .engine
            .as_deref()
            .map_or_else(|| "temporary embedded engine".into(), without_password),
        push: Pushed {
            jobs: a.jobs,
            seconds: pushed.as_secs_f64(),
            jobs_per_s: a.jobs as f64 / pushed.as_secs_f64().max(1e-9),
        },
        drain: Drained {
            jobs: drained.jobs,
            consumers: a.consumers,
            seconds: drained.elapsed.as_secs_f64(),
            jobs_per_s: drained.rate(),
        },
        delayed: None,
    };
    if a.delayed > 0 {
        let pb = bar(a.delayed, "delayed");
        let spec = DelayedSpec {
            jobs: a.delayed,
            spread: a.spread,
            consumers: a.consumers,
            batch: 100,
            body: a.body,
            cap: a.spread + a.timeout,
        };
        let r = driver::delayed(engine, topic, spec, &pb).await?;
        pb.finish();
        let (h, e) = (r.host.summary(), r.engine.summary());
        out.delayed = Some(Delayed {
            jobs: r.pushed,
            delivered: r.delivered,
            spread_ms: a.spread.as_millis() as u64,
            push_jobs_per_s: r.pushed as f64 / r.push_elapsed.as_secs_f64().max(1e-9),
            lateness_ms: h,
            engine_lateness_ms: e,
        });
        if r.delivered < r.pushed {
            bail!(
                "only {} of {} delayed jobs were delivered within {:?}",
                r.delivered,
                r.pushed,
                spec.cap
            );
        }
    }
    Ok(out)
}

fn print(f: &Figures, a: &BenchArgs) {
    println!("engine: {}", f.engine);
    println!(
        "push:    {} ready jobs in {:.2} s: {:.0} jobs/s (batches of 1000)",
        a.jobs, f.push.seconds, f.push.jobs_per_s
    );
    println!(
        "drain:   {} jobs in {:.2} s: {:.0} jobs/s ({} consumers, reserve + ack)",
        f.drain.jobs, f.drain.seconds, f.drain.jobs_per_s, a.consumers
    );
    if let Some(d) = &f.delayed {
        let l = &d.lateness_ms;
        println!(
            "delayed: {} jobs, delays uniform in [0, {:?}]: lateness p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; early {}",
            d.delivered, a.spread, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms, l.early
        );
        println!(
            "         (host clock: delivery minus the due time the producer asked for; engine clock p99 {:.2} ms)",
            d.engine_lateness_ms.p99_ms
        );
    }
}

/// What `delayq bench` measured: the text's figures, and with --json the JSON.
#[derive(Serialize)]
struct Figures {
    /// The engine, without its password.
    engine: String,
    /// The ready backlog pushed.
    push: Pushed,
    /// The backlog drained.
    drain: Drained,
    /// The delayed phase (absent with --delayed 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    delayed: Option<Delayed>,
}

/// The push phase.
#[derive(Serialize)]
struct Pushed {
    jobs: usize,
    seconds: f64,
    jobs_per_s: f64,
}

/// The drain phase.
#[derive(Serialize)]
struct Drained {
    jobs: usize,
    consumers: usize,
    seconds: f64,
    jobs_per_s: f64,
}

/// The delayed phase: how late the jobs came, by the host's clock and the engine's.
#[derive(Serialize)]
struct Delayed {
    jobs: usize,
    delivered: usize,
    spread_ms: u64,
    push_jobs_per_s: f64,
    lateness_ms: LatenessSummary,
    engine_lateness_ms: LatenessSummary,
}
