//! The test harness of delayq: servers owned by the test, and the engine conformance suite.
//!
//! # Layout
//!
//! - `beanstalkd`: [`Beanstalkd`], a real `beanstalkd` on a free loopback port, in memory,
//!   killed on drop: the reference for the beanstalkd protocol's differential tests.
//! - `nats_server`: [`NatsServer`], a real `nats-server` with JetStream on a free loopback
//!   port, its store in a temporary directory: the push delivery tests' JetStream.
//! - `postgres_server`: [`PostgresServer`], a real PostgreSQL cluster made by `initdb` in a
//!   temporary directory, on a free loopback port (as the `postgres` user when root): the
//!   PostgreSQL engine's database (issue 21).
//! - `rabbitmq_server`: [`RabbitMqServer`], a real RabbitMQ node on free loopback ports with
//!   its own `epmd`, node name and files in a temporary directory: the push delivery tests'
//!   broker.
//! - `child`: what the harnesses share about their processes (missing binaries, free
//!   ports, waiting until up, killing).
//! - `redis_server`: [`RedisServer`], a `redis-server` on a free loopback port in a temporary
//!   directory, killed on drop, its log printed when a test panics; optionally with TLS and
//!   an ACL user ([`AclUser`]).
//! - `redis_cluster`: [`RedisCluster`], 3 primaries and 3 replicas formed with
//!   `redis-cli --cluster create`, each node a cluster-mode [`RedisServer`], optionally all
//!   TLS and with an ACL user ([`ClusterOptions`]); helpers kill a primary or move a slot and
//!   wait until the cluster has settled, or kill a node and return at once. [`key_slot`] computes a key's hash slot as Redis
//!   does.
//! - `stopped`: [`Stopped`], a process SIGSTOPped (a hung server) until the guard is dropped.
//! - `tls`: the CA and server certificate generated for a test server that speaks TLS.
//! - `harness`: [`Harness`], what an engine provides to be checked by the suite.
//! - `conformance`: the cases, one async function per clause of the contract, and the
//!   [`conformance_suite!`] macro that makes one `#[tokio::test]` of each.
//! - `model`: the contract as a pure [`model::Model`], random operation sequences from
//!   several logical clients, and the runner that compares an engine with the model
//!   ([`model::check`]).
//! - [`fuzz_cases`]: how many cases each fuzzed decoder runs.
//! - [`fencing`]: what the lost-write fencing tests share (a lease taken, the check on the
//!   next one).
//! - [`crash`]: the kill -9 crash test of the durable engines: the child's workload, the
//!   cycles that kill it (and whatever else dies with it), the check on a reopened engine.
#![deny(missing_docs)]

mod beanstalkd;
mod child;
pub mod conformance;
pub mod crash;
pub mod fencing;
mod harness;
pub mod model;
mod nats_server;
mod postgres_server;
mod rabbitmq_server;
mod redis_cluster;
mod redis_server;
mod stopped;
mod tls;

pub use beanstalkd::{BEANSTALKD_ENV, Beanstalkd, BeanstalkdOptions};
pub use harness::{Harness, Partitioned};
pub use nats_server::{NATS_SERVER_ENV, NatsServer};
pub use postgres_server::{POSTGRES_BIN_ENV, POSTGRES_PASSWORD, PostgresServer, postgres_bin_dir};
pub use rabbitmq_server::{RABBITMQ_SERVER_ENV, RabbitMqServer};
pub use redis_cluster::{
    ClusterNode, ClusterOptions, Failover, REDIS_CLI_ENV, RedisCluster, SLOTS, key_slot,
};
pub use redis_server::{
    ACL_RULES, AclUser, Persistence, REDIS_SERVER_ENV, RedisOptions, RedisServer, commands_run,
};
pub use stopped::Stopped;

/// The cases each property of the fuzzed decoders runs (issue 17): `DELAYQ_FUZZ_CASES` when
/// set (a longer run), else `default` (what CI runs, within its time budget).
pub fn fuzz_cases(default: u32) -> u32 {
    match std::env::var("DELAYQ_FUZZ_CASES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("DELAYQ_FUZZ_CASES={v:?} is not a number of cases")),
        Err(_) => default,
    }
}
