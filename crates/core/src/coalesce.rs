//! [`Coalescers`]: the first looks of concurrent reserves served by one engine call.
//!
//! A consumer that takes one job per request (a beanstalkd worker, an HTTP client reserving
//! one job and acking it) would make one engine call per job. Instead, requests that ask for
//! the same topics in the same mode share calls: a request that finds no call of its key on
//! its way makes one itself, at once and in its own task (so a lone consumer pays no hop);
//! the requests that arrive while that call is on its way queue up, and when it is back a
//! task of the key serves everything queued with one [`Engine::settle_and_reserve`] (the
//! acks that ride along, then as many jobs as the requests asked for together, at most
//! [`MAX_BATCH`], handed out in arrival order), and again while requests keep coming. A
//! requester that gets fewer jobs than it asked for (none ready) goes on to wait on its own;
//! nothing waits in the coalescer, so it adds no delay. A key with nothing queued and no call
//! on its way leaves the map, so the keys asked for once cost nothing afterwards.
//!
//! A job handed to a queued requester that went away meanwhile (its connection closed, its
//! request cancelled) is released at once, as a closed connection's jobs are; an ack that
//! rode along with such a request was still made. A request that made its own call and is
//! dropped on the way strands nothing either: every engine's reserve runs detached
//! (`detach_lease`). Jobs taken at most once cannot be given back: a requester gone in that
//! mode loses them, as a dropped answer would.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tracing::warn;

use crate::limits::MAX_BATCH;
use crate::{
    Delivery, DeliveryMode, Engine, Error, Lease, Reserve, Result, Settle, Settled, Topic,
};

/// What a requester gets: its ack's answer (when it sent one) and up to its `max` jobs.
#[derive(Debug)]
pub struct Served {
    /// The answer to the ack that rode along, when there was one.
    pub acked: Option<Result<Settled>>,
    /// The jobs taken for this requester, in the engine's order.
    pub jobs: Vec<Delivery>,
}

/// What one key's calls serve: requests for the same topics, in the same order, and mode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    topics: Vec<Topic>,
    at_most_once: bool,
}

impl Key {
    fn reserve(&self, max: usize) -> Reserve {
        Reserve {
            topics: self.topics.clone(),
            max,
            wait: Duration::ZERO,
            mode: if self.at_most_once {
                DeliveryMode::AtMostOnce
            } else {
                DeliveryMode::AtLeastOnce
            },
        }
    }
}

struct Request {
    ack: Option<Lease>,
    max: usize,
    reply: oneshot::Sender<Result<Served>>,
}

/// A key with a call on its way, and the requests queued behind it. A key is in the map
/// exactly while a call of it is on its way or its task has requests to serve.
#[derive(Default)]
struct Busy {
    queued: VecDeque<Request>,
}

struct Inner {
    engine: Arc<dyn Engine>,
    busy: Mutex<HashMap<Key, Busy>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Busy>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The coalescers of one server or port. Call it inside a Tokio runtime: a key whose
/// requests queued up is served by a task.
pub struct Coalescers {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Coalescers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescers").finish_non_exhaustive()
    }
}

