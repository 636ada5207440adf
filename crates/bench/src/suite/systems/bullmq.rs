//! BullMQ on Node 20: `bench/bullmq.mjs`, a long-lived child process that takes one JSON
//! command per line on stdin and answers one JSON line on stdout. Its Worker runs with the
//! given concurrency (50 unless a workload varies it) and `removeOnComplete`.

use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_bench::lateness::Lateness;
use delayq_testkit::RedisServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

use super::{DelayedRun, Env, Footprint, Kind, Pids, System};
use crate::suite::{procs, redis_info};

/// A Node process driving BullMQ against its own redis-server.
pub(crate) struct Bullmq {
    node: NodeDriver,
    redis: RedisServer,
}

/// The Node child and its pipes.
pub(crate) struct NodeDriver {
    proc: procs::Owned,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl NodeDriver {
    /// Starts `node bench/bullmq.mjs <redis port>`.
    pub(crate) async fn start(env: &Env, redis_port: u16, log: &str) -> anyhow::Result<Self> {
        let script = env.bench_dir.join("bullmq.mjs");
        if !env
            .bench_dir
            .join("node_modules/bullmq/package.json")
            .exists()
        {
            bail!(
                "BullMQ is not installed in {}: run bench/run.sh (it runs `npm ci` there)",
                env.bench_dir.display()
            );
        }
        let mut proc = procs::Owned::spawn(
            "node (BullMQ driver)",
            &env.node,
            &[script.display().to_string(), redis_port.to_string()],
            Some(&env.bench_dir),
            Some(&env.work.join(log)),
        )?;
        let stdin = proc.child().stdin.take().context("node's stdin")?;
        let stdout = proc.child().stdout.take().context("node's stdout")?;
        let mut d = NodeDriver {
            proc,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        };
        d.call(json!({ "op": "ping" }), Duration::from_secs(30))
            .await?;
        Ok(d)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Sends a command and waits up to `limit` for its answer.
    pub(crate) async fn call(&mut self, cmd: Value, limit: Duration) -> anyhow::Result<Value> {
        let op = cmd["op"].as_str().unwrap_or("?").to_string();
        self.stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .await
            .with_context(|| format!("sending {op} to node"))?;
        let line = tokio::time::timeout(limit, self.stdout.next_line())
            .await
            .with_context(|| format!("node did not answer {op} within {limit:?}"))??
            .with_context(|| format!("node exited during {op} (see its log)"))?;
        let v: Value = serde_json::from_str(&line)
            .with_context(|| format!("node answered {op} with {line:?}"))?;
        if v["ok"] != json!(true) {
            bail!("node failed {op}: {}", v["error"]);
        }
        Ok(v)
    }
}

impl Bullmq {
    /// A redis-server and a Node driver on it.
    pub(crate) async fn start(env: &Env) -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let node = NodeDriver::start(env, redis.port(), "bullmq-node.log").await?;
        Ok(Bullmq { node, redis })
    }
}

fn delays_json(d: Delays) -> Value {
    match d {
        Delays::Ready => json!({ "fixed_ms": 0 }),
        Delays::Fixed(x) => json!({ "fixed_ms": x.as_millis() as u64 }),
        Delays::Uniform(x) => json!({ "spread_ms": x.as_millis() as u64 }),
    }
}

fn ms(v: &Value) -> Duration {
    Duration::from_secs_f64(v.as_f64().unwrap_or(0.0).max(0.0) / 1000.0)
}

#[async_trait]
impl System for Bullmq {
    fn kind(&self) -> Kind {
        Kind::Bullmq
    }

    fn pids(&self) -> Pids {
        Pids {
            store: self.redis.pid(),
            queue: self.node.pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        Some(&self.redis)
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        self.node
            .call(
                json!({ "op": "fill", "n": n, "delays": delays_json(delays), "body": body }),
                Duration::from_secs(900),
            )
            .await?;
        Ok(())
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        let v = self
            .node
            .call(
                json!({ "op": "drain", "n": n, "concurrency": consumers, "cap_ms": cap.as_millis() as u64 }),
                cap + Duration::from_secs(60),
            )
            .await?;
        Ok(DrainReport {
            jobs: v["jobs"].as_u64().unwrap_or(0) as usize,
            elapsed: ms(&v["elapsed_ms"]),
        })
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        let v = self
            .node
            .call(
                json!({
                    "op": "delayed",
                    "jobs": spec.jobs,
                    "spread_ms": spec.spread.as_millis() as u64,
                    "concurrency": spec.consumers,
                    "batch": spec.batch,
                    "body": spec.body,
                    "cap_ms": spec.cap.as_millis() as u64,
                }),
                spec.cap + Duration::from_secs(60),
            )
            .await?;
        let mut host = Lateness::new();
        // Lateness in µs, negative for early deliveries.
        if let Some(values) = v["late_us"].as_array() {
            for x in values {
                let l = x.as_i64().unwrap_or(0);
                if l < 0 {
                    host.record(l.unsigned_abs(), 0);
                } else {
                    host.record_late(l as u64);
                }
            }
        }
        Ok(DelayedRun {
            pushed: v["pushed"].as_u64().unwrap_or(0) as usize,
            push_elapsed: ms(&v["push_ms"]),
            delivered: v["delivered"].as_u64().unwrap_or(0) as usize,
            elapsed: ms(&v["elapsed_ms"]),
            host,
            own: None,
        })
    }

    fn endpoint(&self) -> String {
        self.redis.url()
    }

    async fn start_idle_workers(&mut self, workers: usize) -> anyhow::Result<bool> {
        self.node
            .call(
                json!({ "op": "idle", "workers": workers }),
                Duration::from_secs(120),
            )
            .await?;
        Ok(true)
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        Ok(Footprint {
            memory: redis_info::used_memory(&self.redis).await?,
            disk: None,
        })
    }
}
