//! W10: push delivery to a webhook (issue 20) beside delayq's own pull path, on both engines.
//!
//! Each repetition starts `delayq serve` ([`DelayqServe`], the product's binary) on a fresh
//! redis-server or a fresh data directory, and this process runs a webhook receiver
//! ([`Receiver`]: plain HTTP/1.1 on a free loopback port, answering `204` at once and noting
//! when each request arrived, its `delayq-job-id`, `delayq-attempt` and `delayq-due-at`). On
//! that one server, for each path:
//!
//! - **W2's shape**: `w10_jobs` jobs due uniformly over `w2_spread`, pushed by one producer
//!   in batches of `w2_batch` (each awaited) while they are delivered; for push, to a topic
//!   whose destination is the receiver (`max_concurrency` = `w10_concurrency`, confirmed
//!   forwarding by a probe job before the run starts), for pull, to the batch consumers of
//!   W2's HTTP rows (`w10_concurrency` long-poll loops, 50 jobs per request, settling in the
//!   next). Lateness is receipt minus the due time the producer stamped in the body, on the
//!   host clock, as every W2 row; push's own figure is receipt minus `delayq-due-at` (the
//!   engine's due time), pull's is delayq's engine-clock figure.
//! - **drain**: a backlog of `w10_drain` ready jobs pushed first, then delivered: for push,
//!   the destination is put once the backlog is in (the rate counts from the first delivery
//!   to the last, so the forwarder's one-second pick-up is apart: "pick-up"); for pull, as a
//!   W1 drain (from the consumers' start).
//!
//! Every run is bounded in jobs and by `w10_cap` (push's drain by `w10_cap` plus the
//! pick-up). Push counts jobs received twice (by `delayq-job-id`), jobs never received
//! (against the ids the pushes answered) and requests that came after their run had ended.
//! The drain's CPU is measured for the server, its redis-server and this process, per job and
//! in % of a core, which says whether the receiver (or the pull consumers) could be what
//! bounds the rate. The repetitions alternate which path goes first.
//!
//! The file is long because W10 is one workload end to end: its receiver, the two paths'
//! drivers and their figures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use delayq_bench::clock;
use delayq_bench::driver::{DelayedSpec, Delays, lock};
use delayq_bench::lateness::{Lateness, LatenessSummary};
use delayq_bench::stats::Spread;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::plan::Plan;
use super::procs;
use super::redis_info::{self, CommandStats};
use super::say;
use super::systems::delayq_http::{self, Client, Loop};
use super::systems::serve::DelayqServe;
pub(crate) use super::systems::serve::Store;
use super::systems::{DelayedRun, Env, Kind, SpanCpu, SpanMeter};

/// The secret of every destination W10 puts (docs/push-delivery.md's example; the receiver does not check
/// signatures, the forwarder still makes them).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The topic the pull consumers reserve from ([`Client`]'s).
const PULL_TOPIC: &str = "bench";
/// How long the forwarder may take to pick a destination up (it reads them every second).
const PICKUP: Duration = Duration::from_secs(15);
/// How long a run waits, after removing its destination with jobs still missing, for the
/// forwarder to see it gone (it reads destinations every second).
const SETTLE: Duration = Duration::from_millis(1500);
/// The longest request head and body the receiver reads.
const MAX_HEAD: u64 = 64 * 1024;
const MAX_BODY: usize = 1024 * 1024;

/// The engines W10 runs among `kinds`: an engine's delayq server over HTTP (one-job or
/// batch consumer) among the systems brings it in.
pub(crate) fn stores(kinds: &[Kind]) -> Vec<Store> {
    let mut stores = Vec::new();
    if kinds
        .iter()
        .any(|k| matches!(k, Kind::HttpRedis | Kind::HttpRedisBatch))
    {
        stores.push(Store::Redis);
    }
    if kinds
        .iter()
        .any(|k| matches!(k, Kind::HttpEmbedded | Kind::HttpEmbeddedBatch))
    {
        stores.push(Store::Embedded);
    }
    stores
}

/// How the jobs reached the consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Path {
    /// The server POSTs each job to the webhook.
    Push,
    /// HTTP batch consumers reserve and settle.
    Pull,
}

impl Path {
    /// The name in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Path::Push => "push (webhook)",
            Path::Pull => "pull (HTTP, batch consumer)",
        }
    }
}

