//! The [`Engine`] trait, the job contract that the Redis, the embedded and the PostgreSQL
//! engines implement and one conformance suite checks; beside it the capabilities an engine
//! may have ([`Schedules`], [`Destinations`], [`Numbers`]) and [`Store`], an engine with all
//! of them.
//!
//! The file is long because the trait is the contract: each operation with its documented
//! behaviour, the input checks every engine runs, and the forwarding implementation for
//! `Arc` (a worker holds its engine by value, and `Arc<dyn Store>` is one).

use std::time::Duration;

use async_trait::async_trait;

use crate::limits::MAX_BATCH;
use crate::limits::{MAX_RESERVE_TOPICS, MAX_WAIT, check_count, check_reason};
use crate::{Delivery, Error, Job, JobId, JobState, Lease, NackOutcome, NewJob, Pushed, Result};
use crate::{JobSchedule, Schedule, ScheduleName, Timestamp, Topic, TopicConfig};

/// How a reserve hands out jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeliveryMode {
    /// The job is leased for its ttr and comes back if not acked in time (the default).
    #[default]
    AtLeastOnce,
    /// The job is removed from the engine as it is handed out: no lease, no ack, no retry.
    /// A worker that crashes while handling it loses it. Only for those who ask for it.
    AtMostOnce,
}

/// A reserve request: up to `max` jobs from one or more topics, waiting up to `wait`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reserve {
    /// The topics to take from (1 to 64, no repeats). Each call starts with a different one,
    /// so that a busy topic does not starve the others.
    pub topics: Vec<Topic>,
    /// The most jobs to return (1 to 1000). A reserve returns as soon as it has at least one.
    pub max: usize,
    /// How long to wait for a first job (0 = do not wait, at most 1 h).
    pub wait: Duration,
    /// At-least-once (leases) or at-most-once (remove on reserve).
    pub mode: DeliveryMode,
}

impl Reserve {
    /// One job from one topic, without waiting, at-least-once.
    pub fn new(topic: Topic) -> Self {
        Reserve::topics([topic])
    }

    /// Takes from several topics (one job, no wait, at-least-once until set otherwise).
    pub fn topics(topics: impl IntoIterator<Item = Topic>) -> Self {
        Reserve {
            topics: topics.into_iter().collect(),
            max: 1,
            wait: Duration::ZERO,
            mode: DeliveryMode::AtLeastOnce,
        }
    }

    /// Sets the most jobs to return.
    pub fn max(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// Sets how long to wait for a first job.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Sets the delivery mode.
    pub fn mode(mut self, mode: DeliveryMode) -> Self {
        self.mode = mode;
        self
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if self.topics.is_empty() || self.topics.len() > MAX_RESERVE_TOPICS {
            return Err(Error::invalid(
                "topics",
                format!(
                    "a reserve takes 1 to {MAX_RESERVE_TOPICS} topics, not {}",
                    self.topics.len()
                ),
            ));
        }
        for (i, t) in self.topics.iter().enumerate() {
            if self.topics[..i].contains(t) {
                return Err(Error::invalid(
                    "topics",
                    format!("topic {t} is listed twice"),
                ));
            }
        }
        check_count("max", self.max)?;
        if self.wait > MAX_WAIT {
            return Err(Error::invalid(
                "wait",
                format!(
                    "{} ms is over the maximum of 1 h; call reserve again in a loop",
                    self.wait.as_millis()
                ),
            ));
        }
        Ok(())
    }
}

/// Options of a nack.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Nack {
    /// Retry after this delay instead of the job's back-off policy.
    pub delay: Option<Duration>,
    /// Why it failed; kept with the job (at most 4 KiB).
    pub reason: Option<String>,
}

impl Nack {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = self.delay {
            crate::limits::check_delay(d)?;
        }
        check_reason(self.reason.as_deref())
    }
}

/// Options of [`Engine::release_with`]: where the released job goes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Release {
    /// Due again after this delay (from now), instead of at its original due time.
    pub delay: Option<Duration>,
    /// The job's new priority, instead of the one it has.
    pub priority: Option<u32>,
}

impl Release {
    /// Checks the delay's range.
    pub fn validate(&self) -> Result<()> {
        match self.delay {
            Some(d) => crate::limits::check_delay(d),
            None => Ok(()),
        }
    }
}

/// Options of [`Engine::bury_with`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Bury {
    /// Why it is buried; kept with the job as its last error (at most 4 KiB).
    pub reason: Option<String>,
    /// The job's new priority (it keeps it when kicked), instead of the one it has.
    pub priority: Option<u32>,
}

