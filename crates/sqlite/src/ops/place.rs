//! The steps several operations share, as `place` and `fail` in the Redis engine's
//! `lua/lib.lua`: putting a job in the waiting state, and failing a delivery.

use delayq_core::limits::due_after;
use delayq_core::{Result, duration_ms};
use rusqlite::params;

use super::exec;
use crate::row::{DEAD, Meta, WAITING};
use crate::shared::Effect;
use crate::timers::Kind;
use crate::tx::Tx;

/// Records what a job of topic `tid` waiting from now on for `ready_at` means at `now`: a
/// waiter to wake when it is due already, else a timer entry for its due time; and a timer
/// entry for its expiry when it has one (`expires_at` > 0). The caller writes the row with
/// state [`WAITING`]; the job needs no other write when it falls due.
pub(crate) fn place(tx: &mut Tx<'_>, tid: i64, ready_at: u64, expires_at: u64, now: u64) {
    if ready_at <= now {
        tx.effect(Effect::Ready(tid, 1));
    } else {
        tx.effect(Effect::Note(tid, Kind::Due, ready_at));
    }
    if expires_at > 0 {
        tx.effect(Effect::Note(tid, Kind::Expiry, expires_at));
    }
}

/// A delivery failed at `now` ms (a lease that ran out, found by a reading in whole ms): as
/// [`fail_us`] at the start of that millisecond, so the back-off counts from `now` exactly.
pub(crate) fn fail(
    tx: &mut Tx<'_>,
    tid: i64,
    job: &Meta,
    now: u64,
    delay_ms: Option<u64>,
    reason: &str,
) -> Result<Option<u64>> {
    fail_us(tx, tid, job, now.saturating_mul(1000), delay_ms, reason)
}

/// A delivery failed at `now_us` (µs, the operation's one clock reading: a nack's): the job
/// is retried after `delay_ms` (or its back-off after `attempts` failures) counted from
/// `now_us` rounded up to the millisecond ([`due_after`]: never early), or goes dead when
/// every attempt is used. The lease is cleared and `reason` kept ('' for none). Returns the
/// new due time, or `None` when the job went dead.
pub(crate) fn fail_us(
    tx: &mut Tx<'_>,
    tid: i64,
    job: &Meta,
    now_us: u64,
    delay_ms: Option<u64>,
    reason: &str,
) -> Result<Option<u64>> {
    let now = now_us / 1000;
    if job.attempts >= job.max_attempts {
        exec(
            tx,
            "sending a job to dead",
            "UPDATE jobs SET state = ?1, token = 0, deadline = ?2, last_error = ?3 WHERE jid = ?4",
            params![DEAD, now, reason, job.jid],
        )?;
        return Ok(None);
    }
    let delay = delay_ms
        .unwrap_or_else(|| duration_ms(job.backoff.delay(job.attempts, rand::random::<f64>())));
    let ready_at = due_after(now_us, delay);
    place(tx, tid, ready_at, job.expires_at, now);
    exec(
        tx,
        "scheduling a retry",
        "UPDATE jobs SET state = ?1, ready_at = ?2, token = 0, deadline = 0, last_error = ?3 \
         WHERE jid = ?4",
        params![WAITING, ready_at, reason, job.jid],
    )?;
    Ok(Some(ready_at))
}
