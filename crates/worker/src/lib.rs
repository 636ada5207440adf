//! The delayq worker runtime: what a Rust service uses to consume jobs safely, over any
//! [`delayq_core::Engine`].
//!
//! A [`Worker`] runs one [`Handler`] (any `async fn(Job<P>) -> Result<(), E>`) for the jobs
//! of one or more topics:
//!
//! - **a concurrency limit**, and a prefetch that never exceeds it: slots are taken before a
//!   reserve asks for jobs, and a reserve asks for no more jobs than free slots;
//! - **long-polling** reserves, paused with a capped back-off while the engine is down;
//! - **typed payloads** ([`Json<T>`], raw [`bytes::Bytes`], `String`); a body that does not
//!   decode sends the job to dead with a reason that says why;
//! - **outcomes**: `Ok` acks; an error nacks (retry with the job's back-off, or after the
//!   delay a [`JobError`] asks for) or buries ([`JobError::permanent`]); a panic is a failed
//!   attempt and the worker carries on;
//! - **lease renewal** for long handlers, up to a limit, with a cancellation token in every
//!   [`Job`] that fires when the lease is lost, the limit is reached or shutdown ends;
//! - **graceful shutdown** from a future: stop reserving, wait a grace period, then release
//!   what is still held so another worker gets it at once; [`Worker::run`] returns a
//!   [`Report`].
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
//! - `worker`: [`Worker`]: construction, `run` (reserve until shutdown, then drain).
//! - `config`: [`WorkerConfig`].
//! - `codec`: [`Payload`], [`Json`], [`DecodeError`], [`EncodeError`].
//! - `handler`: [`Handler`], [`JobError`], [`FailureKind`], [`ResultExt`].
//! - `context`: [`Job`], what a handler receives, and [`CancelReason`].
//! - `reserve`: the reserve loop (slots first, then a long-poll for at most that many jobs).
//! - `delivery`: one delivery's supervisor: handler task, renewal, settlement.
//! - `renew`: lease renewal of a running handler.
//! - `acker`: the test of acks batching (the worker acks through `delayq_core::ack_batcher`).
//! - `settle`: ack, nack, bury and release, retried while the engine is unavailable.
//! - `shutdown`: the grace period, then cancel and release.
//! - `report`: [`Report`] and its counters.
#![deny(missing_docs)]

mod acker;
mod codec;
mod config;
mod context;
mod delivery;
#[cfg(test)]
mod fake;
mod handler;
mod renew;
mod report;
mod reserve;
#[cfg(test)]
mod runtime_tests;
mod settle;
mod shutdown;
mod worker;

pub use codec::{DecodeError, EncodeError, Json, Payload};
pub use config::{MAX_CONCURRENCY, MIN_WAIT, RENEW_FRACTION_RANGE, WorkerConfig};
pub use context::{CancelReason, Job};
pub use delayq_core::DeliveryMode;
pub use handler::{FailureKind, Handler, JobError, ResultExt};
pub use report::Report;
pub use tokio_util::sync::CancellationToken;
pub use worker::Worker;