/// What to do with one lease in [`Engine::settle_and_reserve`]: the outcomes a worker
/// reports when a delivery ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Settle {
    /// Done: as [`Engine::ack`].
    Ack(Lease),
    /// Failed: as [`Engine::nack`].
    Nack(Lease, Nack),
    /// Dead at once: as [`Engine::bury`], with an optional reason.
    Bury(Lease, Option<String>),
    /// Given back without counting: as [`Engine::release`].
    Release(Lease),
}

impl Settle {
    /// The lease this settles.
    pub fn lease(&self) -> &Lease {
        match self {
            Settle::Ack(l) | Settle::Nack(l, _) | Settle::Bury(l, _) | Settle::Release(l) => l,
        }
    }

    /// The operation's name, as errors name it: `ack`, `nack`, `bury` or `release`.
    pub fn operation(&self) -> &'static str {
        match self {
            Settle::Ack(_) => "ack",
            Settle::Nack(..) => "nack",
            Settle::Bury(..) => "bury",
            Settle::Release(_) => "release",
        }
    }

    /// Checks the arguments (a nack's delay and reason, a bury's reason).
    pub fn validate(&self) -> Result<()> {
        match self {
            Settle::Ack(_) | Settle::Release(_) => Ok(()),
            Settle::Nack(_, nack) => nack.validate(),
            Settle::Bury(_, reason) => check_reason(reason.as_deref()),
        }
    }
}

/// What one [`Settle`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// The job was acked and removed.
    Acked,
    /// The job was nacked: retried at a time, or dead.
    Nacked(NackOutcome),
    /// The job went dead.
    Buried,
    /// The job is ready again, the attempt not counted.
    Released,
}

/// The answer to [`Engine::settle_and_reserve`].
#[derive(Debug)]
pub struct SettledAndReserved {
    /// One answer per settlement, in order: [`Error::LeaseLost`] for a stale lease.
    pub settled: Vec<Result<Settled>>,
    /// The new deliveries, as [`Engine::reserve`] answers them.
    pub deliveries: Vec<Delivery>,
}

/// Checks the arguments of [`Engine::settle_and_reserve`]: at most 1000 settlements, each
/// valid, and a valid reserve (whose `max` may be 0 here: settle only).
pub fn check_settle_and_reserve(settle: &[Settle], req: &Reserve) -> Result<()> {
    if settle.len() > MAX_BATCH {
        return Err(Error::invalid(
            "settle",
            format!(
                "{} settlements is over the maximum of {MAX_BATCH}; split them",
                settle.len()
            ),
        ));
    }
    settle.iter().try_for_each(Settle::validate)?;
    if req.max == 0 {
        // Settle only: the rest of the request must still be valid.
        return Reserve {
            max: 1,
            ..req.clone()
        }
        .validate();
    }
    req.validate()
}

/// An opaque position in a listing, returned by [`Engine::list`] to fetch the next page.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cursor(pub String);

/// One page of a listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// The jobs of this page, in the state's order.
    pub jobs: Vec<Job>,
    /// Where the next page starts; `None` when this was the last.
    pub next: Option<Cursor>,
}

/// A schedule as an engine keeps it ([`Schedules::schedules`]): the definition, its revision
/// (1 at the first [`Schedules::put_schedule`], + 1 at each later one) and the latest fire time
/// whose job was pushed (`None` until the first, and again after each put).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSchedule {
    /// The definition.
    pub schedule: JobSchedule,
    /// Its revision.
    pub revision: u64,
    /// The latest fire time pushed through (see [`JobSchedule::plan`]).
    pub through: Option<Timestamp>,
}

/// A topic's push destination as the engine keeps it (issue 20): a document the engine
/// stores and hands back unread. What it means (a webhook, RabbitMQ, NATS; its secrets) is
/// the forwarder's (`delayq-push`), which checks it before it is put.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredDestination {
    /// The topic whose due jobs go there.
    pub topic: Topic,
    /// The document, as put.
    pub doc: String,
}

/// Whether an engine's store can serve calls now, as [`Engine::readiness`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// The store answered and can serve calls.
    Ready,
    /// The store answered, and what it answered says that it cannot serve calls now: a
    /// Redis Cluster that reports itself down, say.
    NotReady {
        /// Why, for an operator, with what to expect: one sentence that names no address,
        /// key or credential, so a server may show it to anyone (`/readyz` is open).
        reason: String,
    },
}

