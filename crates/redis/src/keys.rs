//! Every Redis key delayq uses, built in one place from one prefix.
//!
//! A topic's jobs live in one or more partitions ([`Part`]); each partition's keys all carry
//! the partition's hash tag (`<prefix>:{<tag>}:<name>`), so each function call touches
//! exactly one cluster slot. A topic's *home* has the topic itself as tag: it is the only
//! partition of a topic of one partition (so such a topic keeps the key names it always
//! had), and it holds the topic's settings, whose partition count says where the jobs are.
//! A topic of `n` > 1 partitions keeps its jobs in `n` partitions tagged `<topic>~<p>~<s>`.
//! Neither the topic alphabet nor the prefix's has a brace or a `~`, so the tag is always
//! the whole of it and no topic's tag is ever a partition's.

use std::sync::Arc;

use delayq_core::{Error, Topic};

/// The number of Redis Cluster hash slots.
const SLOTS: u16 = 16384;

/// The cluster hash slot of a hash tag (CRC16/XMODEM modulo 16384, as Redis computes it).
fn slot_of_tag(tag: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % SLOTS
}

/// One partition of a topic: the topic, the partition's index and the hash tag its keys
/// carry. What the engine addresses (function calls, wake keys, waiters) is a partition; what
/// the user sees (jobs, leases, errors) is its topic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Part {
    tag: String,
    topic: Topic,
    index: u16,
}

impl Part {
    /// A topic's home: the only partition of a topic of one partition, and where every
    /// topic's settings are read.
    pub(crate) fn whole(topic: &Topic) -> Self {
        Part {
            tag: topic.as_str().to_string(),
            topic: topic.clone(),
            index: 0,
        }
    }

    /// The `n` partitions of `topic`, in index order: its home when `n` is 1; else
    /// `<topic>~<p>~<s>` for `p` in `0..n`, with `s` the smallest number that puts the tag's
    /// cluster slot near the middle of the `p`-th of `n` equal slices of the slot range (at
    /// most a sixteenth of a slice away, or 8 slots). So the partitions spread evenly over
    /// the slots, and a cluster whose primaries own equal ranges of slots (as `redis-cli
    /// --cluster create` makes them) holds an equal share of them on each primary when `n`
    /// is a multiple of the number of primaries. About 16384 / (2 × that distance) tries per
    /// partition; the caller keeps the answer.
    pub(crate) fn all(topic: &Topic, n: u16) -> Arc<[Part]> {
        if n <= 1 {
            return Arc::from([Part::whole(topic)]);
        }
        let slots = f64::from(SLOTS);
        let width = slots / f64::from(n);
        let reach = (width / 16.0).max(8.0).min(width / 2.0);
        (0..n)
            .map(|index| {
                let centre = (f64::from(index) + 0.5) * width;
                let tag = (0u32..)
                    .map(|s| format!("{}~{index}~{s}", topic.as_str()))
                    .find(|tag| (f64::from(slot_of_tag(tag)) + 0.5 - centre).abs() <= reach)
                    .unwrap_or_default();
                Part {
                    tag,
                    topic: topic.clone(),
                    index,
                }
            })
            .collect()
    }

    /// The topic this partition belongs to.
    pub(crate) fn topic(&self) -> &Topic {
        &self.topic
    }

    /// The cluster hash slot of the partition's keys (they share its hash tag).
    pub(crate) fn slot(&self) -> u16 {
        slot_of_tag(&self.tag)
    }

    /// The partition's index (0 to the topic's count − 1).
    pub(crate) fn index(&self) -> u16 {
        self.index
    }

