//! Per-slot independence on a Redis Cluster (issue 37): the calls of one operation that go
//! to several hash slots are answered slot by slot, so that a primary that is down or hung
//! holds up only its own topics.
//!
//! A call to a slot whose caller also waits on other slots ([`Conn::bounded`]) runs in a
//! task of its own and is waited for at most the slot timeout
//! ([`crate::RedisConfig::slot_timeout`], plus the wait-replicas timeout when that option is
//! on), through the connection that gives up after few retries ([`Conn::pipeline_quick`]):
//! a killed primary fails its call within milliseconds, a hung one is cut by the slot
//! timeout. A slot that did not answer in time (or answered "unavailable") is *unreachable*,
//! and so is every slot of its shard (its primary's, `shards`: a primary that does not
//! answer for one of its slots answers for none), for the skip period (twice the slot
//! timeout, at least [`UNREACHABLE_AT_LEAST`]), or until a call to one of them succeeds:
//! callers skip them meanwhile ([`Conn::unreachable`]) unless every slot they need is
//! unreachable. So a dead or hung primary costs a pass over many partitions one slot
//! timeout, however many of its slots the pass needs. While a shard is skipped, a probe
//! (`probe`) asks its primary, one keyed call at a time: the skip lasts as long as the probe
//! gets no answer, and ends as soon as it gets one. So a primary that stays dead costs the
//! process's callers one slot timeout in all, not one each time a skip period runs out, and
//! one that comes back (or whose replica took over) is asked again within
//! [`super::probe::PROBE_EVERY`]. The call that timed out is not
//! cancelled (its command was sent and may still run): its late reply is handed to the
//! caller ([`SlotAnswer::Late`]), which gives back the jobs it leased.
//!
//! On one node nothing here applies: every call goes in one pipeline, as before.
//!
//! The file is long (about 490 lines of code, 215 of tests): the skip rules are tested next
//! to them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_core::{Error, Result};
use futures_util::future::join_all;
use redis::{Cmd, Value};
use tokio::sync::oneshot;

use super::shards::{Learnt, REFRESH_AFTER, ShardMap};
use super::{Conn, Inner, cluster};
use crate::RedisConfig;

/// The shortest time a slot found unreachable is skipped by callers that have other slots
/// to ask; the skip period is twice the slot timeout when that is longer. Long enough that
/// a pass over many partitions, or a busy worker's next calls, do not each wait on it again
/// (at twice the slot timeout, a mark outlives the wait of the pass that made it, and that
/// of one more slot timeout on another primary); short enough that its topics are served
/// soon after it is back.
const UNREACHABLE_AT_LEAST: Duration = Duration::from_secs(1);

/// The slots found unreachable lately, the cluster's shards, and how long a call to one
/// slot may take while others wait. Shared by every clone of a [`Conn`].
#[derive(Clone)]
pub(crate) struct SlotHealth {
    /// The slot timeout, with the wait-replicas timeout added when that option is on.
    timeout: Duration,
    /// How long a slot found unreachable is skipped: twice the slot timeout, at least
    /// [`UNREACHABLE_AT_LEAST`].
    skip_for: Duration,
    /// The key prefix, under which a probe reads its key (`probe::probe_key`).
    prefix: Arc<str>,
    marks: Arc<Mutex<Marks>>,
}

/// What [`SlotHealth`] keeps under its lock.
#[derive(Default)]
struct Marks {
    /// The slots whose calls did not answer in time or answered "unavailable", each
    /// skipped with the other slots of its shard.
    down: HashMap<u16, Mark>,
    /// The slots whose probe runs (`probe`), one per shard (per slot while the shards are
    /// not known).
    probing: HashSet<u16>,
    /// When a caller last found a slot skipped: a probe that nobody needs stops.
    consulted: Option<Instant>,
    /// The cluster's shards, once read.
    shards: Option<ShardMap>,
    /// When the shards were last asked for (at connect, then at a mark when older than
    /// [`REFRESH_AFTER`]).
    asked: Option<Instant>,
    /// The Redis user may not run `CLUSTER SHARDS`: not asked again.
    refused: bool,
}

