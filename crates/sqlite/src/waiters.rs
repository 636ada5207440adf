//! Reservers waiting for a job: one [`Notify`] per topic with waiters, woken by the writer
//! after a commit that made jobs of the topic ready.
//!
//! The writer wakes at most as many waiters as jobs became ready (`notify_one` each), so a
//! single due job does not wake a herd. A waiter registers and enables its wake-up before it
//! looks for jobs, so a job that becomes ready between its look and its sleep still wakes it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use delayq_core::Topic;
use tokio::sync::Notify;

/// The waiters of every topic.
#[derive(Default)]
pub(crate) struct Waiters {
    topics: Mutex<HashMap<Topic, Slot>>,
}

struct Slot {
    waiters: usize,
    notify: Arc<Notify>,
}

impl Waiters {
    /// Registers one waiter on `topics` until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, topics: &[Topic]) -> Registration {
        let mut map = self.lock();
        let notifies = topics
            .iter()
            .map(|t| {
                let slot = map.entry(t.clone()).or_insert_with(|| Slot {
                    waiters: 0,
                    notify: Arc::new(Notify::new()),
                });
                slot.waiters += 1;
                slot.notify.clone()
            })
            .collect();
        Registration {
            waiters: self.clone(),
            topics: topics.to_vec(),
            notifies,
        }
    }

    /// `n` jobs of `topic` became ready: wakes up to `n` of its waiters.
    pub(crate) fn wake(&self, topic: &Topic, n: usize) {
        let map = self.lock();
        if let Some(slot) = map.get(topic) {
            for _ in 0..n.min(slot.waiters) {
                slot.notify.notify_one();
            }
        }
    }

    /// True when some reserver waits on `topic`.
    pub(crate) fn has_waiters(&self, topic: &Topic) -> bool {
        self.lock().contains_key(topic)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Topic, Slot>> {
        // Every change under the lock is a single counter or map update, so a poisoned map
        // is still consistent.
        self.topics.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One waiter's registration; dropping it unregisters.
pub(crate) struct Registration {
    waiters: Arc<Waiters>,
    topics: Vec<Topic>,
    notifies: Vec<Arc<Notify>>,
}

impl Registration {
    /// The wake-ups of the registered topics.
    pub(crate) fn notifies(&self) -> &[Arc<Notify>] {
        &self.notifies
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = self.waiters.lock();
        for t in &self.topics {
            if let Some(slot) = map.get_mut(t) {
                slot.waiters -= 1;
                if slot.waiters == 0 {
                    map.remove(t);
                }
            }
        }
    }
}
