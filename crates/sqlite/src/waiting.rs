//! The waiting jobs of a topic, as `jobs_waiting` (tid, priority, ready_at, seq) holds them:
//! one band per priority, each ordered by due time then push order, so the jobs of a band
//! due at some time are one index range. Every question about waiting jobs by due time
//! (is one due, when is the next, how many) walks the topic's bands: one seek per band.
//! A topic whose jobs share one priority (the common case) has one band.
//!
//! One index on waiting jobs, not a second one ordered by due time alone: a job pushed
//! with a random due time lands on a random page of each index ordered by it, and that
//! page is written to the log by the commit, so each such index costs a page write per
//! pushed job.

use rusqlite::{Connection, OptionalExtension, params};

/// The head of the first band of topic `tid` with a priority above `after` (-1: the
/// first band): (priority, its earliest due time).
pub(crate) fn next_band(
    conn: &Connection,
    tid: i64,
    after: i64,
) -> rusqlite::Result<Option<(i64, u64)>> {
    conn.prepare_cached(
        "SELECT priority, ready_at FROM jobs WHERE tid = ?1 AND state = 1 AND priority > ?2 \
         ORDER BY priority, ready_at LIMIT 1",
    )?
    .query_row(params![tid, after], |r| Ok((r.get(0)?, r.get(1)?)))
    .optional()
}

/// Every band of topic `tid`: (priority, earliest due time), lowest priority first.
pub(crate) fn bands(conn: &Connection, tid: i64) -> rusqlite::Result<Vec<(i64, u64)>> {
    let mut out = Vec::new();
    let mut after = -1;
    while let Some(band) = next_band(conn, tid, after)? {
        after = band.0;
        out.push(band);
    }
    Ok(out)
}

/// True when topic `tid` has a waiting job due at `now`: a band whose head is due.
pub(crate) fn any_due(conn: &Connection, tid: i64, now: u64) -> rusqlite::Result<bool> {
    let mut after = -1;
    while let Some((priority, head)) = next_band(conn, tid, after)? {
        if head <= now {
            return Ok(true);
        }
        after = priority;
    }
    Ok(false)
}

/// The earliest due time among the waiting jobs of topic `tid`.
pub(crate) fn earliest(conn: &Connection, tid: i64) -> rusqlite::Result<Option<u64>> {
    Ok(bands(conn, tid)?.into_iter().map(|(_, head)| head).min())
}

/// The earliest due time after `now` among the waiting jobs of topic `tid`.
pub(crate) fn next_after(conn: &Connection, tid: i64, now: u64) -> rusqlite::Result<Option<u64>> {
    let mut next: Option<u64> = None;
    let mut first = conn.prepare_cached(
        "SELECT ready_at FROM jobs WHERE tid = ?1 AND state = 1 AND priority = ?2 \
         AND ready_at > ?3 ORDER BY ready_at LIMIT 1",
    )?;
    for (priority, head) in bands(conn, tid)? {
        let due = if head > now {
            Some(head)
        } else {
            first
                .query_row(params![tid, priority, now], |r| r.get(0))
                .optional()?
        };
        next = match (next, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(next)
}

/// How many waiting jobs of topic `tid` are due in `[from, to]`, counting at most `limit`.
pub(crate) fn count_between(
    conn: &Connection,
    tid: i64,
    from: u64,
    to: u64,
    limit: u64,
) -> rusqlite::Result<u64> {
    let mut count = conn.prepare_cached(
        "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE tid = ?1 AND state = 1 \
         AND priority = ?2 AND ready_at >= ?3 AND ready_at <= ?4 LIMIT ?5)",
    )?;
    let mut total = 0;
    for (priority, head) in bands(conn, tid)? {
        if head > to || total >= limit {
            continue;
        }
        total += count.query_row(params![tid, priority, from, to, limit - total], |r| {
            r.get::<_, u64>(0)
        })?;
    }
    Ok(total)
}