/// One slot found unreachable.
#[derive(Clone, Copy, Debug)]
struct Mark {
    /// When it was found so (what `since` compares with).
    at: Instant,
    /// Until when it is skipped: the skip period after `at`, pushed on by its shard's probe
    /// while the probe gets no answer.
    until: Instant,
}

impl Marks {
    /// The shard of `slot` in the map known now; `None` without a map or for a slot no
    /// shard served.
    fn shard_of(&self, slot: u16) -> Option<usize> {
        self.shards.as_ref().and_then(|m| m.shard_of(slot))
    }

    /// True when `a` and `b` are the same slot or, by the map known now, of one shard.
    fn together(&self, a: u16, b: u16) -> bool {
        a == b
            || self
                .shard_of(a)
                .is_some_and(|s| self.shard_of(b) == Some(s))
    }
}

/// What a shard's probe is to do after a tick with no answer ([`SlotHealth::hold`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// Go on asking: the shard stays skipped for another skip period.
    Probe,
    /// Stop: a call to the shard succeeded, or no caller has found it skipped for
    /// [`super::probe::PROBE_IDLE`] (its mark then runs out as it would without a probe).
    Stop,
}

impl SlotHealth {
    /// The health record of a new connection, with `config`'s slot timeout.
    pub(crate) fn new(config: &RedisConfig) -> Result<SlotHealth> {
        if config.slot_timeout < Duration::from_millis(1) {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "slot timeout {:?}: it must be at least 1 ms; the default is 500 ms",
                    config.slot_timeout
                ),
            });
        }
        let wait = if config.wait_replicas > 0 {
            config.wait_timeout
        } else {
            Duration::ZERO
        };
        let timeout = config.slot_timeout + wait;
        Ok(SlotHealth {
            timeout,
            skip_for: UNREACHABLE_AT_LEAST.max(timeout * 2),
            prefix: Arc::from(config.prefix.as_str()),
            marks: Arc::new(Mutex::new(Marks::default())),
        })
    }

    /// The slot timeout, with the wait-replicas timeout added when that option is on.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The key prefix.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True while `slot` is skipped: it, or a slot of its shard, was marked (with `since`:
    /// at or after `since`), the mark has not run out (a skip period, pushed on by the
    /// shard's probe while it gets no answer), and no call to one of them succeeded since.
    /// Counts as a caller needing the probe when true.
    fn is_down(&self, slot: u16, since: Option<Instant>) -> bool {
        let mut marks = self.lock();
        // A healthy cluster: nothing marked, nothing to look up.
        if marks.down.is_empty() {
            return false;
        }
        let now = Instant::now();
        marks.down.retain(|_, m| m.until > now);
        let counts = |m: &Mark| since.is_none_or(|s| m.at >= s);
        let down = marks
            .down
            .iter()
            .any(|(s, m)| counts(m) && marks.together(*s, slot));
        if down {
            marks.consulted = Some(now);
        }
        down
    }

    /// True when no slot is marked (expired marks count until a call looks them up): a
    /// healthy cluster's answer, with one lock and no lookup.
    fn none_down(&self) -> bool {
        self.lock().down.is_empty()
    }

    /// Marks `slot` (and so its shard) unreachable for the skip period. Answers whether
    /// the caller should read the shards again ([`SlotHealth::ask_shards`]) and whether it
    /// should start the shard's probe (none runs for it yet; counted as running).
    fn mark_down(&self, slot: u16) -> (bool, bool) {
        let probe = {
            let mut marks = self.lock();
            let now = Instant::now();
            marks.down.insert(
                slot,
                Mark {
                    at: now,
                    until: now + self.skip_for,
                },
            );
            marks.consulted = Some(now);
            let probed = marks.probing.iter().any(|p| marks.together(*p, slot));
            if !probed {
                marks.probing.insert(slot);
            }
            !probed
        };
        (self.ask_shards(), probe)
    }

    /// A call to `slot` succeeded: it and the other slots of its shard are reachable.
    fn mark_up(&self, slot: u16) {
        let mut marks = self.lock();
        if marks.down.is_empty() {
            return;
        }
        let up: Vec<u16> = marks
            .down
            .keys()
            .copied()
            .filter(|s| marks.together(*s, slot))
            .collect();
        for s in up {
            marks.down.remove(&s);
        }
    }

    /// After a tick of `slot`'s probe with no answer: stop (and no longer count the probe
    /// as running) when no mark of its shard is left (a call to it succeeded, or the marks
    /// ran out) or no caller found it skipped for `idle`; else push its marks' end on to a
    /// skip period from now.
    pub(super) fn hold(&self, slot: u16, idle: Duration) -> Hold {
        let mut marks = self.lock();
        let now = Instant::now();
        let needed = marks
            .consulted
            .is_some_and(|at| now.duration_since(at) < idle);
        let shard: Vec<u16> = marks
            .down
            .iter()
            .filter(|(s, m)| m.until > now && marks.together(**s, slot))
            .map(|(s, _)| *s)
            .collect();
        if shard.is_empty() || !needed {
            marks.probing.remove(&slot);
            return Hold::Stop;
        }
        for s in shard {
            if let Some(m) = marks.down.get_mut(&s) {
                m.until = m.until.max(now + self.skip_for);
            }
        }
        Hold::Probe
    }

    /// `slot`'s probe got an answer: its shard is reachable, and the probe ends.
    pub(super) fn probed(&self, slot: u16) {
        self.mark_up(slot);
        self.lock().probing.remove(&slot);
    }

    /// True when the shards are to be read now: never asked, or last asked more than
    /// [`REFRESH_AFTER`] ago, and not refused. Counts as asking.
    pub(super) fn ask_shards(&self) -> bool {
        let mut marks = self.lock();
        let due = !marks.refused && marks.asked.is_none_or(|at| at.elapsed() >= REFRESH_AFTER);
        if due {
            marks.asked = Some(Instant::now());
        }
        due
    }

    /// Keeps what a read of the shards gave: a new map replaces the one before (the marks
    /// then cover the new shards); a failed read keeps it.
    pub(super) fn learn(&self, learnt: Learnt) {
        let mut marks = self.lock();
        match learnt {
            Learnt::Map(map) => marks.shards = Some(map),
            Learnt::Refused => marks.refused = true,
            Learnt::Failed => {}
        }
    }
}

