//! The operations on jobs and topics outside the hot path: get, delete, reschedule, kick,
//! bury without a lease, list (with its cursor), stats, topics, purge, and Redis's clock.

use std::time::Duration;

use delayq_core::{
    Cursor, Error, Job, JobId, JobState, Page, Result, Schedule, Timestamp, Topic, TopicStats,
};
use redis::Value;

use super::push::schedule_args;
use super::{Ops, not_found, unexpected};
use crate::codec::{self, Status, decode_job, decode_jobs, state_code, state_from_code};
use crate::library;

impl Ops {
    /// `Engine::get`, its input already checked by `engine.rs`.
    pub(crate) async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        let mut inv = self.fcall(library::GET, topic);
        inv.arg(id.as_str()).arg(self.tick_batch);
        let reply = codec::array(self.conn.call(&inv, "reading a job").await?)?;
        if reply.is_empty() {
            return Ok(None);
        }
        Ok(Some(decode_job(topic, &mut reply.into_iter())?.0))
    }

    /// `Engine::delete`, its input already checked by `engine.rs`.
    pub(crate) async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        let mut inv = self.fcall(library::DELETE, topic);
        inv.arg(id.as_str());
        Ok(codec::int(&self.conn.call(&inv, "deleting a job").await?)? == 1)
    }

    /// `Engine::reschedule`, its input already checked by `engine.rs`.
    pub(crate) async fn reschedule(
        &self,
        topic: &Topic,
        id: &JobId,
        when: Schedule,
    ) -> Result<Timestamp> {
        let (kind, value) = schedule_args(when);
        let mut inv = self.fcall(library::RESCHEDULE, topic);
        inv.arg(id.as_str()).arg(kind).arg(value);
        let reply = codec::array(self.conn.call(&inv, "rescheduling a job").await?)?;
        let code = codec::int(reply.first().unwrap_or(&Value::Nil))?;
        match Status::from_code(code)? {
            Status::Ok => {
                let ready_at = codec::uint(reply.get(1).unwrap_or(&Value::Nil))?;
                let state = state_from_code(codec::int(reply.get(2).unwrap_or(&Value::Nil))?)?;
                self.waiters
                    .pushed(topic, ready_at, state == JobState::Ready);
                Ok(Timestamp::from_millis(ready_at))
            }
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_reschedule(
                topic,
                id,
                state_from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
            )),
            Status::InvalidDelay => {
                let at = match when {
                    Schedule::At(at) => at,
                    Schedule::Delay(_) => Timestamp::EPOCH,
                };
                Err(self.too_far(at).await)
            }
            other => Err(unexpected("reschedule", other)),
        }
    }

    /// `Engine::kick`, its input already checked by `engine.rs`.
    pub(crate) async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        let mut inv = self.fcall(library::KICK, topic);
        inv.arg(id.as_str()).arg(1);
        let reply = codec::array(self.conn.call(&inv, "kicking a job").await?)?;
        match Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)? {
            Status::Ok => {
                self.waiters.pushed(topic, 0, true);
                Ok(())
            }
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_kick(
                topic,
                id,
                state_from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
            )),
            other => Err(unexpected("kick", other)),
        }
    }

    /// `Engine::bury_waiting`, its input already checked by `engine.rs`.
    pub(crate) async fn bury_waiting(
        &self,
        topic: &Topic,
        id: &JobId,
        reason: Option<String>,
    ) -> Result<()> {
        let mut inv = self.fcall(library::BURY_WAITING, topic);
        inv.arg(id.as_str()).arg(reason.unwrap_or_default());
        let reply = codec::array(self.conn.call(&inv, "burying a job").await?)?;
        match Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)? {
            Status::Ok => Ok(()),
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_bury_waiting(
                topic,
                id,
                state_from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
            )),
            other => Err(unexpected("bury_waiting", other)),
        }
    }

    /// `Engine::kick_all`, its input already checked by `engine.rs`.
    pub(crate) async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        let mut total = 0;
        // Bounded: each call kicks up to 1000; jobs that die meanwhile may be kicked too, but
        // the loop stops after as many rounds as the first count needs, plus one.
        let mut rounds_left: Option<u64> = None;
        loop {
            let mut inv = self.fcall(library::KICK, topic);
            inv.arg("").arg(1000);
            let reply = codec::array(self.conn.call(&inv, "kicking dead jobs").await?)?;
            let kicked = codec::uint(reply.get(1).unwrap_or(&Value::Nil))?;
            let left = codec::uint(reply.get(2).unwrap_or(&Value::Nil))?;
            total += kicked;
            let rounds = rounds_left.get_or_insert(left / 1000 + 1);
            if kicked > 0 {
                self.waiters.pushed(topic, 0, true);
            }
            if left == 0 || kicked == 0 || *rounds == 0 {
                return Ok(total);
            }
            *rounds -= 1;
        }
    }

    /// `Engine::list`, its input already checked by `engine.rs`.
    pub(crate) async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        let code = state_code(state);
        let (score, member) = match after {
            None => ("0".to_string(), String::new()),
            Some(c) => parse_cursor(&c.0, code)?,
        };
        let mut inv = self.fcall(library::LIST, topic);
        inv.arg(code)
            .arg(score)
            .arg(member)
            .arg(limit)
            .arg(self.tick_batch);
        let mut reply = codec::array(self.conn.call(&inv, "listing jobs").await?)?.into_iter();
        let mut head = || reply.next().unwrap_or(Value::Nil);
        let has_next = codec::int(&head())? == 1;
        let next_score = codec::string(head())?;
        let next_member = codec::string(head())?;
        let jobs = decode_jobs(topic, reply.collect())?
            .into_iter()
            .map(|(j, _)| j)
            .collect();
        Ok(Page {
            jobs,
            next: has_next.then(|| Cursor(format!("{code}:{next_score}:{next_member}"))),
        })
    }

    /// `Engine::stats`, its input already checked by `engine.rs`.
    pub(crate) async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        let mut inv = self.fcall(library::STATS, topic);
        inv.arg(self.tick_batch);
        let r = codec::array(self.conn.call(&inv, "reading stats").await?)?;
        if r.len() != 11 {
            return Err(Error::Internal("stats reply has the wrong length".into()));
        }
        let now = codec::uint(&r[0])?;
        Ok(TopicStats {
            delayed: codec::uint(&r[1])?,
            ready: codec::uint(&r[2])?,
            reserved: codec::uint(&r[3])?,
            dead: codec::uint(&r[4])?,
            done: codec::uint(&r[8])?,
            oldest_overdue: codec::opt_uint(&r[5])?
                .map(|due| Duration::from_millis(now.saturating_sub(due))),
            next_due: codec::opt_uint(&r[6])?.map(Timestamp::from_millis),
            expired_leases: codec::uint(&r[7])?,
            expired_jobs: codec::uint(&r[10])?,
            paused_until: codec::opt_uint(&r[9])?.map(Timestamp::from_millis),
        })
    }

    /// `Engine::pause` (`until` = `Timestamp::NEVER` for a pause until resumed; a time not
    /// after Redis's now ends the pause).
    pub(crate) async fn pause(&self, topic: &Topic, until: Timestamp) -> Result<()> {
        let mut inv = self.fcall(library::PAUSE, topic);
        inv.arg(until.as_millis());
        let r = codec::array(self.conn.call(&inv, "pausing a topic").await?)?;
        match Status::from_code(codec::int(r.first().unwrap_or(&Value::Nil))?)? {
            Status::Ok => Ok(()),
            Status::InvalidDelay => Err(Error::invalid(
                "until",
                "the pause would end more than 10 years from now; pause without an end instead",
            )),
            other => Err(unexpected("pause", other)),
        }
    }

    /// `Engine::topics`, its input already checked by `engine.rs`.
    pub(crate) async fn topics(&self) -> Result<Vec<Topic>> {
        let mut cmd = redis::cmd("SMEMBERS");
        cmd.arg(self.keys.registry());
        let names: Vec<String> = self.conn.query(&cmd, "listing topics").await?;
        let mut topics: Vec<Topic> = names
            .into_iter()
            .filter_map(|n| Topic::new(n).ok())
            .collect();
        topics.sort();
        Ok(topics)
    }

    /// `Engine::purge`, its input already checked by `engine.rs`: the function removes the
    /// jobs and raises the topic's purge count, then the topic leaves the registry.
    ///
    /// In that order, no push is left unlisted: a push after the function answers the new
    /// count, so its process registers the topic after its push (after the `SREM` or not: if
    /// before, the check below sees its jobs); a push before it had its jobs purged. The
    /// `SREM` and the check go in one pipeline, in that order, and only a topic that holds
    /// jobs again costs the third command.
    pub(crate) async fn purge(&self, topic: &Topic) -> Result<u64> {
        let inv = self.fcall(library::PURGE, topic);
        let n = codec::uint(&self.conn.call(&inv, "purging a topic").await?)?;
        self.registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(topic);
        let mut srem = redis::cmd("SREM");
        srem.arg(self.keys.registry()).arg(topic.as_str());
        let mut exists = redis::cmd("EXISTS");
        exists.arg(self.keys.jobs(topic));
        let replies = self
            .conn
            .pipeline(&[srem, exists], "removing a purged topic from the registry")
            .await?;
        if codec::int(replies.get(1).unwrap_or(&Value::Nil))? == 1 {
            let mut sadd = redis::cmd("SADD");
            sadd.arg(self.keys.registry()).arg(topic.as_str());
            let _: i64 = self.conn.write(&sadd, "registering a topic").await?;
        }
        Ok(n)
    }

    /// `Engine::now`, its input already checked by `engine.rs`.
    pub(crate) async fn now(&self) -> Result<Timestamp> {
        let (sec, usec): (u64, u64) = self
            .conn
            .query(&redis::cmd("TIME"), "reading the Redis clock")
            .await?;
        Ok(Timestamp::from_millis(sec * 1000 + usec / 1000))
    }
}

/// Splits a list cursor `<state>:<score>:<member>` made for the listing of `state`.
fn parse_cursor(cursor: &str, state: u8) -> Result<(String, String)> {
    let bad = |why: &str| Error::invalid("cursor", format!("{why}; start again without a cursor"));
    let (st, rest) = cursor
        .split_once(':')
        .ok_or_else(|| bad("it is not a cursor returned by list"))?;
    let (score, member) = rest
        .split_once(':')
        .filter(|(s, m)| !m.is_empty() && s.parse::<f64>().is_ok())
        .ok_or_else(|| bad("it is not a cursor returned by list"))?;
    if st.parse::<u8>().ok() != Some(state) {
        return Err(bad("it was returned by the listing of another state"));
    }
    Ok((score.to_string(), member.to_string()))
}
