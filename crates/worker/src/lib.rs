//! The delayq worker runtime: what a Rust service uses to consume jobs safely, over any
//! [`delayq_core::Engine`].
//!
//! A [`Worker`] runs one [`Handler`] (any `async fn(Job<P>) -> Result<(), E>`) for the jobs
//! of one or more topics:
//!
//! - **a concurrency limit**, and **fetching decoupled from it**: the worker reserves in
//!   batches into a local buffer ahead of its handlers and sends the handlers' outcomes
//!   (acks, nacks, buries) with its next reserve, one round trip for both. How many jobs it
//!   holds adapts (about 100 ms of work at the handlers' speed, at least the concurrency, at
//!   most [`WorkerConfig::prefetch`]) and falls back when reserves come back short, so
//!   workers sharing a short queue all get work. A buffered job starts only with at least
//!   [`WorkerConfig::min_lease_left`] of its lease left (renewed first otherwise);
//! - **long-polling** reserves when there is nothing to do, paused with a capped back-off
//!   while the engine is down;
//! - **typed payloads** ([`Json<T>`], raw [`bytes::Bytes`], `String`); a body that does not
//!   decode sends the job to dead with a reason that says why;
//! - **outcomes**: `Ok` acks; an error nacks (retry with the job's back-off, or after the
//!   delay a [`JobError`] asks for) or buries ([`JobError::permanent`]); a panic is a failed
//!   attempt and the worker carries on;
//! - **lease renewal** for long handlers, up to a limit, with a cancellation token in every
//!   [`Job`] that fires when the lease is lost, the limit is reached or shutdown ends;
//! - **graceful shutdown** from a future: stop reserving, give the buffered jobs back at
//!   once, wait a grace period for running handlers, then release what is still held so
//!   another worker gets it at once; [`Worker::run`] returns a [`Report`].
//!
//! ```no_run
//! use std::time::Duration;
//! use delayq_core::{Engine, NewJob, Topic};
//! use delayq_redis::{RedisConfig, RedisEngine};
//! use delayq_worker::{Job, JobError, Json, Payload, ResultExt, Worker, WorkerConfig};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Refund { packet: String, cents: u64 }
//!
//! async fn refund(job: Job<Json<Refund>>) -> Result<(), JobError> {
//!     let r = job.payload();
//!     if r.cents == 0 {
//!         return Err(JobError::permanent("nothing to refund"));
//!     }
//!     // A plain error (here an I/O error) retries with the job's back-off.
//!     record_refund(&r.packet, r.cents).await?;
//!     // Or choose the delay: a rate limit says when to come back.
//!     call_gateway(&r.packet).await.retry_after(Duration::from_secs(30))?;
//!     Ok(())
//! }
//! # async fn record_refund(_: &str, _: u64) -> Result<(), std::io::Error> { Ok(()) }
//! # async fn call_gateway(_: &str) -> Result<(), std::io::Error> { Ok(()) }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = RedisEngine::connect(RedisConfig::new("redis://127.0.0.1:6379")).await?;
//! let topic = Topic::new("red-packets.refund")?;
//!
//! // A producer: the same payload type encodes the body.
//! let body = Json(Refund { packet: "p-7".into(), cents: 500 }).encode()?;
//! engine.push(NewJob::new(topic.clone(), body).with_delay(Duration::from_secs(24 * 3600))).await?;
//!
//! // A worker, until Ctrl-C.
//! let config = WorkerConfig::default().with_concurrency(32);
//! let worker = Worker::with_config(engine, [topic], config, refund)?;
//! let report = worker.run(async { tokio::signal::ctrl_c().await.ok(); }).await;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - `worker`: [`Worker`]: construction, `run` (fetch until shutdown, then drain).
//! - `config`: [`WorkerConfig`].
//! - `shared`: what the fetch loop, the supervisors and the shutdown share.
//! - `codec`: [`Payload`], [`Json`], [`DecodeError`], [`EncodeError`].
//! - `handler`: [`Handler`], [`JobError`], [`FailureKind`], [`ResultExt`].
//! - `context`: [`Job`], what a handler receives, and [`CancelReason`].
//! - `fetch`: the fetch loop: reserves into the buffer, hands jobs to free handler slots,
//!   sends outcomes with the next reserve (`Engine::settle_and_reserve`).
//! - `window`: how many jobs to hold (the adaptive window).
//! - `buffer`: the leased jobs waiting for a handler, with their lease estimates.
//! - `outbox`: outcomes waiting for the next call, coalesced by size and time.
//! - `delivery`: one delivery's supervisor: renewal first if needed, the handler's run, renewal,
//!   settlement.
//! - `run`: one handler's run: polled once in place, then in a task of its own if not done,
//!   panics caught either way.
//! - `renew`: lease renewal of a running handler.
//! - `settle`: ack, nack, bury and release of one delivery, and their log events.
//! - `shutdown`: the grace period, then cancel and release.
//! - `report`: [`Report`] and its counters.
//! - `scheduler`: [`Scheduler`], which runs the schedules an engine keeps (cron jobs), and
//!   [`put_schedule`], [`delete_schedule`].
#![deny(missing_docs)]

mod buffer;
mod codec;
mod config;
mod context;
mod delivery;
#[cfg(test)]
mod fake;
mod fetch;
mod handler;
mod outbox;
mod renew;
mod report;
mod run;
#[cfg(test)]
mod runtime_tests;
mod scheduler;
mod settle;
mod shared;
mod shutdown;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod throughput_guard;
mod window;
mod worker;

pub use codec::{DecodeError, EncodeError, Json, Payload};
pub use config::{
    DEFAULT_PREFETCH, MAX_CONCURRENCY, MAX_PREFETCH, MIN_LEASE_LEFT_RANGE, MIN_WAIT,
    RENEW_FRACTION_RANGE, WorkerConfig,
};
pub use context::{CancelReason, Job};
pub use delayq_core::DeliveryMode;
pub use handler::{FailureKind, Handler, JobError, ResultExt};
pub use report::Report;
pub use scheduler::{Scheduler, SchedulerConfig, Tick, delete_schedule, next_fire, put_schedule};
pub use tokio_util::sync::CancellationToken;
pub use worker::Worker;
