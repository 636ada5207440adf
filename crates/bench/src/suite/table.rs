//! W6, the seeds' own table (seed 000 §4): the time to consume N jobs, how many were lost
//! and how many handled twice, for delayq at-least-once and at-most-once and the seeds'
//! design, with 1 and 10 consumer threads; and again with the consumer process killed
//! (SIGKILL) at a third and at two thirds of the run, then restarted.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use delayq::{Engine, NewJob, Topic};
use delayq_bench::clock;
use delayq_bench::stats::Spread;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

use super::plan::Plan;
use super::procs::{self, Owned};
use super::say;
use super::systems::{self, Env, Seeds};

/// One W6 row.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct TableRow {
    pub system: String,
    pub consumers: usize,
    pub killed: bool,
    /// Seconds from the first consumer's start to the last job handled.
    pub time_s: Spread,
    /// Jobs never handled (handled by no consumer, and gone from the queue or dead).
    pub lost: Spread,
    /// Of those, jobs the queue keeps as dead (out of attempts), not gone.
    pub dead: Spread,
    pub duplicated: Spread,
}

const SYSTEMS: [(&str, &str, &str); 3] = [
    ("delayq, at-least-once", "delayq", "at-least-once"),
    ("delayq, at-most-once", "delayq", "at-most-once"),
    ("seeds' design (no ack)", "seeds", "at-most-once"),
];

struct Consumer {
    proc: Owned,
    lines: Lines<BufReader<ChildStdout>>,
}

async fn consumer(
    env: &Env,
    system: &str,
    url: &str,
    mode: &str,
    c: usize,
) -> anyhow::Result<Consumer> {
    let mut proc = Owned::spawn(
        "a W6 consumer",
        &procs::self_exe()?,
        &[
            "consume".into(),
            "--system".into(),
            system.into(),
            "--url".into(),
            url.into(),
            "--mode".into(),
            mode.into(),
            "--concurrency".into(),
            c.to_string(),
        ],
        None,
        Some(&env.work.join("w6-consumer.log")),
    )?;
    let out = proc
        .child()
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("the consumer's stdout"))?;
    Ok(Consumer {
        proc,
        lines: BufReader::new(out).lines(),
    })
}

/// One run: returns (seconds, lost, duplicated, dead).
async fn one(
    env: &Env,
    plan: &Plan,
    (system, mode): (&str, &str),
    c: usize,
    kill: bool,
) -> anyhow::Result<(f64, f64, f64, f64)> {
    let redis = systems::redis_server();
    let url = redis.url();
    let n = plan.w6_jobs;
    let topic = Topic::new("bench")?;
    let engine = delayq::open(&url).await?;
    let seeds = Seeds::connect(&url).await?;
    if system == "delayq" {
        for chunk in 0..n.div_ceil(1000) {
            let k = (n - chunk * 1000).min(1000);
            let jobs = (0..k)
                .map(|_| {
                    NewJob::new(topic.clone(), clock::body(0, plan.body)).with_ttr(plan.w6_ttr)
                })
                .collect();
            engine.push_batch(jobs).await?;
        }
    } else {
        let now = clock::now_ms();
        let jobs: Vec<(u64, Vec<u8>)> =
            (0..n).map(|_| (now, clock::body(now, plan.body))).collect();
        for chunk in jobs.chunks(1000) {
            seeds.push(chunk).await?;
        }
    }
    // The run ends when every job was handled, or when the queue holds nothing any more
    // (what is missing then is lost) and no consumer reported anything for a moment.
    let empty = async || -> anyhow::Result<bool> {
        Ok(if system == "delayq" {
            let s = engine.stats(&topic).await?;
            s.delayed + s.ready + s.reserved == 0
        } else {
            seeds.pending().await? == 0
        })
    };
    let start = Instant::now();
    let mut cons = consumer(env, system, &url, mode, c).await?;
    let (mut seen, mut handled, mut last) = (HashSet::new(), 0usize, start);
    let mut kills = 0;
    loop {
        if kill && kills < 2 && handled >= n * (kills + 1) / 3 {
            cons.proc.kill().await;
            kills += 1;
            // What the killed process wrote before it died still counts: read to its end.
            while let Ok(Ok(Some(id))) =
                tokio::time::timeout(Duration::from_secs(5), cons.lines.next_line()).await
            {
                handled += 1;
                seen.insert(id);
                last = Instant::now();
            }
            if seen.len() == n {
                break;
            }
            cons = consumer(env, system, &url, mode, c).await?;
        }
        match tokio::time::timeout(Duration::from_millis(200), cons.lines.next_line()).await {
            Ok(Ok(Some(id))) => {
                handled += 1;
                seen.insert(id);
                last = Instant::now();
                if seen.len() == n {
                    break;
                }
            }
            Ok(Ok(None)) => anyhow::bail!(
                "a W6 consumer exited (see {})",
                env.work.join("w6-consumer.log").display()
            ),
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                if last.elapsed() > Duration::from_millis(500) && empty().await? {
                    break;
                }
            }
        }
        if start.elapsed() > Duration::from_secs(120) {
            break;
        }
    }
    cons.proc.kill().await;
    let dead = if system == "delayq" {
        engine.stats(&topic).await?.dead
    } else {
        0
    };
    drop(redis);
    let lost = n - seen.len().min(n);
    Ok((
        last.duration_since(start).as_secs_f64(),
        lost as f64,
        (handled - seen.len()) as f64,
        dead as f64,
    ))
}

/// W6.
pub(crate) async fn w6(env: &Env, plan: &Plan) -> anyhow::Result<Vec<TableRow>> {
    let mut rows = Vec::new();
    for (label, system, mode) in SYSTEMS {
        for &c in &plan.w6_consumers {
            for killed in [false, true] {
                let mut runs = Vec::new();
                for _ in 0..plan.reps {
                    runs.push(one(env, plan, (system, mode), c, killed).await?);
                }
                let row = TableRow {
                    system: label.into(),
                    consumers: c,
                    killed,
                    time_s: Spread::of(runs.iter().map(|r| r.0)),
                    lost: Spread::of(runs.iter().map(|r| r.1)),
                    duplicated: Spread::of(runs.iter().map(|r| r.2)),
                    dead: Spread::of(runs.iter().map(|r| r.3)),
                };
                say(&format!(
                    "W6 {label} C={c}{}: {} s, lost {} (dead {}), duplicated {}",
                    if killed { " (killed twice)" } else { "" },
                    row.time_s.show(2),
                    row.lost.show(0),
                    row.dead.show(0),
                    row.duplicated.show(0)
                ));
                rows.push(row);
            }
        }
    }
    Ok(rows)
}
