//! Conformance cases of push destinations (issue 20): the engine keeps one document per
//! topic for every client, replaces it, lists them by topic, keeps them through a purge and
//! deletes them; a refused document changes nothing.

use delayq_core::{Destinations, Engine, Error, MAX_DESTINATION_DOC, StoredDestination};

use super::{job, ok, topic};
use crate::Harness;

fn stored(t: &str, doc: &str) -> StoredDestination {
    StoredDestination {
        topic: topic(t),
        doc: doc.to_string(),
    }
}

/// A destination put by one client is seen by another, replaced by the next put, listed by
/// topic name, left by a purge of its topic's jobs, and gone after a delete (answered
/// `true` once, then `false`).
pub async fn destinations_are_shared_replaced_and_deleted_issue_20<H: Harness>(h: &H) {
    let (e, other) = (h.open().await, h.open().await);
    let (a, b) = (topic("dest-b"), topic("dest-a"));
    assert_eq!(ok(other.destination(&a).await, "read"), None);
    ok(
        e.put_destination(&a, r#"{"type":"webhook","v":1}"#).await,
        "put",
    );
    ok(e.put_destination(&b, "{}").await, "put");
    assert_eq!(
        ok(other.destination(&a).await, "read"),
        Some(stored("dest-b", r#"{"type":"webhook","v":1}"#))
    );
    ok(
        other
            .put_destination(&a, r#"{"type":"webhook","v":2}"#)
            .await,
        "replace",
    );
    assert_eq!(
        ok(e.destinations().await, "list"),
        vec![
            stored("dest-a", "{}"),
            stored("dest-b", r#"{"type":"webhook","v":2}"#)
        ],
        "listed by topic name, the replaced one as replaced"
    );

    ok(e.push(job(&a, "j")).await, "push");
    ok(e.purge(&a).await, "purge");
    assert!(
        ok(e.destination(&a).await, "read").is_some(),
        "a purge of the jobs leaves the destination"
    );

    assert!(ok(other.delete_destination(&a).await, "delete"));
    assert!(!ok(e.delete_destination(&a).await, "delete again"));
    assert_eq!(ok(e.destination(&a).await, "read"), None);
    assert_eq!(
        ok(e.destinations().await, "list"),
        vec![stored("dest-a", "{}")]
    );
    assert!(ok(e.delete_destination(&b).await, "delete"));
}

/// An empty or oversized document is refused with an error naming the field, and changes
/// nothing: the destination the topic had stays.
pub async fn bad_destinations_are_refused_and_change_nothing_issue_20<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = topic("dest-bad");
    ok(e.put_destination(&t, "{\"kept\":true}").await, "put");
    let huge = "x".repeat(MAX_DESTINATION_DOC + 1);
    for doc in ["", huge.as_str()] {
        match e.put_destination(&t, doc).await {
            Err(Error::InvalidArgument { what, .. }) => assert_eq!(what, "destination"),
            other => panic!("a document of {} bytes: {other:?}", doc.len()),
        }
    }
    let at_limit = "y".repeat(MAX_DESTINATION_DOC);
    assert_eq!(
        ok(e.destination(&t).await, "read"),
        Some(stored("dest-bad", "{\"kept\":true}"))
    );
    ok(
        e.put_destination(&t, &at_limit).await,
        "the largest document",
    );
    assert_eq!(
        ok(e.destination(&t).await, "read").map(|d| d.doc.len()),
        Some(MAX_DESTINATION_DOC)
    );
    ok(e.delete_destination(&t).await, "delete");
}
