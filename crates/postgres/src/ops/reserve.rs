//! Reserves (`sql/reserve.sql`): one call of `delayq.reserve` takes the due jobs of several
//! topics; a reserve that finds nothing waits (`waiters`: a signal of its topics, or the
//! next wake-up `delayq.next_wake` names, or a safety wake) and looks again until its wait
//! ends. A worker's cycle (settle-and-reserve) applies its settlements (`ops::lease`) and a
//! first look in one transaction. Every round trip that leases runs in a task of its own
//! ([`detach_lease`]): a caller dropped before the answer strands no leased job. The
//! sweeper learns of the earliest deadline of the leases made, the vacuum how many jobs
//! went out.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use delayq_core::{
    Bury, Delivery, DeliveryMode, Error, Lease, Release, Reserve, Result, Settle, Settled,
    SettledAndReserved, Topic, detach_lease,
};

use crate::error::db_err;
use crate::ops::{Ops, lease};
use crate::row::{JOB_COLS, RawJob};
use crate::waiters::{OFFLINE_WAKE, SAFETY_WAKE};

/// The most expired leases and expired jobs of a topic a reserve fails before taking jobs.
const TICK_BUDGET: i32 = 100;

/// Reserves as `req` (checked by the engine) asks: a first look over its topics (which
/// topic is first rotates between calls), then, while it asks to wait, a look at each wake-up.
pub(crate) async fn reserve(ops: &Arc<Ops>, req: &Reserve) -> Result<Vec<Delivery>> {
    let start = ops.rotate.fetch_add(1, Ordering::Relaxed) % req.topics.len();
    let mut topics = req.topics.clone();
    topics.rotate_left(start);
    let until = tokio::time::Instant::now() + req.wait;
    let registration = (!req.wait.is_zero()).then(|| ops.waiters.register(&req.topics));
    loop {
        let got = reserve_once(ops, topics.clone(), req.max, req.mode).await?;
        let Some(reg) = &registration else {
            return Ok(got);
        };
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if !got.is_empty() || left.is_zero() {
            return Ok(got);
        }
        let (wake, now) = next_wake(ops, &topics).await?;
        let cap = if ops.waiters.online() {
            SAFETY_WAKE
        } else {
            OFFLINE_WAKE
        };
        let mut sleep = left.min(cap);
        if let Some(w) = wake {
            // At least a millisecond: a due job another reserver holds is being taken.
            let ms = u64::try_from(w.saturating_sub(now)).unwrap_or(0).max(1);
            sleep = sleep.min(Duration::from_millis(ms));
        }
        reg.waiter.until.store(
            now.saturating_add(i64::try_from(sleep.as_millis()).unwrap_or(i64::MAX)),
            Ordering::Relaxed,
        );
        tokio::select! {
            () = reg.waiter.notify.notified() => {}
            () = tokio::time::sleep(sleep) => {}
        }
        reg.waiter.until.store(i64::MAX, Ordering::Relaxed);
    }
}

/// Applies `settle` then reserves as `req` asks (both checked by the engine): the
/// settlements and a first look are one transaction (one commit), in a task of its own, so
/// a caller dropped meanwhile still has its settlements applied and the jobs that look
/// leased are given back; when the first look finds nothing and `req` waits, a reserve
/// follows.
pub(crate) async fn settle_and_reserve(
    ops: &Arc<Ops>,
    settle: &[Settle],
    req: &Reserve,
) -> Result<SettledAndReserved> {
    let (trip, give_back) = (Arc::clone(ops), Arc::clone(ops));
    let items = settle.to_vec();
    let first = req.clone();
    let (settled, deliveries) = detach_lease(
        async move {
            let mut client = trip.client().await?;
            let tx = client
                .transaction()
                .await
                .map_err(|e| db_err("starting a transaction", e))?;
            let settled = settle_on(&tx, &items).await?;
            let got = if first.max == 0 {
                Vec::new()
            } else {
                reserve_on(&tx, &first.topics, first.max, first.mode).await?
            };
            tx.commit()
                .await
                .map_err(|e| db_err("committing settlements and a reserve", e))?;
            trip.note_leases(&got);
            Ok((settled, got))
        },
        |(_, got)| got,
        move |leases| give_back_all(give_back, leases),
    )
    .await?;
    if !deliveries.is_empty() || req.max == 0 || req.wait.is_zero() {
        return Ok(SettledAndReserved {
            settled,
            deliveries,
        });
    }
    let deliveries = reserve(ops, req).await?;
    Ok(SettledAndReserved {
        settled,
        deliveries,
    })
}

