//! Push (`sql/push.sql`): one call of `delayq.push` per run of jobs of one topic, in one
//! transaction when a batch holds several topics, or inside the caller's own transaction
//! (`push_in`, behind a savepoint). A refusal the function raises (DQ004 to DQ006, see
//! [`crate::status::Status`]) becomes the contract's error for the job it names.

use deadpool_postgres::Object;
use delayq_core::limits::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_TTR, MAX_DELAY, at_too_far, delay_ms_ceil,
};
use delayq_core::{
    Backoff, Error, Expiry, JobState, Limits, NewJob, OnConflict, OnExpire, Pushed, Result,
    Schedule, Timestamp, duration_ms,
};
use tokio_postgres::GenericClient;

use crate::error::db_err;
use crate::row::{signed, unsigned};
use crate::status::{Status, refusal};

/// push.sql's answer code of a job it created (0: kept, 2: replaced).
const CREATED: i16 = 1;
/// push.sql's answer code of a job it replaced.
const REPLACED: i16 = 2;

/// Pushes `jobs` (checked by the engine) on a pooled connection: one call, or one
/// transaction over the calls of several topics, so that a refusal in a later run leaves
/// nothing of the earlier ones.
pub(crate) async fn push_batch(
    client: &mut Object,
    jobs: &[NewJob],
    limits: &Limits,
) -> Result<Vec<Pushed>> {
    let one_topic = jobs.iter().all(|j| j.topic == jobs[0].topic);
    if one_topic {
        return push_run(&***client, jobs, limits).await;
    }
    let tx = client
        .transaction()
        .await
        .map_err(|e| db_err("starting a push", e))?;
    let out = push_run(&*tx, jobs, limits).await?;
    tx.commit()
        .await
        .map_err(|e| db_err("committing a push", e))?;
    Ok(out)
}

/// Pushes `job` (checked by the engine) inside the caller's transaction `tx`, behind a
/// savepoint: a refusal rolls back to it, leaving `tx` usable and unchanged.
pub(crate) async fn push_in(
    tx: &mut tokio_postgres::Transaction<'_>,
    job: NewJob,
    limits: &Limits,
) -> Result<Pushed> {
    let jobs = vec![job];
    let sp = tx
        .savepoint("delayq_push")
        .await
        .map_err(|e| db_err("taking a savepoint", e))?;
    match push_run(&sp, &jobs, limits).await {
        Ok(mut out) => {
            sp.commit()
                .await
                .map_err(|e| db_err("releasing a savepoint", e))?;
            out.pop()
                .ok_or_else(|| Error::Internal("push answered nothing for one job".into()))
        }
        Err(e) => {
            let _ = sp.rollback().await;
            Err(e)
        }
    }
}

/// A schedule as push.sql's `whens` value: a delay in ms, or -1 - the absolute time.
pub(crate) fn when_value(s: Schedule) -> i64 {
    match s {
        Schedule::Delay(d) => signed(delay_ms_ceil(d)),
        Schedule::At(at) => -1 - signed(at.as_millis()),
    }
}

