//! The operations on jobs by id and on whole topics: get, delete, reschedule, kick,
//! kick-all, bury without a lease, reserve by id, list (with its cursor), stats, topics and
//! purge; each one call of a function of `sql/admin.sql` (get and topics a plain query);
//! and the database's clock. The functions on one job by id answer (status, pstate):
//! [`by_id_answer`] turns the status into the contract's refusal.

use std::time::Duration;

use deadpool_postgres::Object;
use delayq_core::limits::{MAX_DELAY, at_too_far, check_count};
use delayq_core::{
    Cursor, Delivery, Error, Job, JobId, JobState, ListKey, Page, Result, Schedule, Timestamp,
    Topic, TopicStats, duration_ms,
};
use tokio_postgres::types::ToSql;

use crate::error::db_err;
use crate::ops::push::when_value;
use crate::ops::query;
use crate::row::{JOB_COLS, RawJob, STORED_DEAD, STORED_DONE, STORED_RESERVED, signed, unsigned};
use crate::status::{Refusal, Status, refusal};

/// Reads a job in any state; a done job only while its topic's retention keeps it.
pub(crate) async fn get(client: &Object, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT delayq.public_state(j.state, j.ready_at, n.now), {JOB_COLS} \
             FROM delayq.topics t JOIN delayq.jobs j USING (tid), \
                  (SELECT delayq.now_ms() AS now) n \
             WHERE t.name = $1 AND j.id = $2 \
               AND (j.state <> 5 OR (t.cfg_done_age_ms IS NOT NULL \
                    AND j.deadline > n.now - t.cfg_done_age_ms))"
        ))
        .await
        .map_err(|err| db_err("reading a job", err))?;
    let Some(row) = client
        .query_opt(&stmt, &[&topic.as_str(), &id.as_str()])
        .await
        .map_err(|err| db_err("reading a job", err))?
    else {
        return Ok(None);
    };
    let state = JobState::from_code(i64::from(row.get::<_, i16>(0)))?;
    RawJob::read(&row, 1)?.into_job(topic, state).map(Some)
}

/// Deletes a job in any state; false when there was none (a done job no longer kept counts
/// as none).
pub(crate) async fn delete(client: &Object, topic: &Topic, id: &JobId) -> Result<bool> {
    let stmt = client
        .prepare_cached("SELECT delayq.delete_job($1, $2)")
        .await
        .map_err(|err| db_err("deleting a job", err))?;
    let row = client
        .query_one(&stmt, &[&topic.as_str(), &id.as_str()])
        .await
        .map_err(|err| db_err("deleting a job", err))?;
    Ok(row.get(0))
}

/// A job-by-id function's (status, pstate) as the contract's answer: NOT_FOUND, or
/// WRONG_STATE as `wrong` names it for the job's public state.
fn by_id_answer(
    topic: &Topic,
    id: &JobId,
    (status, pstate): (i16, i16),
    operation: &str,
    wrong: fn(&Topic, &JobId, JobState) -> Error,
) -> Result<()> {
    match Status::from_code(status, operation)? {
        Status::Ok => Ok(()),
        Status::NotFound => Err(Error::NotFound {
            topic: topic.clone(),
            id: id.clone(),
        }),
        Status::WrongState => Err(wrong(topic, id, JobState::from_code(i64::from(pstate))?)),
        other => Err(Error::Internal(format!(
            "{operation} answered status {other:?}"
        ))),
    }
}

/// Calls a job-by-id function of admin.sql that answers (status, pstate) and nothing else.
async fn by_id_call(
    client: &Object,
    (topic, id): (&Topic, &JobId),
    (operation, doing): (&str, &str),
    sql: &str,
    extra: &[&(dyn ToSql + Sync)],
    wrong: fn(&Topic, &JobId, JobState) -> Error,
) -> Result<()> {
    let stmt = client
        .prepare_cached(sql)
        .await
        .map_err(|err| db_err(doing, err))?;
    let (t, i) = (topic.as_str(), id.as_str());
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&t, &i];
    params.extend_from_slice(extra);
    let row = client
        .query_one(&stmt, &params)
        .await
        .map_err(|err| db_err(doing, err))?;
    by_id_answer(topic, id, (row.get(0), row.get(1)), operation, wrong)
}

