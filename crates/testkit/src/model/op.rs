//! [`Op`]: one step of a generated sequence, and the proptest strategies that make them.
//!
//! Operations name topics, ids and logical clients by small indices, so that random
//! sequences collide: a handful of ids in two topics (idempotent pushes, wrong states), three
//! clients that hold leases (stale tokens, leases of another client, the same lease twice).

use std::time::Duration;

use delayq_core::{Backoff, JobId, JobState, NewJob, Topic};
use proptest::prelude::*;

/// The topics a sequence uses.
pub const TOPICS: [&str; 2] = ["m0", "m1"];
/// The job ids a sequence uses, in every topic.
pub const IDS: [&str; 4] = ["a", "b", "c", "d"];
/// The logical clients of a sequence.
pub const CLIENTS: usize = 3;

/// The back-off of every generated job: 10 s, doubling, no jitter. A retry by back-off is
/// out of the sequence's reach until it is rescheduled, kicked or nacked again, so its due
/// time (exact, from the formula) never races the sequence's other steps.
pub fn backoff() -> Backoff {
    Backoff::exponential(Duration::from_secs(10), Duration::from_secs(40))
}

/// The topic of index `i`.
pub fn topic(i: u8) -> Topic {
    Topic::new(TOPICS[usize::from(i) % TOPICS.len()]).expect("model topics are valid")
}

/// The job id of index `i`.
pub fn id(i: u8) -> JobId {
    JobId::new(IDS[usize::from(i) % IDS.len()]).expect("model ids are valid")
}

/// A job to push, by indices.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Topic index.
    pub topic: u8,
    /// Id index.
    pub id: u8,
    /// Delay in ms (mostly short: jobs fall due while the sequence runs).
    pub delay_ms: u32,
    /// Priority (0 to 2).
    pub priority: u8,
    /// Max attempts (1 to 3).
    pub max_attempts: u8,
    /// A ttr under the contract's minimum of 1 s: the push (and its whole batch) is refused.
    pub bad_ttr: bool,
}

impl JobSpec {
    /// The job. Its ttr is 1 s (the contract's minimum), its body names it.
    pub fn new_job(&self) -> NewJob {
        let ttr = if self.bad_ttr { 500 } else { 1000 };
        NewJob::new(topic(self.topic), format!("{}/{}", self.topic, self.id))
            .with_id(id(self.id))
            .with_delay(Duration::from_millis(u64::from(self.delay_ms)))
            .with_priority(u32::from(self.priority))
            .with_max_attempts(u32::from(self.max_attempts))
            .with_ttr(Duration::from_millis(ttr))
            .with_backoff(backoff())
    }
}

/// Which lease a lease operation uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LeasePick {
    /// One the client holds (index modulo how many); a settled one when it holds none.
    Held(u8, u8),
    /// One the client held and settled, or saw refused (stale); a forged one when none.
    Past(u8, u8),
    /// A token never issued, for (topic, id): refused as not found, wrong state or lost.
    Forged(u8, u8),
}

/// How a settlement ends a delivery.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SettleKind {
    /// Ack.
    Ack,
    /// Nack with an optional delay in ms.
    Nack(Option<u16>),
    /// Bury.
    Bury,
    /// Release.
    Release,
}

/// One step of a sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Push one job.
    Push(JobSpec),
    /// Push a batch.
    PushBatch(Vec<JobSpec>),
    /// Read a job.
    Get(u8, u8),
    /// Delete a job.
    Delete(u8, u8),
    /// Reschedule a job to a delay in ms.
    Reschedule(u8, u8, u16),
    /// A client reserves: topics (bit 0: m0, bit 1: m1; 0 means both), max, wait in ms,
    /// at most once.
    Reserve {
        /// The client.
        client: u8,
        /// Topic mask.
        topics: u8,
        /// Most jobs (1 to 3).
        max: u8,
        /// Wait in ms.
        wait_ms: u8,
        /// At-most-once mode.
        at_most_once: bool,
    },
    /// A client settles leases and reserves in one call (`max` 0: settle only).
    Settle {
        /// The client.
        client: u8,
        /// The settlements.
        items: Vec<(LeasePick, SettleKind)>,
        /// Topic mask.
        topics: u8,
        /// Most jobs (0 to 3).
        max: u8,
    },
    /// Ack.
    Ack(LeasePick),
    /// Nack with an optional delay in ms.
    Nack(LeasePick, Option<u16>),
    /// Release.
    Release(LeasePick),
    /// Touch with an optional ttr in seconds.
    Touch(LeasePick, Option<u8>),
    /// Bury.
    Bury(LeasePick),
    /// Kick one job.
    Kick(u8, u8),
    /// Kick every dead job of a topic.
    KickAll(u8),
    /// Purge a topic.
    Purge(u8),
    /// Stats of a topic.
    Stats(u8),
    /// The first page of a state's listing.
    List(u8, JobState, u8),
    /// The topic list.
    Topics,
    /// Let time pass (ms).
    Sleep(u16),
    /// Let every lease now held run out.
    ExpireLeases,
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        0..2u8,
        0..4u8,
        prop_oneof![3 => Just(0u32), 2 => 1..40u32, 1 => Just(3_600_000u32)],
        0..3u8,
        1..4u8,
        prop::bool::weighted(0.03),
    )
        .prop_map(
            |(topic, id, delay_ms, priority, max_attempts, bad_ttr)| JobSpec {
                topic,
                id,
                delay_ms,
                priority,
                max_attempts,
                bad_ttr,
            },
        )
}

