//! The operations on a delivery (`sql/lease.sql`): ack (many at once, one call per topic),
//! nack, release, touch and bury. Each function answers (status, pstate, value) as the
//! file's header says; [`lease_answer`] turns the status into the contract's refusal. The
//! engine checked every argument before; these run on a pooled connection or inside a
//! worker's transaction (`ops::reserve`'s settle-and-reserve).

use std::time::Duration;

use deadpool_postgres::GenericClient;
use delayq_core::limits::delay_ms_ceil;
use delayq_core::{
    Bury, Error, JobState, Lease, Nack, NackOutcome, Release, Result, Timestamp, duration_ms,
};
use tokio_postgres::types::ToSql;

use crate::error::db_err;
use crate::row::{signed, unsigned};
use crate::status::Status;

/// Acks `leases` on `client`: one call per topic, one answer per lease, in order.
pub(crate) async fn ack<C: GenericClient>(client: &C, leases: &[Lease]) -> Result<Vec<Result<()>>> {
    let stmt = client
        .prepare_cached("SELECT status, pstate FROM delayq.ack($1, $2, $3)")
        .await
        .map_err(|e| db_err("acking", e))?;
    let mut out: Vec<Option<Result<()>>> = (0..leases.len()).map(|_| None).collect();
    let mut done = vec![false; leases.len()];
    for i in 0..leases.len() {
        if done[i] {
            continue;
        }
        let topic = &leases[i].topic;
        let run: Vec<usize> = (i..leases.len())
            .filter(|&k| !done[k] && &leases[k].topic == topic)
            .collect();
        let ids: Vec<&str> = run.iter().map(|&k| leases[k].id.as_str()).collect();
        let tokens: Vec<i64> = run.iter().map(|&k| signed(leases[k].token.0)).collect();
        let rows = client
            .query(&stmt, &[&topic.as_str(), &ids, &tokens])
            .await
            .map_err(|e| db_err("acking", e))?;
        if rows.len() != run.len() {
            return Err(Error::Internal(
                "ack answered another number of rows".into(),
            ));
        }
        for (&k, r) in run.iter().zip(&rows) {
            done[k] = true;
            out[k] = Some(lease_answer(&leases[k], "ack", r.get(0), r.get(1)));
        }
    }
    out.into_iter()
        .map(|o| o.ok_or_else(|| Error::Internal("an ack was not answered".into())))
        .collect()
}

/// Nacks `lease` on `client`: retried at the due time it answers, or dead.
pub(crate) async fn nack<C: GenericClient>(
    client: &C,
    lease: &Lease,
    nack: Nack,
) -> Result<NackOutcome> {
    let delay = nack.delay.map(|d| signed(delay_ms_ceil(d)));
    let reason = nack.reason.unwrap_or_default();
    let value = call(
        client,
        lease,
        "nack",
        "SELECT status, pstate, value FROM delayq.nack($1, $2, $3, $4, $5)",
        &[&delay, &reason],
    )
    .await?;
    // value: the new due time, or -1 when the job went dead (lease.sql).
    Ok(if value < 0 {
        NackOutcome::Dead
    } else {
        NackOutcome::Retry {
            ready_at: Timestamp::from_millis(unsigned(value, "due time")?),
        }
    })
}

/// Releases `lease` on `client`.
pub(crate) async fn release<C: GenericClient>(
    client: &C,
    lease: &Lease,
    release: Release,
) -> Result<()> {
    let delay = release.delay.map(|d| signed(delay_ms_ceil(d)));
    let priority = release.priority.map(i64::from);
    call(
        client,
        lease,
        "release",
        "SELECT status, pstate, value FROM delayq.release($1, $2, $3, $4, $5)",
        &[&delay, &priority],
    )
    .await
    .map(|_| ())
}

/// Extends `lease` on `client` by `ttr` (`None`: the job's); answers the new deadline.
pub(crate) async fn touch<C: GenericClient>(
    client: &C,
    lease: &Lease,
    ttr: Option<Duration>,
) -> Result<Timestamp> {
    let ttr = ttr.map(|t| signed(duration_ms(t)));
    let value = call(
        client,
        lease,
        "touch",
        "SELECT status, pstate, value FROM delayq.touch($1, $2, $3, $4)",
        &[&ttr],
    )
    .await?;
    Ok(Timestamp::from_millis(unsigned(value, "deadline")?))
}

/// Buries `lease` on `client`.
pub(crate) async fn bury<C: GenericClient>(client: &C, lease: &Lease, bury: Bury) -> Result<()> {
    let reason = bury.reason.unwrap_or_default();
    let priority = bury.priority.map(i64::from);
    call(
        client,
        lease,
        "bury",
        "SELECT status, pstate, value FROM delayq.bury($1, $2, $3, $4, $5)",
        &[&reason, &priority],
    )
    .await
    .map(|_| ())
}

/// Calls one lease function (`nack`, `release`, `touch`, `bury`) on `client` with the
/// lease's (topic, id, token) then `extra`: its value, the status turned into the refusal
/// it names.
async fn call<C: GenericClient>(
    client: &C,
    lease: &Lease,
    operation: &'static str,
    sql: &str,
    extra: &[&(dyn ToSql + Sync)],
) -> Result<i64> {
    let stmt = client
        .prepare_cached(sql)
        .await
        .map_err(|e| db_err(operation, e))?;
    let (topic, id, token) = (
        lease.topic.as_str(),
        lease.id.as_str(),
        signed(lease.token.0),
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&topic, &id, &token];
    params.extend_from_slice(extra);
    let row = client
        .query_one(&stmt, &params)
        .await
        .map_err(|e| db_err(operation, e))?;
    lease_answer(lease, operation, row.get(0), row.get(1))?;
    Ok(row.get(2))
}

/// A lease function's (status, pstate) as the contract's answer.
fn lease_answer(lease: &Lease, operation: &'static str, status: i16, pstate: i16) -> Result<()> {
    match Status::from_code(status, operation)? {
        Status::Ok => Ok(()),
        Status::NotFound => Err(Error::NotFound {
            topic: lease.topic.clone(),
            id: lease.id.clone(),
        }),
        Status::LeaseLost => Err(Error::LeaseLost {
            topic: lease.topic.clone(),
            id: lease.id.clone(),
        }),
        Status::WrongState => Err(Error::not_reserved(
            &lease.topic,
            &lease.id,
            JobState::from_code(i64::from(pstate))?,
            operation,
        )),
        other => Err(Error::Internal(format!(
            "{operation} answered status {other:?}"
        ))),
    }
}
