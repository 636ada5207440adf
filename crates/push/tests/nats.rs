//! The NATS JetStream destination end to end: a real `nats-server -js` the test starts
//! (delayq_testkit::NatsServer, never the machine's own), a stream on the destination's
//! subject, a forwarder over the embedded engine; what the stream holds is read back message
//! by message.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;
use common::{failure_with, forward, jobs, sqlite, until_acked};

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream;
use delayq_core::{Backoff, Engine, JobId, NewJob, Topic};

async fn jetstream(url: &str) -> jetstream::Context {
    jetstream::new(async_nats::connect(url).await.unwrap())
}

/// Creates stream `ORDERS` on `orders.>`.
async fn create_stream(js: &jetstream::Context) {
    js.create_stream(jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
}

/// Every message of stream `ORDERS`: job id → (attempt, Nats-Msg-Id, body).
async fn stored(js: &jetstream::Context) -> Vec<(String, u32, String, String)> {
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    let n = stream.info().await.unwrap().state.messages;
    let mut out = Vec::new();
    for seq in 1..=n {
        let m = stream.get_raw_message(seq).await.unwrap();
        let h = |k: &str| m.headers.get(k).map(|v| v.as_str().to_string()).unwrap();
        out.push((
            h("delayq-job-id"),
            h("delayq-attempt").parse().unwrap(),
            h("Nats-Msg-Id"),
            String::from_utf8_lossy(&m.payload).into_owned(),
        ));
    }
    out
}

fn doc(url: &str) -> String {
    serde_json::json!({"type": "nats", "url": url, "subject": "orders.cancel", "max_concurrency": 8})
        .to_string()
}

/// Every due job is published once to the subject, with its headers, and acked after the
/// PubAck: the stream holds each job exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_is_published_once_and_acked_after_the_pub_ack() {
    let nats = delayq_testkit::NatsServer::start();
    let js = jetstream(&nats.url()).await;
    create_stream(&js).await;
    let (engine, _dir) = sqlite();
    let t = Topic::new("orders-nats").unwrap();
    engine.put_destination(&t, &doc(&nats.url())).await.unwrap();
    let _f = forward(engine.clone());
    engine.push_batch(jobs(&t, 200, 100)).await.unwrap();
    until_acked(&engine, &t, Duration::from_secs(30)).await;
    let got = stored(&js).await;
    assert_eq!(got.len(), 200, "each job once");
    let by_id: HashMap<&str, _> = got.iter().map(|g| (g.0.as_str(), g)).collect();
    assert_eq!(by_id.len(), 200);
    let (_, attempt, msg_id, body) = by_id["n7"];
    assert_eq!((*attempt, body.as_str()), (1, "body-7"));
    assert!(msg_id.starts_with("orders-nats/n7/"), "{msg_id}");
}

/// NATS down while the jobs fall due: the sends fail and retry with their back-off; once it
/// is back every job is in the stream exactly once (a repeat is dropped by its
/// Nats-Msg-Id) and acked. No stream for the subject retries too, until one exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_down_or_without_a_stream_for_a_while_loses_nothing() {
    let mut nats = delayq_testkit::NatsServer::start();
    let url = nats.url();
    let (engine, _dir) = sqlite();
    let t = Topic::new("orders-down").unwrap();
    engine.put_destination(&t, &doc(&url)).await.unwrap();
    let _f = forward(engine.clone());

    // First: up, but no stream takes the subject.
    engine.push_batch(jobs(&t, 10, 0)).await.unwrap();
    failure_with(&engine, &t, "n0", "no JetStream stream").await;

    // Then: down for a while, jobs falling due meanwhile.
    nats.kill();
    engine
        .push_batch(
            (10..40)
                .map(|i| {
                    NewJob::new(t.clone(), format!("body-{i}"))
                        .with_id(JobId::new(format!("n{i}")).unwrap())
                        .with_max_attempts(50)
                        .with_backoff(Backoff::exponential(
                            Duration::from_millis(100),
                            Duration::from_millis(500),
                        ))
                })
                .collect(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(engine.stats(&t).await.unwrap().dead, 0);

    // Back, with a stream: everything arrives once and is acked.
    nats.restart();
    let js = jetstream(&url).await;
    create_stream(&js).await;
    until_acked(&engine, &t, Duration::from_secs(60)).await;
    let got = stored(&js).await;
    let mut ids: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!((ids.len(), got.len()), (40, 40), "each job once");
    // n0 failed for want of a stream first, so it came in a later attempt. (Others may
    // make it in their first: the client holds a publish while it reconnects, and the
    // PubAck can still come within the ttr.)
    let n0 = got.iter().find(|g| g.0 == "n0").unwrap();
    assert!(n0.1 > 1, "{n0:?}");
}
