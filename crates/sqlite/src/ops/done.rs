//! Done jobs, as `drop_acked` and `trim_done` in the Redis engine's `lua/lib.lua`: an ack in
//! a topic with a retention keeps its job, in state done, and the topic's done jobs are kept
//! within the retention's bounds. `topics.done` counts them, so that keeping the count bound
//! never counts rows; every write that adds or removes a done job keeps it true.

use delayq_core::{Lease, Result, Retention, duration_ms};
use rusqlite::{OptionalExtension, params};

use super::exec;
use crate::error::db_err;
use crate::tx::Tx;

/// The most done jobs that outlived their age an ack removes: reads never show such a job
/// (they check its age), so their removal only has to keep pace with the acks.
const DONE_TRIM: i64 = 1000;

/// The oldest ack time a job may have to be still kept at `now` under `keep`: it is kept
/// while its ack is later than this.
pub(crate) fn kept_after(now: u64, keep: &Retention) -> u64 {
    now.saturating_sub(duration_ms(keep.max_age))
}

/// Acks `lease` (a job of topic `tid`, `token` its lease token) into done at `now`, then
/// trims the topic's done jobs to `keep`. One statement checks the lease and marks the row,
/// as `lease::Acks::ack`'s delete does. Answers whether the lease was live (false: nothing
/// changed).
pub(crate) fn retire(
    tx: &mut Tx<'_>,
    (tid, token): (i64, i64),
    lease: &Lease,
    now: u64,
    keep: &Retention,
) -> Result<bool> {
    let n = exec(
        tx,
        "acking a job",
        "UPDATE jobs SET state = 5, token = 0, deadline = ?4 WHERE tid = ?1 AND id = ?2 \
         AND state = 3 AND token = ?3 AND deadline > ?4",
        params![tid, lease.id.as_str(), token, now],
    )?;
    if n == 0 {
        return Ok(false);
    }
    trim(tx, tid, now, Some(keep), 1, DONE_TRIM)?;
    Ok(true)
}

/// Brings the done jobs of topic `tid` within `keep` at `now` (`None`: removes them all):
/// at most `limit` (-1: every one) of those that outlived its age, then the oldest over its
/// count. `added` is how many done jobs the caller just made, not yet counted.
pub(crate) fn trim(
    tx: &mut Tx<'_>,
    tid: i64,
    now: u64,
    keep: Option<&Retention>,
    added: i64,
    limit: i64,
) -> Result<()> {
    let Some(keep) = keep else {
        exec(
            tx,
            "removing done jobs",
            "DELETE FROM jobs WHERE tid = ?1 AND state = 5",
            [tid],
        )?;
        return set_count(tx, tid, 0);
    };
    let aged = exec(
        tx,
        "removing expired done jobs",
        "DELETE FROM jobs WHERE jid IN (SELECT jid FROM jobs WHERE tid = ?1 AND state = 5 \
         AND deadline <= ?2 ORDER BY deadline, id LIMIT ?3)",
        params![tid, kept_after(now, keep), limit],
    )? as i64;
    let counted: i64 = tx
        .conn
        .prepare_cached("SELECT done FROM topics WHERE tid = ?1")
        .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
        .map_err(|e| db_err("counting done jobs", e))?;
    let mut done = counted + added - aged;
    let over = done - i64::from(keep.max_jobs);
    if over > 0 {
        done -= exec(
            tx,
            "removing the oldest done jobs",
            "DELETE FROM jobs WHERE jid IN (SELECT jid FROM jobs WHERE tid = ?1 AND state = 5 \
             ORDER BY deadline, id LIMIT ?2)",
            params![tid, over],
        )? as i64;
    }
    if done != counted {
        set_count(tx, tid, done)?;
    }
    Ok(())
}

/// Removes the done job `id` of topic `tid`, when there is one (a push of its id, a delete).
/// Answers the time of its ack when there was.
pub(crate) fn forget(tx: &mut Tx<'_>, tid: i64, id: &str) -> Result<Option<u64>> {
    let acked: Option<i64> = tx
        .conn
        .prepare_cached(
            "DELETE FROM jobs WHERE tid = ?1 AND id = ?2 AND state = 5 RETURNING deadline",
        )
        .and_then(|mut s| s.query_row(params![tid, id], |r| r.get(0)).optional())
        .map_err(|e| db_err("removing a done job", e))?;
    let Some(acked) = acked else {
        return Ok(None);
    };
    exec(
        tx,
        "counting done jobs",
        "UPDATE topics SET done = done - 1 WHERE tid = ?1",
        [tid],
    )?;
    Ok(Some(u64::try_from(acked).unwrap_or(0)))
}

fn set_count(tx: &Tx<'_>, tid: i64, done: i64) -> Result<()> {
    exec(
        tx,
        "counting done jobs",
        "UPDATE topics SET done = ?2 WHERE tid = ?1",
        params![tid, done],
    )?;
    Ok(())
}
