//! The fetch loop: keeps a buffer of leased jobs ahead of the handlers, hands them to free
//! handler slots, and sends the handlers' outcomes with the next reserve, so that one round
//! trip both settles finished leases and fetches the next batch.
//!
//! The main call carries reserves: a **cycle** (`settle_and_reserve` with no wait) when
//! the window has room (and a second cycle **ahead** of it when the window has room for both,
//! so that the engine's work on one overlaps the worker's on the other), a **long-poll** (no settlements, the configured wait) when the last
//! reserve found nothing, so an idle worker waits in the engine instead of polling; and a
//! **flush** (settle only, `max` 0) when outcomes have waited
//! [`LINGER`](crate::outbox::LINGER) or filled a batch
//! and no reserve is due (beside an open long-poll, too). While the engine is unavailable,
//! no call starts until a doubling back-off pause is over.
//!
//! The deliveries' supervisors are futures this loop drives itself (in a `FuturesUnordered`),
//! not tasks: a supervisor that ends hands its settlement straight to the outbox, and the
//! handler slot it frees is taken by the next buffered job in the same turn of the loop. Only
//! the handlers run in tasks of their own.
//!
//! Two reserves on their way at once may reach the engine in either order, so a reserve
//! that comes back waits (parked) until every reserve sent before it came back is in: only
//! those can have been served before it. Then the buffer puts each job in the engine's
//! order (by its topic's lease token). Reserves sent after it came back were served after
//! it, so they do not hold it up, and reserving goes on meanwhile: the engine always has
//! the next cycle on its way.
//!
//! At shutdown the loop stops handing out jobs, abandons an open long-poll (the engine's
//! reserve is cancel-safe: a dropped reserve gives back what it leased), lets a cycle on
//! its way come back, gives every buffered job back at once, and then keeps driving the
//! supervisors and sending their outcomes until the last one is done.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::limits::MAX_BATCH;
use delayq_core::{Delivery, Engine, Reserve, Result, Settle, SettledAndReserved, Topic};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::buffer::{Buffer, Buffered};
use crate::delivery::{Handover, Supervised, supervise};
use crate::outbox::{Batch, Outbox, Reply};
use crate::renew::{millis, reply_margin};
use crate::settle::RELEASE_BUDGET;
use crate::shared::Shared;
use crate::window::Window;
use crate::{Handler, Payload};

/// The most jobs one reserve asks for: large enough that a round trip carries the work of
/// many handlers, small enough that one call keeps the engine busy for a short time only.
pub(crate) const RESERVE_BATCH: usize = 256;

/// What a call is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Settles and reserves without waiting.
    Cycle,
    /// Reserves with the configured wait; carries no settlements.
    LongPoll,
    /// Settles only.
    Flush,
}

/// A call to the engine on its way.
type Call = Pin<Box<dyn Future<Output = Done> + Send>>;

/// A delivery's supervisor, driven by the fetch loop.
type Supervisor = Pin<Box<dyn Future<Output = Supervised> + Send>>;

/// A call that came back.
struct Done {
    kind: Kind,
    batch: Batch,
    asked: usize,
    wait: Duration,
    sent: Instant,
    result: Result<SettledAndReserved>,
}

/// Runs until `stop` fires and every outcome of the worker's deliveries was sent.
pub(crate) async fn run<E, P, H>(shared: Arc<Shared<E, H>>, base: Reserve, stop: CancellationToken)
where
    E: Engine,
    P: Payload,
    H: Handler<P>,
{
    let config = &shared.config;
    let leased = config.mode == delayq_core::DeliveryMode::AtLeastOnce;
    // At-most-once jobs are lost if the worker dies holding them: hold no more than can run.
    let prefetch = if leased {
        config.prefetch
    } else {
        config.concurrency
    };
    let mut fetch = Fetch {
        window: Window::new(config.concurrency, prefetch),
        buffer: Buffer::new(config.min_lease_left),
        pause: config.retry_initial,
        leased,
        shared: Arc::clone(&shared),
        base,
        supervisors: FuturesUnordered::new(),
        outbox: Outbox::default(),
        main: None,
        side: None,
        ahead: None,
        parked: Vec::new(),
        sent: 0,
        asked_out: 0,
        idle: true,
        resume_at: None,
        stopping: false,
    };
    fetch.run::<P>(stop).await;
}

/// A reserving call on its way.
struct InFlight {
    kind: Kind,
    asked: usize,
    /// Its place among the worker's reserving calls, in the order they were sent.
    seq: u64,
    call: Call,
}

