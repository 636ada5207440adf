//! delayq: a distributed delay queue. A producer says "run this job at time T"; a worker
//! receives it when it is due, within milliseconds; nothing is lost or handed out twice on
//! the way (at-least-once with fencing: a second delivery happens only after a lease expired
//! or a nack).
//!
//! One [`Queue`] handle pushes jobs and starts [`Worker`]s, over any engine: Redis
//! (`redis://`, many processes, no leader), PostgreSQL (`postgres://`, many processes, a push
//! can join your own transaction: [`postgres::PostgresEngine::push_in`]) or the embedded
//! SQLite engine (`sqlite:///path/to/dir`, one process, durable; `memory://` for tests).
//!
//! ```
//! use std::time::Duration;
//! use delayq::{Job, JobError, Json, Queue};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct CancelOrder {
//!     order: u64,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = Queue::open("memory://").await?;
//!
//! // Producer: cancel order 42 if it is still unpaid in 30 minutes (here: 50 ms).
//! queue
//!     .push_json("orders.cancel", CancelOrder { order: 42 })
//!     .id("order-42")
//!     .delay(Duration::from_millis(50))
//!     .await?;
//!
//! // Worker: handle due jobs; Ok acks, an error retries with back-off.
//! let (done_tx, done_rx) = tokio::sync::oneshot::channel();
//! let done = std::sync::Mutex::new(Some(done_tx));
//! let worker = queue.worker(&["orders.cancel"], move |job: Job<Json<CancelOrder>>| {
//!     let tx = done.lock().unwrap().take();
//!     async move {
//!         println!("cancelling order {} ({} ms late)", job.payload().order, job.lateness().as_millis());
//!         if let Some(tx) = tx {
//!             let _ = tx.send(job.payload().order);
//!         }
//!         Ok::<(), JobError>(())
//!     }
//! })?;
//! // Run until the job was handled, then shut down gracefully.
//! let report = worker.run(async { let _ = done_rx.await; }).await;
//! assert_eq!(report.acked, 1);
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - `queue`: [`Queue`] (the producer API and the door to workers) and [`Push`].
//! - `open`: [`open`] and [`OpenOptions`]: an engine from a URL.
//! - Re-exported crates: [`core`] (the contract: [`Engine`], [`NewJob`], [`Error`] ...),
//!   [`worker`] (the worker runtime), [`redis`], [`postgres`] and [`sqlite`] (the engines).
#![deny(missing_docs)]

mod open;
mod queue;

pub use open::{Location, OpenOptions, open, open_with};
pub use queue::{Push, Queue};

pub use delayq_core as core;
pub use delayq_postgres as postgres;
pub use delayq_redis as redis;
pub use delayq_sqlite as sqlite;
pub use delayq_worker as worker;

pub use delayq_core::{
    Backoff, Delivery, DeliveryMode, Destinations, Engine, Error, JobId, JobSchedule, JobState,
    JobTemplate, Lease, Limits, Misfire, NewJob, Numbers, Pushed, Reserve, Result, Retention,
    Schedule, ScheduleName, Schedules, Store, StoredSchedule, Timestamp, Topic, TopicConfig,
};
pub use delayq_sqlite::Synchronous;
pub use delayq_worker::{
    CancelReason, FailureKind, Handler, Job, JobError, Json, Payload, Report, ResultExt, Scheduler,
    SchedulerConfig, Worker, WorkerConfig, delete_schedule, put_schedule,
};

/// The Rust programs of the README and of the pages under docs/ (the library's program and
/// worker, a schedule, a push in a PostgreSQL transaction), compiled by `cargo test --doc`
/// so that they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// docs/rust.md: the smallest complete program, the worker's settings, a handler that stops.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/rust.md")]
struct RustDocDoctests;

/// docs/schedules.md: a schedule and its `Scheduler`, from Rust.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/schedules.md")]
struct SchedulesDocDoctests;

/// docs/engines.md: a push inside the application's own PostgreSQL transaction.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/engines.md")]
struct EnginesDocDoctests;
