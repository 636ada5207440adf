//! Workloads on any delayq engine, through the worker runtime a Rust service would use:
//! [`fill`] a topic, [`drain`] a backlog of ready jobs, deliver [`delayed`] jobs while they
//! are pushed; [`drain_topics`] and [`delayed_topics`] do the same over several topics (on a
//! Redis Cluster, topics of several primaries). The side-by-side suite and `delayq bench`
//! both run these.
//!
//! Each takes an [`indicatif::ProgressBar`] (pass [`ProgressBar::hidden`] for none).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use delayq::worker::DeliveryMode;
use delayq::{Engine, Job, JobError, NewJob, Store, Topic, Worker, WorkerConfig};
use indicatif::ProgressBar;
use rand::Rng;
use tokio::sync::Notify;

use crate::clock;
use crate::lateness::Lateness;

/// When the jobs of a [`fill`] are due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Delays {
    /// Due at once.
    Ready,
    /// All due after this delay.
    Fixed(Duration),
    /// Uniform in `[0, max]`, at millisecond resolution.
    Uniform(Duration),
}

impl Delays {
    /// One delay, drawn as the variant says.
    pub fn draw(&self, rng: &mut impl Rng) -> Duration {
        match *self {
            Delays::Ready => Duration::ZERO,
            Delays::Fixed(d) => d,
            Delays::Uniform(max) => {
                Duration::from_millis(rng.random_range(0..=max.as_millis() as u64))
            }
        }
    }
}

/// Jobs per push call of a fill.
const FILL_BATCH: usize = 1000;
/// Push calls in flight during a fill.
const FILL_TASKS: usize = 4;

