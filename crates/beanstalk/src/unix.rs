//! [`UnixSocket`]: the protocol on a Unix domain socket, as beanstalkd's `-l unix:/path`
//! (issue 36): the socket file's life. A stale socket left at the path (a server that was
//! killed) is replaced; a live one (another server listens on it) or any other file is
//! refused with what to do. The file is made with the process's umask, as beanstalkd makes
//! it, and removed when the socket is dropped, once [`crate::serve_unix`] has drained.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tracing::warn;

/// The longest path a Unix socket may be bound at, in bytes (`sun_path` holds 108 with its
/// closing NUL, on Linux).
pub const MAX_SOCKET_PATH: usize = 107;

/// A listening Unix domain socket at a path, for [`crate::serve_unix`]; its file is removed
/// when it is dropped (unless another socket has taken the path since).
#[derive(Debug)]
pub struct UnixSocket {
    pub(crate) listener: UnixListener,
    path: PathBuf,
    /// The socket file's device and inode, so that only this file is removed.
    file: (u64, u64),
}

impl UnixSocket {
    /// Listens at `path`, as beanstalkd's `-l unix:<path>`: a socket file already there is
    /// replaced when nothing listens on it (a stale one); the file is made with the
    /// process's umask. Call it inside a Tokio runtime.
    ///
    /// # Errors
    /// Each says what to do: the path is too long ([`io::ErrorKind::InvalidInput`]),
    /// another server listens on it ([`io::ErrorKind::AddrInUse`]), a file that is not a
    /// socket is there ([`io::ErrorKind::AlreadyExists`]), or the directory does not exist
    /// or may not be written ([`io::ErrorKind::NotFound`],
    /// [`io::ErrorKind::PermissionDenied`]).
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixSocket> {
        let path = path.as_ref();
        let shown = path.display();
        let len = path.as_os_str().len();
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the socket path is empty; give one, e.g. unix:/run/delayq/beanstalk.sock",
            ));
        }
        if len > MAX_SOCKET_PATH {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the socket path {shown} is {len} bytes long, over the {MAX_SOCKET_PATH} a Unix socket's may have; choose a shorter path"
                ),
            ));
        }
        replace_stale(path)?;
        let listener = UnixListener::bind(path).map_err(|e| {
            let todo = match e.kind() {
                io::ErrorKind::NotFound => "its directory does not exist; create it first",
                io::ErrorKind::PermissionDenied => {
                    "this user may not create files in its directory; choose a directory it may write to"
                }
                _ => "choose another path",
            };
            io::Error::new(e.kind(), format!("binding {shown}: {e}; {todo}"))
        })?;
        let meta = std::fs::symlink_metadata(path)?;
        Ok(UnixSocket {
            listener,
            path: path.to_path_buf(),
            file: (meta.dev(), meta.ino()),
        })
    }

    /// The path it listens at.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        // Only the file this socket made: a server started since may have replaced it.
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.file => {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    warn!(path = %self.path.display(), error = %e, "beanstalk: cannot remove the socket file");
                }
            }
            _ => {}
        }
    }
}

/// Removes a stale socket file at `path`, or refuses what must not be removed.
fn replace_stale(path: &Path) -> io::Result<()> {
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("reading {shown}: {e}"))),
    };
    if !meta.file_type().is_socket() {
        let kind = match meta.file_type() {
            t if t.is_dir() => "a directory",
            t if t.is_symlink() => "a symbolic link",
            t if t.is_file() => "a regular file",
            _ => "a special file",
        };
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{shown} is {kind}, not a socket, and only a stale socket is replaced; remove it or choose another path"
            ),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("another server listens on {shown}; stop it or choose another path"),
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            warn!(path = %shown, "beanstalk: replacing a stale socket file (no server listens on it)");
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io::Error::new(
                    e.kind(),
                    format!("removing the stale socket {shown}: {e}"),
                )),
                _ => Ok(()),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "cannot tell whether a server listens on {shown} ({e}); remove it or choose another path"
            ),
        )),
    }
}
