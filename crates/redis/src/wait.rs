//! Event-driven waiting for reservers: one waker task per engine instance.
//!
//! Local reservers that found nothing register interest in their topics and wait on a
//! per-topic [`Notify`]. The waker task wakes one of them (`notify_one`) when
//! - a topic's next event (due time or lease deadline, learnt from reserve replies or from a
//!   signal) is reached on the local clock, mapped from Redis time by [`Clock`]; or
//! - a signal arrives: the task keeps one BZPOPMIN on the wake keys of every topic with local
//!   waiters, on its own connection with no response timeout (a blocking command on a
//!   shared multiplexed connection would stall everyone on it). Scripts add to a wake key
//!   when they create a new earliest event, so a blocked process learns of it at once. On a
//!   Redis Cluster, where one BZPOPMIN cannot span slots, `slots` keeps one such wait per
//!   hash slot with local waiters, on a connection to the node that serves it.
//!
//! Everything here is per partition ([`Part`]; a topic of one partition is one): a waiter
//! registers on every partition of its topics and learns which one woke it, and looks there.
//! A woken reserver runs the reserve function, which hands out jobs and reports the next event;
//! if jobs are left, the next local waiter is woken in turn. When the last local waiter of a
//! topic leaves while this process knew of the topic's next event, the event goes back to
//! Redis (a signal), so that a waiter elsewhere, or the next one here, takes it over. Waiters also wake on their own every few seconds (the
//! safety wake), which covers a signal lost with a crashed process or a dropped connection.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::select_all;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisResult, Value};
use tokio::sync::{Notify, oneshot};

use crate::clock::Clock;
use crate::codec;
use crate::conn::{Conn, WakeClient};
use crate::keys::{KeySpace, Part};
use crate::library;

mod slots;

/// The shared half: what reservers call.
#[derive(Clone)]
pub(crate) struct Waiters {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the task to look at `state` again.
    poke: Notify,
    clock: Clock,
    keys: KeySpace,
}

/// How long one BZPOPMIN blocks before it is sent again. Long: a blocked connection costs
/// Redis nothing, and waiters do not depend on its timeout (they have their own safety wake).
const BLOCK: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    topics: HashMap<Part, TopicWait>,
    /// Events of topics whose last local waiter left without a job, to hand back to Redis.
    handoffs: Vec<(Part, u64)>,
}

struct TopicWait {
    waiters: usize,
    notify: Arc<Notify>,
    /// The topic's next event: the local instant to wake at, and its Redis time.
    next: Option<(Instant, u64)>,
}

impl TopicWait {
    fn new() -> Self {
        TopicWait {
            waiters: 0,
            notify: Arc::new(Notify::new()),
            next: None,
        }
    }
}

