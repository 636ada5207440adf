//! The engine-wide number sequence of the beanstalkd protocol: a claim of a range of
//! fresh numbers for a topic is a function of `sql/store.sql` (it must stay right between
//! processes); the topic of a number is one plain statement on `delayq.number_ranges`.

use deadpool_postgres::Object;
use delayq_core::{Error, Result, Topic};

use crate::ops::{one, query};
use crate::row::{signed, unsigned};

/// Claims `count` fresh numbers for `topic` (the caller checked 1 to
/// [`delayq_core::MAX_CLAIM`]) and answers the first (`delayq.claim_numbers`).
pub(crate) async fn claim_numbers(client: &Object, topic: &Topic, count: u64) -> Result<u64> {
    let what = "claiming numbers";
    let rows = query(
        client,
        what,
        "SELECT delayq.claim_numbers($1, $2)",
        &[&topic.as_str(), &signed(count)],
    )
    .await?;
    let first: Option<i64> = one(rows, what)?
        .try_get(0)
        .map_err(|err| Error::Internal(format!("{what}: {err}")))?;
    let first = first.ok_or_else(|| {
        Error::Internal(format!(
            "the number sequence is used up ({count} more numbers asked for)"
        ))
    })?;
    unsigned(first, "claimed number")
}

/// The topic the range holding `n` was claimed for, or `None` when no claim holds it: the
/// range that starts at or before `n` nearest to it (one backward step on the primary key),
/// when it reaches `n`.
pub(crate) async fn number_topic(client: &Object, n: u64) -> Result<Option<Topic>> {
    // A number past i64::MAX was never claimed.
    let Ok(n) = i64::try_from(n) else {
        return Ok(None);
    };
    let what = "looking up a number";
    let rows = query(
        client,
        what,
        "SELECT last, topic FROM delayq.number_ranges WHERE first <= $1 \
         ORDER BY first DESC LIMIT 1",
        &[&n],
    )
    .await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let get = |err: tokio_postgres::Error| Error::Internal(format!("a number range: {err}"));
    let last: i64 = row.try_get(0).map_err(get)?;
    let name: String = row.try_get(1).map_err(get)?;
    if n > last {
        return Ok(None);
    }
    Topic::new(name).map(Some).map_err(|err| {
        Error::Internal(format!(
            "the topic of number {n} is not a valid name: {err}"
        ))
    })
}
