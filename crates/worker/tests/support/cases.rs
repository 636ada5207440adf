//! The worker cases, each an async function generic over the [`Backend`]. Waits are bounded
//! and poll the engine; no case asserts speed.
//!
//! The file is long because it is the worker's whole behaviour against real engines, one
//! case per promise (settling, renewal, shutdown, failures, schedules), written once and run
//! on every engine by the `tests/*.rs` files that name a backend; a case in a file of its
//! own would have to be listed in each of them.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{
    Backoff, Engine, JobSchedule, JobState, JobTemplate, NewJob, Reserve, ScheduleName, Schedules,
    Topic, TopicConfig,
};
use delayq_worker::{
    CancelReason, Handler, Job, JobError, Json, Payload, Report, Scheduler, SchedulerConfig,
    Worker, WorkerConfig, delete_schedule, put_schedule,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::counting::{ACKED, Counting};
use super::{Backend, eventually, id, topic, within};

/// The environment variable that turns a test process into the child worker of
/// [`killed_worker_jobs_come_back_after_the_ttr`]; its value is the store's address.
const CHILD_ENV: &str = "DELAYQ_WORKER_TEST_CHILD";
/// The prefix of the line the child prints when it starts holding a slow job.
const HOLDING: &str = "DELAYQ-HOLDING ";

const LONG: Duration = Duration::from_secs(30);

/// A worker running in a background task until [`Running::stop`].
struct Running {
    stop: oneshot::Sender<()>,
    report: JoinHandle<Report>,
}

impl Running {
    fn start<E, P, H>(worker: Worker<E, P, H>) -> Self
    where
        E: Engine,
        P: Payload,
        H: Handler<P>,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let report = tokio::spawn(worker.run(async move {
            let _ = stopped.await;
        }));
        Running { stop, report }
    }

    async fn stop(self) -> Report {
        let _ = self.stop.send(());
        within(LONG, "the worker to stop", self.report)
            .await
            .unwrap()
    }
}

/// What handlers saw: every call's (id, attempt), how many run at once, why tokens fired.
#[derive(Clone, Default)]
struct Probe(Arc<ProbeState>);

#[derive(Default)]
struct ProbeState {
    running: AtomicUsize,
    max_running: AtomicUsize,
    finished: AtomicUsize,
    calls: Mutex<Vec<(String, u32)>>,
    cancelled: Mutex<Vec<Option<CancelReason>>>,
}

impl Probe {
    fn begin<P>(&self, job: &Job<P>) {
        let s = &self.0;
        s.calls
            .lock()
            .unwrap()
            .push((job.id().to_string(), job.attempt()));
        let now = s.running.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_running.fetch_max(now, Ordering::SeqCst);
    }

    fn end(&self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn cancelled<P>(&self, job: &Job<P>) {
        self.0.cancelled.lock().unwrap().push(job.cancel_reason());
    }

    fn calls(&self) -> Vec<(String, u32)> {
        self.0.calls.lock().unwrap().clone()
    }

    fn attempts(&self, id: &str) -> Vec<u32> {
        let calls = self.calls();
        calls
            .iter()
            .filter(|(i, _)| i == id)
            .map(|&(_, a)| a)
            .collect()
    }

    fn max_running(&self) -> usize {
        self.0.max_running.load(Ordering::SeqCst)
    }

    fn finished(&self) -> usize {
        self.0.finished.load(Ordering::SeqCst)
    }
}

fn config(concurrency: usize) -> WorkerConfig {
    WorkerConfig::default().with_concurrency(concurrency)
}

async fn push_ids<E: Engine>(e: &E, t: &Topic, ids: impl IntoIterator<Item = String>) {
    for name in ids {
        let job = NewJob::new(t.clone(), format!("body of {name}")).with_id(id(&name));
        e.push(job).await.unwrap();
    }
}

/// Jobs of `t` in any state.
async fn remaining<E: Engine>(e: &E, t: &Topic) -> u64 {
    let s = e.stats(t).await.unwrap();
    s.delayed + s.ready + s.reserved + s.dead
}

/// Waits until every job of `t` is gone (acked).
async fn all_acked<E: Engine>(e: &E, t: &Topic) {
    eventually(LONG, "every job to be acked", || async {
        remaining(e, t).await == 0
    })
    .await;
}

async fn state<E: Engine>(e: &E, t: &Topic, name: &str) -> Option<JobState> {
    e.get(t, &id(name)).await.unwrap().map(|j| j.state)
}

/// Never more handlers run at once than the concurrency (counted inside the handlers),
/// and the limit is reached when enough jobs are ready.
pub async fn concurrency_limit_is_never_exceeded<B: Backend>(name: &str) {
    const JOBS: usize = 24;
    const LIMIT: usize = 4;
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("concurrency").await;
    push_ids(&e, &t, (0..JOBS).map(|i| format!("j{i}"))).await;

    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            tokio::time::sleep(Duration::from_millis(100)).await;
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let worker = Running::start(
        Worker::with_config(e.clone(), [t.clone()], config(LIMIT), handler).unwrap(),
    );
    all_acked(&e, &t).await;
    let report = worker.stop().await;

    assert_eq!(probe.max_running(), LIMIT, "handlers running at once");
    assert_eq!(probe.finished(), JOBS);
    assert_eq!(report.acked, JOBS as u64, "{report:?}");
    assert_eq!(
        report.failed + report.retried + report.buried,
        0,
        "{report:?}"
    );
}

/// The worker holds no more leases (buffered or running, not yet settled) than its
/// prefetch and asks no reserve for more, while no more handlers run than its concurrency;
/// it does hold more than the concurrency (it fetches ahead), including while some jobs
/// fail and are nacked, and holds none after shutdown.
pub async fn leases_held_never_exceed_prefetch<B: Backend>(name: &str) {
    const JOBS: usize = 60;
    const LIMIT: usize = 3;
    const PREFETCH: usize = 8;
    let b = B::start(name).await;
    let e = Counting::new(b.open().await);
    let counts = e.counts();
    let t = b.topic("prefetch").await;
    push_ids(&e, &t, (0..JOBS).map(|i| format!("j{i}"))).await;

    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            tokio::time::sleep(Duration::from_millis(20)).await;
            p.end();
            let every_fifth = job
                .id()
                .as_str()
                .trim_start_matches('j')
                .parse::<usize>()
                .unwrap()
                % 5
                == 0;
            if every_fifth && job.attempt() == 1 {
                return Err(JobError::retry_after(Duration::ZERO, "fails once"));
            }
            Ok(())
        }
    };
    let cfg = config(LIMIT).with_prefetch(PREFETCH);
    let worker = Running::start(Worker::with_config(e.clone(), [t.clone()], cfg, handler).unwrap());
    all_acked(&e, &t).await;
    let report = worker.stop().await;

    assert!(
        probe.max_running() <= LIMIT,
        "{} handlers at once",
        probe.max_running()
    );
    assert!(
        counts.max_held() <= PREFETCH as i64,
        "{} leases held at once",
        counts.max_held()
    );
    assert!(
        counts.max_held() > LIMIT as i64,
        "never fetched ahead of the handlers: {} held at most",
        counts.max_held()
    );
    assert!(
        counts.max_asked() <= PREFETCH,
        "a reserve asked for {}",
        counts.max_asked()
    );
    assert_eq!(counts.held(), 0, "deliveries still held after shutdown");
    assert_eq!(report.acked, JOBS as u64, "{report:?}");
    assert_eq!(report.retried, (JOBS / 5) as u64, "{report:?}");
}

