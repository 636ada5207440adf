//! The writer thread: the one connection that writes, and the engine's timer.
//!
//! It sleeps on its request channel until a request arrives or the timer index's earliest
//! entry is due (never polling). Then it drains up to `max_group` pending requests and runs
//! them all in one `BEGIN IMMEDIATE … COMMIT` (group commit): first what time did (expired
//! leases fail; jobs that fell due wake their waiters, a read only), then each request, so
//! that a request that fails leaves no trace while the others commit (one refused before
//! writing needs nothing undone; one that failed after writing makes the group start over
//! without it). Callers are answered only after the
//! commit, so an acknowledged write is on disk; if the commit fails, every request of the
//! group gets [`Error::Full`] when the disk or database is full and nothing was written,
//! else [`Error::Unavailable`]; a failed `COMMIT` answers `Unavailable` saying that the write
//! may or may not be stored (it can have reached the log, see `unsure`), and so does a
//! commit after which the data directory's file system is found read-only (its `fsync`
//! cannot be trusted, see `Writer::landed`). A group that writes
//! also raises the clock's high-water mark in its transaction (`clock.rs`), read last, so it
//! is at least every time the group's requests read.
//!
//! In memory mode, reads run here too, after the group's commit.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use delayq_core::{Error, Result};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::db_err;
use crate::ops::tick::{expire_jobs, expire_leases, fall_due};
use crate::shared::{Effect, Shared};
use crate::timers::Kind;
use crate::tx::Tx;

/// How long the writer leaves due timers alone after a tick or a commit failed, so that a
/// lasting failure (a full disk) does not turn into a busy loop.
const TICK_PAUSE: Duration = Duration::from_secs(1);

/// A request to the writer thread.
pub(crate) enum Request {
    /// A write, run in the next group transaction.
    Write(Box<dyn WriteWork>),
    /// A read on the writer's connection (memory mode), run after the group's commit.
    Read(Box<dyn FnOnce(&Connection) + Send>),
}

