//! Push destinations (issue 20): the `destinations` table
//! (`migrations/0013_destinations.sql`), one row per topic, written by the writer, read on a
//! read connection. The engine does not read the documents; `delayq-push` does.

use delayq_core::{Error, Result, StoredDestination, Topic};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::db_err;
use crate::tx::Tx;

fn stored(topic: String, doc: String) -> Result<StoredDestination> {
    let topic = Topic::new(topic.clone()).map_err(|e| {
        Error::Internal(format!(
            "a destination is stored under a bad topic {topic:?}: {e}"
        ))
    })?;
    Ok(StoredDestination { topic, doc })
}

/// `Destinations::put_destination`: inserts or replaces the row.
pub(crate) fn put(tx: &mut Tx<'_>, topic: &Topic, doc: &str) -> Result<()> {
    tx.conn
        .prepare_cached(
            "INSERT INTO destinations (topic, doc) VALUES (?1, ?2) \
             ON CONFLICT (topic) DO UPDATE SET doc = ?2",
        )
        .and_then(|mut st| st.execute(params![topic.as_str(), doc]))
        .map_err(|e| db_err("putting a destination", e))?;
    Ok(())
}

/// `Destinations::destination`.
pub(crate) fn get(conn: &Connection, topic: &Topic) -> Result<Option<StoredDestination>> {
    conn.prepare_cached("SELECT doc FROM destinations WHERE topic = ?1")
        .and_then(|mut st| st.query_row([topic.as_str()], |r| r.get(0)).optional())
        .map_err(|e| db_err("reading a destination", e))
        .map(|doc| {
            doc.map(|doc| StoredDestination {
                topic: topic.clone(),
                doc,
            })
        })
}

/// `Destinations::destinations`, by topic name (bytewise, as Redis's listing is sorted).
pub(crate) fn list(conn: &Connection) -> Result<Vec<StoredDestination>> {
    let rows: Vec<(String, String)> = conn
        .prepare_cached("SELECT topic, doc FROM destinations ORDER BY topic")
        .and_then(|mut st| st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| db_err("listing destinations", e))?;
    rows.into_iter().map(|(t, d)| stored(t, d)).collect()
}

/// `Destinations::delete_destination`: whether there was a row.
pub(crate) fn delete(tx: &mut Tx<'_>, topic: &Topic) -> Result<bool> {
    let n = tx
        .conn
        .prepare_cached("DELETE FROM destinations WHERE topic = ?1")
        .and_then(|mut st| st.execute([topic.as_str()]))
        .map_err(|e| db_err("deleting a destination", e))?;
    Ok(n == 1)
}
