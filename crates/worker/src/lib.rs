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
//!   [`put_schedule`], [`delete_schedule`]: in any number of processes at once, a tick reads
//!   them all and, at the engine's time, pushes what `JobSchedule::plan` says (the missed
//!   fires the policy keeps, then the next fire ahead of time as a delayed job, so the engine
//!   delivers it on time whether or not a scheduler runs then) and records the progress for
//!   the revision it planned from; it sleeps until the earliest fire pushed ahead has passed
//!   or `reload` (10 s) has elapsed, or until kicked.
//! - `sim`, `throughput_guard` (tests only): the throughput guard of issue 35. A simulated
//!   store (a round trip, then a single-threaded server with a cost per call and per job, as
//!   Redis) is drained in paused tokio time at C = 1, 10 and 50 and round trips of 0.5 and
//!   5 ms; the jobs per virtual second are held to committed floors. The worker's CPU costs
//!   nothing in virtual time, so the figures are the same on every run and machine, and fall
//!   only when the worker keeps fewer calls on their way or asks for fewer jobs a call.
//!
//! # How the runtime behaves
//!
//! **The loop.** Fetching is decoupled from concurrency. The fetch loop keeps a buffer of
//! leased jobs ahead of the handlers and hands them, in the engine's order, to free handler
//! slots (a semaphore of `concurrency` permits). Each delivery's supervisor is a future the
//! fetch loop drives itself (a `FuturesUnordered`). The handler's future is polled once in
//! place; only if it is not done by then does it move to a task of its own. So a quick handler
//! costs no hand-off between tasks, a slow one two (its task's start and its end). A
//! handler's slot is freed as soon as its handler ends, and the supervisor ends with it: its
//! outcome (ack, nack, bury) goes straight into the loop's outbox, no one waits for the answer
//! (it is logged and counted when it comes), and the loop sends it with its next call: `Engine::settle_and_reserve`, one round trip that settles finished leases and
//! reserves the next batch (up to 256 jobs). The main call is one of:
//!
//! - a **cycle** (settle and reserve, no wait) when the window has room: the buffer is empty,
//!   half the window is free, or outcomes are due. While a cycle is on its way, a second one
//!   goes **ahead** of it when the window has room for both (half the window free besides what
//!   the first asked for) and the last reserve found jobs: the engine's work on one overlaps
//!   the worker's on the other, so the drain is not one round trip after another. The two may
//!   reach the engine in either order, and come back in either order (on PostgreSQL each is
//!   answered on a connection of its own), so a reserve that comes back is parked until every
//!   reserve sent before it came back is in (only those can have been served before it; one
//!   sent after it came back was served after it), and the buffer puts jobs in the engine's
//!   order (a topic's lease tokens grow in the order its jobs are handed out): one handler
//!   runs jobs in the engine's order (`runtime_tests::one_handler_runs_jobs_in_order_when_an_answer_is_late`,
//!   against a fake engine whose answers come back late in turn). Reserving goes on while an
//!   answer is parked, so the engine always has the next cycle on its way: the throughput
//!   guard (`throughput_guard`, above) holds the worker to that;
//! - a **long-poll** (the configured `wait`, 30 s; no outcomes aboard) when the last reserve
//!   found nothing, so an idle worker waits in the engine instead of polling;
//! - a **flush** (settle only, `max` 0) when outcomes have waited 5 ms or reached 256 and no
//!   reserve is due: because the buffer is full, or beside an open long-poll.
//!
//! **The window** is how many jobs the worker holds leased (buffered or running). It aims at
//! the work of the next 100 ms at the handlers' observed speed (`concurrency` divided by the
//! running average of handler durations), never below `concurrency` and never above
//! `prefetch` (default 1000). It starts at `concurrency`, doubles up to that aim each time a
//! reserve comes back full, and falls to what a reserve returned (at least `concurrency`) when
//! one comes back short: a worker on a short queue asks only for what it can run, and leaves
//! the rest to the other workers. At-most-once workers hold at most `concurrency` (a buffered
//! job is lost if the worker dies).
//!
//! **Lease left.** Lease ends are local estimates on the early side: `sent + ttr` for a
//! reserve without wait (the engine leased the job after the call was sent), the reply's
//! arrival less a margin for a long-poll. A buffered job whose estimate has less than
//! `min_lease_left` (1/2) of its ttr left is touched before its handler starts when a slot is
//! free, and given back (released, in the next call) when none is; one whose estimate passed
//! is left alone. A buffer that had to give jobs back holds fewer from then on.
//!
//! **One delivery.** The supervisor (polled by the fetch loop) starts the handler's run, which
//! decodes the body, calls the handler and reads its error, under `catch_unwind`: polled once
//! in place, then in a handler task if not done; then it waits for whichever comes first: the
//! handler's end, the end of the lease, or the hard stop. `Ok` acks; an error nacks (with the
//! job's back-off, or the `JobError`'s delay) or buries (`permanent`, or a body that does not
//! decode); a panic (caught in place, or the task's `JoinError::is_panic`) nacks with "handler
//! panicked: ...". The engine decides retry or dead.
//! The fetch loop retries an outcome while the engine is `Unavailable` and the lease lasts;
//! while it is, the loop starts no call and pauses with one doubling back-off (100 ms to 5 s).
//!
//! **Renewal.** While the handler runs, the supervisor touches the lease every
//! `renew_fraction` (1/3) of the ttr, counted from the lease's start (so at once for a job
//! that waited that long in the buffer). When a touch would take the lease more than
//! `max_extension` (1 h) past its first end, renewal stops and the job's token fires
//! (`RenewalLimit`); a touch answering `LeaseLost`, or none answering before the lease ends,
//! fires it too (`LeaseLost`) and that delivery is never acked or nacked. When the lease end
//! comes, a handler still running is aborted. A `max_extension` of zero is no renewal: no
//! touch while the handler runs, so it has its whole lease (`Job::lease_end`), and the token
//! fires only as the lease ends and the handler is aborted (the push forwarder runs so:
//! `runtime_tests::without_renewal_a_handler_has_its_whole_lease_untouched_and_is_acked`).
//!
//! **Shutdown.** When the shutdown future completes, the fetch loop stops handing out jobs,
//! abandons an open long-poll (`Engine::reserve` is cancel-safe: a reserve dropped while
//! its round trip is on the way still ends, in a task of its own, and releases what it leased,
//! `delayq_core::detach_lease`; a cycle on its way is let come back) and releases every buffered job at once. At the same time the drain
//! waits up to `grace` (20 s) for the running deliveries, which keep renewing and settle as
//! usual, then fires the hard stop: each handler's token fires (`Shutdown`); one that returns
//! `Ok` within 1 s is acked, the others are aborted and their jobs released (ready at once,
//! attempt not counted). Released jobs, buffered or running, are listed in the `Report`. The
//! fetch loop drives the supervisors and sends their outcomes until the last one is done.
//!
//! **Architecture Invariant:** handlers ≤ `concurrency`; leased ≤ window ≤ `prefetch`. A slot
//! is taken before a handler starts and freed only once it has ended; a reserve asks for at
//! most the window less the leases the engine still holds for the worker when it reserves
//! (buffered, running, and finished with an outcome not yet settled: a long-poll, which carries
//! no settlements, counts the whole outbox; a cycle, which settles the outbox first, does not)
//! and less those asked for by the reserve already on its way; the engine takes a worker's
//! calls in order, so settlements sent earlier are applied first. The window is never above
//! `prefetch` (after a short reserve it may fall below what is held; nothing more is asked
//! until it is not).
//!
//! **Architecture Invariant:** no handler starts on a job with less than `min_lease_left` of
//! its lease left, and none runs past its lease (at-least-once): when the worker's early
//! estimate of the lease end passes, the handler is aborted and the delivery is left to the
//! engine. The token fires first (at the renewal limit, with the rest of the lease to finish;
//! without renewal, as the lease ends).
//! A handler that finished in its first (in-place) poll has nothing left to abort. A handler
//! that blocks its thread cannot be aborted; it is logged and counted. One that blocks in its
//! first poll also holds up the fetch loop until it returns (then the next 1000 handlers start
//! in tasks of their own): blocking work belongs in `spawn_blocking`.
//!
//! **Architecture Invariant:** after a lease was lost the worker writes nothing for that
//! delivery: no ack, no nack, no release; a buffered job whose lease estimate passed is not
//! released either.
//!
//! **Architecture Invariant:** all user code (decoding, the handler, its error's `Display`)
//! runs in the handler's run, under `catch_unwind` when polled in place and in the handler
//! task after that, so a panic is one failed attempt and never stops a supervisor or the loop
//! (which drives the supervisors).
//!
//! **Architecture Invariant:** no loop of the worker spins: a reserve without wait follows only
//! a reserve that brought jobs (after one that brought none, the next long-polls); a call
//! without a reserve carries at least one outcome; every timer the fetch loop sleeps on lies
//! in the future; errors pause the loop, and so does an engine that answers a long-poll empty
//! before its wait is over; the renewer sleeps until its next touch; the configuration refuses
//! a `wait` under 100 ms and a `renew_fraction` outside 0.05 to 0.75.
//!
//! **Architecture Invariant:** at-most-once (`DeliveryMode::AtMostOnce`) is the only mode
//! that can lose a job, and it says so: no lease, no renewal, no ack; failures are logged and
//! counted as `dropped`.
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
