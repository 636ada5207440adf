//! Reopening a data directory restores every job exactly: delayed, ready, reserved (with
//! its lease deadline and token) and dead, and the per-topic counter that issues tokens.

mod support;

use std::time::Duration;

use delayq_core::{Engine, Error, JobId, JobState, Nack, NewJob, Reserve, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine};

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("valid topic")
}

fn id(name: &str) -> JobId {
    JobId::new(name).expect("valid id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_restores_every_state_exactly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let t = topic("rec");
    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open");
    let job = |name: &str| NewJob::new(t.clone(), format!("body {name}")).with_id(id(name));
    e.push(job("dead").with_max_attempts(1))
        .await
        .expect("push");
    let d = e.reserve(&Reserve::new(t.clone())).await.expect("reserve");
    let dead_lease = d[0].lease.clone().expect("lease");
    e.nack(
        &dead_lease,
        Nack {
            delay: None,
            reason: Some("boom".into()),
        },
    )
    .await
    .expect("nack");
    e.push(job("reserved").with_ttr(Duration::from_secs(600)))
        .await
        .expect("push");
    let d = e.reserve(&Reserve::new(t.clone())).await.expect("reserve");
    let lease = d[0].lease.clone().expect("lease");
    e.push(job("ready").with_priority(4)).await.expect("push");
    e.push(job("delayed").with_delay(Duration::from_secs(3600)))
        .await
        .expect("push");

    let mut before = Vec::new();
    for name in ["dead", "reserved", "ready", "delayed"] {
        before.push(e.get(&t, &id(name)).await.expect("get").expect("exists"));
    }
    let stats = e.stats(&t).await.expect("stats");
    drop(e);
    let dump = support::dump(dir.path());

    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("reopen");
    for j in &before {
        assert_eq!(
            e.get(&t, &j.id).await.expect("get").as_ref(),
            Some(j),
            "{} changed across the reopen",
            j.id
        );
    }
    let after = e.stats(&t).await.expect("stats");
    assert_eq!(
        (
            after.delayed,
            after.ready,
            after.reserved,
            after.dead,
            after.next_due
        ),
        (
            stats.delayed,
            stats.ready,
            stats.reserved,
            stats.dead,
            stats.next_due
        )
    );
    assert_eq!(support::dump(dir.path()), dump, "reopening wrote something");
    // The lease survived with its token and deadline; the old dead lease did not come back.
    e.touch(&lease, None)
        .await
        .expect("the lease is still live");
    assert!(matches!(
        e.ack(&dead_lease).await,
        Err(Error::LeaseLost { .. })
    ));
    // Tokens keep growing across the reopen.
    e.push(job("fresh")).await.expect("push");
    let got = e
        .reserve(&Reserve::new(t.clone()).max(5))
        .await
        .expect("reserve");
    assert!(
        got.iter()
            .all(|d| d.lease.as_ref().expect("lease").token > lease.token)
    );
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|d| d.job.state == JobState::Reserved));
}
