//! Conformance cases of the operations the beanstalkd protocol needs: a release with a delay
//! and a priority, a bury with a priority, a reserve of one job by its id, and numbers
//! claimed from one engine-wide sequence, each naming the topic it was claimed for.

use std::time::{Duration, Instant};

use delayq_core::limits::{MAX_DELAY, MAX_REASON};
use delayq_core::{
    Backoff, Bury, Engine, Error, JobState, MAX_CLAIM, NackOutcome, Numbers, Release, Reserve,
    Retention, Timestamp, Topic, TopicConfig,
};

use super::{
    assert_due_after, get, id, job, lease_of, new_topic, nothing_ready, ok, one_in_each_state,
    reserve_one, state, with_partitions,
};
use crate::Harness;

/// A job name for cases on order: `name` itself on a topic of one partition; on a topic of
/// several, `name-<k>` with the least `k` that puts it in partition 0, so that the case's
/// jobs share one partition, where the contract's order is exact.
fn in_partition_0<H: Harness>(h: &H, name: &str) -> String {
    match h.partitions() {
        None | Some(1) => name.to_string(),
        Some(n) => (0..)
            .map(|k| format!("{name}-{k}"))
            .find(|c| delayq_core::partition_of(&id(c), n) == 0)
            .unwrap_or_default(),
    }
}

/// The time a delivery was made: its lease deadline minus its ttr.
fn reserved_at(d: &delayq_core::Delivery) -> Timestamp {
    let deadline = d.job.deadline.expect("a reserved job has a deadline");
    Timestamp::from_millis(deadline.as_millis() - d.job.ttr.as_millis() as u64)
}

/// The ids of `got`, in order.
fn ids(got: &[delayq_core::Delivery]) -> Vec<String> {
    got.iter().map(|d| d.job.id.to_string()).collect()
}

/// A release with a delay puts the job back delayed until then, its attempt not counted: it
/// is not handed out before, and a waiting reserver gets it when it falls due. With a
/// priority, it then runs before jobs of a larger priority number that waited longer. A
/// stale lease is refused (`LeaseLost`) and changes nothing.
pub async fn release_with_a_delay_and_a_priority_waits_then_runs_first<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "release-with").await;
    let [a, b, c] = ["a", "b", "c"].map(|n| in_partition_0(h, n));
    ok(
        e.push(job(&t, &a).with_priority(10).with_max_attempts(1))
            .await,
        "push",
    );
    let first = reserve_one(&e, &t, Duration::ZERO).await;
    assert_eq!(first.job.id, id(&a));
    ok(
        e.push_batch(vec![
            job(&t, &b).with_priority(5),
            job(&t, &c).with_priority(5),
        ])
        .await,
        "push",
    );

    let before = ok(e.now().await, "now");
    let release = Release {
        delay: Some(Duration::from_millis(300)),
        priority: Some(1),
    };
    ok(
        e.release_with(&lease_of(&first), release).await,
        "release with a delay and a priority",
    );
    // Not handed out before its new due time; the others are, in their order.
    let got = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve");
    let looked = ok(e.now().await, "now");
    let j = get(&e, &t, &a).await;
    assert_due_after(
        "due 300 ms after the release",
        j.ready_at,
        before,
        looked,
        Duration::from_millis(300),
    );
    if looked < j.ready_at {
        assert_eq!(
            ids(&got),
            [b.clone(), c.clone()],
            "the delayed job is not due"
        );
        assert_eq!(j.state, JobState::Delayed);
    }
    assert_eq!(j.priority, 1, "the release set the priority");
    assert_eq!(j.attempts, 0, "a release does not count the attempt");
    assert_eq!(j.deadline, None);

    for d in &got {
        ok(e.release(&lease_of(d)).await, "release");
    }

    // Once due, it runs first: priority 1 before the 5s that were ready before it.
    let start = Instant::now();
    while state(&e, &t, &a).await != Some(JobState::Ready) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the released job never fell due"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve");
    assert_eq!(ids(&got), [a.clone(), b.clone(), c.clone()]);
    let second = &got[0];
    assert_eq!(second.attempt(), 1, "the only attempt was not used up");
    assert!(reserved_at(second) >= second.job.ready_at);
    assert!(lease_of(second).token > lease_of(&first).token);

    // The first lease is stale now (the job was delivered again): refused, nothing changes.
    let snap = h.snapshot().await;
    let r = e
        .release_with(
            &lease_of(&first),
            Release {
                delay: None,
                priority: Some(0),
            },
        )
        .await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    assert_eq!(
        h.snapshot().await,
        snap,
        "a stale release changed the store"
    );
    for d in &got[1..] {
        ok(e.ack(&lease_of(d)).await, "ack");
    }

    // A delay alone: the priority stays, and a reserver waiting meanwhile is woken when the
    // job falls due.
    let release = Release {
        delay: Some(Duration::from_millis(300)),
        priority: None,
    };
    ok(
        e.release_with(&lease_of(second), release).await,
        "release with a delay",
    );
    let start = Instant::now();
    let third = reserve_one(&e, &t, Duration::from_secs(5)).await;
    let waited = start.elapsed();
    assert_eq!(third.job.id, id(&a));
    assert_eq!((third.job.priority, third.attempt()), (1, 1));
    assert!(
        reserved_at(&third) >= third.job.ready_at,
        "handed out before its due time"
    );
    assert!(
        waited < Duration::from_secs(3),
        "the waiting reserve was not woken when the job fell due ({waited:?})"
    );
    ok(e.ack(&lease_of(&third)).await, "ack");
}

