//! The embedded engine of delayq: the [`delayq_core::Engine`] contract on SQLite, durable on
//! one machine with nothing else installed, or in memory for tests and in-process use.
//!
//! # Layout
//!
//! - `engine`: [`SqliteEngine`], the `Engine` implementation: argument checks, then each
//!   write sent to the writer thread and each read run on a read connection.
//! - `writer`: the writer thread, the engine's only writing connection and its timer: group
//!   commit of many requests per transaction, answers after the commit.
//! - `checkpoint`: the checkpointer thread, which copies the log into the database file
//!   off the writer's path.
//! - `ops/*`: one function per write, mirroring the Redis engine's Lua scripts; among them
//!   `ops/numbers`, the engine-wide number sequence (the beanstalkd protocol's job ids) and
//!   the topic each claimed range names (`migrations/0012_numbers.sql`); `ops/destinations`,
//!   the topics' push destinations (`migrations/0013_destinations.sql`).
//! - `read`: get, list (with key cursors, `delayq_core::ListKey`), stats and topics; `waiting`: the
//!   waiting jobs of a topic by due time, band by priority band.
//! - `tx`: what a write sees inside the group transaction (topic ids, the per-topic counter).
//! - `shared`, `registry`, `timers`, `waiters`: the in-memory state shared by the writer and
//!   the handles: topic ids, the timer index (next due time and lease deadline per topic),
//!   and the reservers waiting per topic.
//! - `open`, `schema` and `migrations/*.sql`: the data directory and its lock, WAL and
//!   `synchronous`, schema migrations, recovery at open; `readers`: the read connections.
//! - `clock`: the engine clock (wall clock at open + monotonic time).
//! - `row`: the `jobs` row and its decoding; `settings`: a topic's settings in its
//!   `topics` row; `error`: SQLite and I/O errors onto
//!   [`delayq_core::Error`]; `diagnose`: names a read-only file system when a write fails;
//!   `config`: [`SqliteConfig`].
#![deny(missing_docs)]

mod checkpoint;
mod clock;
mod config;
mod diagnose;
mod engine;
mod error;
mod open;
mod ops;
#[cfg(test)]
mod plans;
mod read;
mod readers;
mod registry;
mod row;
mod schema;
mod settings;
mod shared;
mod timers;
mod tx;
mod waiters;
mod waiting;
mod writer;

pub use config::{SqliteConfig, Storage, Synchronous};
pub use engine::SqliteEngine;
pub use open::{DB_FILE, LOCK_FILE};