/// Pushes `n` jobs named `<prefix><i>` with this ttr, in one batch (push order kept).
async fn push_named<E: Engine>(e: &E, t: &Topic, prefix: &str, n: usize, ttr: Duration) {
    let jobs = (0..n)
        .map(|i| {
            NewJob::new(t.clone(), "x")
                .with_id(id(&format!("{prefix}{i}")))
                .with_ttr(ttr)
        })
        .collect();
    e.push_batch(jobs).await.unwrap();
}

/// A gate a test opens to let a handler finish.
#[derive(Clone, Default)]
struct Gate(Arc<tokio::sync::Notify>, Arc<std::sync::atomic::AtomicBool>);

impl Gate {
    async fn wait(&self) {
        while !self.1.load(Ordering::SeqCst) {
            let notified = self.0.notified();
            if self.1.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    fn open(&self) {
        self.1.store(true, Ordering::SeqCst);
        self.0.notify_waiters();
    }
}

/// Prefetch rule (a): a buffered job is never handed to a handler with less than
/// `min_lease_left` of its lease left. Fast jobs grow the window, then one slow job holds
/// the only handler for 60 % of the 2 s ttr while the jobs behind it wait in the buffer:
/// each of them must start with at least half of its lease left in the engine (renewed, or
/// given back and reserved again), once, on its first attempt. Renewal while a handler
/// runs is set late (at 75 % of the ttr), so that it cannot be what renewed them.
pub async fn a_buffered_job_starts_with_enough_lease_left<B: Backend>(name: &str) {
    const TTR: Duration = Duration::from_secs(2);
    const AFTER: usize = 30;
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("lease-left").await;
    push_named(&e, &t, "fast", 200, TTR).await;
    push_named(&e, &t, "slow", 1, TTR).await;
    push_named(&e, &t, "after", AFTER, TTR).await;

    let probe = Probe::default();
    // The lease left in the engine when each "after" handler started, and what the engine
    // held while the slow one ran.
    let left: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let held_meanwhile = Arc::new(AtomicUsize::new(0));
    let (p, l, h, engine, tp) = (
        probe.clone(),
        left.clone(),
        held_meanwhile.clone(),
        e.clone(),
        t.clone(),
    );
    let handler = move |job: Job<Bytes>| {
        let (p, l, h, engine, tp) = (p.clone(), l.clone(), h.clone(), engine.clone(), tp.clone());
        async move {
            p.begin(&job);
            let name = job.id().to_string();
            if name.starts_with("after") {
                let now = engine.now().await.unwrap().as_millis();
                let deadline = engine.get(&tp, job.id()).await.unwrap().unwrap().deadline;
                let deadline = deadline.expect("a reserved job has a deadline").as_millis();
                l.lock().unwrap().push((name, deadline.saturating_sub(now)));
            } else if name.starts_with("slow") {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let reserved = engine.stats(&tp).await.unwrap().reserved;
                h.store(usize::try_from(reserved).unwrap(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(900)).await;
            }
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let cfg = config(1)
        .with_prefetch(64)
        .with_min_lease_left(0.5)
        .with_renew_fraction(0.75);
    let worker = Running::start(Worker::with_config(e.clone(), [t.clone()], cfg, handler).unwrap());
    all_acked(&e, &t).await;
    let report = worker.stop().await;

    assert!(
        held_meanwhile.load(Ordering::SeqCst) > 1,
        "no job waited in the buffer behind the slow one"
    );
    let left = left.lock().unwrap().clone();
    assert_eq!(left.len(), AFTER, "{left:?}");
    // At least half of the 2 s lease at hand-over; the handler reads it a moment later.
    for (name, ms) in &left {
        assert!(*ms >= 900, "{name} started with {ms} ms of its lease left");
    }
    for i in 0..AFTER {
        assert_eq!(probe.attempts(&format!("after{i}")), vec![1], "after{i}");
    }
    assert_eq!(report.acked, 201 + AFTER as u64, "{report:?}");
}

/// Prefetch rule (b): shutdown gives the buffered jobs back at once, before it waits for
/// the running handlers: while the one handler still runs (held by the test, well inside
/// the grace period), only its job stays reserved; the others are ready again on their
/// first attempt, reported as released, and another worker takes them. Half of them are
/// pushed only once the worker holds everything else, just before the stop: they wake its
/// open long-poll, whose jobs must come back too (a dropped reserve gives back what it
/// leased), and none of them runs, since the buffer keeps the engine's order.
pub async fn shutdown_releases_the_buffer_at_once<B: Backend>(name: &str) {
    const AFTER: usize = 40;
    const EARLY: usize = AFTER / 2;
    let b = B::start(name).await;
    let e = b.open().await;
    // What runs and what is buffered follows the engine's order across all the case's
    // jobs, which holds within one partition only: the topic keeps one on every backend.
    let t = topic("buffer-release");
    push_named(&e, &t, "fast", 200, LONG).await;
    push_named(&e, &t, "slow", 1, LONG).await;
    push_named(&e, &t, "after", EARLY, LONG).await;

    let probe = Probe::default();
    let gate = Gate::default();
    let (p, g) = (probe.clone(), gate.clone());
    let handler = move |job: Job<Bytes>| {
        let (p, g) = (p.clone(), g.clone());
        async move {
            p.begin(&job);
            if job.id().as_str() == "slow0" {
                g.wait().await;
            }
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let cfg = config(1).with_prefetch(64).with_grace(LONG);
    let worker = Running::start(Worker::with_config(e.clone(), [t.clone()], cfg, handler).unwrap());
    // The slow job runs with the early "after" jobs buffered behind it (the prefetch holds
    // them all), and the worker waits for more.
    eventually(
        LONG,
        "the slow job to start with every other job buffered behind it",
        || async { probe.attempts("slow0") == vec![1] && e.stats(&t).await.unwrap().ready == 0 },
    )
    .await;
    push_named(&e, &t, "late", AFTER - EARLY, LONG).await;
    assert!(worker.stop.send(()).is_ok());
    eventually(
        Duration::from_secs(10),
        "the buffered jobs, and those of the open long-poll, to be ready again",
        || async { e.stats(&t).await.unwrap().ready == AFTER as u64 },
    )
    .await;
    assert_eq!(probe.finished(), 200, "the slow handler is still running");
    assert_eq!(probe.calls().len(), 201, "a buffered job was started");
    gate.open();
    let report = within(LONG, "the worker to stop", worker.report)
        .await
        .unwrap();
    assert_eq!(report.acked, 201, "{report:?}");
    let released: BTreeSet<String> = report.released.iter().map(|(_, i)| i.to_string()).collect();
    // The early ones were buffered; the late ones were buffered, or given back by the
    // engine when the stop dropped the long-poll that took them.
    let n = released.len();
    assert!((EARLY..=AFTER).contains(&n), "{n} released: {released:?}");
    assert!(
        (0..EARLY).all(|i| released.contains(&format!("after{i}"))),
        "{released:?}"
    );
    assert!(
        released
            .iter()
            .all(|i| i.starts_with("after") || i.starts_with("late")),
        "{released:?}"
    );

    let second = Probe::default();
    let p = second.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let other = Running::start(
        Worker::with_config(b.open().await, [t.clone()], config(4), handler).unwrap(),
    );
    all_acked(&e, &t).await;
    other.stop().await;
    let attempts: BTreeSet<u32> = second.calls().iter().map(|&(_, a)| a).collect();
    assert_eq!(second.calls().len(), AFTER);
    assert_eq!(
        attempts,
        BTreeSet::from([1]),
        "a release does not count an attempt"
    );
}

/// One handler at a time runs the jobs in the engine's order (push order here), although
/// the worker keeps two reserves on their way at once and their answers may cross.
pub async fn one_handler_runs_jobs_in_the_engines_order<B: Backend>(name: &str) {
    const N: usize = 600;
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("engine-order").await;
    push_named(&e, &t, "j", N, LONG).await;
    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let cfg = config(1).with_prefetch(64);
    let worker = Running::start(Worker::with_config(e.clone(), [t.clone()], cfg, handler).unwrap());
    all_acked(&e, &t).await;
    worker.stop().await;
    let ran: Vec<String> = probe.calls().into_iter().map(|(i, _)| i).collect();
    let pushed: Vec<String> = (0..N).map(|i| format!("j{i}")).collect();
    // On a topic of several partitions, the order holds within each.
    let n = B::partitions().unwrap_or(1);
    for p in 0..n {
        let of = |ids: &[String]| -> Vec<String> {
            ids.iter()
                .filter(|i| delayq_core::partition_of(&id(i), n) == p)
                .cloned()
                .collect()
        };
        assert_eq!(of(&ran), of(&pushed), "partition {p} of {n}");
    }
    assert_eq!(ran.len(), pushed.len());
}

/// Prefetch rule (c): no hoarding. Two workers whose windows grew on a deep queue then see
/// a short one (40 jobs of 20 ms, pushed at once): the windows fell back when their
/// reserves came back short, so both get work instead of the first to wake taking all.
pub async fn two_workers_share_a_short_queue<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("no-hoarding").await;
    push_named(&e, &t, "warm", 600, LONG).await;

    let seen: [Arc<Mutex<Vec<String>>>; 2] = Default::default();
    let mut workers = Vec::new();
    for s in &seen {
        let s = s.clone();
        let handler = move |job: Job<Bytes>| {
            let s = s.clone();
            async move {
                if job.id().as_str().starts_with("work") {
                    s.lock().unwrap().push(job.id().to_string());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok::<(), JobError>(())
            }
        };
        let cfg = config(2).with_prefetch(200);
        workers.push(Running::start(
            Worker::with_config(b.open().await, [t.clone()], cfg, handler).unwrap(),
        ));
    }
    all_acked(&e, &t).await;
    // Both are now waiting on an empty queue.
    tokio::time::sleep(Duration::from_millis(200)).await;
    push_named(&e, &t, "work", 40, LONG).await;
    all_acked(&e, &t).await;
    for w in workers {
        w.stop().await;
    }

    let counts: Vec<usize> = seen.iter().map(|s| s.lock().unwrap().len()).collect();
    assert_eq!(counts.iter().sum::<usize>(), 40, "{counts:?}");
    assert!(
        counts.iter().all(|&n| n > 0),
        "one worker took the whole short queue: {counts:?}"
    );
}

/// A panicking handler is a failed attempt: nacked with "handler panicked: ...", retried
/// with the back-off, dead after max attempts; the worker keeps taking jobs. The same for a
/// panic in the first poll (run in place) and after it (in the handler's own task).
pub async fn panic_retries_then_dead_and_the_worker_carries_on<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("panics").await;
    let bad = NewJob::new(t.clone(), "x")
        .with_id(id("bad"))
        .with_max_attempts(3)
        .with_backoff(Backoff::fixed(Duration::from_millis(10)));
    e.push(bad).await.unwrap();
    // This one panics after its first poll, so in its own task rather than in place.
    let late = NewJob::new(t.clone(), "x")
        .with_id(id("late"))
        .with_max_attempts(1);
    e.push(late).await.unwrap();

    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            p.end();
            if job.id().as_str() == "bad" {
                panic!("boom");
            }
            if job.id().as_str() == "late" {
                tokio::task::yield_now().await;
                panic!("after a yield");
            }
            Ok::<(), JobError>(())
        }
    };
    let worker =
        Running::start(Worker::with_config(e.clone(), [t.clone()], config(2), handler).unwrap());
    eventually(LONG, "the panicking jobs to go dead", || async {
        state(&e, &t, "bad").await == Some(JobState::Dead)
            && state(&e, &t, "late").await == Some(JobState::Dead)
    })
    .await;
    push_ids(&e, &t, ["after".to_string()]).await;
    eventually(LONG, "the next job to be acked", || async {
        state(&e, &t, "after").await.is_none()
    })
    .await;
    let report = worker.stop().await;

    assert_eq!(probe.attempts("bad"), vec![1, 2, 3]);
    assert_eq!(probe.attempts("after"), vec![1]);
    let dead = e.get(&t, &id("bad")).await.unwrap().unwrap();
    assert_eq!(dead.attempts, 3);
    let reason = dead.last_error.unwrap_or_default();
    assert!(reason.contains("handler panicked: boom"), "{reason}");
    let late = e.get(&t, &id("late")).await.unwrap().unwrap();
    let reason = late.last_error.unwrap_or_default();
    assert!(
        reason.contains("handler panicked: after a yield"),
        "{reason}"
    );
    assert_eq!(
        (report.retried, report.buried, report.acked),
        (2, 2, 1),
        "{report:?}"
    );
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Charge {
    cents: u64,
}

/// A permanent error buries the job at its first failure, whatever attempts are left; so
/// does a body that does not decode (without calling the handler).
pub async fn permanent_error_is_dead_at_the_first_failure<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("permanent").await;
    let body = Json(Charge { cents: 500 }).encode().unwrap();
    for (name, body) in [
        ("declined", body),
        ("garbled", Bytes::from_static(b"not json")),
    ] {
        let job = NewJob::new(t.clone(), body)
            .with_id(id(name))
            .with_max_attempts(5);
        e.push(job).await.unwrap();
    }

    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Json<Charge>>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            p.end();
            Err::<(), _>(JobError::permanent(format!(
                "card declined for {} cents",
                job.payload().cents
            )))
        }
    };
    let worker =
        Running::start(Worker::with_config(e.clone(), [t.clone()], config(2), handler).unwrap());
    for name in ["declined", "garbled"] {
        eventually(LONG, "the job to go dead", || async {
            state(&e, &t, name).await == Some(JobState::Dead)
        })
        .await;
    }
    let report = worker.stop().await;

    assert_eq!(probe.calls(), vec![("declined".to_string(), 1)]);
    let declined = e.get(&t, &id("declined")).await.unwrap().unwrap();
    assert_eq!(declined.attempts, 1);
    assert_eq!(
        declined.last_error.as_deref(),
        Some("card declined for 500 cents")
    );
    let garbled = e.get(&t, &id("garbled")).await.unwrap().unwrap();
    assert_eq!(garbled.attempts, 1);
    let reason = garbled.last_error.unwrap_or_default();
    assert!(reason.starts_with("payload did not decode"), "{reason}");
    assert!(
        reason.contains("as JSON into") && reason.contains("Charge"),
        "{reason}"
    );
    assert_eq!(
        (report.buried, report.retried, report.acked),
        (2, 0, 0),
        "{report:?}"
    );
}

/// Renewal keeps the lease of a handler that runs 3.5 times its ttr (1 s): the job stays
/// reserved on its first attempt the whole time, is never redelivered, and is acked.
pub async fn renewal_keeps_a_long_handler_alive<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("renewal").await;
    let job = NewJob::new(t.clone(), "x")
        .with_id(id("long"))
        .with_ttr(Duration::from_secs(1))
        .with_backoff(Backoff::fixed(Duration::ZERO));
    e.push(job).await.unwrap();

    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(3500)) => {}
                () = job.cancelled() => p.cancelled(&job),
            }
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let worker =
        Running::start(Worker::with_config(e.clone(), [t.clone()], config(2), handler).unwrap());
    eventually(LONG, "the handler to start", || async {
        !probe.calls().is_empty()
    })
    .await;
    // While it runs, the job stays leased on its first attempt: an expired lease would
    // show as a delayed or ready job, or a higher attempt count.
    let mut looks = 0;
    while probe.finished() == 0 {
        let seen = e
            .get(&t, &id("long"))
            .await
            .unwrap()
            .map(|j| (j.state, j.attempts));
        if probe.finished() == 0 {
            assert_eq!(seen, Some((JobState::Reserved, 1)), "the lease lapsed");
            looks += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        looks > 0,
        "the handler finished before the job was looked at"
    );
    all_acked(&e, &t).await;
    let report = worker.stop().await;

    assert_eq!(probe.calls(), vec![("long".to_string(), 1)], "redelivered");
    assert!(
        probe.0.cancelled.lock().unwrap().is_empty(),
        "the token fired"
    );
    assert_eq!((report.acked, report.failed), (1, 0), "{report:?}");
}

