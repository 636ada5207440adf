//! [`ack_batcher`]: acks of concurrent callers coalesced into [`Engine::ack_batch`] calls.
//!
//! The first ack goes out at once; those that arrive while it is on its way form the next
//! batch, so a busy caller (a worker with many handlers, a server with many clients) pays
//! one round trip and one script call for many jobs, and an idle one waits for no timer.
//! Each ack is answered exactly as [`Engine::ack`] would answer it.

use tokio::sync::{mpsc, oneshot};

use crate::limits::MAX_BATCH;
use crate::{Engine, Error, Lease, Result};

type Request = (Lease, oneshot::Sender<Result<()>>);

/// The sending half: cheap to clone, shared by every caller whose acks are coalesced.
#[derive(Clone, Debug)]
pub struct Acker {
    tx: mpsc::UnboundedSender<Request>,
}

/// The receiving half, driven by [`run_acks`] for as long as acks may come.
#[derive(Debug)]
pub struct Acks {
    rx: mpsc::UnboundedReceiver<Request>,
}

/// A new acker and the queue that [`run_acks`] sends to the engine.
pub fn ack_batcher() -> (Acker, Acks) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Acker { tx }, Acks { rx })
}

impl Acker {
    /// Acks one delivery, batched with the others in flight; answers as [`Engine::ack`]
    /// does ([`Error::Unavailable`] when [`run_acks`] is not running any more).
    pub async fn ack(&self, lease: &Lease) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send((lease.clone(), tx)).is_err() {
            return Err(stopped());
        }
        rx.await.unwrap_or_else(|_| Err(stopped()))
    }
}

/// Sends the queued acks in batches of up to 1000, one batch in flight at a time, until
/// every [`Acker`] is gone.
pub async fn run_acks<E: Engine + ?Sized>(engine: &E, mut acks: Acks) {
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
                // The whole batch failed the same way; each caller decides whether to retry
                // (a retryable error stays retryable).
                for (_, tx) in batch.drain(..) {
                    let _ = tx.send(Err(e.copy_for_another()));
                }
            }
        }
    }
}

fn stopped() -> Error {
    Error::Unavailable {
        message: "the ack batcher has stopped".into(),
        source: None,
    }
}
