//! Conformance cases of due times: a job is never handed out before it is due, a delay
//! counts from the engine clock rounded up to the millisecond and never makes a job due
//! before the caller's clock plus the delay (issue 36), delays run from 0 to 10 years,
//! absolute times are checked, and a reschedule moves waiting jobs only.

use std::time::{Duration, Instant};

use delayq_core::limits::MAX_DELAY;
use delayq_core::{
    Engine, Error, JobState, Nack, NackOutcome, NewJob, Release, Reserve, Schedule, Timestamp,
};

use super::{
    assert_due_after, get, id, job, lease_of, ms, new_topic, ok, one_in_each_state, reserve_one,
    state,
};
use crate::Harness;

/// Jobs with spread delays are never handed out before their due time.
pub async fn never_delivered_before_due<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "early").await;
    let jobs: Vec<NewJob> = (0..30)
        .map(|i| job(&t, &format!("j{i}")).with_delay(ms(i * 17 % 400)))
        .collect();
    ok(e.push_batch(jobs).await, "push");
    let mut seen = 0;
    let start = Instant::now();
    while seen < 30 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "only {seen} of 30 delivered"
        );
        for d in ok(
            e.reserve(&Reserve::new(t.clone()).max(5).wait(Duration::from_secs(2)))
                .await,
            "reserve",
        ) {
            let reserved_at = Timestamp::from_millis(
                d.job.deadline.expect("deadline").as_millis() - d.job.ttr.as_millis() as u64,
            );
            assert!(
                reserved_at >= d.job.ready_at,
                "{} delivered at {reserved_at:?}, due {:?}",
                d.job.id,
                d.job.ready_at
            );
            ok(e.ack(&lease_of(&d)).await, "ack");
            seen += 1;
        }
    }
}

/// The caller's clock in µs since the epoch (the engines run on this host: their clocks are
/// this one).
fn caller_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A job asked for a delay is never due before the caller's clock when it asked plus the
/// delay, to the microsecond: pushed, rescheduled, nacked or released with a delay. The
/// engine's now is rounded up to the millisecond before the delay is added (the engines
/// once truncated it, and 1 push in 16 was due up to 0.4 ms early), and only that: no due
/// time is later than the caller's clock when the answer came, rounded up, plus the delay.
/// Then the jobs are handed out no earlier than their due time on the caller's clock either.
///
/// See: issue 36.
pub async fn a_delayed_job_is_never_due_before_the_callers_clock_plus_its_delay_issue_36<
    H: Harness,
>(
    h: &H,
) {
    let e = h.open().await;
    let t = new_topic(h, "never-early").await;
    let delay = ms(40);
    // `asked_us` and `answered_us`: the caller's clock just before the call and just after
    // its answer.
    let check = |what: &str, asked_us: u64, answered_us: u64, due: Timestamp| {
        let due_us = due.as_millis() * 1000;
        assert!(
            due_us >= asked_us + 40_000,
            "{what}: due at {due_us} µs, asked at {asked_us} µs with a 40 ms delay: {} µs early",
            asked_us + 40_000 - due_us
        );
        let latest_us = answered_us.div_ceil(1000) * 1000 + 40_000;
        assert!(
            due_us <= latest_us,
            "{what}: due at {due_us} µs, answered at {answered_us} µs with a 40 ms delay: \
             {} µs later than that time rounded up to the millisecond plus the delay",
            due_us - latest_us
        );
    };
    let mut asked = Vec::new();
    for i in 0..200 {
        let name = format!("p{i}");
        let at = caller_us();
        let p = ok(e.push(job(&t, &name).with_delay(delay)).await, "push");
        check(&name, at, caller_us(), p.ready_at);
        asked.push((name, at));
    }
    // Rescheduled with a delay.
    let at = caller_us();
    let due = ok(
        e.reschedule(&t, &id("p0"), Schedule::Delay(delay)).await,
        "reschedule",
    );
    check("reschedule", at, caller_us(), due);
    asked[0].1 = at;
    // Handed out: never before the caller's clock when it asked plus the delay.
    let mut leases = Vec::new();
    let start = Instant::now();
    while leases.len() < asked.len() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "only {} delivered",
            leases.len()
        );
        let got = ok(
            e.reserve(&Reserve::new(t.clone()).max(50).wait(Duration::from_secs(2)))
                .await,
            "reserve",
        );
        let now = caller_us();
        for d in got {
            let (_, at) = asked
                .iter()
                .find(|(n, _)| n.as_str() == d.job.id.as_str())
                .expect("a job pushed here");
            assert!(
                now >= at + 40_000,
                "{} handed out {} µs early on the caller's clock",
                d.job.id,
                at + 40_000 - now
            );
            leases.push(lease_of(&d));
        }
    }
    // Nacked and released with a delay.
    let at = caller_us();
    let nack = Nack {
        delay: Some(delay),
        reason: None,
    };
    let outcome = ok(e.nack(&leases[0], nack).await, "nack");
    match outcome {
        NackOutcome::Retry { ready_at } => check("nack", at, caller_us(), ready_at),
        other => panic!("a nack with attempts left retries: {other:?}"),
    }
    let at = caller_us();
    ok(
        e.release_with(
            &leases[1],
            Release {
                delay: Some(delay),
                priority: None,
            },
        )
        .await,
        "release",
    );
    let answered = caller_us();
    let j = get(&e, &t, leases[1].id.as_str()).await;
    check("release", at, answered, j.ready_at);
}