/// Deleting a job while its handler runs cancels the handler (issue 14, item 5): the delete
/// ends the lease, so the worker's next renewal (every third of the 3 s ttr) is answered
/// "lease lost" and fires the job's token with [`CancelReason::LeaseLost`]; the job is
/// neither acked nor nacked (it is gone), never delivered again, and the worker carries on
/// with the next job.
// See: issue 14
pub async fn deleting_a_running_job_cancels_its_handler_issue_14<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("cancel").await;
    let ttr = Duration::from_secs(3);
    e.push(
        NewJob::new(t.clone(), "x")
            .with_id(id("doomed"))
            .with_ttr(ttr),
    )
    .await
    .unwrap();

    let probe = Probe::default();
    let cancelled_at: Arc<Mutex<Option<std::time::Instant>>> = Arc::default();
    let (p, at) = (probe.clone(), cancelled_at.clone());
    let handler = move |job: Job<Bytes>| {
        let (p, at) = (p.clone(), at.clone());
        async move {
            p.begin(&job);
            if job.id().as_str() == "doomed" {
                tokio::select! {
                    () = tokio::time::sleep(LONG) => {}
                    () = job.cancelled() => {
                        *at.lock().unwrap() = Some(std::time::Instant::now());
                        p.cancelled(&job);
                    }
                }
            }
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let worker =
        Running::start(Worker::with_config(e.clone(), [t.clone()], config(2), handler).unwrap());
    eventually(LONG, "the handler to start", || async {
        !probe.calls().is_empty()
    })
    .await;
    let deleted = std::time::Instant::now();
    assert!(
        e.delete(&t, &id("doomed")).await.unwrap(),
        "the job was there"
    );
    eventually(LONG, "the handler to see its cancellation", || async {
        probe.finished() == 1
    })
    .await;
    let noticed = cancelled_at.lock().unwrap().expect("cancelled") - deleted;
    assert_eq!(
        probe.0.cancelled.lock().unwrap().clone(),
        vec![Some(CancelReason::LeaseLost)]
    );
    // Renewals come every ttr / 3 = 1 s: the delete is noticed at the next one, long before
    // the lease the worker last renewed would have run out (up to 3 s after a renewal).
    assert!(
        noticed < ttr * 2 / 3 + Duration::from_millis(500),
        "the cancellation came {noticed:?} after the delete"
    );

    // The worker carries on: the next job is handled and acked.
    push_ids(&e, &t, ["after".to_string()]).await;
    eventually(LONG, "the next job to be handled", || async {
        probe.finished() == 2
    })
    .await;
    all_acked(&e, &t).await;
    let report = worker.stop().await;
    assert_eq!(
        probe.calls(),
        vec![("doomed".to_string(), 1), ("after".to_string(), 1)],
        "the deleted job was delivered again"
    );
    assert_eq!(e.get(&t, &id("doomed")).await.unwrap(), None);
    assert_eq!((report.acked, report.failed), (1, 1), "{report:?}");
}

fn every_second(name: &str, t: &Topic) -> JobSchedule {
    JobSchedule::new(
        ScheduleName::new(name).unwrap(),
        "* * * * * *",
        "UTC",
        t.clone(),
        JobTemplate {
            body: Bytes::from_static(b"tick"),
            ..JobTemplate::default()
        },
    )
    .unwrap()
}

/// The fire time (ms) in a scheduled job's id, `schedule:<name>:<ms>`.
fn fire_of(id: &str) -> u64 {
    id.rsplit(':').next().unwrap().parse().unwrap()
}

/// Every job of `t` now, by id, reserving (and acking) what is ready.
async fn drain_ids<E: Engine>(e: &E, t: &Topic) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    loop {
        let got = e.reserve(&Reserve::new(t.clone()).max(100)).await.unwrap();
        if got.is_empty() {
            return out;
        }
        for d in got {
            out.push((d.job.id.to_string(), d.job.ready_at.as_millis()));
            e.ack(d.lease.as_ref().unwrap()).await.unwrap();
        }
    }
}