/// A write request: run inside the group transaction, answered after it ends.
pub(crate) trait WriteWork: Send {
    /// Runs the request (again, if its group had to start over); returns whether its
    /// writes are to be kept.
    fn run(&mut self, tx: &mut Tx<'_>) -> bool;
    /// Answers the caller: the group committed (`None`), or failed: the error every
    /// request that was not refused by itself gets.
    fn answer(self: Box<Self>, failed: Option<&Error>);
}

/// A write request made of a function on [`Tx`] and the channel its answer goes to. The
/// function may run more than once: when another request of its group loses the
/// transaction, the group runs again without that request.
pub(crate) struct Call<T, F> {
    f: F,
    out: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Call<T, F> {
    pub(crate) fn new(f: F, reply: oneshot::Sender<Result<T>>) -> Self {
        Call {
            f,
            out: None,
            reply,
        }
    }
}

impl<T, F> WriteWork for Call<T, F>
where
    T: Send,
    F: Fn(&mut Tx<'_>) -> Result<T> + Send,
{
    fn run(&mut self, tx: &mut Tx<'_>) -> bool {
        let out = (self.f)(tx).and_then(|v| tx.flush().map(|()| v));
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn answer(self: Box<Self>, failed: Option<&Error>) {
        let out = match (self.out, failed) {
            (Some(Ok(v)), None) => Ok(v),
            // A refused request wrote nothing: its own error stands whatever the group did.
            (Some(Err(e)), _) => Err(e),
            (_, Some(why)) => Err(again(why)),
            (None, None) => Err(Error::Internal(
                "a write request was answered without being run".into(),
            )),
        };
        // The caller may have gone away (a dropped future); its answer is then not needed.
        let _ = self.reply.send(out);
    }
}

/// The writer: its connection, the shared state and the group-commit settings.
pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) shared: Arc<Shared>,
    pub(crate) tick_batch: usize,
    pub(crate) max_group: usize,
    /// Due timers are left alone until then after a failed tick.
    pub(crate) tick_pause: Option<Instant>,
    /// The data directory; `None` in memory, where nothing outlives the engine. With one,
    /// a commit that writes raises the clock's high-water mark (see `clock.rs`), and is
    /// answered only once the file system is known to be still writable (see
    /// [`Writer::landed`]).
    pub(crate) dir: Option<PathBuf>,
}

impl Writer {
    /// Serves requests until every sender is gone, then returns (closing the connection).
    pub(crate) fn run(mut self, rx: Receiver<Request>) {
        loop {
            let first = match self.wake_at() {
                None => match rx.recv() {
                    Ok(r) => Some(r),
                    Err(_) => return,
                },
                Some(at) => match at.checked_duration_since(Instant::now()) {
                    None => None,
                    Some(wait) if wait.is_zero() => None,
                    Some(wait) => match rx.recv_timeout(wait) {
                        Ok(r) => Some(r),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => return,
                    },
                },
            };
            let mut batch: Vec<Request> = first.into_iter().collect();
            let mut closed = false;
            while batch.len() < self.max_group {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            self.process(batch);
            if closed {
                return;
            }
        }
    }

    /// When the timer must fire: the earliest timer entry, or the end of a tick pause.
    fn wake_at(&self) -> Option<Instant> {
        let earliest = self.shared.timers().earliest()?;
        let at = self.shared.clock.instant_of(earliest);
        Some(match self.tick_pause {
            Some(pause) if pause > at => pause,
            _ => at,
        })
    }

    /// Runs one group: what is due and every write in one transaction, then the reads.
    fn process(&mut self, batch: Vec<Request>) {
        let now = self.shared.clock.now_ms();
        if self.tick_pause.is_some_and(|p| p <= Instant::now()) {
            self.tick_pause = None;
        }
        let due = if self.tick_pause.is_none() {
            self.shared.timers().due(now)
        } else {
            Vec::new()
        };
        let mut writes = Vec::new();
        let mut reads = Vec::new();
        for r in batch {
            match r {
                Request::Write(w) => writes.push(w),
                Request::Read(r) => reads.push(r),
            }
        }
        if !writes.is_empty() || !due.is_empty() {
            self.commit_group(now, &due, writes);
        }
        for read in reads {
            read(&self.conn);
        }
    }

    /// Commits `writes` (and what is due) in one transaction and answers them. When SQLite
    /// loses the transaction while a request runs (a full disk, an I/O error), that request
    /// is answered with its error and the others run again in a new transaction, so one
    /// failing request does not fail its whole group.
    fn commit_group(&mut self, now: u64, due: &[Due], writes: Vec<Box<dyn WriteWork>>) {
        let mut pending = writes;
        loop {
            match self.try_group(now, due, &mut pending) {
                Group::Committed(effects, doubt) => {
                    // Unsure or not, the commit is in this process's view of the store.
                    self.shared.apply(effects);
                    for w in pending {
                        w.answer(doubt.as_ref());
                    }
                    return;
                }
                Group::Failed(why) => {
                    // The due timers were not moved on: leave them alone for a while rather
                    // than retry a failing commit in a loop.
                    self.tick_pause = Some(Instant::now() + TICK_PAUSE);
                    for w in pending {
                        w.answer(Some(&why));
                    }
                    return;
                }
                Group::Lost { at, why } => {
                    pending.remove(at).answer(Some(&why));
                    if pending.is_empty() && due.is_empty() {
                        return;
                    }
                }
            }
        }
    }

    /// One attempt at a group transaction.
    fn try_group(&mut self, now: u64, due: &[Due], pending: &mut [Box<dyn WriteWork>]) -> Group {
        if !self.conn.is_autocommit() {
            // Only a bug could leave a transaction open here; start clean rather than
            // commit someone else's half.
            self.rollback();
        }
        let mut effects = Vec::new();
        // Jobs falling due are only read about: with no request and no expired lease, the
        // group is a read transaction and its commit writes nothing.
        let reads_only = pending.is_empty() && due.iter().all(|d| d.1 == Kind::Due);
        let mut begun = self.sql(if reads_only {
            "BEGIN"
        } else {
            "BEGIN IMMEDIATE"
        });
        if begun.is_ok() && !due.is_empty() {
            self.tick(now, due, &mut effects);
            if self.conn.is_autocommit() {
                // The failed tick took the transaction with it: start the requests' own.
                effects.clear();
                begun = self.sql("BEGIN IMMEDIATE");
            }
        }
        if let Err(e) = begun {
            return Group::Failed(not_committed(&db_err("starting a transaction", e)));
        }
        for (at, w) in pending.iter_mut().enumerate() {
            match self.run_one(w.as_mut(), &mut effects) {
                Ok(()) => {}
                Err(why) => {
                    self.rollback();
                    return Group::Lost {
                        at,
                        why: not_committed(&why),
                    };
                }
            }
        }
        if self.dir.is_some()
            && !reads_only
            && let Err(e) = crate::clock::write_mark(&self.conn, self.shared.clock.now_ms())
        {
            self.rollback();
            return Group::Failed(not_committed(&db_err("recording the engine's time", e)));
        }
        match self.sql("COMMIT") {
            Ok(()) if reads_only => Group::Committed(effects, None),
            Ok(()) => Group::Committed(effects, self.landed()),
            Err(e) => {
                self.rollback();
                Group::Failed(unsure(&db_err("committing", e)))
            }
        }
    }

    /// `None` when a commit SQLite reported done can be answered as stored; else the
    /// "may or may not be stored" error to answer instead. A file system that turned
    /// read-only under the open files (ext4 after a disk error, `errors=remount-ro`) can
    /// answer the commit's `fsync` with success while the log's last pages never reach the
    /// disk: the commit then vanishes with the repair. Such a file system is read-only by
    /// the time the `fsync` returns, so a look at it after every commit that wrote (one
    /// `open`, see `diagnose`) turns that silent loss into an honest unsure answer.
    fn landed(&self) -> Option<Error> {
        let dir = self.dir.as_deref()?;
        crate::diagnose::read_only(dir).then(|| {
            unsure(&Error::Unavailable {
                message: format!(
                    "the file system holding the data directory {} turned read-only as the commit ended",
                    dir.display()
                ),
                source: None,
            })
        })
    }

    /// Runs one write. A request that fails having written nothing (a refusal: every check
    /// runs before the first write) needs no undoing; one that fails after writing makes the
    /// group start over without it, as when SQLite loses the transaction. So a request's
    /// writes are all kept or all gone, without a savepoint per request (which would make
    /// SQLite copy every page a request writes into a statement journal).
    /// Errs with why the group must start over without this request.
    fn run_one(&self, w: &mut dyn WriteWork, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let changes = self.conn.total_changes();
        let mut tx = Tx::new(&self.conn, &self.shared, self.tick_batch);
        let keep = w.run(&mut tx);
        if self.conn.is_autocommit() {
            return Err(lost("SQLite rolled the transaction back after an error"));
        }
        if keep {
            effects.extend(tx.take_effects());
        } else if self.conn.total_changes() != changes {
            return Err(lost("the write failed after changing rows"));
        }
        Ok(())
    }

    /// Applies what time did to the topics of `due`, in a savepoint of its own: a failure
    /// is logged and retried after [`TICK_PAUSE`] without failing the group's requests.
    fn tick(&mut self, now: u64, due: &[Due], effects: &mut Vec<Effect>) {
        if let Err(e) = self.sql("SAVEPOINT t") {
            tracing::error!(error = %e, "cannot start applying due jobs and expired leases");
            self.tick_pause = Some(Instant::now() + TICK_PAUSE);
            return;
        }
        let mut tx = Tx::new(&self.conn, &self.shared, self.tick_batch);
        let batch = self.tick_batch;
        let done = due
            .iter()
            .try_for_each(|&(tid, kind, since)| match kind {
                Kind::Lease => expire_leases(&mut tx, tid, now, batch),
                Kind::Expiry => expire_jobs(&mut tx, tid, now, batch),
                Kind::Due => fall_due(&mut tx, tid, since, now, batch),
            })
            .and_then(|()| tx.flush());
        match done {
            Ok(()) => effects.extend(tx.take_effects()),
            Err(e) => {
                tracing::error!(error = %e, "applying due jobs and expired leases failed; retrying in 1 s");
                self.tick_pause = Some(Instant::now() + TICK_PAUSE);
                if !self.conn.is_autocommit() {
                    let _ = self.sql("ROLLBACK TO t");
                }
            }
        }
        if !self.conn.is_autocommit() {
            let _ = self.sql("RELEASE t");
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit()
            && let Err(e) = self.sql("ROLLBACK")
        {
            tracing::error!(error = %e, "rolling back a failed group commit failed");
        }
    }

    fn sql(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([]).map(|_| ())
    }
}

/// A due timer entry: (topic, kind, the entry's time).
type Due = (i64, Kind, u64);

/// How one attempt at a group transaction ended.
enum Group {
    /// Committed, with the effects to apply, and the answer for every request when the
    /// commit cannot be trusted to have reached the disk ([`Writer::landed`]).
    Committed(Vec<Effect>, Option<Error>),
    /// Failed as a whole (begin or commit failed): every request gets this error.
    Failed(Error),
    /// SQLite lost the transaction while request `at` ran, or the request failed after
    /// writing: the group starts over without it.
    Lost { at: usize, why: Error },
}

/// The answer of a request whose group was not committed because of `why`: a full disk or
/// database stays [`Error::Full`] (the caller is to free space), anything else is
/// [`Error::Unavailable`].
fn not_committed(why: &Error) -> Error {
    let message = match why {
        Error::Unavailable { message, .. } | Error::Full { message, .. } => {
            format!("the write was not committed: {message}")
        }
        other => format!("the write was not committed: {other}"),
    };
    match why {
        Error::Full { .. } => Error::Full {
            message,
            source: None,
        },
        _ => Error::Unavailable {
            message,
            source: None,
        },
    }
}

/// [`Group::Lost`]'s reason when SQLite, not the request, gave up its writes.
fn lost(why: &str) -> Error {
    Error::Unavailable {
        message: why.into(),
        source: None,
    }
}

/// The same answer again, for another request of the group (`Error` is not `Clone`).
fn again(why: &Error) -> Error {
    match why {
        Error::Full { message, .. } => Error::Full {
            message: message.clone(),
            source: None,
        },
        Error::Unavailable { message, .. } => Error::Unavailable {
            message: message.clone(),
            source: None,
        },
        other => Error::Internal(other.to_string()),
    }
}

/// The answer of a group whose `COMMIT` failed. The transaction is rolled back in this
/// process, and the next commit overwrites its frames in the log; but the commit may have
/// reached the log before the error (a failed sync, an index that could not grow): if the
/// process stops, or the file system fails, before another commit, the log still holds it
/// and the next open replays it. So the outcome is unknown to the caller, as after a
/// network cut: the write is either stored whole or not at all, and retrying is safe. It is
/// never [`Error::Full`], which says that nothing was written.
fn unsure(why: &Error) -> Error {
    let reason = match why {
        Error::Unavailable { message, .. } | Error::Full { message, .. } => message.clone(),
        other => other.to_string(),
    };
    Error::Unavailable {
        message: format!(
            "the commit failed, so the write may or may not be stored (whole or not at all); retry it: a push with the same id is idempotent, and a settlement that landed answers as a repeated one does: {reason}"
        ),
        source: None,
    }
}
