//! The Redis engine as a [`Backend`]: one `redis-server` per test, owned by the test.

use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;

use super::Backend;

pub struct RedisBackend {
    server: RedisServer,
}

#[async_trait::async_trait]
impl Backend for RedisBackend {
    type Engine = RedisEngine;

    async fn start(_name: &str) -> Self {
        RedisBackend {
            server: RedisServer::start(),
        }
    }

    async fn open(&self) -> RedisEngine {
        RedisEngine::connect(RedisConfig::new(self.server.url()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", self.server.log()))
    }

    fn address(&self) -> String {
        self.server.url()
    }

    async fn open_address(address: &str) -> RedisEngine {
        RedisEngine::connect(RedisConfig::new(address))
            .await
            .unwrap_or_else(|e| panic!("connect to {address}: {e}"))
    }

    async fn close(&self) {
        // Clients of one Redis do not exclude each other: nothing to drop.
    }
}
