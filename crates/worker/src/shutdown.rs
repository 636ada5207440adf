//! Graceful shutdown of the running deliveries, once the fetch loop stopped handing out
//! jobs (it gives the buffered ones back itself, at the same time): wait up to the grace
//! period for running handlers, then fire their tokens, stop them and release their jobs.

use tokio::time::timeout;

use crate::delivery::{ABORT_WAIT, CANCEL_WAIT};
use crate::settle::RELEASE_BUDGET;
use crate::shared::Shared;

/// Drains the worker's deliveries; returns how many handler tasks were still running when
/// it gave up waiting (they block their thread and ignore cancellation).
pub(crate) async fn drain<E, H>(shared: &Shared<E, H>) -> usize {
    shared.supervisors.close();
    shared.handlers.close();
    let running = shared.supervisors.len();
    if running > 0 {
        tracing::info!(
            running,
            grace_ms = u64::try_from(shared.config.grace.as_millis()).unwrap_or(u64::MAX),
            "shutdown: stopped reserving, waiting for running deliveries"
        );
    }
    if timeout(shared.config.grace, shared.supervisors.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            running = shared.supervisors.len(),
            "shutdown: grace period over, cancelling the handlers still running and releasing their jobs"
        );
        shared.hard_stop.cancel();
        // Each supervisor now gives its handler CANCEL_WAIT to return, aborts it (waiting up
        // to ABORT_WAIT) and releases its job (up to RELEASE_BUDGET); the last ABORT_WAIT is
        // a margin for scheduling.
        let budget = CANCEL_WAIT + ABORT_WAIT + RELEASE_BUDGET + ABORT_WAIT;
        if timeout(budget, shared.supervisors.wait()).await.is_err() {
            tracing::error!(
                running = shared.supervisors.len(),
                "shutdown: some deliveries could not be released in time; their leases will run out"
            );
        }
    }
    let unfinished = shared.handlers.len();
    if unfinished > 0 {
        tracing::error!(
            unfinished,
            "shutdown: handler tasks still running; they ignore cancellation and block their thread"
        );
    }
    unfinished
}
