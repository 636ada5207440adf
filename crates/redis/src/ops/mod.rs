//! The operations: each module owns its functions' arguments, the decoding of their
//! replies and what their statuses mean, as `impl Ops` blocks; `engine.rs` checks the
//! caller's input and dispatches here.
//!
//! - `push`: push (chunks, the registry of topics).
//! - `reserve`: reserve and settle-and-reserve (settlements, deliveries, the long-poll).
//! - `lease`: ack, nack, release, touch, bury.
//! - `admin`: get, delete, reschedule, kick, list, stats, topics, purge, now.
//! - `config`: a topic's settings (set, read), and their encoding as function arguments.
//! - `schedules`: stored schedules (put, read, list, delete, progress) and their encoding.
//!
//! Each status a function answers becomes an error in one place, below.

pub(crate) mod admin;
pub(crate) mod config;
pub(crate) mod lease;
pub(crate) mod push;
pub(crate) mod reserve;
pub(crate) mod schedules;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use delayq_core::limits::at_too_far;
use delayq_core::{Error, JobId, Lease, Limits, Timestamp, Topic};
use redis::Cmd;
use tokio::sync::oneshot;

use crate::codec::{Status, state_from_code};
use crate::conn::Conn;
use crate::keys::KeySpace;
use crate::wait::Waiters;

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
    /// Topics this process has put in the registry, each with the topic's purge count when
    /// it did: a push that answers another count registers the topic again.
    pub(crate) registered: Mutex<HashMap<Topic, u64>>,
    /// Dropping it stops the waker task.
    pub(crate) _stop: oneshot::Sender<()>,
}

impl Ops {
    /// An `FCALL` of `function` with the topic's keys; the caller adds the arguments.
    pub(crate) fn fcall(&self, function: &str, topic: &Topic) -> Cmd {
        let keys = self.keys.topic(topic);
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(function).arg(keys.len());
        for k in keys {
            cmd.arg(k);
        }
        cmd
    }

    /// `INVALID_DELAY`: an absolute time more than 10 years ahead of Redis's clock.
    pub(crate) async fn too_far(&self, at: Timestamp) -> Error {
        at_too_far(at, self.now().await.unwrap_or(Timestamp::EPOCH))
    }
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
        Status::WrongState => match state_from_code(value) {
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
