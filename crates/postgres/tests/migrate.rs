//! The engine owns its schema (issue 21): the first connect makes it, later connects of the
//! same build change nothing, many processes starting together install it once, and a
//! database a newer delayq set up (a later migration, or newer functions) is refused with
//! what to do, and left as it was.

use delayq_core::{Engine, Error, NewJob, Topic};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;

async fn connect(server: &PostgresServer) -> Result<PostgresEngine, Error> {
    PostgresEngine::connect(PostgresConfig::new(server.url())).await
}

async fn sql(server: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("the test's own connection");
    tokio::spawn(connection);
    client
}

/// The schema's versions and the library's, as rows of text.
async fn versions(client: &tokio_postgres::Client) -> Vec<String> {
    let mut out = Vec::new();
    for row in client
        .query(
            "SELECT version, name FROM delayq.migrations ORDER BY version",
            &[],
        )
        .await
        .expect("migrations")
    {
        out.push(format!(
            "migration {} {}",
            row.get::<_, i32>(0),
            row.get::<_, String>(1)
        ));
    }
    for row in client
        .query("SELECT key, value FROM delayq.meta ORDER BY key", &[])
        .await
        .expect("meta")
    {
        out.push(format!(
            "{} = {}",
            row.get::<_, String>(0),
            row.get::<_, i64>(1)
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_together_install_once_and_a_restart_changes_nothing() {
    let server = PostgresServer::start();
    let starts = (0..6).map(|_| {
        let url = server.url();
        tokio::spawn(async move { PostgresEngine::connect(PostgresConfig::new(url)).await })
    });
    for start in starts {
        start.await.expect("task").expect("each process connects");
    }
    let client = sql(&server).await;
    let first = versions(&client).await;
    assert!(
        first.iter().any(|v| v == "migration 1 0001_init")
            && first
                .iter()
                .any(|v| v == "migration 2 0002_schedule_expiry")
            && first.iter().any(|v| v == "migration 3 0003_lease_tokens"),
        "{first:?}"
    );
    assert_eq!(
        first.iter().filter(|v| v.starts_with("migration")).count(),
        3
    );

    let engine = connect(&server).await.expect("connect again");
    let topic = Topic::new("kept").expect("topic");
    engine
        .push(NewJob::new(topic.clone(), "x"))
        .await
        .expect("push");
    drop(engine);
    let again = connect(&server).await.expect("a restart of the same build");
    assert_eq!(
        versions(&client).await,
        first,
        "a restart changes no version"
    );
    assert_eq!(again.stats(&topic).await.expect("stats").ready, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_a_newer_delayq_set_up_is_refused_and_left_alone() {
    let server = PostgresServer::start();
    connect(&server)
        .await
        .expect("this build sets the database up");
    let client = sql(&server).await;

    // A later migration than this build knows.
    client
        .execute(
            "INSERT INTO delayq.migrations (version, name) VALUES (99, '0099_future')",
            &[],
        )
        .await
        .expect("a future migration");
    let before = versions(&client).await;
    let e = connect(&server)
        .await
        .err()
        .expect("a newer schema is refused");
    let text = e.to_string();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
    assert!(
        text.contains("version 99") && text.contains("run a delayq at least as new"),
        "{text}"
    );
    assert_eq!(
        versions(&client).await,
        before,
        "the refusal changed nothing"
    );

    // Functions a newer build installed.
    client
        .batch_execute(
            "DELETE FROM delayq.migrations WHERE version = 99; \
             UPDATE delayq.meta SET value = value + 1 WHERE key = 'library'",
        )
        .await
        .expect("newer functions");
    let before = versions(&client).await;
    let e = connect(&server)
        .await
        .err()
        .expect("newer functions are refused");
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
    assert!(e.to_string().contains("functions are at version"), "{e}");
    assert_eq!(
        versions(&client).await,
        before,
        "the refusal changed nothing"
    );
}
