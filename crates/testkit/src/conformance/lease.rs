//! Conformance cases of a lease: a reserve leases a job for its ttr and counts the attempt;
//! ack, ack_batch, nack (with a delay, with the back-off, after the last attempt), release
//! and touch settle or extend it; a stale token is refused by every lease operation; an
//! unsettled lease expires into the next attempt or to dead, and cannot be acked late.

use std::time::{Duration, Instant};

use delayq_core::{
    Backoff, Engine, Error, JobState, Lease, LeaseToken, Nack, NackOutcome, Reserve, Timestamp,
};

use super::{
    assert_due_after, get, job, lease_of, ms, new_topic, nothing_ready, ok, reserve_one, state,
};
use crate::Harness;

/// Reserve leases the job for its ttr and counts the attempt.
pub async fn reserve_leases_and_counts_attempts<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "lease").await;
    ok(
        e.push(job(&t, "a").with_ttr(Duration::from_secs(20))).await,
        "push",
    );
    let d = reserve_one(&e, &t, ms(0)).await;
    assert_eq!(d.attempt(), 1);
    assert_eq!(d.job.state, JobState::Reserved);
    let deadline = d.job.deadline.expect("reserved job has a deadline");
    let j = get(&e, &t, "a").await;
    assert_eq!(j.state, JobState::Reserved);
    assert_eq!(j.attempts, 1);
    assert_eq!(j.deadline, Some(deadline));
    let now = ok(e.now().await, "now");
    assert!(deadline > now && deadline <= now.plus(Duration::from_secs(20)));
    nothing_ready(&e, &t).await;
}

/// Ack removes the job; a second ack finds no job.
pub async fn ack_removes_the_job<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "ack").await;
    ok(e.push(job(&t, "a")).await, "push");
    let d = reserve_one(&e, &t, ms(0)).await;
    ok(e.ack(&lease_of(&d)).await, "ack");
    assert_eq!(state(&e, &t, "a").await, None);
    let again = e.ack(&lease_of(&d)).await;
    assert!(matches!(again, Err(Error::NotFound { .. })), "{again:?}");
    // Once acked, the id is free again.
    assert!(ok(e.push(job(&t, "a")).await, "push").created);
}

/// ack_batch answers each lease in order, across topics.
pub async fn ack_batch_answers_each<H: Harness>(h: &H) {
    let e = h.open().await;
    let (t1, t2) = (new_topic(h, "ab1").await, new_topic(h, "ab2").await);
    ok(
        e.push_batch(vec![job(&t1, "a"), job(&t1, "b"), job(&t2, "c")])
            .await,
        "push",
    );
    let mut leases: Vec<Lease> = ok(
        e.reserve(&Reserve::topics([t1.clone(), t2.clone()]).max(3))
            .await,
        "reserve",
    )
    .iter()
    .map(lease_of)
    .collect();
    leases.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(leases.len(), 3);
    let mut stale = leases[1].clone();
    stale.token = LeaseToken(stale.token.0 + 1000);
    let answers = ok(
        e.ack_batch(&[leases[0].clone(), stale, leases[2].clone()])
            .await,
        "ack_batch",
    );
    assert!(answers[0].is_ok());
    assert!(matches!(answers[1], Err(Error::LeaseLost { .. })));
    assert!(answers[2].is_ok());
    assert_eq!(state(&e, &t1, "a").await, None);
    assert_eq!(state(&e, &t1, "b").await, Some(JobState::Reserved));
    assert_eq!(state(&e, &t2, "c").await, None);
}

/// Nack with a delay: delayed for that long, then delivered as the next attempt.
pub async fn nack_with_delay_retries_later<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "nackd").await;
    ok(e.push(job(&t, "a")).await, "push");
    let d = reserve_one(&e, &t, ms(0)).await;
    let out = ok(
        e.nack(
            &lease_of(&d),
            Nack {
                delay: Some(ms(300)),
                reason: Some("flaky".into()),
            },
        )
        .await,
        "nack",
    );
    let NackOutcome::Retry { ready_at } = out else {
        panic!("expected a retry, got {out:?}");
    };
    let j = get(&e, &t, "a").await;
    assert_eq!(j.state, JobState::Delayed);
    assert_eq!(j.ready_at, ready_at);
    assert_eq!(j.last_error.as_deref(), Some("flaky"));
    assert_eq!(j.attempts, 1);
    nothing_ready(&e, &t).await;
    let again = reserve_one(&e, &t, Duration::from_secs(3)).await;
    assert_eq!(again.attempt(), 2);
    assert!(again.job.deadline.expect("deadline") >= ready_at.plus(again.job.ttr));
}