/// A bury with a priority sends the job to dead with that priority, which it keeps when it
/// is kicked: it then runs before a job of a larger priority number. Without one, the job
/// keeps its own. A stale lease or a reason over the limit is refused and changes nothing.
pub async fn bury_with_a_priority_keeps_it_after_a_kick<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "bury-with").await;
    let [a, b] = ["a", "b"].map(|n| in_partition_0(h, n));
    ok(
        e.push(job(&t, &a).with_priority(10).with_max_attempts(5))
            .await,
        "push",
    );
    let first = reserve_one(&e, &t, Duration::ZERO).await;
    ok(e.push(job(&t, &b).with_priority(5)).await, "push");
    let bury = Bury {
        reason: Some("poison".into()),
        priority: Some(2),
    };
    ok(
        e.bury_with(&lease_of(&first), bury).await,
        "bury with a priority",
    );
    let j = get(&e, &t, &a).await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.priority, 2);
    assert_eq!(j.last_error.as_deref(), Some("poison"));
    assert_eq!(j.attempts, 1);

    let snap = h.snapshot().await;
    let r = e.bury_with(&lease_of(&first), Bury::default()).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    assert_eq!(h.snapshot().await, snap, "a stale bury changed the store");

    ok(e.kick(&t, &id(&a)).await, "kick");
    let j = get(&e, &t, &a).await;
    assert_eq!((j.state, j.priority, j.attempts), (JobState::Ready, 2, 0));
    let got = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve");
    assert_eq!(ids(&got), [a.clone(), b.clone()], "priority 2 before 5");

    // Without a priority the job keeps its own.
    ok(
        e.bury_with(&lease_of(&got[1]), Bury::default()).await,
        "bury without a priority",
    );
    let j = get(&e, &t, &b).await;
    assert_eq!((j.state, j.priority), (JobState::Dead, 5));
    assert_eq!(j.last_error, None);

    // A reason over the limit: refused, nothing changes, the lease still works.
    let snap = h.snapshot().await;
    let long = Bury {
        reason: Some("x".repeat(MAX_REASON + 1)),
        priority: Some(0),
    };
    let r = e.bury_with(&lease_of(&got[0]), long).await;
    assert!(
        matches!(r, Err(Error::InvalidArgument { what: "reason", .. })),
        "{r:?}"
    );
    assert_eq!(h.snapshot().await, snap, "a refused bury changed the store");
    let j = get(&e, &t, &a).await;
    assert_eq!((j.state, j.priority), (JobState::Reserved, 2));
    ok(e.ack(&lease_of(&got[0])).await, "ack after the refusal");
    assert_eq!(state(&e, &t, &a).await, None);
}

