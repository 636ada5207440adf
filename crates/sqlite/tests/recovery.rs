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

/// The engine's time never goes backwards across a reopen: every commit that writes raises
/// a high-water mark (`meta.clock_ms`), and a reopen anchors at no earlier than it. The
/// mark is set an hour ahead of the wall clock here, as a system clock set back an hour
/// between two runs leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_never_turns_the_engine_clock_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let t = topic("clock");
    let mark = |dir: &std::path::Path| -> u64 {
        rusqlite::Connection::open(dir.join(delayq_sqlite::DB_FILE))
            .and_then(|c| {
                c.query_row("SELECT value FROM meta WHERE key = 'clock_ms'", [], |r| {
                    r.get(0)
                })
            })
            .expect("read the mark")
    };
    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open");
    e.push(NewJob::new(t.clone(), "x").with_id(id("x")))
        .await
        .expect("push");
    let created = e
        .get(&t, &id("x"))
        .await
        .expect("get")
        .expect("exists")
        .created_at
        .as_millis();
    drop(e);
    let written = mark(dir.path());
    assert!(written >= created, "mark {written} < push time {created}");

    let ahead = written + 3_600_000;
    rusqlite::Connection::open(dir.path().join(delayq_sqlite::DB_FILE))
        .and_then(|c| c.execute("UPDATE meta SET value = ?1 WHERE key = 'clock_ms'", [ahead]))
        .expect("move the mark an hour ahead");
    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("reopen");
    let now = e.now().await.expect("now").as_millis();
    assert!(
        (ahead..ahead + 10_000).contains(&now),
        "the engine's time {now} went back from its mark {ahead}"
    );
    // Time goes on from the mark: a job delayed 1 s is due a second after it, and a write
    // raises the mark again.
    let p = e
        .push(
            NewJob::new(t.clone(), "later")
                .with_id(id("later"))
                .with_delay(Duration::from_secs(1)),
        )
        .await
        .expect("push");
    // (The push can come in the very millisecond the engine restarted from the mark.)
    assert!(p.ready_at.as_millis() >= ahead + 1000, "{:?}", p.ready_at);
    drop(e);
    assert!(mark(dir.path()) >= now);
}
