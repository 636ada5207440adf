//! The read connections of a file-backed engine: a small pool, opened on demand, each used
//! by one blocking read at a time. In WAL mode they read the last commit while the writer
//! writes, so reads never wait for a group commit.

use std::path::PathBuf;
use std::sync::Mutex;

use delayq_core::Result;
use rusqlite::{Connection, OpenFlags};

use crate::error::open_err;

/// The pool.
pub(crate) struct Readers {
    path: PathBuf,
    keep: usize,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(crate) fn new(path: PathBuf, keep: usize) -> Self {
        Readers {
            path,
            keep,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` on an idle connection (opening one when none is idle), then keeps the
    /// connection for the next read unless `keep` are idle already.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.idle().pop();
        let conn = match conn {
            Some(c) => c,
            None => self.open()?,
        };
        let out = f(&conn);
        let mut idle = self.idle();
        if idle.len() < self.keep {
            idle.push(conn);
        }
        out
    }

    /// Closes the idle connections.
    pub(crate) fn close(&self) {
        self.idle().clear();
    }

    fn open(&self) -> Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(&self.path, flags).map_err(|e| open_err(&self.path, e))?;
        // Reads never write; query_only makes sure of it.
        conn.execute_batch("PRAGMA query_only = 1")
            .map_err(|e| open_err(&self.path, e))?;
        crate::open::stable_plans(&conn, &self.path)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        // A connection is pushed or popped whole, so a poisoned pool is still consistent.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}
