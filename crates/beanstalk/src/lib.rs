//! beanstalkd's text protocol (version 1.12) on top of any [`delayq_core::Engine`], so that
//! existing beanstalkd clients in every language work unchanged.
//!
//! # Layout
//!
//! - `proto`: the sans-IO parser (bytes in, [`proto::Command`]s or error replies out) and
//!   the replies ([`proto::Reply`]), with beanstalkd's limits.
//! - `tube`: tube names and their mapping onto topic names.
//! - `server`: the listener ([`serve`] on TCP, [`serve_unix`] on a Unix domain socket): a
//!   connection limit, one task per connection, graceful stop.
//! - `shared`: what every connection of one server shares (the engine, the counters, the
//!   settings: [`Options`]), and which tubes exist.
//! - `counters`: this server's counters, for `stats` (commands, jobs, connections) and per
//!   tube (use, watch, wait).
//! - `unix`: [`UnixSocket`], the socket file of `serve_unix` (a stale one replaced, removed
//!   at the end).
//! - `session`: one connection's state (used and watched tubes, the jobs it holds) and what
//!   each command does to the engine; `put` puts (a pipelined run in one engine call),
//!   `reserve` the reserve family (`DEADLINE_SOON`), `stats`
//!   the YAML statistics.
//!   The reserves (and the acks before them) of the connections that ask at the same time
//!   on one tube share one engine call (`delayq_core::Coalescers`).
//! - `line`: the reserves that wait on one tube, served in the order they began to wait.
//! - `numbers`: job numbers (claimed from the engine's shared sequence in blocks) and the
//!   topics they name.
#![deny(missing_docs)]

mod counters;
mod line;
mod numbers;
pub mod proto;
mod put;
mod reserve;
mod server;
mod session;
mod shared;
mod stats;
pub mod tube;
#[cfg(unix)]
mod unix;

pub use server::serve;
#[cfg(unix)]
pub use server::serve_unix;
pub use shared::Options;
#[cfg(unix)]
pub use unix::{MAX_SOCKET_PATH, UnixSocket};
