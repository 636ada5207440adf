//! The runtime's timing and outcome rules under paused tokio time, against the scripted
//! [`FakeEngine`]: renewal and its limit, lease loss, the back-off of the reserve loop,
//! at-most-once, and what shutdown acks or releases.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{DeliveryMode, Error};
use tokio::time::{Instant, sleep};

use crate::fake::FakeEngine;
use crate::{CancelReason, Handler, Job, JobError, Json, Payload, Report, Worker, WorkerConfig};

const SEC: Duration = Duration::from_secs(1);

async fn run_for<P: Payload, H: Handler<P>>(
    engine: &FakeEngine,
    config: WorkerConfig,
    handler: H,
    shutdown_after: Duration,
) -> Report {
    let worker = Worker::with_config(engine.clone(), [FakeEngine::topic()], config, handler)
        .unwrap_or_else(|e| panic!("{e}"));
    worker.run(sleep(shutdown_after)).await
}

/// When (since the handler started) and why each job's token fired.
type Fired = Arc<Mutex<Vec<(String, Duration, Option<CancelReason>)>>>;

fn record(fired: &Fired, job: &Job<Bytes>, since: Instant) {
    let mut f = fired
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f.push((job.id().to_string(), since.elapsed(), job.cancel_reason()));
}

#[tokio::test(start_paused = true)]
async fn renewal_stops_at_the_limit_then_the_lease_end_stops_the_handler() {
    let engine = FakeEngine::default();
    engine.deliver("long", 3 * SEC, true);
    let fired = Fired::default();
    let f = fired.clone();
    let handler = move |job: Job<Bytes>| {
        let f = f.clone();
        async move {
            let start = Instant::now();
            job.cancelled().await;
            record(&f, &job, start);
            std::future::pending::<()>().await; // Ignores its token.
            Ok::<(), JobError>(())
        }
    };
    let config = WorkerConfig::default().with_max_extension(2 * SEC);
    let started = Instant::now();
    let report = run_for(&engine, config, handler, 20 * SEC).await;

    let c = engine.calls();
    let touches: Vec<Duration> = c.touches.iter().map(|t| *t - started).collect();
    // Every third of the 3 s ttr (counted from when the reserve was sent: the engine
    // leased the job after that), while a touch keeps the lease within 2 s beyond its
    // first end.
    assert_eq!(touches, vec![SEC, 2 * SEC]);
    let fired = fired
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].1, 3 * SEC);
    assert_eq!(fired[0].2, Some(CancelReason::RenewalLimit));
    assert!(c.acks.is_empty() && c.nacks.is_empty());
    assert!(c.releases.is_empty(), "a lease that ended is not released");
    assert_eq!((report.failed, report.unfinished), (1, 0), "{report:?}");
}

// See: issue 36
#[tokio::test(start_paused = true)]
async fn without_renewal_a_handler_has_its_whole_lease_untouched_and_is_acked() {
    let engine = FakeEngine::default();
    engine.deliver("most", 3 * SEC, true);
    let fired = Fired::default();
    let ends = Arc::new(Mutex::new(Vec::new()));
    let (f, e) = (fired.clone(), ends.clone());
    let handler = move |job: Job<Bytes>| {
        let (f, e) = (f.clone(), e.clone());
        async move {
            let start = Instant::now();
            e.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(job.lease_end());
            tokio::select! {
                () = job.cancelled() => record(&f, &job, start),
                () = sleep(3 * SEC - Duration::from_millis(10)) => {}
            }
            Ok::<(), JobError>(())
        }
    };
    let config = WorkerConfig::default().with_max_extension(Duration::ZERO);
    let started = Instant::now();
    let report = run_for(&engine, config, handler, 10 * SEC).await;

    let c = engine.calls();
    assert!(c.touches.is_empty(), "touched: {:?}", c.touches);
    let fired = fired
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(fired.is_empty(), "the token fired early: {fired:?}");
    let ends = ends
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(*ends, [Some(started + 3 * SEC)]);
    assert_eq!(
        c.acks.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
        ["most"]
    );
    assert_eq!((report.acked, report.failed), (1, 0), "{report:?}");
}

