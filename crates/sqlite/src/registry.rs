//! The topic registry: every topic's name, numeric id (`topics.tid`), settings and pause,
//! loaded at open and updated by the writer after each commit that created a topic, set its
//! settings or paused it.

use std::collections::HashMap;
use std::sync::RwLock;

use delayq_core::{Retention, Topic, TopicConfig};

/// Topic names and ids, shared by the writer and the engine handles.
#[derive(Default)]
pub(crate) struct Registry {
    maps: RwLock<Maps>,
}

#[derive(Default)]
struct Maps {
    by_name: HashMap<Topic, i64>,
    by_tid: HashMap<i64, Topic>,
    /// The settings of the topics that have any.
    configs: HashMap<i64, TopicConfig>,
    /// The end of each paused topic's pause, ms (it may have passed).
    paused: HashMap<i64, u64>,
}

impl Registry {
    /// The id of a committed topic.
    pub(crate) fn tid(&self, topic: &Topic) -> Option<i64> {
        self.read().by_name.get(topic).copied()
    }

    /// The name of a committed topic.
    pub(crate) fn name(&self, tid: i64) -> Option<Topic> {
        self.read().by_tid.get(&tid).cloned()
    }

    /// Records a committed topic.
    pub(crate) fn add(&self, tid: i64, topic: Topic) {
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        maps.by_name.insert(topic.clone(), tid);
        maps.by_tid.insert(tid, topic);
    }

    /// The settings of a committed topic (none set: the default).
    pub(crate) fn config(&self, tid: i64) -> TopicConfig {
        self.read().configs.get(&tid).copied().unwrap_or_default()
    }

    /// The retention of a committed topic, if it has one (what an ack asks).
    pub(crate) fn retention(&self, tid: i64) -> Option<Retention> {
        self.read().configs.get(&tid).and_then(|c| c.retention)
    }

    /// The settings of a topic by name (none set, or no such topic: the default).
    pub(crate) fn config_of(&self, topic: &Topic) -> TopicConfig {
        let maps = self.read();
        maps.by_name
            .get(topic)
            .and_then(|tid| maps.configs.get(tid))
            .copied()
            .unwrap_or_default()
    }

    /// Records a topic's committed settings.
    pub(crate) fn set_config(&self, tid: i64, config: TopicConfig) {
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        if config == TopicConfig::default() {
            maps.configs.remove(&tid);
        } else {
            maps.configs.insert(tid, config);
        }
    }

    /// The end of a committed topic's pause when it is paused at `now` (ms).
    pub(crate) fn paused_until(&self, tid: i64, now: u64) -> Option<u64> {
        self.read().paused.get(&tid).copied().filter(|&t| t > now)
    }

    /// [`Registry::paused_until`] by name (no such topic: not paused).
    pub(crate) fn paused_until_of(&self, topic: &Topic, now: u64) -> Option<u64> {
        let maps = self.read();
        maps.by_name
            .get(topic)
            .and_then(|tid| maps.paused.get(tid))
            .copied()
            .filter(|&t| t > now)
    }

    /// The committed topics paused at `now` (ms), in no order: they are on the topic list
    /// whether they hold jobs or not.
    pub(crate) fn paused_topics(&self, now: u64) -> Vec<Topic> {
        let maps = self.read();
        maps.paused
            .iter()
            .filter(|&(_, &until)| until > now)
            .filter_map(|(tid, _)| maps.by_tid.get(tid).cloned())
            .collect()
    }

    /// Records a topic's committed pause (`None`: not paused).
    pub(crate) fn set_paused(&self, tid: i64, until: Option<u64>) {
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        match until {
            Some(t) => maps.paused.insert(tid, t),
            None => maps.paused.remove(&tid),
        };
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Maps> {
        // The maps are consistent after every single insert, so a panic elsewhere while the
        // lock was held cannot have left them half written.
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }
}
