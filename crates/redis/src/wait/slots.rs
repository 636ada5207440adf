//! Waiting for signals on a Redis Cluster: one task per hash slot with local waiters, each
//! blocking with `BZPOPMIN` on that slot's wake keys on a dedicated connection to the node
//! that serves the slot.
//!
//! One `BZPOPMIN` cannot span slots (Redis answers CROSSSLOT even for slots of one node), and
//! a blocking command on the shared cluster connection would stall every call to that node;
//! so each slot gets its own plain connection. A task starts at a seed and follows MOVED to
//! the slot's owner: Redis answers MOVED to a command sent elsewhere, and also to a client
//! blocked on a slot that moved away (a migration, a failover). A seed is first asked with a
//! `BZPOPMIN` of 1 ms, bounded in time, so that a seed that is down or hung cannot hold the
//! wait of a slot served elsewhere. After any interruption (a
//! redirection, a dropped connection, a change of the topics it blocks on) the task wakes one
//! waiter of each of its topics once it blocks again: a signal may have been popped and lost
//! meanwhile, and a waiter that looks learns the topic's next event afresh.
//!
//! The task ends, and says so to the waker, when its slot has no local waiter left after a
//! wait returned; the waker starts a new one when waiters come back.

use std::collections::{BTreeSet, HashMap};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster_routing::Slot;
use redis::{AsyncConnectionConfig, RedisResult, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{BLOCK, Shared, on_signal, parse_signal};
use crate::conn::{Conn, NodeClients};
use crate::keys::Part;

/// The running slot tasks of one waker.
#[derive(Default)]
pub(super) struct SlotWaits {
    tasks: HashMap<Slot, SlotTask>,
}

struct SlotTask {
    /// The topics the task was last told about.
    topics: BTreeSet<Part>,
    /// Tells the task that its slot's topics changed.
    changed: Arc<Notify>,
    /// Set by the task, under the waiters' lock, when it found no waiter and ends: a waiter
    /// registering after that pokes the waker, which then starts a new task.
    done: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Drop for SlotTask {
    fn drop(&mut self) {
        // Dropping the task's future closes its connection, which ends the server's wait.
        self.handle.abort();
    }
}

impl SlotWaits {
    /// Brings the tasks in line with `wanted`, the topics with local waiters: a task for
    /// every slot among them (started anew if its last one ended), told when its topics
    /// changed. Tasks of slots without waiters end on their own.
    pub(super) fn update(
        &mut self,
        shared: &Arc<Shared>,
        main: &Conn,
        nodes: &NodeClients,
        wanted: &BTreeSet<Part>,
    ) {
        self.tasks.retain(|_, t| !t.done.load(Ordering::SeqCst));
        let mut by_slot: HashMap<Slot, BTreeSet<Part>> = HashMap::new();
        for t in wanted {
            by_slot
                .entry(shared.slot_of(t))
                .or_default()
                .insert(t.clone());
        }
        for (slot, topics) in by_slot {
            match self.tasks.get_mut(&slot) {
                Some(task) if task.topics == topics => {}
                Some(task) => {
                    task.topics = topics;
                    task.changed.notify_one();
                }
                None => {
                    let changed = Arc::new(Notify::new());
                    let done = Arc::new(AtomicBool::new(false));
                    let handle = tokio::spawn(wait_slot(
                        shared.clone(),
                        main.clone(),
                        nodes.clone(),
                        slot,
                        (changed.clone(), done.clone()),
                    ));
                    self.tasks.insert(
                        slot,
                        SlotTask {
                            topics,
                            changed,
                            done,
                            handle,
                        },
                    );
                }
            }
        }
    }
}

/// Waits for signals on the wake keys of `slot`'s topics until none has a local waiter.
async fn wait_slot(
    shared: Arc<Shared>,
    main: Conn,
    nodes: NodeClients,
    slot: Slot,
    (changed, done): (Arc<Notify>, Arc<AtomicBool>),
) {
    // The node believed to serve the slot; none: the next seed.
    let mut addr: Option<String> = None;
    let mut seed = 0;
    let mut conn: Option<MultiplexedConnection> = None;
    let mut retry_delay = Duration::from_millis(100);
    // Signals may have been lost since the last wait: wake the waiters once blocked again.
    let mut resync = false;
    loop {
        let topics = {
            let st = shared.lock();
            let topics: BTreeSet<Part> = st
                .topics
                .keys()
                .filter(|t| shared.slot_of(t) == slot)
                .cloned()
                .collect();
            if topics.is_empty() {
                done.store(true, Ordering::SeqCst);
            }
            topics
        };
        if topics.is_empty() {
            shared.poke.notify_one();
            return;
        }
        let target = match &addr {
            Some(a) => a.clone(),
            None => {
                seed += 1;
                let seeds = nodes.seeds();
                // `seeds` is never empty (the URL is refused without one); an empty address
                // would just fail to connect and be retried.
                seeds
                    .get(seed % seeds.len().max(1))
                    .cloned()
                    .unwrap_or_default()
            }
        };
        let mut c = match conn.take() {
            Some(c) => c,
            None => match connect(&nodes, &target).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(node = %target, error = %e, retry_in_ms = retry_delay.as_millis() as u64, "cannot open a blocking connection for wake-up signals on the cluster; waiters fall back to their timers and safety wake");
                    addr = None;
                    resync = true;
                    tokio::time::sleep(retry_delay).await;
                    retry_delay = (retry_delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            },
        };
        // A node not yet known to serve the slot (a seed) is asked first with a call that
        // cannot block, bounded in time: a seed that is down or hung (SIGSTOP) would
        // otherwise hold this slot's wait for as long as it does not answer, though the
        // slot's own primary is fine.
        if addr.is_none() {
            match probe(&mut c, &shared, &topics).await {
                Probe::Serves(signal) => {
                    if let Some((topic, ms)) = parse_signal(&shared.keys, signal) {
                        on_signal(&shared, &main, topic, ms).await;
                        shared.poke.notify_one();
                    }
                }
                Probe::Moved(to) => {
                    addr = to;
                    resync = true;
                    continue;
                }
                Probe::Failed(why) => {
                    tracing::debug!(node = %target, error = %why, "a seed did not answer for a slot's wait; trying the next");
                    resync = true;
                    tokio::time::sleep(retry_delay).await;
                    retry_delay = (retry_delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
        }
        if std::mem::take(&mut resync) {
            shared.wake_topics(&topics);
        }
        let mut cmd = redis::cmd("BZPOPMIN");
        for t in &topics {
            cmd.arg(shared.keys.wake(t));
        }
        cmd.arg(BLOCK.as_secs_f64());
        let outcome = {
            let mut blocked = pin!(cmd.query_async::<Value>(&mut c));
            loop {
                tokio::select! {
                    r = &mut blocked => break Some(r),
                    _ = changed.notified() => {
                        if shared.topics_in(slot) != topics {
                            break None;
                        }
                    }
                }
            }
        };
        match outcome {
            // The topics changed: drop the connection (ending the server's wait) and block
            // again on the new set.
            None => resync = true,
            Some(Ok(v)) => {
                conn = Some(c);
                addr = Some(target);
                retry_delay = Duration::from_millis(100);
                if let Some((topic, ms)) = parse_signal(&shared.keys, v) {
                    on_signal(&shared, &main, topic, ms).await;
                    // The waker arms the topic's timer from what the signal said.
                    shared.poke.notify_one();
                }
            }
            Some(Err(e)) if e.code() == Some("MOVED") => {
                // The slot is served elsewhere (never was here, migrated, failed over).
                addr = e.redirect_node().map(|(a, _)| a.to_string());
                resync = true;
            }
            Some(Err(e)) => {
                // TRYAGAIN or ASK (the slot is migrating), CLUSTERDOWN (a failover), or the
                // node went away: try again after a pause, from a seed if it is unreachable.
                tracing::debug!(node = %target, error = %e, "a blocking wait on the cluster failed; trying again");
                if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
                    addr = None;
                } else {
                    addr = Some(target);
                }
                resync = true;
                tokio::time::sleep(retry_delay).await;
                retry_delay = (retry_delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// How long a seed may take to answer [`probe`]: a live node answers within a tenth of a
/// second (Redis ends a blocking command's timeout `hz` times a second).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a seed answered to [`probe`].
enum Probe {
    /// It serves the slot (and answered this, perhaps a signal): block there.
    Serves(Value),
    /// The slot is served at this address (`None`: MOVED without one; the next seed).
    Moved(Option<String>),
    /// No answer in time, or another error: the next seed.
    Failed(String),
}

/// Asks the node of `c` whether it serves the slot of `topics`, within [`PROBE_TIMEOUT`]:
/// a `BZPOPMIN` on their wake keys that blocks for 1 ms only (so its answer, a signal, is
/// the blocking wait's own, and it needs no permission the wait does not).
async fn probe(c: &mut MultiplexedConnection, shared: &Shared, topics: &BTreeSet<Part>) -> Probe {
    let mut cmd = redis::cmd("BZPOPMIN");
    for t in topics {
        cmd.arg(shared.keys.wake(t));
    }
    cmd.arg(0.001);
    match tokio::time::timeout(PROBE_TIMEOUT, cmd.query_async::<Value>(c)).await {
        Ok(Ok(v)) => Probe::Serves(v),
        Ok(Err(e)) if e.code() == Some("MOVED") => {
            Probe::Moved(e.redirect_node().map(|(a, _)| a.to_string()))
        }
        Ok(Err(e)) => Probe::Failed(e.to_string()),
        Err(_) => Probe::Failed(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
    }
}

/// A connection to the node at `addr` for one blocking wait: no response timeout, since a
/// `BZPOPMIN` legitimately takes as long as it blocks.
async fn connect(nodes: &NodeClients, addr: &str) -> RedisResult<MultiplexedConnection> {
    let cfg = AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(Some(Duration::from_secs(5)));
    nodes
        .client(addr)?
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
}
