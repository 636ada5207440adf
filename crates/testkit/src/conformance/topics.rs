//! Conformance cases of whole topics: the topic list, a purge (of every job of its topic and
//! nothing else, and how it leaves the list), and how a pause lists a topic.

use std::time::{Duration, Instant};

use delayq_core::limits::MAX_DELAY;
use delayq_core::{Engine, Error, JobState, Timestamp, TopicConfig};

use super::{
    job, lease_of, ms, new_topic, nothing_ready, ok, one_in_each_state, reserve_one, state,
    with_partitions,
};
use crate::Harness;

/// Topics that held jobs are listed, sorted (a purge takes one off: see below).
pub async fn topics_are_listed<H: Harness>(h: &H) {
    let e = h.open().await;
    assert!(ok(e.topics().await, "topics").is_empty());
    ok(e.push(job(&new_topic(h, "zeta").await, "a")).await, "push");
    ok(
        e.push_batch(vec![
            job(&new_topic(h, "alpha").await, "a"),
            job(&new_topic(h, "mid").await, "a"),
        ])
        .await,
        "push",
    );
    let names: Vec<String> = ok(e.topics().await, "topics")
        .iter()
        .map(|t| t.to_string())
        .collect();
    assert_eq!(names, vec!["alpha", "mid", "zeta"]);
}

/// Purge removes every job of the topic and nothing of other topics.
pub async fn purge_removes_everything<H: Harness>(h: &H) {
    let e = h.open().await;
    let (t, other) = (new_topic(h, "purge").await, new_topic(h, "keep").await);
    let lease = one_in_each_state(&e, &t).await;
    ok(e.push(job(&other, "x")).await, "push");
    assert_eq!(ok(e.purge(&t).await, "purge"), 4);
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.delayed, s.ready, s.reserved, s.dead), (0, 0, 0, 0));
    nothing_ready(&e, &t).await;
    assert!(matches!(e.ack(&lease).await, Err(Error::NotFound { .. })));
    assert_eq!(state(&e, &other, "x").await, Some(JobState::Ready));
    assert!(ok(e.push(job(&t, "delayed")).await, "push").created);
    // Tokens stay fresh across a purge.
    let d = reserve_one(&e, &t, ms(0)).await;
    assert!(lease_of(&d).token > lease.token);
    assert_eq!(
        ok(e.purge(&new_topic(h, "never-used").await).await, "purge"),
        0
    );
}

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

/// A paused topic is on the topic list whether it holds jobs or not, for every instance: one
/// paused before its first push, and one purged while paused; it leaves when its pause ends,
/// by a resume or by its end time. A refused pause lists nothing, and neither do settings.
// See: issue 36 (a paused topic with no jobs vanished from stats, the overview and /metrics).
pub async fn a_paused_topic_is_listed_with_or_without_jobs_issue_36<H: Harness>(h: &H) {
    let (a, b) = (h.open().await, h.open().await);
    let (ahead, busy) = (new_topic(h, "ahead").await, new_topic(h, "busy").await);
    ok(a.push(job(&busy, "x")).await, "push");
    assert_eq!(listed(&b).await, ["busy"]);

    // Paused before its first push: listed, and its stats say so.
    ok(a.pause(&ahead, None).await, "pause");
    assert_eq!(listed(&a).await, ["ahead", "busy"]);
    assert_eq!(listed(&b).await, ["ahead", "busy"]);
    assert_eq!(
        ok(b.stats(&ahead).await, "stats").paused_until,
        Some(Timestamp::NEVER)
    );
    // A resume from another instance takes it off; a second one changes nothing.
    ok(b.resume(&ahead).await, "resume");
    assert_eq!(listed(&a).await, ["busy"]);
    ok(a.resume(&ahead).await, "resume again");
    assert_eq!(listed(&b).await, ["busy"]);

    // Purged while paused: it stays listed, empty, until resumed.
    ok(a.pause(&busy, None).await, "pause");
    assert_eq!(ok(b.purge(&busy).await, "purge"), 1);
    assert_eq!(listed(&a).await, ["busy"]);
    let s = ok(a.stats(&busy).await, "stats");
    assert_eq!(
        (s.ready, s.paused_until),
        (0, Some(Timestamp::NEVER)),
        "{s:?}"
    );
    ok(a.resume(&busy).await, "resume");
    assert!(listed(&b).await.is_empty());

    // A timed pause lists the topic until its end, then it leaves by itself.
    let until = ok(a.now().await, "now").plus(Duration::from_millis(500));
    ok(a.pause(&ahead, Some(until)).await, "timed pause");
    assert_eq!(listed(&b).await, ["ahead"]);
    let start = Instant::now();
    while ok(a.now().await, "now") <= until {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the engine clock did not pass the pause's end"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed(&a).await.is_empty(), "{:?}", listed(&a).await);

    // A refused pause, and settings alone, list nothing.
    let far = ok(a.now().await, "now").plus(MAX_DELAY + Duration::from_secs(3600));
    assert!(
        a.pause(&ahead, Some(far)).await.is_err(),
        "a pause 10 years ahead"
    );
    let configured = new_topic(h, "configured").await;
    ok(
        a.set_topic_config(
            &configured,
            &TopicConfig {
                max_attempts: Some(3),
                ..with_partitions(h, TopicConfig::default())
            },
        )
        .await,
        "set config",
    );
    assert!(listed(&b).await.is_empty(), "{:?}", listed(&b).await);
}
