//! The reads: get, list, stats and topics, on any connection (a reader's, or the writer's
//! in memory mode), each in one read transaction so it sees one committed state. A waiting
//! job is reported ready or delayed by its due time against the engine's now; a done job
//! only while the topic's retention (`keep`, from the registry) still keeps it.

use std::time::Duration;

use delayq_core::{
    Job, JobId, JobState, ListKey, Page, Result, Retention, Timestamp, Topic, TopicStats,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::db_err;
use crate::ops::done::kept_after;
use crate::row::{DEAD, DONE, JOB_COLS, RESERVED, RawJob, job};
use crate::waiting;

fn tid(conn: &Connection, topic: &Topic) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT tid FROM topics WHERE name = ?1")
        .and_then(|mut s| s.query_row([topic.as_str()], |r| r.get(0)).optional())
        .map_err(|e| db_err("looking up a topic", e))
}

fn read_tx(conn: &Connection) -> Result<rusqlite::Transaction<'_>> {
    conn.unchecked_transaction()
        .map_err(|e| db_err("starting a read", e))
}

/// One job in its state at `now`, or `None` (a done job that `keep` no longer keeps too).
pub(crate) fn get(
    conn: &Connection,
    topic: &Topic,
    id: &JobId,
    now: u64,
    keep: Option<Retention>,
) -> Result<Option<Job>> {
    let tx = read_tx(conn)?;
    let Some(tid) = tid(&tx, topic)? else {
        return Ok(None);
    };
    let raw = tx
        .prepare_cached(&format!(
            "SELECT {JOB_COLS} FROM jobs WHERE tid = ?1 AND id = ?2"
        ))
        .and_then(|mut s| {
            s.query_row(params![tid, id.as_str()], |r| job(r, 0))
                .optional()
        })
        .map_err(|e| db_err("reading a job", e))?;
    raw.filter(|r| r.state != DONE || keep.is_some_and(|k| r.deadline > kept_after(now, &k)))
        .map(|r| r.into_stored_job(topic, now))
        .transpose()
}

/// One page of the jobs in `state` at `now`, after `after`, in the state's order (done: only
/// those `keep` keeps).
pub(crate) fn list(
    conn: &Connection,
    topic: &Topic,
    (state, keep): (JobState, Option<Retention>),
    limit: usize,
    after: ListKey,
    now: u64,
) -> Result<Page> {
    let tx = read_tx(conn)?;
    let empty = Page {
        jobs: Vec::new(),
        next: None,
    };
    let Some(tid) = tid(&tx, topic)? else {
        return Ok(empty);
    };
    let after = match (state, keep, after) {
        (JobState::Done, None, _) => return Ok(empty),
        // Done means kept: start after the jobs that outlived the age as well as after the
        // cursor. (deadline, id) > (t, "") is deadline > t, ids being non-empty.
        (JobState::Done, Some(k), ListKey::TimeId(t, _)) if t <= kept_after(now, &k) => {
            ListKey::TimeId(kept_after(now, &k) + 1, String::new())
        }
        (_, _, after) => after,
    };
    let fetch = limit + 1;
    let rows: Vec<RawJob> = match (&after, state) {
        (ListKey::Ready(p, due, seq), _) => list_ready(&tx, tid, (*p, *due, *seq), fetch, now),
        (ListKey::TimeId(t, id), JobState::Delayed) => {
            // Delayed means waiting and not yet due: start after now as well as after the
            // cursor. (ready_at, id) > (now + 1, "") is ready_at > now, ids being non-empty.
            let (t, id) = if *t <= now {
                (now + 1, "")
            } else {
                (*t, id.as_str())
            };
            list_delayed(&tx, tid, (t, id), fetch)
        }
        (ListKey::TimeId(t, id), _) => {
            // The state is a literal in the text so that the planner uses the state's own
            // partial index, which holds this order.
            let st = match state {
                JobState::Reserved => RESERVED,
                JobState::Done => DONE,
                _ => DEAD,
            };
            tx.prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = {st} \
                 AND (deadline, id) > (?2, ?3) ORDER BY deadline, id LIMIT ?4"
            ))
            .and_then(|mut s| {
                s.query_map(params![tid, t, id, fetch], |r| job(r, 0))?
                    .collect()
            })
        }
    }
    .map_err(|e| db_err("listing jobs", e))?;
    let keyed = rows.into_iter().map(|raw| {
        let key = match state {
            JobState::Ready => ListKey::Ready(raw.priority, raw.ready_at, raw.seq),
            JobState::Delayed => ListKey::TimeId(raw.ready_at, raw.id.clone()),
            _ => ListKey::TimeId(raw.deadline, raw.id.clone()),
        };
        (key, raw)
    });
    ListKey::page(state, limit, keyed, |raw| raw.into_job(topic, state))
}

