//! Measures what the Redis engine's hot-path calls cost inside Redis, per call and per job,
//! from `INFO commandstats` (which counts the commands a script or function runs, too).
//!
//! It starts its own `redis-server` (through `delayq-testkit`), then runs three bounded
//! phases on one topic, each after `CONFIG RESETSTAT`: push (batches of 100), reserve (up to B
//! per call, the leases held), `ack_batch` of those leases (B per call), and a worker's
//! cycle as one `settle_and_reserve` call (the acks of the last B deliveries, reserve B); B
//! is 10 unless the second argument says otherwise.
//! Besides command times it prints Redis's CPU time per job (`INFO cpu`), which a busy
//! machine inflates less. Figures go to BENCHMARKS.md ("Redis engine: cost per call").
//!
//! ```sh
//! cargo run --release -p delayq-redis --example call_cost -- 20000        # batches of 10
//! cargo run --release -p delayq-redis --example call_cost -- 100000 256   # a worker's batches
//! ```

#![allow(clippy::unwrap_used, clippy::print_stdout)] // A measurement program, not library code.

use std::time::Instant;

use delayq_core::{Engine, NewJob, Reserve, Settle, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;

/// Jobs per reserve unless the second argument says otherwise: a worker with 10 free slots
/// asks for 10; a busy worker's fetch loop asks for up to 256.
const BATCH: usize = 10;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("the number of jobs"))
        .unwrap_or(20_000)
        .clamp(BATCH, 200_000);
    let batch: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().expect("the jobs per call"))
        .unwrap_or(BATCH)
        .clamp(1, 1000);
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let e = RedisEngine::connect(RedisConfig::new(server.url()))
        .await
        .unwrap();
    let t = Topic::new("cost").unwrap();
    let body = vec![b'x'; 100];

    let push = |n: usize| {
        let (e, t, body) = (e.clone(), t.clone(), body.clone());
        async move {
            for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
                let batch = chunk
                    .iter()
                    .map(|_| NewJob::new(t.clone(), body.clone()))
                    .collect();
                e.push_batch(batch).await.unwrap();
            }
        }
    };

    let cpu0 = reset(&mut conn).await;
    let start = Instant::now();
    push(jobs).await;
    report("push, batches of 100", jobs, (start, cpu0), &mut conn).await;

    let cpu0 = reset(&mut conn).await;
    let start = Instant::now();
    let mut held = Vec::new();
    while held.len() < jobs {
        let got = e
            .reserve(&Reserve::new(t.clone()).max(batch))
            .await
            .unwrap();
        held.extend(got.into_iter().filter_map(|d| d.lease));
    }
    report(
        &format!("reserve up to {batch} per call"),
        jobs,
        (start, cpu0),
        &mut conn,
    )
    .await;

    let cpu0 = reset(&mut conn).await;
    let start = Instant::now();
    for leases in held.chunks(batch) {
        for r in e.ack_batch(leases).await.unwrap() {
            r.unwrap();
        }
    }
    report(
        &format!("ack_batch of {batch} per call"),
        jobs,
        (start, cpu0),
        &mut conn,
    )
    .await;

    push(jobs).await;
    let cpu0 = reset(&mut conn).await;
    let start = Instant::now();
    let mut done = 0;
    let mut settle: Vec<Settle> = Vec::new();
    loop {
        let max = if done < jobs { batch } else { 0 };
        let got = e
            .settle_and_reserve(&settle, &Reserve::new(t.clone()).max(max))
            .await
            .unwrap();
        for r in got.settled {
            r.unwrap();
        }
        if max == 0 {
            break;
        }
        done += got.deliveries.len();
        settle = got
            .deliveries
            .iter()
            .filter_map(|d| d.lease.clone().map(Settle::Ack))
            .collect();
    }
    report(
        &format!("cycle as one call: settle_and_reserve (acks + reserve {batch})"),
        jobs,
        (start, cpu0),
        &mut conn,
    )
    .await;
}

/// Resets the command statistics; answers Redis's CPU seconds so far (user + system).
async fn reset(conn: &mut redis::aio::MultiplexedConnection) -> f64 {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
    cpu(conn).await
}

/// Redis's CPU seconds so far (`used_cpu_user` + `used_cpu_sys` of `INFO cpu`): unlike
/// command times, it does not count time the server spent preempted on a busy machine.
async fn cpu(conn: &mut redis::aio::MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            l.strip_prefix("used_cpu_user:")
                .or_else(|| l.strip_prefix("used_cpu_sys:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum()
}

/// Prints each command's calls and µs per call, and the total µs per job.
async fn report(
    what: &str,
    jobs: usize,
    (start, cpu0): (Instant, f64),
    conn: &mut redis::aio::MultiplexedConnection,
) {
    let wall = start.elapsed();
    let cpu_us = (cpu(conn).await - cpu0) * 1e6;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    println!(
        "\n{what}: {jobs} jobs in {:.2} s ({:.0} jobs/s, one client)",
        wall.as_secs_f64(),
        jobs as f64 / wall.as_secs_f64()
    );
    let mut script_us = 0.0;
    let mut rows = Vec::new();
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, fields)) = rest.split_once(':') else {
            continue;
        };
        if name == "config" || name == "info" {
            continue;
        }
        let field = |k: &str| -> f64 {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        let (calls, usec) = (field("calls="), field("usec="));
        if SCRIPT_CALLS.contains(&name) {
            script_us += usec;
        }
        rows.push((name.to_string(), calls, usec));
    }
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (name, calls, usec) in rows {
        println!(
            "  {name:<18} {:>8.0} calls  {:>7.1} µs/call  {:>6.2} µs/job",
            calls,
            usec / calls.max(1.0),
            usec / jobs as f64
        );
    }
    println!(
        "  script/function time per job: {:.2} µs (it includes the commands they run)",
        script_us / jobs as f64
    );
    println!(
        "  Redis CPU per job: {:.2} µs (INFO cpu, user + system)",
        cpu_us / jobs as f64
    );
}

/// The rows of script and function calls: their time includes the commands they ran, which
/// `INFO commandstats` also lists on their own rows.
const SCRIPT_CALLS: [&str; 4] = ["evalsha", "evalsha_ro", "fcall", "fcall_ro"];
