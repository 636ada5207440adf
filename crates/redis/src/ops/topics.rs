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

use delayq_core::{Result, Topic};

use super::Ops;
use crate::codec;

impl Ops {
    /// `Engine::topics`: the registry's topics and the topics paused now, sorted.
    pub(crate) async fn topics(&self) -> Result<Vec<Topic>> {
        let mut members = redis::cmd("SMEMBERS");
        members.arg(self.keys.registry());
        let mut paused = redis::cmd("SMEMBERS");
        paused.arg(self.keys.paused());
        let replies = self
            .conn
            .pipeline(&[members, paused], "listing topics")
            .await?;
        let [registry, paused] = <[redis::Value; 2]>::try_from(replies).map_err(|r| {
            delayq_core::Error::Internal(format!("listing topics answered {} replies", r.len()))
        })?;
        let mut topics: BTreeSet<Topic> = names(registry)?.into_iter().collect();
        let candidates: Vec<Topic> = names(paused)?
            .into_iter()
            .filter(|t| !topics.contains(t))
            .collect();
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
    /// their partitions is after Redis's clock (as `stats.lua` says `paused_until`).
    async fn paused_now(&self, candidates: Vec<Topic>) -> Result<Vec<Topic>> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut owners = Vec::new();
        let mut reads = Vec::new();
        for topic in candidates {
            for part in self.parts(&topic).await?.iter() {
                let mut hget = redis::cmd("HGET");
                hget.arg(self.keys.config(part)).arg("paused_until");
                reads.push(hget);
                owners.push(topic.clone());
            }
        }
        let now = self.now().await?.as_millis();
        let ends = self
            .conn
            .pipeline(&reads, "reading the pauses of paused topics")
            .await?;
        let mut out: Vec<Topic> = Vec::new();
        for (topic, end) in owners.into_iter().zip(ends) {
            if codec::opt_field(&end)?.is_some_and(|end| end > now) && out.last() != Some(&topic) {
                out.push(topic);
            }
        }
        Ok(out)
    }
}

/// The valid topic names of an `SMEMBERS` reply (another name is not delayq's: skipped).
fn names(reply: redis::Value) -> Result<Vec<Topic>> {
    let members = match reply {
        redis::Value::Set(items) | redis::Value::Array(items) => items,
        redis::Value::Nil => Vec::new(),
        other => {
            return Err(delayq_core::Error::Internal(format!(
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