/// What came of one slot's calls sent by [`Conn::bounded`] or [`Conn::per_slot`].
pub(crate) enum SlotAnswer {
    /// The slot answered: its calls' replies, in their order.
    Replied(Vec<Value>),
    /// The slot failed (or was skipped as unreachable): the error for each of its calls.
    Failed(Error),
    /// The slot did not answer within the slot timeout: the error for each of its calls,
    /// and where its replies arrive if they come late (the calls were sent and may run).
    Late(Error, oneshot::Receiver<Result<Vec<Value>>>),
}

impl SlotAnswer {
    /// The replies, or the error of a slot that failed or answered too late (whose late
    /// replies are then dropped).
    pub(crate) fn replies(self) -> Result<Vec<Value>> {
        match self {
            SlotAnswer::Replied(v) => Ok(v),
            SlotAnswer::Failed(e) | SlotAnswer::Late(e, _) => Err(e),
        }
    }
}

impl Conn {
    /// True on a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.inner, Inner::Cluster(_))
    }

    /// The hash slot of `key` on a cluster; `None` on one node, where slots do not matter.
    pub(crate) fn slot(&self, key: &str) -> Option<u16> {
        match &self.inner {
            Inner::Node(_) => None,
            Inner::Cluster(_) => Some(cluster::slot_of_key(key.as_bytes())),
        }
    }

    /// How long a call to one slot is waited for while the caller has other slots to serve.
    pub(crate) fn slot_timeout(&self) -> Duration {
        self.health.timeout
    }

    /// True while `slot` is skipped: it, or a slot of its shard, did not answer in time (or
    /// answered "unavailable"), and since then neither did a probe of its primary nor a call
    /// to one of them succeed (and, without a probe, the skip period has not run out).
    pub(crate) fn unreachable(&self, slot: u16) -> bool {
        self.health.is_down(slot, None)
    }

    /// False when no slot is unreachable, cheaply (one lock, no lookup); true when some
    /// slot may be (ask [`Conn::unreachable`]).
    pub(crate) fn some_unreachable(&self) -> bool {
        !self.health.none_down()
    }

    /// As [`Conn::unreachable`], counting only what was found at or after `since` (the
    /// start of a pass, which then waits on a primary at most once even when it asks every
    /// slot because all of them were unreachable when it began).
    pub(crate) fn unreachable_since(&self, slot: u16, since: Instant) -> bool {
        self.health.is_down(slot, Some(since))
    }

    /// Records that `slot` did not answer within the slot timeout (a caller that timed it
    /// out without [`Conn::bounded`]): it and its shard are unreachable for the skip period.
    pub(crate) fn mark_unreachable(&self, slot: u16) {
        let (read, probe) = self.health.mark_down(slot);
        if read {
            // Never waited for: the mark covers the one slot until the map is known.
            let conn = self.clone();
            tokio::spawn(async move { conn.read_shards().await });
        }
        if probe {
            let conn = self.clone();
            tokio::spawn(async move { conn.probe(slot).await });
        }
    }

    /// The error a call to a skipped slot answers.
    pub(crate) fn skipped(&self, slot: u16, what: &str) -> Error {
        Error::unavailable(
            format!(
                "{what}: the primary of hash slot {slot} did not answer in time lately (its own call, or one to another slot it serves), so its calls are skipped for up to {} ms while other slots are served; retry",
                self.health.skip_for.as_millis()
            ),
            std::io::Error::from(std::io::ErrorKind::TimedOut),
        )
    }

    /// `cmds`, calls of `slot` (a cluster's), as one pipeline in a task of its own, waited
    /// for at most the slot timeout: the caller has other slots to serve. Records the slot
    /// (and its shard) as unreachable when it does not answer in time or answers
    /// "unavailable", and as reachable when it answers (even late).
    pub(crate) async fn bounded(
        &self,
        slot: u16,
        cmds: Vec<Cmd>,
        what: &'static str,
    ) -> SlotAnswer {
        let (tx, mut rx) = oneshot::channel();
        let conn = self.clone();
        tokio::spawn(async move {
            let r = conn.pipeline_quick(&cmds, what).await;
            if r.is_ok() {
                conn.health.mark_up(slot);
            }
            let _ = tx.send(r);
        });
        match tokio::time::timeout(self.health.timeout, &mut rx).await {
            Ok(Ok(Ok(replies))) => SlotAnswer::Replied(replies),
            Ok(Ok(Err(e))) => {
                if matches!(e, Error::Unavailable { .. }) {
                    self.mark_unreachable(slot);
                }
                SlotAnswer::Failed(e)
            }
            Ok(Err(_)) => SlotAnswer::Failed(Error::Internal(format!(
                "{what}: the call to hash slot {slot} ended without an answer"
            ))),
            Err(_) => {
                self.mark_unreachable(slot);
                let e = Error::unavailable(
                    format!(
                        "{what}: the primary of hash slot {slot} did not answer within the slot timeout ({} ms); the other slots' calls were answered; retry",
                        self.health.timeout.as_millis()
                    ),
                    std::io::Error::from(std::io::ErrorKind::TimedOut),
                );
                SlotAnswer::Late(e, rx)
            }
        }
    }

    /// Runs `cmds` and answers them slot by slot: the positions of each slot's calls in
    /// `cmds` (in their order) and what came of them. On one node, or when every call is
    /// in one slot and the caller serves no other ([`Among::TheseSlots`]), one pipeline as
    /// [`Conn::pipeline`] (no slot timeout: nothing else waits). Else one pipeline per slot,
    /// concurrently, each [`Conn::bounded`]; a slot found unreachable lately is skipped (its
    /// calls answer [`Conn::skipped`]) unless every slot the caller serves is.
    pub(crate) async fn per_slot(
        &self,
        cmds: &[Cmd],
        what: &'static str,
        among: Among,
    ) -> Vec<(Vec<usize>, SlotAnswer)> {
        let mut groups: Vec<(Option<u16>, Vec<usize>)> = Vec::new();
        if let Inner::Cluster(_) = &self.inner {
            let mut index: HashMap<Option<u16>, usize> = HashMap::new();
            for (i, cmd) in cmds.iter().enumerate() {
                let slot = cluster::slot_of_cmd(cmd);
                let k = *index.entry(slot).or_insert_with(|| {
                    groups.push((slot, Vec::new()));
                    groups.len() - 1
                });
                groups[k].1.push(i);
            }
        }
        let skip = match among {
            Among::TheseSlots if groups.len() > 1 => !groups
                .iter()
                .all(|(slot, _)| slot.is_some_and(|s| self.unreachable(s))),
            Among::MoreSlots { skip } if !groups.is_empty() => skip,
            _ => {
                let all = (0..cmds.len()).collect();
                let answer = match self.pipeline(cmds, what).await {
                    Ok(replies) => SlotAnswer::Replied(replies),
                    Err(e) => SlotAnswer::Failed(e),
                };
                return vec![(all, answer)];
            }
        };
        let answers = join_all(groups.iter().map(|(slot, idx)| {
            let group: Vec<Cmd> = idx.iter().map(|&i| cmds[i].clone()).collect();
            async move {
                match slot {
                    Some(s) if skip && self.unreachable(*s) => {
                        SlotAnswer::Failed(self.skipped(*s, what))
                    }
                    Some(s) => self.bounded(*s, group, what).await,
                    // A keyless call goes to any node: no slot to wait for apart.
                    None => match self.pipeline(&group, what).await {
                        Ok(replies) => SlotAnswer::Replied(replies),
                        Err(e) => SlotAnswer::Failed(e),
                    },
                }
            }
        }))
        .await;
        groups
            .into_iter()
            .map(|(_, idx)| idx)
            .zip(answers)
            .collect()
    }
}