/// The largest destination document, in bytes.
pub const MAX_DESTINATION_DOC: usize = 64 * 1024;

/// Checks a destination document: not empty, at most [`MAX_DESTINATION_DOC`] bytes.
pub fn check_destination_doc(doc: &str) -> Result<()> {
    if doc.is_empty() || doc.len() > MAX_DESTINATION_DOC {
        return Err(Error::invalid(
            "destination",
            format!(
                "a destination of {} bytes is outside 1 to {MAX_DESTINATION_DOC}; send a smaller one",
                doc.len()
            ),
        ));
    }
    Ok(())
}

/// Counts and health of one topic.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopicStats {
    /// Jobs waiting for their due time (including those due but not yet moved to ready).
    pub delayed: u64,
    /// Due jobs waiting for a reserver.
    pub ready: u64,
    /// Leased jobs.
    pub reserved: u64,
    /// Dead jobs.
    pub dead: u64,
    /// Done jobs kept by the topic's retention (0 without one).
    pub done: u64,
    /// How long the longest-waiting due job has been waiting (now minus its due time), or
    /// `None` when no job is due. A growing value means no one is reserving.
    pub oldest_overdue: Option<Duration>,
    /// The earliest due time among delayed jobs.
    pub next_due: Option<Timestamp>,
    /// Leases that ran out without an answer (the worker died or overran its ttr), counted
    /// since the topic was created or last purged.
    pub expired_leases: u64,
    /// Jobs whose expiry ([`crate::Expiry`]) passed before a delivery, counted since the
    /// topic was created or last purged (gone dead with the reason `expired`, or dropped).
    pub expired_jobs: u64,
    /// While the topic is paused ([`Engine::pause`]): when the pause ends
    /// ([`Timestamp::NEVER`] for a pause until resumed); `None` when it is not paused.
    pub paused_until: Option<Timestamp>,
}