/// Moves a delayed or ready job to a new due time (at least now); an absolute time more
/// than [`MAX_DELAY`] ahead of the database's clock is refused, changing nothing.
pub(crate) async fn reschedule(
    client: &Object,
    topic: &Topic,
    id: &JobId,
    when: Schedule,
) -> Result<Timestamp> {
    const DOING: &str = "rescheduling a job";
    let value = when_value(when);
    let max_delay = signed(duration_ms(MAX_DELAY));
    let stmt = client
        .prepare_cached("SELECT status, pstate, due FROM delayq.reschedule($1, $2, $3, $4)")
        .await
        .map_err(|err| db_err(DOING, err))?;
    let row = client
        .query_one(&stmt, &[&topic.as_str(), &id.as_str(), &value, &max_delay])
        .await
        .map_err(|err| match (refusal(&err), when) {
            (
                Some(Refusal {
                    status: Status::TooFar,
                    numbers,
                }),
                Schedule::At(at),
            ) => at_too_far(
                at,
                Timestamp::from_millis(numbers.first().copied().unwrap_or_default()),
            ),
            _ => db_err(DOING, err),
        })?;
    by_id_answer(
        topic,
        id,
        (row.get(0), row.get(1)),
        "reschedule",
        Error::cannot_reschedule,
    )?;
    Ok(Timestamp::from_millis(unsigned(row.get(2), "due time")?))
}

/// Makes a dead job ready now, its attempts reset to 0.
pub(crate) async fn kick(client: &Object, topic: &Topic, id: &JobId) -> Result<()> {
    by_id_call(
        client,
        (topic, id),
        ("kick", "kicking a job"),
        "SELECT status, pstate FROM delayq.kick($1, $2)",
        &[],
        Error::cannot_kick,
    )
    .await
}

/// The most dead jobs one call of `delayq.kick_dead` kicks (one transaction each).
const KICK_CHUNK: i32 = 1000;

/// Kicks every dead job of a topic in rounds of [`KICK_CHUNK`], each its own transaction.
/// Jobs that die while the rounds run may be kicked too; the rounds stop at the first short
/// one, or after as many as the dead jobs left after the first round need, plus one, so
/// that a topic whose jobs keep dying cannot keep this call going.
pub(crate) async fn kick_all(client: &Object, topic: &Topic) -> Result<u64> {
    const DOING: &str = "kicking dead jobs";
    let stmt = client
        .prepare_cached("SELECT delayq.kick_dead($1, $2)")
        .await
        .map_err(|err| db_err(DOING, err))?;
    let chunk = u64::from(KICK_CHUNK.unsigned_abs());
    let mut total = 0;
    let mut rounds: Option<u64> = None;
    loop {
        let row = client
            .query_one(&stmt, &[&topic.as_str(), &KICK_CHUNK])
            .await
            .map_err(|err| db_err(DOING, err))?;
        let kicked = unsigned(row.get(0), "count")?;
        total += kicked;
        if kicked < chunk {
            return Ok(total);
        }
        let left = match rounds {
            Some(left) => left,
            None => {
                let row = client
                    .query_one("SELECT delayq.count_dead($1)", &[&topic.as_str()])
                    .await
                    .map_err(|err| db_err("counting dead jobs", err))?;
                unsigned(row.get(0), "count")? / chunk + 1
            }
        };
        if left == 0 {
            return Ok(total);
        }
        rounds = Some(left - 1);
    }
}

