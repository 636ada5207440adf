//! The operations: each module owns its functions' arguments, the decoding of their
//! replies and what their statuses mean, as `impl Ops` blocks; `engine.rs` checks the
//! caller's input and dispatches here.
//!
//! - `push`: push (chunks, the registry of topics).
//! - `reserve`: reserve and settle-and-reserve (settlements, deliveries, the long-poll).
//! - `lease`: ack, nack, release, touch, bury.
//! - `admin`: get, delete, reschedule, kick, list, stats, topics, purge, now.
//!
//! Each status a function answers becomes an error in one place, below.

pub(crate) mod admin;
pub(crate) mod lease;
pub(crate) mod push;
pub(crate) mod reserve;

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use delayq_core::limits::at_too_far;
use delayq_core::{Error, JobId, Lease, Limits, Timestamp, Topic};
use redis::Cmd;
use tokio::sync::oneshot;

use crate::codec::Status;
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
    /// Topics this process has put in the registry (or seen there).
    pub(crate) registered: Mutex<HashSet<Topic>>,
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

/// Which of `leases` repeat an earlier one exactly (same topic, id and token). A function call
/// never receives a repeat, as its Lua keeps no table of what it settled; the caller answers
/// it `LEASE_LOST`, which is what a second settlement of one lease is, whatever the first
/// answered.
pub(crate) fn repeats<'a>(leases: impl IntoIterator<Item = &'a Lease>) -> Vec<bool> {
    let mut seen = HashSet::new();
    leases.into_iter().map(|l| !seen.insert(l)).collect()
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
