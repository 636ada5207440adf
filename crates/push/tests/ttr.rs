//! How long a send may take (issue 36): the whole of the job's lease, its ttr, and no
//! renewal beyond it; or the destination's `timeout_ms` when that is shorter. A real receiver (axum on a free loopback port) answers `200` after a
//! set time; a forwarder runs over the embedded engine; jobs have a ttr of 3 s.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;
use common::{forward, sqlite, topic, until_acked};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use delayq_core::{Backoff, Engine, JobId, NewJob, Store, Topic};
use delayq_push::PushMetrics;

const TTR: Duration = Duration::from_secs(3);

/// A receiver that answers `200` after `delays[n]` for its n-th request (the last one for
/// the rest), noting each request (job id, attempt, arrival) as it arrives, before it
/// answers: a send cut short is seen too.
struct Receiver {
    delays: Vec<Duration>,
    got: Mutex<Vec<(String, u32, Instant)>>,
}

async fn hook(State(r): State<Arc<Receiver>>, headers: HeaderMap) -> StatusCode {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let delay = {
        let mut got = r.got.lock().unwrap();
        got.push((
            h("delayq-job-id"),
            h("delayq-attempt").parse().unwrap(),
            Instant::now(),
        ));
        r.delays[(got.len() - 1).min(r.delays.len() - 1)]
    };
    tokio::time::sleep(delay).await;
    StatusCode::OK
}

