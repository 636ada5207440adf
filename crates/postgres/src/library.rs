//! The engine's schema in the database: versioned migrations (`migrations/*.sql`) and the
//! library of functions every operation calls (`sql/*.sql`), installed at connect under an
//! advisory lock, in one transaction.
//!
//! A database whose schema is newer than this build knows (a later delayq migrated it), or
//! whose library was installed by a newer build, is refused with [`Error::InvalidConfig`]:
//! running older code on it could corrupt it. An older library is replaced; the same
//! version with other text (a development build) is replaced too.

use delayq_core::{Error, Result};
use tokio_postgres::Client;

use crate::error::db_err;

/// The migrations, in order: (version, name, SQL).
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "0001_init", include_str!("../migrations/0001_init.sql")),
    (
        2,
        "0002_schedule_expiry",
        include_str!("../migrations/0002_schedule_expiry.sql"),
    ),
    (
        3,
        "0003_lease_tokens",
        include_str!("../migrations/0003_lease_tokens.sql"),
    ),
];

/// The library's files, in the order they are installed (lib.sql first: the others call
/// its helpers).
const LIBRARY: &[&str] = &[
    include_str!("../sql/lib.sql"),
    include_str!("../sql/push.sql"),
    include_str!("../sql/reserve.sql"),
    include_str!("../sql/lease.sql"),
    include_str!("../sql/tick.sql"),
    include_str!("../sql/admin.sql"),
    include_str!("../sql/topics.sql"),
    include_str!("../sql/store.sql"),
];

/// The library's version: raised whenever a function's arguments or answers change, so
/// that an older build refuses a database a newer one set up.
pub(crate) const LIBRARY_VERSION: i64 = 2;

/// The advisory lock every installer takes, so that processes starting together install
/// once (a number of its own: "delayq" in ASCII).
const INSTALL_LOCK: i64 = 0x6465_6c61_7971;

/// The FNV-1a hash of the library's text, so that a changed text is installed again.
fn library_hash() -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in LIBRARY.iter().flat_map(|s| s.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(h.to_ne_bytes())
}

/// Brings the database to this build's schema and library, or refuses a newer one.
pub(crate) async fn install(client: &mut Client) -> Result<()> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| db_err("starting the schema transaction", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INSTALL_LOCK])
        .await
        .map_err(|e| db_err("locking the schema", e))?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS delayq; \
         CREATE TABLE IF NOT EXISTS delayq.migrations (version integer PRIMARY KEY, \
           name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(|e| db_err("creating the schema", e))?;
    let have: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM delayq.migrations",
            &[],
        )
        .await
        .map_err(|e| db_err("reading the schema version", e))?
        .get(0);
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if have > known {
        return Err(newer(format!(
            "its delayq schema is at version {have}, newer than this delayq knows ({known})"
        )));
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > have) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| db_err(&format!("applying migration {name}"), e))?;
        tx.execute(
            "INSERT INTO delayq.migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await
        .map_err(|e| db_err("recording a migration", e))?;
    }
    let row = tx
        .query_opt(
            "SELECT (SELECT value FROM delayq.meta WHERE key = 'library'), \
                    (SELECT value FROM delayq.meta WHERE key = 'library_hash')",
            &[],
        )
        .await
        .map_err(|e| db_err("reading the library version", e))?;
    let (version, hash): (Option<i64>, Option<i64>) =
        row.map_or((None, None), |r| (r.get(0), r.get(1)));
    if version.is_some_and(|v| v > LIBRARY_VERSION) {
        return Err(newer(format!(
            "its delayq functions are at version {}, newer than this delayq's ({LIBRARY_VERSION})",
            version.unwrap_or_default()
        )));
    }
    if version != Some(LIBRARY_VERSION) || hash != Some(library_hash()) {
        for sql in LIBRARY {
            tx.batch_execute(sql)
                .await
                .map_err(|e| db_err("installing the delayq functions", e))?;
        }
        tx.execute(
            "INSERT INTO delayq.meta (key, value) VALUES ('library', $1), ('library_hash', $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&LIBRARY_VERSION, &library_hash()],
        )
        .await
        .map_err(|e| db_err("recording the library version", e))?;
    }
    tx.commit()
        .await
        .map_err(|e| db_err("committing the schema", e))
}

fn newer(what: String) -> Error {
    Error::InvalidConfig {
        reason: format!(
            "the PostgreSQL database cannot be used: {what}; run a delayq at least as new as the one that set it up"
        ),
    }
}
