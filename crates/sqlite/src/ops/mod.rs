//! The write operations: one function per request kind, run by the writer thread on a
//! [`crate::tx::Tx`] inside its group transaction. They mirror the Redis engine's Lua
//! scripts (`crates/redis/lua/*.lua`) one for one, and keep their rule: every check that
//! can refuse a request runs before its first write.
//!
//! - `place`: the shared steps `place` and `fail` of `lib.lua`.
//! - `tick`: what time does (expired leases fail; jobs that fell due wake their waiters).
//! - `push`, `reserve` (and reserve by id), `lease` (ack, nack, release, touch, bury;
//!   release and bury with their options), `admin` (kick, reschedule, delete, purge,
//!   settings), `settle` (a worker's settlements before its reserve), `done` (the done jobs a
//!   topic's retention keeps), `schedules` (stored schedules; their reads run on a read
//!   connection), `numbers` (the engine-wide number sequence and the topic of each claimed
//!   range; its lookup runs on a read connection), `destinations` (the topics' push
//!   destinations; their reads run on a read connection).

pub(crate) mod admin;
pub(crate) mod destinations;
pub(crate) mod done;
pub(crate) mod lease;
pub(crate) mod numbers;
pub(crate) mod place;
pub(crate) mod push;
pub(crate) mod reserve;
pub(crate) mod schedules;
pub(crate) mod settle;
pub(crate) mod tick;

use delayq_core::Result;

use crate::error::db_err;
use crate::tx::Tx;

/// Runs one cached statement that changes rows; returns how many it changed.
pub(crate) fn exec(
    tx: &Tx<'_>,
    what: &str,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<usize> {
    tx.conn
        .prepare_cached(sql)
        .and_then(|mut s| s.execute(params))
        .map_err(|e| db_err(what, e))
}
