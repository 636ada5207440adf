//! The protocol on a Unix domain socket (`delayq serve --beanstalk unix:/path`, as
//! beanstalkd's `-l unix:/path`): greenstalk, a beanstalkd client from PyPI, unchanged over
//! the socket (what its own unix-socket tests do); a stale socket file is replaced, a live
//! one and any other file refused and left as they were; the file is made with the umask,
//! as `bind` makes it (beanstalkd's way), and removed once the server has stopped.
//!
//! greenstalk runs in the Python client's venv (`clients/python/venv.sh` makes it from the
//! locked `requirements-dev.lock` when missing, as the clients' tests do), or in the Python
//! that `DELAYQ_GREENSTALK_PYTHON` names.
//!
//! See: issue 36.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

mod common;
use common::memory_engine;

/// A server on a Unix socket, stopped by [`Served::stop`].
struct Served {
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Served {
    fn start(path: &Path) -> Served {
        let socket = delayq_beanstalk::UnixSocket::bind(path).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(delayq_beanstalk::serve_unix(
            socket,
            memory_engine(),
            delayq_beanstalk::Options::default(),
            async move {
                let _ = stopped.await;
            },
        ));
        Served { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the server stops within 20 s")
            .expect("the server task")
            .expect("serving");
    }
}

/// One command over a fresh connection to `path`; its first answer line.
async fn ask(path: &Path, cmd: &str) -> String {
    let stream = UnixStream::connect(path).await.unwrap();
    let (r, mut w) = stream.into_split();
    w.write_all(cmd.as_bytes()).await.unwrap();
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        BufReader::new(r).read_line(&mut line),
    )
    .await
    .expect("an answer within 20 s")
    .unwrap();
    line.trim_end().to_string()
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python with greenstalk: `DELAYQ_GREENSTALK_PYTHON`, else the Python client's venv,
/// made (or refreshed) by `clients/python/venv.sh`.
fn python_with_greenstalk() -> PathBuf {
    if let Some(p) = std::env::var_os("DELAYQ_GREENSTALK_PYTHON") {
        return PathBuf::from(p);
    }
    let script = repo().join("clients/python/venv.sh");
    let out = Command::new(&script).output().unwrap_or_else(|e| {
        panic!(
            "cannot run {} ({e}): it makes the venv with greenstalk; or set DELAYQ_GREENSTALK_PYTHON to a Python that has greenstalk",
            script.display()
        )
    });
    assert!(
        out.status.success(),
        "{} failed ({}): {}\nit makes the venv with greenstalk (Python 3 with venv, and PyPI, needed); or set DELAYQ_GREENSTALK_PYTHON to a Python that has greenstalk",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    repo().join("target/py-client-venv/bin/python")
}

/// What greenstalk's own unix-socket tests do (basic use, priorities, a delay, ttr and
/// DEADLINE_SOON, a reserve timing out, the client's repr), against the socket in argv[1].
const GREENSTALK: &str = r#"
import sys, time
import greenstalk

path = sys.argv[1]

with greenstalk.Client(path) as c:
    assert repr(c) == f"greenstalk.Client(socket='{path}')", repr(c)
    c.use("emails")
    id = c.put("测试@example.com")
    c.watch("emails")
    c.ignore("default")
    job = c.reserve()
    assert (job.id, job.body) == (id, "测试@example.com"), job
    c.delete(job)

with greenstalk.Client(path, use="prio", watch="prio") as c:
    c.put("2", priority=2)
    c.put("1", priority=1)
    assert c.reserve().body == "1"
    assert c.reserve().body == "2"

with greenstalk.Client(path, use="later", watch="later") as c:
    start = time.monotonic()
    c.put("delayed", delay=1)
    job = c.reserve()
    waited = time.monotonic() - start
    assert job.body == "delayed" and 1.0 <= waited < 3.0, waited
    c.release(job, delay=2)
    try:
        c.reserve(timeout=1)
        raise AssertionError("a job released with a delay of 2 s came after 1 s")
    except greenstalk.TimedOutError:
        pass
    c.bury(c.reserve(timeout=3))
    try:
        c.reserve(timeout=0)
        raise AssertionError("a buried job was reserved")
    except greenstalk.TimedOutError:
        pass

with greenstalk.Client(path, use="ttr", watch="ttr") as c:
    c.put("two second ttr", ttr=2)
    job = c.reserve()
    try:
        c.reserve()
        raise AssertionError("no DEADLINE_SOON")
    except greenstalk.DeadlineSoonError:
        pass
    c.touch(job)
    c.release(job)
    c.delete(c.reserve())

with greenstalk.Client(path, watch="empty") as c:
    c.ignore("default")
    start = time.monotonic()
    try:
        c.reserve(timeout=1)
        raise AssertionError("an empty tube gave a job")
    except greenstalk.TimedOutError:
        pass
    assert time.monotonic() - start >= 1.0

print("ok")
"#;

/// greenstalk connects to the socket and works as against beanstalkd's `-l unix:`.
// See: issue 36
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greenstalk_works_over_a_unix_socket_issue_36() {
    let python = tokio::task::spawn_blocking(python_with_greenstalk)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("beanstalk.sock");
    let served = Served::start(&path);
    let script = path.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .arg("-c")
            .arg(GREENSTALK)
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()))
    })
    .await
    .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "greenstalk over the socket failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    served.stop().await;
}

