//! Conformance cases of what an operator reads and removes job by job: a topic's stats
//! (counts per state, the age of the oldest due job, the next due time), the paged listing
//! of a state in its order, and the delete of a job in any state.

use std::time::Duration;

use delayq_core::{Cursor, Engine, Error, Job, JobState, NewJob, Timestamp};

use super::{
    get, id, job, ms, new_topic, nothing_ready, ok, one_in_each_state, reserve_one, state,
};
use crate::Harness;

/// Stats count each state, the age of the oldest due job and the next due time; read for
/// several topics at once, each answers its own.
pub async fn stats_counts_and_overdue_age<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "stats").await;
    let empty = ok(e.stats(&t).await, "stats");
    assert_eq!(empty, delayq_core::TopicStats::default());
    one_in_each_state(&e, &t).await;
    ok(e.push(job(&t, "ready-low").with_priority(9)).await, "push");
    tokio::time::sleep(ms(200)).await;
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.delayed, s.ready, s.reserved, s.dead), (1, 2, 1, 1));
    let age = s.oldest_overdue.expect("a ready job is overdue");
    assert!(age >= ms(200) && age < Duration::from_secs(5), "{age:?}");
    let delayed = get(&e, &t, "delayed").await;
    assert_eq!(s.next_due, Some(delayed.ready_at));

    // Read with another topic, as a listing reads them (`stats_each`): each topic its own
    // answer, in the order asked.
    let other = new_topic(h, "stats-other").await;
    let mut each = e.stats_each(&[other, t.clone()]).await.into_iter();
    let (o, again) = (each.next(), each.next());
    assert!(each.next().is_none(), "more answers than topics");
    let o = ok(o.expect("an answer for each topic"), "stats_each");
    let again = ok(again.expect("an answer for each topic"), "stats_each");
    assert_eq!(o, delayq_core::TopicStats::default());
    assert_eq!(
        (again.delayed, again.ready, again.reserved, again.dead),
        (1, 2, 1, 1)
    );
    assert_eq!(again.next_due, s.next_due);
}

/// Listing pages through a state in its order; a cursor survives its job leaving.
pub async fn list_pages_in_order<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "list").await;
    // 25 delayed jobs, several sharing a due time: ordered by (due, id).
    let jobs: Vec<NewJob> = (0..25)
        .map(|i| {
            job(&t, &format!("j{:02}", 24 - i)).with_delay(Duration::from_secs(3600 + (i % 5) * 60))
        })
        .collect();
    ok(e.push_batch(jobs).await, "push");
    let mut all: Vec<Job> = Vec::new();
    let mut cursor: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let page = ok(
            e.list(&t, JobState::Delayed, 10, cursor.as_ref()).await,
            "list",
        );
        pages += 1;
        all.extend(page.jobs);
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(all.len(), 25);
    let keys: Vec<(Timestamp, String)> =
        all.iter().map(|j| (j.ready_at, j.id.to_string())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(all.iter().all(|j| j.state == JobState::Delayed));

    // The cursor's own job is deleted between pages: the next page starts right after it.
    let first = ok(e.list(&t, JobState::Delayed, 5, None).await, "list");
    let c = first.next.expect("more pages");
    assert!(ok(e.delete(&t, &first.jobs[4].id).await, "delete"));
    let second = ok(e.list(&t, JobState::Delayed, 5, Some(&c)).await, "list");
    assert_eq!(second.jobs[0].id, all[5].id);

    // Ready is listed by (priority, due, push order); reserved and dead too.
    let r = new_topic(h, "list-ready").await;
    ok(e.push(job(&r, "p5").with_priority(5)).await, "push");
    ok(e.push(job(&r, "p1").with_priority(1)).await, "push");
    ok(e.push(job(&r, "p1b").with_priority(1)).await, "push");
    let ready: Vec<String> = ok(e.list(&r, JobState::Ready, 10, None).await, "list")
        .jobs
        .iter()
        .map(|j| j.id.to_string())
        .collect();
    assert_eq!(ready, vec!["p1", "p1b", "p5"]);
    let d = reserve_one(&e, &r, ms(0)).await;
    let reserved = ok(e.list(&r, JobState::Reserved, 10, None).await, "list").jobs;
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].id, d.job.id);
    assert!(
        ok(e.list(&r, JobState::Dead, 10, None).await, "list")
            .jobs
            .is_empty()
    );

    let bad = e
        .list(&t, JobState::Delayed, 10, Some(&Cursor("garbage".into())))
        .await;
    assert!(
        matches!(bad, Err(Error::InvalidArgument { what: "cursor", .. })),
        "{bad:?}"
    );
    for limit in [0, 1001] {
        let bad = e.list(&t, JobState::Delayed, limit, None).await;
        assert!(matches!(bad, Err(Error::InvalidArgument { .. })), "{bad:?}");
    }
}

/// Delete removes a job in any state; a deleted reserved job's lease is lost.
pub async fn delete_in_every_state<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "del").await;
    let lease = one_in_each_state(&e, &t).await;
    for name in ["delayed", "ready", "reserved", "dead"] {
        assert!(ok(e.delete(&t, &id(name)).await, "delete"), "{name}");
        assert_eq!(state(&e, &t, name).await, None, "{name}");
    }
    assert!(!ok(e.delete(&t, &id("missing")).await, "delete"));
    let r = e.ack(&lease).await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.delayed, s.ready, s.reserved, s.dead), (0, 0, 0, 0));
    nothing_ready(&e, &t).await;
}
