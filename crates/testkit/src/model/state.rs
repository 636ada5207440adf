//! [`Model`]: the contract as a plain value. Every operation is a pure function of the model
//! and the engine time it runs at; nothing here reads a clock or does I/O.
//!
//! The rules are the ones `delayq_core::Engine` documents: a waiting job is ready from its
//! due time on; reserve takes the due jobs by (priority, due time, push order), counts an
//! attempt and leases each under a token; a lease is live while its token is the job's and
//! now is before its deadline; a failed delivery (nack, lease expiry) retries after its delay
//! or back-off, or goes dead when the attempts are used up; release gives the attempt back;
//! kick revives a dead job with its attempts reset.
//!
//! Tokens are the engine's choice: the contract ([`LeaseToken`]) promises only that the
//! tokens of a topic increase, each larger than every token handed out before in that topic
//! (in each partition; the model has none, topic settings are not modelled, so a topic is
//! one partition). So a reserve pass takes the tokens the engine chose
//! ([`Model::reserve_pass`]), refuses them when they break that order
//! ([`TokenOutOfOrder`]), and keeps them: every later operation with the lease (ack, nack,
//! touch, bury, release, settle, the refusal of a stale token) then answers exactly as the
//! engine must.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq_core::limits::{DEFAULT_MAX_ATTEMPTS, DEFAULT_TTR, delay_ms_ceil};
use delayq_core::{
    Bytes, DeliveryMode, Error, Job, JobId, JobState, Lease, LeaseToken, NackOutcome, NewJob,
    OnExpire, Pushed, Schedule, Settled, Timestamp, Topic, TopicStats,
};

