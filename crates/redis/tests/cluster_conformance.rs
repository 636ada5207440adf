//! The engine conformance suite against a real Redis Cluster (3 primaries, 3 replicas): the
//! topics of each case spread over the primaries by their hash slots (issue 13). The cases
//! share one cluster per test process ([`RedisCluster::shared`]; starting one per case took
//! two minutes of the test command), each under a key prefix of its own, so that a case
//! sees, and snapshots, only its own keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use delayq_core::Limits;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{Harness, RedisCluster};

struct ClusterHarness {
    cluster: Arc<RedisCluster>,
    /// This case's key prefix.
    prefix: String,
}

#[async_trait::async_trait]
impl Harness for ClusterHarness {
    type Engine = RedisEngine;

    async fn open(&self) -> RedisEngine {
        self.open_with(Limits::default()).await
    }

    async fn open_with(&self, limits: Limits) -> RedisEngine {
        let config = RedisConfig::new(self.cluster.url())
            .with_prefix(self.prefix.clone())
            .with_limits(limits);
        RedisEngine::connect(config)
            .await
            .unwrap_or_else(|e| panic!("connect to the cluster: {e}"))
    }

    async fn restart(&self, engine: RedisEngine) -> RedisEngine {
        drop(engine);
        self.open().await
    }

    /// This case's keys on every primary, in the order of their slots.
    async fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in self.cluster.primaries() {
            let server = self.cluster.server(p.port);
            out.extend(server.snapshot_of(&format!("{}:*", self.prefix)).await);
        }
        out
    }
}

async fn setup() -> ClusterHarness {
    static CASES: AtomicUsize = AtomicUsize::new(0);
    ClusterHarness {
        cluster: RedisCluster::shared(),
        prefix: format!("case{}", CASES.fetch_add(1, Ordering::Relaxed)),
    }
}

// The whole suite, as on one node: the waits too (one per slot, on the node serving it).
delayq_testkit::conformance_suite!(setup());

/// The whole suite again on topics of 8 partitions (issue 18): each case's topics get 8
/// partitions while empty, and the cases on order check it per partition.
mod partitioned {
    use delayq_testkit::Partitioned;

    use super::setup;

    delayq_testkit::conformance_suite!(async { Partitioned::new(setup().await, 8) });
}
