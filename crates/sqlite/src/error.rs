//! Mapping SQLite and file-system errors onto the contract's [`Error`], with messages that
//! say what to do.

use std::io;
use std::path::Path;

use delayq_core::Error;
use rusqlite::ErrorCode;

/// Maps a SQLite error raised while doing `what` on a running engine.
///
/// A full disk or database becomes [`Error::Full`]; lock and I/O failures become
/// [`Error::Unavailable`] (retrying later may succeed in both cases);
/// a corrupt file and anything else SQLite reports about data delayq wrote become
/// [`Error::Internal`].
pub(crate) fn db_err(what: &str, e: rusqlite::Error) -> Error {
    let Some(code) = e.sqlite_error_code() else {
        return Error::Internal(format!("{what}: {e}"));
    };
    let message = match code {
        ErrorCode::DiskFull => {
            return Error::full(
                format!(
                    "{what}: the database is full: the disk holding the data directory is full (the write-ahead log needs room to grow), or the database reached its configured max_db_bytes"
                ),
                e,
            );
        }
        ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen => format!(
            "{what}: the database cannot be written ({e}); check that the data directory and its files are writable by this process"
        ),
        ErrorCode::SystemIoFailure | ErrorCode::NoLargeFileSupport => {
            format!("{what}: I/O error ({e}); check the disk and the kernel log")
        }
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => format!(
            "{what}: the database is locked by another connection ({e}); make sure no other program writes delayq.db"
        ),
        ErrorCode::OutOfMemory => format!("{what}: SQLite ran out of memory; free memory"),
        ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
            return Error::Internal(format!(
                "{what}: the database file is corrupt ({e}); stop delayq, then restore the data directory from a backup or move it away to start empty"
            ));
        }
        _ => return Error::Internal(format!("{what}: {e}")),
    };
    Error::unavailable(message, e)
}

/// Maps a SQLite error raised while opening the database at `path`: a corrupt or foreign
/// file and an unwritable directory are configuration errors, found before any request.
pub(crate) fn open_err(path: &Path, e: rusqlite::Error) -> Error {
    let p = path.display();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Error::InvalidConfig {
            reason: format!(
                "{p} is corrupt or is not an SQLite database ({e}); restore the data directory from a backup, or move the file away to start with an empty queue"
            ),
        },
        Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen) => {
            Error::InvalidConfig {
                reason: format!(
                    "cannot open {p} for writing ({e}); give this process write access to the data directory and its files, or choose another directory"
                ),
            }
        }
        _ => db_err(&format!("opening {p}"), e),
    }
}

/// Maps an error creating or locking the data directory `dir`.
pub(crate) fn dir_err(dir: &Path, doing: &str, e: io::Error) -> Error {
    let d = dir.display();
    match e.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => Error::full(
            format!("{doing} in the data directory {d}: the disk is full"),
            e,
        ),
        io::ErrorKind::WouldBlock => Error::Unavailable {
            message: format!(
                "the data directory {d} is in use by another delayq engine (its delayq.lock is held); stop that engine (or drop every handle of it in this process) before opening the directory again, or use another directory"
            ),
            source: Some(e.into()),
        },
        _ => Error::InvalidConfig {
            reason: format!(
                "{doing} in the data directory {d} failed: {e}; point the engine at a directory this process can create and write"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn a_full_disk_is_full_and_says_so() {
        let e = db_err("committing", sqlite(rusqlite::ffi::SQLITE_FULL));
        assert!(matches!(e, Error::Full { .. }), "{e:?}");
        assert!(e.is_retryable());
        assert!(e.to_string().contains("disk"), "{e}");
        assert!(e.to_string().contains("max_db_bytes"), "{e}");
        let e = dir_err(
            Path::new("/data/q"),
            "creating",
            io::Error::from(io::ErrorKind::StorageFull),
        );
        assert!(matches!(e, Error::Full { .. }), "{e:?}");
    }

    #[test]
    fn corruption_is_internal_at_run_time_and_config_at_open() {
        let e = db_err("reading", sqlite(rusqlite::ffi::SQLITE_CORRUPT));
        assert!(matches!(e, Error::Internal(_)), "{e:?}");
        let e = open_err(
            Path::new("/x/delayq.db"),
            sqlite(rusqlite::ffi::SQLITE_NOTADB),
        );
        assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
        assert!(e.to_string().contains("backup"), "{e}");
    }

    #[test]
    fn a_held_lock_names_the_directory() {
        let e = dir_err(
            Path::new("/data/q"),
            "locking",
            io::Error::from(io::ErrorKind::WouldBlock),
        );
        assert!(e.is_retryable());
        assert!(e.to_string().contains("/data/q"), "{e}");
    }
}
