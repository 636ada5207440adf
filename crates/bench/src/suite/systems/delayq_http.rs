//! The delayq server over HTTP: a child process of this suite (`delayq-bench serve-http`,
//! which runs `delayq_server::serve` on `delayq::open(url)`, as `delayq serve` does), driven
//! by HTTP clients in this process ([`Client`], which W10 also runs against `delayq serve`):
//! one long-poll loop per consumer, either the simplest one (reserve one job, ack it: two
//! requests per job) or the batch one (reserve up to [`BATCH`] jobs and settle the previous
//! batch's in the same request: one request per cycle).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use delayq_bench::clock;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;
use serde::Deserialize;
use serde_json::json;
use tempfile::TempDir;

use super::{DelayedRun, Env, Footprint, Kind, Pids, System, Tally};
use crate::suite::{procs, redis_info};

/// The most jobs a batch consumer reserves per request.
pub(crate) const BATCH: usize = 50;

/// How the HTTP consumers loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loop {
    /// Reserve one job, ack it: two requests per job.
    One,
    /// Reserve up to [`BATCH`] jobs, settling the previous batch in the same request.
    Batch,
}

/// The delayq server and its engine.
pub(crate) struct DelayqHttp {
    kind: Kind,
    consumer: Loop,
    server: procs::Owned,
    base: String,
    http: reqwest::Client,
    redis: Option<RedisServer>,
    dir: Option<TempDir>,
}

#[derive(Deserialize)]
struct ReserveResponse {
    jobs: Vec<DeliveryDto>,
    #[serde(default)]
    settled: Vec<SettledDto>,
}

#[derive(Deserialize)]
struct SettledDto {
    ok: bool,
}

#[derive(Deserialize)]
struct DeliveryDto {
    job: JobDto,
    token: Option<u64>,
    receipt: Option<String>,
    lateness_ms: f64,
}

#[derive(Deserialize)]
struct JobDto {
    id: String,
    body: String,
}

impl DelayqHttp {
    /// The server on a fresh redis-server, its consumers looping as `consumer` says.
    pub(crate) async fn redis(env: &Env, kind: Kind, consumer: Loop) -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let mut s = Self::start(env, kind, consumer, &redis.url()).await?;
        s.redis = Some(redis);
        Ok(s)
    }

    /// The server on a fresh data directory, its consumers looping as `consumer` says.
    pub(crate) async fn embedded(env: &Env, kind: Kind, consumer: Loop) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("delayq-bench-http-")
            .tempdir_in(&env.work)?;
        let url = format!("sqlite://{}", dir.path().display());
        let mut s = Self::start(env, kind, consumer, &url).await?;
        s.dir = Some(dir);
        Ok(s)
    }

    async fn start(env: &Env, kind: Kind, consumer: Loop, engine: &str) -> anyhow::Result<Self> {
        let port = procs::free_port()?;
        let log = env.work.join(format!("{}-server.log", kind.key()));
        let server = procs::Owned::spawn(
            "the delayq server",
            &procs::self_exe()?,
            &[
                "serve-http".into(),
                "--engine".into(),
                engine.into(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
            ],
            None,
            Some(&log),
        )?;
        procs::wait_for_port(port, Duration::from_secs(20), "the delayq server").await?;
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(DelayqHttp {
            kind,
            consumer,
            server,
            base: format!("http://127.0.0.1:{port}"),
            http,
            redis: None,
            dir: None,
        })
    }

    /// The HTTP client side alone, to run consumers in a task of their own.
    fn client_of(s: &DelayqHttp) -> Client {
        Client::new(s.http.clone(), &s.base, s.consumer)
    }
}

/// What the consumers need: the HTTP client, the server's base URL and the loop.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    consumer: Loop,
}

impl Client {
    /// A client of the topic `bench` on the delayq server at `base` (any delayq server:
    /// W10 runs it against `delayq serve`), its consumers looping as `consumer` says.
    pub(crate) fn new(http: reqwest::Client, base: &str, consumer: Loop) -> Client {
        Client {
            http,
            base: base.to_string(),
            consumer,
        }
    }

    /// Pushes `jobs` to `bench` in one request.
    async fn push(&self, jobs: Vec<serde_json::Value>) -> anyhow::Result<()> {
        post_batch(&self.http, &self.base, "bench", &jobs).await?;
        Ok(())
    }

    /// `consumers` consumers take ready jobs until `n` were handled or `cap` passed.
    pub(crate) async fn drain(
        &self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        let tally = Tally::new(n, Instant::now(), cap);
        self.run_consumers(consumers, &tally).await?;
        Ok(tally.drain())
    }

    /// W2's shape: the consumers run while one producer pushes `spec.jobs` jobs due over
    /// `spec.spread`, in batches of `spec.batch` (each awaited).
    pub(crate) async fn delayed(&self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        let tally = Tally::new(
            spec.jobs,
            Instant::now() + Duration::from_millis(200),
            spec.cap,
        );
        let consumers = {
            let me = self.clone();
            let tally = tally.clone();
            tokio::spawn(async move { me.run_consumers(spec.consumers, &tally).await })
        };
        tokio::time::sleep_until(tally.start().into()).await;
        let mut pushed = 0;
        while pushed < spec.jobs && !tally.stop() {
            let n = spec.batch.min(spec.jobs - pushed);
            self.push(jobs(n, Delays::Uniform(spec.spread), spec.body))
                .await?;
            pushed += n;
        }
        let push_elapsed = tally.start().elapsed();
        consumers.await??;
        Ok(tally.delayed(pushed, push_elapsed, true))
    }

