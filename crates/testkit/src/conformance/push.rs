//! Conformance cases of pushing: every field of a pushed job comes back, a job due now is
//! ready at once, a push of a live id is idempotent in every state, `push_batch` and
//! `push_each` answer each job in order (a bad batch is refused whole), and `push_new`
//! refuses an existing id.

use std::time::Duration;

use delayq_core::limits::MAX_DELAY;
use delayq_core::{Backoff, Engine, Error, JobState, NewJob, Schedule, Topic, TopicConfig};

use super::{
    assert_due_after, get, id, job, ms, new_topic, ok, one_in_each_state, reserve_one, state,
    with_partitions,
};
use crate::Harness;

/// Every field pushed comes back from get; the due time is created + delay on the engine clock.
pub async fn push_and_get_round_trip<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "rt").await;
    let backoff = Backoff::exponential(ms(250), Duration::from_secs(60))
        .with_factor(3)
        .with_jitter(0.25);
    let pushed = ok(
        e.push(
            NewJob::new(t.clone(), vec![0u8, 1, 2, 255])
                .with_id(id("a"))
                .with_delay(Duration::from_secs(3600))
                .with_ttr(Duration::from_secs(45))
                .with_max_attempts(7)
                .with_backoff(backoff)
                .with_priority(9),
        )
        .await,
        "push",
    );
    assert!(pushed.created);
    assert_eq!(pushed.state, JobState::Delayed);
    let j = get(&e, &t, "a").await;
    assert_eq!(j.topic, t);
    assert_eq!(j.body.as_ref(), &[0u8, 1, 2, 255]);
    assert_eq!(j.state, JobState::Delayed);
    assert_eq!(j.priority, 9);
    assert_eq!(j.ttr, Duration::from_secs(45));
    assert_eq!(j.max_attempts, 7);
    assert_eq!(j.backoff, backoff);
    assert_eq!(j.attempts, 0);
    assert_eq!(j.deadline, None);
    assert_eq!(j.last_error, None);
    // The creation time and the due time come from one reading of the engine's clock.
    let hour = Duration::from_secs(3600);
    assert_due_after("a", j.ready_at, j.created_at, j.created_at, hour);
    assert_eq!(pushed.ready_at, j.ready_at);
    let now = ok(e.now().await, "now");
    assert!(j.created_at <= now && now.since(j.created_at) < Duration::from_secs(5));
    assert_eq!(ok(e.get(&t, &id("missing")).await, "get"), None);
}

/// A job pushed with no delay is ready at once and handed out with a lease.
pub async fn push_due_now_is_ready<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "now").await;
    let p = ok(e.push(job(&t, "a")).await, "push");
    assert_eq!(p.state, JobState::Ready);
    assert_eq!(state(&e, &t, "a").await, Some(JobState::Ready));
    let d = reserve_one(&e, &t, ms(0)).await;
    assert_eq!(d.job.id, id("a"));
    assert_eq!(d.job.body.as_ref(), b"body of a");
    assert!(d.lease.is_some());
}

/// Pushing a live (topic, id) again, in any state, creates nothing and changes nothing.
pub async fn push_is_idempotent_in_every_state<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "idem").await;
    one_in_each_state(&e, &t).await;
    for (name, st) in [
        ("delayed", JobState::Delayed),
        ("ready", JobState::Ready),
        ("reserved", JobState::Reserved),
        ("dead", JobState::Dead),
    ] {
        let before = get(&e, &t, name).await;
        let again = ok(
            e.push(
                NewJob::new(t.clone(), "other body")
                    .with_id(id(name))
                    .with_priority(3),
            )
            .await,
            "push again",
        );
        assert!(!again.created, "{name} was created twice");
        assert_eq!(again.state, st);
        assert_eq!(again.ready_at, before.ready_at);
        assert_eq!(get(&e, &t, name).await, before, "{name} changed");
    }
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.delayed, s.ready, s.reserved, s.dead), (1, 1, 1, 1));
}

