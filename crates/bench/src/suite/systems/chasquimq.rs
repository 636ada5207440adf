//! ChasquiMQ (crate `chasquimq`, Redis Streams and MessagePack), as a Rust service would use
//! it: its `Producer` (`add_bulk` for ready jobs, `add_in_bulk` for jobs due together,
//! `add_at` for each job of a delayed run) and its `Consumer` with concurrency C and
//! `events_enabled = false`, every other setting left at its default (batch reads of 64,
//! acks batched by 256 or 5 ms, the delayed-job promoter polling every 100 ms). Handlers do
//! nothing but count the job; the body, a `String`, carries its due time on the host clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::Context;
use async_trait::async_trait;
use chasquimq::{
    ConnectionTuning, Consumer, ConsumerConfig, HandlerError, Job, Producer, ProducerConfig,
};
use delayq_bench::clock;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;
use tokio_util::sync::CancellationToken;

use super::{DelayedRun, Footprint, Kind, Pids, System, Tally};
use crate::suite::{procs, redis_info};

/// The queue every run uses.
pub(crate) const QUEUE: &str = "bench";
/// The version pinned in crates/bench/Cargo.toml (`=`), for the report.
pub(crate) const VERSION: &str = "1.3.0";
/// Jobs per producer call of a fill, and calls in flight: as delayq's driver fills.
const FILL_BATCH: usize = 1000;
const FILL_TASKS: usize = 4;

/// The consumer settings of every run: ChasquiMQ's defaults, with `concurrency` handlers and
/// no events stream.
pub(crate) fn consumer_config(concurrency: usize) -> ConsumerConfig {
    ConsumerConfig {
        queue_name: QUEUE.into(),
        concurrency,
        events_enabled: false,
        connection: tuning(),
        ..ConsumerConfig::default()
    }
}

/// ChasquiMQ's connection defaults, but one reconnect attempt instead of endless ones. A
/// consumer's `run` leaves its Redis clients open in this process after it returns, and the
/// suite stops each redis-server when it is done with a system: endless reconnects would go
/// on in the background, against a port the next system's server may take. Nothing else
/// depends on it: no connection drops while a run measures.
fn tuning() -> ConnectionTuning {
    ConnectionTuning {
        reconnect_max_attempts: 1,
        ..ConnectionTuning::default()
    }
}

/// A ChasquiMQ producer on its own redis-server; consumers are started per run.
pub(crate) struct Chasquimq {
    redis: RedisServer,
    producer: Producer<String>,
    /// Jobs the last drain handled beyond its target (handlers still running when it
    /// stopped): the next fill pushes that many fewer, so the backlog stays what the suite
    /// counts.
    overdrawn: usize,
}

impl Chasquimq {
    /// Starts a redis-server and connects a producer.
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let redis = super::redis_server();
        let producer = Producer::connect(
            &redis.url(),
            ProducerConfig {
                queue_name: QUEUE.into(),
                connection: tuning(),
                ..ProducerConfig::default()
            },
        )
        .await
        .context("connecting ChasquiMQ's producer")?;
        Ok(Chasquimq {
            redis,
            producer,
            overdrawn: 0,
        })
    }

    /// Runs a consumer with `concurrency` handlers until `tally` reaches its target or `cap`
    /// after its start passed; returns how many jobs its handlers saw (at most a few
    /// batches more than the tally's target).
    async fn consume(
        url: String,
        concurrency: usize,
        tally: Arc<Tally>,
        cap: Duration,
    ) -> anyhow::Result<usize> {
        let consumer = Consumer::<String>::new(url, consumer_config(concurrency));
        let stop = CancellationToken::new();
        let seen = Arc::new(AtomicUsize::new(0));
        let handler = {
            let (tally, stop, seen) = (tally.clone(), stop.clone(), seen.clone());
            move |job: Job<String>| {
                tally.seen(job.payload.as_bytes());
                seen.fetch_add(1, Ordering::Relaxed);
                if tally.stop() {
                    stop.cancel();
                }
                async { Ok::<_, HandlerError>(chasquimq::Bytes::new()) }
            }
        };
        let mut run = tokio::spawn(consumer.run(handler, stop.clone()));
        // The handler stops the run at its target; the time cap ends a run that gets no
        // more jobs. A stopped consumer finishes the jobs it read and flushes their acks
        // before `run` returns.
        let deadline = tokio::time::Instant::from_std(tally.start() + cap);
        let early = tokio::select! {
            _ = stop.cancelled() => None,
            _ = tokio::time::sleep_until(deadline) => None,
            r = &mut run => Some(r),
        };
        stop.cancel();
        match early {
            Some(r) => r?.context("ChasquiMQ's consumer stopped on its own")?,
            None => run.await?.context("ChasquiMQ's consumer")?,
        }
        Ok(seen.load(Ordering::Relaxed))
    }

    /// Ends the `XREADGROUP … BLOCK` calls that stopped consumers left waiting in Redis.
    ///
    /// On shutdown ChasquiMQ's reader drops the future of its blocking read, but the read
    /// stays queued in Redis on a connection that outlives the consumer (the client's task
    /// keeps it open in this process), so the next job pushed would go to that dead reader
    /// and come back only after `claim_min_idle_ms` (30 s). A consumer process that exits
    /// closes the connection and ends the read. Here the read is answered as timed out
    /// (`CLIENT UNBLOCK`): killing the connection instead would make the client reconnect
    /// and send the read again.
    async fn end_orphan_reads(&self) -> anyhow::Result<()> {
        let mut conn = self.redis.connection().await;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut conn)
            .await
            .context("CLIENT LIST")?;
        for line in list.lines() {
            let field = |k: &str| line.split(' ').find_map(|f| f.strip_prefix(k));
            let blocked = field("flags=").is_some_and(|f| f.contains('b'));
            if blocked
                && field("cmd=") == Some("xreadgroup")
                && let Some(id) = field("id=")
            {
                let _: redis::Value = redis::cmd("CLIENT")
                    .arg("UNBLOCK")
                    .arg(id)
                    .query_async(&mut conn)
                    .await
                    .context("CLIENT UNBLOCK")?;
            }
        }
        Ok(())
    }

    /// Pushes `n` jobs, `FILL_BATCH` per producer call with `FILL_TASKS` calls in flight.
    async fn push(&self, n: usize, delays: Delays, size: usize) -> anyhow::Result<()> {
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..FILL_TASKS {
            let (producer, next) = (self.producer.clone(), next.clone());
            tasks.spawn(async move {
                loop {
                    let from = next.fetch_add(FILL_BATCH, Ordering::Relaxed);
                    if from >= n {
                        return anyhow::Ok(());
                    }
                    let count = FILL_BATCH.min(n - from);
                    match delays {
                        Delays::Ready => {
                            let due = clock::now_ms();
                            producer
                                .add_bulk((0..count).map(|_| body(due, size)).collect())
                                .await?;
                        }
                        Delays::Fixed(d) => {
                            let due = clock::now_ms() + d.as_millis() as u64;
                            producer
                                .add_in_bulk(d, (0..count).map(|_| body(due, size)).collect())
                                .await?;
                        }
                        Delays::Uniform(_) => add_at_each(&producer, count, delays, size).await?,
                    }
                }
            });
        }
        while let Some(r) = tasks.join_next().await {
            r??;
        }
        Ok(())
    }
}

