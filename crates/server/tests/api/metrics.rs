//! What the server counts: `/metrics` following a session (on each engine) and complete
//! from the start, and `GET /v1/series` (on each engine).

use std::time::{Duration, Instant};

use crate::common::{TestServer, code};
use crate::{Setup, sqlite};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::{Value, json};

async fn metrics_follow_the_session(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    s.post("/v1/topics/mx/jobs", json!({"body": "x", "delay_ms": 50}))
        .await;
    let (_, v) = s
        .post("/v1/reserve", json!({"topics": ["mx"], "wait_ms": 2000}))
        .await;
    let token = v["jobs"][0]["token"].as_u64().unwrap();
    s.post("/v1/topics/mx/jobs/x/ack", json!({"token": token}))
        .await;
    let id = v["jobs"][0]["job"]["id"].as_str().unwrap().to_string();
    s.post(
        &format!("/v1/topics/mx/jobs/{id}/ack"),
        json!({"token": token}),
    )
    .await;
    let (st, text) = s.text("/metrics").await;
    assert_eq!(st, 200);
    for needle in [
        "delayq_jobs_pushed_total{topic=\"mx\"} 1",
        "delayq_jobs_delivered_total{topic=\"mx\"} 1",
        "delayq_jobs_acked_total{topic=\"mx\"} 1",
        "delayq_lateness_seconds_count{topic=\"mx\"} 1",
        "delayq_reserved_seconds_count{topic=\"mx\"} 1",
        "delayq_jobs{topic=\"mx\",state=\"ready\"} 0",
        "delayq_lease_expirations_total{topic=\"mx\"} 0",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
}

/// `GET /v1/series` (issue 15): pushes, deliveries, acks and deaths through HTTP show in the
/// minute in progress and in the lateness of the last minute and hour; a topic the server has
/// not seen answers zeros; a purged topic leaves; a bad topic is refused.
// See: issue 15
async fn series_follow_the_session_issue_15(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    for id in ["a", "b", "c"] {
        let (st, v) = s
            .post(
                "/v1/topics/sx/jobs",
                json!({"id": id, "body": "x", "max_attempts": 1}),
            )
            .await;
        assert_eq!(st, 201, "{v}");
    }
    s.post(
        "/v1/topics/other/jobs",
        json!({"body": "y", "delay_ms": 3_600_000}),
    )
    .await;
    let mut tokens = std::collections::HashMap::new();
    let start = Instant::now();
    while tokens.len() < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "not delivered");
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": ["sx"], "max": 3, "wait_ms": 1000}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        for d in v["jobs"].as_array().unwrap() {
            let id = d["job"]["id"].as_str().unwrap().to_string();
            tokens.insert(id, d["token"].as_u64().unwrap());
        }
    }
    let ok = |answer: (u16, Value), want: u16| assert_eq!(answer.0, want, "{}", answer.1);
    ok(
        s.post("/v1/topics/sx/jobs/a/ack", json!({"token": tokens["a"]}))
            .await,
        204,
    );
    ok(
        s.post("/v1/topics/sx/jobs/b/bury", json!({"token": tokens["b"]}))
            .await,
        204,
    );
    let (st, v) = s
        .post("/v1/topics/sx/jobs/c/nack", json!({"token": tokens["c"]}))
        .await;
    assert_eq!((st, v["outcome"].as_str()), (200, Some("dead")), "{v}");

    let (st, v) = s.get("/v1/series?topic=sx").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["topic"], "sx");
    assert_eq!(v["scope"], "per server, since it started");
    let minutes = v["minutes"].as_array().unwrap();
    assert!((1..=2).contains(&minutes.len()), "{v}");
    let sum = |field: &str| -> u64 { minutes.iter().map(|m| m[field].as_u64().unwrap()).sum() };
    assert_eq!(
        (sum("pushed"), sum("delivered"), sum("acked"), sum("dead")),
        (3, 3, 1, 2),
        "{v}"
    );
    assert!(v["since_ms"].as_u64().unwrap() <= minutes[0]["start_ms"].as_u64().unwrap());
    let lateness = &v["lateness"];
    assert_eq!(lateness["bounds_ms"].as_array().unwrap().len(), 19);
    for window in ["last_minute", "last_hour"] {
        let w = &lateness[window];
        assert_eq!(w["count"], 3, "{window}: {w}");
        let counts: Vec<u64> = w["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        assert_eq!((counts.len(), counts.iter().sum::<u64>()), (20, 3), "{w}");
        let p = |f: &str| w[f].as_f64().unwrap();
        assert!(0.0 <= p("p50_ms") && p("p50_ms") <= p("p99_ms"), "{w}");
        assert!(p("p99_ms") <= p("max_ms"), "{w}");
    }

    // Every topic, summed: the other topic's push too.
    let (_, all) = s.get("/v1/series").await;
    assert!(all["topic"].is_null());
    let pushed: u64 = all["minutes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["pushed"].as_u64().unwrap())
        .sum();
    assert_eq!(pushed, 4, "{all}");

    // A topic never seen: zeros, not an error.
    let (st, v) = s.get("/v1/series?topic=never-seen").await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["minutes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["pushed"] == 0),
        "{v}"
    );
    assert_eq!(v["lateness"]["last_hour"]["count"], 0);
    assert!(v["lateness"]["last_hour"]["p50_ms"].is_null());

    // Bad input names what to do.
    let (st, v) = s.get("/v1/series?topic=no%20spaces").await;
    assert_eq!((st, code(&v)), (400, "invalid_topic"), "{v}");
    let (st, v) = s.get("/v1/series?topik=sx").await;
    assert_eq!((st, code(&v)), (400, "invalid_request"), "{v}");

    // A purged topic leaves the series.
    assert_eq!(s.delete("/v1/topics/sx").await.0, 200);
    let (_, v) = s.get("/v1/series?topic=sx").await;
    assert_eq!(v["lateness"]["last_hour"]["count"], 0, "{v}");
    assert!(
        v["minutes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["acked"] == 0),
        "{v}"
    );
}

/// `/metrics` has the build, the process, HTTP requests by route template and status, and
/// every per-topic counter at 0 as soon as the topic exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_complete_from_the_start_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let (st, _) = s
        .post(
            "/v1/topics/fresh/jobs",
            json!({"body": "x", "delay_ms": 60_000}),
        )
        .await;
    assert_eq!(st, 201);
    assert_eq!(s.get("/no/such/route").await.0, 404);
    let (st, text) = s.text("/metrics").await;
    assert_eq!(st, 200);
    let build = format!(
        "delayq_build_info{{version=\"{}\",commit=\"",
        env!("CARGO_PKG_VERSION")
    );
    for needle in [
        build.as_str(),
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
        "delayq_http_requests_total{method=\"POST\",route=\"/v1/topics/{topic}/jobs\",status=\"201\"} 1",
        "delayq_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/topics/{topic}/jobs\",status=\"201\"} 1",
        "delayq_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1",
        "delayq_jobs_pushed_total{topic=\"fresh\"} 1",
        "delayq_jobs_delivered_total{topic=\"fresh\"} 0",
        "delayq_jobs_acked_total{topic=\"fresh\"} 0",
        "delayq_jobs_nacked_total{topic=\"fresh\"} 0",
        "delayq_jobs_buried_total{topic=\"fresh\"} 0",
        "delayq_jobs_released_total{topic=\"fresh\"} 0",
        "delayq_lease_expirations_total{topic=\"fresh\"} 0",
        "delayq_lateness_seconds_count{topic=\"fresh\"} 0",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
}

engine_tests! {
    metrics_follow_the_session(Limits::default()),
    series_follow_the_session_issue_15(Limits::default()),
}
