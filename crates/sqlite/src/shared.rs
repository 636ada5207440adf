//! What the writer thread and the engine handles share (clock, topic registry, timer index,
//! waiters), and the [`Effect`]s a commit has on it.
//!
//! A request records effects while it runs inside the writer's transaction; they are
//! applied only after the commit succeeded, and before the callers are answered, so no one
//! ever sees a topic, a timer or a wake-up of a write that was rolled back, and a caller
//! that got its answer finds the topic registered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use delayq_core::{Topic, TopicConfig};

use crate::clock::Clock;
use crate::registry::Registry;
use crate::timers::{Kind, Timers};
use crate::waiters::Waiters;

/// The shared state of one engine.
pub(crate) struct Shared {
    pub(crate) clock: Clock,
    pub(crate) registry: Registry,
    pub(crate) timers: Mutex<Timers>,
    pub(crate) waiters: Arc<Waiters>,
}

/// A consequence of a write, applied after its commit.
#[derive(Debug)]
pub(crate) enum Effect {
    /// A topic was created.
    NewTopic(i64, Topic),
    /// A topic's settings were set.
    Config(i64, TopicConfig),
    /// A topic's timer entry may be earlier now.
    Note(i64, Kind, u64),
    /// A topic's timer entry is now exactly this (or none).
    Set(i64, Kind, Option<u64>),
    /// A topic was purged.
    Clear(i64),
    /// This many jobs of a topic became ready.
    Ready(i64, usize),
    /// A topic's pause was set (`Some(end)`, ms) or ended (`None`); `wake`: it ended or got
    /// shorter, so the topic's waiters look again.
    Paused(i64, Option<u64>, bool),
}

impl Shared {
    pub(crate) fn new(clock: Clock) -> Self {
        Shared {
            clock,
            registry: Registry::default(),
            timers: Mutex::new(Timers::default()),
            waiters: Arc::new(Waiters::default()),
        }
    }

    pub(crate) fn timers(&self) -> MutexGuard<'_, Timers> {
        // Each timer update is complete before the next starts, so a poisoned index is
        // still consistent.
        self.timers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies the effects of a commit, in the order they happened.
    pub(crate) fn apply(&self, effects: Vec<Effect>) {
        if effects.is_empty() {
            return;
        }
        let mut ready: HashMap<i64, usize> = HashMap::new();
        {
            let mut timers = self.timers();
            for e in effects {
                match e {
                    Effect::NewTopic(tid, topic) => self.registry.add(tid, topic),
                    Effect::Config(tid, config) => self.registry.set_config(tid, config),
                    Effect::Note(tid, kind, ms) => timers.note(tid, kind, ms),
                    Effect::Set(tid, kind, ms) => timers.set(tid, kind, ms),
                    Effect::Clear(tid) => timers.clear(tid),
                    Effect::Ready(tid, n) => {
                        let r = ready.entry(tid).or_default();
                        *r = r.saturating_add(n);
                    }
                    Effect::Paused(tid, until, wake) => {
                        self.registry.set_paused(tid, until);
                        if wake {
                            *ready.entry(tid).or_default() = usize::MAX;
                        }
                    }
                }
            }
        }
        for (tid, n) in ready {
            if let Some(topic) = self.registry.name(tid) {
                self.waiters.wake(&topic, n);
            }
        }
    }
}