impl Waiters {
    /// Starts the waker task. It stops when `stop`'s sender is dropped.
    pub(crate) fn start(
        client: WakeClient,
        main: Conn,
        keys: KeySpace,
        stop: oneshot::Receiver<()>,
    ) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            poke: Notify::new(),
            clock: Clock::new(),
            keys,
        });
        tokio::spawn(run(shared.clone(), client, main, stop));
        Waiters { shared }
    }

    /// Records a reserve call's reply for `topic`: Redis's now (µs), received at
    /// `received`, and the topic's next event (`None` when it has none).
    pub(crate) fn observe(
        &self,
        topic: &Part,
        redis_now_us: u64,
        next_ms: Option<u64>,
        received: Instant,
    ) {
        let clock = &self.shared.clock;
        clock.observe(redis_now_us, received);
        let mut st = self.shared.lock();
        let Some(tw) = st.topics.get_mut(topic) else {
            return;
        };
        let learnt = next_ms.map(|ms| {
            // Due already (jobs left ready): wake the next local waiter now. Due later: never
            // before Redis gets there, and never sooner than 1 ms, so an estimate that is a
            // little early cannot turn into a busy loop of calls.
            if ms * 1000 <= redis_now_us {
                (Instant::now(), ms)
            } else {
                let at = clock.local_instant(ms).unwrap_or(received);
                (at.max(Instant::now() + Duration::from_millis(1)), ms)
            }
        });
        // Keep the earlier of what was known and what the reply said: a signal popped while
        // this reply was on its way may be newer than the reply. A stale earlier time costs
        // one wake-up that finds nothing; a lost one would make a job late.
        tw.next = match (tw.next, learnt) {
            (Some(known), Some(new)) => Some(if known.0 <= new.0 { known } else { new }),
            (known, new) => new.or(known),
        };
        drop(st);
        self.shared.poke.notify_one();
    }

    /// A push from this process made a job due at `ready_at` (`due_now` when already due).
    /// Wakes or re-arms local waiters without waiting for the signal's round trip.
    pub(crate) fn pushed(&self, topic: &Part, ready_at_ms: u64, due_now: bool) {
        let clock = &self.shared.clock;
        let mut st = self.shared.lock();
        let Some(tw) = st.topics.get_mut(topic) else {
            return;
        };
        if due_now {
            tw.notify.notify_one();
            return;
        }
        let Some(at) = clock.local_instant(ready_at_ms) else {
            return;
        };
        if tw.next.is_none_or(|(cur, _)| at < cur) {
            tw.next = Some((at, ready_at_ms));
            drop(st);
            self.shared.poke.notify_one();
        }
    }

    /// Registers a waiter on `topics` until the guard is dropped.
    pub(crate) fn register(&self, topics: &[Part]) -> WaitGuard {
        let mut st = self.shared.lock();
        let mut new_topic = false;
        let notifies = topics
            .iter()
            .map(|t| {
                let tw = st.topics.entry(t.clone()).or_insert_with(TopicWait::new);
                tw.waiters += 1;
                new_topic |= tw.waiters == 1;
                tw.notify.clone()
            })
            .collect();
        drop(st);
        if new_topic {
            self.shared.poke.notify_one();
        }
        WaitGuard {
            waiters: self.clone(),
            topics: topics.to_vec(),
            notifies,
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cluster hash slot of `topic`'s keys.
    fn slot_of(&self, topic: &Part) -> redis::cluster_routing::Slot {
        redis::cluster_routing::Slot::for_key(self.keys.wake(topic))
    }

    /// The topics with local waiters whose keys live in `slot`.
    fn topics_in(&self, slot: redis::cluster_routing::Slot) -> BTreeSet<Part> {
        self.lock()
            .topics
            .keys()
            .filter(|t| self.slot_of(t) == slot)
            .cloned()
            .collect()
    }

    /// Wakes one waiter of each of `topics` (after their signals may have been lost).
    fn wake_topics(&self, topics: &BTreeSet<Part>) {
        let st = self.lock();
        for t in topics {
            if let Some(tw) = st.topics.get(t) {
                tw.notify.notify_one();
            }
        }
    }
}

/// A registered waiter. Dropping it unregisters.
pub(crate) struct WaitGuard {
    waiters: Waiters,
    topics: Vec<Part>,
    notifies: Vec<Arc<Notify>>,
}

impl WaitGuard {
    /// Resolves when one of the partitions is notified, with that partition.
    pub(crate) async fn notified(&self) -> Part {
        let futs: Vec<_> = self
            .notifies
            .iter()
            .map(|n| Box::pin(n.notified()))
            .collect();
        let (_, i, _) = select_all(futs).await;
        self.topics[i].clone()
    }
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        let shared = &self.waiters.shared;
        let mut st = shared.lock();
        let mut poke = false;
        for t in &self.topics {
            let Some(tw) = st.topics.get_mut(t) else {
                continue;
            };
            tw.waiters = tw.waiters.saturating_sub(1);
            if tw.waiters > 0 {
                continue;
            }
            // The last local waiter leaves: whatever this process knew of the topic's next
            // event (perhaps from a signal it popped, which no one else will see) goes back
            // to Redis, for a waiter elsewhere, or the next one here.
            if let Some(tw) = st.topics.remove(t)
                && let Some((_, ms)) = tw.next
            {
                st.handoffs.push((t.clone(), ms));
                poke = true;
            }
        }
        drop(st);
        if poke {
            shared.poke.notify_one();
        }
    }
}

