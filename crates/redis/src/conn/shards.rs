//! Which hash slots of a Redis Cluster share a fate: its shards (a primary, its replicas,
//! and the slot ranges they serve), read with `CLUSTER SHARDS`, so that a slot found
//! unreachable makes every slot of its shard unreachable (`per_slot`, issue 37).
//!
//! Why: a reserve over topics of several slots asks the later partitions one after
//! another, each waited for at most the slot timeout. A primary that is dead or hung does
//! not answer for any of its slots, and a failover hands its slot ranges, all of them and
//! only them, to one of its replicas; so once one of its slots has cost a slot timeout,
//! waiting on its others only repeats the wait, once per slot of it among the request's
//! topics.
//!
//! The map is read at connect, and again, in a task of its own, when a slot is marked
//! unreachable and the last read is older than [`REFRESH_AFTER`]: never on the path of a
//! healthy cluster's calls, and never waited for by a caller (the slot is marked at once,
//! and the mark covers its shard as soon as a map is known). A map gone stale (slots that
//! migrated since it was read) only makes a mark too wide (a migrated slot skipped with its
//! old shard) or too narrow (left out of its new shard's), for at most the skip period.
//! Without a map (the Redis user may not run `CLUSTER SHARDS`, the call failed, the reply
//! could not be read) a mark covers its one slot, as before; the log says so once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};

use super::{Conn, Inner};

/// How old the shard map may be when a slot is marked unreachable before it is read again
/// (and how long after a failed read it is tried again): slot migrations move ranges
/// between shards, rarely, and a stale map errs for at most the skip period.
pub(super) const REFRESH_AFTER: Duration = Duration::from_secs(10);

/// The hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// The shards of a cluster: which slot ranges are served by the same primary and replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ShardMap {
    /// Each served range: its first and last slot and the index of its shard; sorted by
    /// first slot, no two overlapping.
    ranges: Vec<(u16, u16, usize)>,
}

impl ShardMap {
    /// The shards of a `CLUSTER SHARDS` reply (RESP2 or RESP3): a list of shards, each a map
    /// whose `"slots"` are pairs of first and last slot. Shards that serve no slot (a
    /// primary without slots) are left out. `None` when the reply cannot be read (not that
    /// shape, a slot out of range, ranges that overlap, no slot at all): the caller falls
    /// back to marking one slot.
    pub(super) fn parse(reply: Value) -> Option<ShardMap> {
        let shards: Vec<HashMap<String, Value>> = redis::from_redis_value(reply).ok()?;
        let mut ranges = Vec::new();
        for (shard, mut fields) in shards.into_iter().enumerate() {
            let bounds: Vec<u16> = redis::from_redis_value(fields.remove("slots")?).ok()?;
            if !bounds.len().is_multiple_of(2) {
                return None;
            }
            for pair in bounds.chunks_exact(2) {
                let (first, last) = (pair[0], pair[1]);
                if first > last || last >= SLOTS {
                    return None;
                }
                ranges.push((first, last, shard));
            }
        }
        ranges.sort_unstable();
        if ranges.is_empty() || ranges.windows(2).any(|w| w[0].1 >= w[1].0) {
            return None;
        }
        Some(ShardMap { ranges })
    }

    /// The shard that serves `slot` (an index valid within this map only); `None` for a
    /// slot no shard served when the map was read.
    pub(super) fn shard_of(&self, slot: u16) -> Option<usize> {
        let after = self.ranges.partition_point(|&(first, _, _)| first <= slot);
        let (_, last, shard) = *self.ranges.get(after.checked_sub(1)?)?;
        (slot <= last).then_some(shard)
    }
}

/// What a read of `CLUSTER SHARDS` gave.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Learnt {
    /// The cluster's shards.
    Map(ShardMap),
    /// The Redis user may not run it: it is not asked again.
    Refused,
    /// No answer in time, an error, or a reply that could not be read: marks keep to their
    /// slot until a later read succeeds.
    Failed,
}

/// Set once the log has said that the Redis user may not run `CLUSTER SHARDS`.
static WARNED_NO_PERM: AtomicBool = AtomicBool::new(false);

