//! The topic list (`Engine::topics`): the registry of topics pushed to since they were
//! created or last purged (`ops::push` adds, `ops::admin` purges), and the topics paused
//! now, jobs or not.
//!
//! A pause lives in the config hash of each partition (`pause.lua`), in the topic's slot,
//! while the list is read from keys in no topic's slot; so a pause in force also puts its
//! topic in the set of paused topics (`KeySpace::paused`), after `pause.lua` answered. A
//! name never leaves that set: removing it when a pause ends could race with another
//! process's new pause of the topic and hide it. The list keeps the names whose pause is
//! in force on Redis's clock, which makes a pause that ended, by a resume or by its end
//! time, leave the list by itself. The set holds one name per topic ever paused.

use std::collections::BTreeSet;

use delayq_core::{Error, Result, Timestamp, Topic};
use redis::{Cmd, Value};

use super::Ops;
use crate::codec;
use crate::conn::Among;

impl Ops {
    /// `Engine::topics`: the registry's topics and the topics paused now, sorted. On a
    /// cluster the two sets (in two slots) are each read within the slot timeout, and a set
    /// whose slot fails or does not answer in time answers what this process read of it
    /// last (the error when it never read it): a dead or hung primary holding one of them
    /// does not hold up the listings (`GET /v1/topics`, `/metrics`, the dashboard), which
    /// then show the topics known before.
    pub(crate) async fn topics(&self) -> Result<Vec<Topic>> {
        const WHAT: &str = "listing topics";
        let mut members = redis::cmd("SMEMBERS");
        members.arg(self.keys.registry());
        let mut paused = redis::cmd("SMEMBERS");
        paused.arg(self.keys.paused());
        let mut sets: [Option<Vec<Topic>>; 2] = [None, None];
        for (calls, answer) in self
            .conn
            .per_slot(&[members, paused], WHAT, Among::TheseSlots)
            .await
        {
            match answer.replies() {
                Ok(replies) => {
                    for (&c, reply) in calls.iter().zip(replies) {
                        sets[c] = Some(names(reply)?);
                    }
                }
                Err(e) if self.conn.is_cluster() => {
                    let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
                    for &c in &calls {
                        match &listed[c] {
                            Some(known) => sets[c] = Some(known.clone()),
                            None => return Err(e.copy_for_another()),
                        }
                    }
                    tracing::debug!(error = %e, "listing topics: answering the set read before");
                }
                Err(e) => return Err(e),
            }
        }
        let [Some(registry), Some(paused)] = sets else {
            return Err(Error::Internal(format!("{WHAT}: a set got no answer")));
        };
        *self.listed.lock().unwrap_or_else(|e| e.into_inner()) =
            [Some(registry.clone()), Some(paused.clone())];
        let mut topics: BTreeSet<Topic> = registry.into_iter().collect();
        let candidates: Vec<Topic> = paused.into_iter().filter(|t| !topics.contains(t)).collect();
        topics.extend(self.paused_now(candidates).await?);
        Ok(topics.into_iter().collect())
    }

    /// Puts `topic` in the set of paused topics (a pause of it is in force).
    pub(crate) async fn mark_paused(&self, topic: &Topic) -> Result<()> {
        let mut sadd = redis::cmd("SADD");
        sadd.arg(self.keys.paused()).arg(topic.as_str());
        let _: i64 = self.conn.write(&sadd, "listing a paused topic").await?;
        Ok(())
    }

    /// The topics of `candidates` whose pause is in force now: the end of a pause of any of
    /// their partitions is after Redis's clock (as `stats.lua` says `paused_until`). On a
    /// cluster each slot's reads wait at most the slot timeout, and a topic whose pause
    /// could not be read is kept (the listing then names it unreachable); Redis's clock is
    /// read within the slot timeout too, else this machine's stands in.
    async fn paused_now(&self, candidates: Vec<Topic>) -> Result<Vec<Topic>> {
        const WHAT: &str = "reading the pauses of paused topics";
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut owners = Vec::new();
        let mut reads = Vec::new();
        for topic in candidates {
            let Some(parts) = self.reserve_parts(&topic, true).await? else {
                owners.push(topic);
                reads.push(None);
                continue;
            };
            for part in parts.iter() {
                let mut hget = redis::cmd("HGET");
                hget.arg(self.keys.config(part)).arg("paused_until");
                reads.push(Some(hget));
                owners.push(topic.clone());
            }
        }
        let now = self.now_or_here().await?.as_millis();
        let cmds: Vec<Cmd> = reads.iter().flatten().cloned().collect();
        let mut ends: Vec<Option<Value>> = vec![None; cmds.len()];
        for (calls, answer) in self.conn.per_slot(&cmds, WHAT, Among::TheseSlots).await {
            match answer.replies() {
                Ok(replies) => {
                    for (&c, reply) in calls.iter().zip(replies) {
                        ends[c] = Some(reply);
                    }
                }
                Err(e) if self.conn.is_cluster() => {
                    tracing::debug!(error = %e, "{WHAT}: keeping the topics whose pause did not come");
                }
                Err(e) => return Err(e),
            }
        }
        let mut ends = ends.into_iter();
        let mut out: Vec<Topic> = Vec::new();
        for (topic, read) in owners.into_iter().zip(reads) {
            // A read not sent (its count unknown) or not answered keeps its topic.
            let end = read.and_then(|_| ends.next().flatten());
            let keep = match end {
                Some(end) => codec::opt_field(&end)?.is_some_and(|end| end > now),
                None => true,
            };
            if keep && out.last() != Some(&topic) {
                out.push(topic);
            }
        }
        Ok(out)
    }

    /// Redis's clock; on a cluster, read within the slot timeout (`TIME` goes to any node,
    /// which may be the one down), else this machine's.
    async fn now_or_here(&self) -> Result<Timestamp> {
        if !self.conn.is_cluster() {
            return self.now().await;
        }
        match tokio::time::timeout(self.conn.slot_timeout(), self.now()).await {
            Ok(Ok(now)) => Ok(now),
            _ => Ok(Timestamp::now()),
        }
    }
}

/// The valid topic names of an `SMEMBERS` reply (another name is not delayq's: skipped).
fn names(reply: redis::Value) -> Result<Vec<Topic>> {
    let members = match reply {
        redis::Value::Set(items) | redis::Value::Array(items) => items,
        redis::Value::Nil => Vec::new(),
        other => {
            return Err(Error::Internal(format!(
                "listing topics answered {other:?}, not a set"
            )));
        }
    };
    Ok(members
        .into_iter()
        .filter_map(|m| codec::string(m).ok())
        .filter_map(|n| Topic::new(n).ok())
        .collect())
}
