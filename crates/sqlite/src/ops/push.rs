//! Push, as the Redis engine's `lua/push.lua`: creates jobs, idempotent on `(topic, id)`.

use delayq_core::limits::{delay_ms_ceil, due_after};
use delayq_core::{
    Backoff, Expiry, NewJob, OnConflict, Pushed, Result, Schedule, Timestamp, TopicConfig,
    duration_ms, expiry_before_due,
};

use crate::row::on_expire_code;
use rusqlite::{OptionalExtension, Statement, params};

use super::done;
use super::place::place;
use crate::error::db_err;
use crate::row::{WAITING, state_of};
use crate::tx::Tx;

/// The due time of `schedule` pushed (or rescheduled) at `now_us` (µs): the delay after it
/// as [`due_after`] rounds (never early), or the absolute time but never before now.
pub(crate) fn due_time(schedule: Schedule, now_us: u64) -> u64 {
    match schedule {
        Schedule::Delay(d) => due_after(now_us, delay_ms_ceil(d)),
        Schedule::At(at) => at.as_millis().max(now_us / 1000),
    }
}

/// The stored expiry of `job` once due at `ready_at` ms: 0 for none.
fn expiry_ms(job: &NewJob, ready_at: u64) -> u64 {
    job.expires_at(Timestamp::from_millis(ready_at))
        .map_or(0, |t| t.as_millis())
}

/// What a push stores of one job: parameters ?1 to ?14, the same in the `INSERT` that
/// creates it and the `UPDATE` that replaces it (which keeps the rest: state, creation
/// time, attempts, lease and last error).
#[derive(Clone, Copy)]
struct Stored<'j> {
    tid: i64,
    job: &'j NewJob,
    ready_at: u64,
    seq: u64,
    ttr_ms: u64,
    max_attempts: u32,
    backoff: Backoff,
    expires_at: u64,
}

impl Stored<'_> {
    /// Binds ?1 to ?14 of `stmt`: tid, id, priority, ready_at, seq, ttr_ms, max_attempts,
    /// the four back-off columns, body, expires_at, on_expire.
    fn bind(&self, stmt: &mut Statement<'_>) -> rusqlite::Result<()> {
        let (job, b) = (self.job, &self.backoff);
        stmt.raw_bind_parameter(1, self.tid)?;
        stmt.raw_bind_parameter(2, job.id.as_str())?;
        stmt.raw_bind_parameter(3, job.priority)?;
        stmt.raw_bind_parameter(4, self.ready_at)?;
        stmt.raw_bind_parameter(5, self.seq)?;
        stmt.raw_bind_parameter(6, self.ttr_ms)?;
        stmt.raw_bind_parameter(7, self.max_attempts)?;
        stmt.raw_bind_parameter(8, b.base_ms())?;
        stmt.raw_bind_parameter(9, b.factor())?;
        stmt.raw_bind_parameter(10, b.max_ms())?;
        stmt.raw_bind_parameter(11, b.jitter_permille())?;
        stmt.raw_bind_parameter(12, job.body.as_ref())?;
        stmt.raw_bind_parameter(13, self.expires_at)?;
        stmt.raw_bind_parameter(14, on_expire_code(job.on_expire))
    }
}