    /// The partition from a hash tag (`<topic>` or `<topic>~<p>~<s>`), or `None` when it is
    /// neither.
    fn from_tag(tag: &str) -> Option<Self> {
        let mut it = tag.split('~');
        let topic = Topic::new(it.next()?).ok()?;
        let index = match (it.next(), it.next(), it.next()) {
            (None, _, _) => 0,
            (Some(p), Some(s), None) if s.parse::<u32>().is_ok() => p.parse::<u16>().ok()?,
            _ => return None,
        };
        Some(Part {
            tag: tag.to_string(),
            topic,
            index,
        })
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tag == self.topic.as_str() {
            write!(f, "{}", self.topic)
        } else {
            write!(f, "{} (partition {})", self.topic, self.index())
        }
    }
}

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

    /// The keys of a partition, in function KEYS order.
    pub(crate) fn topic(&self, part: &Part) -> [String; TOPIC_KEY_NAMES.len()] {
        TOPIC_KEY_NAMES.map(|name| format!("{}:{{{}}}:{name}", self.prefix, part.tag))
    }

    /// Calls `each` with the keys of a partition, in function KEYS order, built one after
    /// another in one buffer: what an `FCALL` copies into its arguments, without a `String`
    /// per key (the hot path builds them at every call).
    pub(crate) fn each_topic_key(&self, part: &Part, mut each: impl FnMut(&str)) {
        let mut key = String::with_capacity(self.prefix.len() + part.tag.len() + 16);
        key.push_str(&self.prefix);
        key.push_str(":{");
        key.push_str(&part.tag);
        key.push_str("}:");
        let stem = key.len();
        for name in TOPIC_KEY_NAMES {
            key.truncate(stem);
            key.push_str(name);
            each(&key);
        }
    }

    /// The wake key of a partition (a blocked waiter's BZPOPMIN target).
    pub(crate) fn wake(&self, part: &Part) -> String {
        format!("{}:{{{}}}:wake", self.prefix, part.tag)
    }

    /// The `jobs` hash of a partition (a partition holds jobs iff it exists).
    pub(crate) fn jobs(&self, part: &Part) -> String {
        format!("{}:{{{}}}:jobs", self.prefix, part.tag)
    }

    /// The `config` hash of a partition (the home's says the topic's partition count).
    pub(crate) fn config(&self, part: &Part) -> String {
        format!("{}:{{{}}}:config", self.prefix, part.tag)
    }

    /// The topic registry: a SET of topic names, not tied to any topic's slot.
    pub(crate) fn registry(&self) -> String {
        format!("{}:topics", self.prefix)
    }

    /// The topics ever paused: a SET of topic names, not tied to any topic's slot. A name
    /// stays after its pause ends; `Engine::topics` lists those whose pause is in force.
    pub(crate) fn paused(&self) -> String {
        format!("{}:paused", self.prefix)
    }

    /// The hash of every schedule (issue 14): fields `d:<name>`, `r:<name>`, `t:<name>`
    /// (`lua/schedule_put.lua`). One key, in no topic's slot.
    pub(crate) fn schedules(&self) -> String {
        format!("{}:schedules", self.prefix)
    }

    /// The push destinations (issue 20, `ops::destinations`): a HASH of topic name to the
    /// destination's document. One key, in no topic's slot.
    pub(crate) fn destinations(&self) -> String {
        format!("{}:destinations", self.prefix)
    }

    /// The sequence of claimed numbers (`ops::numbers`): a STRING, the last number
    /// claimed. In no topic's slot (a topic key always has a `{tag}`).
    pub(crate) fn number_seq(&self) -> String {
        format!("{}:numbers:next", self.prefix)
    }

    /// The claimed ranges (`ops::numbers`): a ZSET of `<last>:<topic>` scored by each
    /// range's first number. In no topic's slot.
    pub(crate) fn number_ranges(&self) -> String {
        format!("{}:numbers:ranges", self.prefix)
    }

    /// The partition of a wake key returned by BZPOPMIN.
    pub(crate) fn part_of_wake_key(&self, key: &[u8]) -> Option<Part> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix(":{")?;
        Part::from_tag(rest.strip_suffix("}:wake")?)
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
        let whole = Part::whole(&topic("orders.cancel"));
        let keys = ks.topic(&whole);
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
        let mut built = Vec::new();
        ks.each_topic_key(&whole, |k| built.push(k.to_string()));
        assert_eq!(built, keys);
        for part in Part::all(&whole.topic, 3).iter() {
            let mut built = Vec::new();
            ks.each_topic_key(part, |k| built.push(k.to_string()));
            assert_eq!(built, ks.topic(part));
        }
        assert_eq!(ks.wake(&whole), keys[6]);
        assert_eq!(ks.jobs(&whole), keys[0]);
        assert_eq!(ks.config(&whole), keys[8]);
        // A topic of one partition keeps the key names it always had.
        assert_eq!(ks.topic(&Part::all(&whole.topic, 1)[0]), keys);
        assert_eq!(ks.registry(), "delayq:topics");
        assert_eq!(ks.paused(), "delayq:paused");
        assert_eq!(ks.number_seq(), "delayq:numbers:next");
        assert_eq!(ks.number_ranges(), "delayq:numbers:ranges");
        assert_eq!(ks.schedules(), "delayq:schedules");
        assert_eq!(ks.destinations(), "delayq:destinations");
    }

    #[test]
    fn wake_key_round_trip() {
        let ks = KeySpace::new("app:q").unwrap_or_else(|e| panic!("{e}"));
        for part in Part::all(&topic("a:b-c"), 5).iter() {
            assert_eq!(
                ks.part_of_wake_key(ks.wake(part).as_bytes()).as_ref(),
                Some(part)
            );
        }
        assert_eq!(ks.part_of_wake_key(b"other:{a}:wake"), None);
        assert_eq!(ks.part_of_wake_key(b"app:q:{a}:jobs"), None);
        assert_eq!(ks.part_of_wake_key(b"app:q:{a~x~1}:wake"), None);
        assert_eq!(ks.part_of_wake_key(b"app:q:{a~-1~1}:wake"), None);
        assert_eq!(ks.part_of_wake_key(b"app:q:{a~1~1~1}:wake"), None);
    }

    #[test]
    fn partitions_sit_near_the_middle_of_equal_slices_of_the_slots() {
        let t = topic("orders.cancel");
        assert_eq!(
            Part::all(&t, 3)[1].tag,
            Part::all(&t, 3)[1].tag,
            "the tags are deterministic: every process finds the same keys"
        );
        for n in [2u16, 3, 6, 16, 1024] {
            let parts = Part::all(&t, n);
            assert_eq!(parts.len(), usize::from(n));
            let width = 16384.0 / f64::from(n);
            for (p, part) in parts.iter().enumerate() {
                assert_eq!(usize::from(part.index()), p);
                assert_eq!(part.topic(), &t);
                assert_ne!(part.tag, t.as_str());
                let slot = f64::from(slot_of_tag(&part.tag));
                assert_eq!(
                    (slot / width) as usize,
                    p,
                    "partition {p} of {n}: {}",
                    part.tag
                );
            }
        }
        // On 3 primaries that own equal ranges (0-5460, 5461-10922, 10923-16383), 6
        // partitions of any topic are 2 per primary.
        for name in ["a", "orders.cancel", "hot", "x:y-z", "w9"] {
            let mut per_primary = [0; 3];
            for part in Part::all(&topic(name), 6).iter() {
                per_primary[match slot_of_tag(&part.tag) {
                    0..=5460 => 0,
                    5461..=10922 => 1,
                    _ => 2,
                }] += 1;
            }
            assert_eq!(per_primary, [2, 2, 2], "{name}");
        }
        // The slot function is Redis's: CLUSTER KEYSLOT foo answers 12182.
        assert_eq!(slot_of_tag("foo"), 12182);
    }

    #[test]
    fn prefix_cannot_break_the_tag() {
        assert!(KeySpace::new("a{b").is_err());
        assert!(KeySpace::new("").is_err());
    }
}
