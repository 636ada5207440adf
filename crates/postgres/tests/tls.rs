//! TLS and passwords (issue 21): the engine reaches a PostgreSQL that lets in only TLS
//! connections with a `scram-sha-256` password, understands libpq's `sslmode` and
//! `sslrootcert` in the URL, and refuses what it cannot trust with an error that says what
//! to change, at once (waiting cannot fix it) and without the password in it.

use std::time::Duration;

use delayq_core::{Engine, Error, NewJob, Reserve, Topic};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::{POSTGRES_PASSWORD, PostgresServer};

fn topic() -> Topic {
    Topic::new("secure").expect("topic")
}

async fn connect(url: &str) -> Result<PostgresEngine, Error> {
    PostgresEngine::connect(PostgresConfig::new(url)).await
}

/// The whole path over TLS: the pool's push, the `LISTEN` connection waking a waiting
/// reserve, the ack.
async fn round_trip(engine: &PostgresEngine) {
    let waiting = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let req = Reserve::new(topic()).wait(Duration::from_secs(10));
            engine.reserve(&req).await.expect("reserve")
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    engine
        .push(NewJob::new(topic(), "over tls").with_delay(Duration::from_millis(200)))
        .await
        .expect("push");
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting reserve was woken")
        .expect("reserve task");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.body.as_ref(), b"over tls");
    let lease = got[0].lease.as_ref().expect("a lease");
    engine.ack(lease).await.expect("ack");
}

/// What the server says about this engine's own connections: all of them TLS.
async fn all_connections_are_tls(server: &PostgresServer) {
    let (client, connection) = tokio_postgres::connect(
        &format!(
            "host={} port={} user=postgres dbname=postgres",
            server.sock_dir().display(),
            server.port()
        ),
        tokio_postgres::NoTls,
    )
    .await
    .expect("the harness's socket connection");
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.client_addr IS NOT NULL",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    let (tls, all): (i64, i64) = (row.get(0), row.get(1));
    assert!(all >= 2, "the pool and the listener are connected ({all})");
    assert_eq!(tls, all, "every TCP connection speaks TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_ca_and_the_password_works() {
    let server = PostgresServer::start_secure();
    let engine = connect(&server.url())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", server.log()));
    round_trip(&engine).await;
    all_connections_are_tls(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_without_checking_as_libpq_does() {
    let server = PostgresServer::start_secure();
    let url = format!(
        "postgres://postgres:{POSTGRES_PASSWORD}@127.0.0.1:{}/postgres?sslmode=require",
        server.port()
    );
    let engine = connect(&url).await.expect("require trusts any certificate");
    round_trip(&engine).await;
    // The CA file makes `require` check the chain (as libpq), and the name is not compared:
    // the certificate is for localhost, not 127.0.0.1.
    for mode in ["require", "verify-ca"] {
        let url = format!(
            "postgres://postgres:{POSTGRES_PASSWORD}@127.0.0.1:{}/postgres?sslmode={mode}&sslrootcert={}",
            server.port(),
            server.ca_file().display()
        );
        connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{mode} with the CA: {e}"));
    }
}

/// Each refusal is a configuration error at once, names what to change and never shows the
/// password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_trusted_is_refused_with_what_to_change() {
    let server = PostgresServer::start_secure();
    let port = server.port();
    let ca = server.ca_file();
    let ca = ca.display();
    let wrong = "not-the-password";
    let cases = [
        (
            // The system's authorities do not know the test CA.
            format!(
                "postgres://postgres:{POSTGRES_PASSWORD}@localhost:{port}/postgres?sslmode=verify-full"
            ),
            "sslrootcert",
        ),
        (
            // Signed by the CA, but for localhost.
            format!(
                "postgres://postgres:{POSTGRES_PASSWORD}@127.0.0.1:{port}/postgres?sslmode=verify-full&sslrootcert={ca}"
            ),
            "sslmode=verify-ca",
        ),
        (
            format!(
                "postgres://postgres:{wrong}@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={ca}"
            ),
            "refused the login (28P01",
        ),
        (
            format!(
                "postgres://postgres:{POSTGRES_PASSWORD}@localhost:{port}/postgres?sslmode=disable"
            ),
            "sslmode=require",
        ),
        (
            format!(
                "postgres://postgres:{POSTGRES_PASSWORD}@localhost:{port}/nowhere?sslmode=verify-full&sslrootcert={ca}"
            ),
            "createdb",
        ),
        (
            format!(
                "postgres://postgres@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}/missing.pem",
                server.sock_dir().display()
            ),
            "cannot be read",
        ),
    ];
    for (url, says) in cases {
        let started = std::time::Instant::now();
        let e = connect(&url)
            .await
            .err()
            .unwrap_or_else(|| panic!("{url} was let in"));
        let text = e.to_string();
        assert!(matches!(e, Error::InvalidConfig { .. }), "{url}: {e:?}");
        assert!(!e.is_retryable(), "{url}: waiting cannot fix {e}");
        assert!(text.contains(says), "{url}: {text}");
        assert!(
            !text.contains(POSTGRES_PASSWORD) && !text.contains(wrong),
            "{text}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{url} was retried"
        );
    }
}
