//! Push: jobs routed to their partitions (by a hash of the id), grouped by partition and cut
//! into bounded `push` calls, sent in one pipeline (one per slot on a cluster, so that a
//! dead primary fails only its own jobs); the topic registry.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use delayq_core::limits::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_TTR, MAX_DELAY, at_too_far, delay_ms_ceil,
};
use delayq_core::{
    Backoff, Error, Expiry, JobState, NewJob, OnConflict, OnExpire, Pushed, Result, Schedule,
    Timestamp, Topic, TopicConfig, duration_ms, expiry_before_due,
};
use redis::{Cmd, Value};

use super::config::{backoff_args, decode_config_at, opt_arg};
use super::{Ops, route, unexpected};
use crate::codec::{self, Status};
use crate::conn::Among;
use crate::keys::Part;
use crate::library;

/// Jobs per push call: bounds the size of one call's work and arguments.
const PUSH_CHUNK: usize = 100;
/// Bytes of bodies per push call.
const PUSH_CHUNK_BYTES: usize = 4 << 20;
/// How often a push routes again after a partition answered another partition count, and
/// the pause between tries while a change of the count is under way: a change takes a few
/// round trips, so this waits about two seconds before it answers `unavailable`.
const REROUTES: u32 = 80;
const REROUTE_PAUSE: Duration = Duration::from_millis(25);
/// How often a registration the registry's primary did not answer is sent again, and for
/// how long (`Ops::register`).
const REGISTER_PAUSE: Duration = Duration::from_millis(500);
const REGISTER_FOR: Duration = Duration::from_secs(300);

/// The (kind, value) pair the functions take for a schedule.
pub(crate) fn schedule_args(s: Schedule) -> (u8, u64) {
    match s {
        Schedule::Delay(d) => (0, delay_ms_ceil(d)),
        Schedule::At(at) => (1, at.as_millis()),
    }
}

/// The error of a push whose jobs were stored but whose topic could not be put in the
/// registry. A Redis that reached `maxmemory` with the push itself refuses the `SADD` that
/// follows (`OOM`): answering [`Error::Full`] would say that nothing was written, so it is
/// [`Error::Unavailable`], whose retry (idempotent) registers the topic.
fn stored_but_unlisted(e: Error) -> Error {
    match e {
        Error::Full { message, source } => Error::Unavailable {
            message: format!(
                "the jobs were stored, but their topic could not be added to the topic registry ({message}); free memory, then retry the push (it is idempotent) so that the topic is listed"
            ),
            source,
        },
        e => e,
    }
}

/// The one `when` argument push takes for a schedule: a delay in ms (>= 0), or an absolute
/// due time `at` as `-1 - at` ms, so that a job costs one argument for it.
fn when_arg(s: Schedule) -> i64 {
    match s {
        Schedule::Delay(d) => i64::try_from(delay_ms_ceil(d)).unwrap_or(i64::MAX),
        Schedule::At(at) => -1 - i64::try_from(at.as_millis()).unwrap_or(i64::MAX - 1),
    }
}

/// A job's own settings as push's ten settings arguments (ttr, max attempts, the back-off's
/// four, on conflict, the debounce's max wait, the expiry, on expire), or `None` when it
/// leaves them all to the topic, keeps an existing job and has no expiry.
fn own_settings(j: &NewJob) -> Option<[String; 10]> {
    if j.ttr.is_none()
        && j.max_attempts.is_none()
        && j.backoff.is_none()
        && j.on_conflict == OnConflict::Keep
        && j.expiry.is_none()
    {
        return None;
    }
    let [a, b, c, d] = backoff_args(j.backoff.as_ref());
    let (conflict, max_wait) = match j.on_conflict {
        OnConflict::Keep => (0, None),
        OnConflict::Replace => (1, None),
        OnConflict::Debounce { max_wait } => (2, max_wait.map(delay_ms_ceil)),
    };
    Some([
        opt_arg(j.ttr.map(duration_ms)),
        opt_arg(j.max_attempts.map(u64::from)),
        a,
        b,
        c,
        d,
        conflict.to_string(),
        opt_arg(max_wait),
        j.expiry.map(expiry_arg).unwrap_or_default(),
        u8::from(j.on_expire == OnExpire::Drop).to_string(),
    ])
}