type Blocked = Pin<Box<dyn Future<Output = (MultiplexedConnection, RedisResult<Value>)> + Send>>;

/// The dedicated blocking connection and its server-side client id.
struct BlockingConn {
    conn: MultiplexedConnection,
    id: i64,
}

async fn connect_blocking(client: &Client) -> RedisResult<BlockingConn> {
    // No response timeout: a BZPOPMIN legitimately takes as long as it blocks.
    let cfg = AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(Some(Duration::from_secs(5)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await?;
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut conn)
        .await?;
    Ok(BlockingConn { conn, id })
}

async fn run(shared: Arc<Shared>, client: WakeClient, main: Conn, mut stop: oneshot::Receiver<()>) {
    let mut idle: Option<BlockingConn> = None;
    let mut in_flight: Option<(BTreeSet<Part>, i64, Blocked)> = None;
    let mut unblocked = false;
    let mut retry_at: Option<Instant> = None;
    let mut retry_delay = Duration::from_millis(100);
    // Set when the blocking connection failed: signals may have been lost meanwhile, so every
    // waiter looks again once it is back.
    let mut resync = false;
    let mut slot_waits = slots::SlotWaits::default();

    loop {
        let (wanted, timer, handoffs) = {
            let mut st = shared.lock();
            let wanted: BTreeSet<Part> = st.topics.keys().cloned().collect();
            let timer = st
                .topics
                .values()
                .filter_map(|tw| tw.next.map(|(at, _)| at))
                .min();
            (wanted, timer, std::mem::take(&mut st.handoffs))
        };

        for (topic, ms) in handoffs {
            if let WakeClient::Cluster(_) = &client {
                // A hand-back goes to its topic's primary: one that is down or hung must not
                // hold up the timers and waits of every other slot.
                let (shared, main) = (shared.clone(), main.clone());
                tokio::spawn(async move { hand_back(&shared, &main, &topic, ms).await });
            } else {
                hand_back(&shared, &main, &topic, ms).await;
            }
        }

        // A blocked BZPOPMIN that misses a wanted topic is cut short so it can be re-sent.
        if let Some((keys, id, _)) = &in_flight
            && !unblocked
            && !wanted.is_subset(keys)
        {
            unblocked = true;
            let mut unblock = redis::cmd("CLIENT");
            unblock.arg("UNBLOCK").arg(*id);
            let r: delayq_core::Result<Value> = main.query(&unblock, "unblocking the wait").await;
            if let Err(e) = r {
                tracing::debug!(error = %e, "CLIENT UNBLOCK failed; the wait ends at its timeout");
            }
        }

        if let WakeClient::Cluster(nodes) = &client {
            slot_waits.update(&shared, &main, nodes, &wanted);
        }

        if let WakeClient::Node(client) = &client
            && in_flight.is_none()
            && !wanted.is_empty()
            && retry_at.is_none_or(|t| t <= Instant::now())
        {
            let conn = match idle.take() {
                Some(c) => Ok(c),
                None => connect_blocking(client).await,
            };
            match conn {
                Ok(BlockingConn { mut conn, id }) => {
                    retry_at = None;
                    retry_delay = Duration::from_millis(100);
                    if std::mem::take(&mut resync) {
                        wake_all(&shared);
                    }
                    let mut cmd = redis::cmd("BZPOPMIN");
                    for t in &wanted {
                        cmd.arg(shared.keys.wake(t));
                    }
                    cmd.arg(BLOCK.as_secs_f64());
                    let fut: Blocked = Box::pin(async move {
                        let r = cmd.query_async(&mut conn).await;
                        (conn, r)
                    });
                    unblocked = false;
                    in_flight = Some((wanted.clone(), id, fut));
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = retry_delay.as_millis() as u64, "cannot open the blocking connection for wake-up signals; waiters fall back to their safety wake");
                    retry_at = Some(Instant::now() + retry_delay);
                    retry_delay = (retry_delay * 2).min(Duration::from_secs(5));
                }
            }
        }

        let wake_at = match (timer, retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let blocked = async {
            match in_flight.as_mut() {
                Some((_, _, fut)) => fut.await,
                None => std::future::pending().await,
            }
        };

        tokio::select! {
            _ = &mut stop => return,
            _ = shared.poke.notified() => {}
            _ = sleep => fire_due(&shared),
            (conn, r) = blocked => {
                let (_, id, _) = in_flight.take().unwrap_or_else(|| unreachable!("the in-flight wait just completed"));
                match r {
                    Ok(v) => {
                        idle = Some(BlockingConn { conn, id });
                        if let Some((topic, ms)) = parse_signal(&shared.keys, v) {
                            on_signal(&shared, &main, topic, ms).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the blocking wait for wake-up signals failed; reconnecting");
                        resync = true;
                        retry_at = Some(Instant::now() + retry_delay);
                        retry_delay = (retry_delay * 2).min(Duration::from_secs(5));
                    }
                }
            }
        }
    }
}

/// Wakes one waiter of every topic whose next event has come.
fn fire_due(shared: &Shared) {
    let now = Instant::now();
    let mut st = shared.lock();
    for tw in st.topics.values_mut() {
        if tw.next.is_some_and(|(at, _)| at <= now) {
            tw.next = None;
            tw.notify.notify_one();
        }
    }
}

/// Wakes one waiter of every topic (after signals may have been lost).
fn wake_all(shared: &Shared) {
    for tw in shared.lock().topics.values() {
        tw.notify.notify_one();
    }
}

/// A signal for `topic` at Redis time `ms`: arm the topic's timer, or hand the signal back
/// when nobody here waits on the topic any more.
async fn on_signal(shared: &Shared, main: &Conn, topic: Part, ms: u64) {
    let handback = {
        let mut st = shared.lock();
        match st.topics.get_mut(&topic) {
            Some(tw) => {
                let at = shared.clock.local_instant(ms).unwrap_or_else(Instant::now);
                if tw.next.is_none_or(|(cur, _)| at < cur) {
                    tw.next = Some((at, ms));
                }
                false
            }
            None => true,
        }
    };
    if handback {
        hand_back(shared, main, &topic, ms).await;
    }
}

/// Gives the event at Redis time `ms` back to Redis (`lua/handback.lua`), for a waiter
/// elsewhere or the next one here; a topic left with no job gets nothing back.
async fn hand_back(shared: &Shared, main: &Conn, topic: &Part, ms: u64) {
    let keys = shared.keys.topic(topic);
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(library::HANDBACK)
        .arg(keys.len())
        .arg(&keys)
        .arg(ms);
    let r = main.call(&cmd, "handing a wake-up back").await;
    if let Err(e) = r {
        tracing::debug!(topic = %topic, error = %e, "could not hand a wake-up back to Redis; the safety wake covers it");
    }
}

/// Parses a BZPOPMIN reply `[key, member, score]` (nil on timeout or unblock).
fn parse_signal(keys: &KeySpace, v: Value) -> Option<(Part, u64)> {
    let items = codec::array(v).ok()?;
    let mut it = items.into_iter();
    let key = codec::bytes(it.next()?).ok()?;
    let _member = it.next()?;
    let score = match it.next()? {
        Value::Double(d) => d,
        other => codec::string(other).ok()?.parse::<f64>().ok()?,
    };
    let topic = keys.part_of_wake_key(&key)?;
    Some((topic, score.max(0.0) as u64))
}
