//! Reserve, as the Redis engine's `lua/reserve.lua`: fails the expired leases, then takes up
//! to `max` due jobs of the topics in the given order: the lowest priority number first,
//! then the earliest due time, then push order.
//!
//! A due job is a waiting job whose due time has passed; nothing was written when it fell
//! due. In `jobs_waiting` (tid, priority, ready_at, seq) the due jobs of one priority are one
//! index range, so reserve walks the priority bands of the topic's waiting jobs from the
//! lowest (`crate::waiting`): one seek finds a band's head (its earliest job), a second
//! reads its due jobs when the head is due. A topic whose jobs share one priority (the
//! common case) costs three seeks.
//!
//! Reserve by id ([`reserve_job`], beanstalkd's `reserve-job`) leases one job found by its
//! id, whatever its due time, as reserve leases the jobs it takes.

use std::time::Duration;

use delayq_core::{
    Delivery, DeliveryMode, Error, JobId, JobState, Lease, LeaseToken, Result, Topic,
};
use rusqlite::{OptionalExtension, params};

use super::done::kept_after;
use super::exec;
use super::place::fail;
use super::tick::{count_expired, expire_jobs, expire_leases, expire_one};
use crate::error::db_err;
use crate::row::{DEAD, DONE, JOB_COLS, RESERVED, RawJob, WAITING, job};
use crate::shared::Effect;
use crate::timers::Kind;
use crate::tx::Tx;
use crate::waiting;

/// Takes up to `max` due jobs from `topics`, the first topic first, after failing the
/// expired leases of each. At least once, each job is leased: attempts + 1, a fresh token
/// from the topic's counter, deadline now + ttr. At most once, each job is deleted as it is
/// handed out.
///
/// When due jobs are left in a topic that has waiters, one waiter is woken (the baton),
/// so a waiter woken for a job another reserver took does not leave later jobs unseen.
pub(crate) fn reserve(
    tx: &mut Tx<'_>,
    topics: &[Topic],
    max: usize,
    mode: DeliveryMode,
) -> Result<Vec<Delivery>> {
    let now_us = tx.now_us();
    let now = now_us / 1000;
    let mut out = Vec::new();
    for topic in topics {
        let want = max - out.len();
        if want == 0 {
            break;
        }
        let Some(tid) = tx.topic(topic)? else {
            continue;
        };
        // The timer index (lower bounds of what is committed) says whether a lease of the
        // topic may have expired; when none can have, that query is skipped. A lease that
        // expired after the last commit is failed by the timer right after this group.
        if tx.shared.timers().due_in(tid, Kind::Lease, now) {
            expire_leases(tx, tid, now, tx.tick_batch.max(want))?;
        }
        // The same for waiting jobs whose expiry passed: they go dead (or are dropped)
        // before anything is handed out, paused or not.
        if tx.shared.timers().due_in(tid, Kind::Expiry, now) {
            expire_jobs(tx, tid, now, tx.tick_batch.max(want))?;
        }
        // A paused topic hands out nothing (its jobs still fall due, its leases still end).
        if tx.shared.registry.paused_until(tid, now).is_some() {
            continue;
        }
        // One statement serves every job of the batch (a cached statement is looked up
        // once, not per job), and the timer learns the batch's earliest deadline once.
        let conn = tx.conn;
        let mut lease_job = conn
            .prepare_cached(
                "UPDATE jobs SET state = 3, attempts = ?1, token = ?2, deadline = ?3 \
                 WHERE jid = ?4",
            )
            .map_err(|e| db_err("leasing a job", e))?;
        let mut earliest: Option<u64> = None;
        let mut late = 0;
        for (jid, mut raw) in due_jobs(tx, tid, now, want)? {
            // One whose expiry passed (expire_jobs' limit left it) is expired, not handed
            // out.
            if raw.expires_at > 0 && raw.expires_at <= now {
                expire_one(tx, jid, raw.on_expire, now)?;
                late += 1;
                continue;
            }
            raw.attempts = raw.attempts.saturating_add(1);
            let lease = match mode {
                DeliveryMode::AtLeastOnce => {
                    raw.token = tx.next_token(tid, now_us)?;
                    raw.deadline = now.saturating_add(raw.ttr_ms);
                    lease_job
                        .execute(params![raw.attempts, raw.token, raw.deadline, jid])
                        .map_err(|e| db_err("leasing a job", e))?;
                    earliest = Some(earliest.map_or(raw.deadline, |d| d.min(raw.deadline)));
                    Some(raw.token)
                }
                DeliveryMode::AtMostOnce => {
                    exec(
                        tx,
                        "removing a delivered job",
                        "DELETE FROM jobs WHERE jid = ?1",
                        [jid],
                    )?;
                    None
                }
            };
            out.push(delivery(topic, raw, lease, now_us)?);
        }
        if let Some(deadline) = earliest {
            tx.effect(Effect::Note(tid, Kind::Lease, deadline));
        }
        count_expired(tx, tid, late)?;
    }
    for topic in topics {
        if !tx.shared.waiters.has_waiters(topic) {
            continue;
        }
        let Some(tid) = tx.topic(topic)? else {
            continue;
        };
        if tx.shared.registry.paused_until(tid, now).is_some() {
            continue;
        }
        if waiting::any_due(tx.conn, tid, now).map_err(|e| db_err("looking for due jobs", e))? {
            tx.effect(Effect::Ready(tid, 1));
        }
    }
    Ok(out)
}

