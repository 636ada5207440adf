//! What the push delivery tests share: an engine, a forwarder over it until dropped, a
//! batch of jobs, and bounded waits on the engine.

#![allow(clippy::unwrap_used, dead_code)] // Test code; each test binary uses a part.

use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq_core::{Backoff, Engine, JobId, NewJob, Store, Topic};
use delayq_push::{Forwarder, PushMetrics};
use tokio_util::sync::CancellationToken;

/// The embedded engine in a temporary directory (kept while the guard lives).
pub fn sqlite() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let e = delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::dir(
        dir.path().join("data"),
    ))
    .unwrap();
    (Arc::new(e), dir)
}

pub fn topic(s: &str) -> Topic {
    Topic::new(s).unwrap()
}

/// A forwarder over an engine reading its destinations every 100 ms, until the guard drops.
pub struct Forwarding {
    stop: CancellationToken,
    pub metrics: PushMetrics,
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub fn forward(engine: Arc<dyn Store>) -> Forwarding {
    let metrics = PushMetrics::new();
    let stop = CancellationToken::new();
    let f = Forwarder::new(engine, metrics.clone())
        .unwrap()
        .with_refresh(Duration::from_millis(100));
    tokio::spawn(f.run(stop.clone()));
    Forwarding { stop, metrics }
}

/// `n` jobs `n0` … with bodies `body-0` …, due in `delay_ms` plus up to 190 ms, 50 attempts
/// with a back-off of 100 ms doubling up to 500 ms.
pub fn jobs(t: &Topic, n: usize, delay_ms: u64) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            NewJob::new(t.clone(), format!("body-{i}"))
                .with_id(JobId::new(format!("n{i}")).unwrap())
                .with_delay(Duration::from_millis(delay_ms + (i as u64 % 20) * 10))
                .with_max_attempts(50)
                .with_backoff(Backoff::exponential(
                    Duration::from_millis(100),
                    Duration::from_millis(500),
                ))
        })
        .collect()
}

/// Waits (bounded) until `t` holds no job: every one acked.
pub async fn until_acked(engine: &Arc<dyn Store>, t: &Topic, limit: Duration) {
    let start = Instant::now();
    loop {
        let s = engine.stats(t).await.unwrap();
        if s.delayed + s.ready + s.reserved + s.dead == 0 {
            return;
        }
        assert!(start.elapsed() < limit, "not all acked: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded) until job `id` of `t` failed an attempt with a reason that contains
/// `needle`; that reason.
pub async fn failure_with(engine: &Arc<dyn Store>, t: &Topic, id: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let j = engine
            .get(t, &JobId::new(id).unwrap())
            .await
            .unwrap()
            .unwrap();
        if let Some(r) = j.last_error.clone().filter(|r| r.contains(needle)) {
            return r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no failure with {needle:?}: {j:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