/// Delays of 0, 1 ms, 1 h and 10 years count from the push's time on the engine clock,
/// rounded up to the millisecond (issue 36); more is refused.
pub async fn delays_from_zero_to_ten_years<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "delays").await;
    for (name, d) in [
        ("zero", ms(0)),
        ("one", ms(1)),
        ("hour", Duration::from_secs(3600)),
        ("decade", MAX_DELAY),
    ] {
        let p = ok(e.push(job(&t, name).with_delay(d)).await, "push");
        let j = get(&e, &t, name).await;
        // The creation time is the push's time rounded down, the due time that time
        // rounded up plus the delay: the creation time plus the delay, or 1 ms more.
        assert_due_after(name, j.ready_at, j.created_at, j.created_at, d);
        assert_eq!(p.ready_at, j.ready_at, "{name}");
    }
    // Sub-millisecond delays round up: never due early.
    ok(
        e.push(job(&t, "micro").with_delay(Duration::from_micros(1)))
            .await,
        "push",
    );
    let j = get(&e, &t, "micro").await;
    assert_due_after("micro", j.ready_at, j.created_at, j.created_at, ms(1));
    let before = h.snapshot().await;
    let r = e
        .push(job(&t, "too-far").with_delay(MAX_DELAY + ms(1)))
        .await;
    assert!(matches!(r, Err(Error::InvalidDelay { .. })), "{r:?}");
    assert_eq!(h.snapshot().await, before);
    assert_eq!(state(&e, &t, "decade").await, Some(JobState::Delayed));
}

/// Absolute due times: the past means now, more than 10 years ahead and before 2000 are refused.
pub async fn absolute_times<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "abs").await;
    let now = ok(e.now().await, "now");
    let p = ok(
        e.push(job(&t, "soon").with_ready_at(now.plus(Duration::from_secs(60))))
            .await,
        "push",
    );
    assert_eq!(p.ready_at, now.plus(Duration::from_secs(60)));
    assert_eq!(p.state, JobState::Delayed);
    let past = Timestamp::from_millis(now.as_millis() - 60_000);
    let p = ok(e.push(job(&t, "past").with_ready_at(past)).await, "push");
    assert_eq!(p.state, JobState::Ready);
    assert!(p.ready_at >= now, "a past time is due now, not backdated");
    let before = h.snapshot().await;
    let far = now.plus(MAX_DELAY).plus(Duration::from_secs(86_400));
    for (name, at) in [
        ("far", far),
        ("seconds", Timestamp::from_millis(1_700_000_000)),
    ] {
        let r = e.push(job(&t, name).with_ready_at(at)).await;
        assert!(
            matches!(r, Err(Error::InvalidDelay { .. })),
            "{name}: {r:?}"
        );
        let r = e
            .push_batch(vec![
                job(&t, "ok-in-batch"),
                job(&t, name).with_ready_at(at),
            ])
            .await;
        assert!(
            matches!(r, Err(Error::InvalidDelay { .. })),
            "{name} in a batch: {r:?}"
        );
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "a refused absolute time changed the store"
    );
}

/// Reschedule moves delayed and ready jobs and refuses the others.
pub async fn reschedule_in_every_state<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "resched").await;
    one_in_each_state(&e, &t).await;
    // delayed -> later, still delayed
    let at = ok(
        e.reschedule(
            &t,
            &id("delayed"),
            Schedule::Delay(Duration::from_secs(7200)),
        )
        .await,
        "reschedule",
    );
    let j = get(&e, &t, "delayed").await;
    assert_eq!((j.state, j.ready_at), (JobState::Delayed, at));
    // delayed -> now: ready
    ok(
        e.reschedule(&t, &id("delayed"), Schedule::NOW).await,
        "reschedule",
    );
    assert_eq!(state(&e, &t, "delayed").await, Some(JobState::Ready));
    // ready -> later: delayed
    ok(
        e.reschedule(&t, &id("ready"), Schedule::Delay(Duration::from_secs(60)))
            .await,
        "reschedule",
    );
    assert_eq!(state(&e, &t, "ready").await, Some(JobState::Delayed));
    // absolute
    let now = ok(e.now().await, "now");
    let at = ok(
        e.reschedule(
            &t,
            &id("ready"),
            Schedule::At(now.plus(Duration::from_secs(90))),
        )
        .await,
        "reschedule",
    );
    assert_eq!(at, now.plus(Duration::from_secs(90)));
    for (name, st) in [("reserved", JobState::Reserved), ("dead", JobState::Dead)] {
        let before = h.snapshot().await;
        let r = e.reschedule(&t, &id(name), Schedule::NOW).await;
        assert!(
            matches!(&r, Err(Error::WrongState { state, operation: "reschedule", .. }) if *state == st),
            "{name}: {r:?}"
        );
        assert_eq!(h.snapshot().await, before);
    }
    let r = e.reschedule(&t, &id("missing"), Schedule::NOW).await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    // The moved ready job is handed out; attempts were kept at 0.
    let d = reserve_one(&e, &t, ms(0)).await;
    assert_eq!((d.job.id.as_str(), d.attempt()), ("delayed", 1));
}
