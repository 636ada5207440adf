//! The reserve loop: take free slots first, long-poll for at most that many jobs, hand each
//! job to its own supervisor task; pause with a capped back-off while the engine fails.
//!
//! The loop never returns; the worker drops it to stop reserving (which abandons an open
//! long-poll and frees the slots it held).

use std::sync::Arc;

use delayq_core::limits::MAX_BATCH;
use delayq_core::{Engine, Reserve};
use tokio::time::{Instant, sleep};

use crate::delivery::supervise;
use crate::renew::millis;
use crate::worker::Shared;
use crate::{Handler, Payload, settle};

/// Reserves and dispatches until dropped. `base` holds the topics, wait and mode.
pub(crate) async fn run<E, P, H>(shared: &Arc<Shared<E, H>>, base: Reserve)
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let (initial, cap) = (shared.config.retry_initial, shared.config.retry_max);
    let mut pause = initial;
    loop {
        // Slots come first: a job is only ever asked for when a handler can start on it.
        let Ok(mut permits) = Arc::clone(&shared.slots).acquire_owned().await else {
            return; // The semaphore is never closed.
        };
        let free = shared.slots.available_permits().min(MAX_BATCH - 1);
        if free > 0 {
            let more = u32::try_from(free).unwrap_or(u32::MAX);
            if let Ok(extra) = Arc::clone(&shared.slots).try_acquire_many_owned(more) {
                permits.merge(extra);
            }
        }
        let req = Reserve {
            max: permits.num_permits(),
            ..base.clone()
        };
        let asked = Instant::now();
        match shared.engine.reserve(&req).await {
            Ok(deliveries) if deliveries.is_empty() => {
                drop(permits);
                // An engine answers nothing only once the wait is over; one that answers
                // sooner would make this loop spin, so pause instead.
                if asked.elapsed() < req.wait {
                    tracing::debug!(
                        "the engine answered an empty reserve before the wait was over"
                    );
                    sleep(initial).await;
                }
            }
            Ok(deliveries) => {
                pause = initial;
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
                // Slots the reserve did not fill are freed here (the rest of `permits`).
            }
            Err(e) => {
                drop(permits);
                if e.is_retryable() {
                    tracing::warn!(error = %e, retry_in_ms = millis(pause), "cannot reserve: engine unavailable");
                } else {
                    tracing::error!(error = %e, retry_in_ms = millis(pause), "cannot reserve");
                }
                sleep(pause).await;
                pause = (pause * 2).min(cap);
            }
        }
    }
}

/// An engine answered more jobs than asked for (a bug): give the extra ones back rather
/// than run more handlers than slots.
async fn give_back<E: Engine>(engine: &E, d: delayq_core::Delivery) {
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
