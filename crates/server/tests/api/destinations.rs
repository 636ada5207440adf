//! A topic's push destination through the API: refused naming the field, answered without
//! its secrets, and sent the topic's jobs. (What a user meets of it, its timeout and its
//! retries, is `tests/destinations.rs`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{TestServer, code};
use crate::sqlite;
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::json;

/// A topic's destination through the API (issue 20): a bad one is refused naming the field
/// and stores nothing; a good one is answered without its secrets, read back the same, and
/// the server's forwarder sends the topic's jobs to it (a receiver in the test), counting
/// them in `/metrics`; a delete stops that and a second delete is `404`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_through_the_api_receives_the_topics_jobs_issue_20() {
    use std::sync::Mutex;
    let setup = sqlite(Limits::default()).await;
    let s = TestServer::start(setup.engine.clone(), ServerConfig::default()).await;

    let got: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_addr = listener.local_addr().unwrap();
    let record = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let record = record.clone();
            async move {
                let id = headers["delayq-job-id"].to_str().unwrap().to_string();
                assert!(headers.contains_key("webhook-signature"));
                record.lock().unwrap().push((id, body));
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });

    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let url = format!("http://{hook_addr}/hook");
    let (st, v) = s
        .call(
            "PUT",
            "/v1/topics/hooked/destination",
            Some(json!({"type": "webhook", "url": url, "secrets": [secret, "nope"]})),
        )
        .await;
    assert_eq!((st, code(&v)), (400, "invalid_argument"), "{v}");
    assert_eq!(v["error"]["field"], "/secrets/1", "{v}");
    let (st, v) = s
        .call(
            "PUT",
            "/v1/topics/hooked/destination",
            Some(json!({"type": "carrier-pigeon"})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["field"].as_str()),
        (400, Some("/type")),
        "{v}"
    );
    assert_eq!(
        s.get("/v1/topics/hooked/destination").await.0,
        404,
        "nothing stored"
    );

    let doc = json!({"type": "webhook", "url": url, "secrets": [secret],
                     "headers": {"authorization": "Bearer abc"}, "max_concurrency": 2});
    let (st, put) = s
        .call("PUT", "/v1/topics/hooked/destination", Some(doc))
        .await;
    assert_eq!(st, 200, "{put}");
    let text = put.to_string();
    assert!(
        !text.contains("whsec_") && !text.contains("Bearer"),
        "{text}"
    );
    assert_eq!(put["secret_count"], 1);
    assert_eq!(put["headers"]["authorization"], "***");
    let (st, read) = s.get("/v1/topics/hooked/destination").await;
    assert_eq!((st, &read), (200, &put));

    for i in 0..3 {
        let (st, v) = s
            .post(
                "/v1/topics/hooked/jobs",
                json!({"id": format!("h{i}"), "body": format!("b{i}")}),
            )
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let start = Instant::now();
    while got.lock().unwrap().len() < 3 {
        assert!(start.elapsed() < Duration::from_secs(15), "not delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut seen = got.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        (0..3)
            .map(|i| (format!("h{i}"), format!("b{i}")))
            .collect::<Vec<_>>()
    );
    let (_, metrics) = s.text("/metrics").await;
    assert!(
        metrics.contains(r#"delayq_push_deliveries_total{topic="hooked",destination="webhook"} 3"#),
        "{metrics}"
    );
    for histogram in ["latency", "lateness"] {
        let count = format!(
            r#"delayq_push_{histogram}_seconds_count{{topic="hooked",destination="webhook"}} 3"#
        );
        assert!(metrics.contains(&count), "no {count} in {metrics}");
    }

    assert_eq!(s.delete("/v1/topics/hooked/destination").await.0, 204);
    assert_eq!(s.get("/v1/topics/hooked/destination").await.0, 404);
    assert_eq!(s.delete("/v1/topics/hooked/destination").await.0, 404);

    // A NATS and a RabbitMQ destination (their sends are tested in crates/push/tests): a
    // bad field is refused naming it; the view keeps where it goes and masks a password.
    let brokers = [
        (
            json!({"type": "nats", "url": "nats://127.0.0.1:1", "subject": "orders.*"}),
            "/subject",
            json!({"type": "nats", "url": "nats://u:secret@127.0.0.1:1", "subject": "orders.cancel"}),
            ("subject", "orders.cancel"),
        ),
        (
            json!({"type": "rabbitmq", "url": "amqp://127.0.0.1:1/%2f", "exchange": "bad name", "routing_key": "k"}),
            "/exchange",
            json!({"type": "rabbitmq", "url": "amqp://u:secret@127.0.0.1:1/%2f", "exchange": "orders", "routing_key": "order.cancel"}),
            ("routing_key", "order.cancel"),
        ),
    ];
    for (bad, field, good, (key, value)) in brokers {
        let (st, v) = s
            .call("PUT", "/v1/topics/brokered/destination", Some(bad))
            .await;
        assert_eq!(
            (st, v["error"]["field"].as_str()),
            (400, Some(field)),
            "{v}"
        );
        let (st, v) = s
            .call("PUT", "/v1/topics/brokered/destination", Some(good))
            .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v[key], value, "{v}");
        assert!(!v.to_string().contains("secret@"), "{v}");
        assert_eq!(s.delete("/v1/topics/brokered/destination").await.0, 204);
    }
}
