//! Model-based test of the Redis engine on a Redis Cluster (3 primaries): the random
//! sequences of `model.rs`, fewer of them, each under a fresh key prefix, with the two
//! topics on their own hash slots, so that a reserve over both and a batch push to both
//! span nodes. About 15 s in CI; `DELAYQ_MODEL_CASES` and `DELAYQ_MODEL_OPS` for a soak.
//! Failures shrink and their seeds are kept in `tests/cluster_model.proptest-regressions`.

use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisCluster;
use delayq_testkit::model::{self, Plan};

/// Every answer of the Redis engine on a cluster is one the model gives at some time of the
/// call's clock window, and the resulting states match.
#[test]
fn redis_cluster_follows_the_model() {
    let rt = model::runtime();
    let cluster = RedisCluster::start_with_replicas(0);
    let url = cluster.url();
    let plan = Plan::from_env(20, 40, "tests/cluster_model.proptest-regressions");
    let totals = model::check(&rt, &plan, |case| {
        let config = RedisConfig::new(url.clone()).with_prefix(format!("model{case}"));
        async move {
            let engine = RedisEngine::connect(config)
                .await
                .unwrap_or_else(|e| panic!("connect to the cluster: {e}"));
            (engine, ())
        }
    });
    eprintln!("model check of the Redis engine on a cluster: {totals:?}");
    assert!(totals.deliveries > 0 && totals.lease_lost > 0, "{totals:?}");
}