/// A delayed, ready or dead job is leased by its id at once, whatever its due time and also
/// while its topic is paused, as a reserve leases a job: a fresh token, a deadline of now
/// plus its ttr, one more attempt (a dead job's are not reset). The lease settles as any
/// other, and expires as any other. Meanwhile a reserve does not hand the job out again, not
/// even once its due time passes. A reserved or done job is refused (`WrongState`), a
/// missing one `NotFound`; refusals change nothing.
pub async fn reserve_job_leases_a_delayed_ready_or_dead_job_by_id<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "reserve-job").await;
    let held = one_in_each_state(&e, &t).await;
    ok(e.pause(&t, None).await, "pause");
    let mut leases = Vec::new();
    for name in ["delayed", "ready", "dead"] {
        let was = get(&e, &t, name).await;
        let before = ok(e.now().await, "now");
        let d = ok(e.reserve_job(&t, &id(name)).await, name);
        let after = ok(e.now().await, "now");
        assert_eq!(d.job.id, id(name));
        assert_eq!(d.job.state, JobState::Reserved, "{name}");
        assert_eq!(d.attempt(), was.attempts + 1, "{name}: one more attempt");
        let deadline = d.job.deadline.expect("a deadline");
        assert!(
            deadline >= before.plus(was.ttr) && deadline <= after.plus(was.ttr),
            "{name}: the deadline is now + ttr: {deadline:?}, reserved between {before:?} and {after:?}"
        );
        let lease = lease_of(&d);
        assert_eq!((&lease.topic, &lease.id), (&t, &id(name)));
        let j = get(&e, &t, name).await;
        assert_eq!(j.state, JobState::Reserved, "{name}");
        assert_eq!((j.deadline, j.attempts), (Some(deadline), d.attempt()));

        // Reserved now: a second reserve by id is refused and changes nothing.
        let snap = h.snapshot().await;
        let r = e.reserve_job(&t, &id(name)).await;
        assert!(
            matches!(
                r,
                Err(Error::WrongState {
                    state: JobState::Reserved,
                    ..
                })
            ),
            "{name}: {r:?}"
        );
        assert_eq!(
            h.snapshot().await,
            snap,
            "{name}: a refusal changed the store"
        );
        leases.push(lease);
    }
    let snap = h.snapshot().await;
    let r = e.reserve_job(&t, &held.id).await;
    assert!(
        matches!(
            r,
            Err(Error::WrongState {
                state: JobState::Reserved,
                ..
            })
        ),
        "{r:?}"
    );
    let r = e.reserve_job(&t, &id("missing")).await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    let r = e
        .reserve_job(&Topic::new("never-pushed").expect("topic"), &id("x"))
        .await;
    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    assert_eq!(h.snapshot().await, snap, "a refusal changed the store");

    // Every job is leased: resumed, the topic hands out nothing.
    ok(e.resume(&t).await, "resume");
    nothing_ready(&e, &t).await;

    // The leases settle as any other.
    let [delayed, ready, dead] = [&leases[0], &leases[1], &leases[2]];
    ok(e.ack(delayed).await, "ack the delayed job");
    assert_eq!(state(&e, &t, "delayed").await, None);
    let out = ok(e.nack(dead, Default::default()).await, "nack the dead job");
    assert_eq!(out, NackOutcome::Dead, "its attempts were not reset");
    assert_eq!(state(&e, &t, "dead").await, Some(JobState::Dead));
    ok(e.release(ready).await, "release the ready job");
    assert_eq!(get(&e, &t, "ready").await.attempts, 0);
    ok(e.ack(&held).await, "ack");

    // A job leased before its due time is not handed out again when that time passes; its
    // lease expires as any other, and the job comes back.
    ok(
        e.push(
            job(&t, "soon")
                .with_delay(Duration::from_millis(300))
                .with_ttr(Duration::from_secs(1))
                .with_backoff(Backoff::fixed(Duration::ZERO)),
        )
        .await,
        "push",
    );
    let early = ok(e.reserve_job(&t, &id("soon")).await, "reserve soon");
    assert_eq!(early.attempt(), 1);
    let ready_now = reserve_one(&e, &t, Duration::ZERO).await;
    assert_eq!(ready_now.job.id, id("ready"));
    ok(e.ack(&lease_of(&ready_now)).await, "ack");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let now = ok(e.now().await, "now");
    if now < early.job.deadline.expect("deadline") {
        nothing_ready(&e, &t).await;
        assert_eq!(state(&e, &t, "soon").await, Some(JobState::Reserved));
    }
    let again = reserve_one(&e, &t, Duration::from_secs(5)).await;
    assert_eq!(again.job.id, id("soon"));
    assert_eq!(again.attempt(), 2);
    assert_eq!(again.job.last_error.as_deref(), Some("lease expired"));
    assert!(reserved_at(&again) >= early.job.deadline.expect("deadline"));
    assert_eq!(ok(e.stats(&t).await, "stats").expired_leases, 1);
    let r = e.ack(&lease_of(&early)).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    ok(e.ack(&lease_of(&again)).await, "ack");

    // A done job is refused too.
    let kept = new_topic(h, "reserve-job-done").await;
    let config = TopicConfig {
        retention: Some(Retention {
            max_jobs: 10,
            max_age: Duration::from_secs(3600),
        }),
        ..TopicConfig::default()
    };
    ok(
        e.set_topic_config(&kept, &with_partitions(h, config)).await,
        "keep done jobs",
    );
    ok(e.push(job(&kept, "finished")).await, "push");
    let d = reserve_one(&e, &kept, Duration::ZERO).await;
    ok(e.ack(&lease_of(&d)).await, "ack");
    assert_eq!(state(&e, &kept, "finished").await, Some(JobState::Done));
    let snap = h.snapshot().await;
    let r = e.reserve_job(&kept, &id("finished")).await;
    assert!(
        matches!(
            r,
            Err(Error::WrongState {
                state: JobState::Done,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(h.snapshot().await, snap, "a refusal changed the store");
}

/// Numbers come from one sequence shared by every topic and every handle: claims never
/// overlap, even at the same time, start at 1 or later, and each number names the topic it
/// was claimed for, through a purge of that topic and a restart; a number never claimed
/// names none. A count outside 1 to 1,000,000 is refused and claims nothing.
pub async fn claimed_numbers_never_repeat_and_name_their_topic<H: Harness>(h: &H) {
    let e = h.open().await;
    let t1 = new_topic(h, "numbers-a").await;
    let t2 = new_topic(h, "numbers-b").await;
    let snap = h.snapshot().await;
    for count in [0, MAX_CLAIM + 1] {
        let r = e.claim_numbers(&t1, count).await;
        assert!(
            matches!(r, Err(Error::InvalidArgument { what: "count", .. })),
            "{count}: {r:?}"
        );
    }
    assert_eq!(
        h.snapshot().await,
        snap,
        "a refused claim changed the store"
    );
    assert_eq!(ok(e.number_topic(1).await, "number topic"), None);

    // (first, count, topic) of every claim.
    let mut claims: Vec<(u64, u64, Topic)> = Vec::new();
    for (t, count) in [(&t1, 5), (&t2, 3), (&t1, 1)] {
        let first = ok(e.claim_numbers(t, count).await, "claim");
        claims.push((first, count, t.clone()));
    }
    // Claims at the same time, from other handles.
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let e = e.clone();
            let t = if i % 2 == 0 { t1.clone() } else { t2.clone() };
            tokio::spawn(async move { (e.claim_numbers(&t, 100).await, t) })
        })
        .collect();
    for task in tasks {
        let (first, t) = task.await.expect("claim task");
        claims.push((ok(first, "concurrent claim"), 100, t));
    }
    let check = |claims: &[(u64, u64, Topic)]| {
        let mut sorted = claims.to_vec();
        sorted.sort_by_key(|c| c.0);
        assert!(sorted[0].0 >= 1, "numbers start at 1: {sorted:?}");
        for w in sorted.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "claims overlap: {w:?}");
        }
        sorted.last().map(|c| c.0 + c.1 - 1).unwrap_or_default()
    };
    let last = check(&claims);
    for (first, count, t) in &claims {
        for n in [*first, first + count / 2, first + count - 1] {
            assert_eq!(
                ok(e.number_topic(n).await, "number topic").as_ref(),
                Some(t),
                "number {n}"
            );
        }
    }
    for n in [0, last + 1, last + 1000, u64::MAX] {
        assert_eq!(ok(e.number_topic(n).await, "number topic"), None, "{n}");
    }

    // A purge of the topic leaves its numbers named.
    ok(e.push(job(&t1, "x")).await, "push");
    ok(e.purge(&t1).await, "purge");
    assert_eq!(
        ok(e.number_topic(claims[0].0).await, "number topic"),
        Some(t1.clone())
    );

    // After a restart the claims stand and the sequence goes on after them.
    let e = h.restart(e).await;
    for (first, _, t) in &claims {
        assert_eq!(
            ok(e.number_topic(*first).await, "number topic").as_ref(),
            Some(t)
        );
    }
    let big = ok(
        e.claim_numbers(&t2, MAX_CLAIM).await,
        "claim the most at once",
    );
    claims.push((big, MAX_CLAIM, t2.clone()));
    let last = check(&claims);
    assert_eq!(last, big + MAX_CLAIM - 1);
    assert_eq!(
        ok(e.number_topic(last).await, "number topic"),
        Some(t2.clone())
    );
    assert_eq!(ok(e.number_topic(last + 1).await, "number topic"), None);
}

