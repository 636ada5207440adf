//! The Redis engine of delayq.
//!
//! # Layout
//!
//! - `engine`: [`RedisEngine`], the [`delayq_core::Engine`] implementation: argument checks,
//!   script calls, one-round-trip batches, reply decoding.
//! - `scripts` and `lua/*.lua`: one Lua script per atomic operation, each prefixed with
//!   `lua/lib.lua`; every state change happens inside one script, on the Redis clock.
//! - `keys`: every key name, `<prefix>:{<topic>}:<name>`, so one script touches one slot.
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
mod engine;
mod error;
mod keys;
mod scripts;
mod wait;

pub use config::RedisConfig;
pub use engine::RedisEngine;
