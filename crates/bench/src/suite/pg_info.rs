//! What a PostgreSQL server says about itself, for the PostgreSQL-based systems (delayq's
//! PostgreSQL engine, pg-boss): the bytes of a schema's tables (W3), the transactions its
//! clients committed (W5, the counterpart of Redis's `INFO commandstats`), and its
//! postmaster, whose process tree's CPU is the store's.
//!
//! Each reading opens a connection of its own as the superuser, over loopback without TLS,
//! as the testkit's server allows.

use anyhow::Context;
use delayq_testkit::PostgresServer;
use tokio_postgres::{Client, NoTls};

use super::procs::Proc;

/// The database the systems keep their jobs in: the one of [`PostgresServer::url`].
const SYSTEMS_DB: &str = "postgres";

/// A connection to database `db` of `server`, its driver task running beside it until the
/// client is dropped.
async fn connect(server: &PostgresServer, db: &str) -> anyhow::Result<Client> {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(server.port())
        .user("postgres")
        .dbname(db);
    let (client, conn) = config
        .connect(NoTls)
        .await
        .with_context(|| format!("connecting to PostgreSQL on port {}", server.port()))?;
    tokio::spawn(async move {
        // The connection ends when the client is dropped; an error then is of no interest.
        let _ = conn.await;
    });
    Ok(client)
}

/// The bytes of every table of `schema` with its indexes and TOAST
/// (`pg_total_relation_size` summed over its tables and materialized views; a partitioned
/// table counts through its partitions, which pg-boss keeps in its own schema).
pub(crate) async fn schema_bytes(server: &PostgresServer, schema: &str) -> anyhow::Result<u64> {
    let client = connect(server, SYSTEMS_DB).await?;
    let row = client
        .query_one(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')",
            &[&schema],
        )
        .await
        .with_context(|| format!("measuring the tables of schema {schema}"))?;
    let bytes: i64 = row.get(0);
    Ok(u64::try_from(bytes).unwrap_or(0))
}

/// Transactions committed and rolled back so far in the systems' database
/// (`pg_stat_database`), read from another database (`template1`) so that the readings
/// themselves are not counted. Backends report to the statistics at most once a second,
/// and an idle one within 10 s: a count over a span shorter than that is approximate.
pub(crate) async fn transactions(server: &PostgresServer) -> anyhow::Result<u64> {
    let client = connect(server, "template1").await?;
    let row = client
        .query_one(
            "SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::bigint \
             FROM pg_stat_database WHERE datname = $1",
            &[&SYSTEMS_DB],
        )
        .await
        .context("reading pg_stat_database")?;
    let n: i64 = row.get(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

/// `server`'s postmaster with its descendants (its auxiliary processes and every backend),
/// whose CPU is the store's. The postmaster's pid is the first line of its
/// `postmaster.pid`, read by the server itself.
pub(crate) async fn server_tree(server: &PostgresServer) -> anyhow::Result<Proc> {
    let client = connect(server, SYSTEMS_DB).await?;
    let row = client
        .query_one("SELECT pg_read_file('postmaster.pid')", &[])
        .await
        .context("reading postmaster.pid")?;
    let text: String = row.get(0);
    let pid: u32 = text
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("postmaster.pid does not start with a pid: {text:?}"))?;
    // The server reads its own file: a pid of another machine's (or container's) server
    // would not be in this /proc.
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        anyhow::bail!("the postmaster's pid {pid} is not in /proc: is PostgreSQL on this machine?");
    }
    Ok(Proc::Tree(pid))
}
