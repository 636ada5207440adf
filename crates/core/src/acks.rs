//! [`ack_batcher`]: acks of concurrent callers coalesced into [`Engine::ack_batch`] calls.
//!
//! Acks are batched per topic. A topic's first ack goes out at once; those of the same topic
//! that arrive while it is on its way form its next batch, so a busy caller (a worker with
//! many handlers, a server with many clients) pays one round trip and one script call for
//! many jobs, and an idle one waits for no timer. Each topic has at most one batch in flight
//! and the topics' batches are independent: a topic whose store does not answer (a Redis
//! Cluster primary that died, a slot being moved) delays and fails only its own acks, never
//! those of a topic that lives elsewhere. Each ack is answered exactly as [`Engine::ack`]
//! would answer it.

use std::collections::{HashMap, HashSet};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

use crate::limits::MAX_BATCH;
use crate::{Engine, Error, Lease, Result, Topic};

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

/// Sends the queued acks in batches of up to 1000 of one topic, at most one batch of each
/// topic in flight, until every [`Acker`] is gone and every queued ack is answered.
pub async fn run_acks<E: Engine + ?Sized>(engine: &E, mut acks: Acks) {
    let mut queued: HashMap<Topic, Vec<Request>> = HashMap::new();
    let mut busy: HashSet<Topic> = HashSet::new();
    let mut in_flight = FuturesUnordered::new();
    let mut open = true;
    loop {
        // Every topic with queued acks and no batch on its way sends its next batch.
        let ready: Vec<Topic> = queued
            .keys()
            .filter(|t| !busy.contains(*t))
            .cloned()
            .collect();
        for topic in ready {
            let Some(waiting) = queued.get_mut(&topic) else {
                continue;
            };
            let batch: Vec<Request> = if waiting.len() > MAX_BATCH {
                waiting.drain(..MAX_BATCH).collect()
            } else {
                queued.remove(&topic).unwrap_or_default()
            };
            busy.insert(topic.clone());
            in_flight.push(async move {
                send(engine, batch).await;
                topic
            });
        }
        if !open && in_flight.is_empty() {
            return;
        }
        tokio::select! {
            got = acks.rx.recv(), if open => match got {
                Some(first) => {
                    queue(&mut queued, first);
                    while let Ok(r) = acks.rx.try_recv() {
                        queue(&mut queued, r);
                    }
                }
                None => open = false,
            },
            Some(topic) = in_flight.next(), if !in_flight.is_empty() => {
                busy.remove(&topic);
            }
        }
    }
}

fn queue(queued: &mut HashMap<Topic, Vec<Request>>, r: Request) {
    queued.entry(r.0.topic.clone()).or_default().push(r);
}

/// Sends one batch and answers each of its callers.
async fn send<E: Engine + ?Sized>(engine: &E, mut batch: Vec<Request>) {
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
            // The whole batch (one topic's) failed the same way; each caller decides whether
            // to retry (a retryable error stays retryable).
            for (_, tx) in batch.drain(..) {
                let _ = tx.send(Err(e.copy_for_another()));
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
