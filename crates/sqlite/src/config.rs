//! [`SqliteConfig`]: where the embedded engine keeps its data and how durable a commit is.

use std::path::PathBuf;

use delayq_core::{Error, Limits, Result};

/// Where the engine keeps its jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A data directory owned by one engine at a time. It holds `delayq.db` (with its
    /// `-wal` and `-shm` files) and `delayq.lock`; it is created when missing.
    Dir(PathBuf),
    /// Nothing on disk: the jobs live as long as the engine. For tests and in-process use.
    Memory,
}

/// When a commit reaches the disk: SQLite's `synchronous` setting in WAL mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every acknowledged write survives a crash of the process (kill -9, panic, OOM kill);
    /// the last commits before an operating system crash or a power loss may be lost.
    /// The write-ahead log is synced at checkpoints only, so commits cost no fsync.
    #[default]
    Normal,
    /// Every acknowledged write also survives an operating system crash or a power loss:
    /// each group commit syncs the write-ahead log once.
    Full,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// Configuration of a [`crate::SqliteEngine`].
///
/// ```
/// use delayq_sqlite::{SqliteConfig, Synchronous};
/// let cfg = SqliteConfig::dir("/var/lib/delayq").with_synchronous(Synchronous::Full);
/// assert_eq!(cfg.synchronous, Synchronous::Full);
/// let for_tests = SqliteConfig::memory();
/// # let _ = for_tests;
/// ```
#[derive(Clone, Debug)]
pub struct SqliteConfig {
    /// The data directory, or memory.
    pub storage: Storage,
    /// How durable an acknowledged write is (default [`Synchronous::Normal`]).
    pub synchronous: Synchronous,
    /// Input limits (body size).
    pub limits: Limits,
    /// The most expired leases and the most due jobs of one topic moved in one commit
    /// (default 1000), so that a large backlog (after a long stop, say) is worked off in
    /// bounded steps between other requests instead of one long transaction.
    pub tick_batch: usize,
    /// The most requests one group commit takes (default 512).
    pub max_group: usize,
    /// Read connections kept open for get, list, stats and topics (default 4).
    pub readers: usize,
    /// The size of a database page in bytes, for a database this engine creates (default
    /// 1024; a power of two from 512 to 65536). An existing database keeps the page size
    /// it was created with. Every page a commit changes is written to the log whole, and a
    /// job pushed with a random due time, reserved or acked changes pages at random
    /// places, so small pages mean less to write per job (4096-byte pages wrote 2.7 times
    /// as many bytes per job; BENCHMARKS.md). Queues of large bodies (tens of KiB) may
    /// prefer 4096: a body larger than a page is stored in a chain of overflow pages.
    pub page_size: u32,
    /// The page cache of the writer's connection, in MiB (default 64). A larger cache keeps
    /// more of the indexes of a big backlog in memory.
    pub cache_mib: u32,
    /// The largest the database file may grow, in bytes (default: no limit but the disk).
    /// As on a full disk, any write that needs a new page past it (a push, but also a
    /// reserve) fails with [`Error::Full`] and changes nothing, while reads, deletes
    /// and purges still work; space they free is reused.
    pub max_db_bytes: Option<u64>,
}

impl SqliteConfig {
    /// The defaults on a data directory.
    pub fn dir(path: impl Into<PathBuf>) -> Self {
        SqliteConfig::new(Storage::Dir(path.into()))
    }

    /// The defaults in memory.
    pub fn memory() -> Self {
        SqliteConfig::new(Storage::Memory)
    }

    fn new(storage: Storage) -> Self {
        SqliteConfig {
            storage,
            synchronous: Synchronous::default(),
            limits: Limits::default(),
            tick_batch: 1000,
            max_group: 512,
            readers: 4,
            page_size: 1024,
            cache_mib: 64,
            max_db_bytes: None,
        }
    }

    /// Sets the durability of a commit.
    pub fn with_synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Sets the input limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Caps the size of the database file.
    pub fn with_max_db_bytes(mut self, bytes: u64) -> Self {
        self.max_db_bytes = Some(bytes);
        self
    }

    /// Checks the ranges.
    pub(crate) fn validate(&self) -> Result<()> {
        let check = |what: &str, v: usize, max: usize| {
            if v == 0 || v > max {
                Err(Error::InvalidConfig {
                    reason: format!("{what} {v} is outside 1 to {max}"),
                })
            } else {
                Ok(())
            }
        };
        check("tick_batch", self.tick_batch, 100_000)?;
        check("max_group", self.max_group, 100_000)?;
        check("readers", self.readers, 1_000)?;
        check("cache_mib", self.cache_mib as usize, 1 << 20)?;
        if !self.page_size.is_power_of_two() || !(512..=65536).contains(&self.page_size) {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "page_size {} is not a power of two from 512 to 65536; use 1024 (the default) or 4096",
                    self.page_size
                ),
            });
        }
        if let Storage::Dir(p) = &self.storage
            && p.as_os_str().is_empty()
        {
            return Err(Error::InvalidConfig {
                reason: "the data directory path is empty; give a directory delayq may create and write, or use SqliteConfig::memory()".into(),
            });
        }
        Ok(())
    }
}