/// Why the contract refuses a call, as comparable data (the variant of [`Error`] that an
/// engine must answer, with the fields the contract fixes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// [`Error::NotFound`].
    NotFound,
    /// [`Error::LeaseLost`].
    LeaseLost,
    /// [`Error::WrongState`]: the job's state and the refused operation.
    WrongState(JobState, &'static str),
    /// One of the input errors ([`Error::is_invalid_input`]), by its variant's name.
    Invalid(&'static str),
}

impl Refusal {
    /// The refusal an engine error stands for; `None` for an error the contract never gives
    /// to a valid call on a healthy engine (`Unavailable`, `Internal` ...).
    pub fn of(e: &Error) -> Option<Refusal> {
        Some(match e {
            Error::NotFound { .. } => Refusal::NotFound,
            Error::LeaseLost { .. } => Refusal::LeaseLost,
            Error::WrongState {
                state, operation, ..
            } => Refusal::WrongState(*state, operation),
            Error::InvalidTopic { .. } => Refusal::Invalid("InvalidTopic"),
            Error::InvalidId { .. } => Refusal::Invalid("InvalidId"),
            Error::InvalidDelay { .. } => Refusal::Invalid("InvalidDelay"),
            Error::InvalidTtr { .. } => Refusal::Invalid("InvalidTtr"),
            Error::InvalidArgument { .. } => Refusal::Invalid("InvalidArgument"),
            Error::BodyTooLarge { .. } => Refusal::Invalid("BodyTooLarge"),
            _ => return None,
        })
    }
}

/// A delivery as compared: the job, the lease, and the lateness in whole milliseconds (the
/// engines measure it in microseconds; the model knows the time to the millisecond).
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryView {
    /// The job as delivered.
    pub job: Job,
    /// Its lease (`None` at most once).
    pub lease: Option<Lease>,
    /// Engine time at the reserve minus the due time, in ms.
    pub lateness_ms: u64,
}

impl From<&delayq_core::Delivery> for DeliveryView {
    fn from(d: &delayq_core::Delivery) -> Self {
        DeliveryView {
            job: d.job.clone(),
            lease: d.lease.clone(),
            lateness_ms: u64::try_from(d.lateness.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// A reserve pass was given a token that is not larger than every token handed out before in
/// its topic: the engine broke the order the contract promises ([`LeaseToken`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenOutOfOrder {
    /// The topic of the lease.
    pub topic: Topic,
    /// The job the token was given for.
    pub id: JobId,
    /// The token given.
    pub token: LeaseToken,
    /// The largest token handed out before in the topic.
    pub last: LeaseToken,
}

/// Where a job is, as the model keeps it: waiting (delayed or ready: time decides), leased
/// under a token until a deadline, or dead since a time.
#[derive(Clone, Debug, PartialEq)]
enum Held {
    Waiting,
    Reserved { token: u64, deadline: Timestamp },
    Dead { at: Timestamp },
}

#[derive(Clone, Debug, PartialEq)]
struct ModelJob {
    body: Bytes,
    held: Held,
    priority: u32,
    ready_at: Timestamp,
    seq: u64,
    ttr: Duration,
    max_attempts: u32,
    backoff: delayq_core::Backoff,
    attempts: u32,
    created_at: Timestamp,
    last_error: Option<String>,
}

impl ModelJob {
    fn state(&self, now: Timestamp) -> JobState {
        match self.held {
            Held::Waiting if self.ready_at <= now => JobState::Ready,
            Held::Waiting => JobState::Delayed,
            Held::Reserved { .. } => JobState::Reserved,
            Held::Dead { .. } => JobState::Dead,
        }
    }

    fn view(&self, topic: &Topic, id: &JobId, now: Timestamp) -> Job {
        Job {
            topic: topic.clone(),
            id: id.clone(),
            body: self.body.clone(),
            state: self.state(now),
            priority: self.priority,
            ready_at: self.ready_at,
            ttr: self.ttr,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            attempts: self.attempts,
            created_at: self.created_at,
            deadline: match self.held {
                Held::Waiting => None,
                Held::Reserved { deadline, .. } => Some(deadline),
                Held::Dead { at } => Some(at),
            },
            last_error: self.last_error.clone(),
            expires_at: None,
            on_expire: OnExpire::Dead,
        }
    }

    /// A delivery failed at `now`: dead when every attempt is used, else waiting again after
    /// `delay` or the back-off, counted from `now` rounded up to the millisecond when `up`
    /// ([`Model::set_past_start_of_ms`]). Answers the new due time, `None` when dead.
    fn fail(
        &mut self,
        now: Timestamp,
        up: bool,
        delay: Option<Duration>,
        reason: Option<&str>,
    ) -> Option<Timestamp> {
        self.last_error = reason.filter(|r| !r.is_empty()).map(str::to_string);
        if self.attempts >= self.max_attempts {
            self.held = Held::Dead { at: now };
            return None;
        }
        let delay = delay.unwrap_or_else(|| self.backoff.delay(self.attempts, 0.0));
        self.ready_at = due(Schedule::Delay(delay), now, up);
        self.held = Held::Waiting;
        Some(self.ready_at)
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
struct TopicModel {
    jobs: BTreeMap<JobId, ModelJob>,
    /// The topic's counter of push order.
    seq: u64,
    /// The largest lease token handed out in the topic (0 before the first): every new one
    /// must be larger.
    last_token: u64,
    expired_leases: u64,
    /// On the topic list ([`delayq_core::Engine::topics`]).
    listed: bool,
}

/// The reference model of the contract: every topic's jobs and counters in `BTreeMap`s.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Model {
    topics: BTreeMap<Topic, TopicModel>,
    /// Whether the operation being applied ran after the start of its millisecond `now`
    /// ([`Model::set_past_start_of_ms`]).
    past_start_of_ms: bool,
}

/// The due time of `schedule` at `now`: the delay rounded up to the millisecond after now,
/// and now rounded up to the millisecond first when `up` (the operation ran after the start
/// of the millisecond `now`: an engine reads its clock in µs, and a delay never counts from
/// before that reading; see issue 36); a delay of 0 is due at `now`. Or the absolute time
/// but never before now.
fn due(schedule: Schedule, now: Timestamp, up: bool) -> Timestamp {
    match schedule {
        Schedule::Delay(d) if d.is_zero() => now,
        Schedule::Delay(d) => Timestamp::from_millis(
            now.as_millis()
                .saturating_add(u64::from(up))
                .saturating_add(delay_ms_ceil(d)),
        ),
        Schedule::At(at) => at.max(now),
    }
}

impl Model {
    /// Says whether the operations applied from now on ran after the start of their
    /// millisecond (their `now`), so that a delay counts from the next millisecond, as an
    /// engine that read its clock in µs rounds it up (issue 36); `false` (the default): at
    /// its start, where the delay counts from `now` exactly. The runner tries both.
    pub fn set_past_start_of_ms(&mut self, up: bool) {
        self.past_start_of_ms = up;
    }

    fn job(&self, topic: &Topic, id: &JobId) -> Option<&ModelJob> {
        self.topics.get(topic).and_then(|t| t.jobs.get(id))
    }

    fn job_mut(&mut self, topic: &Topic, id: &JobId) -> Option<&mut ModelJob> {
        self.topics.get_mut(topic).and_then(|t| t.jobs.get_mut(id))
    }

    /// Pushes one valid job at `now` (idempotent on its id; only [`delayq_core::OnConflict::Keep`]
    /// and no expiry are modelled).
    pub fn push(&mut self, job: &NewJob, now: Timestamp) -> Pushed {
        let t = self.topics.entry(job.topic.clone()).or_default();
        if let Some(j) = t.jobs.get(&job.id) {
            return Pushed {
                id: job.id.clone(),
                created: false,
                replaced: false,
                state: j.state(now),
                ready_at: j.ready_at,
            };
        }
        t.seq += 1;
        t.listed = true;
        let j = ModelJob {
            body: job.body.clone(),
            held: Held::Waiting,
            priority: job.priority,
            ready_at: due(job.schedule, now, self.past_start_of_ms),
            seq: t.seq,
            ttr: job.ttr.unwrap_or(DEFAULT_TTR),
            max_attempts: job.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            backoff: job.backoff.unwrap_or_default(),
            attempts: 0,
            created_at: now,
            last_error: None,
        };
        let pushed = Pushed {
            id: job.id.clone(),
            created: true,
            replaced: false,
            state: j.state(now),
            ready_at: j.ready_at,
        };
        t.jobs.insert(job.id.clone(), j);
        pushed
    }

    /// Reads a job at `now`.
    pub fn get(&self, topic: &Topic, id: &JobId, now: Timestamp) -> Option<Job> {
        self.job(topic, id).map(|j| j.view(topic, id, now))
    }

    /// Deletes a job in any state.
    pub fn delete(&mut self, topic: &Topic, id: &JobId) -> bool {
        self.topics
            .get_mut(topic)
            .is_some_and(|t| t.jobs.remove(id).is_some())
    }

    /// Moves a waiting job's due time.
    pub fn reschedule(
        &mut self,
        topic: &Topic,
        id: &JobId,
        when: Schedule,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal> {
        let up = self.past_start_of_ms;
        let j = self.job_mut(topic, id).ok_or(Refusal::NotFound)?;
        if j.held != Held::Waiting {
            return Err(Refusal::WrongState(j.state(now), "reschedule"));
        }
        j.ready_at = due(when, now, up);
        Ok(j.ready_at)
    }

    /// One reserve pass over `topic` at `now`: up to `max` due jobs in the contract's order.
    /// At least once, the `k`-th job is leased under `tokens[k]` (the engine's choice), or,
    /// past the end of `tokens`, under the smallest token the contract allows (one above the
    /// last); refused when a token is not larger than every token handed out before in the
    /// topic.
    pub fn reserve_pass(
        &mut self,
        topic: &Topic,
        max: usize,
        mode: DeliveryMode,
        now: Timestamp,
        tokens: &[LeaseToken],
    ) -> Result<Vec<DeliveryView>, TokenOutOfOrder> {
        let Some(t) = self.topics.get_mut(topic) else {
            return Ok(Vec::new());
        };
        let mut tokens = tokens.iter();
        let mut due: Vec<(u32, Timestamp, u64, JobId)> = t
            .jobs
            .iter()
            .filter(|(_, j)| j.held == Held::Waiting && j.ready_at <= now)
            .map(|(id, j)| (j.priority, j.ready_at, j.seq, id.clone()))
            .collect();
        due.sort();
        due.truncate(max);
        let mut out = Vec::with_capacity(due.len());
        for (_, ready_at, _, id) in due {
            let lateness_ms = now.as_millis().saturating_sub(ready_at.as_millis());
            let lease = match mode {
                DeliveryMode::AtLeastOnce => {
                    let token = tokens.next().map_or(t.last_token + 1, |k| k.0);
                    if token <= t.last_token {
                        return Err(TokenOutOfOrder {
                            topic: topic.clone(),
                            id,
                            token: LeaseToken(token),
                            last: LeaseToken(t.last_token),
                        });
                    }
                    t.last_token = token;
                    Some(token)
                }
                DeliveryMode::AtMostOnce => None,
            };
            let Some(j) = t.jobs.get_mut(&id) else {
                continue;
            };
            j.attempts += 1;
            let view = match lease {
                Some(token) => {
                    j.held = Held::Reserved {
                        token,
                        deadline: now.plus(j.ttr),
                    };
                    j.view(topic, &id, now)
                }
                None => {
                    j.held = Held::Reserved {
                        token: 0,
                        deadline: now,
                    };
                    let mut v = j.view(topic, &id, now);
                    v.deadline = None;
                    t.jobs.remove(&id);
                    v
                }
            };
            out.push(DeliveryView {
                job: view,
                lease: lease.map(|token| Lease {
                    topic: topic.clone(),
                    id: id.clone(),
                    token: LeaseToken(token),
                }),
                lateness_ms,
            });
        }
        Ok(out)
    }

    /// Why `lease` is not live at `now`, or the job when it is.
    fn leased(
        &mut self,
        lease: &Lease,
        now: Timestamp,
        op: &'static str,
    ) -> Result<&mut ModelJob, Refusal> {
        let j = self
            .job_mut(&lease.topic, &lease.id)
            .ok_or(Refusal::NotFound)?;
        match j.held {
            Held::Reserved { token, deadline } if token == lease.token.0 && deadline > now => Ok(j),
            Held::Reserved { .. } => Err(Refusal::LeaseLost),
            _ if j.attempts > 0 => Err(Refusal::LeaseLost),
            _ => Err(Refusal::WrongState(j.state(now), op)),
        }
    }

    /// Acknowledges a delivery: the job is removed.
    pub fn ack(&mut self, lease: &Lease, now: Timestamp) -> Result<(), Refusal> {
        self.leased(lease, now, "ack")?;
        self.delete(&lease.topic, &lease.id);
        Ok(())
    }

    /// Fails a delivery.
    pub fn nack(
        &mut self,
        lease: &Lease,
        delay: Option<Duration>,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<NackOutcome, Refusal> {
        let delay = delay.map(|d| Duration::from_millis(delay_ms_ceil(d)));
        let up = self.past_start_of_ms;
        let j = self.leased(lease, now, "nack")?;
        Ok(match j.fail(now, up, delay, reason) {
            Some(ready_at) => NackOutcome::Retry { ready_at },
            None => NackOutcome::Dead,
        })
    }

    /// Gives a delivery back, the attempt not counted.
    pub fn release(&mut self, lease: &Lease, now: Timestamp) -> Result<(), Refusal> {
        let j = self.leased(lease, now, "release")?;
        j.held = Held::Waiting;
        j.attempts -= 1;
        Ok(())
    }

    /// Extends a lease to now + `ttr` (or the job's).
    pub fn touch(
        &mut self,
        lease: &Lease,
        ttr: Option<Duration>,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal> {
        let j = self.leased(lease, now, "touch")?;
        let deadline = now.plus(ttr.unwrap_or(j.ttr));
        if let Held::Reserved { token, .. } = j.held {
            j.held = Held::Reserved { token, deadline };
        }
        Ok(deadline)
    }

    /// Sends a reserved job to dead.
    pub fn bury(
        &mut self,
        lease: &Lease,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        let j = self.leased(lease, now, "bury")?;
        j.held = Held::Dead { at: now };
        j.last_error = reason.filter(|r| !r.is_empty()).map(str::to_string);
        Ok(())
    }

    /// One settlement of [`delayq_core::Engine::settle_and_reserve`].
    pub fn settle(&mut self, s: &delayq_core::Settle, now: Timestamp) -> Result<Settled, Refusal> {
        use delayq_core::Settle;
        match s {
            Settle::Ack(l) => self.ack(l, now).map(|()| Settled::Acked),
            Settle::Nack(l, n) => self
                .nack(l, n.delay, n.reason.as_deref(), now)
                .map(Settled::Nacked),
            Settle::Bury(l, r) => self.bury(l, r.as_deref(), now).map(|()| Settled::Buried),
            Settle::Release(l) => self.release(l, now).map(|()| Settled::Released),
        }
    }

    /// Makes a dead job ready now, its attempts reset.
    pub fn kick(&mut self, topic: &Topic, id: &JobId, now: Timestamp) -> Result<(), Refusal> {
        let j = self.job_mut(topic, id).ok_or(Refusal::NotFound)?;
        if !matches!(j.held, Held::Dead { .. }) {
            return Err(Refusal::WrongState(j.state(now), "kick"));
        }
        j.held = Held::Waiting;
        j.attempts = 0;
        j.ready_at = now;
        Ok(())
    }

    /// Kicks every dead job of a topic.
    pub fn kick_all(&mut self, topic: &Topic, now: Timestamp) -> u64 {
        let Some(t) = self.topics.get_mut(topic) else {
            return 0;
        };
        let mut n = 0;
        for j in t.jobs.values_mut() {
            if matches!(j.held, Held::Dead { .. }) {
                j.held = Held::Waiting;
                j.attempts = 0;
                j.ready_at = now;
                n += 1;
            }
        }
        n
    }

    /// Removes every job of a topic; its counter and last token stay, its expired-lease count
    /// restarts, it leaves the topic list.
    pub fn purge(&mut self, topic: &Topic) -> u64 {
        let Some(t) = self.topics.get_mut(topic) else {
            return 0;
        };
        let n = t.jobs.len() as u64;
        t.jobs.clear();
        t.expired_leases = 0;
        t.listed = false;
        n
    }

    /// Counts per state at `now`.
    pub fn stats(&self, topic: &Topic, now: Timestamp) -> TopicStats {
        let mut s = TopicStats::default();
        let Some(t) = self.topics.get(topic) else {
            return s;
        };
        let mut oldest: Option<Timestamp> = None;
        for j in t.jobs.values() {
            match j.state(now) {
                JobState::Delayed => {
                    s.delayed += 1;
                    s.next_due = Some(s.next_due.map_or(j.ready_at, |n| n.min(j.ready_at)));
                }
                JobState::Ready => {
                    s.ready += 1;
                    oldest = Some(oldest.map_or(j.ready_at, |o| o.min(j.ready_at)));
                }
                JobState::Reserved => s.reserved += 1,
                JobState::Dead => s.dead += 1,
                JobState::Done => s.done += 1,
            }
        }
        s.oldest_overdue = oldest.map(|o| now.since(o));
        s.expired_leases = t.expired_leases;
        s
    }

    /// The first `limit` jobs in `state` at `now`, in the state's order, and whether more
    /// follow.
    pub fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        now: Timestamp,
    ) -> (Vec<Job>, bool) {
        let Some(t) = self.topics.get(topic) else {
            return (Vec::new(), false);
        };
        let mut keyed: Vec<((u64, u64, u64), &JobId, &ModelJob)> = t
            .jobs
            .iter()
            .filter(|(_, j)| j.state(now) == state)
            .map(|(id, j)| {
                let key = match (state, &j.held) {
                    (JobState::Ready, _) => (u64::from(j.priority), j.ready_at.as_millis(), j.seq),
                    (_, Held::Reserved { deadline, .. }) => (deadline.as_millis(), 0, 0),
                    (_, Held::Dead { at }) => (at.as_millis(), 0, 0),
                    _ => (j.ready_at.as_millis(), 0, 0),
                };
                (key, id, j)
            })
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        let more = keyed.len() > limit;
        let jobs = keyed
            .into_iter()
            .take(limit)
            .map(|(_, id, j)| j.view(topic, id, now))
            .collect();
        (jobs, more)
    }

    /// The topics on the topic list, sorted.
    pub fn topic_list(&self) -> Vec<Topic> {
        self.topics
            .iter()
            .filter(|(_, t)| t.listed)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The leases whose deadline is at or before `until`: (topic, id, deadline).
    pub fn leases_due(&self, until: Timestamp) -> Vec<(Topic, JobId, Timestamp)> {
        let mut out = Vec::new();
        for (name, t) in &self.topics {
            for (id, j) in &t.jobs {
                if let Held::Reserved { deadline, .. } = j.held
                    && deadline <= until
                {
                    out.push((name.clone(), id.clone(), deadline));
                }
            }
        }
        out
    }

    /// The engine noticed at `at` that the lease of `(topic, id)` ran out: the delivery fails
    /// with "lease expired" and the topic counts it. Nothing happens when the job has no
    /// lease that ran out by `at`.
    pub fn expire_lease(&mut self, topic: &Topic, id: &JobId, at: Timestamp) {
        let Some(t) = self.topics.get_mut(topic) else {
            return;
        };
        let Some(j) = t.jobs.get_mut(id) else {
            return;
        };
        if matches!(j.held, Held::Reserved { deadline, .. } if deadline <= at) {
            j.fail(at, self.past_start_of_ms, None, Some("lease expired"));
            t.expired_leases += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::{JobSpec, id, topic};

    fn lease_of(d: &DeliveryView) -> Lease {
        d.lease.clone().expect("at least once")
    }

    /// A pass keeps the engine's tokens, gaps and all; a token not above every earlier one of
    /// the topic is refused; the other topic has an order of its own; an old token is stale.
    #[test]
    fn tokens_are_the_engines_in_the_contracts_order() {
        let mut m = Model::default();
        let at = Timestamp::from_millis(1_000);
        let spec = |t, i| JobSpec {
            topic: t,
            id: i,
            delay_ms: 0,
            priority: 0,
            max_attempts: 3,
            bad_ttr: false,
        };
        for (t, i) in [(0, 0), (0, 1), (1, 0)] {
            m.push(&spec(t, i).new_job(), at);
        }
        let (t0, t1) = (topic(0), topic(1));
        let once = DeliveryMode::AtLeastOnce;
        let got = m.reserve_pass(&t0, 2, once, at, &[LeaseToken(7), LeaseToken(40)]);
        let got = got.expect("increasing tokens");
        let first = lease_of(&got[0]);
        assert_eq!(
            (first.token, lease_of(&got[1]).token),
            (LeaseToken(7), LeaseToken(40))
        );
        assert_eq!(m.release(&first, at), Ok(()));

        let mut again = m.clone();
        let refused = again.reserve_pass(&t0, 1, once, at, &[LeaseToken(40)]);
        assert_eq!(
            refused,
            Err(TokenOutOfOrder {
                topic: t0.clone(),
                id: id(0),
                token: LeaseToken(40),
                last: LeaseToken(40),
            })
        );
        let mut smallest = m.clone();
        let got = smallest
            .reserve_pass(&t0, 1, once, at, &[])
            .expect("default");
        assert_eq!(lease_of(&got[0]).token, LeaseToken(41));

        let other = m.reserve_pass(&t1, 1, once, at, &[LeaseToken(1)]);
        assert_eq!(lease_of(&other.expect("own order")[0]).token, LeaseToken(1));
        let got = m.reserve_pass(&t0, 1, once, at, &[LeaseToken(41)]);
        let second = lease_of(&got.expect("above 40")[0]);
        assert_eq!(m.ack(&first, at), Err(Refusal::LeaseLost));
        assert_eq!(m.ack(&second, at), Ok(()));
    }
}
