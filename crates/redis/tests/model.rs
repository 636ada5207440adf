//! Model-based test of the Redis engine: random sequences of every operation from several
//! logical clients, compared answer by answer with the testkit's reference model
//! (`delayq_testkit::model`). One `redis-server` for the binary; each sequence gets a fresh
//! key prefix, so it starts from an empty store. About 40 s in CI; set `DELAYQ_MODEL_CASES`
//! (and `DELAYQ_MODEL_OPS`) for a longer soak. Failures shrink and their seeds are kept in
//! `tests/model.proptest-regressions`, which runs first.

use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;
use delayq_testkit::model::{self, Plan};

async fn connect(server: &RedisServer, prefix: String) -> RedisEngine {
    let config = RedisConfig::new(server.url()).with_prefix(prefix);
    RedisEngine::connect(config)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", server.log()))
}

/// Every answer of the Redis engine is one the model gives at some time of the call's clock
/// window, and the resulting states match.
#[test]
fn redis_engine_follows_the_model() {
    let rt = model::runtime();
    let server = RedisServer::start();
    let plan = Plan::from_env(70, 60, "tests/model.proptest-regressions");
    let totals = model::check(&rt, &plan, |case| {
        let server = &server;
        async move { (connect(server, format!("model{case}")).await, ()) }
    });
    eprintln!("model check of the Redis engine: {totals:?}");
    assert!(totals.deliveries > 0 && totals.expiries > 0, "{totals:?}");
    assert!(
        totals.lease_lost > 0 && totals.wrong_state > 0 && totals.not_found > 0,
        "{totals:?}"
    );
}

/// The shrunk sequences of the disagreements found so far (`model::REGRESSIONS`), by name.
#[tokio::test]
async fn redis_engine_regressions() {
    let server = RedisServer::start();
    model::replay_regressions(|k| {
        let server = &server;
        async move { (connect(server, format!("regression{k}")).await, ()) }
    })
    .await;
}
