//! The topic registry: every topic's name and numeric id (`topics.tid`), loaded at open and
//! extended by the writer after each commit that created a topic.

use std::collections::HashMap;
use std::sync::RwLock;

use delayq_core::Topic;

/// Topic names and ids, shared by the writer and the engine handles.
#[derive(Default)]
pub(crate) struct Registry {
    maps: RwLock<Maps>,
}

#[derive(Default)]
struct Maps {
    by_name: HashMap<Topic, i64>,
    by_tid: HashMap<i64, Topic>,
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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Maps> {
        // The maps are consistent after every single insert, so a panic elsewhere while the
        // lock was held cannot have left them half written.
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }
}
