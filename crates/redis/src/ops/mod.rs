//! The operations: each module owns its functions' arguments, the decoding of their
//! replies and what their statuses mean, as `impl Ops` blocks; `engine.rs` checks the
//! caller's input and dispatches here.
//!
//! - `push`: push (chunks, the registry of topics).
//! - `reserve`: reserve and settle-and-reserve (settlements, deliveries, the long-poll).
//! - `lease`: ack, nack, release, touch, bury (release and bury with their options).
//! - `admin`: get, delete, reschedule, kick, list, stats, pause, purge, now.
//! - `topics`: the topic list (the registry and the paused topics).
//! - `reach`: the topics this process cannot reach now (unreachable cluster slots).
//! - `config`: a topic's settings (set, read), and their encoding as function arguments.
//! - `numbers`: the shared sequence of numbers and the topic of each claimed range.
//! - `schedules`: stored schedules (put, read, list, delete, progress) and their encoding.
//! - `destinations`: the topics' push destinations (put, read, list, delete).
//!
//! Each status a function answers becomes an error in one place, below.

pub(crate) mod admin;
pub(crate) mod config;
pub(crate) mod destinations;
pub(crate) mod lease;
pub(crate) mod numbers;
pub(crate) mod push;
pub(crate) mod reach;
pub(crate) mod reserve;
pub(crate) mod schedules;
pub(crate) mod topics;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_core::limits::at_too_far;
use delayq_core::{Error, JobId, JobState, Lease, Limits, Result, Timestamp, Topic, partition_of};
use redis::Cmd;
use tokio::sync::oneshot;

use crate::codec::Status;
use crate::conn::Conn;
use crate::keys::{KeySpace, Part, TOPIC_KEY_NAMES};
use crate::wait::Waiters;

/// How long push, reserve and the operations by id trust the partition count this process
/// read for a topic (the operations on a whole topic, stats, list, pause, purge and
/// kick-all, read it afresh). A count changes only while the topic holds no job, and a push
/// checks it in the partition it writes (`lua/push.lua`), so a stale count can neither
/// misplace a job nor lose one; an operation by id that misses reads it again
/// ([`Ops::moved`]); a reserve in a process that still holds the old count looks at the new
/// partitions within this time. Long, so that an idle worker's calls (one per 30 s
/// long-poll) do not each read it.
const LAYOUT_TTL: Duration = Duration::from_secs(60);

/// A topic's partitions as this process last read them, and when.
pub(crate) struct Layout {
    parts: Arc<[Part]>,
    read: Instant,
}

/// What every operation needs: the connection, the key space, the settings and the waker.
pub(crate) struct Ops {
    pub(crate) conn: Conn,
    pub(crate) keys: KeySpace,
    pub(crate) limits: Limits,
    pub(crate) tick_batch: usize,
    pub(crate) safety_wake: Duration,
    pub(crate) waiters: Waiters,
    /// The first topic of the next multi-topic reserve.
    pub(crate) rotate: AtomicUsize,
    /// Partitions this process has put in the registry (as their topic), each with the
    /// partition's purge count when it did: a push that answers another count registers the
    /// topic again.
    pub(crate) registered: Mutex<HashMap<Part, u64>>,
    /// Each topic's partitions, read from its home's settings ([`Ops::parts`]).
    pub(crate) layouts: Mutex<HashMap<Topic, Layout>>,
    /// The registrations sent again in a task of their own while the registry's primary
    /// does not answer (`ops::push`), by their topics.
    pub(crate) registering: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The topic registry's and the paused set's members as this process last read them
    /// (`ops::topics`): a cluster's listing answers them while their slot does not answer.
    pub(crate) listed: Mutex<[Option<Vec<Topic>>; 2]>,
    /// Topics whose last long-poll in this process ended with nothing, and when
    /// (`reserve::Look::First`).
    pub(crate) quiet: Mutex<HashMap<Topic, Instant>>,
    /// Dropping it stops the waker task.
    pub(crate) _stop: oneshot::Sender<()>,
}

