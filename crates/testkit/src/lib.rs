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
//!
//! # How the harnesses and the suite work
//!
//! `RedisServer` starts a `redis-server` on a free loopback port in its own temporary
//! directory (`--save ""` unless a persistence mode is asked for), waits until it answers, kills
//! it on drop and prints its log when a test panics; a missing binary fails with what to install
//! (`DELAYQ_REDIS_SERVER` overrides the binary). With `RedisOptions::cluster` it is a cluster
//! node, its cluster bus on a second free port (`--cluster-port`, Redis ≥ 7.0). `RedisOptions::tls`
//! adds a TLS port with a certificate signed by a CA generated for the test (a cluster node with
//! TLS has no plain port and speaks TLS on its bus and to its primary too); `RedisOptions::acl`
//! adds an ACL user holding `ACL_RULES`, what delayq needs, and gives the default user a password
//! that only the harness uses (`redis_server/access.rs`: the certificates, the user, and how the
//! harness itself gets in).
//!
//! `RedisCluster` (`redis_cluster.rs`) is 3 primaries and 3 replicas (`start_with_replicas(0)`:
//! the 3 primaries alone, for the benchmark's W8), each a cluster-mode
//! `RedisServer`, formed with `redis-cli --cluster create` (`redis-cli` beside the server binary
//! or on the `PATH`; `DELAYQ_REDIS_CLI` overrides it). `ClusterOptions` may make every node
//! TLS-only (one CA for all nodes, `redis-cli --tls`), give it an ACL user (whose credentials
//! the cluster's URL then carries), or set `cluster-require-full-coverage no` (`full_coverage:
//! false`; Redis's default `yes` otherwise); replicas log in to their primary with `masterauth`. `start` returns once the cluster has
//! settled: every node says `cluster_state:ok` with all 16384 slots, all agree on roles and
//! slots, every replica's link names the primary the cluster says and has synced, and every
//! replica acknowledged a write made through its primary (`SET`, `DEL`, then `WAIT` on that
//! connection). The last step matters: after a diskless sync Redis marks a replica online but
//! streams to it only from its next `REPLCONF ACK` (sent once a second), so for up to a second
//! `master_link_status:up` hides a replica that receives nothing, and a primary killed then
//! takes its writes with it; and a `WAIT` on a connection that wrote nothing answers at once,
//! whatever the replicas hold. It answers the seeds, a `redis+cluster://` URL, the
//! primaries and replicas with ids and slots, `node_for_key` and connections. Its fault helpers
//! are async and wait (bounded) until the cluster has settled again, so test traffic keeps
//! flowing: `kill_primary` (SIGKILL, then the replica's takeover), `restart`, `migrate_slot`
//! (`SETSLOT` IMPORTING/MIGRATING, `MIGRATE … KEYS` in batches, `SETSLOT NODE`); `kill_node`
//! alone returns at once (a primary without replica: the cluster goes down, which the test
//! waits for itself); `wait_replicated` waits until every replica holds what its primary took so far (for tests
//! that check what survives a failover without the engine's wait-replicas option).
//! `RedisCluster::shared` is one cluster for the tests of a binary that run at the same time
//! (the worker suite and the HTTP API tests on a cluster: starting one takes seconds, which
//! would dominate their short cases), counted so the last test to drop it kills it; those tests
//! keep apart by key prefix and never change the topology.
//! `redis_cluster/slot.rs`: `key_slot`, the hash slot as `CLUSTER KEYSLOT` computes it;
//! `redis_cluster/nodes.rs`: the `CLUSTER NODES` parser; `redis_cluster/settle.rs`: what
//! "settled" means.
//!
//! `Beanstalkd`, `NatsServer` and `RabbitMqServer` are the other real servers tests start on
//! free loopback ports in temporary directories (the beanstalkd protocol's reference, the push
//! destinations' JetStream and broker); `child.rs` is what every harness shares: the binary (an
//! environment variable overrides each), the message naming the Debian package when it is
//! missing, retries on another free port, waiting until up and killing. `RabbitMqServer` runs
//! Debian's `/usr/lib/rabbitmq/bin/rabbitmq-server` (not the `/usr/sbin` wrapper, which switches
//! to the machine's `rabbitmq` user and files) with its own `epmd` on a free port, its own node
//! name, cookie (`HOME`), database, logs and empty config and plugin files, distribution bound
//! to loopback, in a process group killed whole; the machine's broker is never touched.
//! `PostgresServer` (issue 21) makes a cluster with `initdb` (trust on loopback, `--no-sync`)
//! in a temporary directory and runs `postgres` on a free port with its socket there; as root
//! (CI) the directory goes to the `postgres` system user and both run through `runuser`, since
//! PostgreSQL refuses root. `kill` is a SIGKILL of the whole process group (postmaster and
//! backends) and removes the pid file the postmaster left once it is dead (under `runuser` it is
//! nobody's child here and stays a zombie for seconds); `restart` recovers the cluster from its
//! WAL on the same port (`recovery_init_sync_method=syncfs`: one flush, not one per file).
//! `PostgresServer::start_secure` lets TCP clients in only over TLS (a certificate for
//! `localhost` signed by a generated CA, `tls.rs`, shared with the Redis harnesses) and with a
//! `scram-sha-256` password; the harness itself uses the Unix socket.
//!
//! `crash` is the kill -9 test the durable engines share (embedded and PostgreSQL
//! `tests/crash.rs`): the test binary runs itself as a child that pushes, reserves and acks,
//! printing each write only once the engine acknowledged it; the parent kills it with SIGKILL at
//! a random moment (and whatever else dies with it: the PostgreSQL test kills the postmaster in
//! every other cycle), reopens and checks that every acknowledged push is there unless an ack of
//! it was sent, that no acknowledged ack comes back and that delayed jobs keep their due time.
//!
//! `Harness` is what an engine gives the suite (open, open with limits, restart, byte-exact
//! snapshot). `conformance` holds the cases, one async function per clause (`conformance/settle.rs`:
//! settle-and-reserve; `topics.rs`: the topic list, purge and the paused topics it lists; `config.rs`: a topic's settings;
//! `retention.rs`: done jobs), and `conformance_suite!` makes a `#[tokio::test]` of each.
//! `Partitioned` wraps a harness so that every topic a case makes (`new_topic`) gets 8
//! partitions while empty (issue 18): each engine's `tests/conformance.rs` (and the cluster's)
//! runs the suite a second time through it, in a `partitioned` module; the cases on order check
//! it per partition (`in_order`), the contract's promise on a topic of several.
//!
//! `model/` is the contract as a pure value, checked against every engine with random
//! sequences (issue 17). `Model` keeps each topic's jobs, counter and expired-lease count in
//! `BTreeMap`s of the real `delayq_core` types and applies every operation at a given engine
//! time. `Op` and its proptest strategies generate sequences in which three logical clients
//! hold leases on two topics with four ids, so pushes collide, tokens go stale and jobs land in
//! the wrong state: push, push_batch, get, delete, reschedule, reserve, settle_and_reserve, ack,
//! nack, release, touch, bury, kick, purge and stats. `Runner` runs a sequence against an engine
//! and reads `Engine::now()` before and after each call; it keeps every model state that
//! explains the engine's answer at some time in that window (each job of a batch, each
//! settlement and each topic's reserve pass may take its own time, and a multi-topic reserve may
//! start with any topic); anything else fails the case. When an engine notices that a lease ran
//! out is also free (a timer, or the topic's next read): before each call the runner waits out
//! every lease due within 150 ms and reads the job, accepting the expiry at any time from the
//! deadline to that read; a call slow enough that a lease runs out during it is rejected as
//! inconclusive, not failed. `check` drives proptest, with shrinking and a regression file per
//! crate (`tests/*.proptest-regressions`, replayed first); `REGRESSIONS` replays by name the
//! shrunk sequences of the disagreements found (`due_job_not_yet_moved_is_ready`: the Redis
//! engine called a job due but not yet promoted `delayed`). Every answer is compared (the ok
//! value, the error variant, the state and operation in `WrongState`, the reserve order,
//! attempts), and after each sequence every job, every state's listing, the stats and the topic
//! list; lease tokens only by the contract's order (each token an engine hands out must be larger
//! than every one it handed out before in that topic; the model has no partitions), the model
//! then keeping the engine's token, so every later operation with that lease, stale-token
//! refusals included, is compared exactly.
//! Not modelled (the conformance suite covers them): `OnConflict` replace and debounce,
//! expiries, retention, pause, topic settings, `bury_waiting`, `push_new`, schedules. The tests:
//! `tests/model.rs` of each engine, 70 sequences of up to 60 operations by default, and
//! `crates/redis/tests/cluster_model.rs`, 20 on a cluster; `DELAYQ_MODEL_CASES` and
//! `DELAYQ_MODEL_OPS` lengthen them.
//!
//! **Architecture Invariant:** the model does no I/O and reads no clock; its jobs use a fixed
//! back-off without jitter, so every retry time is exact.
//!
//! **Architecture Invariant:** no test connects to a Redis it did not start, and none skips when
//! a part is missing.
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
