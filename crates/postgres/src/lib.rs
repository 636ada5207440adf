//! The PostgreSQL engine of delayq: the [`delayq_core::Engine`] contract on the database
//! most teams already run, with pushes that can join the caller's own transaction
//! ([`PostgresEngine::push_in`]).
//!
//! # Layout
//!
//! - `engine`: [`PostgresEngine`]: argument checks, then one call of a library function per
//!   operation on a pooled connection; reserves that wait.
//! - `library` with `migrations/*.sql` (the tables, versioned in `delayq.migrations`) and
//!   `sql/*.sql` (the functions, one file per group, each with its header): installed at
//!   connect; a newer schema is refused.
//! - `waiters`: the `LISTEN delayq` connection and the reservers waiting per topic;
//!   `sweeper`: the task that runs `delayq.tick` at the earliest lease deadline or expiry.
//! - `admin`: get, delete and the operations on whole topics; `topics`: a topic's settings
//!   and pause; `store`: schedules, push destinations and the number sequence.
//! - `connect` (TLS, the pool), `config` ([`PostgresConfig`]), `row` (job rows and codes),
//!   `error` (driver errors onto [`delayq_core::Error`]).
#![deny(missing_docs)]

mod admin;
mod config;
mod connect;
mod engine;
mod error;
mod library;
mod row;
mod store;
mod sweeper;
mod topics;
mod vacuum;
mod waiters;

pub use config::PostgresConfig;
pub use engine::PostgresEngine;