/// A reserve that came back while a reserve sent before it may still be on its way.
struct Parked {
    done: Done,
    /// Reserving calls sent before it came back: it waits for every one of these.
    after: u64,
}

struct Fetch<E, H> {
    shared: Arc<Shared<E, H>>,
    base: Reserve,
    leased: bool,
    /// The running deliveries' supervisors. Each holds a handler slot until its handler
    /// ended, so slots are freed only while this loop polls them.
    supervisors: FuturesUnordered<Supervisor>,
    buffer: Buffer,
    window: Window,
    outbox: Outbox,
    /// The call that may reserve (or a flush when none is due).
    main: Option<InFlight>,
    /// A flush beside an open long-poll.
    side: Option<Call>,
    /// A second cycle, started while the main one is on its way when the window has room
    /// for both, so that the engine's work on one overlaps the worker's on the other.
    ahead: Option<InFlight>,
    /// Reserves that came back while one sent before them was still on its way: their jobs
    /// wait for that one's, so that the buffer takes them all in the engine's order (two
    /// calls on their way at once may reach the engine in either order, and come back in
    /// either order when the engine answers them on connections of their own, as on
    /// PostgreSQL; see `Buffer::push`). A call sent after one came back was served after
    /// it, so it never holds it up.
    parked: Vec<Parked>,
    /// Reserving calls sent so far (the next one's `seq`).
    sent: u64,
    /// Jobs asked for by the reserves on their way: they count against the window.
    asked_out: usize,
    /// The last reserve found nothing: the next one long-polls.
    idle: bool,
    /// The next back-off pause while the engine is unavailable.
    pause: Duration,
    /// No call starts before this (after an error, or an early empty answer).
    resume_at: Option<Instant>,
    stopping: bool,
}

