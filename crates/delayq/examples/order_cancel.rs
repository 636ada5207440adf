//! Order auto-cancel: every new order gets a "cancel if unpaid" job due 30 minutes later
//! (2 seconds in this demo); paying deletes the job by id; the worker cancels the rest.
//!
//! ```sh
//! cargo run -p delayq --example order_cancel                          # embedded, in memory
//! cargo run -p delayq --example order_cancel -- redis://127.0.0.1:6379 # on Redis
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq::{Job, JobError, Json, Queue};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct CancelIfUnpaid {
    order: u64,
}

/// In production: 30 minutes.
const PAYMENT_WINDOW: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "memory://".into());
    let queue = Queue::open(&url).await?;
    println!("engine: {url}");

    for order in [101, 102, 103] {
        queue
            .push_json("orders.cancel", CancelIfUnpaid { order })
            .id(&format!("order-{order}"))
            .delay(PAYMENT_WINDOW)
            .await?;
        println!("order {order} placed: cancelled in {PAYMENT_WINDOW:?} unless paid");
    }
    // Order 102 is paid: its cancel job is deleted by id, so it never runs.
    assert!(queue.delete("orders.cancel", "order-102").await?);
    println!("order 102 paid: its cancel job is gone");

    let cancelled = Arc::new(AtomicUsize::new(0));
    let counter = cancelled.clone();
    let worker = queue.worker(&["orders.cancel"], move |job: Job<Json<CancelIfUnpaid>>| {
        let counter = counter.clone();
        async move {
            println!(
                "cancelling unpaid order {} ({} ms after its deadline)",
                job.payload().order,
                job.lateness().as_millis()
            );
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<(), JobError>(())
        }
    })?;
    let done = cancelled.clone();
    let report = worker
        .run(async move {
            while done.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    println!(
        "{} orders cancelled; report: {report:?}",
        cancelled.load(Ordering::SeqCst)
    );
    if report.acked != 2 {
        return Err(format!("expected 2 cancelled orders, acked {}", report.acked).into());
    }
    Ok(())
}
