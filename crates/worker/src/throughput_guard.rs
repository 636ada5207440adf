//! The throughput guard (issue 35): the worker draining a simulated store ([`SimStore`]) in
//! paused tokio time, held to committed floors of jobs per virtual second.
//!
//! Time is virtual and the worker's CPU costs nothing in it, so each figure is the same on
//! every run and every machine: it falls only when the worker keeps fewer calls on their
//! way, or asks for fewer jobs per call, than the commit that set the floor. That is where
//! a lost overlap between round trips shows (a reserve that waits for another, a cycle
//! that no longer goes ahead). The worker's CPU per job does not show here; it is measured
//! by `bench/compare.sh` (W7's CPU per 100,000 jobs).
//!
//! A floor changes only on purpose, in the commit that moves it, and that commit quotes
//! `bench/compare.sh` against main. A trip names the figure, the floor and what it measured.
//!
//! See: issue 35.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::sim::{Costs, SimStore};
use crate::{Job, JobError, Worker, WorkerConfig};

/// Jobs each case drains.
const JOBS: u64 = 20_000;

/// The simulated server: about what Redis 8 spends on delayq's reserve and ack scripts on
/// the machine of BENCHMARKS.md (8–9 µs of Redis CPU per job over both).
const PER_CALL: Duration = Duration::from_micros(30);
const PER_JOB: Duration = Duration::from_micros(4);

/// (concurrency, round trip in µs, floor in jobs per virtual second): 3 % under what the
/// commit that set them measured, so that a small change of the window's arithmetic does
/// not trip, and a lost overlap does (2e34671's worker, which held every answer while
/// another cycle was on its way, measured 73,260 / 75,472 / 74,627 and 36,697 / 37,453 /
/// 38,760).
///
/// The ceiling a worker can reach is the server's: one job costs 8 µs (reserved, then
/// acked) plus its share of the calls, about 120,000 jobs/s with 256 jobs a call. At a
/// 5 ms round trip the worker's two calls on their way hold too few jobs to reach it.
const FLOORS: [(usize, u64, f64); 6] = [
    (1, 500, 102_600.0),
    (10, 500, 109_600.0),
    (50, 500, 111_500.0),
    (1, 5_000, 49_700.0),
    (10, 5_000, 53_400.0),
    (50, 5_000, 54_600.0),
];

/// Jobs per virtual second and calls per job of one drain.
async fn drain(concurrency: usize, round_trip: Duration) -> (f64, f64) {
    let store = SimStore::new(
        Costs {
            round_trip,
            per_call: PER_CALL,
            per_job: PER_JOB,
        },
        JOBS,
    );
    let config = WorkerConfig::default().with_concurrency(concurrency);
    let handler = |_job: Job<Bytes>| async { Ok::<(), JobError>(()) };
    let worker = Worker::with_config(store.clone(), [SimStore::topic()], config, handler)
        .unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    let done = store.clone();
    let report = worker.run(async move { done.acked(JOBS).await }).await;
    let took = start.elapsed();
    assert_eq!(report.acked, JOBS, "{report:?}");
    (
        JOBS as f64 / took.as_secs_f64(),
        store.calls() as f64 / JOBS as f64,
    )
}

#[tokio::test(start_paused = true)]
async fn the_worker_keeps_a_simulated_store_as_busy_as_the_committed_floors() {
    let mut trips = Vec::new();
    let mut seen = Vec::new();
    for (concurrency, rtt_us, floor) in FLOORS {
        let (rate, calls) = drain(concurrency, Duration::from_micros(rtt_us)).await;
        let figure = format!("C = {concurrency}, round trip {rtt_us} µs");
        seen.push(format!(
            "{figure}: {rate:.0} jobs per virtual second, {calls:.4} calls per job"
        ));
        if rate < floor {
            trips.push(format!(
                "{figure}: committed floor {floor:.0} jobs/s, measured {rate:.0}"
            ));
        }
    }
    let seen = seen.join("\n");
    assert!(
        trips.is_empty(),
        "the worker fell below its throughput floors:\n{}\nall figures:\n{seen}",
        trips.join("\n")
    );
    println!("{seen}");
}
