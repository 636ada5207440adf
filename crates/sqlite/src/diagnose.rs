//! Why a write failed, when SQLite only says "I/O error": a look at the data directory,
//! taken only after a write was refused, that names a read-only file system.
//!
//! The kernel makes a file system read-only under the open files after a disk error (ext4
//! `errors=remount-ro`); SQLite then reports each write as a plain I/O error. The probe
//! opens `delayq.lock` for writing (it exists, and opening it changes nothing): on a
//! read-only file system that fails with `EROFS`.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::Path;

use delayq_core::Error;

use crate::open::LOCK_FILE;

/// Whether the file system holding `dir` refuses writes now. The probe opens `delayq.lock`
/// for appending: a kernel that turned the file system read-only after an error (ext4's
/// emergency read-only state) refuses that with `EROFS`, although `statvfs` may still call
/// it writable.
pub(crate) fn read_only(dir: &Path) -> bool {
    OpenOptions::new()
        .append(true)
        .open(dir.join(LOCK_FILE))
        .is_err_and(|io| io.kind() == ErrorKind::ReadOnlyFilesystem)
}

/// `e` as it is, or, when it is [`Error::Unavailable`] and the file system holding `dir`
/// is read-only, with that cause and what to do added to its message.
pub(crate) fn explain(e: Error, dir: &Path) -> Error {
    let Error::Unavailable { message, source } = e else {
        return e;
    };
    if message.contains("read-only file system") || !read_only(dir) {
        return Error::Unavailable { message, source };
    }
    Error::Unavailable {
        message: format!(
            "{message}: the file system holding the data directory {} is read-only (a kernel makes a file system read-only after a disk error: see its log); reads go on, but no write can succeed until it is repaired and mounted writable again, which needs delayq stopped first",
            dir.display()
        ),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_directory_adds_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join(LOCK_FILE), b"").expect("lock file");
        let e = explain(
            Error::Unavailable {
                message: "I/O error".into(),
                source: None,
            },
            dir.path(),
        );
        assert_eq!(
            e.to_string(),
            Error::Unavailable {
                message: "I/O error".into(),
                source: None
            }
            .to_string()
        );
        let other = explain(Error::Internal("x".into()), dir.path());
        assert!(matches!(other, Error::Internal(_)));
    }
}