/// One W10 row: an engine and a path, over the repetitions.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct PushRow {
    pub store: Store,
    pub path: Path,
    /// W2's shape: delivered jobs/s, from the first push to the last delivery.
    pub deliver_rate: Spread,
    /// Lateness on the host clock (receipt minus the due time stamped in the body), ms.
    pub p50_ms: Spread,
    pub p90_ms: Spread,
    pub p99_ms: Spread,
    pub max_ms: Spread,
    /// Deliveries before their due time, summed over the repetitions.
    pub early: u64,
    /// Push: receipt minus `delayq-due-at`; pull: delayq's engine-clock figure. p99, ms.
    pub own_p99_ms: Spread,
    /// Distinct jobs delivered per repetition, and whether every repetition had them all.
    pub delivered: Spread,
    pub all_delivered: bool,
    /// Jobs received more than once (push: by job id), summed over the repetitions and
    /// over both runs (W2's shape and the drain); `None` where it is not counted (pull).
    pub duplicates: Option<u64>,
    /// Jobs pushed and never delivered within the cap, summed likewise.
    pub missing: u64,
    /// Push: requests that came after their run had ended (a job sent after the cap, or
    /// again after its run), summed likewise; counted in neither figure above.
    #[serde(default)]
    pub late_requests: u64,
    /// The drain of a backlog of ready jobs: jobs/s.
    pub drain_rate: Spread,
    /// Push: from putting the destination to the first delivery, s.
    pub pickup_s: Option<Spread>,
    /// CPU-s per 100,000 jobs of the drain: the delayq server, its redis-server, this
    /// process (the receiver, or the pull consumers).
    pub server_cpu_per_100k: Spread,
    pub store_cpu_per_100k: Option<Spread>,
    pub bench_cpu_per_100k: Spread,
    /// The same as % of one core over the drain (push: first to last delivery): near 100 %
    /// means that process is what bounds the rate.
    #[serde(default)]
    pub server_cpu_pct: Option<Spread>,
    #[serde(default)]
    pub bench_cpu_pct: Option<Spread>,
    /// On Redis, per job of the drain: the commands Redis counted (calls inside functions
    /// included) and the function calls (`FCALL`, one round trip each) among them.
    #[serde(default)]
    pub store_commands_per_job: Option<Spread>,
    #[serde(default)]
    pub store_fcalls_per_job: Option<Spread>,
}

/// What one repetition of one path measured.
#[derive(Clone, Debug)]
struct Rep {
    delayed: DelayedRun,
    /// Distinct jobs of W2's shape delivered.
    delivered: usize,
    duplicates: Option<u64>,
    missing: u64,
    drain: Drain,
}

/// The drain of one repetition: its rate, the push's pick-up, and its CPU.
#[derive(Clone, Debug)]
struct Drain {
    rate: f64,
    pickup_s: Option<f64>,
    /// Jobs delivered and the seconds they took (push: first to last delivery).
    jobs: usize,
    secs: f64,
    cpu: SpanCpu,
    /// What Redis counted over the drain (`None` on the embedded engine).
    commands: Option<CommandStats>,
}

impl Drain {
    /// CPU-s per 100,000 jobs of the drain.
    fn per_100k(&self, cpu_s: f64) -> f64 {
        if self.jobs == 0 {
            f64::NAN
        } else {
            cpu_s / self.jobs as f64 * 100_000.0
        }
    }

    /// Redis commands per job of the drain, of those `named` (`None`: all); NaN on the
    /// embedded engine.
    fn commands_per_job(&self, named: Option<&str>) -> f64 {
        match &self.commands {
            Some(c) if self.jobs > 0 => {
                let calls = match named {
                    Some(n) => c.0.get(n).map_or(0, |&(calls, _)| calls),
                    None => c.calls(),
                };
                calls as f64 / self.jobs as f64
            }
            _ => f64::NAN,
        }
    }

