//! Meeting reminders pushed with absolute times: each reminder is due 15 minutes before its
//! meeting (here: 1 second before, for meetings a few seconds away). A moved meeting
//! reschedules its reminder by id; a cancelled one deletes it.
//!
//! ```sh
//! cargo run -p delayq --example meeting_reminders                          # embedded, in memory
//! cargo run -p delayq --example meeting_reminders -- redis://127.0.0.1:6379 # on Redis
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use delayq::{Job, JobError, Json, Queue};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Reminder {
    meeting: String,
    attendees: Vec<String>,
}

/// In production: 15 minutes.
const LEAD: Duration = Duration::from_secs(1);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "memory://".into());
    let queue = Queue::open(&url).await?;
    println!("engine: {url}");
    let now = SystemTime::now();
    let meetings = [
        ("standup", now + Duration::from_secs(2)),
        ("design-review", now + Duration::from_secs(3)),
        ("retro", now + Duration::from_secs(4)),
    ];
    for (name, starts) in meetings {
        queue
            .push_json(
                "meetings.remind",
                Reminder {
                    meeting: name.into(),
                    attendees: vec!["ana".into(), "bo".into()],
                },
            )
            .id(&format!("remind-{name}"))
            .at(starts - LEAD)
            .await?;
        println!("{name}: reminder due {LEAD:?} before it starts");
    }
    // The retro moves one second later; the design review is cancelled.
    let retro = queue
        .reschedule(
            "meetings.remind",
            "remind-retro",
            (now + Duration::from_secs(5)) - LEAD,
        )
        .await?;
    println!("retro moved: reminder now due at {retro}");
    queue
        .delete("meetings.remind", "remind-design-review")
        .await?;
    println!("design-review cancelled: reminder deleted");

    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let worker = queue.worker(&["meetings.remind"], move |job: Job<Json<Reminder>>| {
        let counter = counter.clone();
        async move {
            let r = job.payload();
            println!(
                "reminding {} of {} ({} ms late)",
                r.attendees.join(", "),
                r.meeting,
                job.lateness().as_millis()
            );
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<(), JobError>(())
        }
    })?;
    let done = sent.clone();
    let report = worker
        .run(async move {
            while done.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    println!("report: {report:?}");
    if report.acked != 2 {
        return Err(format!("expected 2 reminders, sent {}", report.acked).into());
    }
    Ok(())
}
