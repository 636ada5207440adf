//! The reserve loop: take free slots first, long-poll for at most that many jobs, hand each
//! job to its own supervisor task; up to two reserves on their way at once; pause with a
//! capped back-off while the engine fails.
//!
//! The loop never returns; the worker drops it to stop reserving (which abandons an open
//! long-poll and frees the slots it held).

use std::sync::Arc;

use delayq_core::limits::MAX_BATCH;
use delayq_core::{Delivery, Engine, Reserve};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, sleep_until};

use crate::delivery::supervise;
use crate::renew::millis;
use crate::worker::Shared;
use crate::{Handler, Payload, settle};

/// How many reserves may be on their way at once. Two: while one answer is dispatched and
/// its jobs run and are acked, the slots freed meanwhile go out in the next reserve instead
/// of waiting a round trip. Every reserve asks only for slots it holds, so the concurrency
/// and prefetch bounds are unchanged; an idle worker has one long-poll open (it holds every
/// slot).
const PIPELINE: usize = 2;

/// Reserves and dispatches until dropped. `base` holds the topics, wait and mode.
pub(crate) async fn run<E, P, H>(shared: &Arc<Shared<E, H>>, base: Reserve)
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let (initial, cap) = (shared.config.retry_initial, shared.config.retry_max);
    let mut pause = initial;
    // Set while the loop pauses (after an error, or an early empty answer): no reserve starts.
    let mut resume_at: Option<Instant> = None;
    let mut in_flight = FuturesUnordered::new();
    loop {
        let can_start = in_flight.len() < PIPELINE && resume_at.is_none();
        tokio::select! {
            permits = take_slots(&shared.slots), if can_start => {
                let req = Reserve {
                    max: permits.num_permits(),
                    ..base.clone()
                };
                in_flight.push(reserve(&shared.engine, req, permits));
            }
            Some(done) = in_flight.next() => {
                let Reserved { result, permits, asked } = done;
                match result {
                    Ok(deliveries) if deliveries.is_empty() => {
                        drop(permits);
                        // An engine answers nothing only once the wait is over; one that
                        // answers sooner would make this loop spin, so pause instead.
                        if asked.elapsed() < base.wait {
                            tracing::debug!(
                                "the engine answered an empty reserve before the wait was over"
                            );
                            resume_at = Some(Instant::now() + initial);
                        }
                    }
                    Ok(deliveries) => {
                        pause = initial;
                        dispatch::<E, P, H>(shared, deliveries, permits).await;
                    }
                    Err(e) => {
                        drop(permits);
                        if e.is_retryable() {
                            tracing::warn!(error = %e, retry_in_ms = millis(pause), "cannot reserve: engine unavailable");
                        } else {
                            tracing::error!(error = %e, retry_in_ms = millis(pause), "cannot reserve");
                        }
                        resume_at = Some(Instant::now() + pause);
                        pause = (pause * 2).min(cap);
                    }
                }
            }
            () = sleep_until(resume_at.unwrap_or_else(Instant::now)), if resume_at.is_some() => {
                resume_at = None;
            }
        }
    }
}

/// Slots come first: a job is only ever asked for when a handler can start on it. Takes one
/// slot (waiting for it), then every other free one.
async fn take_slots(slots: &Arc<Semaphore>) -> OwnedSemaphorePermit {
    let mut permits = match Arc::clone(slots).acquire_owned().await {
        Ok(p) => p,
        // The semaphore is never closed.
        Err(_) => return std::future::pending().await,
    };
    let free = slots.available_permits().min(MAX_BATCH - 1);
    if free > 0 {
        let more = u32::try_from(free).unwrap_or(u32::MAX);
        if let Ok(extra) = Arc::clone(slots).try_acquire_many_owned(more) {
            permits.merge(extra);
        }
    }
    permits
}

/// One reserve on its way, with the slots it asks for.
struct Reserved {
    result: delayq_core::Result<Vec<Delivery>>,
    permits: OwnedSemaphorePermit,
    asked: Instant,
}

async fn reserve<E: Engine>(engine: &E, req: Reserve, permits: OwnedSemaphorePermit) -> Reserved {
    let asked = Instant::now();
    let result = engine.reserve(&req).await;
    Reserved {
        result,
        permits,
        asked,
    }
}

/// Hands each delivery to its own supervisor task with one of the slots; the slots the
/// reserve did not fill are freed when `permits` drops.
async fn dispatch<E, P, H>(
    shared: &Arc<Shared<E, H>>,
    deliveries: Vec<Delivery>,
    mut permits: OwnedSemaphorePermit,
) where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let received = Instant::now();
    for d in deliveries {
        match permits.split(1) {
            Some(slot) => {
                let task = supervise::<E, P, H>(Arc::clone(shared), d, received, slot);
                shared.supervisors.spawn(task);
            }
            None => give_back(&shared.engine, d).await,
        }
    }
}

/// An engine answered more jobs than asked for (a bug): give the extra ones back rather
/// than run more handlers than slots.
async fn give_back<E: Engine>(engine: &E, d: Delivery) {
    tracing::error!(
        topic = %d.job.topic,
        id = %d.job.id,
        "the engine returned more jobs than asked for; releasing the extra one (this is an engine bug)"
    );
    if let Some(lease) = &d.lease {
        let end = Instant::now() + d.job.ttr;
        settle::release(engine, lease, end).await;
    }
}