/// Set once the log has said that a `CLUSTER SHARDS` reply could not be read.
static WARNED_UNREADABLE: AtomicBool = AtomicBool::new(false);

/// What `read` (a `CLUSTER SHARDS` reply; `None`: no answer in time) gives, logged: a
/// refused permission and an unreadable reply once per process, at warning level; an error
/// or a timeout (a node down: the read went to any node) at debug level each time.
pub(super) fn learn(read: Option<RedisResult<Value>>) -> Learnt {
    match read {
        Some(Ok(reply)) => match ShardMap::parse(reply) {
            Some(map) => Learnt::Map(map),
            None => {
                if !WARNED_UNREADABLE.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "cannot read the Redis Cluster's CLUSTER SHARDS reply, so a primary that does not answer is found out slot by slot, one slot timeout for each of its slots a call needs"
                    );
                }
                Learnt::Failed
            }
        },
        Some(Err(e)) if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) => {
            if !WARNED_NO_PERM.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    error = %e,
                    "the Redis user may not run CLUSTER SHARDS, so a primary that does not answer is found out slot by slot, one slot timeout for each of its slots a call needs; allow +cluster|shards"
                );
            }
            Learnt::Refused
        }
        Some(Err(e)) => {
            tracing::debug!(error = %e, "cannot read the Redis Cluster's shards; trying again later");
            Learnt::Failed
        }
        None => {
            tracing::debug!("reading the Redis Cluster's shards timed out; trying again later");
            Learnt::Failed
        }
    }
}

