//! Opening the store: the data directory and its lock, the writer's connection and its
//! settings (WAL, `synchronous`), the schema, and recovery of the in-memory state (topics,
//! timer index) from the tables.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use delayq_core::{Error, Result, Topic, TopicConfig};
use rusqlite::{Connection, OpenFlags};

use crate::config::{SqliteConfig, Storage};
use crate::error::{dir_err, open_err};
use crate::ops::tick::EARLIEST_EXPIRY;
use crate::schema;
use crate::settings::{self, CONFIG_COLS};
use crate::shared::Shared;
use crate::timers::Kind;

/// The database file in a data directory.
pub const DB_FILE: &str = "delayq.db";
/// The lock file in a data directory, held (flock) while an engine owns the directory.
pub const LOCK_FILE: &str = "delayq.lock";

/// How long an open waits for a held lock before it reports the directory as in use.
const LOCK_PATIENCE: Duration = Duration::from_millis(250);

/// An opened store.
pub(crate) struct Store {
    /// The writer's connection, with the schema at the latest version.
    pub(crate) conn: Connection,
    /// The database file, for read connections; `None` in memory.
    pub(crate) path: Option<PathBuf>,
    /// The held lock of the data directory; `None` in memory.
    pub(crate) lock: Option<File>,
}

/// Opens (creating when missing) the store of `config`.
pub(crate) fn open_store(config: &SqliteConfig) -> Result<Store> {
    match &config.storage {
        Storage::Memory => {
            let mut conn =
                Connection::open_in_memory().map_err(|e| open_err(Path::new(":memory:"), e))?;
            tune(&conn, config, Path::new(":memory:"))?;
            schema::migrate(&mut conn, Path::new(":memory:"))?;
            Ok(Store {
                conn,
                path: None,
                lock: None,
            })
        }
        Storage::Dir(dir) => {
            let lock = lock_dir(dir)?;
            let path = dir.join(DB_FILE);
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let mut conn =
                Connection::open_with_flags(&path, flags).map_err(|e| open_err(&path, e))?;
            // Only a database not yet written takes the page size; switching to WAL below
            // writes it. An existing database keeps its own.
            conn.execute_batch(&format!("PRAGMA page_size = {}", config.page_size))
                .map_err(|e| open_err(&path, e))?;
            enable_wal(&conn, &path)?;
            tune(&conn, config, &path)?;
            schema::migrate(&mut conn, &path)?;
            Ok(Store {
                conn,
                path: Some(path),
                lock: Some(lock),
            })
        }
    }
}

/// Creates the directory when missing and takes its lock, so one engine owns it.
fn lock_dir(dir: &Path) -> Result<File> {
    std::fs::create_dir_all(dir).map_err(|e| dir_err(dir, "creating the directory", e))?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| dir_err(dir, "creating delayq.lock", e))?;
    // The lock belongs to the open file, and a process that forks (to spawn a child) shares
    // the open file until the child execs. So a lock released by an engine that was just
    // dropped can stay held for a moment by a child being spawned elsewhere in this process:
    // look again for a short while before calling the directory busy.
    let give_up = Instant::now() + LOCK_PATIENCE;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(lock),
            Err(TryLockError::WouldBlock) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(dir_err(
                    dir,
                    "locking",
                    std::io::Error::from(std::io::ErrorKind::WouldBlock),
                ));
            }
            Err(TryLockError::Error(e)) => return Err(dir_err(dir, "locking delayq.lock", e)),
        }
    }
}

/// Switches the database to WAL mode: readers then never block the writer, and a commit
/// appends to the log instead of rewriting pages.
fn enable_wal(conn: &Connection, path: &Path) -> Result<()> {
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| open_err(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::InvalidConfig {
            reason: format!(
                "{} cannot use write-ahead logging (journal mode stays {mode}); put the data directory on a local file system",
                path.display()
            ),
        });
    }
    Ok(())
}

/// The writer connection's settings.
fn tune(conn: &Connection, config: &SqliteConfig, path: &Path) -> Result<()> {
    // The WAL is truncated back to 64 MiB after a checkpoint that let it grow (a burst),
    // so the disk use of an idle queue stays bounded.
    let sql = format!(
        "PRAGMA synchronous = {};
         PRAGMA cache_size = -{};
         PRAGMA temp_store = MEMORY;
         PRAGMA journal_size_limit = 67108864;",
        config.synchronous.pragma(),
        u64::from(config.cache_mib) * 1024,
    );
    conn.execute_batch(&sql).map_err(|e| open_err(path, e))?;
    if let Some(bytes) = config.max_db_bytes {
        let page: u64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| open_err(path, e))?;
        let pages = bytes.div_ceil(page.max(512)).max(1);
        conn.execute_batch(&format!("PRAGMA max_page_count = {pages}"))
            .map_err(|e| open_err(path, e))?;
    }
    stable_plans(conn, path)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Turns on SQLite's query planner stability guarantee. The bundled SQLite is built with
/// STAT4, which otherwise re-prepares a cached statement whenever a parameter used in a range
/// (`deadline <= ?`, with a new `now` every call) changes: a parse and a plan per call.
/// Plans here come from the partial indexes, not from parameter values.
pub(crate) fn stable_plans(conn: &Connection, path: &Path) -> Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| open_err(path, e))?;
    Ok(())
}

/// Rebuilds the in-memory state from the tables: every topic with its settings, and per
/// topic its earliest
/// due time and lease deadline. Jobs themselves stay on disk; the writer's first tick
/// applies whatever fell due while the engine was closed.
pub(crate) fn recover(conn: &Connection, shared: &Shared, path: &Path) -> Result<()> {
    let err = |e| open_err(path, e);
    let topics: Vec<(i64, String, TopicConfig)> = conn
        .prepare(&format!("SELECT tid, name, {CONFIG_COLS} FROM topics"))
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, settings::decode(r, 2)?)))?
                .collect()
        })
        .map_err(err)?;
    let mut next_lease = conn
        .prepare("SELECT min(deadline) FROM jobs WHERE tid = ?1 AND state = 3")
        .map_err(err)?;
    let mut next_expiry = conn.prepare(EARLIEST_EXPIRY).map_err(err)?;
    let paused: Vec<(i64, u64)> = conn
        .prepare("SELECT tid, paused_until FROM topics WHERE paused_until IS NOT NULL")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(err)?;
    for (tid, until) in paused {
        shared.registry.set_paused(tid, Some(until));
    }
    let mut timers = shared.timers();
    for (tid, name, config) in topics {
        let topic = Topic::new(name).map_err(|e| Error::InvalidConfig {
            reason: format!(
                "{} holds an invalid topic name ({e}); it was not written by this delayq",
                path.display()
            ),
        })?;
        shared.registry.add(tid, topic);
        shared.registry.set_config(tid, config);
        let due = crate::waiting::earliest(conn, tid).map_err(err)?;
        let lease: Option<u64> = next_lease.query_row([tid], |r| r.get(0)).map_err(err)?;
        timers.set(tid, Kind::Due, due);
        timers.set(tid, Kind::Lease, lease);
        let expiry: Option<u64> = next_expiry.query_row([tid], |r| r.get(0)).map_err(err)?;
        timers.set(tid, Kind::Expiry, expiry);
    }
    Ok(())
}
