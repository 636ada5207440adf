//! The Redis engine of delayq.
//!
//! # Layout
//!
//! - `engine`: [`RedisEngine`], the [`delayq_core::Engine`] implementation: checks the
//!   caller's input and dispatches to `ops`.
//! - `ops`: one module per group of operations (`push`, `reserve`, `lease`, `admin`), each
//!   owning its functions' arguments, reply decoding and status-to-error mapping.
//! - `conn`: the client (URL, TLS), connecting, the version check, loading the functions
//!   library and running calls alone or pipelined (loading it again when Redis lost it); on a
//!   cluster, calls over several slots answered slot by slot within the slot timeout, a
//!   primary that does not answer skipped for all of its slots at once.
//! - `library` and `lua/*.lua`: the Redis Functions library, one function per atomic
//!   operation (one `.lua` file each) over the helpers of `lua/lib.lua`, assembled at build
//!   time; every state change happens inside one function call, on the Redis clock.
//! - `keys`: every key name, `<prefix>:{<topic>}:<name>`, so one call touches one slot.
//! - `wait`: the waker task: per-topic local timers and one blocking BZPOPMIN on a dedicated
//!   connection, so waiting reservers neither poll nor miss a due time.
//! - `clock`: the mapping from Redis `TIME` to the local monotonic clock.
//! - `codec`: status codes and job replies, mirrored from `lua/lib.lua`.
//! - `error`: redis-rs errors onto [`delayq_core::Error`].
//! - `config`: [`RedisConfig`].
#![deny(missing_docs)]

mod clock;
mod codec;
mod config;
mod conn;
mod engine;
mod error;
mod keys;
mod library;
mod ops;
mod wait;

pub use config::RedisConfig;
pub use engine::RedisEngine;
