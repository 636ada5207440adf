//! Per-slot independence on a Redis Cluster (issue 37): the calls of one operation that go
//! to several hash slots are answered slot by slot, so that a primary that is down or hung
//! holds up only its own topics.
//!
//! A call to a slot whose caller also waits on other slots ([`Conn::bounded`]) runs in a
//! task of its own and is waited for at most the slot timeout
//! ([`crate::RedisConfig::slot_timeout`], plus the wait-replicas timeout when that option is
//! on). A slot that did not answer in time (or answered "unavailable") is *unreachable* for
//! [`UNREACHABLE_FOR`], or until a call to it succeeds: callers skip it meanwhile
//! ([`Conn::unreachable`]) unless every slot they need is unreachable. The call that timed
//! out is not cancelled (its command was sent and may still run): its late reply is handed
//! to the caller ([`SlotAnswer::Late`]), which gives back the jobs it leased.
//!
//! On one node nothing here applies: every call goes in one pipeline, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_core::{Error, Result};
use futures_util::future::join_all;
use redis::{Cmd, Value};
use tokio::sync::oneshot;

use super::{Conn, Inner, cluster};
use crate::RedisConfig;

/// How long a slot that did not answer in time is skipped by callers that have other slots
/// to ask: long enough that a pass over many partitions, or a busy worker's next calls, do
/// not each wait on it again; short enough that its topics are served soon after it is back.
pub(crate) const UNREACHABLE_FOR: Duration = Duration::from_secs(1);

/// The slots found unreachable lately, and how long a call to one slot may take while others
/// wait. Shared by every clone of a [`Conn`].
#[derive(Clone)]
pub(crate) struct SlotHealth {
    /// The slot timeout, with the wait-replicas timeout added when that option is on.
    timeout: Duration,
    /// Slot → until when it is skipped.
    down: Arc<Mutex<HashMap<u16, Instant>>>,
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
        Ok(SlotHealth {
            timeout: config.slot_timeout + wait,
            down: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u16, Instant>> {
        self.down.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_down(&self, slot: u16) -> bool {
        let mut down = self.lock();
        match down.get(&slot) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                down.remove(&slot);
                false
            }
            None => false,
        }
    }

    fn mark_down(&self, slot: u16) {
        self.lock().insert(slot, Instant::now() + UNREACHABLE_FOR);
    }

    fn mark_up(&self, slot: u16) {
        let mut down = self.lock();
        if !down.is_empty() {
            down.remove(&slot);
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

    /// True while `slot` is skipped: it did not answer in time (or answered "unavailable")
    /// less than [`UNREACHABLE_FOR`] ago, and no call to it succeeded since.
    pub(crate) fn unreachable(&self, slot: u16) -> bool {
        self.health.is_down(slot)
    }

    /// The error a call to a skipped slot answers.
    pub(crate) fn skipped(slot: u16, what: &str) -> Error {
        Error::unavailable(
            format!(
                "{what}: the primary of hash slot {slot} did not answer in time lately, so its calls are skipped for up to {} ms while other slots are served; retry",
                UNREACHABLE_FOR.as_millis()
            ),
            std::io::Error::from(std::io::ErrorKind::TimedOut),
        )
    }

    /// `cmds`, calls of `slot` (a cluster's), as one pipeline in a task of its own, waited
    /// for at most the slot timeout: the caller has other slots to serve. Records the slot
    /// as unreachable when it does not answer in time or answers "unavailable", and as
    /// reachable when it answers (even late).
    pub(crate) async fn bounded(
        &self,
        slot: u16,
        cmds: Vec<Cmd>,
        what: &'static str,
    ) -> SlotAnswer {
        let (tx, mut rx) = oneshot::channel();
        let conn = self.clone();
        tokio::spawn(async move {
            let r = conn.pipeline(&cmds, what).await;
            if r.is_ok() {
                conn.health.mark_up(slot);
            }
            let _ = tx.send(r);
        });
        match tokio::time::timeout(self.health.timeout, &mut rx).await {
            Ok(Ok(Ok(replies))) => SlotAnswer::Replied(replies),
            Ok(Ok(Err(e))) => {
                if matches!(e, Error::Unavailable { .. }) {
                    self.health.mark_down(slot);
                }
                SlotAnswer::Failed(e)
            }
            Ok(Err(_)) => SlotAnswer::Failed(Error::Internal(format!(
                "{what}: the call to hash slot {slot} ended without an answer"
            ))),
            Err(_) => {
                self.health.mark_down(slot);
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
                        SlotAnswer::Failed(Conn::skipped(*s, what))
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
    use super::*;

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
        let plain = SlotHealth::new(&config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain.timeout, Duration::from_millis(500));
        let waiting = SlotHealth::new(&config.with_wait_replicas(1, Duration::from_secs(1)))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(waiting.timeout, Duration::from_millis(1500));
    }

    #[test]
    fn a_slot_is_unreachable_until_it_answers_or_for_a_while() {
        let health = SlotHealth::new(&RedisConfig::new("redis+cluster://127.0.0.1:7000"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!health.is_down(7));
        health.mark_down(7);
        assert!(health.is_down(7) && !health.is_down(8));
        health.mark_up(7);
        assert!(!health.is_down(7));
        // Expired: no longer skipped, and forgotten.
        health.lock().insert(9, Instant::now());
        assert!(!health.is_down(9));
        assert!(health.lock().is_empty());
    }
}