/// A batch over two topics with a duplicate inside it, and what each job answers: (id,
/// created, state).
fn mixed_batch(t1: &Topic, t2: &Topic) -> (Vec<NewJob>, Vec<(String, bool, JobState)>) {
    let jobs = vec![
        job(t1, "a"),
        job(t2, "a").with_delay(Duration::from_secs(60)),
        NewJob::new(t1.clone(), "second a").with_id(id("a")),
        job(t1, "b"),
    ];
    let answers = vec![
        ("a".into(), true, JobState::Ready),
        ("a".into(), true, JobState::Delayed),
        ("a".into(), false, JobState::Ready),
        ("b".into(), true, JobState::Ready),
    ];
    (jobs, answers)
}

/// A batch answers in order; a duplicate inside it is answered as existing.
pub async fn push_batch_answers_in_order_with_duplicates<H: Harness>(h: &H) {
    let e = h.open().await;
    let (t1, t2) = (new_topic(h, "b1").await, new_topic(h, "b2").await);
    let (jobs, want) = mixed_batch(&t1, &t2);
    let answers = ok(e.push_batch(jobs).await, "push_batch");
    let got: Vec<(String, bool, JobState)> = answers
        .iter()
        .map(|p| (p.id.to_string(), p.created, p.state))
        .collect();
    assert_eq!(got, want);
    assert_eq!(get(&e, &t1, "a").await.body.as_ref(), b"body of a");
    let generated = ok(
        e.push_batch(vec![
            NewJob::new(t1.clone(), "x"),
            NewJob::new(t1.clone(), "y"),
        ])
        .await,
        "push_batch",
    );
    assert_ne!(generated[0].id, generated[1].id);
    assert!(generated.iter().all(|p| p.created));
}

/// `push_each` answers each job apart, in order, as `push_batch` does when every job is
/// stored; a batch with a bad job (over its topic's body limit, due too far ahead), over
/// two topics so that it takes several calls, is refused whole and changes nothing.
pub async fn push_each_answers_each_job_and_refuses_bad_input_whole<H: Harness>(h: &H) {
    let e = h.open().await;
    let (t1, t2) = (new_topic(h, "each1").await, new_topic(h, "each2").await);
    let (jobs, want) = mixed_batch(&t1, &t2);
    let answers = ok(e.push_each(jobs).await, "push_each");
    let got: Vec<(String, bool, JobState)> = answers
        .into_iter()
        .map(|a| ok(a, "a job of push_each"))
        .map(|p| (p.id.to_string(), p.created, p.state))
        .collect();
    assert_eq!(got, want);

    let small = TopicConfig {
        max_body: Some(4),
        ..TopicConfig::default()
    };
    ok(
        e.set_topic_config(&t2, &with_partitions(h, small)).await,
        "set_topic_config",
    );
    let before = h.snapshot().await;
    let err = e
        .push_each(vec![
            job(&t1, "c"),
            NewJob::new(t2.clone(), "over four bytes").with_id(id("c")),
        ])
        .await;
    assert!(matches!(err, Err(Error::BodyTooLarge { .. })), "{err:?}");
    assert_eq!(
        h.snapshot().await,
        before,
        "a refused batch changed something"
    );
    let now = ok(e.now().await, "now");
    let far = now.plus(MAX_DELAY).plus(Duration::from_secs(3600));
    let err = e
        .push_each(vec![
            job(&t1, "c"),
            job(&t2, "d").with_schedule(Schedule::At(far)),
        ])
        .await;
    assert!(matches!(err, Err(Error::InvalidDelay { .. })), "{err:?}");
    assert_eq!(
        h.snapshot().await,
        before,
        "a refused batch changed something"
    );
}

/// push_new refuses an existing id with AlreadyExists and changes nothing.
pub async fn push_new_refuses_existing<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "new").await;
    ok(e.push_new(job(&t, "a")).await, "push_new");
    let before = h.snapshot().await;
    let err = e
        .push_new(NewJob::new(t.clone(), "x").with_id(id("a")))
        .await;
    assert!(matches!(err, Err(Error::AlreadyExists { .. })), "{err:?}");
    assert_eq!(h.snapshot().await, before);
}
