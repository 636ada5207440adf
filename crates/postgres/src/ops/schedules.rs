//! Stored schedules: one row each of `delayq.schedules`, its columns `ScheduleParts` as the
//! embedded engine stores them (the back-off's four parts all NULL: none; misfire 0 skip,
//! 1 once, 2 each; on_expire 0 dead, 1 drop). The writes that must stay right between
//! processes (a put of a schedule, a record of its progress) are functions of
//! `sql/store.sql`; every other operation is one plain statement. A stored value delayq did
//! not write is decoded as [`Error::Internal`].

use deadpool_postgres::Object;
use delayq_core::{
    Bytes, Error, JobSchedule, Result, ScheduleName, ScheduleParts, StoredSchedule, Timestamp,
};
use tokio_postgres::Row;

use crate::ops::{one, query};
use crate::row::{signed, unsigned};

/// The columns a schedule is read from, in [`decode_schedule`]'s order.
const SCHEDULE_COLS: &str = "name, revision, through, cron, time_zone, topic, body, priority, \
     ttr_ms, max_attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, start_ms, end_ms, \
     jitter_ms, misfire, misfire_limit, max_lateness_ms, expires_at_ms, on_expire";

/// Creates or replaces a schedule (validated by the caller) and answers its new revision
/// (`delayq.put_schedule`: 1, then one more at each put; progress cleared).
pub(crate) async fn put_schedule(client: &Object, schedule: &JobSchedule) -> Result<u64> {
    let what = "putting a schedule";
    let p = schedule.parts();
    let b = p.backoff;
    let opt = |v: Option<u64>| v.map(signed);
    let rows = query(
        client,
        what,
        "SELECT delayq.put_schedule($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
         $14, $15, $16, $17, $18, $19, $20)",
        &[
            &schedule.name().as_str(),
            &p.cron,
            &p.time_zone,
            &p.topic,
            &p.body.as_ref(),
            &i64::from(p.priority),
            &opt(p.ttr_ms),
            &p.max_attempts.map(i64::from),
            &b.map(|b| signed(b.0)),
            &b.map(|b| i64::from(b.1)),
            &b.map(|b| signed(b.2)),
            &b.map(|b| i64::from(b.3)),
            &opt(p.start_ms),
            &opt(p.end_ms),
            &signed(p.jitter_ms),
            &i32::from(p.misfire),
            &i64::from(p.misfire_limit),
            &opt(p.max_lateness_ms),
            &opt(p.expires_at_ms),
            &i32::from(p.on_expire),
        ],
    )
    .await?;
    let revision: i64 = one(rows, what)?
        .try_get(0)
        .map_err(|err| Error::Internal(format!("{what}: {err}")))?;
    unsigned(revision, "schedule revision")
}

/// One schedule, if it exists.
pub(crate) async fn schedule(
    client: &Object,
    name: &ScheduleName,
) -> Result<Option<StoredSchedule>> {
    let rows = query(
        client,
        "reading a schedule",
        &format!("SELECT {SCHEDULE_COLS} FROM delayq.schedules WHERE name = $1"),
        &[&name.as_str()],
    )
    .await?;
    rows.first().map(decode_schedule).transpose()
}

/// Every schedule, by name (bytewise, as the other engines sort them).
pub(crate) async fn schedules(client: &Object) -> Result<Vec<StoredSchedule>> {
    let rows = query(
        client,
        "listing schedules",
        &format!("SELECT {SCHEDULE_COLS} FROM delayq.schedules ORDER BY name COLLATE \"C\""),
        &[],
    )
    .await?;
    rows.iter().map(decode_schedule).collect()
}

/// Deletes a schedule and answers what it was (`None`: there was none); the jobs it pushed
/// stay.
pub(crate) async fn delete_schedule(
    client: &Object,
    name: &ScheduleName,
) -> Result<Option<StoredSchedule>> {
    let rows = query(
        client,
        "deleting a schedule",
        &format!("DELETE FROM delayq.schedules WHERE name = $1 RETURNING {SCHEDULE_COLS}"),
        &[&name.as_str()],
    )
    .await?;
    rows.first().map(decode_schedule).transpose()
}

