//! The lease operations, as the Redis engine's `ack.lua`, `nack.lua`, `release.lua`,
//! `touch.lua` and `bury.lua` (a release with its delay and priority, a bury with its
//! priority): each is valid only while the job is reserved under this token and now is
//! before its deadline; otherwise nothing changes and the answer says why (as the Redis
//! engine's `refusal`): [`Error::NotFound`] when there is no such job,
//! [`Error::WrongState`] when it has had no delivery since it was pushed, released or kicked,
//! else [`Error::LeaseLost`] (a done job's lease too: it was acked).

use delayq_core::limits::due_after;
use delayq_core::{Error, Lease, NackOutcome, Result, Timestamp};
use rusqlite::{CachedStatement, OptionalExtension, params};

use super::place::{fail_us, place};
use super::{done, exec};
use crate::error::db_err;
use crate::row::{DONE, META_COLS, Meta, RESERVED, WAITING, meta, state_of};
use crate::tx::Tx;

/// The job `id` of topic `tid`, as state changes need it.
fn job_meta(tx: &mut Tx<'_>, tid: i64, lease: &Lease) -> Result<Option<Meta>> {
    tx.conn
        .prepare_cached(&format!(
            "SELECT {META_COLS} FROM jobs WHERE tid = ?1 AND id = ?2"
        ))
        .and_then(|mut s| {
            s.query_row(params![tid, lease.id.as_str()], |r| meta(r, 0))
                .optional()
        })
        .map_err(|e| db_err("reading a leased job", e))
}

/// Why `lease` is not live at `now`, given its job as stored: not found; lost when the job is
/// reserved (under another token, or past its deadline) or has been delivered since it was
/// pushed, released or kicked (`attempts` counts those deliveries); else the job has no lease
/// to settle (wrong state).
fn refusal(lease: &Lease, job: Option<&Meta>, now: u64, operation: &'static str) -> Error {
    match job {
        None => Error::NotFound {
            topic: lease.topic.clone(),
            id: lease.id.clone(),
        },
        Some(j) if j.state == RESERVED || j.state == DONE || j.attempts > 0 => Error::LeaseLost {
            topic: lease.topic.clone(),
            id: lease.id.clone(),
        },
        Some(j) => match state_of(j.state, j.ready_at, now) {
            Ok(state) => Error::not_reserved(&lease.topic, &lease.id, state, operation),
            Err(e) => e,
        },
    }
}

/// The job of `lease` when the lease is live at `now`: (topic id, job); else why not.
fn leased(
    tx: &mut Tx<'_>,
    lease: &Lease,
    now: u64,
    operation: &'static str,
) -> Result<(i64, Meta)> {
    let Some(tid) = tx.topic(&lease.topic)? else {
        return Err(refusal(lease, None, now, operation));
    };
    match job_meta(tx, tid, lease)? {
        Some(j) if j.state == RESERVED && j.token == lease.token.0 && j.deadline > now => {
            Ok((tid, j))
        }
        j => Err(refusal(lease, j.as_ref(), now, operation)),
    }
}

/// Acknowledges each delivery: its job is removed. Answers each in order.
pub(crate) fn ack_batch(tx: &mut Tx<'_>, leases: &[Lease]) -> Result<Vec<Result<()>>> {
    let mut out = Vec::with_capacity(leases.len());
    let mut acks = Acks::default();
    for lease in leases {
        match acks.ack(tx, lease) {
            Err(e) if e.ends_delivery() => out.push(Err(e)),
            r => out.push(Ok(r?)),
        }
    }
    Ok(out)
}

/// Acks of one request: the `DELETE` of an ack is prepared once for all of them (looking a
/// statement up in the cache costs about as much per ack as a twentieth of the ack itself).
#[derive(Default)]
pub(crate) struct Acks<'c> {
    delete: Option<CachedStatement<'c>>,
}

