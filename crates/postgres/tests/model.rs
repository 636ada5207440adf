//! Model-based test of the PostgreSQL engine: random sequences of every operation from
//! several logical clients, compared answer by answer with the testkit's reference model
//! (`delayq_testkit::model`). One PostgreSQL for the binary; each sequence gets a database
//! of its own, so it starts from an empty store. Set `DELAYQ_MODEL_CASES` (and
//! `DELAYQ_MODEL_OPS`) for a longer soak. Failures shrink and their seeds are kept in
//! `tests/model.proptest-regressions`, which runs first.

use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;
use delayq_testkit::model::{self, Plan};

/// An engine on a new database `name` of `server`.
async fn fresh(server: &PostgresServer, name: String) -> PostgresEngine {
    let (admin, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", server.log()));
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    let url = format!("{}{name}", server.url().trim_end_matches("postgres"));
    PostgresEngine::connect(PostgresConfig::new(url))
        .await
        .unwrap_or_else(|e| panic!("connect to {name}: {e}\nlog:\n{}", server.log()))
}

/// Every answer of the PostgreSQL engine is one the model gives at some time of the call's
/// clock window, and the resulting states match.
#[test]
fn postgres_engine_follows_the_model() {
    let rt = model::runtime();
    let server = PostgresServer::start();
    let plan = Plan::from_env(40, 60, "tests/model.proptest-regressions");
    let totals = model::check(&rt, &plan, |case| {
        let server = &server;
        async move { (fresh(server, format!("model{case}")).await, ()) }
    });
    eprintln!("model check of the PostgreSQL engine: {totals:?}");
    assert!(totals.deliveries > 0 && totals.expiries > 0, "{totals:?}");
    assert!(
        totals.lease_lost > 0 && totals.wrong_state > 0 && totals.not_found > 0,
        "{totals:?}"
    );
}

/// The shrunk sequences of the disagreements found so far (`model::REGRESSIONS`), by name.
#[tokio::test]
async fn postgres_engine_regressions() {
    let server = PostgresServer::start();
    model::replay_regressions(|k| {
        let server = &server;
        async move { (fresh(server, format!("regression{k}")).await, ()) }
    })
    .await;
}
