//! The engine conformance suite against a real PostgreSQL per test (its own cluster, made
//! by `delayq_testkit::PostgresServer` in a temporary directory on a free port).

use delayq_core::Limits;
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::{Harness, PostgresServer};

struct PostgresHarness {
    server: PostgresServer,
}

#[async_trait::async_trait]
impl Harness for PostgresHarness {
    type Engine = PostgresEngine;

    async fn open(&self) -> PostgresEngine {
        self.open_with(Limits::default()).await
    }

    async fn open_with(&self, limits: Limits) -> PostgresEngine {
        let config = PostgresConfig::new(self.server.url()).with_limits(limits);
        PostgresEngine::connect(config)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", self.server.log()))
    }

    async fn restart(&self, engine: PostgresEngine) -> PostgresEngine {
        drop(engine);
        self.open().await
    }

    /// Every table of the schema, each row as text in primary-key order.
    async fn snapshot(&self) -> Vec<u8> {
        let (client, connection) =
            tokio_postgres::connect(&self.server.url(), tokio_postgres::NoTls)
                .await
                .expect("connect for a snapshot");
        tokio::spawn(connection);
        let mut out = Vec::new();
        for (table, key) in [
            ("meta", "key"),
            ("topics", "tid"),
            ("jobs", "tid, id"),
            ("schedules", "name"),
            ("number_ranges", "first"),
            ("destinations", "topic"),
        ] {
            let rows = client
                .query(
                    &format!("SELECT t::text FROM delayq.{table} t ORDER BY {key}"),
                    &[],
                )
                .await
                .unwrap_or_else(|e| panic!("snapshot of {table}: {e}"));
            out.extend_from_slice(table.as_bytes());
            out.push(b'\n');
            for r in rows {
                out.extend_from_slice(r.get::<_, &str>(0).as_bytes());
                out.push(b'\n');
            }
        }
        out
    }
}

async fn setup() -> PostgresHarness {
    PostgresHarness {
        server: PostgresServer::start(),
    }
}

delayq_testkit::conformance_suite!(setup());

/// The whole suite again on topics of 8 partitions (issue 18): this engine keeps a topic's
/// jobs together whatever its count, as the embedded one does; the cases on order check it
/// per partition.
mod partitioned {
    use delayq_testkit::Partitioned;

    use super::setup;

    delayq_testkit::conformance_suite!(async { Partitioned::new(setup().await, 8) });
}
