//! Reserve, as the Redis engine's `lua/reserve.lua`: applies what is due, then takes up to
//! `max` ready jobs of the topics in the given order: the lowest priority number first,
//! then the earliest due time, then push order.

use std::time::Duration;

use delayq_core::{Delivery, DeliveryMode, JobState, Lease, LeaseToken, Result, Topic};
use rusqlite::{OptionalExtension, params};

use super::exec;
use super::tick::tick_topic;
use crate::error::db_err;
use crate::row::{JOB_COLS, RawJob, job};
use crate::shared::Effect;
use crate::timers::Kind;
use crate::tx::Tx;

/// Takes up to `max` ready jobs from `topics`, the first topic first, after applying what is
/// due in each. At least once, each
/// job is leased: attempts + 1, a fresh token from the topic's counter, deadline now + ttr.
/// At most once, each job is deleted as it is handed out.
///
/// When ready jobs are left in a topic that has waiters, one waiter is woken (the baton),
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
        // The timer index (lower bounds of what is committed) says whether anything of the
        // topic is due; when nothing is, the tick's four queries are skipped. A job made due
        // by a write earlier in this same group is picked up by the timer right after it.
        if tx.shared.timers().due_in(tid, now) {
            tick_topic(tx, tid, now, tx.tick_batch.max(want))?;
        }
        let rows: Vec<(i64, RawJob)> = tx
            .conn
            .prepare_cached(&format!(
                "SELECT jid, {JOB_COLS} FROM jobs WHERE tid = ?1 AND state = 2 \
                 ORDER BY priority, ready_at, seq LIMIT ?2"
            ))
            .and_then(|mut s| {
                s.query_map(params![tid, want], |r| Ok((r.get(0)?, job(r, 1)?)))?
                    .collect()
            })
            .map_err(|e| db_err("reading ready jobs", e))?;
        for (jid, mut raw) in rows {
            raw.attempts = raw.attempts.saturating_add(1);
            let lease = match mode {
                DeliveryMode::AtLeastOnce => {
                    raw.token = tx.next_seq(tid)?;
                    raw.deadline = now.saturating_add(raw.ttr_ms);
                    exec(
                        tx,
                        "leasing a job",
                        "UPDATE jobs SET state = 3, attempts = ?1, token = ?2, deadline = ?3 \
                         WHERE jid = ?4",
                        params![raw.attempts, raw.token, raw.deadline, jid],
                    )?;
                    tx.effect(Effect::Note(tid, Kind::Lease, raw.deadline));
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
    }
    for topic in topics {
        if !tx.shared.waiters.has_waiters(topic) {
            continue;
        }
        let Some(tid) = tx.topic(topic)? else {
            continue;
        };
        let left = tx
            .conn
            .prepare_cached("SELECT 1 FROM jobs WHERE tid = ?1 AND state = 2 LIMIT 1")
            .and_then(|mut s| s.query_row([tid], |_| Ok(())).optional())
            .map_err(|e| db_err("looking for ready jobs", e))?;
        if left.is_some() {
            tx.effect(Effect::Ready(tid, 1));
        }
    }
    Ok(out)
}