impl Coalescers {
    /// Coalescers over `engine`.
    pub fn new(engine: Arc<dyn Engine>) -> Self {
        Coalescers {
            inner: Arc::new(Inner {
                engine,
                busy: Mutex::default(),
            }),
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
        // Queued behind the key's call on its way, or else this request makes one itself.
        let queued = {
            let mut busy = self.inner.lock();
            if let Some(b) = busy.get_mut(&key) {
                let (reply, answer) = oneshot::channel();
                b.queued.push_back(Request { ack, max, reply });
                Ok(answer)
            } else {
                busy.insert(key.clone(), Busy::default());
                Err(ack)
            }
        };
        match queued {
            Ok(answer) => answer.await.unwrap_or_else(|_| {
                Err(Error::Internal(
                    "the reserve coalescer dropped a request".into(),
                ))
            }),
            Err(ack) => {
                // Whatever queues meanwhile is served when this call is back, or when this
                // future is dropped on the way (`Turn`).
                let _turn = Turn {
                    inner: self.inner.clone(),
                    key: Some(key.clone()),
                };
                own_call(self.inner.engine.as_ref(), &key, max, ack).await
            }
        }
    }
}

/// One request's own call.
async fn own_call(
    engine: &dyn Engine,
    key: &Key,
    max: usize,
    ack: Option<Lease>,
) -> Result<Served> {
    let settle: Vec<Settle> = ack.map(Settle::Ack).into_iter().collect();
    let answer = engine
        .settle_and_reserve(&settle, &key.reserve(max))
        .await?;
    Ok(Served {
        acked: answer.settled.into_iter().next(),
        jobs: answer.deliveries,
    })
}

/// A key's turn: while it lives, the key's call is on its way. When it ends (the call came
/// back, or the request that made it was dropped), the requests queued meanwhile are served
/// by a task of the key, or the key leaves the map when none queued.
struct Turn {
    inner: Arc<Inner>,
    key: Option<Key>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let mut busy = self.inner.lock();
        let queued = busy.get(&key).is_some_and(|b| !b.queued.is_empty());
        if !queued {
            busy.remove(&key);
            return;
        }
        drop(busy);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(serve_queued(self.inner.clone(), key));
            }
            // No runtime left to serve them (it is shutting down): the queued requests get
            // "dropped a request" as their senders go.
            Err(_) => {
                self.inner.lock().remove(&key);
            }
        }
    }
}

/// A key's task: serves its queued requests, as many as fit one call at a time, until none
/// is left; then the key leaves the map (under the lock requests queue under, so none is
/// left behind).
async fn serve_queued(inner: Arc<Inner>, key: Key) {
    loop {
        let (batch, asked) = {
            let mut busy = inner.lock();
            let Some(b) = busy.get_mut(&key) else {
                return;
            };
            if b.queued.is_empty() {
                busy.remove(&key);
                return;
            }
            // As many requests as fit one call: at most MAX_BATCH jobs asked for (each
            // request asks for 1 to MAX_BATCH, so the first always fits) and as many acks.
            let mut asked = 0;
            let mut batch = Vec::new();
            while let Some(r) = b.queued.front() {
                if !batch.is_empty() && asked + r.max > MAX_BATCH {
                    break;
                }
                asked += r.max;
                batch.extend(b.queued.pop_front());
            }
            (batch, asked)
        };
        serve_batch(inner.engine.as_ref(), &key, batch, asked).await;
    }
}

async fn serve_batch(engine: &dyn Engine, key: &Key, batch: Vec<Request>, asked: usize) {
    let settle: Vec<Settle> = batch
        .iter()
        .filter_map(|r| r.ack.clone().map(Settle::Ack))
        .collect();
    let answer = match engine
        .settle_and_reserve(&settle, &key.reserve(asked))
        .await
    {
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
    give_back(engine, key, unwanted).await;
}

/// Releases the jobs no requester took, in one call.
async fn give_back(engine: &dyn Engine, key: &Key, jobs: Vec<Delivery>) {
    let releases: Vec<Settle> = jobs
        .into_iter()
        .filter_map(|d| d.lease.map(Settle::Release))
        .collect();
    if releases.is_empty() {
        return;
    }
    let mut settle_only = key.reserve(0);
    settle_only.mode = DeliveryMode::AtLeastOnce;
    let failed = match engine.settle_and_reserve(&releases, &settle_only).await {
        Ok(a) => a.settled.into_iter().find_map(|r| r.err()),
        Err(e) => Some(e),
    };
    if let Some(e) = failed
        && !e.ends_delivery()
    {
        warn!(error = %e, "giving back a job whose requester went away");
    }
}
