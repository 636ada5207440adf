//! The topics' push destinations: one row each of `delayq.destinations` (topic, document),
//! each operation one plain statement.

use deadpool_postgres::Object;
use delayq_core::{Error, Result, StoredDestination, Topic};

use crate::ops::query;

/// A destination row's topic name and document, its name checked.
fn stored_destination(topic: String, doc: String) -> Result<StoredDestination> {
    let topic = Topic::new(topic.clone()).map_err(|err| {
        Error::Internal(format!(
            "a destination is stored under a bad topic {topic:?}: {err}"
        ))
    })?;
    Ok(StoredDestination { topic, doc })
}

/// Makes `doc` (checked by the caller) the push destination of `topic`, replacing the one
/// it had.
pub(crate) async fn put_destination(client: &Object, topic: &Topic, doc: &str) -> Result<()> {
    query(
        client,
        "putting a destination",
        "INSERT INTO delayq.destinations (topic, doc) VALUES ($1, $2) \
         ON CONFLICT (topic) DO UPDATE SET doc = excluded.doc",
        &[&topic.as_str(), &doc],
    )
    .await?;
    Ok(())
}

/// The push destination of `topic`, if it has one.
pub(crate) async fn destination(
    client: &Object,
    topic: &Topic,
) -> Result<Option<StoredDestination>> {
    let rows = query(
        client,
        "reading a destination",
        "SELECT doc FROM delayq.destinations WHERE topic = $1",
        &[&topic.as_str()],
    )
    .await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let doc: String = row
        .try_get(0)
        .map_err(|err| Error::Internal(format!("a destination row: {err}")))?;
    Ok(Some(StoredDestination {
        topic: topic.clone(),
        doc,
    }))
}

/// Every push destination, by topic name (bytewise, as the other engines sort them).
pub(crate) async fn destinations(client: &Object) -> Result<Vec<StoredDestination>> {
    let rows = query(
        client,
        "listing destinations",
        "SELECT topic, doc FROM delayq.destinations ORDER BY topic COLLATE \"C\"",
        &[],
    )
    .await?;
    rows.iter()
        .map(|r| {
            let get =
                |err: tokio_postgres::Error| Error::Internal(format!("a destination row: {err}"));
            stored_destination(r.try_get(0).map_err(get)?, r.try_get(1).map_err(get)?)
        })
        .collect()
}

/// Removes the push destination of `topic`; answers whether it had one.
pub(crate) async fn delete_destination(client: &Object, topic: &Topic) -> Result<bool> {
    let rows = query(
        client,
        "deleting a destination",
        "DELETE FROM delayq.destinations WHERE topic = $1 RETURNING 1",
        &[&topic.as_str()],
    )
    .await?;
    Ok(!rows.is_empty())
}