/// A release whose delay is over 10 years is refused (`InvalidDelay`) before it changes
/// anything: the job stays leased, and the lease still works (the longest delay, 10 years,
/// is taken).
pub async fn release_with_a_delay_over_ten_years_is_refused_and_keeps_the_lease<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "release-with-bad").await;
    ok(e.push(job(&t, "a").with_priority(4)).await, "push");
    let d = reserve_one(&e, &t, Duration::ZERO).await;
    let snap = h.snapshot().await;
    let too_far = Release {
        delay: Some(MAX_DELAY + Duration::from_millis(1)),
        priority: Some(0),
    };
    let r = e.release_with(&lease_of(&d), too_far).await;
    assert!(matches!(r, Err(Error::InvalidDelay { .. })), "{r:?}");
    assert_eq!(
        h.snapshot().await,
        snap,
        "a refused release changed the store"
    );
    let j = get(&e, &t, "a").await;
    assert_eq!(
        (j.state, j.priority, j.attempts),
        (JobState::Reserved, 4, 1)
    );

    let before = ok(e.now().await, "now");
    let longest = Release {
        delay: Some(MAX_DELAY),
        priority: Some(0),
    };
    ok(
        e.release_with(&lease_of(&d), longest).await,
        "the lease still works",
    );
    let after = ok(e.now().await, "now");
    let j = get(&e, &t, "a").await;
    assert_eq!((j.state, j.priority, j.attempts), (JobState::Delayed, 0, 0));
    assert_due_after("the release", j.ready_at, before, after, MAX_DELAY);
    nothing_ready(&e, &t).await;
}
