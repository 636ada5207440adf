//! The operations on jobs by id and on whole topics, as the Redis engine's `kick.lua`,
//! `bury_waiting.lua`, `reschedule.lua`, `delete.lua`, `purge.lua` and `configure.lua`.

use delayq_core::{Error, JobId, Result, Schedule, Timestamp, Topic, TopicConfig};
use rusqlite::{OptionalExtension, params};

use super::place::place;
use super::push::due_time;
use super::{done, exec};
use crate::error::db_err;
use crate::row::{DEAD, META_COLS, Meta, WAITING, meta, state_of};
use crate::settings;
use crate::shared::Effect;
use crate::tx::Tx;

/// The job `(topic, id)`, when it exists: (topic id, job).
fn find(tx: &mut Tx<'_>, topic: &Topic, id: &JobId) -> Result<Option<(i64, Meta)>> {
    let Some(tid) = tx.topic(topic)? else {
        return Ok(None);
    };
    let job = tx
        .conn
        .prepare_cached(&format!(
            "SELECT {META_COLS} FROM jobs WHERE tid = ?1 AND id = ?2"
        ))
        .and_then(|mut s| {
            s.query_row(params![tid, id.as_str()], |r| meta(r, 0))
                .optional()
        })
        .map_err(|e| db_err("reading a job", e))?;
    Ok(job.map(|j| (tid, j)))
}

fn not_found(topic: &Topic, id: &JobId) -> Error {
    Error::NotFound {
        topic: topic.clone(),
        id: id.clone(),
    }
}

/// Makes a dead job ready now: attempts 0, deadline cleared, last error kept; an expiry
/// that has passed is cleared (a kick is an order to run the job), one still ahead kept.
fn revive(tx: &mut Tx<'_>, tid: i64, jid: i64, expires_at: u64, now: u64) -> Result<()> {
    let expires_at = if expires_at > now { expires_at } else { 0 };
    place(tx, tid, now, expires_at, now);
    exec(
        tx,
        "kicking a job",
        "UPDATE jobs SET state = ?1, attempts = 0, ready_at = ?2, deadline = 0, expires_at = ?3 \
         WHERE jid = ?4",
        params![WAITING, now, expires_at, jid],
    )?;
    Ok(())
}

/// Kicks one dead job. [`Error::NotFound`], or [`Error::WrongState`] when it is not dead.
pub(crate) fn kick(tx: &mut Tx<'_>, topic: &Topic, id: &JobId) -> Result<()> {
    let now = tx.now_ms();
    let (tid, job) = find(tx, topic, id)?.ok_or_else(|| not_found(topic, id))?;
    if job.state != DEAD {
        return Err(Error::cannot_kick(
            topic,
            id,
            state_of(job.state, job.ready_at, now)?,
        ));
    }
    revive(tx, tid, job.jid, job.expires_at, now)
}

