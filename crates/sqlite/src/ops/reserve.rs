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

use std::time::Duration;

use delayq_core::{Delivery, DeliveryMode, JobState, Lease, LeaseToken, Result, Topic};
use rusqlite::params;

use super::exec;
use super::tick::{count_expired, expire_jobs, expire_leases, expire_one};
use crate::error::db_err;
use crate::row::{JOB_COLS, RawJob, job};
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
                    raw.token = tx.next_seq(tid)?;
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
            let lateness =
                Duration::from_micros(now_us.saturating_sub(raw.ready_at.saturating_mul(1000)));
            let job = raw.into_job(topic, JobState::Reserved)?;
            out.push(Delivery {
                lease: lease.map(|token| Lease {
                    topic: topic.clone(),
                    id: job.id.clone(),
                    token: LeaseToken(token),
                }),
                job,
                lateness,
            });
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
