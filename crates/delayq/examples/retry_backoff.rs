//! Retry with back-off around a flaky call: a payment gateway that fails the first attempts.
//! Errors retry with the job's exponential back-off (200 ms, 400 ms, ...); a permanent error
//! (a card declined) goes dead at once; a job out of attempts goes dead with its last error.
//!
//! ```sh
//! cargo run -p delayq --example retry_backoff                          # embedded, in memory
//! cargo run -p delayq --example retry_backoff -- redis://127.0.0.1:6379 # on Redis
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Backoff, Job, JobError, Json, Queue};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Charge {
    payment: String,
    /// How many times the fake gateway fails before it answers.
    failures: u32,
    declined: bool,
}

/// A stand-in for an HTTP call that times out `failures` times, then answers.
fn gateway(calls: &Mutex<HashMap<String, u32>>, c: &Charge) -> Result<(), String> {
    let mut calls = calls.lock().map_err(|_| "lock poisoned".to_string())?;
    let n = calls.entry(c.payment.clone()).or_insert(0);
    *n += 1;
    if *n <= c.failures {
        return Err(format!("gateway timeout (call {n})"));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "memory://".into());
    let queue = Queue::open(&url).await?;
    println!("engine: {url}");
    let backoff = Backoff::exponential(Duration::from_millis(200), Duration::from_secs(5));
    for (payment, failures, declined) in
        [("pay-1", 2, false), ("pay-2", 9, false), ("pay-3", 0, true)]
    {
        queue
            .push_json(
                "payments.charge",
                Charge {
                    payment: payment.into(),
                    failures,
                    declined,
                },
            )
            .id(payment)
            .max_attempts(4)
            .backoff(backoff)
            .await?;
    }

    let calls = Arc::new(Mutex::new(HashMap::new()));
    let seen = calls.clone();
    let worker = queue.worker(&["payments.charge"], move |job: Job<Json<Charge>>| {
        let calls = seen.clone();
        async move {
            let c = job.payload();
            if c.declined {
                println!("{}: card declined, giving up at once", c.payment);
                return Err(JobError::permanent("card declined"));
            }
            match gateway(&calls, c) {
                Ok(()) => {
                    println!("{}: charged on attempt {}", c.payment, job.attempt());
                    Ok(())
                }
                Err(e) => {
                    println!(
                        "{}: attempt {}/{} failed: {e}",
                        c.payment,
                        job.attempt(),
                        job.max_attempts()
                    );
                    Err(JobError::retry(e))
                }
            }
        }
    })?;
    let engine = queue.engine().clone();
    let report = worker
        .run(async move {
            // Stop when nothing is waiting or running any more.
            let topic = delayq::Topic::new("payments.charge").expect("valid topic");
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match engine.stats(&topic).await {
                    Ok(s) if s.delayed + s.ready + s.reserved == 0 => break,
                    _ => {}
                }
            }
        })
        .await;
    for id in ["pay-2", "pay-3"] {
        if let Some(j) = queue.get("payments.charge", id).await? {
            println!(
                "{id} is {} after {} attempts: {}",
                j.state,
                j.attempts,
                j.last_error.unwrap_or_default()
            );
        }
    }
    println!("report: {report:?}");
    // pay-1 charged; pay-2 out of attempts and pay-3 declined are both dead.
    if (report.acked, report.buried) != (1, 2) {
        return Err(format!("expected 1 charged and 2 dead, got {report:?}").into());
    }
    Ok(())
}