/// The engine contract: the job's life (push, reserve, settle, list, purge) and a topic's
/// settings and pause. Every engine implements every method with the same semantics; the
/// conformance suite in `delayq-testkit` checks them against each other's behaviour. What
/// only some users need (schedules, push destinations, the beanstalkd protocol's numbers) is
/// a capability trait of its own, so an engine without it does not compile as if it had it.
///
/// Every method validates its input first and returns an `Invalid*` error (or
/// [`Error::BodyTooLarge`]) without changing anything. Time is the engine's clock.
#[async_trait]
pub trait Engine: Send + Sync + 'static {
    /// Pushes one job. Idempotent on `(topic, id)`: if a live job with this id exists
    /// (delayed, ready, reserved or dead), nothing changes and `created` is false. A done job
    /// is not live: the push replaces it. What the job leaves unset (ttr, max attempts,
    /// back-off) comes from its topic's settings ([`Engine::topic_config`]), else the
    /// built-in defaults; a body over the topic's `max_body` is refused.
    /// The default is a batch of one.
    async fn push(&self, job: NewJob) -> Result<Pushed> {
        let mut out = self.push_batch(vec![job]).await?;
        out.pop()
            .ok_or_else(|| Error::Internal("push_batch answered nothing for one job".into()))
    }

    /// Pushes up to 1000 jobs in one round trip, answering in order. A duplicate inside the
    /// batch is answered like a push of an existing job. Every job is validated before any
    /// is written; jobs of one topic are written atomically together. On a Redis Cluster
    /// the batch's slots are written apart: when one fails, the error comes while other
    /// slots' jobs may be stored; send again only the jobs not stored
    /// ([`Engine::push_each`] says which), since a stored job may meanwhile have been
    /// delivered and acked, and pushed again it would be created again.
    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>>;

    /// As [`Engine::push_batch`], answering each job apart: a job that could not be stored
    /// answers its own error while the others are stored. The outer error is the batch's:
    /// refused as a whole (bad input, which changes nothing), or failed for every job. The
    /// default answers [`Engine::push_batch`]'s result for every job.
    ///
    /// On a Redis Cluster the jobs' calls go to their slots concurrently, each waited for at
    /// most the slot timeout: a primary that is down or hung fails only the jobs routed to
    /// it (a topic of its, or its partitions of a partitioned topic), with
    /// [`Error::Unavailable`], within the slot timeout instead of the response timeout
    /// (issue 37). Such a job may still be stored (its call may run late): a push is
    /// idempotent by its id, so send it again with the same id.
    async fn push_each(&self, jobs: Vec<NewJob>) -> Result<Vec<Result<Pushed>>> {
        Ok(self.push_batch(jobs).await?.into_iter().map(Ok).collect())
    }

    /// Like [`Engine::push`] but fails with [`Error::AlreadyExists`] when the id is taken.
    async fn push_new(&self, job: NewJob) -> Result<Pushed> {
        let (topic, id) = (job.topic.clone(), job.id.clone());
        let pushed = self.push(job).await?;
        if pushed.created {
            Ok(pushed)
        } else {
            Err(Error::AlreadyExists { topic, id })
        }
    }

    /// Reads a job in any state, or `None`.
    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>>;

    /// Deletes (cancels) a job in any state. Returns false when there was no such job.
    /// A deleted reserved job's lease is lost.
    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool>;

    /// Moves a delayed or ready job to a new due time, keeping its id and attempts.
    /// Returns the new due time. [`Error::WrongState`] for reserved or dead jobs.
    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp>;

    /// Takes up to `max` due jobs, the lowest priority number first, then the earliest due
    /// time, then push order. Waits up to `wait` for a first job; returns an empty vector on
    /// timeout. Expired leases noticed on the way go back to delayed (or dead).
    ///
    /// Cancel safety: dropping the future at any point loses nothing. Dropped while it
    /// waits, it just stops waiting; dropped while a round trip that hands out jobs is on
    /// its way, the round trip still ends and the jobs it leased are released at once (the
    /// release counts no attempt; see [`crate::detach_lease`]). At-most-once jobs such a
    /// round trip took are lost (and logged): they were removed as they were taken.
    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>>;

    /// Settles a set of leases, then reserves as [`Engine::reserve`] does, in one round trip
    /// where the engine can: the cycle of a worker that reports what it finished and asks
    /// for more. Settlements apply in order, each as its own operation would (the same
    /// lease twice: the second is refused as any settled lease is, [`Error::LeaseLost`], or
    /// [`Error::NotFound`] when the first was an ack that removed the job); a stale lease
    /// is answered [`Error::LeaseLost`] and never keeps the others or the reserve from
    /// happening.
    /// A job settled back to ready (a release, a nack with no delay) may be delivered again
    /// by the same call.
    ///
    /// `req.max` may be 0: then it settles only, and never waits. Every argument is checked
    /// first ([`check_settle_and_reserve`]); a refused call changes nothing. When the engine
    /// fails (`Unavailable`) some settlements may have applied; settling again is safe (a
    /// settled lease is refused and changes nothing: `LeaseLost`, or `NotFound` once an ack
    /// removed the job; see [`Error::ends_delivery`]).
    ///
    /// The default runs the single operations one after the other (a run of acks as one
    /// `ack_batch`); engines override it to make the whole call one round trip.
    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        check_settle_and_reserve(settle, req)?;
        let mut settled = Vec::with_capacity(settle.len());
        // A run of acks goes out as one `ack_batch` (a worker's settlements are mostly acks);
        // a lease listed twice in a run is answered by the batch as by two acks.
        let mut acks: Vec<Lease> = Vec::new();
        for s in settle {
            if let Settle::Ack(l) = s {
                acks.push(l.clone());
                continue;
            }
            settled.extend(ack_run(self, &mut acks).await?);
            settled.push(settle_one(self, s).await?);
        }
        settled.extend(ack_run(self, &mut acks).await?);
        let deliveries = if req.max == 0 {
            Vec::new()
        } else {
            self.reserve(req).await?
        };
        Ok(SettledAndReserved {
            settled,
            deliveries,
        })
    }

    /// Acknowledges a delivery: the job is done and removed, or kept as
    /// [`JobState::Done`] when its topic retains finished jobs ([`crate::Retention`]).
    /// [`Error::LeaseLost`] when the token is not the job's live lease (a done job's too).
    /// The default is a batch of one.
    async fn ack(&self, lease: &Lease) -> Result<()> {
        let mut out = self.ack_batch(std::slice::from_ref(lease)).await?;
        out.pop().unwrap_or_else(|| {
            Err(Error::Internal(
                "ack_batch answered nothing for one lease".into(),
            ))
        })
    }

    /// Acknowledges up to 1000 deliveries in one round trip, answering each in order.
    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>>;

    /// Reports a failed delivery. The job is retried after `nack.delay` or its back-off, or
    /// goes dead when it has used all its attempts.
    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome>;

    /// Gives a delivery back without counting it as an attempt: the job is ready again at
    /// once, at its original due time (used by graceful shutdown). The default is
    /// [`Engine::release_with`] without options.
    async fn release(&self, lease: &Lease) -> Result<()> {
        self.release_with(lease, Release::default()).await
    }

    /// Gives a delivery back without counting it as an attempt, as [`Engine::release`], and
    /// with `release.delay` due again that long from now (delayed until then), and with
    /// `release.priority` as its priority from now on. A stale lease changes nothing
    /// ([`Error::LeaseLost`]).
    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()>;

    /// Extends the lease to now + `ttr` (or the job's ttr). Returns the new deadline.
    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp>;

    /// Sends a reserved job to dead at once, whatever attempts it has left. The default is
    /// [`Engine::bury_with`] without a new priority.
    async fn bury(&self, lease: &Lease, reason: Option<String>) -> Result<()> {
        self.bury_with(
            lease,
            Bury {
                reason,
                priority: None,
            },
        )
        .await
    }

    /// [`Engine::bury`], and with `bury.priority` as the job's priority from now on (a kick
    /// makes it ready with that priority).
    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()>;

    /// Reserves one job by its id, now, whatever its due time: a delayed, ready or dead job
    /// is leased as [`Engine::reserve`] would lease it (a fresh token, a deadline of now plus
    /// its ttr, one more attempt; a dead job keeps its attempts and is leased too, as
    /// beanstalkd's `reserve-job` does), also while its topic is paused. A reserved or done
    /// job is refused with [`Error::WrongState`], a missing one with [`Error::NotFound`]; a
    /// refusal changes nothing.
    async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery>;

    /// Sends a delayed or ready job to dead now (an operator's "move to dead"), with
    /// `reason` as its last error (at most 4 KiB) and its attempts unchanged. A reserved job
    /// is refused with [`Error::WrongState`] (its holder buries it with its lease, as
    /// [`Engine::bury`]), a dead or done one too; a missing one is [`Error::NotFound`]. A
    /// refused call changes nothing.
    async fn bury_waiting(&self, topic: &Topic, id: &JobId, reason: Option<String>) -> Result<()>;

    /// Makes a dead job ready now with its attempts reset to 0.
    /// [`Error::NotFound`] or [`Error::WrongState`] when it is not a dead job.
    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()>;

    /// Kicks every dead job of a topic; returns how many.
    async fn kick_all(&self, topic: &Topic) -> Result<u64>;

    /// Lists a state page by page (`limit` 1 to 1000). Orders: delayed by (due time, id),
    /// ready by (priority, due time, push order), reserved by (lease deadline, id), dead by
    /// (time of death, id), done by (time of the ack, id).
    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page>;

    /// Counts per state and the age of the oldest overdue job.
    async fn stats(&self, topic: &Topic) -> Result<TopicStats>;

    /// The stats of each of `topics`, in their order, each its own answer: what a listing
    /// of every topic reads (`GET /v1/topics`, `/metrics`). The default asks
    /// [`Engine::stats`] for each in turn, stopping at nothing: an error answers for its
    /// topic only.
    ///
    /// On a Redis Cluster the topics' reads go out concurrently, and each waits for its
    /// primary at most the slot timeout, as a reserve over several topics does: a topic
    /// whose primary does not answer in time (or that is skipped as unreachable) answers
    /// [`Error::Unavailable`] and is then listed by [`Engine::unreachable`], instead of
    /// holding up the whole listing for the response timeout (issue 37).
    async fn stats_each(&self, topics: &[Topic]) -> Vec<Result<TopicStats>> {
        let mut out = Vec::with_capacity(topics.len());
        for t in topics {
            out.push(self.stats(t).await);
        }
        out
    }

    /// Every topic pushed to since it was created or last purged, and every topic paused
    /// now ([`Engine::pause`]) whether it holds jobs or not, sorted: an operator sees a
    /// paused topic even before its first push. A purge takes the topic off this list
    /// unless it is paused; the next push to it puts it back, whichever process pushes. A
    /// topic listed only for its pause leaves when the pause ends (a resume or its end
    /// time). Settings alone do not list a topic.
    async fn topics(&self) -> Result<Vec<Topic>>;

    /// Removes every job of a topic in every state (done ones too) and takes the topic off
    /// [`Engine::topics`] (a paused topic stays there, empty, until its pause ends); returns
    /// how many jobs. Lease tokens stay fresh across a purge.
    async fn purge(&self, topic: &Topic) -> Result<u64>;

    /// The engine's clock.
    async fn now(&self) -> Result<Timestamp>;

    /// The topics among `topics` whose jobs this engine cannot reach right now, in the
    /// order given: what a reserve over several topics skipped, so that its caller can say
    /// which topics it did not hear from (issue 37).
    ///
    /// On a Redis Cluster, a reserve (or an ack batch) whose calls span several hash slots
    /// answers from the slots that answer and skips a slot whose primary did not answer
    /// within the slot timeout, with the rest of that primary's slots, for a short skip
    /// period; this lists the topics any of whose partitions lies in such a slot (a
    /// partitioned topic is listed when any one of its partitions is, though a reserve may
    /// still hand out the jobs of its other partitions). It reads what this process's own
    /// calls found and makes no call: it costs nothing, and a primary that failed only
    /// single-slot calls (a reserve over one topic fails whole, with
    /// [`Error::Unavailable`]) or that no call tried lately is not listed.
    ///
    /// One Redis node, the embedded engine and PostgreSQL answer none: they serve every
    /// topic from one store, where a failure fails the whole call.
    fn unreachable(&self, topics: &[Topic]) -> Vec<Topic>;

    /// Whether the store can serve calls now: what a readiness probe (`/readyz`) asks, so
    /// it must stay cheap (one round trip). An error is a store that did not answer, as for
    /// any call; [`Readiness::NotReady`] a store that answered that it cannot serve (a
    /// Redis Cluster reporting `cluster_state:fail`). The default reads the clock
    /// ([`Engine::now`]): a store that answers is ready, which holds for one Redis node,
    /// the embedded engine and PostgreSQL.
    async fn readiness(&self) -> Result<Readiness> {
        self.now().await.map(|_| Readiness::Ready)
    }

    /// A topic's settings: what [`Engine::set_topic_config`] set last, or
    /// [`TopicConfig::default`] (nothing set).
    async fn topic_config(&self, topic: &Topic) -> Result<TopicConfig>;

    /// Replaces a topic's settings whole (an unset field goes back to the built-in default),
    /// for every client of the engine. They apply to jobs pushed afterwards: a job keeps the
    /// ttr, attempts and back-off it was pushed with. A new retention applies at once: the
    /// done jobs beyond its bounds are removed (all of them when it is unset), and acks
    /// from then on keep or remove their jobs by it. Settings survive a purge, and setting
    /// them does not put a topic on [`Engine::topics`]. Validated first
    /// ([`TopicConfig::validate`]); a refused call changes nothing.
    async fn set_topic_config(&self, topic: &Topic, config: &TopicConfig) -> Result<()>;

    /// Pauses a topic until `until` (`None`: until [`Engine::resume`]), for every client of
    /// the engine: reserves skip it, while its jobs still fall due, its leases still run out
    /// and pushes, acks and the rest work as usual. A paused topic is on [`Engine::topics`],
    /// jobs or not (a topic may be paused before its first push). A waiting reserve on it wakes when the
    /// pause ends. Pausing a paused topic replaces its end. Refused, changing nothing, when
    /// `until` is more than 10 years ahead of the engine's clock (pause without an end
    /// instead).
    async fn pause(&self, topic: &Topic, until: Option<Timestamp>) -> Result<()>;

    /// Ends a topic's pause at once (nothing happens when it is not paused); waiting
    /// reserves on it wake. The default is [`Engine::pause`] until the epoch (a pause that
    /// has ended).
    async fn resume(&self, topic: &Topic) -> Result<()> {
        self.pause(topic, Some(Timestamp::EPOCH)).await
    }
}

