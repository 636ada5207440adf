//! The PostgreSQL engine as a [`Backend`]: a PostgreSQL of the test's own
//! (`delayq_testkit::PostgresServer`); every handle is another engine on it, as every
//! process of a deployment would be.

use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;

use super::Backend;

pub struct PostgresBackend {
    server: PostgresServer,
}

#[async_trait::async_trait]
impl Backend for PostgresBackend {
    type Engine = PostgresEngine;

    async fn start(_name: &str) -> Self {
        PostgresBackend {
            server: tokio::task::spawn_blocking(PostgresServer::start)
                .await
                .unwrap(),
        }
    }

    async fn open(&self) -> PostgresEngine {
        Self::open_address(&self.server.url()).await
    }

    fn address(&self) -> String {
        self.server.url()
    }

    async fn open_address(address: &str) -> PostgresEngine {
        PostgresEngine::connect(PostgresConfig::new(address))
            .await
            .unwrap_or_else(|e| panic!("connect to {address}: {e}"))
    }

    async fn close(&self) {}
}