/// Sends a delayed or ready job to dead now, without a lease, with `reason` as its last
/// error (checked by the engine).
pub(crate) async fn bury_waiting(
    client: &Object,
    topic: &Topic,
    id: &JobId,
    reason: Option<String>,
) -> Result<()> {
    let reason = reason.unwrap_or_default();
    by_id_call(
        client,
        (topic, id),
        ("bury", "burying a job"),
        "SELECT status, pstate FROM delayq.bury_waiting($1, $2, $3)",
        &[&reason],
        Error::cannot_bury_waiting,
    )
    .await
}

/// Leases a delayed, ready or dead job by its id, now, as a reserve would lease it.
pub(crate) async fn reserve_job(client: &Object, topic: &Topic, id: &JobId) -> Result<Delivery> {
    const DOING: &str = "reserving a job by its id";
    let stmt = client
        .prepare_cached(&format!(
            "SELECT status, pstate, token, now_us, {JOB_COLS} FROM delayq.reserve_job($1, $2)"
        ))
        .await
        .map_err(|err| db_err(DOING, err))?;
    let row = client
        .query_one(&stmt, &[&topic.as_str(), &id.as_str()])
        .await
        .map_err(|err| db_err(DOING, err))?;
    by_id_answer(
        topic,
        id,
        (row.get(0), row.get(1)),
        "reserve_job",
        Error::cannot_reserve_job,
    )?;
    let col = |err: tokio_postgres::Error| Error::Internal(format!("reserve_job's answer: {err}"));
    let token: i64 = row.try_get(2).map_err(col)?;
    let now_us: i64 = row.try_get(3).map_err(col)?;
    RawJob::read(&row, 4)?.into_delivery(topic, token, now_us)
}

/// The key of `job` in a listing of `state` (the cursor a page ends with).
fn key_of(job: &RawJob, state: JobState) -> Result<ListKey> {
    Ok(match state {
        JobState::Ready => ListKey::Ready(
            u32::try_from(job.priority).map_err(|_| {
                Error::Internal(format!(
                    "a stored priority is out of range: {}",
                    job.priority
                ))
            })?,
            unsigned(job.ready_at, "due time")?,
            unsigned(job.seq, "push order")?,
        ),
        JobState::Delayed => ListKey::TimeId(unsigned(job.ready_at, "due time")?, job.id.clone()),
        _ => ListKey::TimeId(unsigned(job.deadline, "deadline")?, job.id.clone()),
    })
}

/// One page of the jobs in `state`, after `after`, in the state's order (done: only those
/// the topic's retention keeps).
pub(crate) async fn list(
    client: &Object,
    topic: &Topic,
    state: JobState,
    limit: usize,
    after: Option<&Cursor>,
) -> Result<Page> {
    check_count("limit", limit)?;
    let key = ListKey::resume(after, state)?;
    // One more than a page, to learn whether another follows.
    let fetch = i32::try_from(limit + 1).unwrap_or(i32::MAX);
    let name = topic.as_str();
    let rows = match (&key, state) {
        (ListKey::Ready(p, due, seq), _) => {
            let sql = format!("SELECT {JOB_COLS} FROM delayq.list_ready($1, $2, $3, $4, $5)");
            let (p, due, seq) = (i64::from(*p), signed(*due), signed(*seq));
            query(
                client,
                "listing jobs",
                &sql,
                &[&name, &p, &due, &seq, &fetch],
            )
            .await?
        }
        (ListKey::TimeId(t, id), JobState::Delayed) => {
            let sql = format!("SELECT {JOB_COLS} FROM delayq.list_delayed($1, $2, $3, $4)");
            query(
                client,
                "listing jobs",
                &sql,
                &[&name, &signed(*t), id, &fetch],
            )
            .await?
        }
        (ListKey::TimeId(t, id), _) => {
            let stored = match state {
                JobState::Reserved => STORED_RESERVED,
                JobState::Done => STORED_DONE,
                _ => STORED_DEAD,
            };
            let sql = format!("SELECT {JOB_COLS} FROM delayq.list_timed($1, $2, $3, $4, $5)");
            query(
                client,
                "listing jobs",
                &sql,
                &[&name, &stored, &signed(*t), id, &fetch],
            )
            .await?
        }
    };
    let mut keyed = Vec::with_capacity(rows.len());
    for r in &rows {
        let raw = RawJob::read(r, 0)?;
        keyed.push((key_of(&raw, state)?, raw));
    }
    // The functions answer in this order already; sorting again costs little and does not
    // depend on how PostgreSQL hands a function's rows on.
    keyed.sort_by(|(a, _), (b, _)| a.cmp(b));
    ListKey::page(state, limit, keyed, |raw| raw.into_job(topic, state))
}