/// Two schedulers (two engine handles, as two servers) run one every-second schedule for
/// about 3.5 s: every fire from the first to the last has exactly one job, due at its fire
/// time (issue 14: exactly one job per fire whatever the number of servers).
// See: issue 14
pub async fn two_schedulers_push_one_job_per_fire_issue_14<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let (e1, e2) = (b.open().await, b.open().await);
    let t = b.topic("cron").await;
    let s = every_second("every-second", &t);
    put_schedule(&e1, &s).await.unwrap();
    let config = SchedulerConfig {
        reload: Duration::from_millis(300),
        ..SchedulerConfig::default()
    };
    let (stop1, stop2) = (oneshot::channel::<()>(), oneshot::channel::<()>());
    let r1 = tokio::spawn(
        Scheduler::new(Arc::new(e1.clone()), config.clone()).run(async {
            let _ = stop1.1.await;
        }),
    );
    let r2 = tokio::spawn(Scheduler::new(Arc::new(e2.clone()), config).run(async {
        let _ = stop2.1.await;
    }));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let _ = (stop1.0.send(()), stop2.0.send(()));
    r1.await.unwrap();
    r2.await.unwrap();
    // The last fire pushed ahead falls due within a second.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut jobs = drain_ids(&e1, &t).await;
    jobs.sort();
    let fires: Vec<u64> = jobs.iter().map(|(id, _)| fire_of(id)).collect();
    assert!(fires.len() >= 3, "too few fires: {jobs:?}");
    for w in fires.windows(2) {
        assert_eq!(w[1] - w[0], 1000, "a fire is missing or doubled: {fires:?}");
    }
    for (id, due) in &jobs {
        assert_eq!(fire_of(id), *due, "job {id} is not due at its fire time");
    }
    let stored = e2.schedule(s.name()).await.unwrap().unwrap();
    assert!(
        stored.through.map(|t| t.as_millis()) >= fires.last().copied(),
        "{stored:?}"
    );
}