/// The beanstalkd protocol's capability: one sequence of numbers that every process on the
/// engine shares, each number naming the topic it was claimed for. The Redis, the embedded
/// and the PostgreSQL engines have it ([`Store`]).
#[async_trait]
pub trait Numbers: Send + Sync + 'static {
    /// Claims `count` (1 to 1,000,000) fresh numbers for `topic` from one sequence that
    /// every process on this engine shares, and answers the first: `first .. first + count`
    /// are never claimed again, by anyone, and [`Numbers::number_topic`] maps each of them to
    /// `topic` from then on (purges and retention do not change that). Numbers start at 1.
    /// The beanstalkd protocol names jobs by such numbers.
    async fn claim_numbers(&self, topic: &Topic, count: u64) -> Result<u64>;

    /// The topic that `n` was claimed for by [`Numbers::claim_numbers`], or `None` when it
    /// was never claimed. Without a scan: a lookup among the claimed ranges.
    async fn number_topic(&self, n: u64) -> Result<Option<Topic>>;
}

/// Recurring jobs ([`JobSchedule`]) kept in the engine, for every client of it: what a
/// scheduler (`delayq_worker::Scheduler`) reads and records. The Redis, the embedded and
/// the PostgreSQL engines have it ([`Store`]).
#[async_trait]
pub trait Schedules: Send + Sync + 'static {
    /// Creates or replaces a schedule (by name), for every client of the engine, and
    /// answers its new revision. A replaced schedule starts afresh: its pushed-through time
    /// is cleared (jobs its old definition pushed stay; the scheduler deletes the one still
    /// delayed). Validated first ([`JobSchedule::validate`]).
    async fn put_schedule(&self, schedule: &JobSchedule) -> Result<u64>;

    /// One schedule, if it exists.
    async fn schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>>;

    /// Every schedule, by name.
    async fn schedules(&self) -> Result<Vec<StoredSchedule>>;

    /// Deletes a schedule and answers what it was (`None`: there was none). The jobs it
    /// pushed stay.
    async fn delete_schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>>;

    /// Records that the jobs of `schedule`'s fires up to `through` were pushed, when the
    /// schedule is still at `revision` and `through` is later than what it records: answers
    /// whether it did (a scheduler that planned from an older revision, or raced another
    /// one, changes nothing).
    async fn schedule_pushed(
        &self,
        name: &ScheduleName,
        revision: u64,
        through: Timestamp,
    ) -> Result<bool>;
}

