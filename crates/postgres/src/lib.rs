//! The PostgreSQL engine of delayq: the [`delayq_core::Engine`] contract on the database
//! most teams already run, with pushes that can join the caller's own transaction
//! ([`PostgresEngine::push_in`]).
//!
//! # Layout
//!
//! - `engine`: [`PostgresEngine`]: checks the caller's input and dispatches to `ops`; owns
//!   the tasks beside the pool.
//! - `ops`: one module per group of operations (push, reserve, lease, admin, topics,
//!   numbers, schedules, destinations), each owning its calls of the library, the decoding
//!   of their rows and what their statuses mean; they take a connection, the reserves the
//!   state the engine's clones share (`ops::Ops`).
//! - `status`: the one enum of what the library's functions answer as a status column or
//!   raise as a refusal (`SQLSTATE DQ0xx`).
//! - `library` with `migrations/*.sql` (the tables, versioned in `delayq.migrations`) and
//!   `sql/*.sql` (the functions, one file per group, each with its header): installed at
//!   connect; a newer schema is refused.
//! - `waiters`: the `LISTEN delayq` connection and the reservers waiting per topic;
//!   `sweeper`: the task that runs `delayq.tick` at the earliest lease deadline or expiry.
//! - `connect` (TLS, the pool), `config` ([`PostgresConfig`]), `row` (job rows and codes),
//!   `error` (driver errors onto [`delayq_core::Error`]).
#![deny(missing_docs)]

mod config;
mod connect;
mod engine;
mod error;
mod library;
mod ops;
mod row;
mod status;
mod sweeper;
mod vacuum;
mod waiters;

pub use config::PostgresConfig;
pub use engine::PostgresEngine;