impl<'c> Acks<'c> {
    /// Acknowledges one delivery: its job is removed, or kept as done when its topic has a
    /// retention (`done::retire`; the registry's settings tell, in memory). One statement
    /// checks the lease and deletes (or marks) the row (through `jobs_id`), so an ack reads
    /// no row first.
    pub(crate) fn ack(&mut self, tx: &mut Tx<'c>, lease: &Lease) -> Result<()> {
        let now = tx.now_ms();
        let Some(tid) = tx.topic(&lease.topic)? else {
            return Err(refusal(lease, None, now, "ack"));
        };
        // Tokens come from the topic's counter, an SQLite integer: one past i64 was never
        // issued (and cannot be bound as a parameter), so it matches no lease.
        let deleted = match (
            i64::try_from(lease.token.0),
            tx.shared.registry.retention(tid),
        ) {
            (Ok(token), None) => {
                let delete = match &mut self.delete {
                    Some(s) => s,
                    slot => slot.insert(
                        tx.conn
                            .prepare_cached(
                                "DELETE FROM jobs WHERE tid = ?1 AND id = ?2 AND state = 3 \
                                 AND token = ?3 AND deadline > ?4",
                            )
                            .map_err(|e| db_err("acking a job", e))?,
                    ),
                };
                delete
                    .execute(params![tid, lease.id.as_str(), token, now])
                    .map_err(|e| db_err("acking a job", e))?
            }
            (Ok(token), Some(keep)) => {
                usize::from(done::retire(tx, (tid, token), lease, now, &keep)?)
            }
            (Err(_), _) => 0,
        };
        if deleted == 0 {
            // The refused ack, rare, reads the job to say why.
            let job = job_meta(tx, tid, lease)?;
            return Err(refusal(lease, job.as_ref(), now, "ack"));
        }
        Ok(())
    }
}

/// Fails a delivery: retried after `delay_ms` or the back-off, or dead when every attempt
/// is used; `reason` ('' for none) is kept as the last error.
pub(crate) fn nack(
    tx: &mut Tx<'_>,
    lease: &Lease,
    delay_ms: Option<u64>,
    reason: &str,
) -> Result<NackOutcome> {
    let now_us = tx.now_us();
    let (tid, job) = leased(tx, lease, now_us / 1000, "nack")?;
    Ok(match fail_us(tx, tid, &job, now_us, delay_ms, reason)? {
        Some(ready_at) => NackOutcome::Retry {
            ready_at: Timestamp::from_millis(ready_at),
        },
        None => NackOutcome::Dead,
    })
}

/// Gives a delivery back: attempts - 1, lease cleared, waiting again at its original due
/// time (so ready, in its old place in the order), or `delay_ms` from now (delayed until
/// then: the timer wakes a waiter when it falls due); with `priority` as its priority from
/// now on when given.
pub(crate) fn release(
    tx: &mut Tx<'_>,
    lease: &Lease,
    delay_ms: Option<u64>,
    priority: Option<u32>,
) -> Result<()> {
    let now_us = tx.now_us();
    let now = now_us / 1000;
    let (tid, job) = leased(tx, lease, now, "release")?;
    let ready_at = delay_ms.map_or(job.ready_at, |d| due_after(now_us, d));
    place(tx, tid, ready_at, job.expires_at, now);
    exec(
        tx,
        "releasing a job",
        "UPDATE jobs SET state = ?1, attempts = ?2, token = 0, deadline = 0, ready_at = ?3, \
         priority = coalesce(?4, priority) WHERE jid = ?5",
        params![
            WAITING,
            job.attempts.saturating_sub(1),
            ready_at,
            priority,
            job.jid
        ],
    )?;
    Ok(())
}

/// Extends the lease to now + `ttr_ms` (or the job's ttr); the token stays. The timer
/// entry needs no change: it is a lower bound and the deadline only moved later.
pub(crate) fn touch(tx: &mut Tx<'_>, lease: &Lease, ttr_ms: Option<u64>) -> Result<Timestamp> {
    let now = tx.now_ms();
    let (_, job) = leased(tx, lease, now, "touch")?;
    let deadline = now.saturating_add(ttr_ms.unwrap_or(job.ttr_ms));
    exec(
        tx,
        "extending a lease",
        "UPDATE jobs SET deadline = ?1 WHERE jid = ?2",
        params![deadline, job.jid],
    )?;
    Ok(Timestamp::from_millis(deadline))
}

/// Sends a reserved job to dead at once, with `reason` ('' for none) as its last error, and
/// with `priority` as its priority from now on when given (a kick keeps it).
pub(crate) fn bury(
    tx: &mut Tx<'_>,
    lease: &Lease,
    reason: &str,
    priority: Option<u32>,
) -> Result<()> {
    let now = tx.now_ms();
    let (_, job) = leased(tx, lease, now, "bury")?;
    exec(
        tx,
        "burying a job",
        "UPDATE jobs SET state = 4, token = 0, deadline = ?1, last_error = ?2, \
         priority = coalesce(?3, priority) WHERE jid = ?4",
        params![now, reason, priority, job.jid],
    )?;
    Ok(())
}