/// Push destinations kept in the engine, one per topic, for every client of it: what the
/// push forwarder reads. The Redis, the embedded and the PostgreSQL engines have it
/// ([`Store`]).
#[async_trait]
pub trait Destinations: Send + Sync + 'static {
    /// Makes `doc` the push destination of `topic` (replacing the one it had), for every
    /// client of the engine. Checked first ([`check_destination_doc`]); a refusal changes
    /// nothing. A destination outlives its topic's jobs: purge leaves it.
    async fn put_destination(&self, topic: &Topic, doc: &str) -> Result<()>;

    /// The push destination of `topic`, if it has one.
    async fn destination(&self, topic: &Topic) -> Result<Option<StoredDestination>>;

    /// Every push destination, by topic name (bytewise).
    async fn destinations(&self) -> Result<Vec<StoredDestination>>;

    /// Removes the push destination of `topic`; answers whether it had one. The topic's
    /// jobs stay.
    async fn delete_destination(&self, topic: &Topic) -> Result<bool>;
}

/// An engine with every capability: the job contract ([`Engine`]), [`Schedules`],
/// [`Destinations`] and [`Numbers`]. The Redis, the embedded and the PostgreSQL engines are
/// stores, and `Arc<dyn Store>` is what `delayq::open` answers and what the HTTP server,
/// the beanstalkd port and the push forwarder run on; a worker needs only an [`Engine`]
/// (`Arc<dyn Store>` upcasts to `Arc<dyn Engine>`).
pub trait Store: Engine + Schedules + Destinations + Numbers {}

