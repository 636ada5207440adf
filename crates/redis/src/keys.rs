//! Every Redis key delayq uses, built in one place from one prefix.
//!
//! A topic's keys all carry the topic as hash tag (`<prefix>:{<topic>}:<name>`), so each
//! function call touches exactly one cluster slot. The topic alphabet has no braces, so the tag is
//! always the whole topic.

use delayq_core::{Error, Topic};

/// The names of a topic's keys, in the order every function receives them as KEYS.
pub(crate) const TOPIC_KEY_NAMES: [&str; 11] = [
    "jobs", "delayed", "ready", "leases", "dead", "seq", "wake", "counters", "config", "done",
    "expiring",
];

/// Builds keys under one prefix (default `delayq`).
#[derive(Clone, Debug)]
pub(crate) struct KeySpace {
    prefix: String,
}

impl KeySpace {
    /// A key space; the prefix follows the topic alphabet (so it never holds a brace).
    pub(crate) fn new(prefix: &str) -> Result<Self, Error> {
        Topic::new(prefix).map_err(|_| Error::InvalidConfig {
            reason: format!(
                "key prefix {prefix:?} must be 1 to 128 characters from A-Z, a-z, 0-9, '_', '.', ':' and '-'"
            ),
        })?;
        Ok(KeySpace {
            prefix: prefix.to_string(),
        })
    }

    /// The keys of a topic, in function KEYS order.
    pub(crate) fn topic(&self, topic: &Topic) -> [String; TOPIC_KEY_NAMES.len()] {
        TOPIC_KEY_NAMES.map(|name| format!("{}:{{{}}}:{name}", self.prefix, topic.as_str()))
    }

    /// The wake key of a topic (a blocked waiter's BZPOPMIN target).
    pub(crate) fn wake(&self, topic: &Topic) -> String {
        format!("{}:{{{}}}:wake", self.prefix, topic.as_str())
    }

    /// The `jobs` hash of a topic (a topic holds jobs iff it exists).
    pub(crate) fn jobs(&self, topic: &Topic) -> String {
        format!("{}:{{{}}}:jobs", self.prefix, topic.as_str())
    }

    /// The topic registry: a SET of topic names, not tied to any topic's slot.
    pub(crate) fn registry(&self) -> String {
        format!("{}:topics", self.prefix)
    }

    /// The hash of every schedule (issue 14): fields `d:<name>`, `r:<name>`, `t:<name>`
    /// (`lua/schedule_put.lua`). One key, in no topic's slot.
    pub(crate) fn schedules(&self) -> String {
        format!("{}:schedules", self.prefix)
    }

    /// The topic of a wake key returned by BZPOPMIN.
    pub(crate) fn topic_of_wake_key(&self, key: &[u8]) -> Option<Topic> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix(":{")?;
        let topic = rest.strip_suffix("}:wake")?;
        Topic::new(topic).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(s: &str) -> Topic {
        Topic::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_topic_key_has_the_hash_tag() {
        let ks = KeySpace::new("delayq").unwrap_or_else(|e| panic!("{e}"));
        let keys = ks.topic(&topic("orders.cancel"));
        assert_eq!(
            keys,
            [
                "delayq:{orders.cancel}:jobs",
                "delayq:{orders.cancel}:delayed",
                "delayq:{orders.cancel}:ready",
                "delayq:{orders.cancel}:leases",
                "delayq:{orders.cancel}:dead",
                "delayq:{orders.cancel}:seq",
                "delayq:{orders.cancel}:wake",
                "delayq:{orders.cancel}:counters",
                "delayq:{orders.cancel}:config",
                "delayq:{orders.cancel}:done",
                "delayq:{orders.cancel}:expiring",
            ]
        );
        assert_eq!(ks.wake(&topic("orders.cancel")), keys[6]);
        assert_eq!(ks.jobs(&topic("orders.cancel")), keys[0]);
        assert_eq!(ks.registry(), "delayq:topics");
        assert_eq!(ks.schedules(), "delayq:schedules");
    }

    #[test]
    fn wake_key_round_trip() {
        let ks = KeySpace::new("app:q").unwrap_or_else(|e| panic!("{e}"));
        let t = topic("a:b-c");
        assert_eq!(ks.topic_of_wake_key(ks.wake(&t).as_bytes()), Some(t));
        assert_eq!(ks.topic_of_wake_key(b"other:{a}:wake"), None);
        assert_eq!(ks.topic_of_wake_key(b"app:q:{a}:jobs"), None);
    }

    #[test]
    fn prefix_cannot_break_the_tag() {
        assert!(KeySpace::new("a{b").is_err());
        assert!(KeySpace::new("").is_err());
    }
}