impl Conn {
    /// Reads the cluster's shards (`CLUSTER SHARDS`, from any node, waited for at most the
    /// slot timeout) into the record of unreachable slots; nothing on one node.
    pub(super) async fn read_shards(&self) {
        let Inner::Cluster(c) = &self.inner else {
            return;
        };
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SHARDS");
        let read = tokio::time::timeout(
            self.health.timeout(),
            cmd.query_async::<Value>(&mut c.clone()),
        )
        .await
        .ok();
        self.health.learn(learn(read));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// One node of a `CLUSTER SHARDS` reply, as Redis 7.0 sends it over RESP2.
    fn node(id: &str, port: i64, role: &str) -> Value {
        Value::Array(vec![
            bulk("id"),
            bulk(id),
            bulk("port"),
            Value::Int(port),
            bulk("ip"),
            bulk("127.0.0.1"),
            bulk("endpoint"),
            bulk("127.0.0.1"),
            bulk("role"),
            bulk(role),
            bulk("replication-offset"),
            Value::Int(14),
            bulk("health"),
            bulk("online"),
        ])
    }

    fn shard(slots: &[i64], nodes: Vec<Value>) -> Value {
        Value::Array(vec![
            bulk("slots"),
            Value::Array(slots.iter().map(|&s| Value::Int(s)).collect()),
            bulk("nodes"),
            Value::Array(nodes),
        ])
    }

    /// The reply of a Redis 7.0.15 cluster of 3 primaries with a replica each, after 3 slots
    /// moved from the first primary to the third (which then serves two ranges), in the
    /// order and shape it came (RESP2), plus a primary that serves no slot, as a node just
    /// added (or a replica not yet attached) shows.
    pub(in crate::conn) fn real_reply() -> Value {
        Value::Array(vec![
            shard(
                &[5461, 10922],
                vec![
                    node("e6c86dc6a318b5dd468ce675d9e46d49284cb572", 31002, "master"),
                    node("e42ae774d1105a59dea1afbaa377e8faf0b511ed", 31004, "replica"),
                ],
            ),
            shard(
                &[0, 2, 10923, 16383],
                vec![
                    node("2abb634dfd82915718192fa3db37d0e795cb55d5", 31003, "master"),
                    node("f0e164f10cf5699e3417a8d76225f1ff6128cfff", 31005, "replica"),
                ],
            ),
            shard(
                &[3, 5460],
                vec![
                    node("3c263d3019498cdf6b641a7b0002209f3b3b3c78", 31001, "master"),
                    node("918baca470c6e92f1eaa469d465f813520c8c311", 31006, "replica"),
                ],
            ),
            shard(
                &[],
                vec![node(
                    "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567",
                    31007,
                    "master",
                )],
            ),
        ])
    }

    #[test]
    fn a_real_reply_groups_the_slot_ranges_by_shard() {
        let map = ShardMap::parse(real_reply()).unwrap_or_else(|| panic!("unreadable"));
        let of = |slot| map.shard_of(slot);
        // The first primary kept 3..=5460, the third serves 0..=2 and 10923..=16383.
        assert_eq!(of(3), of(5460));
        assert_eq!(of(0), of(2));
        assert_eq!(of(0), of(16383));
        assert_eq!(of(10923), of(16383));
        assert_eq!(of(5461), of(10922));
        assert_ne!(of(2), of(3));
        assert_ne!(of(5460), of(5461));
        assert_ne!(of(10922), of(10923));
        assert!([0, 3, 5461].iter().all(|&s| of(s).is_some()));
    }

    #[test]
    fn a_resp3_reply_reads_the_same() {
        let Value::Array(shards) = real_reply() else {
            panic!("not an array");
        };
        let as_map = |v: Value| match v {
            Value::Array(flat) => Value::Map(
                flat.chunks_exact(2)
                    .map(|kv| (kv[0].clone(), kv[1].clone()))
                    .collect(),
            ),
            other => other,
        };
        let resp3 = Value::Array(shards.into_iter().map(as_map).collect());
        assert_eq!(ShardMap::parse(resp3), ShardMap::parse(real_reply()));
    }

    #[test]
    fn a_slot_no_shard_serves_has_none() {
        let map = ShardMap::parse(Value::Array(vec![shard(&[100, 200], Vec::new())]))
            .unwrap_or_else(|| panic!("unreadable"));
        assert_eq!(map.shard_of(99), None);
        assert_eq!(map.shard_of(201), None);
        assert_eq!(map.shard_of(150), Some(0));
    }

    #[test]
    fn a_reply_that_cannot_be_read_gives_no_map() {
        let unreadable = [
            Value::Nil,
            Value::Int(3),
            bulk("ERR"),
            Value::Array(Vec::new()),
            // No slot anywhere.
            Value::Array(vec![shard(&[], Vec::new())]),
            // A shard without "slots".
            Value::Array(vec![Value::Array(vec![
                bulk("nodes"),
                Value::Array(Vec::new()),
            ])]),
            // An odd number of bounds, a range backwards, a slot out of range.
            Value::Array(vec![shard(&[0, 10, 20], Vec::new())]),
            Value::Array(vec![shard(&[10, 0], Vec::new())]),
            Value::Array(vec![shard(&[0, 16384], Vec::new())]),
            Value::Array(vec![shard(&[-1, 5], Vec::new())]),
            // Two shards serving the same slot.
            Value::Array(vec![
                shard(&[0, 100], Vec::new()),
                shard(&[100, 200], Vec::new()),
            ]),
            // Slots that are not numbers.
            Value::Array(vec![Value::Array(vec![
                bulk("slots"),
                Value::Array(vec![bulk("a"), bulk("b")]),
            ])]),
            // An odd field list.
            Value::Array(vec![Value::Array(vec![bulk("slots")])]),
        ];
        for reply in unreadable {
            assert_eq!(ShardMap::parse(reply.clone()), None, "{reply:?}");
            assert_eq!(learn(Some(Ok(reply.clone()))), Learnt::Failed, "{reply:?}");
        }
    }

    #[test]
    fn a_refused_permission_or_a_failed_read_gives_no_map() {
        let no_perm = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::NoPerm),
            "this user has no permissions to run the 'cluster|shards' command",
        ));
        assert_eq!(learn(Some(Err(no_perm))), Learnt::Refused);
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert_eq!(learn(Some(Err(io))), Learnt::Failed);
        assert_eq!(learn(None), Learnt::Failed);
        assert!(matches!(learn(Some(Ok(real_reply()))), Learnt::Map(_)));
    }
}