/// A socket file left by a server that is gone is replaced; a live server's socket and a
/// file that is not a socket are refused, saying what to do, and left as they were.
// See: issue 36
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_is_replaced_and_other_files_are_refused_issue_36() {
    let dir = tempfile::tempdir().unwrap();

    // Stale: a socket whose listener is gone.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(
        std::fs::symlink_metadata(&stale)
            .unwrap()
            .file_type()
            .is_socket()
    );
    let served = Served::start(&stale);
    assert_eq!(ask(&stale, "use stale\r\n").await, "USING stale");

    // Live: this server's own socket, bound again.
    let e = delayq_beanstalk::UnixSocket::bind(&stale).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    assert!(e.to_string().contains("another server listens"), "{e}");
    assert_eq!(ask(&stale, "use still\r\n").await, "USING still");
    served.stop().await;

    // Not a socket: a regular file and a directory stay as they are.
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let e = delayq_beanstalk::UnixSocket::bind(&file).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    assert!(
        e.to_string().contains("a regular file, not a socket")
            && e.to_string().contains("remove it"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let e = delayq_beanstalk::UnixSocket::bind(&sub).unwrap_err();
    assert!(e.to_string().contains("a directory, not a socket"), "{e}");
    assert!(sub.is_dir());

    // Too long for a socket's address, and a missing directory: said so.
    let long = dir.path().join("x".repeat(120));
    let e = delayq_beanstalk::UnixSocket::bind(&long).unwrap_err();
    assert!(e.to_string().contains("choose a shorter path"), "{e}");
    let e = delayq_beanstalk::UnixSocket::bind(dir.path().join("none/b.sock")).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

/// The socket file has the mode `bind` gives under the process's umask (as beanstalkd's),
/// and is removed once the server has stopped; a socket that another server has put at the
/// path since is left alone.
// See: issue 36
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_file_follows_the_umask_and_goes_at_shutdown_issue_36() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.sock");
    let _plain = std::os::unix::net::UnixListener::bind(&reference).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

    let path = dir.path().join("beanstalk.sock");
    let served = Served::start(&path);
    assert_eq!(
        mode(&path),
        mode(&reference),
        "the umask's mode, as bind gives"
    );
    assert_eq!(ask(&path, "list-tube-used\r\n").await, "USING default");
    served.stop().await;
    assert!(!path.exists(), "the socket file is removed at shutdown");
    assert!(
        UnixStream::connect(&path).await.is_err(),
        "nothing listens there any more"
    );

    // Replaced under a running server (its file removed, another socket bound there): the
    // first server's stop leaves the second's file alone.
    let first = Served::start(&path);
    std::fs::remove_file(&path).unwrap();
    let second = Served::start(&path);
    first.stop().await;
    assert!(path.exists(), "the second server's socket is left alone");
    assert_eq!(ask(&path, "use second\r\n").await, "USING second");
    second.stop().await;
    assert!(!path.exists());
}
