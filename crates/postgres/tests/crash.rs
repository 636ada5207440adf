//! Kill -9 at a random moment loses no acknowledged write, of the delayq process or of
//! PostgreSQL itself.
//!
//! The test starts its own PostgreSQL (`delayq_testkit::PostgresServer`) and re-executes
//! its own binary as a child (`crash_child`) that pushes, reserves and acks in a loop on
//! it, and prints each write only after the engine acknowledged it. The parent kills the
//! child with SIGKILL at a random moment under load; every other cycle it kills the
//! postmaster and its backends with SIGKILL at the same moment and starts it again, so it
//! recovers from its WAL. Then it connects and checks: every acknowledged push is there
//! unless an ack of it was sent; no acknowledged ack comes back; delayed jobs keep their
//! due time (`delayq_testkit::crash` holds all of this but the engine). The cycles share
//! the database, so each check also covers what earlier cycles left.

use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;
use delayq_testkit::crash::{self, Crashes};

/// The database URL, passed to the child.
const CHILD_URL: &str = "DELAYQ_CRASH_CHILD_URL";
/// Fewer than the embedded engine's 24: a child here connects and installs the library,
/// and a restarted server recovers, which keeps the test near 30 s.
const CYCLES: usize = 12;

/// The child's body; a no-op test unless run by `kill_9_loses_no_acknowledged_write`.
#[test]
fn crash_child() {
    let Some(cycle) = crash::child_cycle() else {
        return;
    };
    let url = std::env::var(CHILD_URL).expect("the parent passes the database URL");
    crash::run_child(cycle, PostgresEngine::connect(PostgresConfig::new(url)));
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    if crash::child_cycle().is_some() {
        return;
    }
    let mut pg = PostgresServer::start();
    let url = pg.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut crashes = Crashes::new("crash_child");
    let mut server_kills = 0;
    for cycle in 0..CYCLES {
        let server_too = cycle % 2 == 1;
        crashes.cycle(cycle, [(CHILD_URL, &url)], || {
            if server_too {
                pg.kill();
            }
        });
        if server_too {
            pg.restart();
            server_kills += 1;
        }
        rt.block_on(async {
            let engine = PostgresEngine::connect(PostgresConfig::new(&url))
                .await
                .expect("connect after kill -9");
            crash::check(&engine, crashes.seen()).await;
        });
    }
    eprintln!(
        "{}; PostgreSQL killed and recovered in {server_kills} of them",
        crashes.report()
    );
    crashes.assert_enough_work();
}