impl<E: Engine, H: Send + Sync + 'static> Fetch<E, H> {
    async fn run<P>(&mut self, stop: CancellationToken)
    where
        P: Payload,
        H: Handler<P>,
    {
        loop {
            let now = Instant::now();
            if self.resume_at.is_some_and(|at| at <= now) {
                self.resume_at = None;
            }
            if !self.stopping {
                self.dispatch::<P>(now);
                self.give_back_low(now);
            }
            self.start_calls(now);
            if self.finished() {
                return;
            }
            let wake = self.next_wake(now);
            // No branch waits for a free slot: slots are freed only by the supervisors this
            // loop polls, and the loop hands out jobs each time one of them ends.
            tokio::select! {
                biased;
                () = stop.cancelled(), if !self.stopping => self.begin_stop::<P>(),
                done = next(&mut self.main), if self.main.is_some() => {
                    self.main = None;
                    self.arrived::<P>(done);
                }
                done = side(&mut self.side), if self.side.is_some() => {
                    self.side = None;
                    self.finish::<P>(done);
                }
                done = next(&mut self.ahead), if self.ahead.is_some() => {
                    self.ahead = None;
                    self.arrived::<P>(done);
                }
                Some(out) = self.supervisors.next(), if !self.supervisors.is_empty() => {
                    self.supervised(out);
                }
                () = sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
            }
        }
    }

    /// Leases the engine holds for this worker when a cycle it sends now reserves: waiting
    /// in the buffer, running, and finished with an outcome the cycle cannot carry (over one
    /// call's worth). The outbox's first call's worth is settled by the cycle before it
    /// reserves, and settlements of calls sent earlier are applied before it (the engine
    /// takes a worker's calls in order).
    fn held(&self) -> usize {
        self.buffer.len() + self.shared.running() + self.outbox.len().saturating_sub(MAX_BATCH)
    }

    /// What a long-poll, which carries no settlements, holds while it waits: [`Fetch::held`]
    /// and every outcome in the outbox.
    fn held_while_polling(&self) -> usize {
        self.buffer.len() + self.shared.running() + self.outbox.len()
    }

    fn finished(&self) -> bool {
        self.stopping
            && self.supervisors.is_empty()
            && self.outbox.is_empty()
            && self.main.is_none()
            && self.side.is_none()
            && self.ahead.is_none()
            && self.parked.is_empty()
    }

    /// A call came back. A flush is finished at once; a reserve waits (see
    /// [`Fetch::parked`]) until every reserve sent before it came back is in, and then the
    /// reserves that may go are finished together, the buffer putting their jobs in the
    /// engine's order.
    fn arrived<P>(&mut self, done: Done)
    where
        P: Payload,
        H: Handler<P>,
    {
        if done.asked == 0 {
            self.finish::<P>(done);
            return;
        }
        self.parked.push(Parked {
            done,
            after: self.sent,
        });
        self.unpark::<P>();
    }

    /// Finishes the parked reserves that no reserve on its way can precede: those that came
    /// back after the oldest one on its way was sent. A long-poll is never on its way beside
    /// another reserve, so no parked reserve waits for one (it could wait its whole wait).
    fn unpark<P>(&mut self)
    where
        P: Payload,
        H: Handler<P>,
    {
        let oldest = [&self.main, &self.ahead]
            .into_iter()
            .flatten()
            .filter(|c| c.asked > 0)
            .map(|c| c.seq)
            .min();
        let (go, wait): (Vec<Parked>, Vec<Parked>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|p| oldest.is_none_or(|o| p.after <= o));
        self.parked = wait;
        for p in go {
            self.finish::<P>(p.done);
        }
    }

    /// The next timer: the end of a pause, the outbox's flush (when a flush could start),
    /// a buffered job's lease running low. Never a time already past, so the loop cannot
    /// spin on it.
    fn next_wake(&self, now: Instant) -> Option<Instant> {
        if let Some(at) = self.resume_at {
            return Some(at);
        }
        let can_flush = match &self.main {
            None => true,
            Some(c) if c.kind == Kind::LongPoll => self.side.is_none(),
            Some(_) => false,
        };
        let flush = self.outbox.flush_at().filter(|_| can_flush);
        let low = self.buffer.next_low().filter(|_| !self.stopping);
        [flush, low]
            .into_iter()
            .flatten()
            .min()
            .filter(|at| *at > now)
    }

    /// Hands buffered jobs to free handler slots.
    fn dispatch<P>(&mut self, now: Instant)
    where
        P: Payload,
        H: Handler<P>,
    {
        while !self.buffer.is_empty() {
            let Ok(permit) = Arc::clone(&self.shared.slots).try_acquire_owned() else {
                return;
            };
            self.hand_over::<P>(permit, now);
        }
    }

    /// Starts the next buffered job's supervisor with `permit`, renewing its lease first
    /// when too little is left; a job whose lease is over by the estimate is left alone.
    fn hand_over<P>(&mut self, permit: OwnedSemaphorePermit, now: Instant)
    where
        P: Payload,
        H: Handler<P>,
    {
        while let Some(b) = self.buffer.pop() {
            if b.expired(now) {
                lease_ended_in_buffer(&b);
                continue;
            }
            let renew_first = b.low(now, self.buffer.min_share());
            let handover = Handover {
                delivery: b.delivery,
                lease_end: b.lease_end,
                renew_first,
            };
            self.start::<P>(handover, permit);
            return;
        }
    }

    /// Gives back buffered jobs whose lease ran low while every handler was busy, and holds
    /// fewer from now on.
    fn give_back_low(&mut self, now: Instant) {
        if self.buffer.next_low().is_none_or(|at| at > now) {
            return;
        }
        let low = self.buffer.take_low(now);
        if low.is_empty() {
            return;
        }
        for b in low {
            self.give_back(b, false, now);
        }
        self.window.shrink_to(self.held());
    }

    /// Queues the release of a buffered job (or leaves it when its lease is over).
    fn give_back(&mut self, b: Buffered, at_shutdown: bool, now: Instant) {
        if b.expired(now) {
            lease_ended_in_buffer(&b);
            return;
        }
        let Some(lease) = b.delivery.lease else {
            return;
        };
        let until = if at_shutdown {
            b.lease_end.min(now + RELEASE_BUDGET)
        } else {
            b.lease_end
        };
        self.outbox.push(
            Settle::Release(lease),
            until,
            Reply::Buffered { at_shutdown },
            now,
        );
    }

    /// Starts a delivery's supervisor; the shutdown's drain counts it until it is done.
    fn start<P>(&mut self, handover: Handover, permit: OwnedSemaphorePermit)
    where
        P: Payload,
        H: Handler<P>,
    {
        let task = supervise::<E, P, H>(Arc::clone(&self.shared), handover, permit);
        self.supervisors
            .push(Box::pin(self.shared.supervisors.track_future(task)));
    }

    /// A supervisor ended: its settlement goes into the outbox.
    fn supervised(&mut self, out: Supervised) {
        let Some(out) = out else {
            return;
        };
        if let Some(ran) = out.ran {
            self.window.observe(ran);
        }
        self.outbox.push(
            out.settle,
            out.until,
            Reply::Delivery(out.then),
            Instant::now(),
        );
    }

    /// Starts the calls that are due.
    fn start_calls(&mut self, now: Instant) {
        if self.resume_at.is_some() {
            return;
        }
        // At shutdown everything goes at once; otherwise outcomes wait for company.
        let flush_due = !self.outbox.is_empty() && (self.stopping || self.outbox.due(now));
        let refill = (self.window.size() / 2).clamp(1, RESERVE_BATCH);
        if self.main.is_none() {
            // After an empty reserve, nothing more reserves until the cycle ahead is back.
            let need = if self.stopping || (self.idle && self.ahead.is_some()) {
                0
            } else {
                self.window
                    .need(self.held() + self.asked_out)
                    .min(RESERVE_BATCH)
            };
            let poll_need = if need == 0 {
                0
            } else {
                self.window
                    .need(self.held_while_polling() + self.asked_out)
                    .min(RESERVE_BATCH)
            };
            if poll_need > 0 && self.idle {
                let wait = self.base.wait;
                self.main = Some(self.call(Kind::LongPoll, Batch::default(), poll_need, wait));
            } else if need > 0 && (self.buffer.is_empty() || need >= refill || flush_due) {
                let batch = self.outbox.take();
                self.main = Some(self.call(Kind::Cycle, batch, need, Duration::ZERO));
            } else if flush_due {
                let batch = self.outbox.take();
                self.main = Some(self.call(Kind::Flush, batch, 0, Duration::ZERO));
                return;
            }
        }
        if !self.stopping
            && !self.idle
            && self.ahead.is_none()
            && self.main.as_ref().is_some_and(|c| c.kind == Kind::Cycle)
        {
            let need = self
                .window
                .need(self.held() + self.asked_out)
                .min(RESERVE_BATCH);
            if need >= refill {
                let batch = self.outbox.take();
                self.ahead = Some(self.call(Kind::Cycle, batch, need, Duration::ZERO));
            }
        }
        let flush_due = !self.outbox.is_empty() && (self.stopping || self.outbox.due(now));
        let polling = self.main.as_ref().is_some_and(|c| c.kind == Kind::LongPoll);
        if flush_due && self.side.is_none() && polling {
            let batch = self.outbox.take();
            self.side = Some(self.call(Kind::Flush, batch, 0, Duration::ZERO).call);
        }
    }

    fn call(&mut self, kind: Kind, batch: Batch, asked: usize, wait: Duration) -> InFlight {
        debug_assert!(batch.settles.len() <= MAX_BATCH);
        self.asked_out += asked;
        let seq = self.sent;
        if asked > 0 {
            self.sent += 1;
        }
        let shared = Arc::clone(&self.shared);
        let req = Reserve {
            max: asked,
            wait,
            ..self.base.clone()
        };
        let call = Box::pin(async move {
            let sent = Instant::now();
            let result = shared.engine.settle_and_reserve(&batch.settles, &req).await;
            Done {
                kind,
                batch,
                asked,
                wait,
                sent,
                result,
            }
        });
        InFlight {
            kind,
            asked,
            seq,
            call,
        }
    }

    /// A call came back: answer its settlements, buffer its jobs, adjust the window.
    fn finish<P>(&mut self, done: Done)
    where
        P: Payload,
        H: Handler<P>,
    {
        let now = Instant::now();
        let Done {
            kind,
            batch,
            asked,
            wait,
            sent,
            result,
        } = done;
        self.asked_out = self.asked_out.saturating_sub(asked);
        self.note_unreachable();
        let SettledAndReserved {
            settled,
            deliveries,
        } = match result {
            Ok(r) => r,
            Err(e) => {
                let pause = self.pause;
                if e.is_retryable() {
                    tracing::warn!(error = %e, retry_in_ms = millis(pause), "cannot reach the engine: pausing");
                } else {
                    tracing::error!(error = %e, retry_in_ms = millis(pause), "the engine refused the worker's call: pausing");
                }
                batch.failed(&e, now + pause, &mut self.outbox, &self.shared.tally);
                self.resume_at = Some(now + pause);
                self.pause = (pause * 2).min(self.shared.config.retry_max);
                return;
            }
        };
        self.pause = self.shared.config.retry_initial;
        let retry_at = now + self.pause;
        batch.answer(settled, retry_at, &mut self.outbox, &self.shared.tally);
        if asked == 0 {
            return;
        }
        let got = deliveries.len();
        self.idle = got == 0;
        if got == 0 && kind == Kind::LongPoll && sent.elapsed() < wait {
            // An engine answers a long-poll empty only once the wait is over; one that
            // answers sooner would make this loop spin, so pause instead.
            tracing::debug!("the engine answered an empty reserve before the wait was over");
            self.resume_at = Some(now + self.shared.config.retry_initial);
        }
        if self.leased {
            self.window.reserved(asked, got.min(asked));
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            let lease_end = lease_end(&d, sent, wait, now);
            if i >= asked {
                too_many(&d);
                self.give_back(
                    Buffered {
                        delivery: d,
                        lease_end,
                    },
                    false,
                    now,
                );
            } else if self.stopping {
                self.stop_one::<P>(d, lease_end, now);
            } else {
                self.buffer.push(d, lease_end);
            }
        }
    }

    /// After a call: the topics the engine could not reach (`Engine::unreachable`, which
    /// makes no call), logged when they changed since the call before, and kept for the
    /// report.
    fn note_unreachable(&self) {
        let now = self.shared.engine.unreachable(&self.base.topics);
        match self.shared.tally.unreachable(now) {
            None => {}
            Some(now) if now.is_empty() => {
                tracing::info!("every topic is reachable again");
            }
            Some(now) => {
                let topics: Vec<&str> = now.iter().map(Topic::as_str).collect();
                tracing::warn!(
                    ?topics,
                    "the engine cannot reach these topics now (a primary down or hung): the other topics are served, theirs wait until it answers"
                );
            }
        }
    }

    /// Shutdown: no more jobs to handlers, no more reserves; the buffer goes back at once.
    fn begin_stop<P>(&mut self)
    where
        P: Payload,
        H: Handler<P>,
    {
        self.stopping = true;
        if let Some(poll) = self.main.take_if(|c| c.kind == Kind::LongPoll) {
            // A long-poll carries no settlements, and the engine's reserve loses nothing
            // when dropped, even on its way back with jobs: it gives them back itself
            // (`Engine::reserve`'s cancel safety).
            drop(poll.call);
            self.asked_out = self.asked_out.saturating_sub(poll.asked);
            self.unpark::<P>();
        }
        let now = Instant::now();
        let held = self.buffer.take_all();
        if !held.is_empty() {
            tracing::info!(
                buffered = held.len(),
                "shutdown: giving back the buffered jobs no handler started"
            );
        }
        for b in held {
            self.stop_one::<P>(b.delivery, b.lease_end, now);
        }
    }

    /// A job that arrives or waits when the worker stops: released; an at-most-once job
    /// (already gone from the engine) still runs if a slot is free.
    fn stop_one<P>(&mut self, d: Delivery, lease_end: Instant, now: Instant)
    where
        P: Payload,
        H: Handler<P>,
    {
        if d.lease.is_some() {
            self.give_back(
                Buffered {
                    delivery: d,
                    lease_end,
                },
                true,
                now,
            );
            return;
        }
        let Ok(permit) = Arc::clone(&self.shared.slots).try_acquire_owned() else {
            tracing::error!(topic = %d.job.topic, id = %d.job.id, outcome = "dropped", "shutdown: an at-most-once job arrived with no free handler: it is lost");
            self.shared
                .tally
                .record(crate::report::Outcome::Dropped, &d.job.topic, &d.job.id);
            return;
        };
        let handover = Handover {
            delivery: d,
            lease_end,
            renew_first: false,
        };
        self.start::<P>(handover, permit);
    }
}

