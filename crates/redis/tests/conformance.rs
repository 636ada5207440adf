//! The engine conformance suite against a real `redis-server` per test.

use delayq_core::Limits;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{Harness, RedisServer};

struct RedisHarness {
    server: RedisServer,
}

#[async_trait::async_trait]
impl Harness for RedisHarness {
    type Engine = RedisEngine;

    async fn open(&self) -> RedisEngine {
        self.open_with(Limits::default()).await
    }

    async fn open_with(&self, limits: Limits) -> RedisEngine {
        let config = RedisConfig::new(self.server.url()).with_limits(limits);
        RedisEngine::connect(config)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", self.server.log()))
    }

    async fn restart(&self, engine: RedisEngine) -> RedisEngine {
        drop(engine);
        self.open().await
    }

    async fn snapshot(&self) -> Vec<u8> {
        self.server.snapshot().await
    }
}

async fn setup() -> RedisHarness {
    RedisHarness {
        server: RedisServer::start(),
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