/// Up to `fetch` waiting jobs after `(due, id)` in that order: the first `fetch` of each
/// priority band after the key, merged.
fn list_delayed(
    tx: &Connection,
    tid: i64,
    (t, id): (u64, &str),
    fetch: usize,
) -> rusqlite::Result<Vec<RawJob>> {
    let mut band = tx.prepare_cached(&format!(
        "SELECT {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = 1 AND priority = ?2 \
         AND ready_at >= ?3 AND (ready_at, id) > (?3, ?4) ORDER BY ready_at, id LIMIT ?5"
    ))?;
    let mut out: Vec<RawJob> = Vec::new();
    for (priority, _) in waiting::bands(tx, tid)? {
        let rows = band
            .query_map(params![tid, priority, t, id, fetch], |r| job(r, 0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        out.extend(rows);
    }
    out.sort_by(|a, b| (a.ready_at, &a.id).cmp(&(b.ready_at, &b.id)));
    out.truncate(fetch);
    Ok(out)
}

/// Up to `fetch` ready jobs after `(priority, due, seq)` in reserve order: the due jobs of
/// each priority band are one range of `jobs_waiting`, the bands walked from the cursor's.
fn list_ready(
    tx: &Connection,
    tid: i64,
    (p, due, seq): (u32, u64, u64),
    fetch: usize,
    now: u64,
) -> rusqlite::Result<Vec<RawJob>> {
    let mut out: Vec<RawJob> = Vec::new();
    let mut head = tx.prepare_cached(
        "SELECT priority FROM jobs WHERE tid = ?1 AND state = 1 AND priority > ?2 \
         ORDER BY priority LIMIT 1",
    )?;
    let mut band = tx.prepare_cached(&format!(
        "SELECT {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = 1 AND priority = ?2 \
         AND ready_at <= ?3 AND (ready_at, seq) > (?4, ?5) ORDER BY ready_at, seq LIMIT ?6"
    ))?;
    let mut priority = i64::from(p);
    let mut after = (due, seq);
    loop {
        let rows = band
            .query_map(
                params![tid, priority, now, after.0, after.1, fetch - out.len()],
                |r| job(r, 0),
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        out.extend(rows);
        if out.len() >= fetch {
            return Ok(out);
        }
        match head
            .query_row(params![tid, priority], |r| r.get::<_, i64>(0))
            .optional()?
        {
            Some(next) => {
                priority = next;
                after = (0, 0);
            }
            None => return Ok(out),
        }
    }
}

/// Counts per state (done: those `keep` keeps), the age of the oldest due job and the next
/// due time, at `now`.
pub(crate) fn stats(
    conn: &Connection,
    topic: &Topic,
    now: u64,
    keep: Option<Retention>,
) -> Result<TopicStats> {
    let tx = read_tx(conn)?;
    let Some(tid) = tid(&tx, topic)? else {
        return Ok(TopicStats::default());
    };
    let one = |sql: &str| -> Result<Option<u64>> {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.query_row([tid], |r| r.get::<_, Option<u64>>(0)))
            .map_err(|e| db_err("reading stats", e))
    };
    let read = |e| db_err("reading stats", e);
    let delayed = count_in(&tx, tid, JobState::Delayed, now)?;
    let ready = count_in(&tx, tid, JobState::Ready, now)?;
    let reserved = count_in(&tx, tid, JobState::Reserved, now)?;
    let dead = count_in(&tx, tid, JobState::Dead, now)?;
    let done = match keep {
        Some(k) => tx
            .prepare_cached(
                "SELECT count(*) FROM jobs WHERE tid = ?1 AND state = 5 AND deadline > ?2",
            )
            .and_then(|mut s| s.query_row(params![tid, kept_after(now, &k)], |r| r.get(0)))
            .map_err(|e| db_err("counting done jobs", e))?,
        None => 0,
    };
    let next_due = waiting::next_after(&tx, tid, now).map_err(read)?;
    let expired_leases = one("SELECT expired FROM topics WHERE tid = ?1")?.unwrap_or(0);
    let expired_jobs = one("SELECT expired_jobs FROM topics WHERE tid = ?1")?.unwrap_or(0);
    // The oldest due job is the waiting job with the earliest due time, when that has passed.
    let oldest = waiting::earliest(&tx, tid)
        .map_err(read)?
        .filter(|&due| due <= now);
    Ok(TopicStats {
        delayed,
        ready,
        reserved,
        dead,
        done,
        oldest_overdue: oldest.map(|due| Duration::from_millis(now.saturating_sub(due))),
        next_due: next_due.map(Timestamp::from_millis),
        expired_leases,
        expired_jobs,
        // The engine fills it from its registry, which holds the pause.
        paused_until: None,
    })
}

/// How many jobs of `topic` are in `state` at `now`.
pub(crate) fn count(conn: &Connection, topic: &Topic, state: JobState, now: u64) -> Result<u64> {
    match tid(conn, topic)? {
        Some(tid) => count_in(conn, tid, state, now),
        None => Ok(0),
    }
}

/// Counts one state through its partial index (the state literal selects the index; a
/// waiting job is counted in `jobs_waiting`, on its side of now).
fn count_in(conn: &Connection, tid: i64, state: JobState, now: u64) -> Result<u64> {
    let err = |e| db_err("counting jobs", e);
    let sql = match state {
        JobState::Delayed | JobState::Ready => {
            // Waiting jobs, on one side of now: the bands' ranges.
            let (from, to) = match state {
                JobState::Ready => (0, now),
                _ => (now.saturating_add(1), u64::MAX >> 1),
            };
            return waiting::count_between(conn, tid, from, to, u64::MAX >> 1).map_err(err);
        }
        JobState::Reserved => "SELECT count(*) FROM jobs WHERE tid = ?1 AND state = 3",
        JobState::Dead => "SELECT count(*) FROM jobs WHERE tid = ?1 AND state = 4",
        JobState::Done => "SELECT count(*) FROM jobs WHERE tid = ?1 AND state = 5",
    };
    conn.prepare_cached(sql)
        .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
        .map_err(err)
}

/// Every topic pushed to since it was created or last purged (`listed`), sorted bytewise;
/// the engine adds the paused ones from the registry.
pub(crate) fn topics(conn: &Connection) -> Result<Vec<Topic>> {
    let names: Vec<String> = conn
        .prepare_cached("SELECT name FROM topics WHERE listed = 1 ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| db_err("listing topics", e))?;
    names
        .into_iter()
        .map(|n| {
            Topic::new(n).map_err(|e| {
                delayq_core::Error::Internal(format!("a stored topic name is invalid: {e}"))
            })
        })
        .collect()
}
