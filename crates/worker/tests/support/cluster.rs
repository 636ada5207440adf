//! The Redis engine on a Redis Cluster (3 primaries, 3 replicas) as a [`Backend`]: the cases
//! running at the same time share one cluster (`RedisCluster::shared`), each under a key
//! prefix of its own (its test name), so a case sees only its own topics, registry and
//! schedules. The cases' topics hash to slots of every primary
//! (`the_cases_topics_spread_over_every_primary` in `worker.rs`).

use std::sync::Arc;

use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisCluster;

use super::Backend;

/// Separates the URL from the prefix in [`Backend::address`] (neither can hold a space).
const PREFIX_SEPARATOR: char = ' ';

pub struct ClusterBackend {
    cluster: Arc<RedisCluster>,
    prefix: String,
}

fn config(url: &str, prefix: &str) -> RedisConfig {
    RedisConfig::new(url).with_prefix(prefix)
}

#[async_trait::async_trait]
impl Backend for ClusterBackend {
    type Engine = RedisEngine;

    async fn start(name: &str) -> Self {
        let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
            .await
            .unwrap();
        ClusterBackend {
            cluster,
            prefix: name.replace("::", ":"),
        }
    }

    async fn open(&self) -> RedisEngine {
        RedisEngine::connect(config(&self.cluster.url(), &self.prefix))
            .await
            .unwrap_or_else(|e| panic!("connect to the cluster {}: {e}", self.cluster.url()))
    }

    fn address(&self) -> String {
        format!("{}{PREFIX_SEPARATOR}{}", self.cluster.url(), self.prefix)
    }

    async fn open_address(address: &str) -> RedisEngine {
        let (url, prefix) = address
            .split_once(PREFIX_SEPARATOR)
            .unwrap_or_else(|| panic!("not a cluster address: {address:?}"));
        RedisEngine::connect(config(url, prefix))
            .await
            .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
    }

    async fn close(&self) {
        // Clients of one cluster do not exclude each other: nothing to drop.
    }
}
