//! [`Coalescers`]: the first looks of concurrent reserves served by one engine call.
//!
//! A consumer that takes one job per request (a beanstalkd worker, an HTTP client reserving
//! one job and acking it) would make one engine call per job. Instead, the requests that ask
//! for the same topics in the same mode go to that key's coalescer, which serves everything
//! that arrived while its previous call was on its way with one
//! [`Engine::settle_and_reserve`]: the acks that ride along, then as many jobs as the
//! requests asked for together (at most [`MAX_BATCH`]), handed out in arrival order. A
//! requester that gets fewer jobs than it asked for (none ready) goes on to wait on its own;
//! nothing waits in the coalescer, so it adds no delay: an idle key's request is served by a
//! call at once. A key's coalescer ends after a while with nothing to serve, so the keys
//! asked for once cost nothing afterwards.
//!
//! A job handed to a requester that went away meanwhile (its connection closed, its request
//! cancelled) is released at once, as a closed connection's jobs are; an ack that rode along
//! with such a request was still made. Jobs taken at most once cannot be given back: a
//! requester gone in that mode loses them, as a dropped answer would.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use crate::limits::MAX_BATCH;
use crate::{
    Delivery, DeliveryMode, Engine, Error, Lease, Reserve, Result, Settle, Settled, Topic,
};

/// How long a key's coalescer stays without a request before it ends.
const IDLE: Duration = Duration::from_secs(10);

/// What a requester gets: its ack's answer (when it sent one) and up to its `max` jobs.
#[derive(Debug)]
pub struct Served {
    /// The answer to the ack that rode along, when there was one.
    pub acked: Option<Result<Settled>>,
    /// The jobs taken for this requester, in the engine's order.
    pub jobs: Vec<Delivery>,
}

/// What one coalescer serves: requests for the same topics, in the same order, and mode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    topics: Vec<Topic>,
    at_most_once: bool,
}

struct Request {
    ack: Option<Lease>,
    max: usize,
    reply: oneshot::Sender<Result<Served>>,
}

type Senders = Arc<Mutex<HashMap<Key, mpsc::UnboundedSender<Request>>>>;

/// The coalescers of one server or port, one per key, started when first asked. Cheap to
/// share behind an `Arc`; dropping it ends every coalescer once its queue is served.
pub struct Coalescers {
    engine: Arc<dyn Engine>,
    by_key: Senders,
}

impl std::fmt::Debug for Coalescers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescers").finish_non_exhaustive()
    }
}

impl Coalescers {
    /// Coalescers over `engine`. Call it inside a Tokio runtime: each key's coalescer is a
    /// task.
    pub fn new(engine: Arc<dyn Engine>) -> Self {
        Coalescers {
            engine,
            by_key: Arc::default(),
        }
    }

    /// Settles `ack` (when given), then takes up to `max` (1 to [`MAX_BATCH`]) ready jobs of
    /// `topics` in `mode` without waiting, in a call shared with the other requests for the
    /// same topics and mode at the same time. The arguments are checked as
    /// [`Engine::settle_and_reserve`] checks them, before anything is queued.
    pub async fn serve(
        &self,
        topics: &[Topic],
        mode: DeliveryMode,
        max: usize,
        ack: Option<Lease>,
    ) -> Result<Served> {
        let req = Reserve {
            topics: topics.to_vec(),
            max,
            wait: Duration::ZERO,
            mode,
        };
        req.validate()?;
        if let Some(lease) = &ack {
            Settle::Ack(lease.clone()).validate()?;
        }
        let key = Key {
            topics: req.topics,
            at_most_once: mode == DeliveryMode::AtMostOnce,
        };
        let (reply, answer) = oneshot::channel();
        let request = Request { ack, max, reply };
        let sent = {
            let mut map = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
            let tx = map.entry(key.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                let run = Coalescer {
                    engine: self.engine.clone(),
                    key: key.clone(),
                    senders: Arc::downgrade(&self.by_key),
                };
                tokio::spawn(run.run(rx));
                tx
            });
            tx.send(request)
        };
        if sent.is_err() {
            return Err(Error::Internal(
                "the reserve coalescer of these topics stopped".into(),
            ));
        }
        answer.await.unwrap_or_else(|_| {
            Err(Error::Internal(
                "the reserve coalescer dropped a request".into(),
            ))
        })
    }
}

