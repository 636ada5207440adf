//! The probe of a shard found unreachable (issue 37): while callers skip a shard
//! (`per_slot`), one task asks its primary, an `EXISTS` of a key in the marked slot
//! ([`probe_key`]), one at a time, and keeps the shard skipped for as long as no answer comes.
//!
//! Why: without it a skip period ran out while the primary was still dead or hung, and the
//! next call over several slots waited on it again for a slot timeout, once per skip period
//! and per process; every reserve of a topic partitioned over all primaries did. With it,
//! the first call that waited is the last, and the skipped shard's topics are served again
//! as soon as its primary (or the replica promoted in its place: redis-rs routes the call
//! by its key, and follows the cluster's new map) answers, within [`PROBE_EVERY`] of the
//! first answer, instead of at the end of a skip period.
//!
//! Only the slot's primary may answer: a keyed call, which any other node answers with a
//! redirection to the owner. A `PING` did not do: redis-rs sends a call whose node it cannot
//! connect to (a killed primary) to another node, which answered it, and the probe ended
//! the skip of a dead primary at once (the W8 failover under load caught it: a reserve
//! over all topics waited a slot timeout again and again). The key is under the engine's
//! prefix, where an ACL that allows delayq's keys allows it.
//!
//! A call that gets no answer stays on its way (on a hung primary it waits in the
//! connection until the response timeout); no second one is sent meanwhile, so a probe
//! costs at most one command in flight. An error answer (a dead primary's connection
//! refused, `CLUSTERDOWN`) is tried again after [`PROBE_EVERY`]. A probe that no caller
//! needs any more stops ([`PROBE_IDLE`]): an engine dropped while a primary is dead leaves
//! no task behind for long, and its marks run out as they would without a probe.

use std::sync::OnceLock;
use std::time::Duration;

use redis::Value;

use super::cluster::slot_of_key;
use super::per_slot::Hold;
use super::{Conn, Inner};

/// How often a probe checks for an answer and pushes the skip on, and how long it waits
/// after an error answer before it asks again: how soon after its primary answers a
/// skipped shard is served again.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(100);

/// How long a probe goes on after the last caller found its shard skipped.
pub(super) const PROBE_IDLE: Duration = Duration::from_secs(10);

/// The key a probe of `slot` reads (`EXISTS`, never written): `{prefix}:probe:{N}`, whose
/// hash tag `N` is the first number whose text hashes to `slot`. `None` for a slot no number
/// below [`TAG_SEARCH`] hashes to (none, as a test checks; the mark then runs out as without
/// a probe).
pub(super) fn probe_key(prefix: &str, slot: u16) -> Option<String> {
    let tag = *tags().get(usize::from(slot))?;
    (tag != u32::MAX).then(|| format!("{prefix}:probe:{{{tag}}}"))
}

/// How far [`tags`] looks for a number of each slot.
const TAG_SEARCH: u32 = 1 << 22;

/// For each hash slot, the first number whose decimal text hashes to it (`u32::MAX`: none
/// below [`TAG_SEARCH`]); made once, in a few milliseconds.
fn tags() -> &'static [u32] {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; 16384];
        let mut left = tags.len();
        for n in 0..TAG_SEARCH {
            let slot = usize::from(slot_of_key(n.to_string().as_bytes()));
            if let Some(t) = tags.get_mut(slot).filter(|t| **t == u32::MAX) {
                *t = n;
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
        tags
    })
}

impl Conn {
    /// Probes the primary of `slot` (marked unreachable, [`super::per_slot`]) until it
    /// answers, a call to its shard succeeds, or no caller needs it ([`SlotHealth::hold`]).
    ///
    /// [`SlotHealth::hold`]: super::per_slot::SlotHealth::hold
    pub(super) async fn probe(&self, slot: u16) {
        let (Inner::Cluster(c), Some(key)) = (&self.inner, probe_key(self.health.prefix(), slot))
        else {
            return;
        };
        let mut exists = redis::cmd("EXISTS");
        exists.arg(key);
        loop {
            let mut c = c.clone();
            let ask = exists.query_async::<Value>(&mut c);
            tokio::pin!(ask);
            let answered = loop {
                tokio::select! {
                    r = &mut ask => break r.is_ok(),
                    () = tokio::time::sleep(PROBE_EVERY) => {
                        if self.health.hold(slot, PROBE_IDLE) == Hold::Stop {
                            return;
                        }
                    }
                }
            };
            if answered {
                tracing::debug!(slot, "the primary of a skipped slot answers again");
                self.health.probed(slot);
                return;
            }
            tokio::time::sleep(PROBE_EVERY).await;
            if self.health.hold(slot, PROBE_IDLE) == Hold::Stop {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_has_a_probe_key_that_hashes_to_it() {
        for slot in 0..16384u16 {
            let key = probe_key("delayq", slot).unwrap_or_else(|| panic!("no key for {slot}"));
            assert_eq!(slot_of_key(key.as_bytes()), slot, "{key}");
        }
        assert_eq!(
            probe_key("app", 0)
                .as_deref()
                .map(|k| k.starts_with("app:probe:{")),
            Some(true)
        );
    }
}
