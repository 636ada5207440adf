//! Numbers claimed from one sequence that every process on this Redis shares, each range
//! recorded with the topic it was claimed for (`Numbers::claim_numbers`, `number_topic`): the
//! beanstalkd protocol's job ids. Two keys outside every topic's slot (`keys.rs`): the
//! sequence (a STRING, `INCRBY`) and the ranges (a ZSET: member `<last>:<topic>` scored by
//! the range's first number), so a number finds its topic with one `ZRANGE … BYSCORE REV
//! LIMIT 0 1`, never a scan.
//!
//! A claim is two writes, the `INCRBY`, then the range's `ZADD`, and answers only after
//! both: a process that dies between them claimed numbers that no job will ever carry, which
//! costs nothing. Purge and retention leave the ranges alone, so a number never comes back.
//! Scores are doubles: numbers stay exact up to 2^53, which one sequence does not reach.

use delayq_core::{Error, Result, Topic};

use super::Ops;

impl Ops {
    /// `Numbers::claim_numbers`, its count already checked by `engine.rs`.
    pub(crate) async fn claim_numbers(&self, topic: &Topic, count: u64) -> Result<u64> {
        let mut incr = redis::cmd("INCRBY");
        incr.arg(self.keys.number_seq()).arg(count);
        let last: u64 = self.conn.write(&incr, "claiming numbers").await?;
        let first = last + 1 - count;
        let mut add = redis::cmd("ZADD");
        add.arg(self.keys.number_ranges())
            .arg(first)
            .arg(format!("{last}:{topic}"));
        let _: i64 = self.conn.write(&add, "recording claimed numbers").await?;
        Ok(first)
    }

    /// `Numbers::number_topic`.
    pub(crate) async fn number_topic(&self, n: u64) -> Result<Option<Topic>> {
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(self.keys.number_ranges())
            .arg(n)
            .arg("-inf")
            .arg("BYSCORE")
            .arg("REV")
            .arg("LIMIT")
            .arg(0)
            .arg(1);
        let found: Vec<String> = self.conn.query(&cmd, "finding a number's topic").await?;
        let Some(member) = found.first() else {
            return Ok(None);
        };
        let bad = || Error::Internal(format!("a claimed range is stored as {member:?}"));
        let (last, topic) = member.split_once(':').ok_or_else(bad)?;
        let last: u64 = last.parse().map_err(|_| bad())?;
        if n > last {
            return Ok(None);
        }
        Topic::new(topic).map(Some).map_err(|_| bad())
    }
}