/// Creates each job whose id is free (or a done job's) in its topic and answers in order; what a job leaves
/// unset comes from its topic's committed settings (the registry's), else the built-in
/// defaults. A job whose id
/// exists (in any state but done, or earlier in the same batch) is left untouched and answered with
/// `created: false`, its state and due time, unless the push says replace or debounce
/// ([`OnConflict`]) and the job is waiting: then its body, due time (a debounce's bounded
/// by its max wait from the job's creation) and options are rewritten, its attempts,
/// creation time and last error kept, and it is answered `replaced: true`. The caller validated the batch, absolute times
/// included; only an absolute expiry is checked again, before anything is written, against
/// the due time this push gives its job ([`expiry_before_due`]): the caller's check read the
/// clock earlier, and a delay counts from this push's time rounded up.
pub(crate) fn push(tx: &mut Tx<'_>, jobs: &[NewJob]) -> Result<Vec<Pushed>> {
    let now_us = tx.now_us();
    let now = now_us / 1000;
    for job in jobs {
        if let Some(Expiry::At(at)) = job.expiry
            && at.as_millis() <= due_time(job.schedule, now_us)
        {
            return Err(expiry_before_due());
        }
    }
    let mut out = Vec::with_capacity(jobs.len());
    // The jobs this batch created or replaced, which later duplicates in it leave alone.
    let mut pushed_here: std::collections::HashSet<(i64, &str)> = std::collections::HashSet::new();
    // The settings of the topic of the previous job (jobs of a batch mostly share one).
    let mut config: Option<(i64, TopicConfig)> = None;
    // One prepared INSERT for the whole batch (a cache lookup per job costs about a
    // twentieth of the insert itself).
    let conn = tx.conn;
    let mut insert_job = conn
        .prepare_cached(
            "INSERT INTO jobs (tid, id, priority, ready_at, seq, ttr_ms, max_attempts, \
             bo_base_ms, bo_factor, bo_max_ms, bo_jitter, body, expires_at, on_expire, state, \
             created_at, attempts, token, deadline, last_error) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, 0, \
             0, 0, '') \
             ON CONFLICT (tid, id) DO NOTHING",
        )
        .map_err(|e| db_err("inserting a job", e))?;
    for job in jobs {
        let tid = tx.topic_or_create(&job.topic, true)?;
        let topic = match &config {
            Some((t, c)) if *t == tid => c,
            _ => &config.insert((tid, tx.shared.registry.config(tid))).1,
        };
        let (ttr, max_attempts, backoff) = (
            topic.ttr_of(job),
            topic.max_attempts_of(job),
            topic.backoff_of(job),
        );
        let ready_at = due_time(job.schedule, now_us);
        let expires_at = expiry_ms(job, ready_at);
        let seq = tx.peek_seq(tid)?;
        let stored = Stored {
            tid,
            job,
            ready_at,
            seq,
            ttr_ms: duration_ms(ttr),
            max_attempts,
            backoff,
            expires_at,
        };
        let mut insert = || {
            stored
                .bind(&mut insert_job)
                .and_then(|()| insert_job.raw_bind_parameter(15, WAITING))
                .and_then(|()| insert_job.raw_bind_parameter(16, now))
                .and_then(|()| insert_job.raw_execute())
                .map(|n| n == 1)
                .map_err(|e| db_err("inserting a job", e))
        };
        // A done job holds no id: when the id is a done job's, it goes and the push creates.
        let created = insert()? || (done::forget(tx, tid, job.id.as_str())?.is_some() && insert()?);
        if created {
            pushed_here.insert((tid, job.id.as_str()));
            tx.list_topic(tid)?;
            tx.next_seq(tid)?;
            place(tx, tid, ready_at, expires_at, now);
            out.push(Pushed {
                id: job.id.clone(),
                created,
                replaced: false,
                state: state_of(WAITING, ready_at, now)?,
                ready_at: Timestamp::from_millis(ready_at),
            });
            continue;
        }
        let (state, old_ready_at, created_at): (i64, u64, u64) = tx
            .conn
            .prepare_cached(
                "SELECT state, ready_at, created_at FROM jobs WHERE tid = ?1 AND id = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![tid, job.id.as_str()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
            })
            .map_err(|e| db_err("reading an existing job", e))?
            .ok_or_else(|| {
                delayq_core::Error::Internal(format!(
                    "job {} in topic {} was refused as existing but cannot be read",
                    job.id, job.topic
                ))
            })?;
        // Replace or debounce a waiting job (never a reserved or dead one, nor one this
        // batch pushed already: a later duplicate sees the first, as on Redis).
        if job.on_conflict != OnConflict::Keep
            && state == WAITING
            && !pushed_here.contains(&(tid, job.id.as_str()))
        {
            let ready_at = match job.on_conflict {
                OnConflict::Debounce { max_wait: Some(w) } => ready_at
                    .min(created_at.saturating_add(delay_ms_ceil(w)))
                    .max(now),
                _ => ready_at,
            };
            let expires_at = expiry_ms(job, ready_at);
            let seq = tx.next_seq(tid)?;
            let stored = Stored {
                ready_at,
                seq,
                expires_at,
                ..stored
            };
            tx.conn
                .prepare_cached(
                    "UPDATE jobs SET priority = ?3, ready_at = ?4, seq = ?5, ttr_ms = ?6, \
                     max_attempts = ?7, bo_base_ms = ?8, bo_factor = ?9, bo_max_ms = ?10, \
                     bo_jitter = ?11, body = ?12, expires_at = ?13, on_expire = ?14 \
                     WHERE tid = ?1 AND id = ?2",
                )
                .and_then(|mut s| {
                    stored.bind(&mut s)?;
                    s.raw_execute()
                })
                .map_err(|e| db_err("replacing a job", e))?;
            place(tx, tid, ready_at, expires_at, now);
            pushed_here.insert((tid, job.id.as_str()));
            out.push(Pushed {
                id: job.id.clone(),
                created: false,
                replaced: true,
                state: state_of(WAITING, ready_at, now)?,
                ready_at: Timestamp::from_millis(ready_at),
            });
            continue;
        }
        out.push(Pushed {
            id: job.id.clone(),
            created,
            replaced: false,
            state: state_of(state, old_ready_at, now)?,
            ready_at: Timestamp::from_millis(old_ready_at),
        });
    }
    Ok(out)
}