/// Nack without a delay follows the job's back-off.
pub async fn nack_without_delay_uses_backoff<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "nackb").await;
    ok(
        e.push(job(&t, "a").with_backoff(Backoff::exponential(ms(400), Duration::from_secs(60))))
            .await,
        "push",
    );
    let d = reserve_one(&e, &t, ms(0)).await;
    let before = ok(e.now().await, "now");
    let out = ok(e.nack(&lease_of(&d), Nack::default()).await, "nack");
    let after = ok(e.now().await, "now");
    let NackOutcome::Retry { ready_at } = out else {
        panic!("expected a retry, got {out:?}");
    };
    assert_due_after("the first retry", ready_at, before, after, ms(400));
    // Second failure: doubled.
    let d = reserve_one(&e, &t, Duration::from_secs(3)).await;
    let before = ok(e.now().await, "now");
    let NackOutcome::Retry { ready_at } = ok(e.nack(&lease_of(&d), Nack::default()).await, "nack")
    else {
        panic!("expected a retry");
    };
    assert!(
        ready_at >= before.plus(ms(800)),
        "second back-off should be 800 ms"
    );
}

/// The last allowed attempt failing sends the job to dead, with the reason kept.
pub async fn nack_after_last_attempt_goes_dead<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "nackx").await;
    ok(
        e.push(
            job(&t, "a")
                .with_max_attempts(2)
                .with_backoff(Backoff::fixed(ms(0))),
        )
        .await,
        "push",
    );
    let d = reserve_one(&e, &t, ms(0)).await;
    assert!(matches!(
        ok(e.nack(&lease_of(&d), Nack::default()).await, "nack"),
        NackOutcome::Retry { .. }
    ));
    let d = reserve_one(&e, &t, Duration::from_secs(2)).await;
    assert_eq!(d.attempt(), 2);
    let out = ok(
        e.nack(
            &lease_of(&d),
            Nack {
                delay: Some(ms(10)),
                reason: Some("boom".into()),
            },
        )
        .await,
        "nack",
    );
    assert_eq!(out, NackOutcome::Dead);
    let j = get(&e, &t, "a").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.last_error.as_deref(), Some("boom"));
    assert_eq!(j.attempts, 2);
    nothing_ready(&e, &t).await;
}

/// Release gives a delivery back at once without counting it.
pub async fn release_gives_back_without_counting<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "release").await;
    ok(e.push(job(&t, "a").with_max_attempts(1)).await, "push");
    let d = reserve_one(&e, &t, ms(0)).await;
    ok(e.release(&lease_of(&d)).await, "release");
    let j = get(&e, &t, "a").await;
    assert_eq!(j.state, JobState::Ready);
    assert_eq!(j.attempts, 0);
    assert_eq!(j.ready_at, d.job.ready_at, "keeps its original due time");
    let d2 = reserve_one(&e, &t, ms(0)).await;
    assert_eq!(
        d2.attempt(),
        1,
        "a release does not use up the only attempt"
    );
    assert!(d2.lease.as_ref().map(|l| l.token) > d.lease.as_ref().map(|l| l.token));
    let r = e.release(&lease_of(&d)).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
}

/// Touch moves the deadline; a touched lease outlives its ttr.
pub async fn touch_extends_the_lease<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "touch").await;
    ok(
        e.push(job(&t, "a").with_ttr(Duration::from_secs(1))).await,
        "push",
    );
    let d = reserve_one(&e, &t, ms(0)).await;
    let first = d.job.deadline.expect("deadline");
    let extended = ok(
        e.touch(&lease_of(&d), Some(Duration::from_secs(4))).await,
        "touch",
    );
    assert!(
        extended >= first.plus(Duration::from_secs(2)),
        "{extended:?} vs {first:?}"
    );
    assert_eq!(get(&e, &t, "a").await.deadline, Some(extended));
    tokio::time::sleep(ms(1500)).await;
    nothing_ready(&e, &t).await;
    assert_eq!(state(&e, &t, "a").await, Some(JobState::Reserved));
    let again = ok(
        e.touch(&lease_of(&d), None).await,
        "touch with the job's ttr",
    );
    let now = ok(e.now().await, "now");
    assert!(again <= now.plus(Duration::from_secs(1)) && again > now);
    ok(e.ack(&lease_of(&d)).await, "ack");
}

