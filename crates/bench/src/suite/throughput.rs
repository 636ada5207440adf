//! W1 (drain a backlog of ready jobs), W2 (deliver delayed jobs while they are pushed) and
//! W7 (CPU per 100,000 jobs, measured during W1's drains), for every system.

use delayq_bench::driver::Delays;
use delayq_bench::lateness::{Lateness, LatenessSummary};
use delayq_bench::stats::Spread;

use super::plan::Plan;
use super::systems::{self, Env, Kind};
use super::{profile, say};

/// One W1 row: a system with C consumers.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DrainRow {
    pub system: Kind,
    pub consumers: usize,
    /// Jobs per second.
    pub rate: Spread,
    /// Jobs handled per repetition (the backlog, or what the time cap allowed).
    pub jobs: Spread,
    /// CPU of the store (redis-server, beanstalkd) in % of one core during the drain.
    pub store_cpu_pct: Spread,
    /// CPU seconds per 100,000 jobs: the store, the queue's process, a separate client.
    pub store_cpu_per_100k: Spread,
    pub queue_cpu_per_100k: Spread,
    pub client_cpu_per_100k: Option<Spread>,
}

/// W1: each system drains a backlog of `w1_jobs` ready jobs with each consumer count;
/// the backlog is topped up before each drain.
pub(crate) async fn w1(env: &Env, plan: &Plan, kinds: &[Kind]) -> anyhow::Result<Vec<DrainRow>> {
    let mut rows = Vec::new();
    for &kind in kinds {
        // The client workers run at C = 10 and 50 only.
        let consumers = kind.w1_consumers(&plan.w1_consumers);
        if consumers.is_empty() {
            anyhow::bail!(
                "W1: {} runs at C in {:?}, and the plan has {:?}",
                kind.name(),
                systems::CLIENT_CONSUMERS,
                plan.w1_consumers
            );
        }
        let mut sys = systems::start(kind, env).await?;
        let mut backlog = 0;
        let mut samples: Vec<Vec<[f64; 6]>> = vec![Vec::new(); consumers.len()];
        // A drain may take nothing within the cap when every consumer's first reserve is
        // slower than that (pg-boss at C = 50: each fetch sorts the whole ready backlog): its
        // rate is then 0. A system that took nothing in any drain is broken, not slow.
        let mut handled = 0;
        for rep in 0..plan.reps {
            for (i, &c) in consumers.iter().enumerate() {
                if backlog < plan.w1_jobs {
                    sys.fill(plan.w1_jobs - backlog, Delays::Ready, plan.body)
                        .await?;
                    backlog = plan.w1_jobs;
                }
                let (r, cpu) = sys.drain_metered(plan.w1_jobs, c, plan.w1_cap).await?;
                backlog -= r.jobs.min(backlog);
                handled += r.jobs;
                let per = |s: f64| s / r.jobs as f64 * 100_000.0;
                samples[i].push([
                    r.rate(),
                    r.jobs as f64,
                    cpu.store / cpu.wall * 100.0,
                    per(cpu.store),
                    per(cpu.queue),
                    per(cpu.client),
                ]);
                say(&format!(
                    "W1 {} C={c} rep {}: {:.0} jobs/s ({} jobs)",
                    kind.name(),
                    rep + 1,
                    r.rate(),
                    r.jobs
                ));
            }
        }
        if handled == 0 {
            anyhow::bail!("W1: {} delivered nothing in any drain", kind.name());
        }
        for (i, &c) in consumers.iter().enumerate() {
            let col = |k: usize| Spread::of(samples[i].iter().map(|s| s[k]));
            let client = col(5);
            rows.push(DrainRow {
                system: kind,
                consumers: c,
                rate: col(0),
                jobs: col(1),
                store_cpu_pct: col(2),
                store_cpu_per_100k: col(3),
                queue_cpu_per_100k: col(4),
                client_cpu_per_100k: (client.n > 0).then_some(client),
            });
        }
    }
    Ok(rows)
}

