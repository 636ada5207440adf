//! The engine conformance suite against the embedded engine, one data directory per test.

mod support;

use std::sync::Mutex;

use delayq_core::Limits;
use delayq_sqlite::{SqliteConfig, SqliteEngine};
use delayq_testkit::Harness;
use tempfile::TempDir;

/// One data directory and the one engine that owns it.
struct SqliteHarness {
    dir: TempDir,
    engine: Mutex<Option<SqliteEngine>>,
}

#[async_trait::async_trait]
impl Harness for SqliteHarness {
    type Engine = SqliteEngine;

    async fn open(&self) -> SqliteEngine {
        self.open_with(Limits::default()).await
    }

    async fn open_with(&self, limits: Limits) -> SqliteEngine {
        let mut engine = self.engine.lock().expect("harness lock");
        let e = engine.get_or_insert_with(|| {
            SqliteEngine::open(SqliteConfig::dir(self.dir.path()))
                .unwrap_or_else(|e| panic!("open {}: {e}", self.dir.path().display()))
        });
        e.with_limits(limits)
    }

    async fn restart(&self, engine: SqliteEngine) -> SqliteEngine {
        drop(engine);
        let held = self.engine.lock().expect("harness lock").take();
        drop(held);
        self.open().await
    }

    /// Every row of every table; a waiting job's state is dumped as `waiting` (see
    /// `support::dump`: the timer may move a job from delayed to ready between two dumps).
    async fn snapshot(&self) -> Vec<u8> {
        support::dump(self.dir.path())
    }
}

async fn setup() -> SqliteHarness {
    SqliteHarness {
        dir: tempfile::Builder::new()
            .prefix("delayq-conformance-")
            .tempdir()
            .expect("temp dir"),
        engine: Mutex::new(None),
    }
}

delayq_testkit::conformance_suite!(setup());

/// The whole suite again on topics of 8 partitions (issue 18): each case's topics get 8
/// partitions while empty, and the cases on order check it per partition.
mod partitioned {
    use delayq_testkit::Partitioned;

    use super::setup;

    delayq_testkit::conformance_suite!(async { Partitioned::new(setup().await, 8) });
}
