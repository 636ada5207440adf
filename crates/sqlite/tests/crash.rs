//! Kill -9 at a random moment loses no acknowledged write.
//!
//! The test re-executes its own binary as a child (`crash_child`) that pushes, reserves and
//! acks in a loop on a data directory, and prints each write only after the engine
//! acknowledged it. The parent kills the child with SIGKILL at a random moment, reopens the
//! directory and checks: every acknowledged push is there unless an ack of it was sent; no
//! acknowledged ack comes back; delayed jobs keep their due time (`delayq_testkit::crash`
//! holds all of this but the engine). The cycles share the directory, so each reopen also
//! recovers what earlier cycles left, and alternate between `synchronous = NORMAL` and
//! `FULL`.

use delayq_sqlite::{SqliteConfig, SqliteEngine, Synchronous};
use delayq_testkit::crash::{self, Crashes};

const CHILD_DIR: &str = "DELAYQ_CRASH_CHILD_DIR";
const CHILD_SYNC: &str = "DELAYQ_CRASH_CHILD_SYNC";
const CYCLES: usize = 24;

/// The child's body; a no-op test unless run by `kill_9_loses_no_acknowledged_write`.
#[test]
fn crash_child() {
    let Some(cycle) = crash::child_cycle() else {
        return;
    };
    let dir = std::env::var_os(CHILD_DIR).expect("the parent names the data directory");
    let sync = match std::env::var(CHILD_SYNC).as_deref() {
        Ok("full") => Synchronous::Full,
        _ => Synchronous::Normal,
    };
    crash::run_child(cycle, async move {
        SqliteEngine::open(SqliteConfig::dir(dir).with_synchronous(sync))
    });
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    if crash::child_cycle().is_some() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("delayq-crash-")
        .tempdir()
        .expect("temp dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut crashes = Crashes::new("crash_child");
    for cycle in 0..CYCLES {
        let sync = if cycle.is_multiple_of(2) {
            "normal"
        } else {
            "full"
        };
        crashes.cycle(
            cycle,
            [
                (CHILD_DIR, dir.path().as_os_str()),
                (CHILD_SYNC, sync.as_ref()),
            ],
            || {},
        );
        rt.block_on(async {
            let engine =
                SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("reopen after kill -9");
            crash::check(&engine, crashes.seen()).await;
        });
    }
    eprintln!("{}", crashes.report());
    crashes.assert_enough_work();
}