/// What the caller of [`Conn::per_slot`] serves besides the calls it passes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Among {
    /// Nothing else (an ack batch): the calls are bounded by the slot timeout when they
    /// span several slots, and unreachable slots skipped unless all of them are.
    TheseSlots,
    /// Other slots too (a reserve over topics of several slots, whose later calls go to
    /// them): every slot is bounded by the slot timeout, and unreachable ones are skipped
    /// when `skip` (the caller found one of its slots not unreachable).
    MoreSlots {
        /// Skip the slots found unreachable lately.
        skip: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::super::shards::tests::real_reply;
    use super::super::shards::{ShardMap, learn};
    use super::*;

    fn health(config: RedisConfig) -> SlotHealth {
        SlotHealth::new(&config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Marks `slot` with a mark that has just run out.
    fn expire(health: &SlotHealth, slot: u16) {
        let now = Instant::now();
        let mark = Mark {
            at: now,
            until: now,
        };
        health.lock().down.insert(slot, mark);
    }

    fn plain() -> SlotHealth {
        health(RedisConfig::new("redis+cluster://127.0.0.1:7000"))
    }

    /// A record that knows the shards of [`real_reply`]: 3..=5460 on one primary, 0..=2
    /// and 10923..=16383 on another, 5461..=10922 on a third.
    fn with_shards() -> SlotHealth {
        let h = plain();
        assert!(h.ask_shards());
        h.learn(learn(Some(Ok(real_reply()))));
        h
    }

    #[test]
    fn the_slot_timeout_is_checked_and_covers_the_wait_for_replicas() {
        let mut config = RedisConfig::new("redis+cluster://127.0.0.1:7000");
        config.slot_timeout = Duration::ZERO;
        match SlotHealth::new(&config) {
            Err(Error::InvalidConfig { reason }) => assert!(reason.contains("1 ms"), "{reason}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a zero slot timeout was accepted"),
        }
        let config = RedisConfig::new("redis+cluster://127.0.0.1:7000");
        let plain = health(config.clone());
        assert_eq!(plain.timeout, Duration::from_millis(500));
        let waiting = health(config.with_wait_replicas(1, Duration::from_secs(1)));
        assert_eq!(waiting.timeout, Duration::from_millis(1500));
    }

    #[test]
    fn a_slot_is_skipped_for_twice_the_slot_timeout_and_at_least_a_second() {
        // See: issue 37. A mark shorter than the slot timeout ran out while a pass still
        // waited on the dead primary's next slot.
        let config = RedisConfig::new("redis+cluster://127.0.0.1:7000");
        assert_eq!(plain().skip_for, Duration::from_secs(1));
        let short = health(config.clone().with_slot_timeout(Duration::from_millis(100)));
        assert_eq!(short.skip_for, Duration::from_secs(1));
        let waiting = health(config.with_wait_replicas(1, Duration::from_secs(2)));
        assert_eq!(waiting.timeout, Duration::from_millis(2500));
        assert_eq!(waiting.skip_for, Duration::from_secs(5));
    }

    #[test]
    fn without_the_shards_a_slot_is_unreachable_alone_until_it_answers_or_for_a_while() {
        let health = plain();
        assert!(!health.is_down(7, None));
        health.mark_down(7);
        assert!(health.is_down(7, None) && !health.is_down(8, None));
        health.mark_up(7);
        assert!(!health.is_down(7, None));
        // Expired: no longer skipped, and forgotten.
        expire(&health, 9);
        assert!(!health.is_down(9, None));
        assert!(health.lock().down.is_empty());
    }

    #[test]
    fn a_slot_found_unreachable_takes_its_shard_along_until_one_of_them_answers() {
        // See: issue 37
        let health = with_shards();
        health.mark_down(100);
        for slot in [3, 100, 4000, 5460] {
            assert!(health.is_down(slot, None), "{slot}");
        }
        for slot in [0, 2, 5461, 10922, 10923, 16383] {
            assert!(!health.is_down(slot, None), "{slot}");
        }
        // A shard of two ranges goes whole, too.
        health.mark_down(16000);
        assert!(health.is_down(1, None) && health.is_down(12000, None));
        // Another slot of the shard answered: the shard is back, the other one still out.
        health.mark_up(5000);
        assert!(!health.is_down(100, None) && !health.is_down(4000, None));
        assert!(health.is_down(0, None));
        // Expired: the whole shard is back.
        expire(&health, 16000);
        assert!(!health.is_down(0, None) && !health.is_down(16000, None));
    }

    #[test]
    fn a_mark_made_before_the_map_was_known_covers_the_shard_once_it_is() {
        let health = plain();
        health.mark_down(100);
        assert!(!health.is_down(4000, None));
        health.learn(learn(Some(Ok(real_reply()))));
        assert!(health.is_down(4000, None));
    }

    #[test]
    fn a_refused_or_failed_read_of_the_shards_keeps_marks_to_their_slot() {
        let refused = plain();
        assert!(refused.ask_shards());
        let no_perm = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm),
            "no permissions to run the 'cluster|shards' command",
        ));
        refused.learn(learn(Some(Err(no_perm))));
        assert!(!refused.mark_down(100).0, "asked again after a refusal");
        assert!(refused.is_down(100, None) && !refused.is_down(4000, None));
        refused.lock().asked = Some(Instant::now() - REFRESH_AFTER);
        assert!(!refused.ask_shards(), "asked again after a refusal");

        let unreadable = plain();
        unreadable.learn(learn(Some(Ok(Value::Int(1)))));
        unreadable.mark_down(100);
        assert!(!unreadable.is_down(4000, None));

        // A failed read later keeps the map read before.
        let known = with_shards();
        known.learn(learn(None));
        known.mark_down(100);
        assert!(known.is_down(4000, None));
    }

    #[test]
    fn the_shards_are_read_again_at_a_mark_only_when_the_last_read_is_old() {
        let health = with_shards();
        assert!(!health.mark_down(1).0, "read again at once");
        assert!(!health.ask_shards());
        health.lock().asked = Some(Instant::now() - REFRESH_AFTER);
        assert!(health.mark_down(1).0, "not read again when old");
        // Asking counts: one read at a time.
        assert!(!health.mark_down(2).0);
        // Slots that migrated since: the new map decides.
        let moved = ShardMap::parse(Value::Array(vec![
            shard_of(&[0, 8191]),
            shard_of(&[8192, 16383]),
        ]));
        health.learn(Learnt::Map(moved.unwrap_or_else(|| panic!("unreadable"))));
        assert!(health.is_down(8000, None) && !health.is_down(9000, None));
    }

    #[test]
    fn one_probe_per_shard_holds_the_skip_until_an_answer_or_until_nobody_asks() {
        // See: issue 37. A skip ran out while the primary was still dead, and the next
        // pass over its slots waited a slot timeout again.
        let health = with_shards();
        let idle = Duration::from_secs(10);
        assert!(health.mark_down(100).1, "no probe started");
        // Another slot of the shard: its probe runs already. Another shard: one of its own.
        assert!(!health.mark_down(4000).1);
        assert!(health.mark_down(6000).1);

        // A tick with no answer pushes the skip on, past the end it had.
        let soon = Instant::now() + Duration::from_millis(1);
        for m in health.lock().down.values_mut() {
            m.until = soon;
        }
        assert_eq!(health.hold(100, idle), Hold::Probe);
        let until = health.lock().down[&100].until;
        assert!(
            until >= Instant::now() + health.skip_for / 2,
            "not pushed on"
        );
        std::thread::sleep(Duration::from_millis(2));
        assert!(health.is_down(3, None) && !health.is_down(6000, None));

        // An answer (its own, or a call to another slot of its shard) ends the skip and
        // the probe; the next mark starts a new one.
        health.mark_up(5000);
        assert!(!health.is_down(100, None));
        assert_eq!(health.hold(100, idle), Hold::Stop);
        assert!(health.mark_down(100).1, "the ended probe still counted");
        health.probed(100);
        assert!(!health.is_down(4000, None));
        assert!(!health.lock().probing.contains(&100));

        // Nobody has found the shard skipped for `idle`: the probe stops, the mark stays
        // until it runs out.
        assert!(health.mark_down(200).1);
        health.lock().consulted = Some(Instant::now() - idle);
        assert_eq!(health.hold(200, idle), Hold::Stop);
        assert!(health.is_down(200, None));
        assert!(health.mark_down(300).1, "the stopped probe still counted");
    }

    fn shard_of(slots: &[i64]) -> Value {
        Value::Array(vec![
            Value::BulkString(b"slots".to_vec()),
            Value::Array(slots.iter().map(|&s| Value::Int(s)).collect()),
        ])
    }

    #[test]
    fn since_counts_only_the_marks_made_from_then_on() {
        let health = with_shards();
        health.mark_down(100);
        std::thread::sleep(Duration::from_millis(2));
        let pass = Instant::now();
        assert!(health.is_down(4000, None));
        assert!(!health.is_down(4000, Some(pass)));
        std::thread::sleep(Duration::from_millis(2));
        health.mark_down(200);
        assert!(health.is_down(4000, Some(pass)));
        assert!(!health.is_down(0, Some(pass)));
    }
}
