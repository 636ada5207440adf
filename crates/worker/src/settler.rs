//! [`Settler`]: how a delivery's supervisor hands its outcome (ack, nack, bury, release) to
//! the fetch loop, which sends it with the worker's next call to the engine, and waits for
//! the engine's answer.

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
pub(crate) struct Settler(mpsc::UnboundedSender<Submit>);

/// A settler and the queue the fetch loop reads.
pub(crate) fn channel() -> (Settler, mpsc::UnboundedReceiver<Submit>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Settler(tx), rx)
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
        if self.0.send(submit).is_err() {
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