fn lease_pick() -> impl Strategy<Value = LeasePick> {
    prop_oneof![
        6 => (0..CLIENTS as u8, any::<u8>()).prop_map(|(c, i)| LeasePick::Held(c, i)),
        2 => (0..CLIENTS as u8, any::<u8>()).prop_map(|(c, i)| LeasePick::Past(c, i)),
        1 => (0..2u8, 0..4u8).prop_map(|(t, i)| LeasePick::Forged(t, i)),
    ]
}

fn nack_delay() -> impl Strategy<Value = Option<u16>> {
    prop_oneof![2 => Just(None), 3 => (0..30u16).prop_map(Some)]
}

fn settle_kind() -> impl Strategy<Value = SettleKind> {
    prop_oneof![
        4 => Just(SettleKind::Ack),
        2 => nack_delay().prop_map(SettleKind::Nack),
        1 => Just(SettleKind::Bury),
        2 => Just(SettleKind::Release),
    ]
}

fn state() -> impl Strategy<Value = JobState> {
    prop_oneof![
        Just(JobState::Delayed),
        Just(JobState::Ready),
        Just(JobState::Reserved),
        Just(JobState::Dead),
    ]
}

/// One operation, weighted towards the ones that move jobs.
pub fn op() -> impl Strategy<Value = Op> {
    let ti = || 0..2u8;
    let ii = || 0..4u8;
    prop_oneof![
        8 => job_spec().prop_map(Op::Push),
        2 => prop::collection::vec(job_spec(), 1..5).prop_map(Op::PushBatch),
        4 => (ti(), ii()).prop_map(|(t, i)| Op::Get(t, i)),
        1 => (ti(), ii()).prop_map(|(t, i)| Op::Delete(t, i)),
        2 => (ti(), ii(), prop_oneof![Just(0u16), 1..30u16, Just(60_000u16)])
            .prop_map(|(t, i, d)| Op::Reschedule(t, i, d)),
        10 => (0..CLIENTS as u8, 0..3u8, 1..4u8, prop_oneof![4 => Just(0u8), 1 => 1..30u8], prop::bool::weighted(0.1))
            .prop_map(|(client, topics, max, wait_ms, at_most_once)| Op::Reserve {
                client, topics, max, wait_ms, at_most_once
            }),
        5 => (0..CLIENTS as u8, prop::collection::vec((lease_pick(), settle_kind()), 0..4), 0..3u8, 0..4u8)
            .prop_map(|(client, items, topics, max)| Op::Settle { client, items, topics, max }),
        5 => lease_pick().prop_map(Op::Ack),
        3 => (lease_pick(), nack_delay()).prop_map(|(l, d)| Op::Nack(l, d)),
        2 => lease_pick().prop_map(Op::Release),
        2 => (lease_pick(), prop_oneof![Just(None), (1..3u8).prop_map(Some)]).prop_map(|(l, s)| Op::Touch(l, s)),
        1 => lease_pick().prop_map(Op::Bury),
        2 => (ti(), ii()).prop_map(|(t, i)| Op::Kick(t, i)),
        1 => ti().prop_map(Op::KickAll),
        1 => ti().prop_map(Op::Purge),
        3 => ti().prop_map(Op::Stats),
        2 => (ti(), state(), prop_oneof![Just(1u8), Just(2), Just(100)]).prop_map(|(t, s, l)| Op::List(t, s, l)),
        1 => Just(Op::Topics),
        3 => prop_oneof![1..5u16, 5..40u16].prop_map(Op::Sleep),
        2 => Just(Op::ExpireLeases),
    ]
}

/// A sequence of `1..=max_len` operations.
pub fn sequence(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=max_len.max(1))
}
