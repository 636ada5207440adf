//! [`Settler`]: how a delivery's supervisor hands its outcome (ack, nack, bury, release) to
//! the fetch loop, which sends it with the worker's next call to the engine, and waits for
//! the engine's answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq_core::{Error, Result, Settle, Settled};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// One outcome on its way to the fetch loop.
pub(crate) struct Submit {
    pub(crate) settle: Settle,
    /// The fetch loop retries while the engine is unavailable, until this passes (the
    /// lease is over by then, or the release budget spent).
    pub(crate) until: Instant,
    /// How long the handler ran, for the window's estimate of handler speed.
    pub(crate) ran: Option<Duration>,
    pub(crate) reply: oneshot::Sender<Result<Settled>>,
}

/// The supervisors' side of the channel to the fetch loop. The fetch loop keeps running
/// until every clone is gone.
#[derive(Clone)]
pub(crate) struct Settler {
    tx: mpsc::UnboundedSender<Submit>,
    in_transit: InTransit,
}

/// Outcomes sent by supervisors and not yet taken by the fetch loop: their leases are still
/// held at the engine, though their handler slots are free, so the loop counts them.
#[derive(Clone, Default)]
pub(crate) struct InTransit(Arc<AtomicUsize>);

impl InTransit {
    /// How many are on their way now.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// The fetch loop took one.
    pub(crate) fn taken(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A settler, the queue the fetch loop reads, and the count of outcomes between the two.
pub(crate) fn channel() -> (Settler, mpsc::UnboundedReceiver<Submit>, InTransit) {
    let (tx, rx) = mpsc::unbounded_channel();
    let in_transit = InTransit::default();
    (
        Settler {
            tx,
            in_transit: in_transit.clone(),
        },
        rx,
        in_transit,
    )
}

impl Settler {
    /// Sends `settle` with the next call and waits for its answer.
    pub(crate) async fn settle(
        &self,
        settle: Settle,
        until: Instant,
        ran: Option<Duration>,
    ) -> Result<Settled> {
        let (reply, answer) = oneshot::channel();
        let submit = Submit {
            settle,
            until,
            ran,
            reply,
        };
        // Counted before it is sent, so that the loop never sees it nowhere.
        self.in_transit.0.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(submit).is_err() {
            self.in_transit.taken();
            return Err(gone());
        }
        answer.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// The fetch loop stopped before answering (it only does when the worker is gone).
fn gone() -> Error {
    Error::Unavailable {
        message: "the worker stopped before the engine answered".into(),
        source: None,
    }
}
