//! The sweeper: a task per engine that runs `delayq.tick` (sql/tick.sql) at the earliest
//! lease deadline or expiry any topic has, so that a lease runs out on time even when no
//! one reserves from its topic. A reserve that leases jobs tells it of their deadlines
//! ([`Sweeper::note`]); it also looks at least every [`SAFETY_WAKE`], for the leases of
//! processes that died.

use std::sync::Weak;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::Notify;

use crate::waiters::SAFETY_WAKE;

/// The most expired leases and expired jobs of each topic one tick applies.
const TICK_BUDGET: i32 = 1000;

/// What a reserve tells the sweeper.
#[derive(Default)]
pub(crate) struct Sweeper {
    /// When the sweeper will look next, in ms on the database's clock (0: not planned).
    planned: AtomicI64,
    wake: Notify,
}

impl Sweeper {
    /// A lease now runs until `deadline` ms: the sweeper looks then at the latest.
    pub(crate) fn note(&self, deadline: i64) {
        let planned = self.planned.load(Ordering::Relaxed);
        if planned == 0 || deadline < planned {
            self.planned.store(deadline, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }
}

/// Runs ticks for as long as `sweeper` has another owner.
pub(crate) async fn run(pool: Pool, sweeper: Weak<Sweeper>) {
    loop {
        let sleep = match tick(&pool).await {
            Ok((next, now)) => {
                let sleep = next.map_or(SAFETY_WAKE, |n| {
                    Duration::from_millis(u64::try_from(n.saturating_sub(now)).unwrap_or(0))
                        .min(SAFETY_WAKE)
                });
                if let Some(s) = sweeper.upgrade() {
                    let ms = i64::try_from(sleep.as_millis()).unwrap_or(i64::MAX);
                    s.planned.store(now.saturating_add(ms), Ordering::Relaxed);
                }
                sleep
            }
            Err(e) => {
                tracing::debug!(error = %e, "a delayq tick failed");
                Duration::from_millis(500)
            }
        };
        let Some(s) = sweeper.upgrade() else {
            return;
        };
        tokio::select! {
            () = s.wake.notified() => {}
            () = tokio::time::sleep(sleep) => {}
        }
        // One millisecond past the deadline: a lease is live while now < deadline.
        tokio::time::sleep(Duration::from_millis(1)).await;
        drop(s);
    }
}

async fn tick(pool: &Pool) -> Result<(Option<i64>, i64), String> {
    let client = pool.get().await.map_err(|e| e.to_string())?;
    let stmt = client
        .prepare_cached("SELECT next, now_ms FROM delayq.tick($1)")
        .await
        .map_err(|e| e.to_string())?;
    let row = client
        .query_one(&stmt, &[&TICK_BUDGET])
        .await
        .map_err(|e| e.to_string())?;
    Ok((row.get(0), row.get(1)))
}
