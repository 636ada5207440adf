//! The in-memory mode: the same engine with no file, each instance its own store.

use std::time::{Duration, Instant};

use delayq_core::{Engine, JobState, NewJob, Reserve, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine};

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("valid topic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_life_cycle_runs_in_memory() {
    let e = SqliteEngine::open(SqliteConfig::memory()).expect("open");
    let t = topic("mem");
    e.push(NewJob::new(t.clone(), "later").with_delay(Duration::from_millis(80)))
        .await
        .expect("push");
    e.push(NewJob::new(t.clone(), "now")).await.expect("push");
    let s = e.stats(&t).await.expect("stats");
    assert_eq!((s.delayed, s.ready), (1, 1));
    let first = e.reserve(&Reserve::new(t.clone())).await.expect("reserve");
    assert_eq!(first[0].job.body.as_ref(), b"now");
    e.ack(first[0].lease.as_ref().expect("lease"))
        .await
        .expect("ack");
    // A waiting reserve is woken by the timer when the delayed job falls due.
    let start = Instant::now();
    let second = e
        .reserve(&Reserve::new(t.clone()).wait(Duration::from_secs(5)))
        .await
        .expect("reserve");
    assert_eq!(second.len(), 1);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(
        second[0].lateness < Duration::from_millis(50),
        "{:?}",
        second[0].lateness
    );
    let listed = e
        .list(&t, JobState::Reserved, 10, None)
        .await
        .expect("list");
    assert_eq!(listed.jobs.len(), 1);
    assert_eq!(e.topics().await.expect("topics"), vec![t.clone()]);
    assert_eq!(e.purge(&t).await.expect("purge"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_engines_are_independent() {
    let a = SqliteEngine::open(SqliteConfig::memory()).expect("open a");
    let b = SqliteEngine::open(SqliteConfig::memory()).expect("open b");
    let t = topic("solo");
    a.push(NewJob::new(t.clone(), "x")).await.expect("push");
    assert_eq!(a.stats(&t).await.expect("stats").ready, 1);
    assert_eq!(b.stats(&t).await.expect("stats").ready, 0);
    assert!(b.topics().await.expect("topics").is_empty());
}