/// The delivery of `raw` taken at `now_us` (µs), leased under `token` (`None`: at most once).
fn delivery(topic: &Topic, raw: RawJob, token: Option<u64>, now_us: u64) -> Result<Delivery> {
    let lateness = Duration::from_micros(now_us.saturating_sub(raw.ready_at.saturating_mul(1000)));
    let job = raw.into_job(topic, JobState::Reserved)?;
    Ok(Delivery {
        lease: token.map(|token| Lease {
            topic: topic.clone(),
            id: job.id.clone(),
            token: LeaseToken(token),
        }),
        job,
        lateness,
    })
}

/// Leases the job `id` of `topic` now, whatever its due time and whether the topic is
/// paused, when it is delayed, ready or dead, as [`reserve`] leases a job: attempts + 1 (a
/// dead job's are not reset, and it keeps its last error), a fresh token from the topic's
/// counter, deadline now + ttr, a timer entry for the deadline. An expiry that has passed is
/// cleared, as a kick clears it. A reserved or done job is refused with
/// [`Error::WrongState`], a missing one (or a done one its topic's retention no longer
/// keeps) with [`Error::NotFound`], before anything is written.
///
/// A lease that ran out and that the timer has not failed yet is failed first, as the timer
/// would have ("lease expired": retried or dead), and the job is then leased again.
///
/// The topic's timer entries for due times and expiries stay: they are lower bounds, and
/// one that finds the job reserved finds nothing due and wakes no one. No waiter is woken
/// for the job: it was not left for anyone (only a lease failed on the way may wake one,
/// as the timer failing it would have).
pub(crate) fn reserve_job(tx: &mut Tx<'_>, topic: &Topic, id: &JobId) -> Result<Delivery> {
    let now_us = tx.now_us();
    let now = now_us / 1000;
    let not_found = || Error::NotFound {
        topic: topic.clone(),
        id: id.clone(),
    };
    let Some(tid) = tx.topic(topic)? else {
        return Err(not_found());
    };
    let (jid, mut raw) = by_id(tx, tid, id)?.ok_or_else(not_found)?;
    if raw.state == RESERVED && raw.deadline <= now {
        // Its lease ran out and the timer has not failed it yet.
        fail(tx, tid, &raw.meta(jid), now, None, "lease expired")?;
        exec(
            tx,
            "counting expired leases",
            "UPDATE topics SET expired = expired + 1 WHERE tid = ?1",
            [tid],
        )?;
        raw = by_id(tx, tid, id)?
            .ok_or_else(|| Error::Internal("a job whose lease was failed is gone".into()))?
            .1;
    }
    let keep = tx.shared.registry.retention(tid);
    match raw.state {
        RESERVED => return Err(cannot_reserve_job(topic, id, JobState::Reserved)),
        DONE if keep.is_some_and(|k| raw.deadline > kept_after(now, &k)) => {
            return Err(cannot_reserve_job(topic, id, JobState::Done));
        }
        DONE => return Err(not_found()),
        WAITING | DEAD => {}
        other => {
            return Err(Error::Internal(format!("unknown stored job state {other}")));
        }
    }
    // An expiry that has passed is cleared (the timer may not have reached it yet, or the
    // job is dead): a reserve by id is an order to run the job, as a kick is.
    if raw.expires_at <= now {
        raw.expires_at = 0;
    }
    raw.attempts = raw.attempts.saturating_add(1);
    raw.token = tx.next_token(tid, now_us)?;
    raw.deadline = now.saturating_add(raw.ttr_ms);
    exec(
        tx,
        "leasing a job by its id",
        "UPDATE jobs SET state = 3, attempts = ?1, token = ?2, deadline = ?3, expires_at = ?4 \
         WHERE jid = ?5",
        params![raw.attempts, raw.token, raw.deadline, raw.expires_at, jid],
    )?;
    tx.effect(Effect::Note(tid, Kind::Lease, raw.deadline));
    let token = raw.token;
    delivery(topic, raw, Some(token), now_us)
}

/// The job `id` of topic `tid`: (row id, row).
fn by_id(tx: &Tx<'_>, tid: i64, id: &JobId) -> Result<Option<(i64, RawJob)>> {
    tx.conn
        .prepare_cached(&format!(
            "SELECT jid, {JOB_COLS} FROM jobs WHERE tid = ?1 AND id = ?2"
        ))
        .and_then(|mut s| {
            s.query_row(params![tid, id.as_str()], |r| Ok((r.get(0)?, job(r, 1)?)))
                .optional()
        })
        .map_err(|e| db_err("reading a job", e))
}

