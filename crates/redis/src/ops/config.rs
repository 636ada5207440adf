//! A topic's settings: `configure` (set) and `config` (read), with their values in the order
//! of lib.lua's `CONFIG_FIELDS` ('' or nil: unset), and the argument forms push shares.

use std::time::Duration;

use delayq_core::{Backoff, Error, Result, Retention, Topic, TopicConfig, duration_ms};
use redis::Value;

use super::Ops;
use crate::codec::{self, Status};
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

/// Decodes `config.lua`'s reply: one value per field, nil when unset.
pub(crate) fn decode_config(reply: Value) -> Result<TopicConfig> {
    let v = codec::array(reply)?;
    if v.len() != FIELDS {
        return Err(Error::Internal(format!(
            "the topic settings came as {} values, not {FIELDS}",
            v.len()
        )));
    }
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
        partitions: f(9)?
            .map(|n| {
                u16::try_from(n)
                    .map_err(|_| Error::Internal(format!("a partition count is out of range: {n}")))
            })
            .transpose()?,
    })
}

impl Ops {
    /// `Engine::set_topic_config`, its input already checked by `engine.rs`.
    pub(crate) async fn set_config(&self, topic: &Topic, c: &TopicConfig) -> Result<()> {
        let mut inv = self.fcall(library::CONFIGURE, topic);
        inv.arg(opt_arg(c.ttr.map(duration_ms)))
            .arg(opt_arg(c.max_attempts.map(u64::from)));
        for part in backoff_args(c.backoff.as_ref()) {
            inv.arg(part);
        }
        inv.arg(opt_arg(c.max_body.map(|n| n as u64)))
            .arg(opt_arg(c.retention.map(|r| u64::from(r.max_jobs))))
            .arg(opt_arg(c.retention.map(|r| duration_ms(r.max_age))))
            .arg(opt_arg(c.partitions.map(u64::from)));
        let reply = self.conn.call(&inv, "setting a topic's settings").await?;
        let (status, had) = match &reply {
            Value::Array(v) if v.len() == 2 => (codec::int(&v[0])?, codec::int(&v[1])?),
            other => (codec::int(other)?, 0),
        };
        match Status::from_code(status)? {
            Status::Ok => Ok(()),
            Status::PartitionsInUse => Err(Error::PartitionsInUse {
                topic: topic.clone(),
                from: u16::try_from(had).map_err(|_| {
                    Error::Internal(format!("a partition count is out of range: {had}"))
                })?,
                to: c.partition_count(),
            }),
            other => Err(super::unexpected("configure", other)),
        }
    }

    /// `Engine::topic_config`, its input already checked by `engine.rs`.
    pub(crate) async fn config(&self, topic: &Topic) -> Result<TopicConfig> {
        let inv = self.fcall(library::CONFIG, topic);
        decode_config(self.conn.call(&inv, "reading a topic's settings").await?)
    }
}
