//! The Redis engine of delayq.
//!
//! # Layout
//!
//! - `engine`: [`RedisEngine`], the [`delayq_core::Engine`] implementation: argument checks,
//!   script calls, one-round-trip batches, reply decoding.
//! - `library` and `lua/*.lua`: the Redis Functions library, one function per atomic
//!   operation (one `.lua` file each) over the helpers of `lua/lib.lua`, assembled at build
//!   time; every state change happens inside one function call, on the Redis clock.
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
mod library;
mod wait;

pub use config::RedisConfig;
pub use engine::RedisEngine;
