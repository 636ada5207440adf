//! What the engines' lost-write fencing tests share (issue 37): the lease of the one job a
//! reserve hands out, and the check on the lease the job gets after the store lost the
//! first one with its last writes.

use delayq_core::{Engine, JobId, Lease, Reserve, Topic};

/// Reserves one job of `topic` now and answers its lease, which must be job `id`'s.
pub async fn lease_the_job(engine: &dyn Engine, topic: &Topic, id: &JobId) -> Lease {
    let lease = engine
        .reserve(&Reserve::new(topic.clone()))
        .await
        .unwrap_or_else(|e| panic!("reserving {topic}: {e}"))
        .pop()
        .and_then(|d| d.lease)
        .unwrap_or_else(|| panic!("{id} is not handed out of {topic}"));
    assert_eq!(&lease.id, id, "another job was handed out of {topic}");
    lease
}

/// Checks the job's lease `again`, taken after the store lost the writes of its lease
/// `lost`: its token is larger, the old holder's ack is refused and the new holder's goes
/// through.
pub async fn assert_fenced(engine: &dyn Engine, lost: &Lease, again: &Lease) {
    assert!(
        again.token > lost.token,
        "{} was leased with token {} before the lost write and {} after it: a token went back",
        again.id,
        lost.token.0,
        again.token.0
    );
    assert!(
        engine.ack(lost).await.is_err(),
        "the lost lease's token acked the new lease of {}",
        again.id
    );
    engine
        .ack(again)
        .await
        .unwrap_or_else(|e| panic!("the new lease of {} does not ack: {e}", again.id));
}
