//! A reserve's round trip that survives its caller: [`detach_lease`].
//!
//! A reserve future can be dropped at any point: an HTTP client hangs up in the middle of a
//! long-poll, a worker stops while its long-poll is open. Dropped while it waits, a reserve
//! loses nothing. Dropped after its request left for the engine, it would strand the jobs
//! the engine leased for it: nobody holds them until their ttr runs out. So the engines run
//! each round trip that may lease jobs in a task of its own, and when its caller is gone by
//! the time the answer comes, the task gives the leased jobs back at once.

use std::future::Future;

use tokio::sync::oneshot;

use crate::{Delivery, Error, Lease, Result};

/// Runs `trip`, a round trip that may lease jobs, in a task of its own, and answers its
/// result. When the caller dropped this future before the result came, `leased` picks the
/// deliveries out of the result and `give_back` releases their leases (an at-most-once job
/// has no lease and is already removed: it is logged as lost). Needs a Tokio runtime.
pub async fn detach_lease<T, Trip, Pick, Give, Gave>(
    trip: Trip,
    leased: Pick,
    give_back: Give,
) -> Result<T>
where
    T: Send + 'static,
    Trip: Future<Output = Result<T>> + Send + 'static,
    Pick: FnOnce(T) -> Vec<Delivery> + Send + 'static,
    Give: FnOnce(Vec<Lease>) -> Gave + Send + 'static,
    Gave: Future<Output = Result<()>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let Err(Ok(orphaned)) = tx.send(trip.await) else {
            return;
        };
        let deliveries = leased(orphaned);
        let mut leases = Vec::with_capacity(deliveries.len());
        for d in deliveries {
            match d.lease {
                Some(lease) => leases.push(lease),
                None => tracing_lost(&d),
            }
        }
        if leases.is_empty() {
            return;
        }
        let n = leases.len();
        match give_back(leases).await {
            Ok(()) => tracing::debug!(
                jobs = n,
                "gave back the jobs a reserve leased after its caller went away"
            ),
            Err(e) => log_failed(n, &e),
        }
    });
    rx.await
        .map_err(|_| Error::Internal("a reserve's task ended without an answer".into()))?
}

fn tracing_lost(d: &Delivery) {
    tracing::error!(topic = %d.job.topic, id = %d.job.id, "an at-most-once job was taken by a reserve whose caller went away: it is lost");
}

fn log_failed(n: usize, e: &Error) {
    tracing::warn!(jobs = n, error = %e, "jobs leased by a reserve whose caller went away could not be given back: they come back when their ttr runs out");
}