/// A scheduler that was away for a little over one interval pushes the fire it found late
/// (within its grace, 1 s for an every-second schedule: due now, whatever the policy), then
/// the next one ahead; after an outage of several intervals it pushes none of the fires it
/// missed (misfire skip): only the fire pushed ahead before the outage comes, never a burst
/// (issue 36). Replacing the schedule deletes the fire its old definition pushed ahead,
/// and deleting it deletes the one the new definition pushed.
// See: issue 14, issue 36
pub async fn late_fires_are_pushed_and_a_replaced_schedule_forgets_its_old_fire_issue_14<
    B: Backend,
>(
    name: &str,
) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("cron-late").await;
    let s = every_second("late", &t);
    let first = put_schedule(&e, &s).await.unwrap();
    let ahead = first.through.expect("the first fire is pushed at once");
    // Sleeps until `ms` after the fire pushed ahead, on the engine's clock.
    let until = |ms: u64| {
        let e = e.clone();
        async move {
            let now = e.now().await.unwrap();
            tokio::time::sleep(ahead.plus(Duration::from_millis(ms)).since(now)).await;
        }
    };
    // Nobody ticks until 0.3 s after the fire after the one pushed ahead: that one is
    // late, not missed; the tick pushes it (due now) and the next one ahead.
    until(1300).await;
    let sched = Scheduler::new(Arc::new(e.clone()), SchedulerConfig::default());
    let tick = sched.tick().await.unwrap();
    assert_eq!(
        (tick.pushed, tick.skipped),
        (2, 0),
        "a fire within its grace is late, not missed"
    );
    let jobs = drain_ids(&e, &t).await;
    let fires: BTreeSet<u64> = jobs.iter().map(|(id, _)| fire_of(id)).collect();
    assert_eq!(
        fires.into_iter().collect::<Vec<_>>(),
        vec![ahead.as_millis(), ahead.as_millis() + 1000],
        "one job per fire, none missing"
    );

    // An outage: nobody ticks through the next three fires after the one pushed ahead
    // (ahead + 2 s). The tick pushes none of them, only the next one ahead; the fire pushed
    // before the outage is the only one due.
    until(5300).await;
    let tick = sched.tick().await.unwrap();
    assert_eq!(tick.pushed, 1, "{tick:?}");
    assert!(tick.skipped >= 3, "{tick:?}");
    let jobs = drain_ids(&e, &t).await;
    let fires: Vec<u64> = jobs.iter().map(|(id, _)| fire_of(id)).collect();
    assert_eq!(
        fires,
        vec![ahead.as_millis() + 2000],
        "after an outage, skip delivers only the fire pushed ahead before it"
    );

    // Replace with an hourly schedule: the every-second fire pushed ahead is deleted.
    let pending = e
        .schedule(s.name())
        .await
        .unwrap()
        .unwrap()
        .through
        .unwrap();
    let hourly = JobSchedule::new(
        s.name().clone(),
        "0 * * * *",
        "UTC",
        t.clone(),
        JobTemplate::default(),
    )
    .unwrap();
    let stored = put_schedule(&e, &hourly).await.unwrap();
    assert_eq!(e.get(&t, &s.job_id(pending)).await.unwrap(), None);
    let next = stored.through.expect("the hourly fire is pushed ahead");
    assert_eq!(next.as_millis() % 3_600_000, 0);
    let job = e.get(&t, &hourly.job_id(next)).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Delayed);
    // Deleting the schedule deletes that pending fire too.
    assert!(delete_schedule(&e, s.name()).await.unwrap().is_some());
    assert_eq!(e.get(&t, &hourly.job_id(next)).await.unwrap(), None);
    assert_eq!(e.schedules().await.unwrap(), vec![]);
}

