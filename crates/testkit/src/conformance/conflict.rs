//! Conformance cases of a push whose id exists (issue 14, `OnConflict`): keep (the
//! idempotent push, covered by the push cases), replace and debounce of a waiting job, and
//! a reserved or dead job left alone whatever the push says.

use std::time::Duration;

use delayq_core::{Engine, JobState, Nack, OnConflict, Reserve};

use super::{get, job, lease_of, new_topic, ok, reserve_one};
use crate::Harness;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Replace rewrites a waiting job's body, due time and options (id, attempts and creation
/// time kept); a reserved or dead job, and a duplicate later in the same batch, are left
/// alone and answered with their state.
pub async fn replace_rewrites_a_waiting_job_only_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "replace").await;
    let first = job(&t, "a")
        .with_delay(Duration::from_secs(3600))
        .with_priority(5);
    ok(e.push(first).await, "push");
    let before = get(&e, &t, "a").await;
    let mut again = job(&t, "a")
        .with_priority(1)
        .with_ttr(Duration::from_secs(45))
        .with_on_conflict(OnConflict::Replace);
    again.body = "v2".into();
    let p = ok(e.push(again).await, "replace");
    assert_eq!(
        (p.created, p.replaced, p.state),
        (false, true, JobState::Ready)
    );
    let after = get(&e, &t, "a").await;
    assert_eq!(
        (after.state, after.priority, after.ttr, &after.body[..]),
        (JobState::Ready, 1, Duration::from_secs(45), &b"v2"[..])
    );
    assert_eq!((after.created_at, after.attempts), (before.created_at, 0));

    // A batch naming it twice: the first replaces, the second sees the first.
    let mut v3 = job(&t, "a").with_on_conflict(OnConflict::Replace);
    v3.body = "v3".into();
    let mut v4 = job(&t, "a").with_on_conflict(OnConflict::Replace);
    v4.body = "v4".into();
    let both = ok(e.push_batch(vec![v3, v4]).await, "batch");
    assert_eq!(
        both.iter()
            .map(|p| (p.created, p.replaced))
            .collect::<Vec<_>>(),
        [(false, true), (false, false)]
    );
    assert_eq!(&get(&e, &t, "a").await.body[..], b"v3");

    // Reserved: untouched.
    let d = reserve_one(&e, &t, Duration::ZERO).await;
    assert_eq!(&d.job.body[..], b"v3");
    let mut v5 = job(&t, "a").with_on_conflict(OnConflict::Replace);
    v5.body = "v5".into();
    let p = ok(e.push(v5).await, "replace a reserved job");
    assert_eq!(
        (p.created, p.replaced, p.state),
        (false, false, JobState::Reserved)
    );
    assert_eq!(&get(&e, &t, "a").await.body[..], b"v3");

    // Dead: untouched.
    ok(e.push(job(&t, "d").with_max_attempts(1)).await, "push");
    let mut got = reserve_one(&e, &t, Duration::ZERO).await;
    while got.job.id.as_str() != "d" {
        got = reserve_one(&e, &t, Duration::ZERO).await;
    }
    ok(e.nack(&lease_of(&got), Nack::default()).await, "nack");
    let p = ok(
        e.push(job(&t, "d").with_on_conflict(OnConflict::Replace))
            .await,
        "replace a dead job",
    );
    assert_eq!((p.replaced, p.state), (false, JobState::Dead));
    ok(e.ack(&lease_of(&d)).await, "ack");
}

/// Debounce moves a waiting job's due time back with each push (counted from that push),
/// but never past its max wait from the first push; the burst runs once.
pub async fn debounce_moves_the_due_time_back_within_its_max_wait_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "debounce").await;
    let push = |delay: u64| {
        job(&t, "b")
            .with_delay(ms(delay))
            .with_on_conflict(OnConflict::Debounce {
                max_wait: Some(ms(1500)),
            })
    };
    let p1 = ok(e.push(push(600)).await, "first push");
    assert!(p1.created);
    let created = get(&e, &t, "b").await.created_at;
    tokio::time::sleep(ms(200)).await;
    let p2 = ok(e.push(push(600)).await, "second push");
    assert_eq!((p2.created, p2.replaced), (false, true));
    assert!(
        p2.ready_at > p1.ready_at,
        "{p2:?} did not move back from {p1:?}"
    );
    // A long delay is cut to the max wait from the first push.
    let p3 = ok(e.push(push(60_000)).await, "third push");
    assert_eq!(p3.ready_at, created.plus(ms(1500)), "{p3:?}");
    assert!(ok(e.reserve(&Reserve::new(t.clone())).await, "reserve").is_empty());
    let d = ok(
        e.reserve(
            &Reserve::new(t.clone())
                .max(10)
                .wait(Duration::from_secs(10)),
        )
        .await,
        "reserve",
    );
    assert_eq!(d.len(), 1, "the burst runs once");
    assert!(d[0].job.ready_at == p3.ready_at);
    ok(e.ack(&lease_of(&d[0])).await, "ack");
}