/// [`Error::WrongState`] for a reserve by id of a reserved or done job.
fn cannot_reserve_job(topic: &Topic, id: &JobId, state: JobState) -> Error {
    Error::WrongState {
        topic: topic.clone(),
        id: id.clone(),
        state,
        operation: "reserve",
        hint: "only a delayed, ready or dead job can be reserved by its id: a reserved job is held by its lease until it is settled or the lease runs out, a done job has finished (push it again to run it again)",
    }
}

/// Up to `want` due jobs of topic `tid` in the contract's order: (row id, row).
fn due_jobs(tx: &Tx<'_>, tid: i64, now: u64, want: usize) -> Result<Vec<(i64, RawJob)>> {
    let read = |e| db_err("reading due jobs", e);
    let mut out = Vec::new();
    let mut band = tx
        .conn
        .prepare_cached(&format!(
            "SELECT jid, {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = 1 AND priority = ?2 \
             AND ready_at <= ?3 ORDER BY ready_at, seq LIMIT ?4"
        ))
        .map_err(read)?;
    let mut after = -1;
    while out.len() < want {
        let Some((priority, head)) = waiting::next_band(tx.conn, tid, after).map_err(read)? else {
            break;
        };
        after = priority;
        if head > now {
            continue;
        }
        let rows = band
            .query_map(params![tid, priority, now, want - out.len()], |r| {
                Ok((r.get(0)?, job(r, 1)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(read)?;
        out.extend(rows);
    }
    Ok(out)
}

/// Reserve by id of a job that time has moved on without the timer having run yet: a lease
/// that ran out fails first, as the timer would have failed it; an expiry that passed is
/// cleared. The times are set in the rows, since the timer would otherwise get there first.
#[cfg(test)]
mod tests {
    use std::path::Path;

    use delayq_core::{NewJob, OnExpire};
    use rusqlite::Connection;

    use super::*;
    use crate::clock::Clock;
    use crate::ops::push;
    use crate::schema;
    use crate::shared::Shared;

    fn topic_and_store() -> (Topic, Connection, Shared) {
        let mut conn = Connection::open_in_memory().expect("open");
        schema::migrate(&mut conn, Path::new(":memory:")).expect("migrate");
        (
            Topic::new("by-id").expect("topic"),
            conn,
            Shared::new(Clock::start(0)),
        )
    }

    fn counted(conn: &Connection) -> (i64, i64) {
        conn.query_row("SELECT expired, expired_jobs FROM topics", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("counts")
    }

    #[test]
    fn a_lease_that_ran_out_fails_then_the_job_is_leased_again() {
        let (t, conn, shared) = topic_and_store();
        let id = JobId::new("a").expect("id");
        let mut tx = Tx::new(&conn, &shared, 100);
        push::push(&mut tx, &[NewJob::new(t.clone(), "a").with_id(id.clone())]).expect("push");
        let first = reserve(
            &mut tx,
            std::slice::from_ref(&t),
            1,
            DeliveryMode::AtLeastOnce,
        )
        .expect("reserve");
        conn.execute("UPDATE jobs SET deadline = 1", [])
            .expect("the lease ran out");
        let d = reserve_job(&mut tx, &t, &id).expect("reserve by id");
        assert_eq!(d.attempt(), 2);
        assert_eq!(d.job.last_error.as_deref(), Some("lease expired"));
        assert!(d.lease.map(|l| l.token) > first[0].lease.as_ref().map(|l| l.token));
        assert_eq!(counted(&conn), (1, 0));
    }

    #[test]
    fn a_passed_expiry_is_cleared_as_a_kick_clears_it() {
        let (t, conn, shared) = topic_and_store();
        let mut tx = Tx::new(&conn, &shared, 100);
        let lateness = Duration::from_secs(60);
        let ids = ["dead", "drop", "later"].map(|i| JobId::new(i).expect("id"));
        let jobs = [
            NewJob::new(t.clone(), "x")
                .with_id(ids[0].clone())
                .with_max_lateness(lateness),
            NewJob::new(t.clone(), "y")
                .with_id(ids[1].clone())
                .with_max_lateness(lateness)
                .with_on_expire(OnExpire::Drop),
            NewJob::new(t.clone(), "z")
                .with_id(ids[2].clone())
                .with_max_lateness(lateness),
        ];
        push::push(&mut tx, &jobs).expect("push");
        conn.execute("UPDATE jobs SET expires_at = 1 WHERE id != 'later'", [])
            .expect("the expiries passed");
        for id in &ids[..2] {
            let d = reserve_job(&mut tx, &t, id).expect("reserve by id");
            assert_eq!((d.job.state, d.attempt()), (JobState::Reserved, 1));
            assert_eq!((d.job.expires_at, d.job.last_error), (None, None), "{id}");
        }
        let d = reserve_job(&mut tx, &t, &ids[2]).expect("reserve by id");
        assert!(d.job.expires_at.is_some(), "an expiry still ahead is kept");
        assert_eq!(counted(&conn), (0, 0));
    }
}