impl<T: Engine + Schedules + Destinations + Numbers + ?Sized> Store for T {}

/// Acks `leases` (emptying it) with one `ack_batch`, for the default
/// [`Engine::settle_and_reserve`].
async fn ack_run<E: Engine + ?Sized>(
    e: &E,
    leases: &mut Vec<Lease>,
) -> Result<Vec<Result<Settled>>> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let answers = e.ack_batch(leases).await?;
    if answers.len() != leases.len() {
        return Err(Error::Internal(format!(
            "ack_batch answered {} results for {} leases",
            answers.len(),
            leases.len()
        )));
    }
    leases.clear();
    Ok(answers
        .into_iter()
        .map(|r| r.map(|()| Settled::Acked))
        .collect())
}

/// One settlement through its own operation, for the default
/// [`Engine::settle_and_reserve`]: the outer error is a retryable failure of the engine,
/// which ends the call; the inner one is this settlement's answer.
async fn settle_one<E: Engine + ?Sized>(e: &E, s: &Settle) -> Result<Result<Settled>> {
    let r = match s {
        Settle::Ack(l) => e.ack(l).await.map(|()| Settled::Acked),
        Settle::Nack(l, n) => e.nack(l, n.clone()).await.map(Settled::Nacked),
        Settle::Bury(l, reason) => e.bury(l, reason.clone()).await.map(|()| Settled::Buried),
        Settle::Release(l) => e.release(l).await.map(|()| Settled::Released),
    };
    match r {
        Err(err) if err.is_retryable() => Err(err),
        r => Ok(r),
    }
}

