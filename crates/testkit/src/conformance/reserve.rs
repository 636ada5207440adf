//! Conformance cases of handing jobs out: the order of due jobs (priority, due time, push
//! order), at-most-once delivery, one reserve over several topics with none starved, a
//! reserve that waits and times out, and concurrent reservers that get each job once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_core::{DeliveryMode, Engine, JobId, Lease, Reserve, Topic};

use super::{in_order, job, lease_of, ms, new_topic, ok, state};
use crate::Harness;

/// Among due jobs: lowest priority number, then earliest due time, then push order; a job
/// not yet due is never handed out.
pub async fn ordering_priority_then_due_then_push<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "order").await;
    ok(e.push(job(&t, "b").with_priority(1)).await, "push");
    tokio::time::sleep(ms(5)).await;
    ok(e.push(job(&t, "c").with_priority(1)).await, "push");
    ok(
        e.push(job(&t, "d").with_priority(1).with_delay(ms(40)))
            .await,
        "push",
    );
    ok(e.push(job(&t, "a").with_priority(5)).await, "push");
    ok(
        e.push(
            job(&t, "z")
                .with_priority(0)
                .with_delay(Duration::from_secs(3600)),
        )
        .await,
        "push",
    );
    ok(
        e.push_batch(
            (1..=4)
                .map(|i| job(&t, &format!("e{i}")).with_priority(2))
                .collect(),
        )
        .await,
        "push",
    );
    tokio::time::sleep(ms(150)).await;
    let got: Vec<String> = ok(e.reserve(&Reserve::new(t.clone()).max(20)).await, "reserve")
        .iter()
        .map(|d| d.job.id.to_string())
        .collect();
    in_order(
        h,
        &got,
        &["b", "c", "d", "e1", "e2", "e3", "e4", "a"],
        "reserve",
    );
}

/// At-most-once: the job leaves the engine as it is handed out; there is no lease.
pub async fn at_most_once_removes_on_reserve<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "amo").await;
    ok(e.push_batch(vec![job(&t, "a"), job(&t, "b")]).await, "push");
    let got = ok(
        e.reserve(
            &Reserve::new(t.clone())
                .max(5)
                .mode(DeliveryMode::AtMostOnce),
        )
        .await,
        "reserve",
    );
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|d| d.lease.is_none() && d.attempt() == 1));
    for d in &got {
        assert_eq!(d.job.body, format!("body of {}", d.job.id).as_bytes());
        assert_eq!(state(&e, &t, d.job.id.as_str()).await, None);
    }
    let ids: Vec<String> = got.iter().map(|d| d.job.id.to_string()).collect();
    in_order(h, &ids, &["a", "b"], "at most once");
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.ready, s.reserved), (0, 0));
}

/// One reserve takes from several topics, and no topic starves.
pub async fn reserve_across_topics<H: Harness>(h: &H) {
    let e = h.open().await;
    let (a, b) = (new_topic(h, "xa").await, new_topic(h, "xb").await);
    ok(
        e.push_batch((0..10).map(|i| job(&a, &format!("a{i}"))).collect())
            .await,
        "push",
    );
    ok(
        e.push_batch((0..10).map(|i| job(&b, &format!("b{i}"))).collect())
            .await,
        "push",
    );
    let mut per: HashMap<Topic, usize> = HashMap::new();
    for _ in 0..8 {
        for d in ok(
            e.reserve(&Reserve::topics([a.clone(), b.clone()]).max(1))
                .await,
            "reserve",
        ) {
            assert!(d.lease.as_ref().is_some_and(|l| l.topic == d.job.topic));
            *per.entry(d.job.topic.clone()).or_default() += 1;
        }
    }
    assert_eq!(per.values().sum::<usize>(), 8);
    assert!(
        per.values().all(|&n| n >= 3) && per.len() == 2,
        "a topic starved: {per:?}"
    );
    let got = ok(
        e.reserve(&Reserve::topics([a.clone(), b.clone()]).max(15))
            .await,
        "reserve",
    );
    assert_eq!(
        got.len(),
        12,
        "one reserve takes what is left in both topics"
    );
}

/// A reserve with nothing to take waits its time and returns empty.
pub async fn reserve_waits_and_times_out<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "wait").await;
    let start = Instant::now();
    let got = ok(
        e.reserve(&Reserve::new(t.clone()).wait(ms(300))).await,
        "reserve",
    );
    let took = start.elapsed();
    assert!(got.is_empty());
    assert!(
        took >= ms(300) && took < Duration::from_secs(3),
        "waited {took:?}"
    );
}

/// 8 reserving tasks on 2 instances × 10,000 jobs: each job delivered once and acked once.
pub async fn concurrent_reservers_deliver_each_job_once<H: Harness>(h: &H) {
    const N: usize = 10_000;
    let e1 = h.open().await;
    let e2 = h.open().await;
    let t = new_topic(h, "conc").await;
    for chunk in 0..N / 1000 {
        let jobs = (0..1000)
            .map(|i| job(&t, &format!("j{}", chunk * 1000 + i)).with_ttr(Duration::from_secs(60)))
            .collect();
        ok(e1.push_batch(jobs).await, "push");
    }
    let seen: Arc<Mutex<HashMap<JobId, usize>>> = Arc::default();
    let mut tasks = Vec::new();
    for k in 0..8 {
        let e = if k % 2 == 0 { e1.clone() } else { e2.clone() };
        let (t, seen) = (t.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let got = ok(
                    e.reserve(&Reserve::new(t.clone()).max(10).wait(ms(200)))
                        .await,
                    "reserve",
                );
                if got.is_empty() {
                    return;
                }
                let leases: Vec<Lease> = got.iter().map(lease_of).collect();
                {
                    let mut seen = seen.lock().expect("lock");
                    for d in &got {
                        *seen.entry(d.job.id.clone()).or_default() += 1;
                    }
                }
                for r in ok(e.ack_batch(&leases).await, "ack_batch") {
                    ok(r, "ack");
                }
            }
        }));
    }
    let all = tokio::time::timeout(
        Duration::from_secs(120),
        futures_util::future::join_all(tasks),
    )
    .await;
    for r in all.expect("the reservers finished in time") {
        r.expect("reserver task");
    }
    let seen = std::mem::take(&mut *seen.lock().expect("lock"));
    assert_eq!(seen.len(), N, "jobs delivered");
    let dup: Vec<_> = seen.iter().filter(|(_, c)| **c != 1).take(5).collect();
    assert!(dup.is_empty(), "delivered more than once: {dup:?}");
    let s = ok(e1.stats(&t).await, "stats");
    assert_eq!((s.delayed, s.ready, s.reserved, s.dead), (0, 0, 0, 0));
}
