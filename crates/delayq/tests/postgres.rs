//! `Queue::open("postgres://…")` (issue 21): the facade on the PostgreSQL engine, with a
//! PostgreSQL of the test's own: a job pushed with a delay reaches a worker when due.

use std::time::Duration;

use delayq::{Job, JobError, Queue};
use delayq_testkit::PostgresServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_on_postgres_delivers_a_delayed_job() {
    let server = PostgresServer::start();
    let queue = Queue::open(&server.url())
        .await
        .unwrap_or_else(|e| panic!("open: {e}\nlog:\n{}", server.log()));
    queue
        .push("orders.cancel", "order 42".to_string())
        .id("order-42")
        .delay(Duration::from_millis(200))
        .await
        .expect("push");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    let worker = queue
        .worker(&["orders.cancel"], move |job: Job<String>| {
            let tx = tx.lock().ok().and_then(|mut t| t.take());
            async move {
                if let Some(tx) = tx {
                    let _ = tx.send((job.id().to_string(), job.payload().clone()));
                }
                Ok::<(), JobError>(())
            }
        })
        .expect("worker");
    let report = worker
        .run(async {
            let got = tokio::time::timeout(Duration::from_secs(10), rx)
                .await
                .expect("the job arrives")
                .expect("sent");
            assert_eq!(got, ("order-42".into(), "order 42".into()));
        })
        .await;
    assert_eq!(report.acked, 1);
    assert_eq!(
        queue.get("orders.cancel", "order-42").await.expect("get"),
        None
    );
}