    /// The commands Redis spent most time in over the drain, per job: `fcall 0.52 calls,
    /// 10.1 µs; …`.
    fn top_commands(&self) -> String {
        let Some(c) = &self.commands else {
            return "—".into();
        };
        let per = self.jobs.max(1) as f64;
        c.by_time()
            .iter()
            .take(4)
            .map(|(name, calls, us)| {
                format!(
                    "{name} {:.2} calls, {:.1} µs",
                    *calls as f64 / per,
                    *us as f64 / per
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// % of one core over the drain.
    fn pct(&self, cpu_s: f64) -> f64 {
        if self.secs > 0.0 {
            cpu_s / self.secs * 100.0
        } else {
            f64::NAN
        }
    }
}

/// W10 on each engine of `stores`: `plan.reps` repetitions, each on a fresh server.
pub(crate) async fn w10(env: &Env, plan: &Plan, stores: &[Store]) -> anyhow::Result<Vec<PushRow>> {
    let mut rows = Vec::new();
    if stores.is_empty() {
        return Ok(rows);
    }
    let receiver = Receiver::start().await?;
    for &store in stores {
        let mut push = Vec::new();
        let mut pull = Vec::new();
        // Each server is stopped before the next starts: what it sent after a run ended came
        // in before the next store.
        let strays = receiver.strays.load(Ordering::Relaxed);
        for rep in 0..plan.reps {
            let mut serve = Serve::start(env, store).await?;
            let hook = format!("w10-hook-{rep}");
            let backlog = format!("w10-backlog-{rep}");
            // Alternate which path goes first, so neither always has the fresher engine.
            if rep % 2 == 0 {
                push.push(push_rep(&serve, &receiver, plan, &hook, &backlog).await?);
                pull.push(pull_rep(&serve, plan).await?);
            } else {
                pull.push(pull_rep(&serve, plan).await?);
                push.push(push_rep(&serve, &receiver, plan, &hook, &backlog).await?);
            }
            serve
                .running
                .server
                .check_alive()
                .with_context(|| format!("log: {}", serve.running.log.display()))?;
            for (path, r) in [(Path::Push, push.last()), (Path::Pull, pull.last())] {
                let Some(r) = r else { continue };
                let s = r.delayed.host.summary();
                say(&format!(
                    "W10 {} {} rep {}: W2 shape {} of {} delivered at {:.0}/s, p50 {:.2} ms p99 {:.2} ms max {:.1} ms, twice {}, missing {}; drain {:.0} jobs/s, CPU % of a core: server {:.0}, benchmark process {:.0}; Redis per job: {}",
                    store.name(),
                    path.name(),
                    rep + 1,
                    r.delivered,
                    r.delayed.pushed,
                    r.delivered as f64 / r.delayed.elapsed.as_secs_f64().max(1e-9),
                    s.p50_ms,
                    s.p99_ms,
                    s.max_ms,
                    r.duplicates.map_or("—".into(), |d| d.to_string()),
                    r.missing,
                    r.drain.rate,
                    r.drain.pct(r.drain.cpu.queue),
                    r.drain.pct(r.drain.cpu.client),
                    r.drain.top_commands(),
                ));
            }
        }
        let mut push_row = row(store, Path::Push, &push, plan);
        push_row.late_requests = receiver.strays.load(Ordering::Relaxed) - strays;
        if push_row.late_requests > 0 {
            say(&format!(
                "W10 {}: the receiver took {} requests after their run had ended",
                store.name(),
                push_row.late_requests
            ));
        }
        rows.push(push_row);
        rows.push(row(store, Path::Pull, &pull, plan));
    }
    Ok(rows)
}

/// The row of one engine and path.
fn row(store: Store, path: Path, reps: &[Rep], plan: &Plan) -> PushRow {
    let sums: Vec<LatenessSummary> = reps.iter().map(|r| r.delayed.host.summary()).collect();
    let own: Vec<LatenessSummary> = reps
        .iter()
        .filter_map(|r| r.delayed.own.as_ref().map(Lateness::summary))
        .collect();
    let col = |f: &dyn Fn(&LatenessSummary) -> f64| Spread::of(sums.iter().map(f));
    let of = |f: &dyn Fn(&Rep) -> f64| Spread::of(reps.iter().map(f));
    PushRow {
        store,
        path,
        deliver_rate: of(&|r| r.delivered as f64 / r.delayed.elapsed.as_secs_f64().max(1e-9)),
        p50_ms: col(&|s| s.p50_ms),
        p90_ms: col(&|s| s.p90_ms),
        p99_ms: col(&|s| s.p99_ms),
        max_ms: col(&|s| s.max_ms),
        early: sums.iter().map(|s| s.early).sum(),
        own_p99_ms: Spread::of(own.iter().map(|s| s.p99_ms)),
        delivered: of(&|r| r.delivered as f64),
        all_delivered: reps.iter().all(|r| r.delivered >= plan.w10_jobs),
        duplicates: reps
            .iter()
            .map(|r| r.duplicates)
            .try_fold(0, |a, d| d.map(|d| a + d)),
        missing: reps.iter().map(|r| r.missing).sum(),
        late_requests: 0,
        drain_rate: of(&|r| r.drain.rate),
        pickup_s: reps
            .iter()
            .all(|r| r.drain.pickup_s.is_some())
            .then(|| Spread::of(reps.iter().filter_map(|r| r.drain.pickup_s))),
        server_cpu_per_100k: of(&|r| r.drain.per_100k(r.drain.cpu.queue)),
        store_cpu_per_100k: (store == Store::Redis)
            .then(|| of(&|r| r.drain.per_100k(r.drain.cpu.store))),
        bench_cpu_per_100k: of(&|r| r.drain.per_100k(r.drain.cpu.client)),
        server_cpu_pct: Some(of(&|r| r.drain.pct(r.drain.cpu.queue))),
        bench_cpu_pct: Some(of(&|r| r.drain.pct(r.drain.cpu.client))),
        store_commands_per_job: (store == Store::Redis)
            .then(|| of(&|r| r.drain.commands_per_job(None))),
        store_fcalls_per_job: (store == Store::Redis)
            .then(|| of(&|r| r.drain.commands_per_job(Some("fcall")))),
    }
}

/// W2's shape as W10 runs it: W2's spread, batch and body, W10's jobs, consumers and cap.
fn spec(plan: &Plan) -> DelayedSpec {
    DelayedSpec {
        jobs: plan.w10_jobs,
        consumers: plan.w10_concurrency,
        cap: plan.w10_cap,
        ..plan.w2_spec()
    }
}

/// Push: W2's shape to topic `hook`, then the drain of a backlog in topic `backlog`.
async fn push_rep(
    serve: &Serve,
    receiver: &Receiver,
    plan: &Plan,
    hook: &str,
    backlog: &str,
) -> anyhow::Result<Rep> {
    let spec = spec(plan);

    // W2's shape: forwarding is on (a probe job came through) before the clock starts.
    let sink = receiver.activate(serve, hook, plan).await?;
    let start = Instant::now() + Duration::from_millis(200);
    tokio::time::sleep_until(start.into()).await;
    let mut ids = Vec::with_capacity(spec.jobs);
    while ids.len() < spec.jobs && start.elapsed() < spec.cap {
        let n = spec.batch.min(spec.jobs - ids.len());
        ids.extend(
            serve
                .push(hook, n, Delays::Uniform(spec.spread), spec.body)
                .await?,
        );
    }
    let push_elapsed = start.elapsed();
    while sink.distinct() < ids.len() && start.elapsed() < spec.cap {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = receiver.close(serve, hook, &sink, &ids).await?;
    let delayed = DelayedRun {
        pushed: ids.len(),
        push_elapsed,
        delivered: got.delivered,
        elapsed: got
            .last
            .map_or(spec.cap, |l| l.saturating_duration_since(start)),
        host: got.host,
        own: Some(got.own),
    };
    let delivered = got.delivered;
    let (mut duplicates, mut missing) = (got.duplicates, got.missing);

    // The drain: the backlog first, then the destination.
    let sink = receiver.listen(backlog);
    let ids = serve
        .fill(backlog, plan.w10_drain, Delays::Ready, plan.body)
        .await?;
    let stats = serve.command_stats().await?;
    let meter = SpanMeter::start(serve.running.pids());
    let put = Instant::now();
    serve
        .put_destination(backlog, &receiver.url(), plan.w10_concurrency)
        .await?;
    while sink.distinct() < ids.len() && put.elapsed() < plan.w10_cap + PICKUP {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cpu = meter.stop();
    let commands = serve.commands_since(stats).await?;
    let got = receiver.close(serve, backlog, &sink, &ids).await?;
    duplicates += got.duplicates;
    missing += got.missing;
    let secs = match (got.first, got.last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    Ok(Rep {
        delayed,
        delivered,
        duplicates: Some(duplicates),
        missing,
        drain: Drain {
            // The first delivery starts the clock: the jobs after it, over the time since.
            rate: if got.delivered > 1 && secs > 0.0 {
                (got.delivered - 1) as f64 / secs
            } else {
                0.0
            },
            pickup_s: got
                .first
                .map(|f| f.saturating_duration_since(put).as_secs_f64()),
            jobs: got.delivered,
            secs,
            cpu,
            commands,
        },
    })
}

/// Pull: W2's shape with the HTTP batch consumers (as W2's rows run them), then a W1 drain
/// of a backlog with as many consumers.
async fn pull_rep(serve: &Serve, plan: &Plan) -> anyhow::Result<Rep> {
    let client = serve.client();
    let delayed = client.delayed(spec(plan)).await?;
    let delivered = delayed.delivered.min(delayed.pushed);
    let mut missing = (delayed.pushed - delivered) as u64;

    let n = serve
        .fill(PULL_TOPIC, plan.w10_drain, Delays::Ready, plan.body)
        .await?
        .len();
    let stats = serve.command_stats().await?;
    let meter = SpanMeter::start(serve.running.pids());
    let drain = client.drain(n, plan.w10_concurrency, plan.w10_cap).await?;
    let cpu = meter.stop();
    let commands = serve.commands_since(stats).await?;
    missing += (n - drain.jobs.min(n)) as u64;
    Ok(Rep {
        delayed,
        delivered,
        duplicates: None,
        missing,
        drain: Drain {
            rate: drain.rate(),
            pickup_s: None,
            jobs: drain.jobs,
            secs: drain.elapsed.as_secs_f64(),
            cpu,
            commands,
        },
    })
}

/// `delayq serve` on a fresh engine, with an HTTP client of its API.
struct Serve {
    running: DelayqServe,
    base: String,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct BatchAnswer {
    results: Vec<Pushed>,
}

#[derive(Deserialize)]
struct Pushed {
    id: String,
}

impl Serve {
    /// The server on a fresh redis-server or a fresh data directory, once it is ready.
    async fn start(env: &Env, store: Store) -> anyhow::Result<Serve> {
        let port = procs::free_port()?;
        let args = vec!["--listen".to_string(), format!("127.0.0.1:{port}")];
        let log = format!("w10-{}-server.log", store.name().to_lowercase());
        let running = DelayqServe::start(env, store, &log, args)?;
        procs::wait_for_port(port, Duration::from_secs(20), "delayq serve").await?;
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .timeout(Duration::from_secs(30))
            .build()?;
        let s = Serve {
            running,
            base: format!("http://127.0.0.1:{port}"),
            http,
        };
        s.ready().await?;
        Ok(s)
    }

    /// Waits until `/readyz` says the engine answers (at most 30 s).
    async fn ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self
                .http
                .get(format!("{}/readyz", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "delayq serve was not ready within 30 s (log: {})",
                    self.running.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What its redis-server counted so far (`None` on the embedded engine).
    async fn command_stats(&self) -> anyhow::Result<Option<CommandStats>> {
        match &self.running.redis {
            Some(r) => Ok(Some(redis_info::command_stats(r).await?)),
            None => Ok(None),
        }
    }

    /// What its redis-server counted since `before` ([`Serve::command_stats`]).
    async fn commands_since(
        &self,
        before: Option<CommandStats>,
    ) -> anyhow::Result<Option<CommandStats>> {
        Ok(match (before, self.command_stats().await?) {
            (Some(b), Some(a)) => Some(a.since(&b)),
            _ => None,
        })
    }

    /// The pull consumers ([`Client`], batch loop) of this server.
    fn client(&self) -> Client {
        Client::new(self.http.clone(), &self.base, Loop::Batch)
    }

    /// Pushes `n` jobs to `topic` in one request; the ids the server gave them.
    async fn push(
        &self,
        topic: &str,
        n: usize,
        delays: Delays,
        body: usize,
    ) -> anyhow::Result<Vec<String>> {
        let jobs = delayq_http::jobs(n, delays, body);
        let a: BatchAnswer = delayq_http::post_batch(&self.http, &self.base, topic, &jobs)
            .await?
            .json()
            .await
            .context("reading a push's answer")?;
        if a.results.len() != n {
            anyhow::bail!("a push of {n} jobs answered {} ids", a.results.len());
        }
        Ok(a.results.into_iter().map(|p| p.id).collect())
    }

    /// Pushes `n` jobs to `topic`, 1000 per request with two requests in flight (as the HTTP
    /// systems fill); the ids the server gave them.
    async fn fill(
        &self,
        topic: &str,
        n: usize,
        delays: Delays,
        body: usize,
    ) -> anyhow::Result<Vec<String>> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            let a = (n - ids.len()).min(1000);
            let b = (n - ids.len() - a).min(1000);
            let (ra, rb) = tokio::join!(self.push(topic, a, delays, body), async {
                if b > 0 {
                    self.push(topic, b, delays, body).await
                } else {
                    Ok(Vec::new())
                }
            });
            ids.extend(ra?);
            ids.extend(rb?);
        }
        Ok(ids)
    }

    /// Makes `url` the destination of `topic`, with `max_concurrency` requests in flight.
    async fn put_destination(
        &self,
        topic: &str,
        url: &str,
        max_concurrency: usize,
    ) -> anyhow::Result<()> {
        let doc = json!({
            "type": "webhook",
            "url": url,
            "secrets": [SECRET],
            "max_concurrency": max_concurrency,
        });
        self.destination(topic, Some(doc)).await
    }

    /// Removes the destination of `topic`: the forwarder stops within a second.
    async fn delete_destination(&self, topic: &str) -> anyhow::Result<()> {
        self.destination(topic, None).await
    }

    /// Puts `doc` as the destination of `topic`, or deletes it (`None`).
    async fn destination(&self, topic: &str, doc: Option<serde_json::Value>) -> anyhow::Result<()> {
        let url = format!("{}/v1/topics/{topic}/destination", self.base);
        let (req, what) = match &doc {
            Some(doc) => (self.http.put(url).json(doc), "PUT"),
            None => (self.http.delete(url), "DELETE"),
        };
        let what = format!("{what} /v1/topics/{topic}/destination");
        let r = req.send().await.with_context(|| what.clone())?;
        delayq_http::success(r, &what).await?;
        Ok(())
    }
}

/// What a [`Sink`] collected, once its run is over.
struct Got {
    /// Distinct jobs among those pushed that arrived.
    delivered: usize,
    /// Requests beyond the first for one job.
    duplicates: u64,
    /// Jobs pushed that never arrived.
    missing: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    host: Lateness,
    own: Lateness,
}

/// The requests of one topic: per job id how many times it came, and its lateness.
#[derive(Default)]
struct SinkState {
    ids: HashMap<String, u32>,
    first: Option<Instant>,
    last: Option<Instant>,
    host: Lateness,
    own: Lateness,
}

/// The receiver's record of one topic.
#[derive(Default)]
struct Sink {
    state: Mutex<SinkState>,
}

impl Sink {
    fn record(&self, hit: &Hit, at: Instant) {
        let mut s = lock(&self.state);
        *s.ids.entry(hit.job.clone()).or_insert(0) += 1;
        s.first.get_or_insert(at);
        s.last = Some(at);
        if let Some(due) = hit.body_due_ms {
            s.host.record(due * 1000, hit.at_us);
        }
        if let Some(due) = hit.due_at_ms {
            s.own.record(due * 1000, hit.at_us);
        }
    }

    /// Distinct job ids received so far.
    fn distinct(&self) -> usize {
        lock(&self.state).ids.len()
    }

    /// The figures, against the ids the pushes answered.
    fn finish(&self, pushed: &[String]) -> Got {
        let s = lock(&self.state);
        let delivered = pushed.iter().filter(|id| s.ids.contains_key(*id)).count();
        Got {
            delivered,
            duplicates: s
                .ids
                .values()
                .map(|&n| u64::from(n.saturating_sub(1)))
                .sum(),
            missing: (pushed.len() - delivered) as u64,
            first: s.first,
            last: s.last,
            host: s.host.clone(),
            own: s.own.clone(),
        }
    }
}

/// What the receiver reads from one request.
struct Hit {
    topic: String,
    job: String,
    due_at_ms: Option<u64>,
    body_due_ms: Option<u64>,
    at_us: u64,
}

/// A webhook receiver in this process: HTTP/1.1 on a free loopback port, `204` at once.
struct Receiver {
    port: u16,
    sinks: Arc<Mutex<HashMap<String, Arc<Sink>>>>,
    strays: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}

impl Receiver {
    /// Listens on 127.0.0.1 and a free port.
    async fn start() -> anyhow::Result<Receiver> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("the webhook receiver cannot listen on loopback")?;
        let port = listener.local_addr()?.port();
        let sinks: Arc<Mutex<HashMap<String, Arc<Sink>>>> = Arc::default();
        let strays = Arc::new(AtomicU64::new(0));
        let task = {
            let (sinks, strays) = (sinks.clone(), strays.clone());
            tokio::spawn(async move {
                let mut conns = tokio::task::JoinSet::new();
                loop {
                    while conns.try_join_next().is_some() {}
                    match listener.accept().await {
                        Ok((stream, _)) => {
                            conns.spawn(serve_conn(stream, sinks.clone(), strays.clone()));
                        }
                        // Out of descriptors, or a connection reset before it was taken.
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            })
        };
        Ok(Receiver {
            port,
            sinks,
            strays,
            task,
        })
    }

    /// The webhook's URL.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// A fresh record of `topic`'s requests (replacing any before it).
    fn listen(&self, topic: &str) -> Arc<Sink> {
        let sink = Arc::new(Sink::default());
        lock(&self.sinks).insert(topic.to_string(), sink.clone());
        sink
    }

    /// Ends a run of `topic`: removes its destination, stops recording it (its later
    /// requests are strays) and gives its figures against the `pushed` ids. With jobs
    /// missing, it waits for the forwarder to see the destination gone before the next run.
    async fn close(
        &self,
        serve: &Serve,
        topic: &str,
        sink: &Sink,
        pushed: &[String],
    ) -> anyhow::Result<Got> {
        serve.delete_destination(topic).await?;
        lock(&self.sinks).remove(topic);
        let got = sink.finish(pushed);
        if got.missing > 0 {
            tokio::time::sleep(SETTLE).await;
        }
        Ok(got)
    }

    /// Puts this receiver as `topic`'s destination and waits until a probe job pushed
    /// to it arrives (the forwarder reads destinations every second); returns a fresh
    /// record of the topic for the run.
    async fn activate(&self, serve: &Serve, topic: &str, plan: &Plan) -> anyhow::Result<Arc<Sink>> {
        let probe = self.listen(topic);
        serve
            .put_destination(topic, &self.url(), plan.w10_concurrency)
            .await?;
        serve.push(topic, 1, Delays::Ready, plan.body).await?;
        let since = Instant::now();
        while probe.distinct() == 0 {
            if since.elapsed() > PICKUP {
                anyhow::bail!(
                    "W10: no webhook request for topic {topic} within {PICKUP:?} of putting its destination (log: {})",
                    serve.running.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(self.listen(topic))
    }
}

/// Serves one connection: requests one after the other (keep-alive), each answered `204`.
async fn serve_conn(
    stream: TcpStream,
    sinks: Arc<Mutex<HashMap<String, Arc<Sink>>>>,
    strays: Arc<AtomicU64>,
) {
    let _ = stream.set_nodelay(true);
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::with_capacity(16 * 1024, r);
    loop {
        let req = match read_request(&mut r).await {
            Ok(Some(req)) => req,
            // The peer closed the connection, or sent what is not HTTP/1.1: either way it
            // ends here.
            Ok(None) | Err(_) => return,
        };
        let at = Instant::now();
        let answer: &[u8] = if req.close {
            b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n"
        } else {
            b"HTTP/1.1 204 No Content\r\n\r\n"
        };
        if w.write_all(answer).await.is_err() {
            return;
        }
        if let Some(hit) = req.hit {
            let sink = lock(&sinks).get(&hit.topic).cloned();
            match sink {
                Some(s) => s.record(&hit, at),
                None => {
                    strays.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else {
            strays.fetch_add(1, Ordering::Relaxed);
        }
        if req.close {
            return;
        }
    }
}

/// One request: the webhook's fields when it carries them, and whether to close after it.
struct Request {
    hit: Option<Hit>,
    close: bool,
}

/// Reads one request; `None` when the connection closed before one began.
async fn read_request<R: AsyncBufRead + Unpin>(r: &mut R) -> anyhow::Result<Option<Request>> {
    let mut line = Vec::new();
    let mut budget = MAX_HEAD;
    if !read_line(r, &mut line, &mut budget).await? {
        return Ok(None);
    }
    let start = String::from_utf8_lossy(&line).into_owned();
    let http10 = start.trim_end().ends_with("HTTP/1.0");
    let mut headers: HashMap<String, String> = HashMap::new();
    loop {
        if !read_line(r, &mut line, &mut budget).await? {
            anyhow::bail!("the connection closed inside a request head");
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        if let Some((k, v)) = text.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let h = |k: &str| headers.get(k).map(String::as_str);
    let body = if h("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(r, &mut budget).await?
    } else {
        let n: usize = match h("content-length") {
            Some(v) => v.parse().context("a content-length that is not a number")?,
            None => 0,
        };
        if n > MAX_BODY {
            anyhow::bail!("a body of {n} bytes");
        }
        let mut body = vec![0; n];
        r.read_exact(&mut body).await?;
        body
    };
    let at_us = clock::now_us();
    let connection = h("connection").map(str::to_ascii_lowercase);
    let close = connection.as_deref() == Some("close")
        || (http10 && connection.as_deref() != Some("keep-alive"));
    let hit = match (h("delayq-topic"), h("delayq-job-id")) {
        (Some(topic), Some(job)) => Some(Hit {
            topic: topic.to_string(),
            job: job.to_string(),
            due_at_ms: h("delayq-due-at").and_then(|v| v.parse().ok()),
            body_due_ms: clock::due_ms(&body),
            at_us,
        }),
        _ => None,
    };
    Ok(Some(Request { hit, close }))
}

/// Reads one line (with its `\n`) into `line`, within what is left of the head's `budget`;
/// false at the end of the stream.
async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
    budget: &mut u64,
) -> anyhow::Result<bool> {
    line.clear();
    let n = (&mut *r).take(*budget).read_until(b'\n', line).await?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() != Some(&b'\n') {
        anyhow::bail!("a request head longer than {MAX_HEAD} bytes");
    }
    *budget -= n as u64;
    Ok(true)
}

/// A chunked body (sizes in hex, each chunk followed by CRLF, a last chunk of 0, trailers).
async fn read_chunked<R: AsyncBufRead + Unpin>(
    r: &mut R,
    budget: &mut u64,
) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = Vec::new();
    loop {
        if !read_line(r, &mut line, budget).await? {
            anyhow::bail!("the connection closed inside a chunked body");
        }
        let text = String::from_utf8_lossy(&line);
        let size = text.trim_end().split(';').next().unwrap_or_default().trim();
        let n = usize::from_str_radix(size, 16).context("a chunk size that is not hex")?;
        if n == 0 {
            // Trailers, up to the empty line.
            loop {
                if !read_line(r, &mut line, budget).await? || line == b"\r\n" || line == b"\n" {
                    return Ok(body);
                }
            }
        }
        if n > MAX_BODY - body.len() {
            anyhow::bail!("a chunked body over {MAX_BODY} bytes");
        }
        let from = body.len();
        body.resize(from + n, 0);
        r.read_exact(&mut body[from..]).await?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_receiver_reads_requests_of_both_framings_and_answers_204() {
        let stream: &[u8] = b"POST /hook HTTP/1.1\r\nhost: x\r\ndelayq-topic: t\r\ndelayq-job-id: a\r\ndelayq-attempt: 1\r\ndelayq-due-at: 1000\r\ncontent-length: 7\r\n\r\n1000:xxPOST /hook HTTP/1.1\r\ndelayq-topic: t\r\ndelayq-job-id: b\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n3\r\n12:\r\n2\r\nxx\r\n0\r\n\r\n";
        let mut r = BufReader::new(stream);
        let a = read_request(&mut r)
            .await
            .expect("first")
            .expect("a request");
        let hit = a.hit.expect("webhook fields");
        assert_eq!((hit.topic.as_str(), hit.job.as_str()), ("t", "a"));
        assert_eq!((hit.due_at_ms, hit.body_due_ms), (Some(1000), Some(1000)));
        assert!(!a.close);
        let b = read_request(&mut r)
            .await
            .expect("second")
            .expect("a request");
        let hit = b.hit.expect("webhook fields");
        assert_eq!(
            (hit.job.as_str(), hit.due_at_ms, hit.body_due_ms),
            ("b", None, Some(12))
        );
        assert!(b.close);
        assert!(read_request(&mut r).await.expect("the end").is_none());

        let long = format!(
            "GET / HTTP/1.1\r\nx: {}\r\n\r\n",
            "y".repeat(MAX_HEAD as usize)
        );
        let mut r = BufReader::new(long.as_bytes());
        assert!(
            read_request(&mut r).await.is_err(),
            "a head over the limit is refused"
        );
        let huge: &[u8] = b"POST /hook HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\nffffffffffffffff\r\n";
        let mut r = BufReader::new(huge);
        assert!(
            read_request(&mut r).await.is_err(),
            "a chunk over the body limit is refused, whatever its size"
        );
    }

    #[tokio::test]
    async fn a_sink_counts_jobs_twice_and_missing_against_the_pushed_ids() {
        let receiver = Receiver::start().await.expect("receiver");
        let sink = receiver.listen("t");
        let http = reqwest::Client::new();
        for job in ["a", "b", "a"] {
            let r = http
                .post(receiver.url())
                .header("delayq-topic", "t")
                .header("delayq-job-id", job)
                .header("delayq-due-at", clock::now_ms().to_string())
                .body(clock::body(clock::now_ms(), 100))
                .send()
                .await
                .expect("sent");
            assert_eq!(r.status(), reqwest::StatusCode::NO_CONTENT);
        }
        let other = http
            .post(receiver.url())
            .header("delayq-topic", "elsewhere")
            .header("delayq-job-id", "z")
            .send()
            .await
            .expect("sent");
        assert_eq!(other.status(), reqwest::StatusCode::NO_CONTENT);
        let got = sink.finish(&["a".into(), "b".into(), "c".into()]);
        assert_eq!((got.delivered, got.duplicates, got.missing), (2, 1, 1));
        assert_eq!((got.host.count(), got.own.count()), (3, 3));
        assert_eq!(receiver.strays.load(Ordering::Relaxed), 1);
    }
}