/// A stale token (after expiry and redelivery) is refused by every lease operation, which
/// change nothing; tokens grow.
pub async fn stale_token_is_lease_lost_and_changes_nothing<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "fence").await;
    ok(
        e.push(
            job(&t, "a")
                .with_ttr(Duration::from_secs(1))
                .with_backoff(Backoff::fixed(ms(0))),
        )
        .await,
        "push",
    );
    let first = reserve_one(&e, &t, ms(0)).await;
    let second = reserve_one(&e, &t, Duration::from_secs(4)).await;
    assert_eq!(second.attempt(), 2);
    let (stale, live) = (lease_of(&first), lease_of(&second));
    assert!(
        live.token > stale.token,
        "tokens grow: {:?} then {:?}",
        stale.token,
        live.token
    );
    let before = h.snapshot().await;
    let results = [
        e.ack(&stale).await.err(),
        e.nack(&stale, Nack::default()).await.err(),
        e.touch(&stale, None).await.err(),
        e.bury(&stale, None).await.err(),
        e.release(&stale).await.err(),
        ok(e.ack_batch(std::slice::from_ref(&stale)).await, "ack_batch")
            .pop()
            .and_then(|r| r.err()),
    ];
    for r in results {
        assert!(matches!(r, Some(Error::LeaseLost { .. })), "{r:?}");
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "a stale token changed the store"
    );
    ok(e.ack(&live).await, "ack with the live token");
}

/// An unacked lease expires: the job comes back after its back-off with the next attempt.
pub async fn lease_expiry_redelivers_with_next_attempt<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "expiry").await;
    ok(
        e.push(
            job(&t, "a")
                .with_ttr(Duration::from_secs(1))
                .with_backoff(Backoff::fixed(ms(300))),
        )
        .await,
        "push",
    );
    let first = reserve_one(&e, &t, ms(0)).await;
    let deadline = first.job.deadline.expect("deadline");
    let second = reserve_one(&e, &t, Duration::from_secs(5)).await;
    assert_eq!(second.attempt(), 2);
    assert_eq!(second.job.last_error.as_deref(), Some("lease expired"));
    assert!(
        second.job.ready_at >= deadline.plus(ms(300)),
        "redelivered before the back-off"
    );
    assert_eq!(ok(e.stats(&t).await, "stats").expired_leases, 1);
    let reserved_at =
        Timestamp::from_millis(second.job.deadline.expect("deadline").as_millis() - 1000);
    assert!(reserved_at >= second.job.ready_at);
}

/// An unacked lease on the last attempt sends the job to dead.
pub async fn lease_expiry_after_last_attempt_goes_dead<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "expdead").await;
    ok(
        e.push(
            job(&t, "a")
                .with_ttr(Duration::from_secs(1))
                .with_max_attempts(1),
        )
        .await,
        "push",
    );
    reserve_one(&e, &t, ms(0)).await;
    let start = Instant::now();
    loop {
        let j = get(&e, &t, "a").await;
        if j.state == JobState::Dead {
            assert_eq!(j.last_error.as_deref(), Some("lease expired"));
            assert_eq!(ok(e.stats(&t).await, "stats").expired_leases, 1);
            ok(e.purge(&t).await, "purge");
            let after = ok(e.stats(&t).await, "stats").expired_leases;
            assert_eq!(after, 0, "a purge restarts the count");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "job did not go dead: {j:?}"
        );
        tokio::time::sleep(ms(50)).await;
    }
    nothing_ready(&e, &t).await;
}

/// A lease is live only until its deadline: a late ack is refused.
pub async fn expired_lease_cannot_be_acked<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "late").await;
    ok(
        e.push(job(&t, "a").with_ttr(Duration::from_secs(1))).await,
        "push",
    );
    let d = reserve_one(&e, &t, ms(0)).await;
    tokio::time::sleep(ms(1200)).await;
    let r = e.ack(&lease_of(&d)).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    let r = e.touch(&lease_of(&d), None).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
}
