//! The engine conformance suite against a real Redis Cluster (3 primaries, 3 replicas) per
//! test: the topics of each case spread over the primaries by their hash slots (issue 13).

use delayq_core::Limits;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{Harness, RedisCluster};

struct ClusterHarness {
    cluster: RedisCluster,
}

#[async_trait::async_trait]
impl Harness for ClusterHarness {
    type Engine = RedisEngine;

    async fn open(&self) -> RedisEngine {
        self.open_with(Limits::default()).await
    }

    async fn open_with(&self, limits: Limits) -> RedisEngine {
        let config = RedisConfig::new(self.cluster.url()).with_limits(limits);
        RedisEngine::connect(config)
            .await
            .unwrap_or_else(|e| panic!("connect to the cluster: {e}"))
    }

    async fn restart(&self, engine: RedisEngine) -> RedisEngine {
        drop(engine);
        self.open().await
    }

    /// Every primary's snapshot, in the order of their slots.
    async fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in self.cluster.primaries() {
            out.extend(self.cluster.server(p.port).snapshot().await);
        }
        out
    }
}

async fn setup() -> ClusterHarness {
    ClusterHarness {
        cluster: RedisCluster::start(),
    }
}

// The whole suite, as on one node: the waits too (one per slot, on the node serving it).
delayq_testkit::conformance_suite!(setup());
