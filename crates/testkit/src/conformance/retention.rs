//! Conformance cases of the retention of done jobs ([`Retention`]): what an ack keeps, how
//! many and for how long, and what a done job answers.

use std::time::{Duration, Instant};

use delayq_core::{
    Engine, Error, JobState, Lease, Nack, Reserve, Retention, Schedule, Settle, Topic, TopicConfig,
};

use super::{get, id, job, lease_of, new_topic, ok, with_partitions};
use crate::Harness;

/// Settings that keep up to `max_jobs` done jobs for `secs` seconds.
fn keep<H: Harness>(h: &H, max_jobs: u32, secs: u64) -> TopicConfig {
    with_partitions(
        h,
        TopicConfig {
            retention: Some(Retention {
                max_jobs,
                max_age: Duration::from_secs(secs),
            }),
            ..TopicConfig::default()
        },
    )
}

/// A job name for the cases on retention: `name` itself on a topic of one partition; on a
/// topic of several, `name-<k>` with the least `k` that puts it in partition 0, so that the
/// case's jobs share one partition, where the retention's `max_jobs` is exact (on a topic of
/// several partitions it bounds each partition: [`delayq_core::Retention`]).
fn one_partition<H: Harness>(h: &H, name: &str) -> String {
    match h.partitions() {
        None | Some(1) => name.to_string(),
        Some(n) => (0..)
            .map(|k| format!("{name}-{k}"))
            .find(|c| delayq_core::partition_of(&id(c), n) == 0)
            .unwrap_or_default(),
    }
}