/// The early estimate of a delivery's lease end. The engine leased it after the call was
/// sent, so `sent + ttr` is never late; a long-poll may have waited long before the engine
/// leased the job, so its reply's arrival less a margin is used when later.
fn lease_end(d: &Delivery, sent: Instant, wait: Duration, received: Instant) -> Instant {
    let ttr = d.job.ttr;
    let start = if wait.is_zero() {
        sent
    } else {
        let arrived = received.checked_sub(reply_margin(ttr)).unwrap_or(received);
        sent.max(arrived)
    };
    start + ttr
}

fn lease_ended_in_buffer(b: &Buffered) {
    tracing::warn!(
        topic = %b.delivery.job.topic,
        id = %b.delivery.job.id,
        "a buffered job's lease ended before a handler was free: the engine will deliver it again"
    );
}

fn too_many(d: &Delivery) {
    tracing::error!(
        topic = %d.job.topic,
        id = %d.job.id,
        "the engine returned more jobs than asked for; releasing the extra one (this is an engine bug)"
    );
}

async fn next(call: &mut Option<InFlight>) -> Done {
    match call {
        Some(c) => c.call.as_mut().await,
        None => std::future::pending().await,
    }
}

async fn side(call: &mut Option<Call>) -> Done {
    match call {
        Some(f) => f.as_mut().await,
        None => std::future::pending().await,
    }
}
