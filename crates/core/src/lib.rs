//! The delayq contract: the job model, its validation, the typed [`Error`] and the [`Engine`]
//! trait that the Redis, the embedded and the PostgreSQL engines implement.
//!
//! # Layout
//!
//! - `ids`: [`Topic`], [`JobId`], [`LeaseToken`], validated on construction.
//! - `time`: [`Timestamp`] (engine-clock milliseconds) and [`Schedule`] (delay or absolute).
//! - `backoff`: [`Backoff`], the retry policy and the formula both engines use.
//! - `cron`: [`JobSchedule`], a recurring job (cron expression, time zone, misfire policy),
//!   its fire times and what a scheduler pushes at a tick ([`Plan`]).
//! - `limits`: the ranges of the contract and [`Limits`].
//! - `list_key`: [`ListKey`], the sort key a listing's cursor holds, its encoding, and the
//!   page a listing ends with (the embedded and the PostgreSQL engines' cursors, once).
//! - `job`: [`NewJob`], [`Job`], [`JobState`], [`Delivery`], [`Lease`], [`Pushed`].
//! - `topic`: [`TopicConfig`], a topic's settings (job defaults, body limit, [`Retention`]
//!   of done jobs).
//! - `engine`: the [`Engine`] trait (the job contract every engine implements), the
//!   capabilities [`Schedules`], [`Destinations`] and [`Numbers`], [`Store`] (all of them),
//!   and their request and answer types.
//! - `error`: [`Error`].
//! - `acks`: [`ack_batcher`], acks of concurrent callers coalesced into `ack_batch` calls
//!   (used by the worker runtime and the HTTP server).
//! - `coalesce`: [`Coalescers`], the first looks of concurrent reserves of the same topics
//!   served by one `settle_and_reserve` (used by the HTTP server and the beanstalkd port).
//! - `detach`: [`detach_lease`], a reserve's round trip in a task of its own, so that a
//!   caller dropped mid-call strands no leased job (used by both engines).
//!
//! This crate does no I/O: no network, no files, no clock decisions (engines own the clock);
//! its only runtime pieces are the in-process channels and tasks of `acks`, `coalesce` and
//! `detach`.
#![deny(missing_docs)]

mod acks;
mod backoff;
mod coalesce;
mod cron;
mod detach;
mod engine;
mod error;
mod ids;
mod job;
pub mod limits;
mod list_key;
mod time;
mod topic;

pub use acks::{Acker, Acks, ack_batcher, run_acks};
pub use backoff::Backoff;
pub use coalesce::{Coalescers, Served};
pub use cron::{
    JobSchedule, JobTemplate, MAX_JITTER, MAX_MISFIRE_LIMIT, MAX_SCHEDULE_NAME_LEN, MISFIRE_GRACE,
    Misfire, Plan, ScheduleName, ScheduleParts,
};
pub use detach::detach_lease;
pub use engine::{
    Bury, Cursor, DeliveryMode, Destinations, Engine, MAX_CLAIM, MAX_DESTINATION_DOC, Nack,
    Numbers, Page, Readiness, Release, Reserve, Schedules, Settle, Settled, SettledAndReserved,
    Store, StoredDestination, StoredSchedule, TopicStats, check_ack_batch, check_claim,
    check_destination_doc, check_push_batch, check_settle_and_reserve,
};
pub use error::{BoxError, Error, Result};
pub use ids::{JobId, LeaseToken, MAX_ID_LEN, MAX_TOPIC_LEN, Topic};
pub use job::{
    Delivery, EXPIRED, Expiry, Job, JobState, Lease, NackOutcome, NewJob, OnConflict, OnExpire,
    Pushed, check_expiry_value, check_max_attempts, check_max_lateness, expiry_before_due,
};
pub use limits::Limits;
pub use list_key::ListKey;
pub use time::{Schedule, Timestamp, duration_ms};
pub use topic::{MAX_PARTITIONS, Retention, TopicConfig, partition_of};

pub use async_trait::async_trait;
pub use bytes::Bytes;
