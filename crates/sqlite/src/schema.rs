//! The schema and its migrations: `migrations/NNNN_*.sql`, applied in order, each in its
//! own transaction that also sets `PRAGMA user_version` to the migration's number.
//!
//! A new schema version is a new file appended to [`MIGRATIONS`]; a file once released is
//! never edited, so every database reaches the latest version by the same steps.

use std::path::Path;

use delayq_core::{Error, Result};
use rusqlite::Connection;

use crate::error::open_err;

/// The migrations; the database's `user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_expired_leases.sql"),
    include_str!("../migrations/0003_waiting.sql"),
    include_str!("../migrations/0004_listed.sql"),
    include_str!("../migrations/0005_topic_config.sql"),
    include_str!("../migrations/0006_done.sql"),
    include_str!("../migrations/0007_schedules.sql"),
    include_str!("../migrations/0008_pause.sql"),
    include_str!("../migrations/0009_expiry.sql"),
    include_str!("../migrations/0010_clock.sql"),
    include_str!("../migrations/0011_partitions.sql"),
    include_str!("../migrations/0012_numbers.sql"),
    include_str!("../migrations/0013_destinations.sql"),
    include_str!("../migrations/0014_schedule_expiry.sql"),
];

/// The schema version this build writes.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// `PRAGMA application_id` of a delayq database ("dlyq"), so that a foreign SQLite file is
/// recognised instead of being written into.
const APPLICATION_ID: i64 = 0x646c_7971;

/// Brings the database at `path` to [`LATEST`], or explains why it cannot.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let err = |e| open_err(path, e);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    let app_id: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(err)?;
    let p = path.display();
    if version > LATEST {
        return Err(Error::InvalidConfig {
            reason: format!(
                "{p} has schema version {version}, newer than this delayq supports ({LATEST}); run a delayq at least as new as the one that wrote it"
            ),
        });
    }
    if version < 0 || (app_id != 0 && app_id != APPLICATION_ID) {
        return Err(foreign(path));
    }
    if version == 0 {
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(err)?;
        if tables > 0 {
            return Err(foreign(path));
        }
    } else if app_id != APPLICATION_ID {
        return Err(foreign(path));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let to = i as i64 + 1;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute_batch(sql).map_err(err)?;
        tx.execute_batch(&format!(
            "PRAGMA user_version = {to}; PRAGMA application_id = {APPLICATION_ID};"
        ))
        .map_err(err)?;
        tx.commit().map_err(err)?;
        tracing::info!(path = %p, version = to, "applied delayq schema migration");
    }
    Ok(())
}

fn foreign(path: &Path) -> Error {
    Error::InvalidConfig {
        reason: format!(
            "{} is an SQLite database that delayq did not write; give delayq its own data directory",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_an_empty_database_once() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn, Path::new(":memory:")).expect("first");
        migrate(&mut conn, Path::new(":memory:")).expect("second is a no-op");
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(v, LATEST);
    }

    #[test]
    fn refuses_newer_and_foreign_databases() {
        let mut conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("PRAGMA user_version = 99").expect("set");
        let e = migrate(&mut conn, Path::new("x.db")).err();
        assert!(
            e.as_ref().is_some_and(|e| e.to_string().contains("newer")),
            "{e:?}"
        );

        let mut conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE mine (a)").expect("create");
        let e = migrate(&mut conn, Path::new("x.db")).err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.to_string().contains("did not write")),
            "{e:?}"
        );
    }
}
