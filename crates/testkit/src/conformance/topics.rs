//! Conformance cases of whole topics: the topic list, and how a purge leaves it.

use delayq_core::Engine;

use super::{job, new_topic, ok};
use crate::Harness;

/// The names on the topic list.
async fn listed<E: Engine>(e: &E) -> Vec<String> {
    ok(e.topics().await, "topics")
        .iter()
        .map(|t| t.to_string())
        .collect()
}

/// A purge takes the topic off the topic list, whichever instance purges; the next push puts
/// it back, whichever instance pushes, even one that had pushed to the topic before the purge
/// (the Redis engine remembers per process which topics it registered).
// See: issue 12 (a purged topic stayed in GET /v1/topics and in /metrics forever).
pub async fn purge_takes_the_topic_off_the_list_issue_12<H: Harness>(h: &H) {
    let (a, b) = (h.open().await, h.open().await);
    let (t, other) = (new_topic(h, "gone").await, new_topic(h, "stays").await);
    ok(a.push(job(&t, "x")).await, "push");
    ok(a.push(job(&other, "y")).await, "push");
    ok(b.push(job(&t, "z")).await, "push");
    assert_eq!(listed(&a).await, ["gone", "stays"]);

    assert_eq!(ok(a.purge(&t).await, "purge"), 2);
    assert_eq!(listed(&a).await, ["stays"]);
    assert_eq!(listed(&b).await, ["stays"]);

    // b registered the topic before a's purge; its next push lists it again.
    ok(b.push(job(&t, "w")).await, "push");
    assert_eq!(listed(&a).await, ["gone", "stays"]);

    // The other way round, and a push that finds an existing id changes nothing.
    assert_eq!(ok(b.purge(&t).await, "purge"), 1);
    assert_eq!(listed(&b).await, ["stays"]);
    ok(a.push(job(&t, "x")).await, "push");
    assert_eq!(listed(&b).await, ["gone", "stays"]);
    assert!(!ok(a.push(job(&t, "x")).await, "push").created);
    assert_eq!(listed(&b).await, ["gone", "stays"]);

    // A purge of a topic that holds nothing still takes it off; one never used lists nothing.
    assert_eq!(ok(a.purge(&t).await, "purge"), 1);
    assert_eq!(ok(a.purge(&t).await, "purge"), 0);
    assert_eq!(
        ok(a.purge(&new_topic(h, "never-used").await).await, "purge"),
        0
    );
    assert_eq!(listed(&b).await, ["stays"]);
    ok(b.push(job(&t, "v")).await, "push");
    assert_eq!(listed(&a).await, ["gone", "stays"]);
}
