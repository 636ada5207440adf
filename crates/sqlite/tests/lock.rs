//! One owner per data directory: a second open, in this process or in another, gets a clear
//! error and changes nothing; the directory is free again once the owner is gone.

use std::process::Command;

use delayq_core::{Engine, Error, NewJob, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine};

const CHILD_DIR: &str = "DELAYQ_LOCK_CHILD_DIR";

/// The child's body: tries to open the directory and reports how it went. A no-op test
/// unless run by `a_second_process_is_refused`.
#[test]
fn lock_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    match SqliteEngine::open(SqliteConfig::dir(&dir)) {
        Ok(_) => println!("\nOPENED"),
        Err(e) => println!("\nREFUSED {}", e.is_retryable()),
    }
}

fn assert_in_use(r: Result<SqliteEngine, Error>) {
    match r {
        Err(e @ Error::Unavailable { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("in use by another delayq engine"), "{msg}");
        }
        Err(e) => panic!("wrong error for a held directory: {e:?}"),
        Ok(_) => panic!("a second engine opened a held directory"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_open_in_this_process_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("first open");
    let t = Topic::new("t").expect("topic");
    first.push(NewJob::new(t.clone(), "a")).await.expect("push");
    assert_in_use(SqliteEngine::open(SqliteConfig::dir(dir.path())));
    // The refused open changed nothing: the owner still works.
    assert_eq!(first.stats(&t).await.expect("stats").ready, 1);
    drop(first);
    let again =
        SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open after the owner left");
    assert_eq!(again.stats(&t).await.expect("stats").ready, 1);
}

#[test]
fn a_second_process_is_refused() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let run_child = || {
        let out = Command::new(std::env::current_exe().expect("test binary"))
            .args(["lock_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .output()
            .expect("run the child");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let owner = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open");
    let out = run_child();
    assert!(out.contains("\nREFUSED true"), "child said: {out}");
    drop(owner);
    let out = run_child();
    assert!(out.contains("\nOPENED"), "child said: {out}");
}