/// Counts per state, the age of the oldest due job, the next due time, the expired leases
/// and jobs counted since the topic was created or purged, and the end of its pause.
pub(crate) async fn stats(client: &Object, topic: &Topic) -> Result<TopicStats> {
    const DOING: &str = "reading stats";
    let stmt = client
        .prepare_cached(
            "SELECT delayed, ready, reserved, dead, done, oldest_due, next_due, expired, \
             expired_jobs, paused_until, now_ms FROM delayq.stats($1)",
        )
        .await
        .map_err(|err| db_err(DOING, err))?;
    let row = client
        .query_one(&stmt, &[&topic.as_str()])
        .await
        .map_err(|err| db_err(DOING, err))?;
    let count = |i: usize| unsigned(row.get(i), "count");
    let time = |i: usize, what: &str| -> Result<Option<u64>> {
        row.get::<_, Option<i64>>(i)
            .map(|v| unsigned(v, what))
            .transpose()
    };
    let now = unsigned(row.get(10), "clock")?;
    Ok(TopicStats {
        delayed: count(0)?,
        ready: count(1)?,
        reserved: count(2)?,
        dead: count(3)?,
        done: count(4)?,
        oldest_overdue: time(5, "due time")?
            .map(|due| Duration::from_millis(now.saturating_sub(due))),
        next_due: time(6, "due time")?.map(Timestamp::from_millis),
        expired_leases: count(7)?,
        expired_jobs: count(8)?,
        // A pause until resumed is stored as i64::MAX; every end delayq writes otherwise is
        // at most 10 years ahead, far below NEVER.
        paused_until: time(9, "pause end")?
            .map(|until| Timestamp::from_millis(until.min(Timestamp::NEVER.as_millis()))),
    })
}

/// Every listed topic (pushed to since it was created or last purged) and every topic
/// paused now, jobs or not, sorted bytewise.
pub(crate) async fn topics(client: &Object) -> Result<Vec<Topic>> {
    let rows = client
        .query(
            "SELECT name FROM delayq.topics WHERE listed OR paused_until > (SELECT delayq.now_ms()) \
             ORDER BY name COLLATE \"C\"",
            &[],
        )
        .await
        .map_err(|err| db_err("listing topics", err))?;
    rows.iter()
        .map(|r| {
            Topic::new(r.get::<_, String>(0))
                .map_err(|err| Error::Internal(format!("a stored topic name is invalid: {err}")))
        })
        .collect()
}

/// Removes every job of a topic (done ones too) and takes it off the topic list; answers
/// how many jobs.
pub(crate) async fn purge(client: &Object, topic: &Topic) -> Result<u64> {
    let row = client
        .query_one("SELECT delayq.purge($1)", &[&topic.as_str()])
        .await
        .map_err(|err| db_err("purging a topic", err))?;
    unsigned(row.get(0), "count")
}

/// Now on the database's clock.
pub(crate) async fn now(client: &Object) -> Result<Timestamp> {
    let row = client
        .query_one("SELECT delayq.now_ms()", &[])
        .await
        .map_err(|e| db_err("reading the clock", e))?;
    Ok(Timestamp::from_millis(unsigned(row.get(0), "clock")?))
}