/// A schedule whose job the engine refuses (its body over the topic's limit) is refused
/// at its put and changes nothing (the definition it replaced stays); one that became
/// refused later (stored past the check) is skipped by a tick without stopping the others.
// See: issue 14
pub async fn a_refused_schedule_changes_nothing_and_stops_no_other_issue_14<B: Backend>(
    name: &str,
) {
    let b = B::start(name).await;
    let e = b.open().await;
    let small = b.topic("cron-small").await;
    e.set_topic_config(
        &small,
        &TopicConfig {
            max_body: Some(4),
            ..TopicConfig::default()
        },
    )
    .await
    .unwrap();
    let sched = |body: &'static str| {
        JobSchedule::new(
            ScheduleName::new("small").unwrap(),
            "0 * * * *",
            "UTC",
            small.clone(),
            JobTemplate {
                body: Bytes::from_static(body.as_bytes()),
                ..JobTemplate::default()
            },
        )
        .unwrap()
    };
    let kept = put_schedule(&e, &sched("ok")).await.unwrap();
    let refused = put_schedule(&e, &sched("far too long")).await;
    assert!(
        matches!(refused, Err(delayq_core::Error::BodyTooLarge { .. })),
        "{refused:?}"
    );
    let now = e.schedule(kept.schedule.name()).await.unwrap().unwrap();
    assert_eq!(now.schedule, kept.schedule, "the old definition is back");
    let pending = now.through.expect("its next fire is pushed again");
    let job = e
        .get(&small, &kept.schedule.job_id(pending))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&job.body[..], b"ok");

    // Stored past the check: ticks skip it and run the other schedules.
    e.put_schedule(&sched("far too long")).await.unwrap();
    let good_topic = b.topic("cron-good").await;
    put_schedule(&e, &every_second("good", &good_topic))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let tick = Scheduler::new(Arc::new(e.clone()), SchedulerConfig::default())
        .tick()
        .await
        .unwrap();
    assert_eq!(tick.failed, 1, "{tick:?}");
    assert!(tick.pushed >= 1, "the good schedule went on: {tick:?}");
}

