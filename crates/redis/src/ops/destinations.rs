//! Push destinations (issue 20): one hash (`keys::destinations`), a topic's name to its
//! document, written with `HSET` and `HDEL` (each one command, so atomic), read with `HGET`
//! and `HGETALL`. The engine does not read the documents; `delayq-push` does.

use delayq_core::{Error, Result, StoredDestination, Topic};
use redis::Value;

use super::Ops;
use crate::codec;

impl Ops {
    /// `Destinations::put_destination`.
    pub(crate) async fn put_destination(&self, topic: &Topic, doc: &str) -> Result<()> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(self.keys.destinations())
            .arg(topic.as_str())
            .arg(doc);
        let _: Value = self.conn.write(&cmd, "putting a destination").await?;
        Ok(())
    }

    /// `Destinations::destination`.
    pub(crate) async fn destination(&self, topic: &Topic) -> Result<Option<StoredDestination>> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.keys.destinations()).arg(topic.as_str());
        match self.conn.query(&cmd, "reading a destination").await? {
            Value::Nil => Ok(None),
            v => Ok(Some(StoredDestination {
                topic: topic.clone(),
                doc: codec::string(v)?,
            })),
        }
    }

    /// `Destinations::destinations`, by topic name.
    pub(crate) async fn destinations(&self) -> Result<Vec<StoredDestination>> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(self.keys.destinations());
        let v = codec::array(self.conn.query(&cmd, "listing destinations").await?)?;
        let mut all = Vec::with_capacity(v.len() / 2);
        let mut it = v.into_iter();
        while let (Some(topic), Some(doc)) = (it.next(), it.next()) {
            let name = codec::string(topic)?;
            let topic = Topic::new(name.clone()).map_err(|e| {
                Error::Internal(format!(
                    "a destination is stored under a bad topic {name:?}: {e}"
                ))
            })?;
            all.push(StoredDestination {
                topic,
                doc: codec::string(doc)?,
            });
        }
        all.sort_by(|a, b| a.topic.as_str().cmp(b.topic.as_str()));
        Ok(all)
    }

    /// `Destinations::delete_destination`.
    pub(crate) async fn delete_destination(&self, topic: &Topic) -> Result<bool> {
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(self.keys.destinations()).arg(topic.as_str());
        let n: i64 = self.conn.write(&cmd, "deleting a destination").await?;
        Ok(n == 1)
    }
}
