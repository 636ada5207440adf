//! Batched acks: the acks of concurrent deliveries go to the engine together, one
//! `ack_batch` per round trip. The first ack goes out at once; those that arrive while it is
//! on its way form the next batch, so a busy worker pays one round trip for many jobs and an
//! idle one waits for no timer.

use delayq_core::limits::MAX_BATCH;
use delayq_core::{Engine, Error, Lease, Result};
use tokio::sync::{mpsc, oneshot};

type Request = (Lease, oneshot::Sender<Result<()>>);

/// The sending half, shared by the deliveries of one worker.
pub(crate) struct Acker {
    tx: mpsc::UnboundedSender<Request>,
}

/// The receiving half, driven by [`run`] for as long as the worker runs.
pub(crate) struct Acks {
    rx: mpsc::UnboundedReceiver<Request>,
}

/// A new acker and the queue [`run`] drains.
pub(crate) fn channel() -> (Acker, Acks) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Acker { tx }, Acks { rx })
}

impl Acker {
    /// Acks one delivery, batched with the others in flight; answers as `Engine::ack` does.
    pub(crate) async fn ack(&self, lease: &Lease) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send((lease.clone(), tx)).is_err() {
            return Err(stopped());
        }
        rx.await.unwrap_or_else(|_| Err(stopped()))
    }
}

/// Sends the queued acks in batches until every [`Acker`] is gone.
pub(crate) async fn run<E: Engine + ?Sized>(engine: &E, mut acks: Acks) {
    let mut batch: Vec<Request> = Vec::new();
    while let Some(first) = acks.rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match acks.rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let leases: Vec<Lease> = batch.iter().map(|(l, _)| l.clone()).collect();
        match engine.ack_batch(&leases).await {
            Ok(results) if results.len() == batch.len() => {
                for ((_, tx), r) in batch.drain(..).zip(results) {
                    let _ = tx.send(r);
                }
            }
            Ok(results) => {
                let e = format!(
                    "ack_batch answered {} results for {} leases",
                    results.len(),
                    batch.len()
                );
                for (_, tx) in batch.drain(..) {
                    let _ = tx.send(Err(Error::Internal(e.clone())));
                }
            }
            Err(e) => {
                // The whole batch failed the same way; each delivery retries on its own
                // schedule (settle::retry) while the engine is unavailable.
                let retryable = e.is_retryable();
                let message = e.to_string();
                for (_, tx) in batch.drain(..) {
                    let _ = tx.send(Err(if retryable {
                        Error::Unavailable {
                            message: message.clone(),
                            source: None,
                        }
                    } else {
                        Error::Internal(message.clone())
                    }));
                }
            }
        }
    }
}

fn stopped() -> Error {
    Error::Unavailable {
        message: "the worker's acker has stopped".into(),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeEngine;
    use delayq_core::{JobId, LeaseToken};

    #[tokio::test]
    async fn concurrent_acks_share_round_trips() {
        let engine = FakeEngine::default();
        let (acker, acks) = channel();
        let acker = std::sync::Arc::new(acker);
        let leases: Vec<Lease> = (0..20)
            .map(|i| Lease {
                topic: FakeEngine::topic(),
                id: JobId::new(format!("j{i}")).unwrap_or_else(|e| panic!("{e}")),
                token: LeaseToken(1),
            })
            .collect();
        let all = futures_util::future::join_all(leases.iter().map(|l| {
            let acker = acker.clone();
            let l = l.clone();
            async move { acker.ack(&l).await }
        }));
        let results = tokio::select! {
            results = all => results,
            () = run(&engine, acks) => panic!("the acker stops only when every sender is gone"),
        };
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        let calls = engine.calls();
        assert_eq!(calls.acks.len(), 20);
        assert!(
            calls.ack_batches < 20,
            "{} round trips for 20 concurrent acks",
            calls.ack_batches
        );
    }
}
