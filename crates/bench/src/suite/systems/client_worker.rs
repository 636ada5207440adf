//! The official clients' workers on the delayq server on Redis (the server and store of
//! `http-redis-batch`): W1 only. Each drain runs the client's own drain script as a child
//! process, `clients/python/bench/throughput.py` in the client's venv or
//! `clients/node/dist/bench/w1.js`, with `URL TOPIC JOBS CONCURRENCY`. The script pushes
//! the backlog itself (JOBS jobs, 100-byte bodies, due now, batches of 1000), drains it with
//! one `Worker` of that concurrency and prints `{"jobs": N, "seconds": S, "jobs_per_s": R}`,
//! S counting the drain alone. So `fill` only notes the backlog the next script is to push,
//! and the drain's CPU is measured from the end of the script's push (the first lease, or
//! the whole backlog ready) to its figures' line. The scripts have no time cap: they drain
//! it all.

use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::delayq_http::{DelayqHttp, Loop};
use super::{DelayedRun, Env, Footprint, Kind, Pids, SpanCpu, SpanMeter, System};
use crate::suite::{procs, say};

/// The topic the scripts push to and drain.
const TOPIC: &str = "bench";

/// The body size the scripts push.
const SCRIPT_BODY: usize = 100;

/// Which client.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lang {
    /// clients/python: its asyncio `Worker`.
    Python,
    /// clients/node: its `Worker`.
    Node,
}

/// The delayq server on its redis-server, and the client whose worker drains it.
pub(crate) struct ClientWorker {
    kind: Kind,
    lang: Lang,
    server: DelayqHttp,
    env: Env,
    http: reqwest::Client,
    /// Jobs the next drain script is to push (what `fill` was asked for).
    backlog: usize,
}

/// The line a drain script prints.
#[derive(Deserialize)]
struct ScriptReport {
    jobs: usize,
    seconds: f64,
}

/// The part of `GET /v1/topics/{topic}/stats` that tells the push is over.
#[derive(Deserialize)]
struct Stats {
    ready: u64,
    reserved: u64,
}

impl ClientWorker {
    /// The server on a fresh redis-server (as `http-redis-batch` runs it).
    pub(crate) async fn start(env: &Env, kind: Kind, lang: Lang) -> anyhow::Result<Self> {
        let server = DelayqHttp::redis(env, kind, Loop::Batch).await?;
        Ok(ClientWorker {
            kind,
            lang,
            server,
            env: env.clone(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()?,
            backlog: 0,
        })
    }

    /// The program and arguments of one drain.
    fn command(&self, jobs: usize, consumers: usize) -> (std::path::PathBuf, Vec<String>) {
        let args = [
            self.server.endpoint(),
            TOPIC.to_string(),
            jobs.to_string(),
            consumers.to_string(),
        ];
        let (program, script) = match self.lang {
            Lang::Python => (
                self.env.client_python.clone(),
                self.env.clients_dir.join("python/bench/throughput.py"),
            ),
            Lang::Node => (
                self.env.node.clone(),
                self.env.clients_dir.join("node/dist/bench/w1.js"),
            ),
        };
        let mut all = vec![script.display().to_string()];
        all.extend(args);
        (program, all)
    }

    /// True once the script's push is over: a worker holds a lease (the scripts start it
    /// after the last push is answered), or the whole backlog is ready.
    async fn pushed(&self, jobs: usize) -> bool {
        let url = format!("{}/v1/topics/{TOPIC}/stats", self.server.endpoint());
        let Ok(r) = self.http.get(url).send().await else {
            return false;
        };
        match r.error_for_status() {
            Ok(r) => r
                .json::<Stats>()
                .await
                .is_ok_and(|s| s.reserved > 0 || s.ready >= jobs as u64),
            Err(_) => false,
        }
    }
}

#[async_trait]
impl System for ClientWorker {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn pids(&self) -> Pids {
        // The worker's process changes with every drain: drain_metered measures it.
        self.server.pids()
    }

    fn redis(&self) -> Option<&RedisServer> {
        self.server.redis()
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        if !matches!(delays, Delays::Ready) || body != SCRIPT_BODY {
            bail!(
                "{}: its drain script pushes ready jobs of {SCRIPT_BODY} bytes, not {delays:?} of {body} bytes",
                self.kind.name()
            );
        }
        self.backlog += n;
        Ok(())
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        Ok(self.drain_metered(n, consumers, cap).await?.0)
    }

    async fn drain_metered(
        &mut self,
        n: usize,
        consumers: usize,
        _cap: Duration,
    ) -> anyhow::Result<(DrainReport, SpanCpu)> {
        let jobs = self.backlog;
        if jobs == 0 || jobs != n {
            bail!(
                "{}: asked to drain {n} jobs with {jobs} filled; the script pushes what it drains",
                self.kind.name()
            );
        }
        let (program, args) = self.command(jobs, consumers);
        let log = self
            .env
            .work
            .join(format!("{}-worker.log", self.kind.key()));
        let what = format!("{} drain script", self.kind.name());
        let mut child = procs::Owned::spawn(&what, &program, &args, None, Some(&log))?;
        let stdout = child
            .child()
            .stdout
            .take()
            .with_context(|| format!("{what}: its stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        // Generous: the scripts drain the whole backlog, at a few thousand jobs/s at worst.
        let limit = Duration::from_secs(120) + Duration::from_millis(jobs as u64 * 5);
        let deadline = tokio::time::Instant::now() + limit;

        // The push is the script's, not the drain: the CPU meter starts once it is over.
        loop {
            if self.pushed(jobs).await {
                break;
            }
            if child.check_alive().is_err() {
                // Done (or failed) before a poll saw its push end: its line and exit status
                // tell which; its drain's CPU is then not measured.
                say(&format!("{what} exited before the CPU meter started"));
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "{what} did not push {jobs} jobs within {limit:?} (see {})",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let meter = SpanMeter::start(Pids {
            client: Some(child.pid()),
            ..self.server.pids()
        });
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .with_context(|| format!("{what} did not finish within {limit:?}"))??
            .with_context(|| {
                format!("{what} exited without its figures (see {})", log.display())
            })?;
        // Before the script is reaped: /proc forgets a reaped process's CPU time.
        let cpu = meter.stop();
        let status = tokio::time::timeout_at(deadline, child.child().wait())
            .await
            .with_context(|| format!("{what} did not exit after its figures"))??;
        if !status.success() {
            bail!("{what} failed: {status} (see {})", log.display());
        }
        let r: ScriptReport = serde_json::from_str(&line)
            .with_context(|| format!("{what} printed {line:?}, not its JSON line"))?;
        if r.jobs != jobs || !r.seconds.is_finite() || r.seconds <= 0.0 {
            bail!("{what} reported {line} for {jobs} jobs");
        }
        self.backlog = 0;
        Ok((
            DrainReport {
                jobs: r.jobs,
                elapsed: Duration::from_secs_f64(r.seconds),
            },
            cpu,
        ))
    }

    async fn delayed(&mut self, _spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        bail!("{} runs in W1 only", self.kind.name())
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        self.server.footprint().await
    }

    fn endpoint(&self) -> String {
        self.server.endpoint()
    }
}