/// The most numbers one [`Numbers::claim_numbers`] takes.
pub const MAX_CLAIM: u64 = 1_000_000;

/// Checks the count of [`Numbers::claim_numbers`]: 1 to [`MAX_CLAIM`].
pub fn check_claim(count: u64) -> Result<()> {
    if !(1..=MAX_CLAIM).contains(&count) {
        return Err(Error::invalid(
            "count",
            format!("{count} numbers is outside 1 to {MAX_CLAIM}; claim fewer at a time"),
        ));
    }
    Ok(())
}

/// Checks the arguments of [`Engine::ack_batch`].
pub fn check_ack_batch(leases: &[Lease]) -> Result<()> {
    check_count("leases", leases.len())
}

/// Checks the arguments of [`Engine::push_batch`].
pub fn check_push_batch(jobs: &[NewJob], limits: &crate::Limits) -> Result<()> {
    check_count("jobs", jobs.len())?;
    jobs.iter().try_for_each(|j| j.validate(limits))
}

/// A shared engine is an engine, so `Arc<dyn Engine>` (what `delayq::open` returns) can go
/// wherever an `Engine` is expected.
#[async_trait]
impl<T: Engine + ?Sized> Engine for std::sync::Arc<T> {
    async fn push(&self, job: NewJob) -> Result<Pushed> {
        (**self).push(job).await
    }
    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        (**self).push_batch(jobs).await
    }
    async fn push_each(&self, jobs: Vec<NewJob>) -> Result<Vec<Result<Pushed>>> {
        (**self).push_each(jobs).await
    }
    async fn push_new(&self, job: NewJob) -> Result<Pushed> {
        (**self).push_new(job).await
    }
    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        (**self).get(topic, id).await
    }
    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        (**self).delete(topic, id).await
    }
    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp> {
        (**self).reschedule(topic, id, when).await
    }
    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        (**self).reserve(req).await
    }
    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        (**self).settle_and_reserve(settle, req).await
    }
    async fn ack(&self, lease: &Lease) -> Result<()> {
        (**self).ack(lease).await
    }
    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        (**self).ack_batch(leases).await
    }
    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        (**self).nack(lease, nack).await
    }
    async fn release(&self, lease: &Lease) -> Result<()> {
        (**self).release(lease).await
    }
    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()> {
        (**self).release_with(lease, release).await
    }
    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        (**self).touch(lease, ttr).await
    }
    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        (**self).bury_with(lease, bury).await
    }
    async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery> {
        (**self).reserve_job(topic, id).await
    }
    async fn bury(&self, lease: &Lease, reason: Option<String>) -> Result<()> {
        (**self).bury(lease, reason).await
    }
    async fn bury_waiting(&self, topic: &Topic, id: &JobId, reason: Option<String>) -> Result<()> {
        (**self).bury_waiting(topic, id, reason).await
    }
    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        (**self).kick(topic, id).await
    }
    async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        (**self).kick_all(topic).await
    }
    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        (**self).list(topic, state, limit, after).await
    }
    async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        (**self).stats(topic).await
    }
    async fn stats_each(&self, topics: &[Topic]) -> Vec<Result<TopicStats>> {
        (**self).stats_each(topics).await
    }
    async fn topics(&self) -> Result<Vec<Topic>> {
        (**self).topics().await
    }
    async fn purge(&self, topic: &Topic) -> Result<u64> {
        (**self).purge(topic).await
    }
    async fn now(&self) -> Result<Timestamp> {
        (**self).now().await
    }
    fn unreachable(&self, topics: &[Topic]) -> Vec<Topic> {
        (**self).unreachable(topics)
    }
    async fn readiness(&self) -> Result<Readiness> {
        (**self).readiness().await
    }
    async fn topic_config(&self, topic: &Topic) -> Result<TopicConfig> {
        (**self).topic_config(topic).await
    }
    async fn set_topic_config(&self, topic: &Topic, config: &TopicConfig) -> Result<()> {
        (**self).set_topic_config(topic, config).await
    }
    async fn pause(&self, topic: &Topic, until: Option<Timestamp>) -> Result<()> {
        (**self).pause(topic, until).await
    }
    async fn resume(&self, topic: &Topic) -> Result<()> {
        (**self).resume(topic).await
    }
}