/// Pushes `n` jobs of `body` bytes to `topic`, `FILL_BATCH` per call with four calls in
/// flight. Returns how long it took.
pub async fn fill(
    engine: &Arc<dyn Store>,
    topic: &Topic,
    n: usize,
    delays: Delays,
    body: usize,
    progress: &ProgressBar,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..FILL_TASKS {
        let (engine, topic, next, progress) = (
            engine.clone(),
            topic.clone(),
            next.clone(),
            progress.clone(),
        );
        tasks.spawn(async move {
            loop {
                let from = next.fetch_add(FILL_BATCH, Ordering::Relaxed);
                if from >= n {
                    return anyhow::Ok(());
                }
                let count = FILL_BATCH.min(n - from);
                let jobs = batch(&topic, count, delays, body, &mut rand::rng());
                engine.push_batch(jobs).await.context("pushing jobs")?;
                progress.inc(count as u64);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("a push task panicked")??;
    }
    Ok(start.elapsed())
}

/// `n` jobs for `topic`, each body stamped with its due time on the host clock.
pub fn batch(
    topic: &Topic,
    n: usize,
    delays: Delays,
    body: usize,
    rng: &mut impl Rng,
) -> Vec<NewJob> {
    batch_over(std::slice::from_ref(topic), n, delays, body, rng)
}

/// `n` jobs dealt over `topics` in turn, each body stamped with its due time on the host
/// clock.
pub fn batch_over(
    topics: &[Topic],
    n: usize,
    delays: Delays,
    body: usize,
    rng: &mut impl Rng,
) -> Vec<NewJob> {
    let now = clock::now_ms();
    (0..n)
        .map(|i| {
            let d = delays.draw(rng);
            let b = clock::body(now + d.as_millis() as u64, body);
            NewJob::new(topics[i % topics.len()].clone(), b).with_delay(d)
        })
        .collect()
}

/// What a [`drain`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DrainReport {
    /// Jobs handled and acknowledged.
    pub jobs: usize,
    /// From the worker's start to the last of them (or to the time cap).
    pub elapsed: Duration,
}

impl DrainReport {
    /// Jobs per second.
    pub fn rate(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A worker with `consumers` slots takes ready jobs from `topic` (no-op handler, acked at
/// once) until it handled `n` or `cap` passed; then it shuts down gracefully.
pub async fn drain(
    engine: &Arc<dyn Store>,
    topic: &Topic,
    n: usize,
    consumers: usize,
    cap: Duration,
    progress: &ProgressBar,
) -> anyhow::Result<DrainReport> {
    drain_topics(
        engine,
        std::slice::from_ref(topic),
        n,
        consumers,
        cap,
        progress,
    )
    .await
}

/// [`drain`] with one worker over every topic of `topics`.
pub async fn drain_topics(
    engine: &Arc<dyn Store>,
    topics: &[Topic],
    n: usize,
    consumers: usize,
    cap: Duration,
    progress: &ProgressBar,
) -> anyhow::Result<DrainReport> {
    let done = Arc::new(AtomicUsize::new(0));
    let reached = Arc::new(Notify::new());
    let handler = {
        let (done, reached, progress) = (done.clone(), reached.clone(), progress.clone());
        move |_job: Job<Bytes>| {
            if done.fetch_add(1, Ordering::Relaxed) + 1 == n {
                reached.notify_one();
            }
            progress.inc(1);
            async { Ok::<(), JobError>(()) }
        }
    };
    let worker = Worker::with_config(
        engine.clone(),
        topics.iter().cloned(),
        config(consumers),
        handler,
    )?;
    let start = Instant::now();
    let snapshot = Arc::new(OnceLock::new());
    let stop = {
        let (done, snapshot) = (done.clone(), snapshot.clone());
        async move {
            tokio::select! {
                _ = reached.notified() => {}
                _ = tokio::time::sleep(cap) => {}
            }
            let _ = snapshot.set(DrainReport {
                jobs: done.load(Ordering::Relaxed).min(n),
                elapsed: start.elapsed(),
            });
        }
    };
    let report = worker.run(stop).await;
    if report.failed > 0 || report.dropped > 0 {
        anyhow::bail!("the drain worker lost jobs: {report:?}");
    }
    snapshot
        .get()
        .copied()
        .context("the worker stopped before its shutdown signal")
}

/// A delayed-delivery workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayedSpec {
    /// Jobs to push.
    pub jobs: usize,
    /// Delays are uniform in `[0, spread]`.
    pub spread: Duration,
    /// Worker slots.
    pub consumers: usize,
    /// Jobs per push call (one producer, each call awaited before the next).
    pub batch: usize,
    /// Body size in bytes.
    pub body: usize,
    /// Give up this long after the first push.
    pub cap: Duration,
}

/// What [`delayed`] measured.
#[derive(Clone, Debug)]
pub struct DelayedReport {
    /// Jobs pushed.
    pub pushed: usize,
    /// Time spent pushing them.
    pub push_elapsed: Duration,
    /// Jobs delivered (handled and acked) before the cap.
    pub delivered: usize,
    /// From the first push to the last delivery.
    pub elapsed: Duration,
    /// Delivery minus due time on the host clock.
    pub host: Lateness,
    /// The engine's own measure: its clock at the reserve minus the due time.
    pub engine: Lateness,
}

/// A worker with `spec.consumers` slots runs while one producer pushes `spec.jobs` jobs with
/// delays spread over `spec.spread`; each delivery's lateness is recorded.
pub async fn delayed(
    engine: &Arc<dyn Store>,
    topic: &Topic,
    spec: DelayedSpec,
    progress: &ProgressBar,
) -> anyhow::Result<DelayedReport> {
    delayed_topics(engine, std::slice::from_ref(topic), spec, progress).await
}

/// [`delayed`] over every topic of `topics`: each push call deals its jobs over them in
/// turn, and one worker takes from all of them.
pub async fn delayed_topics(
    engine: &Arc<dyn Store>,
    topics: &[Topic],
    spec: DelayedSpec,
    progress: &ProgressBar,
) -> anyhow::Result<DelayedReport> {
    let host = Arc::new(Mutex::new(Lateness::new()));
    let eng = Arc::new(Mutex::new(Lateness::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(Instant::now()));
    let reached = Arc::new(Notify::new());
    let handler = {
        let (host, eng, done, last, reached, progress) = (
            host.clone(),
            eng.clone(),
            done.clone(),
            last.clone(),
            reached.clone(),
            progress.clone(),
        );
        let n = spec.jobs;
        move |job: Job<Bytes>| {
            let at = clock::now_us();
            if let Some(due) = clock::due_ms(job.body()) {
                lock(&host).record(due * 1000, at);
            }
            lock(&eng).record_late(job.lateness().as_micros() as u64);
            *lock(&last) = Instant::now();
            if done.fetch_add(1, Ordering::Relaxed) + 1 == n {
                reached.notify_one();
            }
            progress.inc(1);
            async { Ok::<(), JobError>(()) }
        }
    };
    let worker = Worker::with_config(
        engine.clone(),
        topics.iter().cloned(),
        config(spec.consumers),
        handler,
    )?;
    let stop = Arc::new(Notify::new());
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(async move { stop.notified().await }).await }
    });
    // Let the worker's first long-poll start before the first push.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let start = Instant::now();
    let mut pushed = 0;
    let delays = Delays::Uniform(spec.spread);
    let pushing = async {
        while pushed < spec.jobs {
            let n = spec.batch.min(spec.jobs - pushed);
            let jobs = batch_over(topics, n, delays, spec.body, &mut rand::rng());
            engine
                .push_batch(jobs)
                .await
                .context("pushing delayed jobs")?;
            pushed += n;
        }
        anyhow::Ok(())
    };
    let outcome = tokio::time::timeout(spec.cap, pushing).await;
    let push_elapsed = start.elapsed();
    if let Ok(r) = outcome {
        r?;
        let left = spec.cap.saturating_sub(start.elapsed());
        let _ = tokio::time::timeout(left, reached.notified()).await;
    }
    stop.notify_one();
    let report = running.await.context("the delayed worker panicked")?;
    if report.failed > 0 || report.dropped > 0 {
        anyhow::bail!("the delayed worker lost jobs: {report:?}");
    }
    let elapsed = lock(&last).saturating_duration_since(start);
    let host = lock(&host).clone();
    let engine = lock(&eng).clone();
    Ok(DelayedReport {
        pushed,
        push_elapsed,
        delivered: done.load(Ordering::Relaxed),
        elapsed,
        host,
        engine,
    })
}

/// The worker configuration of the workloads: `consumers` slots, at-least-once, a short
/// long-poll so that shutdown is prompt, and a short grace.
pub fn config(consumers: usize) -> WorkerConfig {
    WorkerConfig::default()
        .with_concurrency(consumers)
        .with_wait(Duration::from_secs(1))
        .with_mode(DeliveryMode::AtLeastOnce)
        .with_grace(Duration::from_secs(2))
}

/// Locks a mutex, recovering from poisoning (a handler that panicked cannot leave a
/// recorder half-written: every update is one call).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
