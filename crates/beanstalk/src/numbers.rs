//! beanstalkd names a job by a number. A job put here gets one from the engine's shared
//! sequence ([`delayq_core::Numbers::claim_numbers`]), claimed in blocks per tube, and keeps its decimal
//! form as its delayq id; a command that names a number finds the job's topic with
//! [`delayq_core::Numbers::number_topic`] (the blocks this process claimed are known locally). A job that
//! was pushed some other way (an HTTP push with an id of its own) is given an alias the first
//! time this server hands it out: a number from `ALIAS_BASE` up, valid in this server
//! process only.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use delayq_core::{JobId, Result, Store, Topic};

/// The first block a tube claims; each refill claims twice the last, up to [`MAX_BLOCK`].
const FIRST_BLOCK: u64 = 16;
/// The largest block claimed at once (a process that stops leaves the rest unused: the
/// sequence has 2^53 of them).
const MAX_BLOCK: u64 = 65_536;
/// The claimed ranges this process remembers (the oldest are forgotten first; a number in a
/// forgotten range is looked up in the engine).
const KEPT_RANGES: usize = 4096;
/// Aliases start here, far above any claimed number.
pub(crate) const ALIAS_BASE: u64 = 1 << 62;
/// The most aliases kept; the oldest are forgotten first.
const KEPT_ALIASES: usize = 100_000;

/// A tube's current block: the next number to give and the end of the block.
#[derive(Default)]
struct Block {
    next: u64,
    end: u64,
    size: u64,
}

/// Numbers for new jobs and the topics of numbers.
pub(crate) struct Numbers {
    engine: Arc<dyn Store>,
    blocks: Mutex<HashMap<Topic, Arc<tokio::sync::Mutex<Block>>>>,
    /// Ranges claimed here: first -> (last, topic).
    ranges: Mutex<BTreeMap<u64, (u64, Topic)>>,
    aliases: Mutex<Aliases>,
}

#[derive(Default)]
struct Aliases {
    next: u64,
    by_alias: HashMap<u64, (Topic, JobId)>,
    by_job: HashMap<(Topic, JobId), u64>,
    order: VecDeque<u64>,
}

/// Where a number points: a job of a topic.
pub(crate) struct Found {
    /// The job's topic.
    pub(crate) topic: Topic,
    /// The job's delayq id.
    pub(crate) id: JobId,
}

impl Numbers {
    pub(crate) fn new(engine: Arc<dyn Store>) -> Self {
        Numbers {
            engine,
            blocks: Mutex::default(),
            ranges: Mutex::default(),
            aliases: Mutex::default(),
        }
    }

    /// A fresh number for a job of `topic`.
    pub(crate) async fn next(&self, topic: &Topic) -> Result<u64> {
        let block = {
            let mut blocks = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
            blocks.entry(topic.clone()).or_default().clone()
        };
        let mut b = block.lock().await;
        if b.next == b.end {
            let size = (b.size * 2).clamp(FIRST_BLOCK, MAX_BLOCK);
            let first = self.engine.claim_numbers(topic, size).await?;
            *b = Block {
                next: first,
                end: first + size,
                size,
            };
            let mut ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
            ranges.insert(first, (first + size - 1, topic.clone()));
            while ranges.len() > KEPT_RANGES {
                ranges.pop_first();
            }
        }
        let n = b.next;
        b.next += 1;
        Ok(n)
    }

    /// The job a number names, when it names one that may exist.
    pub(crate) async fn find(&self, n: u64) -> Result<Option<Found>> {
        if n >= ALIAS_BASE {
            let aliases = self.aliases.lock().unwrap_or_else(|p| p.into_inner());
            return Ok(aliases.by_alias.get(&n).map(|(topic, id)| Found {
                topic: topic.clone(),
                id: id.clone(),
            }));
        }
        let Ok(id) = JobId::new(n.to_string()) else {
            return Ok(None);
        };
        let local = {
            let ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
            ranges
                .range(..=n)
                .next_back()
                .filter(|(_, (last, _))| n <= *last)
                .map(|(_, (_, topic))| topic.clone())
        };
        let topic = match local {
            Some(t) => Some(t),
            None if n == 0 => None,
            None => self.engine.number_topic(n).await?,
        };
        Ok(topic.map(|topic| Found { topic, id }))
    }

    /// The number a delivered or listed job goes by: its id when the id is a number from
    /// the sequence, else an alias.
    pub(crate) fn number_of(&self, topic: &Topic, id: &JobId) -> u64 {
        if let Some(n) = canonical_number(id.as_str()) {
            return n;
        }
        let mut a = self.aliases.lock().unwrap_or_else(|p| p.into_inner());
        let key = (topic.clone(), id.clone());
        if let Some(&n) = a.by_job.get(&key) {
            return n;
        }
        let n = ALIAS_BASE + a.next;
        a.next += 1;
        a.by_alias.insert(n, key.clone());
        a.by_job.insert(key, n);
        a.order.push_back(n);
        while a.order.len() > KEPT_ALIASES {
            if let Some(old) = a.order.pop_front()
                && let Some(k) = a.by_alias.remove(&old)
            {
                a.by_job.remove(&k);
            }
        }
        n
    }
}

/// The number an id spells, when it is one in canonical decimal form below [`ALIAS_BASE`]
/// (no sign, no leading zero).
fn canonical_number(id: &str) -> Option<u64> {
    if id.starts_with('0') || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse::<u64>().ok().filter(|&n| n < ALIAS_BASE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_numbers_are_numbers() {
        assert_eq!(canonical_number("42"), Some(42));
        for id in ["042", "0", "-1", "+1", "4a", "", "18446744073709551616"] {
            assert_eq!(canonical_number(id), None, "{id}");
        }
        assert_eq!(canonical_number(&ALIAS_BASE.to_string()), None);
    }
}