/// One W2 row.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DelayedRow {
    pub system: Kind,
    /// Producer jobs/s (one producer, batches awaited in turn).
    pub push_rate: Spread,
    /// Delivered jobs/s, from the first push to the last delivery.
    pub deliver_rate: Spread,
    pub p50_ms: Spread,
    pub p90_ms: Spread,
    pub p99_ms: Spread,
    pub max_ms: Spread,
    /// Early deliveries, summed over the repetitions.
    pub early: u64,
    /// Deliveries per repetition.
    pub delivered: Spread,
    /// Whether every repetition delivered every job before the cap.
    pub all_delivered: bool,
    /// The system's own lateness measure (delayq: engine clock; beanstalkd: against the
    /// whole second it was given), p99 in ms.
    pub own_p99_ms: Option<Spread>,
    pub own_early: Option<u64>,
    /// All repetitions' host-clock lateness, merged, as CDF points (ms, fraction).
    pub cdf: Vec<(f64, f64)>,
}

/// W2 for every system: a fresh system per repetition.
pub(crate) async fn w2(
    env: &Env,
    plan: &Plan,
    kinds: &[Kind],
    profiles: &mut Vec<profile::Profile>,
) -> anyhow::Result<Vec<DelayedRow>> {
    let spec = plan.w2_spec();
    let mut rows = Vec::new();
    for &kind in kinds {
        let mut runs = Vec::new();
        let mut merged = Lateness::new();
        let mut own_runs: Vec<LatenessSummary> = Vec::new();
        for rep in 0..plan.reps {
            let mut sys = systems::start(kind, env).await?;
            // The last repetition is profiled: Redis's command statistics, its slow log
            // and, where perf works, where redis-server spends its CPU.
            let last = rep + 1 == plan.reps;
            let probe = if last {
                Some(profile::Probe::start(sys.as_ref(), plan.w2_spread).await?)
            } else {
                None
            };
            let r = sys.delayed(spec).await?;
            if let Some(p) = probe {
                profiles.push(p.finish(sys.as_ref(), "W2", r.delivered).await?);
            }
            let s = r.host.summary();
            say(&format!(
                "W2 {} rep {}: pushed {} at {:.0}/s, delivered {} , p50 {:.2} ms p99 {:.2} ms max {:.2} ms, early {}",
                kind.name(),
                rep + 1,
                r.pushed,
                r.pushed as f64 / r.push_elapsed.as_secs_f64().max(1e-9),
                r.delivered,
                s.p50_ms,
                s.p99_ms,
                s.max_ms,
                s.early
            ));
            merged.merge(&r.host);
            if let Some(o) = &r.own {
                own_runs.push(o.summary());
            }
            runs.push(r);
        }
        let sums: Vec<LatenessSummary> = runs.iter().map(|r| r.host.summary()).collect();
        let col = |f: &dyn Fn(&LatenessSummary) -> f64| Spread::of(sums.iter().map(f));
        rows.push(DelayedRow {
            system: kind,
            push_rate: Spread::of(
                runs.iter()
                    .map(|r| r.pushed as f64 / r.push_elapsed.as_secs_f64().max(1e-9)),
            ),
            deliver_rate: Spread::of(
                runs.iter()
                    .map(|r| r.delivered as f64 / r.elapsed.as_secs_f64().max(1e-9)),
            ),
            p50_ms: col(&|s| s.p50_ms),
            p90_ms: col(&|s| s.p90_ms),
            p99_ms: col(&|s| s.p99_ms),
            max_ms: col(&|s| s.max_ms),
            early: sums.iter().map(|s| s.early).sum(),
            delivered: Spread::of(runs.iter().map(|r| r.delivered as f64)),
            all_delivered: runs.iter().all(|r| r.delivered >= plan.w2_jobs),
            own_p99_ms: (!own_runs.is_empty())
                .then(|| Spread::of(own_runs.iter().map(|s| s.p99_ms))),
            own_early: (!own_runs.is_empty()).then(|| own_runs.iter().map(|s| s.early).sum()),
            cdf: merged.cdf(),
        });
    }
    Ok(rows)
}
