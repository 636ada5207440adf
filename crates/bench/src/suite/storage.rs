//! W3 (what a pending job costs the store) and W4 (push and deliver throughput while the
//! number of pending jobs grows).
//!
//! W3 measures what each store keeps: Redis's `used_memory`, beanstalkd's resident memory,
//! the embedded engine's files (closed), and for the PostgreSQL-based systems the bytes of
//! their schema's tables with indexes and TOAST (`pg_total_relation_size`), the engine
//! open; each after the fill minus before it (the empty schema), per job.

use std::time::{Duration, Instant};

use delayq_bench::driver::Delays;
use delayq_bench::stats::Spread;

use super::plan::Plan;
use super::profile::{Probe, Profile};
use super::say;
use super::systems::{self, Env, Kind};

/// Pending jobs are due this far ahead, so nothing is delivered while they are measured.
const FAR: Duration = Duration::from_secs(3 * 3600);

/// One W3 row.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct MemoryRow {
    pub system: Kind,
    /// What was measured: `Redis used_memory`, `resident memory`, `bytes on disk` or the
    /// PostgreSQL tables' bytes.
    pub what: String,
    /// Bytes per pending job.
    pub per_job: Spread,
    /// Bytes on disk per job, where the store has a disk part besides its memory.
    pub disk_per_job: Option<Spread>,
}

/// W3: `w3_jobs` delayed jobs into a fresh system, per repetition.
pub(crate) async fn w3(env: &Env, plan: &Plan, kinds: &[Kind]) -> anyhow::Result<Vec<MemoryRow>> {
    let mut rows = Vec::new();
    for &kind in kinds {
        let mut mem = Vec::new();
        let mut disk = Vec::new();
        for rep in 0..plan.reps {
            let mut sys = systems::start(kind, env).await?;
            // The embedded engine's files are measured closed, so only once, at the end.
            let before = if kind == Kind::DelayqEmbedded {
                Default::default()
            } else {
                sys.footprint().await?
            };
            let t = Instant::now();
            sys.fill(plan.w3_jobs, Delays::Fixed(FAR), plan.body)
                .await?;
            let fill = t.elapsed();
            let after = sys.footprint().await?;
            let n = plan.w3_jobs as f64;
            mem.push(after.memory.saturating_sub(before.memory) as f64 / n);
            if let Some(d) = after.disk {
                disk.push(d.saturating_sub(before.disk.unwrap_or(0)) as f64 / n);
            }
            say(&format!(
                "W3 {} rep {}: filled {} in {:.1} s; {:.0} bytes/job memory{}",
                kind.name(),
                rep + 1,
                plan.w3_jobs,
                fill.as_secs_f64(),
                mem.last().copied().unwrap_or(0.0),
                disk.last()
                    .map(|d| format!(", {d:.0} bytes/job on disk"))
                    .unwrap_or_default()
            ));
        }
        let what = match kind {
            Kind::DelayqEmbedded => "bytes on disk (engine closed)",
            Kind::Beanstalkd | Kind::BeanstalkdBinlog => "resident memory of beanstalkd",
            k if k.is_postgres() => "PostgreSQL tables and indexes (pg_total_relation_size)",
            _ => "Redis used_memory",
        };
        // The files are all these stores keep (PostgreSQL's shared buffers are a cache).
        let (per_job, disk_per_job) = if kind == Kind::DelayqEmbedded || kind.is_postgres() {
            (Spread::of(disk), None)
        } else {
            (
                Spread::of(mem),
                (!disk.is_empty()).then(|| Spread::of(disk)),
            )
        };
        rows.push(MemoryRow {
            system: kind,
            what: what.into(),
            per_job,
            disk_per_job,
        });
    }
    Ok(rows)
}

/// One W4 row: an engine at one pending level.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ScaleRow {
    pub system: Kind,
    pub pending: usize,
    /// Jobs/s pushing `w4_probe` due jobs (batches of 1000, four in flight).
    pub push_rate: Spread,
    /// Jobs/s delivering them (50 consumers, reserve + ack).
    pub deliver_rate: Spread,
    /// How long growing to this level took, in s (pushes of far-future jobs).
    pub fill_s: f64,
}

/// W4 for one engine: grow the pending set level by level; at each, push a probe of due
/// jobs and deliver it, `reps` times.
pub(crate) async fn w4(
    env: &Env,
    plan: &Plan,
    kind: Kind,
    levels: &[usize],
    profiles: &mut Vec<Profile>,
) -> anyhow::Result<Vec<ScaleRow>> {
    let mut sys = systems::start(kind, env).await?;
    let mut rows = Vec::new();
    let mut pending = 0;
    for &level in levels {
        let t = Instant::now();
        if level > pending {
            sys.fill(level - pending, Delays::Fixed(FAR), plan.body)
                .await?;
            pending = level;
        }
        let fill_s = t.elapsed().as_secs_f64();
        let mut push = Vec::new();
        let mut deliver = Vec::new();
        for rep in 0..plan.reps {
            let t = Instant::now();
            sys.fill(plan.w4_probe, Delays::Ready, plan.body).await?;
            push.push(plan.w4_probe as f64 / t.elapsed().as_secs_f64().max(1e-9));
            // The last delivery at the lowest and at the highest level is profiled.
            let edge = level == levels[0] || Some(&level) == levels.last();
            let probe = if edge && rep + 1 == plan.reps {
                Some(Probe::start(sys.as_ref(), Duration::from_secs(1)).await?)
            } else {
                None
            };
            let r = sys
                .drain(plan.w4_probe, 50, Duration::from_secs(120))
                .await?;
            if let Some(p) = probe {
                let what = format!(
                    "W4, {} pending",
                    delayq_bench::stats::fmt_num(level as f64, 0)
                );
                profiles.push(p.finish(sys.as_ref(), &what, r.jobs).await?);
            }
            if r.jobs < plan.w4_probe {
                anyhow::bail!(
                    "W4 {}: only {} of {} probe jobs delivered at {level} pending",
                    kind.name(),
                    r.jobs,
                    plan.w4_probe
                );
            }
            deliver.push(r.rate());
        }
        let row = ScaleRow {
            system: kind,
            pending: level,
            push_rate: Spread::of(push),
            deliver_rate: Spread::of(deliver),
            fill_s,
        };
        say(&format!(
            "W4 {} at {level} pending (filled in {fill_s:.1} s): push {}, deliver {} jobs/s",
            kind.name(),
            row.push_rate.show(0),
            row.deliver_rate.show(0)
        ));
        rows.push(row);
    }
    Ok(rows)
}