/// Kicks up to `limit` dead jobs of a topic, those that died first first. Returns how many
/// were kicked.
pub(crate) fn kick_some(tx: &mut Tx<'_>, topic: &Topic, limit: usize) -> Result<u64> {
    let now = tx.now_ms();
    let Some(tid) = tx.topic(topic)? else {
        return Ok(0);
    };
    let jids: Vec<(i64, u64)> = tx
        .conn
        .prepare_cached(
            "SELECT jid, expires_at FROM jobs WHERE tid = ?1 AND state = 4 \
             ORDER BY deadline, id LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![tid, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(|e| db_err("finding dead jobs", e))?;
    for &(jid, expires_at) in &jids {
        revive(tx, tid, jid, expires_at, now)?;
    }
    Ok(jids.len() as u64)
}

/// Sends a delayed or ready job to dead now, with `reason` ('' for none) as its last error
/// and its attempts unchanged. [`Error::NotFound`], or [`Error::WrongState`] when it is
/// reserved, dead or done. Its timer entries stay: a due or expiry timer that finds it dead
/// does nothing.
pub(crate) fn bury_waiting(tx: &mut Tx<'_>, topic: &Topic, id: &JobId, reason: &str) -> Result<()> {
    let now = tx.now_ms();
    let (_, job) = find(tx, topic, id)?.ok_or_else(|| not_found(topic, id))?;
    if job.state != WAITING {
        return Err(Error::cannot_bury_waiting(
            topic,
            id,
            state_of(job.state, job.ready_at, now)?,
        ));
    }
    exec(
        tx,
        "burying a job",
        "UPDATE jobs SET state = ?1, token = 0, deadline = ?2, last_error = ?3 WHERE jid = ?4",
        params![DEAD, now, reason, job.jid],
    )?;
    Ok(())
}

/// Moves a delayed or ready job to a new due time, keeping its push order and attempts.
/// The caller checked an absolute time against the clock.
pub(crate) fn reschedule(
    tx: &mut Tx<'_>,
    topic: &Topic,
    id: &JobId,
    when: Schedule,
) -> Result<Timestamp> {
    let now_us = tx.now_us();
    let now = now_us / 1000;
    let (tid, job) = find(tx, topic, id)?.ok_or_else(|| not_found(topic, id))?;
    if job.state != WAITING {
        return Err(Error::cannot_reschedule(
            topic,
            id,
            state_of(job.state, job.ready_at, now)?,
        ));
    }
    let ready_at = due_time(when, now_us);
    place(tx, tid, ready_at, job.expires_at, now);
    exec(
        tx,
        "rescheduling a job",
        "UPDATE jobs SET ready_at = ?1 WHERE jid = ?2",
        params![ready_at, job.jid],
    )?;
    Ok(Timestamp::from_millis(ready_at))
}

/// Deletes a job in any state (a done one is counted out of the topic's done jobs). Returns
/// whether there was one.
pub(crate) fn delete(tx: &mut Tx<'_>, topic: &Topic, id: &JobId) -> Result<bool> {
    let Some(tid) = tx.topic(topic)? else {
        return Ok(false);
    };
    if let Some(acked) = done::forget(tx, tid, id.as_str())? {
        // A done job that its topic's retention no longer keeps is none, as `get` says: its
        // row goes all the same, and nothing was deleted.
        let keep = tx.shared.registry.retention(tid);
        let now = tx.now_ms();
        return Ok(keep.is_some_and(|k| acked > done::kept_after(now, &k)));
    }
    let n = exec(
        tx,
        "deleting a job",
        "DELETE FROM jobs WHERE tid = ?1 AND id = ?2",
        params![tid, id.as_str()],
    )?;
    Ok(n > 0)
}

/// Deletes every job of a topic and takes it off the topic list; its row and counter stay.
/// Returns how many jobs.
pub(crate) fn purge(tx: &mut Tx<'_>, topic: &Topic) -> Result<u64> {
    let Some(tid) = tx.topic(topic)? else {
        return Ok(0);
    };
    let n = exec(
        tx,
        "purging a topic",
        "DELETE FROM jobs WHERE tid = ?1",
        [tid],
    )?;
    // The counters restart and the topic leaves the topic list; the row and its seq counter
    // stay, so lease tokens stay fresh.
    exec(
        tx,
        "purging a topic",
        "UPDATE topics SET expired = 0, expired_jobs = 0, listed = 0, done = 0 WHERE tid = ?1",
        [tid],
    )?;
    tx.effect(Effect::Clear(tid));
    Ok(n as u64)
}

/// Pauses a topic until `until` (ms; `Timestamp::NEVER`: until resumed), creating it, off
/// the topic list, when it is new; an `until` not after now ends its pause. Ending or
/// shortening a pause wakes the topic's waiters after the commit. The caller checked the
/// end against the 10-year bound.
pub(crate) fn pause(tx: &mut Tx<'_>, topic: &Topic, until: u64) -> Result<()> {
    let now = tx.now_ms();
    let Some(tid) = (if until > now {
        Some(tx.topic_or_create(topic, false)?)
    } else {
        tx.topic(topic)?
    }) else {
        return Ok(());
    };
    let old: Option<u64> = tx
        .conn
        .prepare_cached("SELECT paused_until FROM topics WHERE tid = ?1")
        .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
        .map_err(|e| db_err("reading a topic's pause", e))?;
    let old = old.filter(|&t| t > now);
    let new = (until > now).then_some(until);
    tx.conn
        .prepare_cached("UPDATE topics SET paused_until = ?2 WHERE tid = ?1")
        .and_then(|mut s| s.execute(params![tid, new]))
        .map_err(|e| db_err("pausing a topic", e))?;
    let wake =
        matches!((old, new), (Some(_), None)) || matches!((old, new), (Some(o), Some(n)) if n < o);
    tx.effect(Effect::Paused(tid, new, wake));
    Ok(())
}

/// Whether topic `tid` holds any job (in any state, done jobs included).
fn holds_jobs(tx: &Tx<'_>, tid: i64) -> Result<bool> {
    tx.conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM jobs WHERE tid = ?1)")
        .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
        .map_err(|e| db_err("checking whether a topic holds jobs", e))
}

/// Replaces a topic's settings (creating the topic, off the topic list, when it is new), and
/// trims its done jobs to the new retention at once (removes them all without one). The
/// caller validated them. A new partition count is refused while the topic holds jobs
/// ([`Error::PartitionsInUse`]), before anything is written.
pub(crate) fn set_config(tx: &mut Tx<'_>, topic: &Topic, config: &TopicConfig) -> Result<()> {
    let now = tx.now_ms();
    // A topic that holds jobs exists: the refusal below comes before any write.
    let tid = tx.topic_or_create(topic, false)?;
    let (from, to) = (settings::partitions(tx, tid)?, config.partition_count());
    if from != to && holds_jobs(tx, tid)? {
        return Err(Error::PartitionsInUse {
            topic: topic.clone(),
            from,
            to,
        });
    }
    settings::write(tx, tid, config)?;
    done::trim(tx, tid, now, config.retention.as_ref(), 0, -1)?;
    tx.effect(Effect::Config(tid, *config));
    Ok(())
}
