//! The Node peers' driver: a long-lived `node bench/<script>.mjs <store>` child that takes
//! one JSON command per line on stdin and answers one JSON line on stdout (`{"ok": true,
//! ...}` or `{"ok": false, "error": ...}`). BullMQ (`bullmq.mjs`) and pg-boss
//! (`pgboss.mjs`) speak the same commands: `ping`, `fill`, `drain`, `delayed`, `idle`,
//! `stop_idle`; this module also reads their answers.

use std::time::Duration;

use anyhow::{Context, bail};
use delayq_bench::driver::{Delays, DrainReport};
use delayq_bench::lateness::Lateness;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

use super::{DelayedRun, Env};
use crate::suite::procs;

/// The Node child and its pipes.
pub(crate) struct NodeDriver {
    proc: procs::Owned,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// One of the scripts in `bench/`, and the npm package it needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Script {
    /// The file in `bench/`, e.g. `bullmq.mjs`.
    pub file: &'static str,
    /// The npm package it drives, which `npm ci` puts in `bench/node_modules`.
    pub package: &'static str,
    /// How the log and errors name the child, e.g. `node (BullMQ driver)`.
    pub what: &'static str,
}

impl NodeDriver {
    /// Starts `node bench/<script> <store>` (the store: a Redis port or a PostgreSQL URL),
    /// its stderr to `log` in the work directory, and waits for its answer to `ping` (the
    /// script connects to its store first).
    pub(crate) async fn start(
        env: &Env,
        script: Script,
        store: &str,
        log: &str,
    ) -> anyhow::Result<Self> {
        let path = env.bench_dir.join(script.file);
        if !env
            .bench_dir
            .join("node_modules")
            .join(script.package)
            .join("package.json")
            .exists()
        {
            bail!(
                "{} is not installed in {}: run bench/run.sh (it runs `npm ci` there)",
                script.package,
                env.bench_dir.display()
            );
        }
        let mut proc = procs::Owned::spawn(
            script.what,
            &env.node,
            &[path.display().to_string(), store.to_string()],
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
            .await
            .with_context(|| format!("{} did not start (see {})", script.what, log))?;
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

    /// `fill`: `n` jobs of `body` bytes, as fast as the peer's batch call allows.
    pub(crate) async fn fill(
        &mut self,
        n: usize,
        delays: Delays,
        body: usize,
    ) -> anyhow::Result<()> {
        self.call(
            json!({ "op": "fill", "n": n, "delays": delays_json(delays), "body": body }),
            Duration::from_secs(900),
        )
        .await?;
        Ok(())
    }

    /// `drain`: `consumers` consumers take ready jobs until `n` were handled or `cap` passed.
    pub(crate) async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        let v = self
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

    /// `delayed`: consumers run while one producer pushes delayed jobs in batches.
    pub(crate) async fn delayed(
        &mut self,
        spec: delayq_bench::driver::DelayedSpec,
    ) -> anyhow::Result<DelayedRun> {
        let v = self
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

    /// `idle`: starts `workers` idle workers in the Node process.
    pub(crate) async fn idle(&mut self, workers: usize) -> anyhow::Result<()> {
        self.call(
            json!({ "op": "idle", "workers": workers }),
            Duration::from_secs(120),
        )
        .await?;
        Ok(())
    }
}

/// The `delays` of a `fill` command.
fn delays_json(d: Delays) -> Value {
    match d {
        Delays::Ready => json!({ "fixed_ms": 0 }),
        Delays::Fixed(x) => json!({ "fixed_ms": x.as_millis() as u64 }),
        Delays::Uniform(x) => json!({ "spread_ms": x.as_millis() as u64 }),
    }
}

/// A duration the script gave in (fractional) milliseconds.
fn ms(v: &Value) -> Duration {
    Duration::from_secs_f64(v.as_f64().unwrap_or(0.0).max(0.0) / 1000.0)
}
