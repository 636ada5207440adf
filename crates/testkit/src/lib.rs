//! The test harness of delayq: servers owned by the test, and the engine conformance suite.
//!
//! # Layout
//!
//! - `redis_server`: [`RedisServer`], a `redis-server` on a free loopback port in a temporary
//!   directory, killed on drop, its log printed when a test panics; optionally with TLS and
//!   an ACL user ([`AclUser`]).
//! - `redis_cluster`: [`RedisCluster`], 3 primaries and 3 replicas formed with
//!   `redis-cli --cluster create`, each node a cluster-mode [`RedisServer`], optionally all
//!   TLS and with an ACL user ([`ClusterOptions`]); helpers kill a primary or move a slot and
//!   wait until the cluster has settled. [`key_slot`] computes a key's hash slot as Redis
//!   does.
//! - `harness`: [`Harness`], what an engine provides to be checked by the suite.
//! - `conformance`: the cases, one async function per clause of the contract, and the
//!   [`conformance_suite!`] macro that makes one `#[tokio::test]` of each.
#![deny(missing_docs)]

pub mod conformance;
mod harness;
mod redis_cluster;
mod redis_server;

pub use harness::Harness;
pub use redis_cluster::{
    ClusterNode, ClusterOptions, Failover, REDIS_CLI_ENV, RedisCluster, SLOTS, key_slot,
};
pub use redis_server::{
    ACL_RULES, AclUser, Persistence, REDIS_SERVER_ENV, RedisOptions, RedisServer,
};