/// The expiry argument of push: a max lateness in ms (>= 0), or an absolute expiry `at` as
/// `-1 - at` ms (as [`when_arg`] does for due times).
fn expiry_arg(e: Expiry) -> String {
    match e {
        Expiry::AfterDue(d) => delay_ms_ceil(d).to_string(),
        Expiry::At(at) => (-1 - i64::try_from(at.as_millis()).unwrap_or(i64::MAX - 1)).to_string(),
    }
}

impl Ops {
    /// One `push` call for `jobs` of partition `part` of a topic of `count` partitions: the
    /// built-in defaults, the distinct settings the jobs carry (each sent once), five
    /// arguments per job, then the count the jobs were routed by.
    fn push_invocation<'a>(
        &self,
        (part, count): (&Part, usize),
        jobs: impl Iterator<Item = &'a NewJob>,
    ) -> Cmd {
        let jobs: Vec<&NewJob> = jobs.collect();
        let mut distinct: Vec<[String; 10]> = Vec::new();
        let refs: Vec<usize> = jobs
            .iter()
            .map(|j| match own_settings(j) {
                None => 0,
                Some(s) => match distinct.iter().position(|d| *d == s) {
                    Some(k) => k + 1,
                    None => {
                        distinct.push(s);
                        distinct.len()
                    }
                },
            })
            .collect();
        let mut inv = self.fcall(library::PUSH, part);
        inv.arg(jobs.len())
            .arg(duration_ms(DEFAULT_TTR))
            .arg(DEFAULT_MAX_ATTEMPTS);
        for part in backoff_args(Some(&Backoff::default())) {
            inv.arg(part);
        }
        inv.arg(distinct.len());
        for s in &distinct {
            for part in s {
                inv.arg(part);
            }
        }
        for (j, r) in jobs.iter().zip(refs) {
            inv.arg(j.id.as_str())
                .arg(j.body.as_ref())
                .arg(when_arg(j.schedule))
                .arg(j.priority)
                .arg(r);
        }
        inv.arg(count);
        inv
    }

    /// `Engine::push_batch`, its input already checked by `engine.rs`: [`Ops::push_each`],
    /// failing with the first job's error that was not stored.
    pub(crate) async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        self.push_each(jobs).await?.into_iter().collect()
    }

    /// `Engine::push_each`, its input already checked by `engine.rs`. A partition that
    /// answers another partition count than the one its jobs were routed by (the topic was
    /// emptied and given another count; or such a change is under way) stored none of them:
    /// they are routed again by the count it answered, with a pause while a change is under
    /// way. On a cluster, a slot that fails (or does not answer within the slot timeout, when
    /// the batch spans several slots) fails only its own jobs; when every job failed, the
    /// batch fails with the first one's error, as a batch on one node does.
    pub(crate) async fn push_each(&self, jobs: Vec<NewJob>) -> Result<Vec<Result<Pushed>>> {
        let mut answers: Vec<Option<Result<Pushed>>> = (0..jobs.len()).map(|_| None).collect();
        let mut purges: BTreeMap<Part, u64> = BTreeMap::new();
        let mut pending: Vec<usize> = (0..jobs.len()).collect();
        let mut checked = false;
        for _ in 0..REROUTES {
            let (again, changing) = self
                .push_round(&jobs, &pending, &mut checked, (&mut answers, &mut purges))
                .await?;
            pending = again;
            if pending.is_empty() {
                break;
            }
            if changing {
                tokio::time::sleep(REROUTE_PAUSE).await;
            }
        }
        for &i in &pending {
            answers[i] = Some(Err(Error::Unavailable {
                message: format!(
                    "the partition count of topic {} is being changed and the change did not finish; this job was not stored: retry the push (it is idempotent), or set the topic's partitions again",
                    jobs[i].topic
                ),
                source: None,
            }));
        }
        let answers: Vec<Result<Pushed>> = answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(Error::Internal("a pushed job got no answer".into()))))
            .collect();
        if answers.iter().all(Result::is_err) {
            if let Some(e) = answers.into_iter().find_map(Result::err) {
                return Err(e);
            }
            return Ok(Vec::new());
        }
        self.register(purges).await.map_err(stored_but_unlisted)?;
        Ok(answers)
    }

    /// The partitions of each topic of the jobs `pending`, for a round of a push. On a
    /// cluster, when the jobs name several topics, each count is read as a reserve over
    /// several topics reads it (`Ops::reserve_parts`: bounded by the slot timeout, or the
    /// count read before): a topic whose home slot does not answer gets the error its jobs
    /// answer. The count a push is routed by is checked by every push call, so one read
    /// before is safe.
    async fn push_layouts<'j>(
        &self,
        jobs: &'j [NewJob],
        pending: &[usize],
    ) -> Result<HashMap<&'j Topic, std::result::Result<Arc<[Part]>, Error>>> {
        let mut topics: Vec<&Topic> = pending.iter().map(|&i| &jobs[i].topic).collect();
        topics.sort();
        topics.dedup();
        let others = self.conn.is_cluster() && topics.len() > 1;
        let mut layouts = HashMap::new();
        for t in topics {
            let parts = if others {
                match self.reserve_parts(t, true).await {
                    Ok(Some(parts)) => Ok(parts),
                    Ok(None) => Err(self.home_skipped(t, "pushing")),
                    Err(e) => Err(e),
                }
            } else {
                Ok(self.parts(t).await?)
            };
            layouts.insert(t, parts);
        }
        Ok(layouts)
    }

    /// One round of a push: the jobs `pending` (positions in `jobs`) routed to their
    /// partitions and sent, each slot's calls in a pipeline of their own on a cluster
    /// (`Conn::per_slot`); their answers go to `answers` (a job whose slot failed answers
    /// that slot's error) and each partition's purge count to `purges`. Answers the jobs to
    /// route again (a partition answered another count) and whether a change of a count is
    /// under way.
    async fn push_round(
        &self,
        jobs: &[NewJob],
        pending: &[usize],
        checked: &mut bool,
        (answers, purges): (&mut [Option<Result<Pushed>>], &mut BTreeMap<Part, u64>),
    ) -> Result<(Vec<usize>, bool)> {
        // Route each job, then group by partition (keeping each job's index) and cut into
        // bounded function calls.
        let layouts = self.push_layouts(jobs, pending).await?;
        let mut by_part: BTreeMap<(Part, usize), Vec<usize>> = BTreeMap::new();
        for &i in pending {
            match &layouts[&jobs[i].topic] {
                Ok(parts) => by_part
                    .entry((route(parts, &jobs[i].id), parts.len()))
                    .or_default()
                    .push(i),
                Err(e) => answers[i] = Some(Err(e.copy_for_another())),
            }
        }
        let mut chunks: Vec<(&Part, usize, Vec<usize>)> = Vec::new();
        for ((part, count), idx) in &by_part {
            let mut cur: Vec<usize> = Vec::new();
            let mut bytes = 0;
            for &i in idx {
                let len = jobs[i].body.len();
                if !cur.is_empty() && (cur.len() == PUSH_CHUNK || bytes + len > PUSH_CHUNK_BYTES) {
                    chunks.push((part, *count, std::mem::take(&mut cur)));
                    bytes = 0;
                }
                cur.push(i);
                bytes += len;
            }
            chunks.push((part, *count, cur));
        }
        if chunks.len() > 1 && !*checked {
            let topics = chunks.iter().map(|(part, _, _)| part.topic());
            let unread = self.check_batch(jobs, topics).await?;
            *checked = true;
            // A topic whose settings did not come is not pushed: its slot failed.
            chunks.retain(|(part, _, idx)| match unread.get(part.topic()) {
                Some(e) => {
                    for &i in idx {
                        answers[i] = Some(Err(e.copy_for_another()));
                    }
                    false
                }
                None => true,
            });
        }

        let invs: Vec<Cmd> = chunks
            .iter()
            .map(|(part, count, idx)| {
                self.push_invocation((part, *count), idx.iter().map(|&i| &jobs[i]))
            })
            .collect();
        let (mut again, mut changing) = (Vec::new(), false);
        for (calls, answer) in self
            .conn
            .per_slot(&invs, "pushing", Among::TheseSlots)
            .await
        {
            let replies = match answer.replies() {
                Ok(replies) => replies,
                Err(e) => {
                    for &c in &calls {
                        for &i in &chunks[c].2 {
                            answers[i] = Some(Err(e.copy_for_another()));
                        }
                    }
                    continue;
                }
            };
            for (&c, reply) in calls.iter().zip(replies) {
                let (part, _, idx) = &chunks[c];
                if let Some(rerouted) = self
                    .push_reply(jobs, (part, idx), reply, answers, purges)
                    .await?
                {
                    changing |= rerouted;
                    again.extend(idx);
                }
            }
        }
        Ok((again, changing))
    }

    /// Reads one push call's `reply` for the jobs `idx` of partition `part`: their answers
    /// go to `answers` and the partition's purge count to `purges`. `Some(changing)` when
    /// the partition answered another partition count (the jobs were not stored; whether a
    /// change of the count is under way), for the caller to route them again.
    async fn push_reply(
        &self,
        jobs: &[NewJob],
        (part, idx): (&Part, &[usize]),
        reply: Value,
        answers: &mut [Option<Result<Pushed>>],
        purges: &mut BTreeMap<Part, u64>,
    ) -> Result<Option<bool>> {
        let reply = codec::array(reply)?;
        let status = Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)?;
        match status {
            Status::Ok => {}
            Status::WrongPartitions => {
                let count = codec::int(reply.get(1).unwrap_or(&Value::Nil))?;
                self.learn_count(part.topic(), count);
                return Ok(Some(count < 0));
            }
            Status::InvalidDelay => {
                let k = codec::uint(reply.get(1).unwrap_or(&Value::Nil))? as usize;
                let j = idx.get(k.saturating_sub(1)).map(|&i| &jobs[i]);
                let at = match j.map(|j| j.schedule) {
                    Some(Schedule::At(at)) => at,
                    _ => Timestamp::EPOCH,
                };
                return Err(self.too_far(at).await);
            }
            Status::InvalidExpiry => return Err(expiry_before_due()),
            Status::BodyTooLarge => {
                let k = codec::uint(reply.get(1).unwrap_or(&Value::Nil))? as usize;
                let limit = codec::uint(reply.get(2).unwrap_or(&Value::Nil))? as usize;
                let size = idx
                    .get(k.saturating_sub(1))
                    .map_or(0, |&i| jobs[i].body.len());
                return Err(Error::BodyTooLarge { size, limit });
            }
            other => return Err(unexpected("push", other)),
        }
        purges.insert(
            part.clone(),
            codec::uint(reply.get(1).unwrap_or(&Value::Nil))?,
        );
        let vals = reply.get(2..).unwrap_or_default();
        if vals.len() != idx.len() * 3 {
            return Err(Error::Internal("push reply has the wrong length".into()));
        }
        for (k, &i) in idx.iter().enumerate() {
            let state = JobState::from_code(codec::int(&vals[3 * k + 1])?)?;
            let ready_at = codec::uint(&vals[3 * k + 2])?;
            let code = codec::int(&vals[3 * k])?;
            let (created, replaced) = (code == 1, code == 2);
            if (created || replaced) && matches!(state, JobState::Ready | JobState::Delayed) {
                self.waiters
                    .pushed(part, ready_at, state == JobState::Ready);
            }
            answers[i] = Some(Ok(Pushed {
                id: jobs[i].id.clone(),
                created,
                replaced,
                state,
                ready_at: Timestamp::from_millis(ready_at),
            }));
        }
        Ok(None)
    }

    /// Puts topics in the registry that this process has not registered since their last
    /// purge: each push answers the topic's purge count, and the process remembers the count
    /// it registered each topic under, so a busy topic costs nothing here and a purge (by
    /// any process) costs each pushing process one `SADD`. Runs after the push succeeded, so
    /// a refused push never registers a topic; the registry key has no topic's hash tag, so
    /// no function may write it.
    ///
    /// On a cluster the `SADD` goes to whichever primary holds the registry: when that one
    /// does not answer within the slot timeout (or answers "unavailable"), the push is not
    /// held up by it (its jobs are stored, on their own primaries): the `SADD` goes on in a
    /// task of its own, sent again every [`REGISTER_PAUSE`] for up to [`REGISTER_FOR`], and
    /// the topic is listed once it lands (a later push of the topic tries again too).
    pub(crate) async fn register(&self, purges: BTreeMap<Part, u64>) -> Result<()> {
        const WHAT: &str = "registering a topic";
        let new: Vec<(Part, u64)> = {
            let known = self.registered.lock().unwrap_or_else(|e| e.into_inner());
            purges
                .into_iter()
                .filter(|(p, n)| known.get(p) != Some(n))
                .collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("SADD");
        cmd.arg(self.keys.registry());
        for (p, _) in &new {
            cmd.arg(p.topic().as_str());
        }
        if !self.conn.is_cluster() {
            let _: i64 = self.conn.write(&cmd, WHAT).await?;
        } else {
            let answer =
                tokio::time::timeout(self.conn.slot_timeout(), self.conn.write::<i64>(&cmd, WHAT))
                    .await;
            match answer {
                Ok(Ok(_)) => {}
                Ok(Err(e @ (Error::Unavailable { .. } | Error::NotReplicated { .. }))) => {
                    self.register_later(cmd, &new, &e.to_string());
                    return Ok(());
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    self.register_later(cmd, &new, "no answer within the slot timeout");
                    return Ok(());
                }
            }
        }
        self.registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(new);
        Ok(())
    }

    /// Sends the registry's `SADD` `cmd` again in a task of its own until it lands, for a
    /// cluster whose registry primary did not answer (`why`): every [`REGISTER_PAUSE`], for
    /// up to [`REGISTER_FOR`]; a task per topic set at a time.
    fn register_later(&self, cmd: Cmd, topics: &[(Part, u64)], why: &str) {
        let key = topics
            .iter()
            .map(|(p, _)| p.topic().as_str())
            .collect::<Vec<_>>()
            .join(" ");
        if !self
            .registering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone())
        {
            return;
        }
        tracing::warn!(topics = %key, reason = %why, "the topic registry's primary does not answer: the pushed jobs are stored, their topics are listed once it answers");
        let (conn, registering) = (self.conn.clone(), self.registering.clone());
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + REGISTER_FOR;
            loop {
                match conn.write::<i64>(&cmd, "registering a topic").await {
                    Ok(_) => {
                        tracing::info!(
                            "the topic registry's primary answers again: topics registered"
                        );
                        break;
                    }
                    Err(e) if tokio::time::Instant::now() >= until => {
                        tracing::warn!(error = %e, "gave up registering topics; the next push of each registers it");
                        break;
                    }
                    Err(_) => tokio::time::sleep(REGISTER_PAUSE).await,
                }
            }
            registering
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        });
    }

    /// Checks a batch that takes several calls before any call writes, so that it is
    /// refused whole rather than half written: absolute times against the clock of each
    /// topic's primary, bodies against their topics' limits, both read by one `config` call
    /// per topic (each slot's in a pipeline of its own on a cluster, `Conn::per_slot`). Each
    /// call checks its own jobs again, against the settings of that moment. Answers the
    /// topics whose settings did not come (their slot failed) with that error; when none
    /// came, the batch fails with it.
    pub(crate) async fn check_batch<'t>(
        &self,
        jobs: &[NewJob],
        topics: impl Iterator<Item = &'t Topic>,
    ) -> Result<HashMap<&'t Topic, Error>> {
        let mut topics: Vec<&Topic> = topics.collect();
        topics.sort();
        topics.dedup();
        let cmds: Vec<Cmd> = topics
            .iter()
            .map(|t| self.fcall(library::CONFIG, &Part::whole(t)))
            .collect();
        let mut configs: HashMap<&Topic, (TopicConfig, Timestamp)> = HashMap::new();
        let mut unread: HashMap<&Topic, Error> = HashMap::new();
        for (calls, answer) in self
            .conn
            .per_slot(&cmds, "checking a batch push", Among::TheseSlots)
            .await
        {
            match answer.replies() {
                Ok(replies) => {
                    for (&c, reply) in calls.iter().zip(replies) {
                        configs.insert(topics[c], decode_config_at(reply)?);
                    }
                }
                Err(e) => {
                    for &c in &calls {
                        unread.insert(topics[c], e.copy_for_another());
                    }
                    if configs.is_empty() && unread.len() == topics.len() {
                        return Err(e);
                    }
                }
            }
        }
        for j in jobs {
            let Some((c, now)) = configs.get(&j.topic) else {
                continue;
            };
            if let Schedule::At(at) = j.schedule
                && at > now.plus(MAX_DELAY)
            {
                return Err(at_too_far(at, *now));
            }
            j.check_expiry(*now)?;
            c.check_body(j, &self.limits)?;
        }
        Ok(unread)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn when_is_a_delay_or_an_absolute_time_below_minus_one() {
        assert_eq!(when_arg(Schedule::Delay(Duration::from_millis(1500))), 1500);
        assert_eq!(when_arg(Schedule::Delay(Duration::ZERO)), 0);
        assert_eq!(when_arg(Schedule::At(Timestamp::from_millis(0))), -1);
        assert_eq!(
            when_arg(Schedule::At(Timestamp::from_millis(1_700_000_000_000))),
            -1_700_000_000_001
        );
    }
}