/// A body of `size` bytes due at `due_ms` (ASCII, so a `String` holds it as it is).
fn body(due_ms: u64, size: usize) -> String {
    String::from_utf8_lossy(&clock::body(due_ms, size)).into_owned()
}

/// Pushes `count` jobs, each due after its own draw of `delays`, with one `add_at` per job,
/// all in flight at once (ChasquiMQ has no batch call for jobs with different due times).
async fn add_at_each(
    producer: &Producer<String>,
    count: usize,
    delays: Delays,
    size: usize,
) -> anyhow::Result<()> {
    let now = clock::now_ms();
    let dues: Vec<u64> = {
        let mut rng = rand::rng();
        (0..count)
            .map(|_| now + delays.draw(&mut rng).as_millis() as u64)
            .collect()
    };
    let mut calls = tokio::task::JoinSet::new();
    for due in dues {
        let producer = producer.clone();
        calls.spawn(async move {
            producer
                .add_at(UNIX_EPOCH + Duration::from_millis(due), body(due, size))
                .await
        });
    }
    while let Some(r) = calls.join_next().await {
        r?.context("ChasquiMQ add_at")?;
    }
    Ok(())
}

#[async_trait]
impl System for Chasquimq {
    fn kind(&self) -> Kind {
        Kind::Chasquimq
    }

    fn pids(&self) -> Pids {
        Pids {
            store: self.redis.pid().map(procs::Proc::One),
            queue: procs::own_pid(),
            client: None,
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        Some(&self.redis)
    }

    async fn fill(&mut self, n: usize, delays: Delays, body: usize) -> anyhow::Result<()> {
        let n = if delays == Delays::Ready {
            let skip = self.overdrawn.min(n);
            self.overdrawn -= skip;
            n - skip
        } else {
            n
        };
        self.end_orphan_reads().await?;
        self.push(n, delays, body).await
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        let tally = Tally::new(n, Instant::now(), cap);
        let seen = Self::consume(self.redis.url(), consumers, tally.clone(), cap).await?;
        let report = tally.drain();
        self.overdrawn += seen.saturating_sub(report.jobs);
        Ok(report)
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        let tally = Tally::new(
            spec.jobs,
            Instant::now() + Duration::from_millis(200),
            spec.cap,
        );
        let consumer = tokio::spawn(Self::consume(
            self.redis.url(),
            spec.consumers,
            tally.clone(),
            spec.cap,
        ));
        tokio::time::sleep_until(tally.start().into()).await;
        let mut pushed = 0;
        while pushed < spec.jobs && !tally.stop() {
            let n = spec.batch.min(spec.jobs - pushed);
            add_at_each(&self.producer, n, Delays::Uniform(spec.spread), spec.body).await?;
            pushed += n;
        }
        let push_elapsed = tally.start().elapsed();
        consumer.await??;
        Ok(tally.delayed(pushed, push_elapsed, false))
    }

    fn endpoint(&self) -> String {
        self.redis.url()
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        Ok(Footprint {
            memory: redis_info::used_memory(&self.redis).await?,
            disk: None,
        })
    }
}