/// Shutdown waits the grace period, fires the tokens of the handlers still running and
/// releases their jobs; another worker gets them at once, on attempt 1 (a lease that ran
/// out would count an attempt, and would take the 30 s ttr).
pub async fn shutdown_releases_jobs_to_another_worker_at_once<B: Backend>(name: &str) {
    let b = B::start(name).await;
    let e = b.open().await;
    let t = b.topic("shutdown").await;
    push_ids(&e, &t, ["s1".to_string(), "s2".to_string()]).await;

    let first = Probe::default();
    let p = first.clone();
    let stubborn = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            job.cancelled().await;
            p.cancelled(&job);
            // Keep running after the token: the worker must stop it before releasing.
            std::future::pending::<()>().await;
            Ok::<(), JobError>(())
        }
    };
    let cfg = config(2).with_grace(Duration::from_millis(300));
    let worker =
        Running::start(Worker::with_config(e.clone(), [t.clone()], cfg, stubborn).unwrap());
    eventually(LONG, "both handlers to start", || async {
        first.calls().len() == 2
    })
    .await;
    let report = worker.stop().await;

    let released: BTreeSet<String> = report.released.iter().map(|(_, i)| i.to_string()).collect();
    assert_eq!(
        released,
        BTreeSet::from(["s1".to_string(), "s2".to_string()]),
        "{report:?}"
    );
    assert!(report.released.iter().all(|(rt, _)| *rt == t));
    assert_eq!(
        (report.acked, report.failed, report.unfinished),
        (0, 0, 0),
        "{report:?}"
    );
    let reasons = first.0.cancelled.lock().unwrap().clone();
    assert_eq!(reasons, vec![Some(CancelReason::Shutdown); 2]);

    let second = Probe::default();
    let p = second.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let other = Running::start(
        Worker::with_config(b.open().await, [t.clone()], config(2), handler).unwrap(),
    );
    // Bounded well below the 30 s ttr: the jobs come at once, not when a lease runs out.
    eventually(
        Duration::from_secs(10),
        "the other worker to get both jobs",
        || async { second.finished() == 2 },
    )
    .await;
    all_acked(&e, &t).await;
    let report = other.stop().await;
    let mut calls = second.calls();
    calls.sort();
    assert_eq!(calls, vec![("s1".to_string(), 1), ("s2".to_string(), 1)]);
    assert_eq!(report.acked, 2, "{report:?}");
}