/// One reserve round trip over `topics` in this order, in a task of its own: when the
/// caller is dropped before the answer, the jobs it leased are given back.
async fn reserve_once(
    ops: &Arc<Ops>,
    topics: Vec<Topic>,
    max: usize,
    mode: DeliveryMode,
) -> Result<Vec<Delivery>> {
    let (trip, give_back) = (Arc::clone(ops), Arc::clone(ops));
    let got = detach_lease(
        async move {
            let client = trip.client().await?;
            reserve_on(&client, &topics, max, mode).await
        },
        |d| d,
        move |leases| give_back_all(give_back, leases),
    )
    .await?;
    ops.note_leases(&got);
    Ok(got)
}

/// Releases `leases` (of a caller that went away), each as a release without options.
async fn give_back_all(ops: Arc<Ops>, leases: Vec<Lease>) -> Result<()> {
    for l in leases {
        lease::release(&ops.client().await?, &l, Release::default()).await?;
    }
    Ok(())
}

/// When a waiter on `topics` should look again, and now, in ms on the database's clock.
async fn next_wake(ops: &Ops, topics: &[Topic]) -> Result<(Option<i64>, i64)> {
    let client = ops.client().await?;
    let names: Vec<&str> = topics.iter().map(Topic::as_str).collect();
    let stmt = client
        .prepare_cached("SELECT wake, now_ms FROM delayq.next_wake($1)")
        .await
        .map_err(|e| db_err("finding the next wake-up", e))?;
    let row = client
        .query_one(&stmt, &[&names])
        .await
        .map_err(|e| db_err("finding the next wake-up", e))?;
    Ok((row.get(0), row.get(1)))
}

/// One reserve call on `client` over `topics` in this order: the jobs taken, in the
/// contract's order.
async fn reserve_on<C: GenericClient>(
    client: &C,
    topics: &[Topic],
    max: usize,
    mode: DeliveryMode,
) -> Result<Vec<Delivery>> {
    let names: Vec<&str> = topics.iter().map(Topic::as_str).collect();
    let stmt = client
        .prepare_cached(&format!(
            "SELECT pos, token, now_us, {JOB_COLS} FROM delayq.reserve($1, $2, $3, $4)"
        ))
        .await
        .map_err(|e| db_err("reserving", e))?;
    let n = i32::try_from(max).unwrap_or(i32::MAX);
    let at_most_once = mode == DeliveryMode::AtMostOnce;
    let rows = client
        .query(&stmt, &[&names, &n, &at_most_once, &TICK_BUDGET])
        .await
        .map_err(|e| db_err("reserving", e))?;
    let mut taken = Vec::with_capacity(rows.len());
    for r in &rows {
        let pos: i32 = r.get(0);
        let token: i64 = r.get(1);
        let now_us: i64 = r.get(2);
        taken.push((pos, token, now_us, RawJob::read(r, 3)?));
    }
    taken.sort_by_key(|(pos, _, _, j)| (*pos, j.priority, j.ready_at, j.seq));
    taken
        .into_iter()
        .map(|(pos, token, now_us, raw)| {
            let topic = usize::try_from(pos - 1)
                .ok()
                .and_then(|i| topics.get(i))
                .ok_or_else(|| Error::Internal(format!("reserve answered topic position {pos}")))?;
            raw.into_delivery(topic, token, now_us)
        })
        .collect()
}

/// Applies `settle` (checked already: `Settle::validate`) in order on `client` (a run of
/// acks as one call): one answer each; a retryable failure of the engine ends the call.
async fn settle_on<C: GenericClient>(
    client: &C,
    settle: &[Settle],
) -> Result<Vec<Result<Settled>>> {
    let mut out = Vec::with_capacity(settle.len());
    let mut acks: Vec<Lease> = Vec::new();
    for s in settle.iter().map(Some).chain([None]) {
        if let Some(Settle::Ack(l)) = s {
            acks.push(l.clone());
            continue;
        }
        if !acks.is_empty() {
            let answers = lease::ack(client, &acks).await?;
            out.extend(answers.into_iter().map(|r| r.map(|()| Settled::Acked)));
            acks.clear();
        }
        let r = match s {
            None | Some(Settle::Ack(_)) => continue,
            Some(Settle::Nack(l, n)) => {
                lease::nack(client, l, n.clone()).await.map(Settled::Nacked)
            }
            Some(Settle::Bury(l, reason)) => {
                let bury = Bury {
                    reason: reason.clone(),
                    priority: None,
                };
                lease::bury(client, l, bury).await.map(|()| Settled::Buried)
            }
            Some(Settle::Release(l)) => lease::release(client, l, Release::default())
                .await
                .map(|()| Settled::Released),
        };
        match r {
            Err(e) if e.is_retryable() => return Err(e),
            r => out.push(r),
        }
    }
    Ok(out)
}
