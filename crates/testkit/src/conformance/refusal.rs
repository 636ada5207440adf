//! Conformance cases of why a lease operation is refused: no such job, a job with no lease
//! to settle, or a lease that existed and is gone. Every lease operation (ack, ack_batch,
//! nack, touch, bury, release, and the settlements of settle-and-reserve) answers the same,
//! and a refusal changes nothing.

use delayq_core::{Engine, Error, JobState, Lease, LeaseToken, Nack, Reserve, Result, Settle};

use super::{id, job, lease_of, ms, new_topic, ok, one_in_each_state, reserve_one};
use crate::Harness;

/// What each lease operation answers for `lease`, with its name.
async fn every_answer<E: Engine>(e: &E, lease: &Lease) -> Vec<(&'static str, Result<()>)> {
    let mut out = vec![
        ("ack", e.ack(lease).await),
        ("nack", e.nack(lease, Nack::default()).await.map(|_| ())),
        ("touch", e.touch(lease, None).await.map(|_| ())),
        ("bury", e.bury(lease, None).await),
        ("release", e.release(lease).await),
    ];
    let batch = ok(e.ack_batch(std::slice::from_ref(lease)).await, "ack_batch");
    out.extend(batch.into_iter().map(|r| ("ack_batch", r)));
    let settled = ok(
        e.settle_and_reserve(
            &[Settle::Ack(lease.clone()), Settle::Release(lease.clone())],
            &Reserve::new(lease.topic.clone()).max(0),
        )
        .await,
        "settle_and_reserve",
    );
    out.extend(
        settled
            .settled
            .into_iter()
            .zip(["settle ack", "settle release"])
            .map(|(r, what)| (what, r.map(|_| ()))),
    );
    out
}

/// A lease of a job that does not exist is `NotFound`; of a job that has not been delivered
/// since it was pushed (delayed, ready) or kicked (ready again) is `WrongState` naming its
/// state; of a job that was delivered and moved on (redelivered, dead after its attempt) is
/// `LeaseLost`. Every lease operation answers alike, and nothing changes.
// See: issue 12 (acking a missing or never-reserved job answered lease_lost).
pub async fn refusals_say_why_issue_12<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "why").await;
    let held = one_in_each_state(&e, &t).await;
    let lease = |name: &str| Lease {
        topic: t.clone(),
        id: id(name),
        token: LeaseToken(held.token.0 + 100),
    };
    let before = h.snapshot().await;

    for (what, r) in every_answer(&e, &lease("missing")).await {
        assert!(
            matches!(r, Err(Error::NotFound { .. })),
            "{what} of a missing job: {r:?}"
        );
    }
    for (name, want) in [("delayed", JobState::Delayed), ("ready", JobState::Ready)] {
        for (what, r) in every_answer(&e, &lease(name)).await {
            assert!(
                matches!(&r, Err(Error::WrongState { state, .. }) if *state == want),
                "{what} of a {name} job never delivered: {r:?}"
            );
        }
    }
    // Reserved under another token; dead after its only attempt was nacked.
    for name in ["reserved", "dead"] {
        for (what, r) in every_answer(&e, &lease(name)).await {
            assert!(
                matches!(r, Err(Error::LeaseLost { .. })),
                "{what} of the {name} job: {r:?}"
            );
        }
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "a refused lease operation changed the store"
    );

    // A kicked job starts over: its old lease has nothing left to settle.
    ok(e.kick(&t, &id("dead")).await, "kick");
    let r = e.ack(&lease("dead")).await;
    assert!(
        matches!(
            &r,
            Err(Error::WrongState {
                state: JobState::Ready,
                ..
            })
        ),
        "ack of a kicked job: {r:?}"
    );
    // A lease whose job was delivered again is lost, not in the wrong state.
    ok(e.release(&held).await, "release");
    // (On a topic of several partitions another ready job may come first: it goes back.)
    let mut again = reserve_one(&e, &t, ms(0)).await;
    if again.job.id != id("reserved") {
        ok(e.release(&lease_of(&again)).await, "release");
        again = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve")
            .into_iter()
            .find(|d| d.job.id == id("reserved"))
            .expect("the released job is ready again");
    }
    let r = e.ack(&held).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    ok(e.ack(&lease_of(&again)).await, "the new lease acks");
    // The acked job is gone.
    let r = e.ack(&lease_of(&again)).await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    ok(e.push(job(&t, "fresh")).await, "push");
}