/// A worker in a child process, killed with SIGKILL while it holds leases: its jobs are
/// redelivered when their leases end (attempt 2), none is lost, and none it acked runs again.
pub async fn killed_worker_jobs_come_back_after_the_ttr<B: Backend>(name: &str) {
    if let Ok(address) = std::env::var(CHILD_ENV) {
        return child_worker::<B>(&address).await;
    }
    let slow: BTreeSet<String> = (0..3).map(|i| format!("slow-{i}")).collect();
    let quick: BTreeSet<String> = (0..5).map(|i| format!("quick-{i}")).collect();
    let b = B::start(name).await;
    let t = b.topic("killed").await;
    {
        let e = b.open().await;
        for name in slow.iter().chain(&quick) {
            let job = NewJob::new(t.clone(), "x")
                .with_id(id(name))
                .with_ttr(Duration::from_secs(2))
                .with_backoff(Backoff::fixed(Duration::ZERO));
            e.push(job).await.unwrap();
        }
    }
    b.close().await;

    // libtest names a test by its path without the crate name.
    let test = name.split_once("::").map_or(name, |(_, rest)| rest);
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, b.address())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut holding, mut acked) = (BTreeSet::new(), BTreeSet::new());
    within(
        LONG,
        "the child to ack the quick jobs and hold the slow ones",
        async {
            while holding != slow || acked != quick {
                let line = lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("the child exited early");
                // libtest's "test <name> ... " has no line end, so a marker may follow it.
                if let Some((_, i)) = line.split_once(HOLDING) {
                    holding.insert(i.to_string());
                } else if let Some((_, i)) = line.split_once(ACKED) {
                    acked.insert(i.to_string());
                }
            }
        },
    )
    .await;
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();

    let e = b.open().await;
    // The leases (renewed by the child until it died) are still running: nothing is
    // handed out at once.
    let early = e.reserve(&Reserve::new(t.clone())).await.unwrap();
    assert!(
        early.is_empty(),
        "redelivered before the lease ended: {early:?}"
    );
    assert_eq!(e.stats(&t).await.unwrap().reserved, slow.len() as u64);

    let probe = Probe::default();
    let p = probe.clone();
    let handler = move |job: Job<Bytes>| {
        let p = p.clone();
        async move {
            p.begin(&job);
            p.end();
            Ok::<(), JobError>(())
        }
    };
    let worker =
        Running::start(Worker::with_config(e.clone(), [t.clone()], config(8), handler).unwrap());
    all_acked(&e, &t).await;
    let report = worker.stop().await;

    let mut seen: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (i, attempt) in probe.calls() {
        seen.entry(i).or_default().push(attempt);
    }
    let expected: BTreeMap<String, Vec<u32>> = slow.iter().map(|i| (i.clone(), vec![2])).collect();
    assert_eq!(
        seen, expected,
        "each held job once more, on attempt 2; no acked job again"
    );
    assert_eq!(report.acked, slow.len() as u64, "{report:?}");
}

/// The child side of [`killed_worker_jobs_come_back_after_the_ttr`]: acks the quick jobs,
/// holds the slow ones (renewing their leases) until it is killed.
async fn child_worker<B: Backend>(address: &str) {
    let e = Counting::printing_acks(B::open_address(address).await);
    let handler = |job: Job<Bytes>| async move {
        if job.id().as_str().starts_with("slow") {
            println!("{HOLDING}{}", job.id());
            std::future::pending::<()>().await;
        }
        Ok::<(), JobError>(())
    };
    let worker = Worker::with_config(e, [topic("killed")], config(8), handler).unwrap();
    worker.run(std::future::pending()).await;
}
