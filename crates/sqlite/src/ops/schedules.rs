//! Schedules (issue 14): the `schedules` table (`migrations/0007_schedules.sql`, and
//! `0014_schedule_expiry.sql` for the jobs' expiry), one row per schedule, its columns
//! `ScheduleParts`; written by the writer, read on a read connection.

use delayq_core::{
    Bytes, Error, JobSchedule, Result, ScheduleName, ScheduleParts, StoredSchedule, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::db_err;
use crate::tx::Tx;

/// The columns read back, in [`decode`]'s order.
const COLS: &str = "name, revision, through, cron, time_zone, topic, body, priority, ttr_ms, \
                    max_attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, start_ms, end_ms, \
                    jitter_ms, misfire, misfire_limit, max_lateness_ms, expires_at_ms, on_expire";

/// A row as its name and the stored schedule's raw parts.
type Raw = (String, u64, Option<u64>, ScheduleParts);

fn raw(r: &Row<'_>) -> rusqlite::Result<Raw> {
    let backoff = match (r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?) {
        (Some(base), Some(factor), Some(max), Some(jitter)) => Some((base, factor, max, jitter)),
        _ => None,
    };
    let body: Vec<u8> = r.get(6)?;
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        ScheduleParts {
            cron: r.get(3)?,
            time_zone: r.get(4)?,
            topic: r.get(5)?,
            body: Bytes::from(body),
            priority: r.get(7)?,
            ttr_ms: r.get(8)?,
            max_attempts: r.get(9)?,
            backoff,
            start_ms: r.get(14)?,
            end_ms: r.get(15)?,
            jitter_ms: r.get(16)?,
            misfire: r.get(17)?,
            misfire_limit: r.get(18)?,
            max_lateness_ms: r.get(19)?,
            expires_at_ms: r.get(20)?,
            on_expire: r.get(21)?,
        },
    ))
}

fn decode((name, revision, through, parts): Raw) -> Result<StoredSchedule> {
    let bad = |e: Error| Error::Internal(format!("stored schedule {name} is invalid: {e}"));
    let n = ScheduleName::new(name.clone()).map_err(bad)?;
    Ok(StoredSchedule {
        schedule: JobSchedule::from_parts(n, parts).map_err(bad)?,
        revision,
        through: through.map(Timestamp::from_millis),
    })
}

/// `Schedules::put_schedule`: inserts or replaces the row, revision + 1, through cleared.
pub(crate) fn put(tx: &mut Tx<'_>, s: &JobSchedule) -> Result<u64> {
    let p = s.parts();
    let b = p.backoff;
    tx.conn
        .prepare_cached(
            "INSERT INTO schedules (name, revision, through, cron, time_zone, topic, body, \
             priority, ttr_ms, max_attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, \
             start_ms, end_ms, jitter_ms, misfire, misfire_limit, max_lateness_ms, expires_at_ms, \
             on_expire) \
             VALUES (?1, 1, NULL, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
             ?16, ?17, ?18, ?19, ?20) \
             ON CONFLICT (name) DO UPDATE SET revision = revision + 1, through = NULL, \
             cron = ?2, time_zone = ?3, topic = ?4, body = ?5, priority = ?6, ttr_ms = ?7, \
             max_attempts = ?8, bo_base_ms = ?9, bo_factor = ?10, bo_max_ms = ?11, \
             bo_jitter = ?12, start_ms = ?13, end_ms = ?14, jitter_ms = ?15, misfire = ?16, \
             misfire_limit = ?17, max_lateness_ms = ?18, expires_at_ms = ?19, on_expire = ?20 \
             RETURNING revision",
        )
        .and_then(|mut st| {
            st.query_row(
                params![
                    s.name().as_str(),
                    p.cron,
                    p.time_zone,
                    p.topic,
                    p.body.as_ref(),
                    p.priority,
                    p.ttr_ms,
                    p.max_attempts,
                    b.map(|b| b.0),
                    b.map(|b| b.1),
                    b.map(|b| b.2),
                    b.map(|b| b.3),
                    p.start_ms,
                    p.end_ms,
                    p.jitter_ms,
                    p.misfire,
                    p.misfire_limit,
                    p.max_lateness_ms,
                    p.expires_at_ms,
                    p.on_expire,
                ],
                |r| r.get(0),
            )
        })
        .map_err(|e| db_err("putting a schedule", e))
}

/// `Schedules::schedule`.
pub(crate) fn get(conn: &Connection, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
    conn.prepare_cached(&format!("SELECT {COLS} FROM schedules WHERE name = ?1"))
        .and_then(|mut st| st.query_row([name.as_str()], raw).optional())
        .map_err(|e| db_err("reading a schedule", e))?
        .map(decode)
        .transpose()
}

/// `Schedules::schedules`, by name (bytewise, as Redis's listing).
pub(crate) fn list(conn: &Connection) -> Result<Vec<StoredSchedule>> {
    let rows: Vec<Raw> = conn
        .prepare_cached(&format!("SELECT {COLS} FROM schedules ORDER BY name"))
        .and_then(|mut st| st.query_map([], raw)?.collect())
        .map_err(|e| db_err("listing schedules", e))?;
    rows.into_iter().map(decode).collect()
}

/// `Schedules::delete_schedule`: the row as it was, then gone.
pub(crate) fn delete(tx: &mut Tx<'_>, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
    let row = tx
        .conn
        .prepare_cached(&format!(
            "DELETE FROM schedules WHERE name = ?1 RETURNING {COLS}"
        ))
        .and_then(|mut st| st.query_row([name.as_str()], raw).optional())
        .map_err(|e| db_err("deleting a schedule", e))?;
    row.map(decode).transpose()
}

/// `Schedules::schedule_pushed`: moves `through` forward when the row is at `revision`.
pub(crate) fn pushed(
    tx: &mut Tx<'_>,
    name: &ScheduleName,
    revision: u64,
    through: Timestamp,
) -> Result<bool> {
    let n = tx
        .conn
        .prepare_cached(
            "UPDATE schedules SET through = ?3 WHERE name = ?1 AND revision = ?2 \
             AND (through IS NULL OR through < ?3)",
        )
        .and_then(|mut st| st.execute(params![name.as_str(), revision, through.as_millis()]))
        .map_err(|e| db_err("recording a schedule's progress", e))?;
    Ok(n == 1)
}
