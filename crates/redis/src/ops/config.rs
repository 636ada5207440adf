//! A topic's settings: `configure` (set) and `config` (read), with their values in the order
//! of lib.lua's `CONFIG_FIELDS` ('' or nil: unset), and the argument forms push shares.
//!
//! Every partition of a topic holds a copy of its settings, and so does its home
//! ([`Part::whole`]), whose copy is the one read and the one that says the partition count.
//! Settings are written to every partition, the home last. A change of the partition count
//! from `m` to `n` (allowed only while the topic holds no job: checked first, with no write)
//! runs in two steps over the home and every partition a caller may reach with either count
//! (the partitions of `m` and those of `n`: their keys differ): first each is closed (its count set to `-n`, which every push refuses and
//! routes again after a pause), which `configure.lua` refuses on a partition that holds jobs;
//! then each gets the new settings, the home last. If one refused (a push landed between the
//! check and the closing), the closed ones get the settings they had back (or lose them, if
//! they had none) and the change answers `PartitionsInUse`. So a push never lands under a
//! count the topic is leaving: a partition that holds a count `k` and is one of the `k`
//! partitions of a `k`-partition topic holds the topic's current count (every change writes
//! all of the old count's partitions), so a caller that routed by a stale count meets a
//! partition that holds another count, and routes again. A pause, kept beside the settings,
//! is applied again to the new partitions.

use std::time::Duration;

use delayq_core::{Backoff, Error, Result, Retention, Timestamp, Topic, TopicConfig, duration_ms};
use redis::Value;

use super::Ops;
use crate::codec::{self, Status};
use crate::keys::Part;
use crate::library;

/// The number of settings (lib.lua's `CONFIG_FIELDS`).
const FIELDS: usize = 10;

