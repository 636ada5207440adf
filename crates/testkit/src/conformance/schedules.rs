//! Conformance cases of stored schedules ([`JobSchedule`], issue 14): what one instance puts
//! every instance reads (the jobs' expiry too, issue 36), a put replaces and starts afresh,
//! `schedule_pushed` records progress only for the current revision and only forward, a
//! delete answers what it removed.

use std::time::Duration;

use delayq_core::{
    Backoff, Error, Expiry, JobSchedule, JobTemplate, Misfire, OnExpire, ScheduleName, Schedules,
    StoredSchedule, Timestamp,
};

use super::{new_topic, ok, topic};
use crate::Harness;

fn name(n: &str) -> ScheduleName {
    ScheduleName::new(n).expect("test schedule name is valid")
}

/// A schedule with every field set, so that a store that drops one is caught; its jobs
/// expire 90 s after their due time and are then dropped.
fn full(n: &str, cron: &str) -> JobSchedule {
    full_expiring(
        n,
        cron,
        Expiry::AfterDue(Duration::from_secs(90)),
        OnExpire::Drop,
    )
}

/// [`full`] with the jobs' expiry given.
fn full_expiring(n: &str, cron: &str, expiry: Expiry, on_expire: OnExpire) -> JobSchedule {
    JobSchedule::new(
        name(n),
        cron,
        "Europe/Berlin",
        topic("sched-jobs"),
        JobTemplate {
            body: vec![0u8, 1, 2, 255].into(),
            priority: 7,
            ttr: Some(Duration::from_secs(45)),
            max_attempts: Some(4),
            backoff: Some(Backoff::fixed(Duration::from_secs(2))),
            expiry: Some(expiry),
            on_expire,
        },
    )
    .expect("test schedule is valid")
    .with_window(
        Some(Timestamp::from_millis(1_700_000_000_000)),
        Some(Timestamp::from_millis(4_000_000_000_000)),
    )
    .expect("test window is valid")
    .with_jitter(Duration::from_millis(1500))
    .expect("test jitter is valid")
    .with_misfire(Misfire::Each(3))
}

fn ms(n: u64) -> Timestamp {
    Timestamp::from_millis(n)
}

/// A schedule put through one instance is read, whole, by another (alone and in the list);
/// progress is recorded for the current revision only and only forward; a put replaces the
/// definition, bumps the revision and clears the progress; a delete answers what it removed.
pub async fn schedules_are_stored_shared_and_replaced_issue_14<H: Harness>(h: &H) {
    let (e, other) = (h.open().await, h.open().await);
    let a = full("nightly", "30 2 * * *");
    let b = JobSchedule::new(
        name("every-5s"),
        "*/5 * * * * *",
        "UTC",
        new_topic(h, "sched-other").await,
        JobTemplate::default(),
    )
    .expect("test schedule is valid");
    assert_eq!(ok(e.schedules().await, "list"), vec![]);
    assert_eq!(ok(e.schedule(a.name()).await, "get"), None);

    assert_eq!(ok(e.put_schedule(&a).await, "put"), 1);
    assert_eq!(ok(other.put_schedule(&b).await, "put"), 1);
    let stored = |s: &JobSchedule, revision, through| StoredSchedule {
        schedule: s.clone(),
        revision,
        through,
    };
    assert_eq!(
        ok(other.schedule(a.name()).await, "get"),
        Some(stored(&a, 1, None))
    );
    assert_eq!(
        ok(e.schedules().await, "list"),
        vec![stored(&b, 1, None), stored(&a, 1, None)],
        "by name"
    );

    // Progress: forward only, current revision only.
    assert!(ok(
        e.schedule_pushed(a.name(), 1, ms(2_000)).await,
        "pushed"
    ));
    assert!(!ok(
        other.schedule_pushed(a.name(), 1, ms(2_000)).await,
        "again"
    ));
    assert!(!ok(
        other.schedule_pushed(a.name(), 1, ms(1_000)).await,
        "backwards"
    ));
    assert!(!ok(
        other.schedule_pushed(a.name(), 2, ms(3_000)).await,
        "future revision"
    ));
    assert!(!ok(
        other.schedule_pushed(&name("none"), 1, ms(3_000)).await,
        "no such"
    ));
    assert!(ok(
        other.schedule_pushed(a.name(), 1, ms(3_000)).await,
        "forward"
    ));
    assert_eq!(
        ok(e.schedule(a.name()).await, "get"),
        Some(stored(&a, 1, Some(ms(3_000))))
    );

    // A put replaces: new revision, progress cleared; the old revision records nothing. The
    // replacement's jobs expire at one time instead, and go dead then.
    let a2 = full_expiring(
        "nightly",
        "45 3 * * *",
        Expiry::At(ms(3_900_000_000_000)),
        OnExpire::Dead,
    )
    .with_misfire(Misfire::Skip);
    assert_eq!(ok(other.put_schedule(&a2).await, "replace"), 2);
    assert_eq!(
        ok(e.schedule(a.name()).await, "get"),
        Some(stored(&a2, 2, None))
    );
    assert!(!ok(
        e.schedule_pushed(a.name(), 1, ms(9_000)).await,
        "old revision"
    ));
    assert!(ok(
        e.schedule_pushed(a.name(), 2, ms(9_000)).await,
        "new revision"
    ));

    // Delete answers what it removed; then nothing is left of it.
    assert_eq!(
        ok(e.delete_schedule(a.name()).await, "delete"),
        Some(stored(&a2, 2, Some(ms(9_000))))
    );
    assert_eq!(ok(other.delete_schedule(a.name()).await, "again"), None);
    assert_eq!(ok(other.schedule(a.name()).await, "get"), None);
    assert_eq!(ok(e.schedules().await, "list"), vec![stored(&b, 1, None)]);
    // A schedule put again after a delete starts at revision 1.
    assert_eq!(ok(e.put_schedule(&a).await, "put again"), 1);
}

/// A schedule the checks refuse (a misfire limit of 0) is refused by the engine and
/// changes nothing.
pub async fn bad_schedules_are_refused_and_change_nothing_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    ok(e.put_schedule(&full("kept", "0 * * * *")).await, "put");
    let before = h.snapshot().await;
    let bad = full("bad", "0 * * * *").with_misfire(Misfire::Each(0));
    match e.put_schedule(&bad).await {
        Err(
            err @ Error::InvalidArgument {
                what: "misfire", ..
            },
        ) => {
            assert!(err.is_invalid_input(), "{err:?}");
        }
        other => panic!("a misfire limit of 0 was not refused: {other:?}"),
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "the refused put changed the store"
    );
}
