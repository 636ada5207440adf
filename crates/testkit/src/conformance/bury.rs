//! Conformance cases of dead jobs: a bury sends a reserved job to dead, a kick brings one
//! dead job back (and refuses the other states), a kick_all brings them all back; and a
//! bury without a lease (issue 15): an operator sends a delayed or ready job to dead now;
//! reserved, dead and missing jobs are refused and nothing changes.

use std::time::Duration;

use delayq_core::limits::MAX_REASON;
use delayq_core::{Engine, Error, JobState, Nack, Reserve};

use super::{
    get, id, job, lease_of, ms, new_topic, nothing_ready, ok, one_in_each_state, reserve_one, state,
};
use crate::Harness;

/// Bury sends a reserved job to dead at once.
pub async fn bury_sends_to_dead<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "bury").await;
    ok(e.push(job(&t, "a").with_max_attempts(10)).await, "push");
    let d = reserve_one(&e, &t, ms(0)).await;
    ok(e.bury(&lease_of(&d), Some("poison".into())).await, "bury");
    let j = get(&e, &t, "a").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.last_error.as_deref(), Some("poison"));
    assert!(j.deadline.is_some(), "a dead job records when it died");
    let page = ok(e.list(&t, JobState::Dead, 10, None).await, "list");
    assert_eq!(
        page.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec!["a"]
    );
    nothing_ready(&e, &t).await;
}

/// Kick makes a dead job ready with its attempts reset; it refuses other states.
pub async fn kick_brings_dead_back<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "kick").await;
    one_in_each_state(&e, &t).await;
    ok(e.kick(&t, &id("dead")).await, "kick");
    let j = get(&e, &t, "dead").await;
    assert_eq!(j.state, JobState::Ready);
    assert_eq!(j.attempts, 0);
    for name in ["delayed", "ready", "reserved"] {
        let before = h.snapshot().await;
        let r = e.kick(&t, &id(name)).await;
        assert!(
            matches!(
                r,
                Err(Error::WrongState {
                    operation: "kick",
                    ..
                })
            ),
            "{name}: {r:?}"
        );
        assert_eq!(h.snapshot().await, before);
    }
    let r = e.kick(&t, &id("missing")).await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    let mut got = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve");
    got.retain(|d| d.job.id == id("dead"));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].attempt(), 1);
}

/// kick_all kicks every dead job and counts them.
pub async fn kick_all_kicks_every_dead_job<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "kickall").await;
    let names: Vec<String> = (0..5).map(|i| format!("j{i}")).collect();
    ok(
        e.push_batch(
            names
                .iter()
                .map(|n| job(&t, n).with_max_attempts(1))
                .collect(),
        )
        .await,
        "push",
    );
    for d in ok(e.reserve(&Reserve::new(t.clone()).max(5)).await, "reserve") {
        ok(e.nack(&lease_of(&d), Nack::default()).await, "nack");
    }
    assert_eq!(ok(e.stats(&t).await, "stats").dead, 5);
    assert_eq!(ok(e.kick_all(&t).await, "kick_all"), 5);
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.dead, s.ready), (0, 5));
    assert_eq!(ok(e.kick_all(&t).await, "kick_all"), 0);
}

/// A delayed or ready job goes dead at once with the reason and its attempts as they were;
/// it is listed and counted dead, never delivered, its expiry no longer sweeps it, and a kick
/// brings it back. A reserved or dead job is refused (`WrongState`, operation `bury`), a
/// missing one `NotFound`, a reason over the limit `InvalidArgument`: each changes nothing.
pub async fn bury_waiting_sends_a_waiting_job_to_dead_issue_15<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "bury-waiting").await;
    // A job that failed once, waiting for its retry: delayed with one attempt ended.
    ok(
        e.push(job(&t, "retried").with_max_attempts(5)).await,
        "push",
    );
    let d = reserve_one(&e, &t, Duration::ZERO).await;
    assert_eq!(d.job.id, id("retried"));
    let nack = Nack {
        delay: Some(Duration::from_secs(3600)),
        reason: Some("first try failed".into()),
    };
    ok(e.nack(&lease_of(&d), nack).await, "nack");
    assert_eq!(state(&e, &t, "retried").await, Some(JobState::Delayed));

    one_in_each_state(&e, &t).await;

    ok(
        e.bury_waiting(&t, &id("retried"), Some("by hand".into()))
            .await,
        "bury the delayed job",
    );
    let j = get(&e, &t, "retried").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.attempts, 1, "a bury without a lease ends no attempt");
    assert_eq!(j.last_error.as_deref(), Some("by hand"));
    assert!(j.deadline.is_some(), "a dead job records when it died");

    ok(
        e.bury_waiting(&t, &id("ready"), None).await,
        "bury the ready job",
    );
    assert_eq!(state(&e, &t, "ready").await, Some(JobState::Dead));
    ok(
        e.bury_waiting(&t, &id("delayed"), Some("x".into())).await,
        "bury",
    );
    assert_eq!(state(&e, &t, "delayed").await, Some(JobState::Dead));

    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.delayed, s.ready, s.reserved, s.dead), (0, 0, 1, 4));
    let dead = ok(e.list(&t, JobState::Dead, 10, None).await, "list");
    let mut names: Vec<&str> = dead.jobs.iter().map(|j| j.id.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["dead", "delayed", "ready", "retried"]);
    let got = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve");
    assert!(got.is_empty(), "a buried job is not delivered: {got:?}");

    // Refusals change nothing.
    for name in ["reserved", "dead"] {
        let before = h.snapshot().await;
        let r = e.bury_waiting(&t, &id(name), None).await;
        assert!(
            matches!(
                r,
                Err(Error::WrongState {
                    operation: "bury",
                    ..
                })
            ),
            "{name}: {r:?}"
        );
        assert_eq!(h.snapshot().await, before, "{name}");
    }
    let before = h.snapshot().await;
    let r = e.bury_waiting(&t, &id("missing"), None).await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    ok(e.push(job(&t, "kept")).await, "push");
    let before_long = h.snapshot().await;
    let r = e
        .bury_waiting(&t, &id("kept"), Some("x".repeat(MAX_REASON + 1)))
        .await;
    assert!(
        matches!(r, Err(Error::InvalidArgument { what: "reason", .. })),
        "{r:?}"
    );
    assert_eq!(h.snapshot().await, before_long);
    assert_ne!(before, before_long);
    assert_eq!(state(&e, &t, "kept").await, Some(JobState::Ready));

    // A buried job whose expiry then passes stays dead with its reason, not counted expired.
    ok(
        e.push(job(&t, "expiring").with_max_lateness(Duration::from_millis(100)))
            .await,
        "push",
    );
    ok(
        e.bury_waiting(&t, &id("expiring"), Some("not wanted".into()))
            .await,
        "bury",
    );
    tokio::time::sleep(Duration::from_millis(250)).await;
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!(s.expired_jobs, 0, "a dead job does not expire");
    let j = get(&e, &t, "expiring").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.last_error.as_deref(), Some("not wanted"));

    // A kick brings a buried job back, attempts reset.
    ok(e.kick(&t, &id("retried")).await, "kick");
    let j = get(&e, &t, "retried").await;
    assert_eq!((j.state, j.attempts), (JobState::Ready, 0));
}
