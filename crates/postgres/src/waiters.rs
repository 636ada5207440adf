//! Waiting reservers: one `LISTEN delayq` connection per engine, and the reservers of this
//! process waiting per topic.
//!
//! Every write that makes a job due, or places one whose due time may be earlier than a
//! waiter sleeps until, sends `NOTIFY delayq, '<due ms> <topic>'` (lib.sql's
//! `delayq.signal`, delivered at commit). The listener wakes each waiter of that topic
//! whose planned wake-up is later than that due time; the waiter then reserves again, and
//! when it finds nothing asks the database when to look next (`delayq.next_wake`) and sleeps
//! until then. While the listening connection is down (it is made again, with a back-off)
//! waiters look at least every [`OFFLINE_WAKE`], and always at least every [`SAFETY_WAKE`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::Topic;
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

use crate::connect::Connector;

/// The longest a waiter sleeps without looking, whatever it was told.
pub(crate) const SAFETY_WAKE: Duration = Duration::from_secs(10);

/// The longest a waiter sleeps while the listening connection is down.
pub(crate) const OFFLINE_WAKE: Duration = Duration::from_millis(250);

/// One waiting reserver: woken through `notify`, when a due time before `until` (ms on the
/// database's clock) is signalled for one of its topics.
pub(crate) struct Waiter {
    pub(crate) notify: Notify,
    pub(crate) until: AtomicI64,
}

/// The waiters of one engine, by topic.
#[derive(Default)]
pub(crate) struct Waiters {
    by_topic: Mutex<HashMap<Topic, Vec<Arc<Waiter>>>>,
    /// True while the listening connection is up.
    online: AtomicBool,
}

/// A waiter's registration; unregisters when dropped.
pub(crate) struct Registration<'a> {
    waiters: &'a Waiters,
    topics: Vec<Topic>,
    pub(crate) waiter: Arc<Waiter>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut map = self
            .waiters
            .by_topic
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for t in &self.topics {
            if let Some(list) = map.get_mut(t) {
                list.retain(|w| !Arc::ptr_eq(w, &self.waiter));
                if list.is_empty() {
                    map.remove(t);
                }
            }
        }
    }
}

impl Waiters {
    /// Registers a waiter on `topics`, to be woken by any signal until told otherwise.
    pub(crate) fn register(&self, topics: &[Topic]) -> Registration<'_> {
        let waiter = Arc::new(Waiter {
            notify: Notify::new(),
            until: AtomicI64::new(i64::MAX),
        });
        let mut map = self.by_topic.lock().unwrap_or_else(|p| p.into_inner());
        for t in topics {
            map.entry(t.clone()).or_default().push(waiter.clone());
        }
        Registration {
            waiters: self,
            topics: topics.to_vec(),
            waiter,
        }
    }

    /// Whether the listening connection is up.
    pub(crate) fn online(&self) -> bool {
        self.online.load(Ordering::Relaxed)
    }

    /// A signal: `topic` has work due at `due` ms.
    fn signal(&self, topic: &str, due: i64) {
        let Ok(topic) = Topic::new(topic) else {
            return;
        };
        let map = self.by_topic.lock().unwrap_or_else(|p| p.into_inner());
        for w in map.get(&topic).into_iter().flatten() {
            if due < w.until.load(Ordering::Relaxed) {
                w.notify.notify_one();
            }
        }
    }

    /// Wakes every waiter: the listening connection came back, and signals may have been
    /// missed while it was down.
    fn wake_all(&self) {
        let map = self.by_topic.lock().unwrap_or_else(|p| p.into_inner());
        for w in map.values().flatten() {
            w.notify.notify_one();
        }
    }
}

/// Listens on its own connection for as long as `waiters` has another owner, connecting
/// again after a failure.
pub(crate) async fn listen(connector: Connector, waiters: std::sync::Weak<Waiters>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if waiters.strong_count() == 0 {
            return;
        }
        match connector.config.connect(connector.tls.clone()).await {
            Ok((client, mut connection)) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(m) = messages.next().await {
                        match m {
                            Ok(AsyncMessage::Notification(n)) => {
                                if tx.send(n.payload().to_string()).is_err() {
                                    return;
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(error = %e, "the delayq LISTEN connection failed");
                                return;
                            }
                        }
                    }
                });
                if let Err(e) = client.batch_execute("LISTEN delayq").await {
                    tracing::warn!(error = %e, "LISTEN delayq failed");
                    driver.abort();
                } else {
                    backoff = Duration::from_millis(50);
                    if let Some(w) = waiters.upgrade() {
                        w.online.store(true, Ordering::Relaxed);
                        w.wake_all();
                    }
                    loop {
                        // Checks now and then that the engine is still there.
                        let payload =
                            match tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
                                Ok(Some(p)) => p,
                                Ok(None) => break,
                                Err(_) if waiters.strong_count() == 0 => {
                                    driver.abort();
                                    return;
                                }
                                Err(_) => continue,
                            };
                        let Some(w) = waiters.upgrade() else {
                            driver.abort();
                            return;
                        };
                        if let Some((due, topic)) = payload.split_once(' ')
                            && let Ok(due) = due.parse::<i64>()
                        {
                            w.signal(topic, due);
                        }
                    }
                    driver.abort();
                }
                drop(client);
            }
            Err(e) => {
                tracing::debug!(error = %e, "the delayq LISTEN connection cannot be made");
            }
        }
        if let Some(w) = waiters.upgrade() {
            w.online.store(false, Ordering::Relaxed);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}
