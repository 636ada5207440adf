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
//!
//! # How it works
//!
//! beanstalkd 1.12's text protocol over any `Engine` (issue 19): `delayq serve --beanstalk ADDR`
//! runs `delayq_beanstalk::serve` beside the HTTP server, on the same engine (`--beanstalk unix:<path>`:
//! `serve_unix` on a Unix domain socket, whose file `unix` owns: a stale one
//! replaced, removed at the end). `proto` is
//! sans-IO (bytes in, `Command`s or error replies out; replies and beanstalkd's YAML out),
//! reproducing beanstalkd's own parsing (224-byte line windows, prefix-matched command names,
//! the body read as `<bytes>` + 2, a too-big body discarded as it arrives); `tube` maps tube
//! names onto topic names (`+ / ; $ ( )` escaped as `:` and two hex digits, reversible);
//! `server` accepts connections up to a limit, one task each, and drains on shutdown (a
//! pipelined run of `put`s is one `Engine::push_batch`, `put.rs`); `shared` is what the
//! connections share (the engine, the options, the tubes' lines and counters; `counters`: the
//! server's statistics counters), below `session`, so that no module imports one above it;
//! `session` is one connection (used tube,
//! watched tubes, the leases it holds) and what each command does to the engine (`reserve.rs`:
//! the reserve family and `DEADLINE_SOON`, and over several tubes the most urgent job first;
//! `stats.rs`: the YAML statistics); the reserves (and the acks sent with them) of the
//! connections on one tube that ask at the same time share one `Engine::settle_and_reserve`
//! (`delayq_core::Coalescers`, which the HTTP server's reserves use too), since a beanstalkd
//! worker takes one job per reserve; a reserve on one tube that found nothing waits its turn in
//! the tube's `line` (a fair mutex per tube) before it waits on the engine, so the connection
//! that has waited longest gets the next job (an engine's waiters may race: on Redis a local
//! push and its wake-up signal each wake one); `numbers` gives jobs their numbers: claimed from the engine's shared
//! sequence (`Engine::claim_numbers`) in blocks per tube that double up to 65,536, and found
//! again by number with `Engine::number_topic` (the blocks this process claimed are known
//! locally), so `delete`, `peek`, `kick-job`, `stats-job` and `reserve-job` by id never scan.
//!
//! **Architecture Invariant:** the protocol layer holds no job state: a connection holds only
//! leases, and gives them back (`Engine::release`) when it closes; everything else is the
//! engine's, so any number of servers can share one Redis.
//!
//! **Architecture Invariant:** a job's delayq id is its number's decimal form, so a number names
//! one job for good; numbers are never reused (the sequence only grows, purges leave the claimed
//! ranges alone).
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
