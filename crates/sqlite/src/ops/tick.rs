//! What time does to one topic, as `tick` and `expire_due` in the Redis engine's
//! `lua/lib.lua`: expired leases fail with "lease expired" (retry after the back-off, or
//! dead), waiting jobs whose expiry passed go dead ("expired") or are dropped, and jobs that
//! fell due wake their waiters. A job falling due is not a write: a waiting job is ready once
//! its due time has passed, and reserve selects by due time. The writer runs these when the
//! timer index says a topic has something due; reserve expires its topics' leases first.

use delayq_core::{EXPIRED, OnExpire, Result};
use rusqlite::{OptionalExtension, params};

use super::exec;
use super::place::fail;
use crate::error::db_err;
use crate::row::{DEAD, META_COLS, Meta, meta, on_expire_of};
use crate::shared::Effect;
use crate::timers::Kind;
use crate::tx::Tx;
use crate::waiting;

/// Fails at most `limit` leases of topic `tid` expired at `now`, then records the topic's
/// exact next lease deadline (which is `now` or earlier when the limit left expired leases
/// behind, so the writer comes back at once).
pub(crate) fn expire_leases(tx: &mut Tx<'_>, tid: i64, now: u64, limit: usize) -> Result<()> {
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
    let next = min_of(
        tx,
        "SELECT min(deadline) FROM jobs WHERE tid = ?1 AND state = 3",
        params![tid],
    )?;
    tx.effect(Effect::Set(tid, Kind::Lease, next));
    Ok(())
}

/// The earliest expiry among the waiting jobs of topic `?1` (NULL: none), from
/// `jobs_expiring`.
pub(crate) const EARLIEST_EXPIRY: &str =
    "SELECT min(expires_at) FROM jobs WHERE tid = ?1 AND state = 1 AND expires_at > 0";

/// Expires at most `limit` waiting jobs of topic `tid` whose expiry is at or before `now`
/// (the earliest first): each goes dead with the reason [`EXPIRED`] and its attempts as
/// they were, or is deleted when it says so; the topic counts them. Then records the
/// topic's exact next expiry (`now` or earlier when the limit left some behind, so the
/// writer comes back at once).
pub(crate) fn expire_jobs(tx: &mut Tx<'_>, tid: i64, now: u64, limit: usize) -> Result<()> {
    let expired: Vec<(i64, i64)> = tx
        .conn
        .prepare_cached(
            "SELECT jid, on_expire FROM jobs WHERE tid = ?1 AND state = 1 AND expires_at > 0 \
             AND expires_at <= ?2 ORDER BY expires_at LIMIT ?3",
        )
        .and_then(|mut s| {
            s.query_map(params![tid, now, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(|e| db_err("finding expired jobs", e))?;
    for &(jid, on_expire) in &expired {
        expire_one(tx, jid, on_expire, now)?;
    }
    count_expired(tx, tid, expired.len())?;
    let next = min_of(tx, EARLIEST_EXPIRY, params![tid])?;
    tx.effect(Effect::Set(tid, Kind::Expiry, next));
    Ok(())
}

/// A waiting job (row `jid`) whose expiry passed: dead at `now` with the reason
/// [`EXPIRED`], or deleted when its `on_expire` code says drop. The caller counts it
/// ([`count_expired`]).
pub(crate) fn expire_one(tx: &mut Tx<'_>, jid: i64, on_expire: i64, now: u64) -> Result<()> {
    if on_expire_of(on_expire) == OnExpire::Drop {
        exec(
            tx,
            "dropping an expired job",
            "DELETE FROM jobs WHERE jid = ?1",
            [jid],
        )?;
        return Ok(());
    }
    exec(
        tx,
        "sending an expired job to dead",
        "UPDATE jobs SET state = ?1, token = 0, deadline = ?2, last_error = ?3 WHERE jid = ?4",
        params![DEAD, now, EXPIRED, jid],
    )?;
    Ok(())
}

/// Adds `n` to topic `tid`'s count of expired jobs.
pub(crate) fn count_expired(tx: &mut Tx<'_>, tid: i64, n: usize) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    exec(
        tx,
        "counting expired jobs",
        "UPDATE topics SET expired_jobs = expired_jobs + ?2 WHERE tid = ?1",
        params![tid, n as i64],
    )?;
    Ok(())
}

/// Jobs of topic `tid` fell due between `since` (the timer entry, never later than the
/// earliest of them) and `now`: wakes as many waiters as there are such jobs (at most
/// `limit`), and records the topic's exact next due time. Reads only.
pub(crate) fn fall_due(
    tx: &mut Tx<'_>,
    tid: i64,
    since: u64,
    now: u64,
    limit: usize,
) -> Result<()> {
    let read = |e| db_err("reading due jobs", e);
    let due = waiting::count_between(tx.conn, tid, since, now, limit as u64).map_err(read)?;
    if due > 0 {
        tx.effect(Effect::Ready(tid, due as usize));
    }
    let next = waiting::next_after(tx.conn, tid, now).map_err(read)?;
    tx.effect(Effect::Set(tid, Kind::Due, next));
    Ok(())
}

fn min_of(tx: &Tx<'_>, sql: &str, p: impl rusqlite::Params) -> Result<Option<u64>> {
    tx.conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row(p, |r| r.get::<_, Option<u64>>(0)).optional())
        .map(Option::flatten)
        .map_err(|e| db_err("reading the next due time", e))
}