/// When (since the handler started) something happened to a delivery.
type Events = Arc<Mutex<Vec<(&'static str, Duration)>>>;

fn note(events: &Events, what: &'static str, since: Instant) {
    events
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((what, since.elapsed()));
}

/// Notes "stopped" when the handler's future is dropped (aborted).
struct OnDrop(Events, Instant);

impl Drop for OnDrop {
    fn drop(&mut self) {
        note(&self.0, "stopped", self.1);
    }
}

// See: issue 36
#[tokio::test(start_paused = true)]
async fn without_renewal_the_token_fires_at_the_lease_end_and_the_handler_is_stopped() {
    let engine = FakeEngine::default();
    engine.deliver("long", 3 * SEC, true);
    let events = Events::default();
    let ev = events.clone();
    let handler = move |job: Job<Bytes>| {
        let ev = ev.clone();
        async move {
            let start = Instant::now();
            // A task the handler started, holding its token.
            let (token, watcher) = (job.cancellation_token().clone(), ev.clone());
            tokio::spawn(async move {
                token.cancelled().await;
                note(&watcher, "token", start);
            });
            let _guard = OnDrop(ev, start);
            std::future::pending::<()>().await; // Ignores its token.
            Ok::<(), JobError>(())
        }
    };
    let config = WorkerConfig::default().with_max_extension(Duration::ZERO);
    let report = run_for(&engine, config, handler, 10 * SEC).await;

    let c = engine.calls();
    assert!(c.touches.is_empty(), "touched: {:?}", c.touches);
    let mut events = events
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    events.sort();
    assert_eq!(events, [("stopped", 3 * SEC), ("token", 3 * SEC)]);
    assert!(c.acks.is_empty() && c.nacks.is_empty() && c.releases.is_empty());
    assert_eq!((report.failed, report.unfinished), (1, 0), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_fires_the_token_and_is_never_settled() {
    let engine = FakeEngine::default();
    engine.deliver("lost", 3 * SEC, true);
    engine.answer_touches([Err(Error::LeaseLost {
        topic: FakeEngine::topic(),
        id: delayq_core::JobId::new("lost").unwrap_or_else(|e| panic!("{e}")),
    })]);
    let fired = Fired::default();
    let f = fired.clone();
    let handler = move |job: Job<Bytes>| {
        let f = f.clone();
        async move {
            let start = Instant::now();
            job.cancelled().await;
            record(&f, &job, start);
            Ok::<(), JobError>(()) // Returns at once: still not acked.
        }
    };
    let report = run_for(&engine, WorkerConfig::default(), handler, 10 * SEC).await;

    let fired = fired
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(fired[0].2, Some(CancelReason::LeaseLost));
    let c = engine.calls();
    assert_eq!(c.touches.len(), 1);
    assert!(c.acks.is_empty() && c.nacks.is_empty());
    assert_eq!((report.acked, report.failed), (0, 1), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn outcomes_map_to_ack_nack_and_bury() {
    let engine = FakeEngine::default();
    for id in ["ok", "plain", "later", "perm", "panic"] {
        engine.deliver(id, 30 * SEC, true);
    }
    let handler = |job: Job<Bytes>| async move {
        match job.id().as_str() {
            "ok" => Ok(()),
            "plain" => Err(JobError::from(std::io::Error::other("reset"))),
            "later" => Err(JobError::retry_after(7 * SEC, "busy")),
            "perm" => Err(JobError::permanent("bad input")),
            _ => panic!("boom"),
        }
    };
    let report = run_for(&engine, WorkerConfig::default(), handler, 5 * SEC).await;

    let c = engine.calls();
    assert_eq!(
        c.acks.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
        ["ok"]
    );
    let mut nacks: Vec<(String, Option<Duration>, Option<String>)> = c
        .nacks
        .iter()
        .map(|(i, n)| (i.to_string(), n.delay, n.reason.clone()))
        .collect();
    nacks.sort();
    assert_eq!(
        nacks,
        vec![
            ("later".into(), Some(7 * SEC), Some("busy".into())),
            ("panic".into(), None, Some("handler panicked: boom".into())),
            ("plain".into(), None, Some("reset".into())),
        ]
    );
    assert_eq!(c.buries.len(), 1);
    assert_eq!(c.buries[0].1.as_deref(), Some("bad input"));
    assert_eq!(
        (report.acked, report.retried, report.buried),
        (1, 3, 1),
        "{report:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_body_is_buried_without_calling_the_handler() {
    let engine = FakeEngine::default();
    engine.deliver("garbled", 30 * SEC, true); // Its body, "body", is not JSON.
    let calls = Arc::new(Mutex::new(0));
    let n = calls.clone();
    let handler = move |_job: Job<Json<u64>>| {
        *n.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        async move { Ok::<(), JobError>(()) }
    };
    let report = run_for(&engine, WorkerConfig::default(), handler, 5 * SEC).await;

    assert_eq!(
        *calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        0
    );
    let c = engine.calls();
    assert_eq!(c.buries.len(), 1, "{report:?}");
    let reason = c.buries[0].1.clone().unwrap_or_default();
    assert!(
        reason.starts_with(
            "payload did not decode: cannot decode the job body (4 bytes) as JSON into u64"
        ),
        "{reason}"
    );
    assert_eq!(report.buried, 1, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn an_unavailable_engine_is_retried_with_a_capped_back_off() {
    let engine = FakeEngine::default();
    engine.fail_reserves();
    let handler = |_job: Job<Bytes>| async move { Ok::<(), JobError>(()) };
    let config = WorkerConfig::default().with_retry(Duration::from_millis(100), 2 * SEC);
    let started = Instant::now();
    run_for(&engine, config, handler, 10 * SEC).await;

    let c = engine.calls();
    let at: Vec<u128> = c
        .reserves
        .iter()
        .map(|t| (*t - started).as_millis())
        .collect();
    // 100 ms, doubling, capped at 2 s: no spinning.
    assert_eq!(at, vec![0, 100, 300, 700, 1500, 3100, 5100, 7100, 9100]);
}

#[tokio::test(start_paused = true)]
async fn at_most_once_never_touches_leases_and_counts_failures_as_dropped() {
    let engine = FakeEngine::default();
    engine.deliver("fine", 3 * SEC, false);
    engine.deliver("fails", 3 * SEC, false);
    let handler = |job: Job<Bytes>| async move {
        sleep(5 * SEC).await; // Longer than the ttr: nothing renews, nothing expires.
        match job.id().as_str() {
            "fine" => Ok(()),
            _ => Err(JobError::retry("no retry in at-most-once")),
        }
    };
    let config = WorkerConfig::default().with_mode(DeliveryMode::AtMostOnce);
    let report = run_for(&engine, config, handler, 10 * SEC).await;

    let c = engine.calls();
    assert!(c.touches.is_empty() && c.acks.is_empty() && c.nacks.is_empty());
    assert!(c.buries.is_empty() && c.releases.is_empty());
    assert_eq!((report.acked, report.dropped), (1, 1), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_acks_what_finishes_and_releases_the_rest() {
    let engine = FakeEngine::default();
    for id in ["finishes", "obeys", "stubborn"] {
        engine.deliver(id, 30 * SEC, true);
    }
    let fired = Fired::default();
    let f = fired.clone();
    let handler = move |job: Job<Bytes>| {
        let f = f.clone();
        async move {
            let start = Instant::now();
            match job.id().as_str() {
                "finishes" => {
                    sleep(2 * SEC).await; // Within the grace period.
                    return Ok(());
                }
                "obeys" => {
                    job.cancelled().await;
                    record(&f, &job, start);
                    return Err(JobError::retry("cancelled"));
                }
                _ => {
                    job.cancelled().await;
                    record(&f, &job, start);
                    std::future::pending::<()>().await;
                }
            }
            Ok::<(), JobError>(())
        }
    };
    let config = WorkerConfig::default().with_grace(3 * SEC);
    let report = run_for(&engine, config, handler, SEC).await;

    let mut released: Vec<String> = report.released.iter().map(|(_, i)| i.to_string()).collect();
    released.sort();
    assert_eq!(released, ["obeys", "stubborn"], "{report:?}");
    assert_eq!(
        (report.acked, report.retried, report.unfinished),
        (1, 0, 0),
        "{report:?}"
    );
    let fired = fired
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Shutdown at 1 s, then the 3 s grace period.
    assert!(
        fired
            .iter()
            .all(|(_, at, why)| *at == 4 * SEC && *why == Some(CancelReason::Shutdown)),
        "{fired:?}"
    );
    let c = engine.calls();
    assert_eq!(c.acks.len(), 1);
    assert!(c.nacks.is_empty());
}

/// With room in the window for both, a second cycle goes out while the first is on its way
/// (the engine's work on one overlaps the worker's on the other), and together they never
/// hold more leases than the prefetch.
#[tokio::test(start_paused = true)]
async fn a_second_cycle_overlaps_the_first_within_the_prefetch() {
    let engine = FakeEngine::default();
    for i in 0..3000 {
        engine.deliver(&format!("j{i}"), 30 * SEC, true);
    }
    engine.slow_reserves(Duration::from_millis(10));
    let handler = |_job: Job<Bytes>| async move { Ok::<(), JobError>(()) };
    let config = WorkerConfig::default()
        .with_concurrency(1)
        .with_prefetch(600);
    let report = run_for(&engine, config, handler, 5 * SEC).await;

    let c = engine.calls();
    assert_eq!(report.acked, 3000, "{report:?}");
    assert_eq!(
        c.max_in_flight, 2,
        "two reserving calls at most, and two at times"
    );
    assert!(c.max_leased <= 600, "{} leases held at once", c.max_leased);
}

/// Answers that come back in another order than their calls reached the engine (as on
/// PostgreSQL, where each call has a connection of its own): one slow answer holds the
/// earliest jobs, and the jobs of later calls wait for it, so one handler still runs every
/// job in the engine's order.
#[tokio::test(start_paused = true)]
async fn one_handler_runs_jobs_in_order_when_an_answer_is_late() {
    let engine = FakeEngine::default();
    for i in 0..3000 {
        engine.deliver(&format!("j{i}"), 30 * SEC, true);
    }
    engine.slow_reserves(Duration::from_millis(10));
    // Once the window has grown and a cycle goes ahead of each other one, every other
    // answer is late: so are some of the main cycles and some of those ahead.
    let mut script = vec![Duration::from_millis(10); 6];
    for _ in 0..6 {
        script.extend([Duration::from_millis(10), Duration::from_millis(300)]);
    }
    engine.script_reserve_latency(script);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let ran = ran.clone();
        move |job: Job<Bytes>| {
            ran.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(job.id().to_string());
            async { Ok::<(), JobError>(()) }
        }
    };
    let config = WorkerConfig::default()
        .with_concurrency(1)
        .with_prefetch(600);
    let report = run_for(&engine, config, handler, 10 * SEC).await;

    assert_eq!(report.acked, 3000, "{report:?}");
    let ran = ran
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let first_out_of_order = ran
        .iter()
        .enumerate()
        .find(|(i, id)| **id != format!("j{i}"));
    assert_eq!(first_out_of_order, None, "the jobs ran out of order");
}

#[tokio::test(start_paused = true)]
async fn outcomes_ride_with_the_next_reserve_and_share_calls() {
    let engine = FakeEngine::default();
    for i in 0..40 {
        engine.deliver(&format!("j{i}"), 30 * SEC, true);
    }
    let handler = |_job: Job<Bytes>| async move { Ok::<(), JobError>(()) };
    let config = WorkerConfig::default().with_concurrency(1);
    let report = run_for(&engine, config, handler, 5 * SEC).await;

    let c = engine.calls();
    assert_eq!(report.acked, 40, "{report:?}");
    assert_eq!(c.acks.len(), 40);
    assert_eq!(c.direct_acks, 0, "acks go through settle_and_reserve");
    // One handler, 40 jobs: without batching, 40 round trips for acks alone.
    assert!(
        c.settle_calls <= 10,
        "{} calls carried the 40 acks",
        c.settle_calls
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_that_arrives_with_little_lease_left_is_renewed_before_its_handler() {
    let engine = FakeEngine::default();
    engine.deliver("first", 3 * SEC, true);
    engine.deliver("late", 3 * SEC, true);
    // The second reserve is sent at 2 s (after "first" is done) and answers at 4 s: by the
    // estimate from when it was sent, "late" has 1 s of its 3 s lease left, under 1/2.
    engine.slow_reserves(2 * SEC);
    let started: Arc<Mutex<Vec<(String, Duration, usize)>>> = Arc::default();
    let (s, e) = (started.clone(), engine.clone());
    let t0 = Instant::now();
    let handler = move |job: Job<Bytes>| {
        let (s, e) = (s.clone(), e.clone());
        async move {
            let touches = e.calls().touches.len();
            s.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((job.id().to_string(), t0.elapsed(), touches));
            Ok::<(), JobError>(())
        }
    };
    let config = WorkerConfig::default().with_concurrency(1);
    let report = run_for(&engine, config, handler, 10 * SEC).await;

    let started = started
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(
        started,
        vec![
            ("first".to_string(), 2 * SEC, 0),
            ("late".to_string(), 4 * SEC, 1)
        ],
        "the late job's lease is renewed once, before its handler starts"
    );
    let touches: Vec<Duration> = engine.calls().touches.iter().map(|t| *t - t0).collect();
    assert_eq!(touches, vec![4 * SEC]);
    assert_eq!(report.acked, 2, "{report:?}");
}