/// Pushes `jobs` (checked already) on `client`: one call per run of jobs of one topic.
async fn push_run<C: GenericClient>(
    client: &C,
    jobs: &[NewJob],
    limits: &Limits,
) -> Result<Vec<Pushed>> {
    let stmt = client
        .prepare(
            "SELECT code, pstate, due FROM delayq.push($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .await
        .map_err(|e| db_err("pushing", e))?;
    let backoff = Backoff::default();
    let defaults: Vec<i64> = vec![
        signed(duration_ms(DEFAULT_TTR)),
        i64::from(DEFAULT_MAX_ATTEMPTS),
        signed(backoff.base_ms()),
        i64::from(backoff.factor()),
        signed(backoff.max_ms()),
        i64::from(backoff.jitter_permille()),
        signed(duration_ms(MAX_DELAY)),
    ];
    let max_body = i64::try_from(limits.max_body).unwrap_or(i64::MAX);
    let mut out = Vec::with_capacity(jobs.len());
    let mut start = 0;
    while start < jobs.len() {
        let topic = &jobs[start].topic;
        let end = jobs[start..]
            .iter()
            .position(|j| &j.topic != topic)
            .map_or(jobs.len(), |n| start + n);
        let run = &jobs[start..end];
        let ids: Vec<&str> = run.iter().map(|j| j.id.as_str()).collect();
        let bodies: Vec<&[u8]> = run.iter().map(|j| j.body.as_ref()).collect();
        let priorities: Vec<i64> = run.iter().map(|j| i64::from(j.priority)).collect();
        let whens: Vec<i64> = run.iter().map(|j| when_value(j.schedule)).collect();
        let ttrs: Vec<Option<i64>> = run
            .iter()
            .map(|j| j.ttr.map(|t| signed(duration_ms(t))))
            .collect();
        let maxes: Vec<Option<i64>> = run.iter().map(|j| j.max_attempts.map(i64::from)).collect();
        let part = |f: fn(&Backoff) -> i64| -> Vec<Option<i64>> {
            run.iter().map(|j| j.backoff.as_ref().map(f)).collect()
        };
        let bo_bases = part(|b| signed(b.base_ms()));
        let bo_factors = part(|b| i64::from(b.factor()));
        let bo_maxes = part(|b| signed(b.max_ms()));
        let bo_jitters = part(|b| i64::from(b.jitter_permille()));
        let conflicts: Vec<i16> = run
            .iter()
            .map(|j| match j.on_conflict {
                OnConflict::Keep => 0,
                OnConflict::Replace => 1,
                OnConflict::Debounce { .. } => 2,
            })
            .collect();
        let max_waits: Vec<Option<i64>> = run
            .iter()
            .map(|j| match j.on_conflict {
                OnConflict::Debounce { max_wait } => max_wait.map(|w| signed(delay_ms_ceil(w))),
                _ => None,
            })
            .collect();
        let expiries: Vec<Option<i64>> = run
            .iter()
            .map(|j| {
                j.expiry.map(|e| match e {
                    Expiry::AfterDue(d) => signed(duration_ms(d)),
                    Expiry::At(at) => -1 - signed(at.as_millis()),
                })
            })
            .collect();
        let on_expires: Vec<i16> = run
            .iter()
            .map(|j| match j.on_expire {
                OnExpire::Dead => 0,
                OnExpire::Drop => 1,
            })
            .collect();
        let rows = client
            .query(
                &stmt,
                &[
                    &topic.as_str(),
                    &ids,
                    &bodies,
                    &priorities,
                    &whens,
                    &ttrs,
                    &maxes,
                    &bo_bases,
                    &bo_factors,
                    &bo_maxes,
                    &bo_jitters,
                    &conflicts,
                    &max_waits,
                    &expiries,
                    &on_expires,
                    &defaults,
                    &max_body,
                ],
            )
            .await
            .map_err(|e| push_refusal(e, run))?;
        if rows.len() != run.len() {
            return Err(Error::Internal(format!(
                "push answered {} rows for {} jobs",
                rows.len(),
                run.len()
            )));
        }
        for (job, r) in run.iter().zip(&rows) {
            let code: i16 = r.get(0);
            out.push(Pushed {
                id: job.id.clone(),
                created: code == CREATED,
                replaced: code == REPLACED,
                state: JobState::from_code(i64::from(r.get::<_, i16>(1)))?,
                ready_at: Timestamp::from_millis(unsigned(r.get(2), "due time")?),
            });
        }
        start = end;
    }
    Ok(out)
}

/// A push's error: a refusal of push.sql as the contract's error for the job it names
/// (the DETAIL's first number is the job's index in `run`).
fn push_refusal(e: tokio_postgres::Error, run: &[NewJob]) -> Error {
    let Some(refused) = refusal(&e) else {
        return db_err("pushing", e);
    };
    let numbers = &refused.numbers;
    let job = numbers
        .first()
        .and_then(|&i| usize::try_from(i).ok())
        .and_then(|i| run.get(i));
    let (Some(job), Some(&value)) = (job, numbers.get(1)) else {
        return Error::Internal(format!("push refused with {:?} and no job", refused.status));
    };
    match refused.status {
        Status::TooFar => match job.schedule {
            Schedule::At(at) => at_too_far(at, Timestamp::from_millis(value)),
            Schedule::Delay(_) => Error::Internal("push refused a delay as too far".into()),
        },
        Status::BodyTooLarge => Error::BodyTooLarge {
            size: job.body.len(),
            limit: usize::try_from(value).unwrap_or(usize::MAX),
        },
        Status::ExpiryNotAfterDue => match job.check_expiry(Timestamp::from_millis(value)) {
            Err(e) => e,
            Ok(()) => Error::Internal("push refused an expiry the job's checks accept".into()),
        },
        other => Error::Internal(format!("push refused with {other:?}")),
    }
}
