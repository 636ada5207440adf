//! Numbers from one engine-wide sequence (`migrations/0012_numbers.sql`): a claim takes the
//! next `count` numbers and records the range with its topic in the same transaction; a
//! lookup finds the range holding a number with one seek. The beanstalkd protocol names
//! jobs by these numbers.

use delayq_core::{Error, Result, Topic};
use rusqlite::{Connection, OptionalExtension, params};

use super::exec;
use crate::error::db_err;
use crate::tx::Tx;

/// Claims `count` fresh numbers for `topic` (the caller checked 1 to
/// [`delayq_core::MAX_CLAIM`]) and answers the first. Numbers start at 1 and never repeat:
/// every claim goes through the writer, which reads and raises the sequence inside its
/// transaction.
pub(crate) fn claim(tx: &mut Tx<'_>, topic: &Topic, count: u64) -> Result<u64> {
    let claimed: u64 = tx
        .conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'numbers'")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(|e| db_err("reading the number sequence", e))?;
    // SQLite integers end at i64::MAX: past it the sequence is used up (some 9e18 numbers).
    let last = claimed
        .checked_add(count)
        .filter(|&l| i64::try_from(l).is_ok())
        .ok_or_else(|| {
            Error::Internal(format!(
                "the number sequence is used up ({claimed} claimed, {count} more asked for)"
            ))
        })?;
    let first = claimed + 1;
    exec(
        tx,
        "claiming numbers",
        "UPDATE meta SET value = ?1 WHERE key = 'numbers'",
        [last],
    )?;
    exec(
        tx,
        "claiming numbers",
        "INSERT INTO number_ranges (first, last, topic) VALUES (?1, ?2, ?3)",
        params![first, last, topic.as_str()],
    )?;
    Ok(first)
}

/// The topic the range holding `n` was claimed for, or `None` when no claim holds it: the
/// range that starts at or before `n` nearest to it, when it reaches `n`.
pub(crate) fn topic_of(conn: &Connection, n: u64) -> Result<Option<Topic>> {
    // A number past i64::MAX was never claimed (and cannot be bound).
    let Ok(n) = i64::try_from(n) else {
        return Ok(None);
    };
    let range: Option<(i64, String)> = conn
        .prepare_cached(
            "SELECT last, topic FROM number_ranges WHERE first <= ?1 ORDER BY first DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row([n], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(|e| db_err("looking up a number", e))?;
    match range {
        Some((last, name)) if n <= last => Topic::new(name).map(Some).map_err(|e| {
            Error::Internal(format!("the topic of number {n} is not a valid name: {e}"))
        }),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::clock::Clock;
    use crate::schema;
    use crate::shared::Shared;

    #[test]
    fn claims_follow_each_other_and_a_lookup_finds_the_range() {
        let mut conn = Connection::open_in_memory().expect("open");
        schema::migrate(&mut conn, Path::new(":memory:")).expect("migrate");
        let shared = Shared::new(Clock::start(0));
        let (a, b) = (Topic::new("a").expect("a"), Topic::new("b").expect("b"));
        let mut tx = Tx::new(&conn, &shared, 100);
        assert_eq!(claim(&mut tx, &a, 3).expect("claim"), 1);
        assert_eq!(claim(&mut tx, &b, 1).expect("claim"), 4);
        assert_eq!(claim(&mut tx, &a, 1_000_000).expect("claim"), 5);
        for (n, want) in [
            (0, None),
            (1, Some(&a)),
            (3, Some(&a)),
            (4, Some(&b)),
            (5, Some(&a)),
            (1_000_004, Some(&a)),
            (1_000_005, None),
            (u64::MAX, None),
        ] {
            assert_eq!(topic_of(&conn, n).expect("lookup").as_ref(), want, "{n}");
        }
        conn.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'numbers'",
            [i64::MAX - 1],
        )
        .expect("near the end");
        let mut tx = Tx::new(&conn, &shared, 100);
        assert_eq!(
            claim(&mut tx, &a, 1).expect("the last one"),
            i64::MAX as u64
        );
        let used_up = claim(&mut tx, &a, 1);
        assert!(matches!(used_up, Err(Error::Internal(_))), "{used_up:?}");
    }
}