/// The ids of the done jobs of `t`, in listing order, read in pages of `per_page`.
async fn done_ids<E: Engine>(e: &E, t: &Topic, per_page: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = ok(
            e.list(t, JobState::Done, per_page, cursor.as_ref()).await,
            "list done",
        );
        for j in &page.jobs {
            assert_eq!(j.state, JobState::Done, "{j:?}");
        }
        out.extend(page.jobs.iter().map(|j| j.id.to_string()));
        match page.next {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}

/// Pushes `names` to `t` and reserves them all; answers their leases by name order.
async fn leased<E: Engine>(e: &E, t: &Topic, names: &[&str]) -> Vec<Lease> {
    for name in names {
        ok(e.push(job(t, name)).await, "push");
    }
    let got = ok(
        e.reserve(&Reserve::new(t.clone()).max(names.len())).await,
        "reserve",
    );
    let mut leases: Vec<Lease> = got.iter().map(lease_of).collect();
    leases.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(leases.len(), names.len());
    leases
}

/// With a retention, an acked job stays, done, whichever way it was acked (one, a batch, a
/// worker's cycle): readable by id and listed with its ack time, the newest `max_jobs` only.
/// Its lease is lost, it can be neither kicked nor rescheduled, its id is free for a new
/// push, and delete, a new retention and purge remove it. Without one, an ack removes.
pub async fn retention_keeps_acked_jobs_as_done<H: Harness>(h: &H) {
    let e = h.open().await;
    let nm = |name: &str| one_partition(h, name);
    let (t, plain) = (new_topic(h, "kept").await, new_topic(h, "kept-not").await);
    ok(
        e.set_topic_config(&t, &keep(h, 3, 3600)).await,
        "set config",
    );
    let l = leased(
        &e,
        &t,
        &[
            nm("a").as_str(),
            nm("b").as_str(),
            nm("c").as_str(),
            nm("d").as_str(),
            nm("e").as_str(),
        ],
    )
    .await;
    let before = ok(e.now().await, "now");
    ok(e.ack(&l[0]).await, "ack");
    for r in ok(e.ack_batch(&l[1..3]).await, "ack_batch") {
        ok(r, "ack in a batch");
    }
    let cycle = ok(
        e.settle_and_reserve(
            &[Settle::Ack(l[3].clone()), Settle::Ack(l[4].clone())],
            &Reserve::new(t.clone()).max(0),
        )
        .await,
        "settle",
    );
    for r in cycle.settled {
        ok(r, "ack in a cycle");
    }
    let after = ok(e.now().await, "now");

    // The newest three are kept, in (ack time, id) order.
    assert_eq!(
        done_ids(&e, &t, 2).await,
        [nm("c").as_str(), nm("d").as_str(), nm("e").as_str()]
    );
    assert_eq!(ok(e.get(&t, &id(nm("a").as_str())).await, "get"), None);
    let c = get(&e, &t, nm("c").as_str()).await;
    assert_eq!(
        (c.state, c.attempts, c.body.as_ref()),
        (JobState::Done, 1, format!("body of {}", nm("c")).as_bytes())
    );
    let acked = c.deadline.expect("a done job has its ack time");
    assert!(
        acked >= before && acked <= after,
        "{acked:?} not in {before:?}..{after:?}"
    );
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!(
        (s.delayed, s.ready, s.reserved, s.dead, s.done),
        (0, 0, 0, 0, 3)
    );

    // A done job's lease is lost; it is neither kicked nor rescheduled.
    let r = e.ack(&l[4]).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    let r = e.nack(&l[4], Nack::default()).await;
    assert!(matches!(r, Err(Error::LeaseLost { .. })), "{r:?}");
    let r = e.kick(&t, &id(nm("e").as_str())).await;
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
    let r = e.reschedule(&t, &id(nm("e").as_str()), Schedule::NOW).await;
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

    // Its id is free: a push creates a new job, and the done one is gone.
    let again = ok(e.push(job(&t, nm("e").as_str())).await, "push");
    assert!(again.created && again.state == JobState::Ready, "{again:?}");
    assert_eq!(
        done_ids(&e, &t, 10).await,
        [nm("c").as_str(), nm("d").as_str()]
    );
    assert!(ok(e.delete(&t, &id(nm("c").as_str())).await, "delete"));
    assert_eq!(done_ids(&e, &t, 10).await, [nm("d").as_str()]);
    assert_eq!(ok(e.stats(&t).await, "stats").done, 1);

    // A lower retention trims at once; none removes every done job.
    let l = leased(
        &e,
        &t,
        &[nm("e").as_str(), nm("f").as_str(), nm("g").as_str()],
    )
    .await;
    for r in ok(e.ack_batch(&l).await, "ack_batch") {
        ok(r, "ack");
    }
    assert_eq!(
        done_ids(&e, &t, 10).await,
        [nm("e").as_str(), nm("f").as_str(), nm("g").as_str()]
    );
    ok(
        e.set_topic_config(&t, &keep(h, 1, 3600)).await,
        "set config",
    );
    assert_eq!(done_ids(&e, &t, 10).await, [nm("g").as_str()]);
    ok(
        e.set_topic_config(&t, &with_partitions(h, TopicConfig::default()))
            .await,
        "set config",
    );
    assert!(done_ids(&e, &t, 10).await.is_empty());
    assert_eq!(ok(e.get(&t, &id(nm("g").as_str())).await, "get"), None);
    assert_eq!(ok(e.stats(&t).await, "stats").done, 0);

    // A purge removes done jobs too.
    ok(
        e.set_topic_config(&t, &keep(h, 10, 3600)).await,
        "set config",
    );
    let l = leased(&e, &t, &[nm("h").as_str()]).await;
    ok(e.ack(&l[0]).await, "ack");
    assert_eq!(ok(e.purge(&t).await, "purge"), 1);
    assert!(done_ids(&e, &t, 10).await.is_empty());

    // Without a retention an ack removes the job: nothing is done.
    let l = leased(&e, &plain, &["x"]).await;
    ok(e.ack(&l[0]).await, "ack");
    assert_eq!(ok(e.get(&plain, &id("x")).await, "get"), None);
    assert!(done_ids(&e, &plain, 10).await.is_empty());
    assert_eq!(ok(e.stats(&plain).await, "stats").done, 0);
}

/// A done job is kept until `max_age` after its ack (on the engine's clock), then neither
/// read, listed, counted nor deleted; a later ack removes it.
pub async fn retention_forgets_done_jobs_after_their_age<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "aging").await;
    ok(e.set_topic_config(&t, &keep(h, 100, 1)).await, "set config");
    // "c" first: the wait below is for the ack of "a", the later one.
    let c = leased(&e, &t, &["c"]).await;
    ok(e.ack(&c[0]).await, "ack");
    let l = leased(&e, &t, &["a"]).await;
    ok(e.ack(&l[0]).await, "ack");
    let a = get(&e, &t, "a").await;
    assert_eq!(a.state, JobState::Done);
    let acked = a.deadline.expect("ack time");
    let start = Instant::now();
    while ok(e.now().await, "now") <= acked.plus(Duration::from_secs(1)) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the engine clock stands still"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ok(e.get(&t, &id("a")).await, "get"), None);
    assert!(done_ids(&e, &t, 10).await.is_empty());
    assert_eq!(ok(e.stats(&t).await, "stats").done, 0);
    assert!(
        !ok(e.delete(&t, &id("c")).await, "delete"),
        "a done job past its age is none: there is nothing to delete"
    );
    let l = leased(&e, &t, &["b"]).await;
    ok(e.ack(&l[0]).await, "ack");
    assert_eq!(done_ids(&e, &t, 10).await, ["b"]);
    // The expired one is gone for good: its id is free, as any done job's.
    assert!(ok(e.push(job(&t, "a")).await, "push").created);
}
