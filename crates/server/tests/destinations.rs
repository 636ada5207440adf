//! A topic's destination through the HTTP API, as a user meets it (issue 36): what `GET`
//! shows of its headers, its `timeout_ms`, and the retry schedule a topic gets with it, so
//! that a receiver down for a few seconds does not send jobs to dead. A real server on a
//! free loopback port over the embedded engine; a real receiver (axum) for the jobs.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestServer, code};
use delayq_server::ServerConfig;
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A server over the embedded engine in a temporary directory (kept while the guard lives).
async fn server() -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let engine = delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::dir(
        dir.path().join("data"),
    ))
    .unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    (s, dir)
}

// See: issue 36
/// `GET` (and the `PUT`'s answer) shows the values of ordinary headers and masks those of
/// headers that carry credentials; `timeout_ms` is shown, null when unset; a bad one is
/// refused naming the field, storing nothing.
#[tokio::test]
async fn a_destination_shows_plain_header_values_and_masks_secret_ones_issue_36() {
    let (s, _dir) = server().await;
    let (st, v) = s
        .call(
            "PUT",
            "/v1/topics/shown/destination",
            Some(
                json!({"type": "webhook", "url": "http://127.0.0.1:9/hook", "secrets": [SECRET],
                        "timeout_ms": 5}),
            ),
        )
        .await;
    assert_eq!((st, code(&v)), (400, "invalid_argument"), "{v}");
    assert_eq!(v["error"]["field"], "/timeout_ms", "{v}");
    assert_eq!(s.get("/v1/topics/shown/destination").await.0, 404);

    let doc = json!({"type": "webhook", "url": "http://127.0.0.1:9/hook", "secrets": [SECRET],
                     "headers": {"authorization": "Bearer abc", "x-api-key": "k-123",
                                 "Cookie": "session=s", "x-tenant": "t-1", "x-region": "eu"},
                     "timeout_ms": 10000});
    let (st, put) = s
        .call("PUT", "/v1/topics/shown/destination", Some(doc))
        .await;
    assert_eq!(st, 200, "{put}");
    let (st, read) = s.get("/v1/topics/shown/destination").await;
    assert_eq!((st, &read), (200, &put));
    assert_eq!(
        read["headers"],
        json!({"authorization": "***", "x-api-key": "***", "Cookie": "***",
               "x-tenant": "t-1", "x-region": "eu"}),
        "{read}"
    );
    let text = read.to_string();
    for secret in ["Bearer", "k-123", "session=s", "whsec_"] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    assert_eq!(read["timeout_ms"], 10000, "{read}");

    let (_, nats) = s
        .call(
            "PUT",
            "/v1/topics/shown/destination",
            Some(json!({"type": "nats", "url": "nats://127.0.0.1:1", "subject": "a.b"})),
        )
        .await;
    assert_eq!(nats["timeout_ms"], serde_json::Value::Null, "{nats}");
}

// See: issue 36
/// A topic given a destination through the API, its settings left unset, and a job pushed
/// through the API with none of its own: the receiver is down for 3 s when the job falls
/// due, then comes up and gets it (with the built-in 3 attempts and 1 s, 2 s back-off it went
/// to dead). `GET` of the topic shows the schedule it got; a setting it had is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_3s_gets_the_job_pushed_with_default_settings_issue_36() {
    let (s, _dir) = server().await;
    // A setting the topic had is kept.
    let (st, v) = s
        .call("PUT", "/v1/topics/kept", Some(json!({"max_attempts": 2})))
        .await;
    assert_eq!(st, 200, "{v}");
    let hook = json!({"type": "webhook", "url": "http://127.0.0.1:9/hook", "secrets": [SECRET]});
    let (st, v) = s
        .call("PUT", "/v1/topics/kept/destination", Some(hook))
        .await;
    assert_eq!(st, 200, "{v}");
    let (_, kept) = s.get("/v1/topics/kept").await;
    assert_eq!(kept["max_attempts"], 2, "{kept}");
    assert_eq!(kept["backoff"]["base_ms"], 5000, "{kept}");

    // Nothing listens on the receiver's port yet.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let hook =
        json!({"type": "webhook", "url": format!("http://{addr}/hook"), "secrets": [SECRET]});
    let (st, v) = s
        .call("PUT", "/v1/topics/down/destination", Some(hook))
        .await;
    assert_eq!(st, 200, "{v}");
    let (_, settings) = s.get("/v1/topics/down").await;
    assert_eq!(settings["max_attempts"], 10, "{settings}");
    assert_eq!(
        settings["backoff"],
        json!({"kind": "exponential", "base_ms": 5000, "max_ms": 36_000_000, "factor": 4, "jitter": 0.1}),
        "{settings}"
    );
    let (st, v) = s
        .post("/v1/topics/down/jobs", json!({"id": "d1", "body": "x"}))
        .await;
    assert_eq!(st, 201, "{v}");
    // Its first attempt fails (the forwarder reads the destinations every second), then the
    // receiver stays down for 3 s more.
    let start = Instant::now();
    loop {
        let (_, job) = s.get("/v1/topics/down/jobs/d1").await;
        if job["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("connect"))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no failed attempt: {job}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (st, job) = s.get("/v1/topics/down/jobs/d1").await;
    assert_eq!(st, 200, "{job}");
    assert_ne!(job["state"], "dead", "{job}");
    assert_eq!(job["max_attempts"], 10, "{job}");

    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let record = record.clone();
            async move {
                let attempt = headers["delayq-attempt"].to_str().unwrap().to_string();
                record.lock().unwrap().push(attempt);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let start = Instant::now();
    loop {
        let (st, job) = s.get("/v1/topics/down/jobs/d1").await;
        if st == 404 {
            break;
        }
        assert_ne!(job["state"], "dead", "{job}");
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "not delivered: {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        *got.lock().unwrap(),
        ["2"],
        "sent once, at its second attempt"
    );
}
