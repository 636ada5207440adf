//! Lateness of delayed jobs on the Redis engine: `jobs` jobs with delays uniform over
//! `spread`, pushed in batches, taken by `reservers` concurrent reservers that ack at once.
//! Lateness is the delivery time (Redis `TIME` in the reserve script) minus the due time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use delayq::{Engine, NewJob, Reserve, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisOptions, RedisServer};
use hdrhistogram::Histogram;
use rand::Rng;
use tokio::sync::Mutex;

/// Arguments of `redis-lateness`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Jobs to push.
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// Delays are uniform in [0, spread] milliseconds.
    #[arg(long, default_value_t = 5_000)]
    spread_ms: u64,
    /// Concurrent reservers.
    #[arg(long, default_value_t = 8)]
    reservers: usize,
    /// Jobs per reserve call.
    #[arg(long, default_value_t = 10)]
    batch: usize,
    /// Repetitions (each on a fresh redis-server); the figures are medians with min-max.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
}

struct Run {
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
    early: u64,
    jobs_per_s: f64,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let machine = crate::machine::describe();
    let mut runs = Vec::new();
    for _ in 0..args.repeat {
        runs.push(one(&args).await?);
    }
    let stat = |f: &dyn Fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let ms = |us: u64| us as f64 / 1000.0;
    println!("### Redis engine: lateness of delayed jobs\n");
    println!(
        "{} jobs, delays uniform in [0, {}] ms, pushed in batches of 100; {} reservers taking up to {} jobs per call, acking at once; one redis-server (default `hz 10`) on loopback. Median of {} runs (min–max).\n",
        args.jobs, args.spread_ms, args.reservers, args.batch, args.repeat
    );
    println!("| figure | median | min | max |\n|---|---|---|---|");
    for (name, f) in [
        (
            "lateness p50 (ms)",
            &(|r: &Run| ms(r.p50_us)) as &dyn Fn(&Run) -> f64,
        ),
        ("lateness p99 (ms)", &|r: &Run| ms(r.p99_us)),
        ("lateness max (ms)", &|r: &Run| ms(r.max_us)),
        ("delivered jobs/s over the run", &|r: &Run| r.jobs_per_s),
        ("early deliveries", &|r: &Run| r.early as f64),
    ] {
        let (m, lo, hi) = stat(f);
        println!("| {name} | {m:.2} | {lo:.2} | {hi:.2} |");
    }
    println!("\nMachine: {machine}.");
    Ok(())
}

async fn one(args: &Args) -> anyhow::Result<Run> {
    let server = RedisServer::start_with(RedisOptions::default());
    let engine = RedisEngine::connect(RedisConfig::new(server.url()))
        .await
        .context("connecting to the benchmark's redis-server")?;
    let topic = Topic::new("bench.lateness")?;
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let delivered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let early = Arc::new(std::sync::atomic::AtomicU64::new(0));

    let mut tasks = Vec::new();
    for _ in 0..args.reservers {
        let (e, t, hist, delivered, early) = (
            engine.clone(),
            topic.clone(),
            hist.clone(),
            delivered.clone(),
            early.clone(),
        );
        let (total, batch) = (args.jobs, args.batch);
        tasks.push(tokio::spawn(async move {
            while delivered.load(std::sync::atomic::Ordering::Relaxed) < total {
                let got = e
                    .reserve(
                        &Reserve::new(t.clone())
                            .max(batch)
                            .wait(Duration::from_millis(500)),
                    )
                    .await?;
                if got.is_empty() {
                    continue;
                }
                let leases: Vec<_> = got.iter().filter_map(|d| d.lease.clone()).collect();
                {
                    let mut h = hist.lock().await;
                    for d in &got {
                        h.record(d.lateness.as_micros() as u64)?;
                        // The lease deadline is the reserve time plus the ttr, on the
                        // engine's clock: a reserve before the due time would show here.
                        let reserved_at = d
                            .job
                            .deadline
                            .map(|dl| dl.as_millis() - d.job.ttr.as_millis() as u64);
                        if reserved_at.is_some_and(|r| r < d.job.ready_at.as_millis()) {
                            early.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
                delivered.fetch_add(got.len(), std::sync::atomic::Ordering::Relaxed);
                for r in e.ack_batch(&leases).await? {
                    r?;
                }
            }
            anyhow::Ok(())
        }));
    }

    let start = Instant::now();
    let mut rng = rand::rng();
    let mut pushed = 0;
    while pushed < args.jobs {
        let n = (args.jobs - pushed).min(100);
        let jobs = (0..n)
            .map(|_| {
                NewJob::new(topic.clone(), vec![b'x'; 100])
                    .with_delay(Duration::from_millis(rng.random_range(0..=args.spread_ms)))
            })
            .collect();
        engine.push_batch(jobs).await?;
        pushed += n;
    }
    for t in tasks {
        tokio::time::timeout(
            Duration::from_millis(args.spread_ms) + Duration::from_secs(60),
            t,
        )
        .await
        .context("reservers did not finish in time")???;
    }
    let elapsed = start.elapsed();
    let h = hist.lock().await;
    if (h.len() as usize) < args.jobs {
        bail!("only {} of {} jobs delivered", h.len(), args.jobs);
    }
    let stats = engine.stats(&topic).await?;
    if stats.delayed + stats.ready + stats.reserved != 0 {
        bail!("jobs left over: {stats:?}");
    }
    Ok(Run {
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        max_us: h.max(),
        early: early.load(std::sync::atomic::Ordering::Relaxed),
        jobs_per_s: args.jobs as f64 / elapsed.as_secs_f64(),
    })
}