/// Serves a receiver with these delays on a free loopback port.
async fn receiver(delays: Vec<Duration>) -> (Arc<Receiver>, SocketAddr) {
    let r = Arc::new(Receiver {
        delays,
        got: Mutex::new(Vec::new()),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(r.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (r, addr)
}

/// Points topic `name` of `engine` at the receiver on `addr`, `max_concurrency` sends at once.
async fn hooked(engine: &Arc<dyn Store>, name: &str, addr: SocketAddr, n: u32) -> Topic {
    hooked_with(engine, name, addr, n, None).await
}

/// As [`hooked`], with the destination's `timeout_ms` when given.
async fn hooked_with(
    engine: &Arc<dyn Store>,
    name: &str,
    addr: SocketAddr,
    n: u32,
    timeout_ms: Option<u64>,
) -> Topic {
    let t = topic(name);
    let mut doc = serde_json::json!({
        "type": "webhook",
        "url": format!("http://{addr}/hook"),
        "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        "max_concurrency": n,
    });
    if let Some(ms) = timeout_ms {
        doc["timeout_ms"] = ms.into();
    }
    engine.put_destination(&t, &doc.to_string()).await.unwrap();
    t
}

/// `n` jobs ready now with a ttr of 3 s, 5 attempts, a fixed back-off of 200 ms.
async fn push(engine: &Arc<dyn Store>, t: &Topic, n: usize) {
    let jobs = (0..n)
        .map(|i| {
            NewJob::new(t.clone(), "x")
                .with_id(JobId::new(format!("t{i}")).unwrap())
                .with_ttr(TTR)
                .with_max_attempts(5)
                .with_backoff(Backoff::fixed(Duration::from_millis(200)))
        })
        .collect();
    engine.push_batch(jobs).await.unwrap();
}

/// The metrics as `/metrics` shows them.
fn exposed(metrics: &PushMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::with_prefix("delayq");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}

/// Four jobs to a receiver answering after `answer_after`, four sends at once: each job is
/// sent once and acked.
async fn each_job_sent_once_and_acked(name: &str, answer_after: Duration) {
    let (engine, _dir) = sqlite();
    let (r, addr) = receiver(vec![answer_after]).await;
    let t = hooked(&engine, name, addr, 4).await;
    push(&engine, &t, 4).await;
    let f = forward(engine.clone());
    until_acked(&engine, &t, 4 * TTR).await;
    let got = r.got.lock().unwrap().clone();
    let mut ids: Vec<&str> = got.iter().map(|(id, _, _)| id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["t0", "t1", "t2", "t3"], "each job once: {got:?}");
    assert!(got.iter().all(|(_, attempt, _)| *attempt == 1), "{got:?}");
    let text = exposed(&f.metrics);
    assert!(
        text.contains(&format!(
            r#"delayq_push_deliveries_total{{topic="{name}",destination="webhook"}} 4"#
        )),
        "{text}"
    );
    assert!(!text.contains("delayq_push_failures_total{"), "{text}");
}

// See: issue 36
/// A receiver answering after half the ttr gets each job once, and every job is acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_at_half_the_ttr_gets_each_job_once_and_it_is_acked() {
    each_job_sent_once_and_acked("half", TTR / 2).await;
}

// See: issue 36
/// A receiver answering after nine tenths of the ttr gets each job once, and every job is
/// acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_at_nine_tenths_of_the_ttr_gets_each_job_once_and_it_is_acked() {
    each_job_sent_once_and_acked("most", TTR * 9 / 10).await;
}

// See: issue 36
/// A receiver that answers after the ttr: the send is abandoned when the ttr ends, counted
/// under the cause `timeout` (not `lease_lost`), and the job comes back with its back-off
/// for another attempt, which is acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_after_the_ttr_is_a_timeout_and_the_job_comes_back() {
    let (engine, _dir) = sqlite();
    let (r, addr) = receiver(vec![TTR + TTR / 2, Duration::ZERO]).await;
    let t = hooked(&engine, "late", addr, 1).await;
    push(&engine, &t, 1).await;
    let f = forward(engine.clone());
    until_acked(&engine, &t, 4 * TTR).await;
    let got = r.got.lock().unwrap().clone();
    let attempts: Vec<u32> = got.iter().map(|(_, a, _)| *a).collect();
    assert_eq!(attempts, [1, 2], "{got:?}");
    let text = exposed(&f.metrics);
    assert!(
        text.contains(
            r#"delayq_push_failures_total{topic="late",destination="webhook",cause="timeout"} 1"#
        ),
        "{text}"
    );
    assert!(!text.contains(r#"cause="lease_lost""#), "{text}");
    assert!(
        text.contains(r#"delayq_push_deliveries_total{topic="late",destination="webhook"} 1"#),
        "{text}"
    );
    // The first send had its whole ttr (less the margin for its nack) before the second.
    let between = got[1].2.duration_since(got[0].2);
    assert!(between >= TTR * 9 / 10, "sent again after {between:?}");
}

// See: issue 36
/// A destination's `timeout_ms` shorter than the ttr cuts a slow receiver's send at that
/// timeout, not at the end of the lease: counted under the cause `timeout`, and the job
/// comes back with its back-off for another attempt, which is acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_timeout_cuts_a_slow_receiver_and_counts_timeout_issue_36() {
    let (engine, _dir) = sqlite();
    let (r, addr) = receiver(vec![Duration::from_secs(2), Duration::ZERO]).await;
    let t = hooked_with(&engine, "cut", addr, 1, Some(500)).await;
    push(&engine, &t, 1).await;
    let f = forward(engine.clone());
    until_acked(&engine, &t, 4 * TTR).await;
    let got = r.got.lock().unwrap().clone();
    let attempts: Vec<u32> = got.iter().map(|(_, a, _)| *a).collect();
    assert_eq!(attempts, [1, 2], "{got:?}");
    // Cut after 500 ms, sent again after the 200 ms back-off: long before the 3 s ttr, and
    // before the 2 s receiver would have answered.
    let between = got[1].2.duration_since(got[0].2);
    assert!(
        between >= Duration::from_millis(650) && between < Duration::from_millis(1600),
        "sent again after {between:?}"
    );
    let text = exposed(&f.metrics);
    assert!(
        text.contains(
            r#"delayq_push_failures_total{topic="cut",destination="webhook",cause="timeout"} 1"#
        ),
        "{text}"
    );
    assert!(!text.contains(r#"cause="lease_lost""#), "{text}");
    assert!(
        text.contains(r#"delayq_push_deliveries_total{topic="cut",destination="webhook"} 1"#),
        "{text}"
    );
}
