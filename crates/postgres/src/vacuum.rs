//! The vacuum: a task per engine that runs `VACUUM` on `delayq.jobs` once this process has
//! handed out [`EVERY`] jobs since its last run.
//!
//! Every hand-out leaves a dead row version behind (the lease is an `UPDATE`, the ack a
//! `DELETE`), and with it an entry at the front of its band in `jobs_waiting`, where every
//! later reserve starts its walk. Until a vacuum removes them, each reserve steps over the
//! entries of every job taken before it, so a steady drain slows down as it goes (the
//! autovacuum daemon looks once a minute by default, and a busy queue hands out hundreds of
//! thousands of jobs in a minute). A run costs a pass over the table's changed pages and
//! its indexes, so runs are at least [`MIN_GAP`] apart and at least [`SHARE`] times as far
//! apart as the last one took: the vacuum takes at most a tenth of the time.
//!
//! `SKIP_LOCKED`: a run that finds the table being vacuumed (by the autovacuum daemon or
//! another delayq process) skips it. A role that does not own the table gets a warning from
//! PostgreSQL and nothing is vacuumed; the queue works, only slower under load.

use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Jobs handed out between two runs.
pub(crate) const EVERY: u64 = 10_000;

/// The least time between two runs.
const MIN_GAP: Duration = Duration::from_secs(1);

/// Runs are at least this many times their last duration apart.
const SHARE: u32 = 10;

/// What reserves tell the vacuum.
#[derive(Default)]
pub(crate) struct Vacuum {
    /// Jobs handed out since the last run.
    handed: AtomicU64,
    wake: Notify,
}

impl Vacuum {
    /// `n` more jobs were handed out.
    pub(crate) fn note(&self, n: usize) {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        let before = self.handed.fetch_add(n, Ordering::Relaxed);
        if before < EVERY && before.saturating_add(n) >= EVERY {
            self.wake.notify_one();
        }
    }
}

/// Runs vacuums for as long as `vacuum` has another owner.
pub(crate) async fn run(pool: Pool, vacuum: Weak<Vacuum>) {
    loop {
        let Some(v) = vacuum.upgrade() else {
            return;
        };
        if v.handed.load(Ordering::Relaxed) < EVERY {
            // Looks again now and then, so that the task ends once the engine is gone.
            tokio::select! {
                () = v.wake.notified() => {}
                () = tokio::time::sleep(MIN_GAP * 10) => {}
            }
            continue;
        }
        v.handed.store(0, Ordering::Relaxed);
        drop(v);
        let start = Instant::now();
        if let Err(e) = vacuum_jobs(&pool).await {
            tracing::debug!(error = %e, "a delayq vacuum failed");
        }
        tokio::time::sleep(MIN_GAP.max(start.elapsed() * SHARE)).await;
    }
}

async fn vacuum_jobs(pool: &Pool) -> Result<(), String> {
    let client = pool.get().await.map_err(|e| e.to_string())?;
    // Alone in its query, so outside any transaction block, as VACUUM must be.
    client
        .batch_execute("VACUUM (SKIP_LOCKED) delayq.jobs")
        .await
        .map_err(|e| e.to_string())
}
