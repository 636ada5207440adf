//! How a topic with a destination retries (issue 36): the receiver schedule its unset
//! settings get, so that a receiver down for a few seconds still gets its jobs; and a
//! `429`/`503` with `Retry-After`, waited out within the attempt so that it uses up none.
//! A real receiver (axum on a free loopback port) answers as scripted; a forwarder runs over
//! the embedded engine.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;
use common::{failure_with, forward, sqlite, topic, until_acked};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use delayq_core::{Backoff, Engine, JobId, JobState, NewJob, Store, Topic, TopicConfig};
use delayq_push::{Destination, PushMetrics, RECEIVER_MAX_ATTEMPTS, receiver_backoff};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A receiver that answers its n-th request with `script[n]` (a status and an optional
/// `Retry-After`), `204` after the script, noting each request's attempt and arrival.
struct Receiver {
    script: Mutex<Vec<(u16, Option<&'static str>)>>,
    got: Mutex<Vec<(u32, Instant)>>,
}

async fn hook(State(r): State<Arc<Receiver>>, headers: HeaderMap) -> Response {
    let attempt = headers["delayq-attempt"].to_str().unwrap().parse().unwrap();
    r.got.lock().unwrap().push((attempt, Instant::now()));
    let (status, after) = {
        let mut script = r.script.lock().unwrap();
        if script.is_empty() {
            (204, None)
        } else {
            script.remove(0)
        }
    };
    let mut resp = (StatusCode::from_u16(status).unwrap(), "scripted").into_response();
    if let Some(a) = after {
        resp.headers_mut().insert("retry-after", a.parse().unwrap());
    }
    resp
}

/// Serves a receiver with `script` on `listener`.
fn serve_on(
    listener: tokio::net::TcpListener,
    script: Vec<(u16, Option<&'static str>)>,
) -> Arc<Receiver> {
    let r = Arc::new(Receiver {
        script: Mutex::new(script),
        got: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(r.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    r
}

/// Gives topic `name` a webhook to `addr` the way the API does
/// (`delayq_push::put_destination`).
async fn hooked(engine: &Arc<dyn Store>, name: &str, addr: SocketAddr) -> Topic {
    let t = topic(name);
    let doc = serde_json::json!({
        "type": "webhook",
        "url": format!("http://{addr}/hook"),
        "secrets": [SECRET],
        "max_concurrency": 1,
    });
    let d = Destination::from_json(&doc.to_string()).unwrap();
    delayq_push::put_destination(engine.as_ref(), &t, &d)
        .await
        .unwrap();
    t
}

/// The metrics as `/metrics` shows them.
fn exposed(metrics: &PushMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::with_prefix("delayq");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}

// See: issue 36
/// A receiver down for 3 s (nothing listens on its port) when a job pushed with no
/// settings of its own falls due gets that job once it is up: with the built-in defaults
/// (3 attempts, 1 s then 2 s) the job went to dead; the receiver schedule's first retry
/// comes after 5 s (less its jitter).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_3s_gets_the_job_with_the_default_settings_issue_36() {
    let (engine, _dir) = sqlite();
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let t = hooked(&engine, "down3s", addr).await;
    let config = engine.topic_config(&t).await.unwrap();
    assert_eq!(
        (config.max_attempts, config.backoff),
        (Some(RECEIVER_MAX_ATTEMPTS), Some(receiver_backoff())),
        "the topic's unset settings follow the receiver schedule"
    );
    let f = forward(engine.clone());
    let id = JobId::new("d1").unwrap();
    let pushed_at = Instant::now();
    engine
        .push(NewJob::new(t.clone(), "x").with_id(id.clone()))
        .await
        .unwrap();
    // Its first attempt fails, then the receiver stays down for 3 s more.
    failure_with(&engine, &t, "d1", "connect").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let job = engine.get(&t, &id).await.unwrap().unwrap();
    assert_ne!(job.state, JobState::Dead, "dead while the receiver is down");
    assert_eq!(job.max_attempts, RECEIVER_MAX_ATTEMPTS);
    assert!(exposed(&f.metrics).contains(r#"cause="connect"} "#));

    let r = serve_on(tokio::net::TcpListener::bind(addr).await.unwrap(), vec![]);
    until_acked(&engine, &t, Duration::from_secs(15)).await;
    let got = r.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "sent once after it came up: {got:?}");
    assert_eq!(got[0].0, 2, "the second attempt");
    assert!(
        got[0].1.duration_since(pushed_at) >= Duration::from_millis(4400),
        "the first retry waited the schedule's 5 s less its jitter"
    );
}

// See: issue 36
/// A setting the topic has is kept when it gets a destination: only the unset ones follow
/// the receiver schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topics_own_settings_win_over_the_receiver_schedule_issue_36() {
    let (engine, _dir) = sqlite();
    let t = topic("own");
    let own = TopicConfig {
        max_attempts: Some(2),
        ttr: Some(Duration::from_secs(7)),
        ..TopicConfig::default()
    };
    engine.set_topic_config(&t, &own).await.unwrap();
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    hooked(&engine, "own", addr).await;
    let config = engine.topic_config(&t).await.unwrap();
    assert_eq!(
        (config.max_attempts, config.ttr, config.backoff),
        (
            Some(2),
            Some(Duration::from_secs(7)),
            Some(receiver_backoff())
        )
    );
}

/// One job, ready now, with a ttr of `ttr`, `max_attempts` attempts and a fixed back-off
/// of 100 ms.
async fn push_one(engine: &Arc<dyn Store>, t: &Topic, ttr: Duration, max_attempts: u32) {
    engine
        .push(
            NewJob::new(t.clone(), "x")
                .with_id(JobId::new("r1").unwrap())
                .with_ttr(ttr)
                .with_max_attempts(max_attempts)
                .with_backoff(Backoff::fixed(Duration::from_millis(100))),
        )
        .await
        .unwrap();
}

// See: issue 36
/// A receiver answering `429` with `Retry-After: 1` twice (once as `503`), then `200`: the
/// job is sent again after each wait within its first attempt, so a job of one attempt is
/// delivered (acked, not dead); each answer is counted by its cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_answers_use_up_no_attempt_issue_36() {
    let (engine, _dir) = sqlite();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let r = serve_on(
        listener,
        vec![(429, Some("1")), (503, Some("1")), (429, Some("1"))],
    );
    let t = hooked(&engine, "limited", addr).await;
    push_one(&engine, &t, Duration::from_secs(30), 1).await;
    let f = forward(engine.clone());
    until_acked(&engine, &t, Duration::from_secs(20)).await;
    let got = r.got.lock().unwrap().clone();
    let attempts: Vec<u32> = got.iter().map(|(a, _)| *a).collect();
    assert_eq!(attempts, [1, 1, 1, 1], "one attempt, sent four times");
    for pair in got.windows(2) {
        let waited = pair[1].1.duration_since(pair[0].1);
        assert!(
            waited >= Duration::from_millis(950),
            "Retry-After not waited out: {waited:?}"
        );
    }
    let text = exposed(&f.metrics);
    for line in [
        r#"delayq_push_failures_total{topic="limited",destination="webhook",cause="status_429"} 2"#,
        r#"delayq_push_failures_total{topic="limited",destination="webhook",cause="status_5xx"} 1"#,
        r#"delayq_push_deliveries_total{topic="limited",destination="webhook"} 1"#,
    ] {
        assert!(text.contains(line), "no {line} in {text}");
    }
}

// See: issue 36
/// A `Retry-After` longer than half the job's ttr is not waited out within the attempt:
/// the job is retried after it as its next attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_past_half_the_ttr_is_the_next_attempt_issue_36() {
    let (engine, _dir) = sqlite();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let r = serve_on(listener, vec![(429, Some("2"))]);
    let t = hooked(&engine, "later", addr).await;
    push_one(&engine, &t, Duration::from_secs(3), 2).await;
    let _f = forward(engine.clone());
    until_acked(&engine, &t, Duration::from_secs(15)).await;
    let got = r.got.lock().unwrap().clone();
    let attempts: Vec<u32> = got.iter().map(|(a, _)| *a).collect();
    assert_eq!(attempts, [1, 2], "{got:?}");
    let waited = got[1].1.duration_since(got[0].1);
    assert!(
        waited >= Duration::from_millis(1950),
        "retried before its Retry-After: {waited:?}"
    );
}