/// An optional number as a function argument: its digits, or '' when unset.
pub(crate) fn opt_arg(v: Option<u64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

/// A back-off as the four arguments (base ms, factor, max ms, jitter permille) push and
/// configure take, or four '' when unset.
pub(crate) fn backoff_args(b: Option<&Backoff>) -> [String; 4] {
    [
        opt_arg(b.map(Backoff::base_ms)),
        opt_arg(b.map(|b| u64::from(b.factor()))),
        opt_arg(b.map(Backoff::max_ms)),
        opt_arg(b.map(|b| u64::from(b.jitter_permille()))),
    ]
}

/// Decodes `config.lua`'s reply: one value per field, nil when unset, then the clock of
/// the primary that answered.
pub(crate) fn decode_config(reply: Value) -> Result<TopicConfig> {
    decode_config_at(reply).map(|(config, _)| config)
}

/// [`decode_config`], with the time the settings were read at (the answering primary's
/// `TIME`).
pub(crate) fn decode_config_at(reply: Value) -> Result<(TopicConfig, Timestamp)> {
    let mut v = codec::array(reply)?;
    if v.len() != FIELDS + 2 {
        return Err(Error::Internal(format!(
            "the topic settings came as {} values, not {FIELDS} and the time",
            v.len()
        )));
    }
    let usec = codec::uint(&v[FIELDS + 1])?;
    let sec = codec::uint(&v[FIELDS])?;
    v.truncate(FIELDS);
    let at = Timestamp::from_millis(sec * 1000 + usec / 1000);
    decode_fields(&v).map(|config| (config, at))
}

/// The settings of [`decode_config`]'s reply, `FIELDS` values.
fn decode_fields(v: &[Value]) -> Result<TopicConfig> {
    let f = |i: usize| codec::opt_field(&v[i]);
    let narrow = |i: usize| -> Result<Option<u32>> {
        f(i)?
            .map(|n| {
                u32::try_from(n)
                    .map_err(|_| Error::Internal(format!("a topic setting is out of range: {n}")))
            })
            .transpose()
    };
    let backoff = match (f(2)?, narrow(3)?, f(4)?, narrow(5)?) {
        (Some(base), Some(factor), Some(max), Some(jitter)) => {
            Some(Backoff::from_parts(base, factor, max, jitter))
        }
        _ => None,
    };
    Ok(TopicConfig {
        ttr: f(0)?.map(Duration::from_millis),
        max_attempts: narrow(1)?,
        backoff,
        max_body: f(6)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        retention: match (narrow(7)?, f(8)?) {
            (Some(max_jobs), Some(age)) => Some(Retention {
                max_jobs,
                max_age: Duration::from_millis(age),
            }),
            _ => None,
        },
        // Negative while a change to that many is under way.
        partitions: match &v[9] {
            Value::Nil => None,
            v => Some(count_of(codec::int(v)?)?),
        },
    })
}

/// A stored partition count as a count (its absolute value: negative while a change to that
/// many is under way).
fn count_of(stored: i64) -> Result<u16> {
    u16::try_from(stored.unsigned_abs())
        .map_err(|_| Error::Internal(format!("a partition count is out of range: {stored}")))
}

/// `configure.lua`'s arguments for settings `c` with the partition count `count` ('' for
/// unset).
fn configure_args(inv: &mut redis::Cmd, c: &TopicConfig, count: String) {
    inv.arg(opt_arg(c.ttr.map(duration_ms)))
        .arg(opt_arg(c.max_attempts.map(u64::from)));
    for part in backoff_args(c.backoff.as_ref()) {
        inv.arg(part);
    }
    inv.arg(opt_arg(c.max_body.map(|n| n as u64)))
        .arg(opt_arg(c.retention.map(|r| u64::from(r.max_jobs))))
        .arg(opt_arg(c.retention.map(|r| duration_ms(r.max_age))))
        .arg(count);
}

impl Ops {
    /// `Engine::set_topic_config`, its input already checked by `engine.rs` (the steps are
    /// in the module's documentation).
    pub(crate) async fn set_config(&self, topic: &Topic, c: &TopicConfig) -> Result<()> {
        let stored = self.stored_count(topic).await?;
        let to = c.partition_count();
        let final_count = opt_arg(c.partitions.map(u64::from));
        let in_use = |had: i64| -> Result<()> {
            Err(Error::PartitionsInUse {
                topic: topic.clone(),
                from: count_of(had)?,
                to,
            })
        };
        // The same count, or a change to it that stopped before the home (its partitions
        // are open or closed, none holds a job of another count): settings only.
        if stored.unsigned_abs() == u64::from(to) {
            let mut parts = Part::all(topic, to).to_vec();
            if to > 1 {
                parts.insert(0, Part::whole(topic));
            }
            let refused = self.configure(&parts, c, &final_count).await?;
            return match refused.iter().flatten().next() {
                Some(had) => in_use(*had),
                None => Ok(()),
            };
        }
        let from = count_of(stored)?;
        let before = self.config(topic).await?;
        // The home (written last), then both counts' partitions.
        let home = Part::whole(topic);
        let mut parts = vec![home.clone()];
        for p in Part::all(topic, from)
            .iter()
            .chain(Part::all(topic, to).iter())
        {
            if !parts.contains(p) {
                parts.push(p.clone());
            }
        }
        // Refused with no write when a partition holds jobs; which partitions have settings,
        // so that a change refused after all (a push landed in between) leaves none behind.
        let mut cmds = Vec::new();
        for p in &parts {
            let (mut jobs, mut config) = (redis::cmd("EXISTS"), redis::cmd("EXISTS"));
            jobs.arg(self.keys.jobs(p));
            config.arg(self.keys.config(p));
            cmds.extend([jobs, config]);
        }
        let exists = self
            .conn
            .pipeline(&cmds, "checking a topic's partitions")
            .await?
            .iter()
            .map(codec::int)
            .collect::<Result<Vec<i64>>>()?;
        if exists.chunks(2).any(|e| e[0] == 1) {
            return in_use(stored);
        }
        // A pause is not a setting (`pause.lua` keeps it beside them): carried over below.
        // (Read once the topic is known empty: stats applies what is due first.)
        let paused = self.stats(topic).await?.paused_until;
        let refused = self.configure(&parts, c, &format!("-{to}")).await?;
        if let Some(had) = refused.iter().flatten().next() {
            let mut restore = Vec::new();
            let mut drop = Vec::new();
            for ((p, r), e) in parts.iter().zip(&refused).zip(exists.chunks(2)) {
                match (r, e[1]) {
                    (Some(_), _) => {}
                    (None, 1) => restore.push(p.clone()),
                    (None, _) => {
                        let mut del = redis::cmd("DEL");
                        del.arg(self.keys.config(p));
                        drop.push(del);
                    }
                }
            }
            if !restore.is_empty() {
                self.configure(
                    &restore,
                    &before,
                    &opt_arg(before.partitions.map(u64::from)),
                )
                .await?;
            }
            if !drop.is_empty() {
                self.conn
                    .pipeline(&drop, "undoing a refused change of partitions")
                    .await?;
            }
            return in_use(*had);
        }
        self.configure(&parts, c, &final_count).await?;
        self.learn_count(topic, i64::from(to));
        if let Some(until) = paused {
            self.pause(topic, until).await?;
        }
        Ok(())
    }

    /// Writes settings `c` with the partition count `count` to `parts` (those after the first
    /// in one pipeline, then the first, the home): answers, per partition, the count it
    /// holds when it refused (it holds jobs and `count` is another count), else `None`.
    async fn configure(
        &self,
        parts: &[Part],
        c: &TopicConfig,
        count: &str,
    ) -> Result<Vec<Option<i64>>> {
        let invs: Vec<redis::Cmd> = parts
            .iter()
            .map(|part| {
                let mut inv = self.fcall(library::CONFIGURE, part);
                configure_args(&mut inv, c, count.to_string());
                inv
            })
            .collect();
        let (first, rest) = invs
            .split_first()
            .ok_or_else(|| Error::Internal("a topic with no partition".into()))?;
        let mut replies = if rest.is_empty() {
            Vec::new()
        } else {
            self.conn
                .pipeline(rest, "setting a topic's settings")
                .await?
        };
        replies.insert(
            0,
            self.conn.call(first, "setting a topic's settings").await?,
        );
        replies
            .into_iter()
            .map(|reply| {
                let (status, had) = match &reply {
                    Value::Array(v) if v.len() == 2 => (codec::int(&v[0])?, codec::int(&v[1])?),
                    other => (codec::int(other)?, 0),
                };
                match Status::from_code(status)? {
                    Status::Ok => Ok(None),
                    Status::PartitionsInUse => Ok(Some(had)),
                    other => Err(super::unexpected("configure", other)),
                }
            })
            .collect()
    }

    /// `Engine::topic_config`, its input already checked by `engine.rs`: the home's.
    pub(crate) async fn config(&self, topic: &Topic) -> Result<TopicConfig> {
        let inv = self.fcall(library::CONFIG, &Part::whole(topic));
        decode_config(self.conn.call(&inv, "reading a topic's settings").await?)
    }
}
