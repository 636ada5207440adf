//! beanstalkd's text protocol (version 1.12) on top of any [`delayq_core::Engine`], so that
//! existing beanstalkd clients in every language work unchanged.
//!
//! # Layout
//!
//! - `proto`: the sans-IO parser (bytes in, [`proto::Command`]s or error replies out) and
//!   the replies ([`proto::Reply`]), with beanstalkd's limits.
//! - `tube`: tube names and their mapping onto topic names.
//! - `server`: the listener ([`serve`], [`Options`]): a connection limit, one task per
//!   connection, graceful stop.
//! - `session`: one connection's state (used and watched tubes, the jobs it holds) and what
//!   each command does to the engine; `put` puts (a pipelined run in one engine call),
//!   `reserve` the reserve family (`DEADLINE_SOON`), `stats`
//!   the YAML statistics.
//! - `coalesce`: one engine call for the reserves (and the acks before them) of the
//!   connections that ask at the same time on one tube.
//! - `numbers`: job numbers (claimed from the engine's shared sequence in blocks) and the
//!   topics they name.
#![deny(missing_docs)]

mod coalesce;
mod numbers;
pub mod proto;
mod put;
mod reserve;
mod server;
mod session;
mod stats;
pub mod tube;

pub use server::{Options, serve};