/// One key's coalescer.
struct Coalescer {
    engine: Arc<dyn Engine>,
    key: Key,
    /// The map it is in: it takes itself out when idle. Weak, so that dropping the
    /// [`Coalescers`] ends it.
    senders: std::sync::Weak<Mutex<HashMap<Key, mpsc::UnboundedSender<Request>>>>,
}

impl Coalescer {
    /// Serves every request waiting with one call, and again, until it has been idle for
    /// [`IDLE`] (it then leaves the map, under the lock senders send under, so no request
    /// is left behind) or the [`Coalescers`] are gone.
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Request>) {
        let mut pending: VecDeque<Request> = VecDeque::new();
        let mut buf = Vec::new();
        loop {
            if pending.is_empty() {
                match tokio::time::timeout(IDLE, rx.recv_many(&mut buf, MAX_BATCH)).await {
                    Ok(0) => return,
                    Ok(_) => pending.extend(buf.drain(..)),
                    Err(_) => {
                        let Some(senders) = self.senders.upgrade() else {
                            return;
                        };
                        let mut map = senders.lock().unwrap_or_else(|p| p.into_inner());
                        if rx.is_empty() {
                            map.remove(&self.key);
                            return;
                        }
                        continue;
                    }
                }
            }
            while let Ok(r) = rx.try_recv() {
                pending.push_back(r);
            }
            // As many requests as fit one call: at most MAX_BATCH jobs asked for (each
            // request asks for 1 to MAX_BATCH, so the first always fits) and as many acks.
            let mut asked = 0;
            let mut batch = Vec::new();
            while let Some(r) = pending.front() {
                if !batch.is_empty() && asked + r.max > MAX_BATCH {
                    break;
                }
                asked += r.max;
                batch.extend(pending.pop_front());
            }
            self.serve_batch(batch, asked).await;
        }
    }

    async fn serve_batch(&self, batch: Vec<Request>, asked: usize) {
        let settle: Vec<Settle> = batch
            .iter()
            .filter_map(|r| r.ack.clone().map(Settle::Ack))
            .collect();
        let req = Reserve {
            topics: self.key.topics.clone(),
            max: asked,
            wait: Duration::ZERO,
            mode: if self.key.at_most_once {
                DeliveryMode::AtMostOnce
            } else {
                DeliveryMode::AtLeastOnce
            },
        };
        let answer = match self.engine.settle_and_reserve(&settle, &req).await {
            Ok(a) => a,
            Err(e) => {
                // The first requester gets the error itself, the others its copy.
                let mut batch = batch.into_iter();
                let first = batch.next();
                for r in batch {
                    let _ = r.reply.send(Err(e.copy_for_another()));
                }
                if let Some(r) = first {
                    let _ = r.reply.send(Err(e));
                }
                return;
            }
        };
        let mut settled = answer.settled.into_iter();
        let mut jobs = answer.deliveries.into_iter();
        let mut unwanted = Vec::new();
        for r in batch {
            let served = Served {
                acked: r.ack.as_ref().and_then(|_| settled.next()),
                jobs: jobs.by_ref().take(r.max).collect(),
            };
            if let Err(Ok(gone)) = r.reply.send(Ok(served)) {
                unwanted.extend(gone.jobs);
            }
        }
        // More jobs than asked for cannot come back; be safe with any that would.
        unwanted.extend(jobs);
        self.give_back(unwanted).await;
    }

    /// Releases the jobs no requester took, in one call.
    async fn give_back(&self, jobs: Vec<Delivery>) {
        let releases: Vec<Settle> = jobs
            .into_iter()
            .filter_map(|d| d.lease.map(Settle::Release))
            .collect();
        if releases.is_empty() {
            return;
        }
        let settle_only = Reserve {
            topics: self.key.topics.clone(),
            max: 0,
            wait: Duration::ZERO,
            mode: DeliveryMode::AtLeastOnce,
        };
        let failed = match self
            .engine
            .settle_and_reserve(&releases, &settle_only)
            .await
        {
            Ok(a) => a.settled.into_iter().find_map(|r| r.err()),
            Err(e) => Some(e),
        };
        if let Some(e) = failed
            && !e.ends_delivery()
        {
            warn!(error = %e, "giving back a job whose requester went away");
        }
    }
}
