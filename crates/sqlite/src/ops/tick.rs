//! What time makes due in one topic, as `tick` in the Redis engine's `lua/lib.lua`: expired
//! leases fail with "lease expired" (retry after the back-off, or dead), due delayed jobs
//! become ready. The writer runs it when the timer index says a topic has something due,
//! and every reserve runs it on its topics first.

use delayq_core::Result;
use rusqlite::{OptionalExtension, params};

use super::exec;
use super::place::fail;
use crate::error::db_err;
use crate::row::{META_COLS, Meta, meta};
use crate::shared::Effect;
use crate::timers::Kind;
use crate::tx::Tx;

/// Applies what is due in topic `tid` at `now`, at most `limit` expired leases and `limit`
/// due jobs, then records the topic's exact next lease deadline and due time (which is
/// `now` or earlier when the limit left work behind, so the writer comes back at once).
pub(crate) fn tick_topic(tx: &mut Tx<'_>, tid: i64, now: u64, limit: usize) -> Result<()> {
    let expired: Vec<Meta> = tx
        .conn
        .prepare_cached(&format!(
            "SELECT {META_COLS} FROM jobs WHERE tid = ?1 AND state = 3 AND deadline <= ?2 \
             ORDER BY deadline LIMIT ?3"
        ))
        .and_then(|mut s| {
            s.query_map(params![tid, now, limit], |r| meta(r, 0))?
                .collect()
        })
        .map_err(|e| db_err("finding expired leases", e))?;
    for job in &expired {
        fail(tx, tid, job, now, None, "lease expired")?;
    }
    if !expired.is_empty() {
        exec(
            tx,
            "counting expired leases",
            "UPDATE topics SET expired = expired + ?2 WHERE tid = ?1",
            params![tid, expired.len() as i64],
        )?;
    }
    let promoted = exec(
        tx,
        "moving due jobs to ready",
        "UPDATE jobs SET state = 2 WHERE jid IN (SELECT jid FROM jobs \
         WHERE tid = ?1 AND state = 1 AND ready_at <= ?2 ORDER BY ready_at LIMIT ?3)",
        params![tid, now, limit],
    )?;
    if promoted > 0 {
        tx.effect(Effect::Ready(tid, promoted));
    }
    let next_lease = min_of(
        tx,
        "SELECT min(deadline) FROM jobs WHERE tid = ?1 AND state = 3",
        tid,
    )?;
    let next_due = min_of(
        tx,
        "SELECT min(ready_at) FROM jobs WHERE tid = ?1 AND state = 1",
        tid,
    )?;
    tx.effect(Effect::Set(tid, Kind::Lease, next_lease));
    tx.effect(Effect::Set(tid, Kind::Due, next_due));
    Ok(())
}

fn min_of(tx: &Tx<'_>, sql: &str, tid: i64) -> Result<Option<u64>> {
    tx.conn
        .prepare_cached(sql)
        .and_then(|mut s| {
            s.query_row([tid], |r| r.get::<_, Option<u64>>(0))
                .optional()
        })
        .map(Option::flatten)
        .map_err(|e| db_err("reading the next due time", e))
}
