//! The checkpointer: copies the write-ahead log back into the database file on its own
//! thread and connection, so that most checkpoints' writes and syncs stay off the writer.
//!
//! SQLite's automatic checkpoint runs inside the committing connection after every commit
//! that leaves more than 1000 pages in the log: with `synchronous = NORMAL` that is two
//! fsyncs on the writer thread every 4 MiB of log, a stall of several milliseconds for
//! every request of the next group. Instead, the writer's WAL hook pokes this thread each
//! time the log has grown by [`POKE_BYTES`], and it runs a PASSIVE checkpoint (which never
//! blocks the writer), then syncs the database file so that dirty pages do not pile up in
//! the page cache.
//!
//! A log that a writer keeps appending to is never fully copied by a checkpoint running
//! beside it, so it cannot start over from its beginning and would only grow. When it
//! reaches [`RESET_BYTES`] the writer's hook runs one PASSIVE checkpoint itself: nothing is
//! appended meanwhile and the checkpointer has copied all but the last few frames, so it is
//! short, and it leaves the log fully copied; the next transaction starts the log over.

use std::ffi::c_int;
use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use delayq_core::{Error, Result};
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, OpenFlags};

use crate::error::{dir_err, open_err};

/// Log growth after which the writer asks for a checkpoint.
const POKE_BYTES: i64 = 1 << 20;
/// Log size at which the writer completes a checkpoint itself, so the log starts over: the
/// 64 MiB `journal_size_limit` the log file is cut back to.
const RESET_BYTES: i64 = 64 << 20;

enum Msg {
    Checkpoint,
    Stop,
}

/// The checkpointer thread of a file-backed engine.
pub(crate) struct Checkpointer {
    tx: SyncSender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens the checkpointer's connection on `path`, starts its thread, and installs the
    /// WAL hook on the writer's connection `writer`.
    pub(crate) fn start(path: &Path, writer: &mut Connection) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_err(path, e))?;
        // A connection learns that the database is in WAL mode when it first reads it;
        // until then a checkpoint on it does nothing.
        conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map_err(|e| open_err(path, e))?;
        let db = File::open(path).map_err(|e| dir_err(path, "opening the database file", e))?;
        let (tx, rx) = sync_channel(2);
        let thread = std::thread::Builder::new()
            .name("delayq-sqlite-checkpoint".into())
            .spawn(move || run(conn, db, rx))
            .map_err(|e| Error::unavailable("cannot start the checkpointer thread", e))?;
        let page: i64 = writer
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| open_err(path, e))?;
        let limits = Limits {
            poke: pages(POKE_BYTES, page),
            reset: pages(RESET_BYTES, page),
        };
        let poke = tx.clone();
        let mut next_poke = limits.poke;
        writer
            .wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
                after_commit(wal, pages, &limits, &poke, &mut next_poke);
                // The commit has happened whatever this hook does: an error returned here
                // would make it look failed, so there is none.
                Ok(())
            }))
            .map_err(|e| open_err(path, e))?;
        Ok(Checkpointer {
            tx,
            thread: Some(thread),
        })
    }

    /// Stops the thread and closes its connection; a second call does nothing.
    pub(crate) fn stop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the delayq checkpointer thread panicked");
        }
    }
}

/// [`POKE_BYTES`] and [`RESET_BYTES`] in pages of the database.
#[derive(Clone, Copy)]
struct Limits {
    poke: c_int,
    reset: c_int,
}

fn pages(bytes: i64, page_size: i64) -> c_int {
    c_int::try_from(bytes / page_size.max(512)).unwrap_or(c_int::MAX)
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The writer's WAL hook: `pages` is the log's size after a commit; `next_poke` the size
/// at which to poke the checkpointer next.
fn after_commit(
    wal: &mut Wal,
    pages: c_int,
    limits: &Limits,
    poke: &SyncSender<Msg>,
    next_poke: &mut c_int,
) {
    if pages < *next_poke - limits.poke {
        // The log started over.
        *next_poke = limits.poke;
    }
    if pages >= limits.reset {
        // Busy means the checkpointer is running; the next commit tries again.
        match wal.checkpoint_v2(CheckpointMode::PASSIVE) {
            Ok(_) => *next_poke = limits.poke,
            Err(e) => tracing::debug!(error = %e, pages, "completing a checkpoint was put off"),
        }
    } else if pages >= *next_poke {
        *next_poke = pages + limits.poke;
        match poke.try_send(Msg::Checkpoint) {
            // Full: a checkpoint is already asked for. Disconnected: the engine is closing.
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn run(conn: Connection, db: File, rx: Receiver<Msg>) {
    while let Ok(Msg::Checkpoint) = rx.recv() {
        if let Err(e) = conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
            tracing::warn!(error = %e, "checkpointing the write-ahead log failed; it will be tried again as the log grows");
        }
        // A checkpoint that could not copy the whole log (the writer appended meanwhile)
        // does not sync the database file; sync it here, off the writer's path.
        if let Err(e) = db.sync_data() {
            tracing::warn!(error = %e, "syncing the database file after a checkpoint failed");
        }
    }
}
