//! Helpers shared by the embedded engine's integration tests: a dump of every row of the
//! database, for "nothing changed" checks.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

/// Every row of every table of the database in `dir`, in a stable order.
///
/// One value is written as what it means rather than as stored: a waiting job's state
/// (1 delayed, 2 ready) is dumped as `waiting`. Which of the two it is is a function of
/// time, and unlike the Redis engine, whose scripts move a due job only when someone
/// calls, this engine's timer moves it on time by itself: without this, a job falling due
/// between two dumps would look like a change made by whatever call ran in between.
/// For the same reason the clock's high-water mark (`meta.clock_ms`, raised by every commit
/// that writes, a lease expiring included) is left out: it is the engine's time, not a job.
pub fn dump(dir: &Path) -> Vec<u8> {
    let conn = Connection::open_with_flags(
        dir.join(delayq_sqlite::DB_FILE),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the database read-only");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("list tables");
    let mut out = Vec::new();
    for t in tables {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM \"{t}\""))
            .expect("select");
        let n = stmt.column_count();
        let state_col = (t == "jobs")
            .then(|| stmt.column_index("state").ok())
            .flatten();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                let mut vals: Vec<Value> = (0..n).map(|i| r.get(i)).collect::<Result<_, _>>()?;
                if let Some(c) = state_col
                    && matches!(vals[c], Value::Integer(1 | 2))
                {
                    vals[c] = Value::Text("waiting".into());
                }
                Ok(format!("{vals:?}"))
            })
            .and_then(|rows| rows.collect())
            .expect("rows");
        if t == "meta" {
            rows.retain(|r| !r.contains("\"clock_ms\""));
        }
        rows.sort();
        out.extend_from_slice(format!("table {t}\n").as_bytes());
        for r in rows {
            out.extend_from_slice(r.as_bytes());
            out.push(b'\n');
        }
    }
    out
}