/// Records that `name`'s fires up to `through` were pushed, when it is still at `revision`
/// and `through` is later than what it records (`delayq.schedule_pushed`); answers whether
/// it did.
pub(crate) async fn schedule_pushed(
    client: &Object,
    name: &ScheduleName,
    revision: u64,
    through: Timestamp,
) -> Result<bool> {
    // A revision past i64::MAX was never stored: no such revision records anything.
    let Ok(revision) = i64::try_from(revision) else {
        return Ok(false);
    };
    let what = "recording a schedule's progress";
    let rows = query(
        client,
        what,
        "SELECT delayq.schedule_pushed($1, $2, $3)",
        &[&name.as_str(), &revision, &signed(through.as_millis())],
    )
    .await?;
    one(rows, what)?
        .try_get(0)
        .map_err(|err| Error::Internal(format!("{what}: {err}")))
}

/// A schedule row of [`SCHEDULE_COLS`], checked as the embedded engine checks its rows (a
/// row that no longer makes a valid schedule is an internal error, naming the schedule).
fn decode_schedule(r: &Row) -> Result<StoredSchedule> {
    let name: String = r
        .try_get(0)
        .map_err(|err| Error::Internal(format!("a schedule row: {err}")))?;
    let bad = |why: String| Error::Internal(format!("stored schedule {name} is invalid: {why}"));
    let get = |err: tokio_postgres::Error| bad(err.to_string());
    let count = |v: i64, what: &str| unsigned(v, what).map_err(|err| bad(err.to_string()));
    let small = |v: i64, what: &str| {
        u32::try_from(v).map_err(|_| bad(format!("its {what} {v} is out of range")))
    };
    let opt_count = |v: Option<i64>, what: &str| v.map(|v| count(v, what)).transpose();

    let revision: i64 = r.try_get(1).map_err(get)?;
    let through: Option<i64> = r.try_get(2).map_err(get)?;
    let body: Vec<u8> = r.try_get(6).map_err(get)?;
    let max_attempts: Option<i64> = r.try_get(9).map_err(get)?;
    let backoff: [Option<i64>; 4] = [
        r.try_get(10).map_err(get)?,
        r.try_get(11).map_err(get)?,
        r.try_get(12).map_err(get)?,
        r.try_get(13).map_err(get)?,
    ];
    let backoff = match backoff {
        [Some(base), Some(factor), Some(max), Some(jitter)] => Some((
            count(base, "back-off")?,
            small(factor, "back-off factor")?,
            count(max, "back-off")?,
            small(jitter, "back-off jitter")?,
        )),
        [None, None, None, None] => None,
        _ => return Err(bad("its back-off is set in part".into())),
    };
    let misfire: i32 = r.try_get(17).map_err(get)?;
    let on_expire: i32 = r.try_get(21).map_err(get)?;
    let parts = ScheduleParts {
        cron: r.try_get(3).map_err(get)?,
        time_zone: r.try_get(4).map_err(get)?,
        topic: r.try_get(5).map_err(get)?,
        body: Bytes::from(body),
        priority: small(r.try_get(7).map_err(get)?, "priority")?,
        ttr_ms: opt_count(r.try_get(8).map_err(get)?, "ttr")?,
        max_attempts: max_attempts.map(|v| small(v, "max attempts")).transpose()?,
        backoff,
        start_ms: opt_count(r.try_get(14).map_err(get)?, "window start")?,
        end_ms: opt_count(r.try_get(15).map_err(get)?, "window end")?,
        jitter_ms: count(r.try_get(16).map_err(get)?, "jitter")?,
        misfire: u8::try_from(misfire)
            .map_err(|_| bad(format!("its misfire policy code {misfire} is out of range")))?,
        misfire_limit: small(r.try_get(18).map_err(get)?, "misfire limit")?,
        max_lateness_ms: opt_count(r.try_get(19).map_err(get)?, "max lateness")?,
        expires_at_ms: opt_count(r.try_get(20).map_err(get)?, "expiry")?,
        on_expire: u8::try_from(on_expire)
            .map_err(|_| bad(format!("its on_expire code {on_expire} is out of range")))?,
    };
    if revision < 1 {
        return Err(bad(format!("its revision {revision} is not positive")));
    }
    let schedule_name = ScheduleName::new(name.clone()).map_err(|err| bad(err.to_string()))?;
    Ok(StoredSchedule {
        schedule: JobSchedule::from_parts(schedule_name, parts)
            .map_err(|err| bad(err.to_string()))?,
        revision: count(revision, "revision")?,
        through: opt_count(through, "pushed-through time")?.map(Timestamp::from_millis),
    })
}