impl Ops {
    /// An `FCALL` of `function` with the partition's keys; the caller adds the arguments.
    pub(crate) fn fcall(&self, function: &str, part: &Part) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(function).arg(TOPIC_KEY_NAMES.len());
        self.keys.each_topic_key(part, |k| {
            cmd.arg(k);
        });
        cmd
    }

    /// The partitions of `topic`, as read at most [`LAYOUT_TTL`] ago.
    pub(crate) async fn parts(&self, topic: &Topic) -> Result<Arc<[Part]>> {
        let cached = self
            .lock_layouts()
            .get(topic)
            .filter(|l| l.read.elapsed() < LAYOUT_TTL)
            .map(|l| l.parts.clone());
        match cached {
            Some(parts) => Ok(parts),
            None => self.read_parts(topic).await,
        }
    }

    /// Reads `topic`'s partition count from its home's settings (a negative count: a
    /// change to that many is under way, `ops::config`), and keeps it.
    pub(crate) async fn read_parts(&self, topic: &Topic) -> Result<Arc<[Part]>> {
        let stored = self.stored_count(topic).await?;
        Ok(self.learn_count(topic, stored))
    }

    /// The partition count `topic`'s home holds: 1 when unset, `-n` while a change to `n`
    /// is under way (`ops::config`).
    pub(crate) async fn stored_count(&self, topic: &Topic) -> Result<i64> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.keys.config(&Part::whole(topic)))
            .arg("partitions");
        let v: Option<i64> = self
            .conn
            .query(&cmd, "reading a topic's partition count")
            .await?;
        Ok(v.unwrap_or(1))
    }

    /// One call of `function` on every partition of `topic` (its count read afresh), each
    /// with the arguments `args` adds, in one pipeline: the partitions and their replies,
    /// in the same order.
    pub(crate) async fn on_every_part(
        &self,
        topic: &Topic,
        (function, what): (&str, &'static str),
        args: impl Fn(&mut Cmd),
    ) -> Result<(Arc<[Part]>, Vec<redis::Value>)> {
        let parts = self.read_parts(topic).await?;
        let invs = self.every_part_calls(&parts, function, args);
        let replies = self.conn.pipeline(&invs, what).await?;
        Ok((parts, replies))
    }

    /// One call of `function` on each of `parts`, in their order, each with the arguments
    /// `args` adds.
    pub(crate) fn every_part_calls(
        &self,
        parts: &[Part],
        function: &str,
        args: impl Fn(&mut Cmd),
    ) -> Vec<Cmd> {
        parts
            .iter()
            .map(|part| {
                let mut inv = self.fcall(function, part);
                args(&mut inv);
                inv
            })
            .collect()
    }

    /// Keeps `count` (its absolute value; 0 as 1) as `topic`'s partition count, and answers
    /// its partitions.
    pub(crate) fn learn_count(&self, topic: &Topic, count: i64) -> Arc<[Part]> {
        let n = u16::try_from(count.unsigned_abs())
            .unwrap_or(delayq_core::MAX_PARTITIONS)
            .max(1);
        let mut layouts = self.lock_layouts();
        let parts = match layouts.get(topic) {
            Some(l) if l.parts.len() == usize::from(n) => l.parts.clone(),
            _ => Part::all(topic, n),
        };
        layouts.insert(
            topic.clone(),
            Layout {
                parts: parts.clone(),
                read: Instant::now(),
            },
        );
        parts
    }

    fn lock_layouts(&self) -> std::sync::MutexGuard<'_, HashMap<Topic, Layout>> {
        self.layouts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The partition that holds (or would hold) job `id` of `topic`.
    pub(crate) async fn part_of(&self, topic: &Topic, id: &JobId) -> Result<Part> {
        Ok(route(&self.parts(topic).await?, id))
    }

    /// After an operation on job `id` found no such job in `part`: the job's partition under
    /// the topic's count read again, when that is another partition (the topic was emptied
    /// and given another count less than [`LAYOUT_TTL`] ago), for the operation to run
    /// there.
    pub(crate) async fn moved(
        &self,
        topic: &Topic,
        id: &JobId,
        part: &Part,
    ) -> Result<Option<Part>> {
        let now = route(&self.read_parts(topic).await?, id);
        Ok((now != *part).then_some(now))
    }

    /// `INVALID_DELAY`: an absolute time more than 10 years ahead of Redis's clock.
    pub(crate) async fn too_far(&self, at: Timestamp) -> Error {
        at_too_far(at, self.now().await.unwrap_or(Timestamp::EPOCH))
    }
}

/// The partition of job `id` among a topic's `parts`.
pub(crate) fn route(parts: &[Part], id: &JobId) -> Part {
    let n = u16::try_from(parts.len()).unwrap_or(u16::MAX);
    parts
        .get(usize::from(partition_of(id, n)))
        .or(parts.first())
        .cloned()
        .unwrap_or_else(|| unreachable!("a topic has at least one partition"))
}

/// `LEASE_LOST`: the token is not the job's live lease.
pub(crate) fn lease_lost(lease: &Lease) -> Error {
    Error::LeaseLost {
        topic: lease.topic.clone(),
        id: lease.id.clone(),
    }
}

/// The settlements of one topic (`idx`, positions in `leases`, in their given order) as the
/// function calls that settle them: one call for all when no job appears twice, so their
/// order cannot matter (each settles its own job, and the function may take them in any
/// order: acks first, as runs of ARGV); else one call per settlement, in order (a caller that
/// settles one job twice in a call is rare, and gets exactly what separate calls would answer).
pub(crate) fn settle_calls<'a>(
    leases: impl Fn(usize) -> &'a Lease,
    idx: &[usize],
) -> Vec<Vec<usize>> {
    let mut ids = HashSet::new();
    if idx.iter().all(|&i| ids.insert(&leases(i).id)) {
        vec![idx.to_vec()]
    } else {
        idx.iter().map(|&i| vec![i]).collect()
    }
}

/// Why a lease operation (`operation`: ack, nack, touch, bury, release) on `lease` was
/// refused, from its status and value (lib.lua's `refusal`): `LEASE_LOST`, `NOT_FOUND`, or
/// `WRONG_STATE` with the job's state code.
pub(crate) fn refused(
    lease: &Lease,
    operation: &'static str,
    (status, value): (Status, i64),
) -> Error {
    match status {
        Status::LeaseLost => lease_lost(lease),
        Status::NotFound => not_found(&lease.topic, &lease.id),
        Status::WrongState => match JobState::from_code(value) {
            Ok(state) => Error::not_reserved(&lease.topic, &lease.id, state, operation),
            Err(e) => e,
        },
        other => unexpected(operation, other),
    }
}

/// `NOT_FOUND`: no such job.
pub(crate) fn not_found(topic: &Topic, id: &JobId) -> Error {
    Error::NotFound {
        topic: topic.clone(),
        id: id.clone(),
    }
}

/// A status a function never answers for this operation: the data or the library is not
/// what this version wrote.
pub(crate) fn unexpected(what: &str, status: Status) -> Error {
    Error::Internal(format!("{what}: unexpected status {status:?}"))
}