    /// `consumers` loops, each reserving one job (long-poll), counting it and acking it,
    /// until the tally says stop.
    async fn run_consumers(&self, consumers: usize, tally: &Arc<Tally>) -> anyhow::Result<()> {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..consumers {
            let (http, base, tally) = (self.http.clone(), self.base.clone(), tally.clone());
            match self.consumer {
                Loop::One => tasks.spawn(consume(http, base, tally)),
                Loop::Batch => tasks.spawn(consume_batches(http, base, tally)),
            };
        }
        while let Some(r) = tasks.join_next().await {
            r??;
        }
        Ok(())
    }
}

/// `n` jobs of `body` bytes for a batch push, each due as `delays` draws, its due time on
/// the host clock stamped in its body.
pub(crate) fn jobs(n: usize, delays: Delays, body: usize) -> Vec<serde_json::Value> {
    let now = clock::now_ms();
    let mut rng = rand::rng();
    (0..n)
        .map(|_| {
            let d = delays.draw(&mut rng).as_millis() as u64;
            let b = clock::body(now + d, body);
            json!({ "body": String::from_utf8_lossy(&b), "delay_ms": d })
        })
        .collect()
}

/// One `POST /v1/topics/{topic}/batch` of `jobs` to the delayq server at `base`; its
/// answer, once it said success.
pub(crate) async fn post_batch(
    http: &reqwest::Client,
    base: &str,
    topic: &str,
    jobs: &[serde_json::Value],
) -> anyhow::Result<reqwest::Response> {
    let r = http
        .post(format!("{base}/v1/topics/{topic}/batch"))
        .json(&json!({ "jobs": jobs }))
        .send()
        .await
        .context("pushing over HTTP")?;
    success(r, "push").await
}

/// `r` when its status says success; otherwise an error with `what`, the status and the
/// answer's body (the server's `{ error: { code, message } }`).
pub(crate) async fn success(r: reqwest::Response, what: &str) -> anyhow::Result<reqwest::Response> {
    if r.status().is_success() {
        return Ok(r);
    }
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    anyhow::bail!("{what} answered {status}: {body}")
}

/// One `POST /v1/reserve`.
async fn post_reserve(
    http: &reqwest::Client,
    base: &str,
    req: &serde_json::Value,
) -> anyhow::Result<ReserveResponse> {
    Ok(http
        .post(format!("{base}/v1/reserve"))
        .json(req)
        .send()
        .await
        .context("reserving over HTTP")?
        .error_for_status()?
        .json()
        .await?)
}

/// One consumer: reserve one job (long-poll), count it, ack it; until the tally says stop.
async fn consume(http: reqwest::Client, base: String, tally: Arc<Tally>) -> anyhow::Result<()> {
    let reserve = json!({ "topics": ["bench"], "max": 1, "wait_ms": 500 });
    while !tally.stop() {
        let r = post_reserve(&http, &base, &reserve).await?;
        for d in r.jobs {
            tally.seen(d.job.body.as_bytes());
            tally.own().record_late((d.lateness_ms * 1000.0) as u64);
            let token = d.token.unwrap_or(0);
            http.post(format!("{base}/v1/topics/bench/jobs/{}/ack", d.job.id))
                .json(&json!({ "token": token }))
                .send()
                .await
                .context("acking over HTTP")?
                .error_for_status()?;
        }
    }
    Ok(())
}

/// One batch consumer: each request settles (acks, by their receipts) the jobs of the
/// previous answer and reserves up to [`BATCH`] more (long-poll); the last answer's jobs are
/// acked with a settle-only request (`max` 0) once the tally says stop.
async fn consume_batches(
    http: reqwest::Client,
    base: String,
    tally: Arc<Tally>,
) -> anyhow::Result<()> {
    let mut done: Vec<serde_json::Value> = Vec::new();
    loop {
        let stop = tally.stop();
        let req = json!({
            "topics": ["bench"],
            "max": if stop { 0 } else { BATCH },
            "wait_ms": 500,
            "settle": done,
        });
        if stop && done.is_empty() {
            return Ok(());
        }
        let r = post_reserve(&http, &base, &req).await?;
        if let Some(lost) = r.settled.iter().position(|s| !s.ok) {
            anyhow::bail!("settlement {lost} of a batch consumer's request failed");
        }
        done = r
            .jobs
            .iter()
            .map(|d| {
                tally.seen(d.job.body.as_bytes());
                tally.own().record_late((d.lateness_ms * 1000.0) as u64);
                json!({ "receipt": d.receipt })
            })
            .collect();
        if stop {
            return Ok(());
        }
    }
}

#[async_trait]
impl System for DelayqHttp {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn pids(&self) -> Pids {
        Pids {
            store: self
                .redis
                .as_ref()
                .and_then(RedisServer::pid)
                .map(procs::Proc::One),
            queue: self.server.pid(),
            client: Some(procs::own_pid()),
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        self.redis.as_ref()
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        let client = Self::client_of(self);
        let mut left = n;
        while left > 0 {
            let a = left.min(1000);
            let b = (left - a).min(1000);
            let (ra, rb) = tokio::join!(client.push(jobs(a, delays, body)), async {
                if b > 0 {
                    client.push(jobs(b, delays, body)).await
                } else {
                    Ok(())
                }
            });
            ra?;
            rb?;
            left -= a + b;
        }
        self.server.check_alive()
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        Self::client_of(self).drain(n, consumers, cap).await
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        Self::client_of(self).delayed(spec).await
    }

    fn endpoint(&self) -> String {
        self.base.clone()
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        match &self.redis {
            Some(r) => Ok(Footprint {
                memory: redis_info::used_memory(r).await?,
                disk: None,
            }),
            None => Ok(Footprint {
                memory: procs::rss_bytes(self.server.pid()),
                disk: self.dir.as_ref().map(|d| procs::disk_bytes(d.path())),
            }),
        }
    }
}
