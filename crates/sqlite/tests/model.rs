//! Model-based test of the embedded engine: random sequences of every operation from
//! several logical clients, each on a fresh data directory, compared answer by answer with
//! the testkit's reference model (`delayq_testkit::model`). About 30 s in CI; set
//! `DELAYQ_MODEL_CASES` (and `DELAYQ_MODEL_OPS`) for a longer soak. Failures shrink and their
//! seeds are kept in `tests/model.proptest-regressions`, which runs first.

use delayq_sqlite::{SqliteConfig, SqliteEngine};
use delayq_testkit::model::{self, Plan};

/// An engine on a fresh data directory, and the directory.
fn fresh() -> (SqliteEngine, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("delayq-model-")
        .tempdir()
        .expect("temp dir");
    let engine = SqliteEngine::open(SqliteConfig::dir(dir.path()))
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.path().display()));
    (engine, dir)
}

/// Every answer of the embedded engine is one the model gives at some time of the call's
/// clock window, and the resulting states match.
#[test]
fn embedded_engine_follows_the_model() {
    let rt = model::runtime();
    let plan = Plan::from_env(70, 60, "tests/model.proptest-regressions");
    let totals = model::check(&rt, &plan, |_| std::future::ready(fresh()));
    eprintln!("model check of the embedded engine: {totals:?}");
    assert!(totals.deliveries > 0 && totals.expiries > 0, "{totals:?}");
    assert!(
        totals.lease_lost > 0 && totals.wrong_state > 0 && totals.not_found > 0,
        "{totals:?}"
    );
}

/// The shrunk sequences of the disagreements found so far (`model::REGRESSIONS`), by name.
#[tokio::test]
async fn embedded_engine_regressions() {
    model::replay_regressions(|_| std::future::ready(fresh())).await;
}
