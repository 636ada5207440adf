//! The operations on jobs and topics outside the hot path: get, delete, reschedule, kick,
//! bury without a lease, reserve by id (each on the partition of its job), list (one cursor over every
//! partition), stats, kick-all, pause and purge (over every partition), and Redis's clock.

use std::cmp::Ordering;
use std::time::Duration;

use delayq_core::{
    Cursor, Delivery, Error, Job, JobId, JobState, Lease, LeaseToken, Page, Result, Schedule,
    Timestamp, Topic, TopicStats,
};
use futures_util::future::join_all;
use redis::Value;

use super::push::schedule_args;
use super::{Ops, not_found, unexpected};
use crate::codec::{self, Status, decode_deliveries, decode_job};
use crate::conn::Among;
use crate::keys::Part;
use crate::library;

/// An answer that says the job is not in the partition asked.
fn not_there<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::NotFound { .. }))
}

impl Ops {
    /// `Engine::get`, its input already checked by `engine.rs`.
    pub(crate) async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        let part = self.part_of(topic, id).await?;
        let r = self.get_in(&part, id).await;
        if matches!(r, Ok(None))
            && let Some(part) = self.moved(topic, id, &part).await?
        {
            return self.get_in(&part, id).await;
        }
        r
    }

    async fn get_in(&self, part: &Part, id: &JobId) -> Result<Option<Job>> {
        let mut inv = self.fcall(library::GET, part);
        inv.arg(id.as_str()).arg(self.tick_batch);
        let reply = codec::array(self.conn.call(&inv, "reading a job").await?)?;
        if reply.is_empty() {
            return Ok(None);
        }
        Ok(Some(decode_job(part.topic(), &mut reply.into_iter())?.0))
    }

    /// `Engine::delete`, its input already checked by `engine.rs`.
    pub(crate) async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        let part = self.part_of(topic, id).await?;
        let r = self.delete_in(&part, id).await;
        if matches!(r, Ok(false))
            && let Some(part) = self.moved(topic, id, &part).await?
        {
            return self.delete_in(&part, id).await;
        }
        r
    }

    async fn delete_in(&self, part: &Part, id: &JobId) -> Result<bool> {
        let mut inv = self.fcall(library::DELETE, part);
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
        let part = self.part_of(topic, id).await?;
        let r = self.reschedule_in(&part, id, when).await;
        if not_there(&r)
            && let Some(part) = self.moved(topic, id, &part).await?
        {
            return self.reschedule_in(&part, id, when).await;
        }
        r
    }

    /// [`Ops::reschedule`] in the partition `part`.
    async fn reschedule_in(&self, part: &Part, id: &JobId, when: Schedule) -> Result<Timestamp> {
        let topic = part.topic();
        let (kind, value) = schedule_args(when);
        let mut inv = self.fcall(library::RESCHEDULE, part);
        inv.arg(id.as_str()).arg(kind).arg(value);
        let reply = codec::array(self.conn.call(&inv, "rescheduling a job").await?)?;
        let code = codec::int(reply.first().unwrap_or(&Value::Nil))?;
        match Status::from_code(code)? {
            Status::Ok => {
                let ready_at = codec::uint(reply.get(1).unwrap_or(&Value::Nil))?;
                let state = JobState::from_code(codec::int(reply.get(2).unwrap_or(&Value::Nil))?)?;
                self.waiters
                    .pushed(part, ready_at, state == JobState::Ready);
                Ok(Timestamp::from_millis(ready_at))
            }
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_reschedule(
                topic,
                id,
                JobState::from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
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
        let part = self.part_of(topic, id).await?;
        let r = self.kick_in(&part, id).await;
        if not_there(&r)
            && let Some(part) = self.moved(topic, id, &part).await?
        {
            return self.kick_in(&part, id).await;
        }
        r
    }

    async fn kick_in(&self, part: &Part, id: &JobId) -> Result<()> {
        let topic = part.topic();
        let mut inv = self.fcall(library::KICK, part);
        inv.arg(id.as_str()).arg(1);
        let reply = codec::array(self.conn.call(&inv, "kicking a job").await?)?;
        match Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)? {
            Status::Ok => {
                self.waiters.pushed(part, 0, true);
                Ok(())
            }
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_kick(
                topic,
                id,
                JobState::from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
            )),
            other => Err(unexpected("kick", other)),
        }
    }

    /// `Engine::reserve_job`, its input already checked by `engine.rs`.
    pub(crate) async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery> {
        let part = self.part_of(topic, id).await?;
        let r = self.reserve_job_in(&part, id).await;
        if not_there(&r)
            && let Some(part) = self.moved(topic, id, &part).await?
        {
            return self.reserve_job_in(&part, id).await;
        }
        r
    }

    async fn reserve_job_in(&self, part: &Part, id: &JobId) -> Result<Delivery> {
        let topic = part.topic();
        let mut inv = self.fcall(library::RESERVE_JOB, part);
        inv.arg(id.as_str()).arg(self.tick_batch);
        let mut reply =
            codec::array(self.conn.call(&inv, "reserving a job by its id").await?)?.into_iter();
        let status = codec::int(&reply.next().unwrap_or(Value::Nil))?;
        match Status::from_code(status)? {
            Status::Ok => {
                let now_us = codec::uint(&reply.next().unwrap_or(Value::Nil))?;
                let token = reply.next().unwrap_or(Value::Nil);
                let rec = reply.next().unwrap_or(Value::Nil);
                let (job, token) = decode_deliveries(
                    topic,
                    now_us / 1000,
                    true,
                    vec![Value::BulkString(id.as_str().into()), token, rec],
                )?
                .into_iter()
                .next()
                .ok_or_else(|| Error::Internal("reserve_job answered no job".into()))?;
                let lateness =
                    Duration::from_micros(now_us.saturating_sub(job.ready_at.as_millis() * 1000));
                Ok(Delivery {
                    lease: Some(Lease {
                        topic: topic.clone(),
                        id: id.clone(),
                        token: LeaseToken(token),
                    }),
                    job,
                    lateness,
                })
            }
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_reserve_job(
                topic,
                id,
                JobState::from_code(codec::int(&reply.next().unwrap_or(Value::Nil))?)?,
            )),
            other => Err(unexpected("reserve_job", other)),
        }
    }

    /// `Engine::bury_waiting`, its input already checked by `engine.rs`.
    pub(crate) async fn bury_waiting(
        &self,
        topic: &Topic,
        id: &JobId,
        reason: Option<String>,
    ) -> Result<()> {
        let reason = reason.unwrap_or_default();
        let part = self.part_of(topic, id).await?;
        let r = self.bury_waiting_in(&part, id, &reason).await;
        if not_there(&r)
            && let Some(part) = self.moved(topic, id, &part).await?
        {
            return self.bury_waiting_in(&part, id, &reason).await;
        }
        r
    }

    async fn bury_waiting_in(&self, part: &Part, id: &JobId, reason: &str) -> Result<()> {
        let topic = part.topic();
        let mut inv = self.fcall(library::BURY_WAITING, part);
        inv.arg(id.as_str()).arg(reason);
        let reply = codec::array(self.conn.call(&inv, "burying a job").await?)?;
        match Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)? {
            Status::Ok => Ok(()),
            Status::NotFound => Err(not_found(topic, id)),
            Status::WrongState => Err(Error::cannot_bury_waiting(
                topic,
                id,
                JobState::from_code(codec::int(reply.get(1).unwrap_or(&Value::Nil))?)?,
            )),
            other => Err(unexpected("bury_waiting", other)),
        }
    }

    /// `Engine::kick_all`, its input already checked by `engine.rs`.
    pub(crate) async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        let mut total = 0;
        for part in self.read_parts(topic).await?.iter() {
            total += self.kick_all_in(part).await?;
        }
        Ok(total)
    }

    /// [`Ops::kick_all`] in the partition `part`.
    async fn kick_all_in(&self, part: &Part) -> Result<u64> {
        let mut total = 0;
        // Bounded: each call kicks up to 1000; jobs that die meanwhile may be kicked too, but
        // the loop stops after as many rounds as the first count needs, plus one.
        let mut rounds_left: Option<u64> = None;
        loop {
            let mut inv = self.fcall(library::KICK, part);
            inv.arg("").arg(1000);
            let reply = codec::array(self.conn.call(&inv, "kicking dead jobs").await?)?;
            let kicked = codec::uint(reply.get(1).unwrap_or(&Value::Nil))?;
            let left = codec::uint(reply.get(2).unwrap_or(&Value::Nil))?;
            total += kicked;
            let rounds = rounds_left.get_or_insert(left / 1000 + 1);
            if kicked > 0 {
                self.waiters.pushed(part, 0, true);
            }
            if left == 0 || kicked == 0 || *rounds == 0 {
                return Ok(total);
            }
            *rounds -= 1;
        }
    }

    /// `Engine::list`, its input already checked by `engine.rs`. Every partition lists its
    /// page after the cursor (one pipeline); the pages are merged in the sets' order (score,
    /// then member bytewise), so one cursor walks the whole topic.
    pub(crate) async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        let code = state.code();
        let (score, member) = match after {
            None => ("0".to_string(), String::new()),
            Some(c) => parse_cursor(&c.0, code)?,
        };
        let (_, replies) = self
            .on_every_part(topic, (library::LIST, "listing jobs"), |inv| {
                inv.arg(code)
                    .arg(&score)
                    .arg(&member)
                    .arg(limit)
                    .arg(self.tick_batch);
            })
            .await?;
        let mut more: Vec<Position> = Vec::new();
        let mut listed: Vec<(Position, Job)> = Vec::new();
        for reply in replies {
            let mut reply = codec::array(reply)?.into_iter();
            let mut head = || reply.next().unwrap_or(Value::Nil);
            let has_next = codec::int(&head())? == 1;
            let next = Position::new(codec::string(head())?, codec::string(head())?)?;
            if has_next {
                more.push(next);
            }
            while let Some(score) = reply.next() {
                let member = codec::string(reply.next().unwrap_or(Value::Nil))?;
                let at = Position::new(codec::string(score)?, member)?;
                listed.push((at, decode_job(topic, &mut reply)?.0));
            }
        }
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        let cut = listed.len() > limit;
        listed.truncate(limit);
        // The page ends at its last job; with no job (every job of the pages left between
        // two calls), at the first position a partition would go on from.
        let next = match listed.last() {
            Some((at, _)) if cut || !more.is_empty() => Some(at.clone()),
            Some(_) => None,
            None => more.into_iter().min(),
        };
        Ok(Page {
            jobs: listed.into_iter().map(|(_, j)| j).collect(),
            next: next.map(|at| Cursor(format!("{code}:{}:{}", at.text, at.member))),
        })
    }

    /// `Engine::stats`, its input already checked by `engine.rs`: every partition's (one
    /// pipeline), added up.
    pub(crate) async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        let (_, replies) = self
            .on_every_part(topic, (library::STATS, "reading stats"), |inv| {
                inv.arg(self.tick_batch);
            })
            .await?;
        add_stats(replies)
    }

    /// `Engine::stats_each`. On one node, [`Ops::stats`] for each topic in turn. On a
    /// cluster, [`STATS_AT_ONCE`] topics at a time, each read as a reserve over
    /// several slots reads: its partition count bounded by the slot timeout (the count read
    /// before when its home slot does not answer), and every partition's stats waited for at
    /// most the slot timeout, a slot skipped while unreachable (`Conn::per_slot`); a topic
    /// any of whose partitions did not answer answers that slot's error.
    pub(crate) async fn stats_each(&self, topics: &[Topic]) -> Vec<Result<TopicStats>> {
        if !self.conn.is_cluster() {
            let mut out = Vec::with_capacity(topics.len());
            for t in topics {
                out.push(self.stats(t).await);
            }
            return out;
        }
        let mut out = Vec::with_capacity(topics.len());
        for some in topics.chunks(STATS_AT_ONCE) {
            out.extend(join_all(some.iter().map(|t| self.stats_bounded(t))).await);
        }
        out
    }

    /// One topic's stats on a cluster, for [`Ops::stats_each`].
    async fn stats_bounded(&self, topic: &Topic) -> Result<TopicStats> {
        const WHAT: &str = "reading stats";
        let Some(parts) = self.reserve_parts(topic, true).await? else {
            return Err(self.home_skipped(topic, WHAT));
        };
        let invs = self.every_part_calls(&parts, library::STATS, |inv| {
            inv.arg(self.tick_batch);
        });
        let mut replies: Vec<Value> = Vec::with_capacity(invs.len());
        for (_, answer) in self
            .conn
            .per_slot(&invs, WHAT, Among::MoreSlots { skip: true })
            .await
        {
            replies.extend(answer.replies()?);
        }
        add_stats(replies)
    }

    /// `Engine::pause` (`until` = `Timestamp::NEVER` for a pause until resumed; a time not
    /// after Redis's now ends the pause), on every partition (one pipeline); a pause in
    /// force then puts the topic among the paused ones (`ops::topics`).
    pub(crate) async fn pause(&self, topic: &Topic, until: Timestamp) -> Result<()> {
        let (_, replies) = self
            .on_every_part(topic, (library::PAUSE, "pausing a topic"), |inv| {
                inv.arg(until.as_millis());
            })
            .await?;
        let mut in_force = false;
        for r in replies {
            let r = codec::array(r)?;
            match Status::from_code(codec::int(r.first().unwrap_or(&Value::Nil))?)? {
                Status::Ok => in_force |= codec::int(r.get(1).unwrap_or(&Value::Nil))? > 0,
                Status::InvalidDelay => {
                    return Err(Error::invalid(
                        "until",
                        "the pause would end more than 10 years from now; pause without an end instead",
                    ));
                }
                other => return Err(unexpected("pause", other)),
            }
        }
        if in_force {
            self.mark_paused(topic).await?;
        }
        Ok(())
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
        let (parts, replies) = self
            .on_every_part(topic, (library::PURGE, "purging a topic"), |_| {})
            .await?;
        let mut n = 0;
        for reply in replies {
            n += codec::uint(&reply)?;
        }
        self.registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|part, _| part.topic() != topic);
        let mut cmds = vec![redis::cmd("SREM")];
        cmds[0].arg(self.keys.registry()).arg(topic.as_str());
        for part in parts.iter() {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(self.keys.jobs(part));
            cmds.push(exists);
        }
        let replies = self
            .conn
            .pipeline(&cmds, "removing a purged topic from the registry")
            .await?;
        let mut held = false;
        for r in replies.iter().skip(1) {
            held |= codec::int(r)? == 1;
        }
        if held {
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

/// A position in one of a topic's sorted sets: the score (as Redis wrote it, and as a
/// number) and the member, ordered as the sets order them (score, then member bytewise).
#[derive(Clone, Debug)]
struct Position {
    text: String,
    score: f64,
    member: String,
}

impl Position {
    fn new(text: String, member: String) -> Result<Self> {
        let score = if text.is_empty() {
            0.0
        } else {
            text.parse::<f64>()
                .map_err(|_| Error::Internal(format!("a list reply has the score {text:?}")))?
        };
        Ok(Position {
            text,
            score,
            member,
        })
    }
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| self.member.as_bytes().cmp(other.member.as_bytes()))
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Position {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Position {}

/// Decodes `stats.lua`'s reply (one partition's).
fn decode_stats(reply: Value) -> Result<TopicStats> {
    let r = codec::array(reply)?;
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

/// How many topics [`Ops::stats_each`] reads at once on a cluster: enough that a listing of
/// many topics is not one round trip per topic, few enough that it does not crowd the
/// primaries' other clients out.
const STATS_AT_ONCE: usize = 16;

/// The stats of a topic from its partitions' `stats` replies, added up.
fn add_stats(replies: Vec<Value>) -> Result<TopicStats> {
    let mut total = TopicStats::default();
    for reply in replies {
        let s = decode_stats(reply)?;
        total.delayed += s.delayed;
        total.ready += s.ready;
        total.reserved += s.reserved;
        total.dead += s.dead;
        total.done += s.done;
        total.expired_leases += s.expired_leases;
        total.expired_jobs += s.expired_jobs;
        total.oldest_overdue = total.oldest_overdue.max(s.oldest_overdue);
        total.next_due = match (total.next_due, s.next_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        total.paused_until = total.paused_until.max(s.paused_until);
    }
    Ok(total)
}
