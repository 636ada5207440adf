//! One engine call for the reserves of many connections. A beanstalkd worker takes one job
//! per `reserve`, so a server with many workers on one tube would make one engine call per
//! job; instead, the connections that watch that one tube hand their "ack this, then give me
//! a job if one is ready" to the tube's coalescer, which serves everything that arrived
//! while its previous call was on its way with one `Engine::settle_and_reserve` (the acks,
//! then as many jobs as there are requests), and hands each requester its ack's answer and at
//! most one job. A requester that gets no job waits on its own, as before; nothing waits in
//! the coalescer, so it adds no delay: an idle tube's request is served by a call at once.
//!
//! A job handed to a requester that went away meanwhile (its connection closed, its reserve
//! cancelled) is released at once, as a closed connection's jobs are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::limits::MAX_BATCH;
use delayq_core::{Delivery, Engine, Lease, Reserve, Result, Settle, Settled, Topic};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

/// What a requester gets: its ack's answer (when it sent one) and at most one job.
pub(crate) struct Served {
    pub(crate) acked: Option<Result<Settled>>,
    pub(crate) job: Option<Delivery>,
}

struct Request {
    ack: Option<Lease>,
    reply: oneshot::Sender<Result<Served>>,
}

/// The coalescers of one server, one per topic, started when first asked.
pub(crate) struct Coalescers {
    engine: Arc<dyn Engine>,
    by_topic: Mutex<HashMap<Topic, mpsc::UnboundedSender<Request>>>,
}

impl Coalescers {
    pub(crate) fn new(engine: Arc<dyn Engine>) -> Self {
        Coalescers {
            engine,
            by_topic: Mutex::default(),
        }
    }

    /// Acks `ack` (when given), then takes one ready job of `topic` if there is one, in a
    /// call shared with the other connections asking at the same time.
    pub(crate) async fn serve(&self, topic: &Topic, ack: Option<Lease>) -> Result<Served> {
        let (reply, answer) = oneshot::channel();
        let request = Request { ack, reply };
        let sent = {
            let mut map = self.by_topic.lock().unwrap_or_else(|p| p.into_inner());
            let tx = map.entry(topic.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(run(self.engine.clone(), topic.clone(), rx));
                tx
            });
            tx.send(request)
        };
        if sent.is_err() {
            return Err(delayq_core::Error::Internal(
                "the reserve coalescer of a topic stopped".into(),
            ));
        }
        answer.await.unwrap_or_else(|_| {
            Err(delayq_core::Error::Internal(
                "the reserve coalescer dropped a request".into(),
            ))
        })
    }
}

/// A topic's coalescer: takes every request that is waiting, serves them with one call,
/// and again, until the server (holding the sender) goes.
async fn run(engine: Arc<dyn Engine>, topic: Topic, mut rx: mpsc::UnboundedReceiver<Request>) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        serve_batch(engine.as_ref(), &topic, std::mem::take(&mut batch)).await;
    }
}

async fn serve_batch(engine: &dyn Engine, topic: &Topic, batch: Vec<Request>) {
    let settle: Vec<Settle> = batch
        .iter()
        .filter_map(|r| r.ack.clone().map(Settle::Ack))
        .collect();
    let req = Reserve::new(topic.clone())
        .max(batch.len())
        .wait(Duration::ZERO);
    let answer = match engine.settle_and_reserve(&settle, &req).await {
        Ok(a) => a,
        Err(e) => {
            // The first requester gets the error itself, the others its message.
            let message = e.to_string();
            let mut first = Some(e);
            for r in batch {
                let e = first
                    .take()
                    .unwrap_or_else(|| delayq_core::Error::Unavailable {
                        message: message.clone(),
                        source: None,
                    });
                let _ = r.reply.send(Err(e));
            }
            return;
        }
    };
    let mut settled = answer.settled.into_iter();
    let mut jobs = answer.deliveries.into_iter();
    for r in batch {
        let acked = r.ack.as_ref().and_then(|_| settled.next());
        let served = Served {
            acked,
            job: jobs.next(),
        };
        if let Err(Ok(unwanted)) = r.reply.send(Ok(served)) {
            give_back(engine, unwanted.job).await;
        }
    }
    // More jobs than requests cannot come back; be safe with any that would.
    for job in jobs {
        give_back(engine, Some(job)).await;
    }
}

/// Releases a job no requester took.
async fn give_back(engine: &dyn Engine, job: Option<Delivery>) {
    if let Some(lease) = job.and_then(|d| d.lease)
        && let Err(e) = engine.release(&lease).await
        && !e.ends_delivery()
    {
        warn!(error = %e, "beanstalk: giving back a job no connection took");
    }
}
