//! The reads: get, list, stats and topics, on any connection (a reader's, or the writer's
//! in memory mode), each in one read transaction so it sees one committed state.

use std::time::Duration;

use delayq_core::{Cursor, Job, JobId, JobState, Page, Result, Timestamp, Topic, TopicStats};
use rusqlite::{Connection, OptionalExtension, params};

use crate::cursor::Key;
use crate::error::db_err;
use crate::row::{JOB_COLS, RawJob, job, state_code};

/// How many priority bands stats looks at for the oldest ready job, as the Redis engine's
/// `stats.lua`: with more distinct priorities among ready jobs the age may be under-reported.
const STATS_BANDS: usize = 64;

fn tid(conn: &Connection, topic: &Topic) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT tid FROM topics WHERE name = ?1")
        .and_then(|mut s| s.query_row([topic.as_str()], |r| r.get(0)).optional())
        .map_err(|e| db_err("looking up a topic", e))
}

fn read_tx(conn: &Connection) -> Result<rusqlite::Transaction<'_>> {
    conn.unchecked_transaction()
        .map_err(|e| db_err("starting a read", e))
}

/// One job in its stored state, or `None`.
pub(crate) fn get(conn: &Connection, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
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
    raw.map(|r| r.into_stored_job(topic)).transpose()
}

/// One page of the jobs in `state`, after `after`, in the state's order.
pub(crate) fn list(
    conn: &Connection,
    topic: &Topic,
    state: JobState,
    limit: usize,
    after: Key,
) -> Result<Page> {
    let tx = read_tx(conn)?;
    let Some(tid) = tid(&tx, topic)? else {
        return Ok(Page {
            jobs: Vec::new(),
            next: None,
        });
    };
    let fetch = limit + 1;
    let rows: Vec<RawJob> = match &after {
        Key::Ready(p, due, seq) => tx
            .prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = 2 \
                 AND (priority, ready_at, seq) > (?2, ?3, ?4) \
                 ORDER BY priority, ready_at, seq LIMIT ?5"
            ))
            .and_then(|mut s| {
                s.query_map(params![tid, p, due, seq, fetch], |r| job(r, 0))?
                    .collect()
            }),
        Key::TimeId(t, id) => {
            // The state is a literal in the text so that the planner uses the state's own
            // partial index, which holds this order.
            let st = state_code(state);
            let col = if state == JobState::Delayed {
                "ready_at"
            } else {
                "deadline"
            };
            tx.prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = {st} \
                 AND ({col}, id) > (?2, ?3) ORDER BY {col}, id LIMIT ?4"
            ))
            .and_then(|mut s| {
                s.query_map(params![tid, t, id, fetch], |r| job(r, 0))?
                    .collect()
            })
        }
    }
    .map_err(|e| db_err("listing jobs", e))?;
    let more = rows.len() > limit;
    let mut jobs = Vec::with_capacity(limit);
    let mut last = None;
    for raw in rows.into_iter().take(limit) {
        last = Some(match state {
            JobState::Ready => Key::Ready(raw.priority, raw.ready_at, raw.seq),
            JobState::Delayed => Key::TimeId(raw.ready_at, raw.id.clone()),
            _ => Key::TimeId(raw.deadline, raw.id.clone()),
        });
        jobs.push(raw.into_job(topic, state)?);
    }
    let next = if more {
        last.map(|k| Cursor(k.encode(state)))
    } else {
        None
    };
    Ok(Page { jobs, next })
}

/// Counts per state, the age of the oldest due job and the next due time, at `now`.
pub(crate) fn stats(conn: &Connection, topic: &Topic, now: u64) -> Result<TopicStats> {
    let tx = read_tx(conn)?;
    let Some(tid) = tid(&tx, topic)? else {
        return Ok(TopicStats::default());
    };
    let one = |sql: &str| -> Result<Option<u64>> {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.query_row([tid], |r| r.get::<_, Option<u64>>(0)))
            .map_err(|e| db_err("reading stats", e))
    };
    let delayed = count_in(&tx, tid, JobState::Delayed)?;
    let ready = count_in(&tx, tid, JobState::Ready)?;
    let reserved = count_in(&tx, tid, JobState::Reserved)?;
    let dead = count_in(&tx, tid, JobState::Dead)?;
    let next_due = one("SELECT min(ready_at) FROM jobs WHERE tid = ?1 AND state = 1")?;
    let expired_leases = one("SELECT expired FROM topics WHERE tid = ?1")?.unwrap_or(0);

    // The oldest ready job is the head of one priority band: walk the bands' heads.
    let mut oldest: Option<u64> = None;
    let mut band: i64 = -1;
    {
        let mut head = tx
            .prepare_cached(
                "SELECT priority, ready_at FROM jobs WHERE tid = ?1 AND state = 2 \
                 AND priority > ?2 ORDER BY priority, ready_at LIMIT 1",
            )
            .map_err(|e| db_err("reading stats", e))?;
        for _ in 0..STATS_BANDS {
            let Some((p, due)) = head
                .query_row(params![tid, band], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, u64>(1)?))
                })
                .optional()
                .map_err(|e| db_err("reading stats", e))?
            else {
                break;
            };
            oldest = Some(oldest.map_or(due, |o| o.min(due)));
            band = p;
        }
    }
    if let Some(due) = next_due.filter(|&d| d <= now) {
        oldest = Some(oldest.map_or(due, |o| o.min(due)));
    }
    Ok(TopicStats {
        delayed,
        ready,
        reserved,
        dead,
        oldest_overdue: oldest.map(|due| Duration::from_millis(now.saturating_sub(due))),
        next_due: next_due.map(Timestamp::from_millis),
        expired_leases,
    })
}

/// How many jobs of `topic` are in `state`.
pub(crate) fn count(conn: &Connection, topic: &Topic, state: JobState) -> Result<u64> {
    match tid(conn, topic)? {
        Some(tid) => count_in(conn, tid, state),
        None => Ok(0),
    }
}

/// Counts one state through its partial index (the state literal selects the index).
fn count_in(conn: &Connection, tid: i64, state: JobState) -> Result<u64> {
    conn.prepare_cached(&format!(
        "SELECT count(*) FROM jobs WHERE tid = ?1 AND state = {}",
        state_code(state)
    ))
    .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
    .map_err(|e| db_err("counting jobs", e))
}

/// Every topic ever pushed to, sorted bytewise.
pub(crate) fn topics(conn: &Connection) -> Result<Vec<Topic>> {
    let names: Vec<String> = conn
        .prepare_cached("SELECT name FROM topics ORDER BY name")
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
