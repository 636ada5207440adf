//! The HTTP API end to end: a real server on a free port, a real HTTP client, for each
//! engine: every endpoint, every error code, auth on and off, long-poll, body limits,
//! graceful shutdown with a long-poll open, and the metrics the session moves.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, code};
use delayq_core::{Engine, Limits};
use delayq_server::ServerConfig;
use serde_json::{Value, json};

/// Everything one engine needs to stay alive for a test.
struct Setup {
    engine: Arc<dyn Engine>,
    _guard: Box<dyn std::any::Any + Send>,
}

async fn redis(limits: Limits) -> Setup {
    let server = delayq_testkit::RedisServer::start();
    let config = delayq_redis::RedisConfig::new(server.url()).with_limits(limits);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(server),
    }
}

/// The Redis engine on a Redis Cluster (3 primaries, 3 replicas): the tests running at the
/// same time share one (`RedisCluster::shared`), each under a key prefix of its own, which
/// also keeps their topic registries and schedules apart. The topics the tests name
/// ("orders", "mail", "t", ...) hash to slots of every primary.
async fn cluster(limits: Limits) -> Setup {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cluster = tokio::task::spawn_blocking(delayq_testkit::RedisCluster::shared)
        .await
        .unwrap();
    let config = delayq_redis::RedisConfig::new(cluster.url())
        .with_prefix(format!("api-{n}"))
        .with_limits(limits);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(cluster),
    }
}

async fn sqlite(limits: Limits) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let config = delayq_sqlite::SqliteConfig::dir(dir.path().join("data")).with_limits(limits);
    let engine = delayq_sqlite::SqliteEngine::open(config).unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(dir),
    }
}

/// The PostgreSQL engine on a PostgreSQL of the test's own.
async fn postgres(limits: Limits) -> Setup {
    let server = tokio::task::spawn_blocking(delayq_testkit::PostgresServer::start)
        .await
        .unwrap();
    let config = delayq_postgres::PostgresConfig::new(server.url()).with_limits(limits);
    let engine = delayq_postgres::PostgresEngine::connect(config)
        .await
        .unwrap();
    Setup {
        engine: Arc::new(engine),
        _guard: Box::new(server),
    }
}

fn small_limits() -> Limits {
    Limits { max_body: 2048 }
}

async fn every_endpoint(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    assert_eq!(s.text("/healthz").await, (200, "ok\n".into()));
    assert_eq!(s.text("/readyz").await.0, 200);

    // Push: created, then existed.
    let (st, v) = s.post("/v1/topics/orders/jobs", json!({"id": "o-1", "body": "cancel 1", "delay_ms": 3_600_000, "priority": 2, "ttr_ms": 5000, "max_attempts": 4, "backoff": {"kind": "fixed", "base_ms": 250}})).await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(
        (
            v["id"].as_str(),
            v["created"].as_bool(),
            v["state"].as_str()
        ),
        (Some("o-1"), Some(true), Some("delayed"))
    );
    let (st, v) = s
        .post(
            "/v1/topics/orders/jobs",
            json!({"id": "o-1", "body": "other"}),
        )
        .await;
    assert_eq!((st, v["created"].as_bool()), (200, Some(false)));

    // Get: every field, the body as text.
    let (st, j) = s.get("/v1/topics/orders/jobs/o-1").await;
    assert_eq!(st, 200, "{j}");
    assert_eq!(j["body"], "cancel 1");
    assert_eq!(j["encoding"], "utf8");
    assert_eq!(j["priority"], 2);
    assert_eq!(j["ttr_ms"], 5000);
    assert_eq!(j["max_attempts"], 4);
    assert_eq!(j["backoff"]["kind"], "fixed");
    assert_eq!(j["backoff"]["base_ms"], 250);
    assert!(j["ready_at"].as_str().unwrap().ends_with("+00:00"));

    // A binary body goes in and comes out as base64.
    let (st, _) = s
        .post(
            "/v1/topics/orders/jobs",
            json!({"id": "bin", "body": "/wA=", "encoding": "base64", "delay_ms": 3_600_000}),
        )
        .await;
    assert_eq!(st, 201);
    let (_, j) = s.get("/v1/topics/orders/jobs/bin").await;
    assert_eq!(
        (j["body"].as_str(), j["encoding"].as_str()),
        (Some("/wA="), Some("base64"))
    );

    // An id with a slash, percent-encoded in the path.
    let (st, _) = s
        .post(
            "/v1/topics/orders/jobs",
            json!({"id": "a/b", "body": "x", "delay_ms": 3_600_000}),
        )
        .await;
    assert_eq!(st, 201);
    assert_eq!(s.get("/v1/topics/orders/jobs/a%2Fb").await.1["id"], "a/b");

    // Batch push, answered in order, duplicate inside.
    let (st, v) = s.post("/v1/topics/mail/batch", json!({"jobs": [{"id": "m1", "body": "1"}, {"id": "m2", "body": "2"}, {"id": "m1", "body": "again"}]})).await;
    assert_eq!(st, 200, "{v}");
    let created: Vec<bool> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["created"].as_bool().unwrap())
        .collect();
    assert_eq!(created, vec![true, true, false]);

    // List with a cursor.
    let (st, page) = s.get("/v1/topics/orders/jobs?state=delayed&limit=2").await;
    assert_eq!(st, 200, "{page}");
    assert_eq!(page["jobs"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_str().unwrap().to_string();
    let (_, page2) = s
        .get(&format!(
            "/v1/topics/orders/jobs?state=delayed&limit=2&cursor={}",
            urlencode(&cursor)
        ))
        .await;
    assert_eq!(page2["jobs"].as_array().unwrap().len(), 1);
    assert!(page2["next_cursor"].is_null());

    // Reschedule to now, then reserve it with a lease.
    let (st, v) = s
        .post(
            "/v1/topics/orders/jobs/o-1/reschedule",
            json!({"delay_ms": 0}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["orders"], "max": 5, "wait_ms": 1000}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let d = &v["jobs"][0];
    assert_eq!(d["job"]["id"], "o-1");
    assert_eq!(d["job"]["attempts"], 1);
    let token = d["token"].as_u64().unwrap();
    assert!(d["lateness_ms"].as_f64().unwrap() >= 0.0);

    // Touch, then nack with a delay (retry), reserve again, bury, kick.
    let (st, v) = s
        .post(
            "/v1/topics/orders/jobs/o-1/touch",
            json!({"token": token, "ttr_ms": 20_000}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert!(v["deadline_ms"].as_u64().unwrap() > 0);
    let (st, v) = s
        .post(
            "/v1/topics/orders/jobs/o-1/nack",
            json!({"token": token, "delay_ms": 0, "reason": "flaky"}),
        )
        .await;
    assert_eq!((st, v["outcome"].as_str()), (200, Some("retry")), "{v}");
    let (_, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["orders"], "wait_ms": 2000}),
        )
        .await;
    let token = v["jobs"][0]["token"].as_u64().unwrap();
    assert_eq!(v["jobs"][0]["job"]["last_error"], "flaky");
    assert_eq!(
        s.post(
            "/v1/topics/orders/jobs/o-1/bury",
            json!({"token": token, "reason": "poison"})
        )
        .await
        .0,
        204
    );
    let (_, dead) = s.get("/v1/topics/orders/jobs?state=dead").await;
    assert_eq!(dead["jobs"][0]["id"], "o-1");
    assert_eq!(
        s.post("/v1/topics/orders/jobs/o-1/kick", json!({})).await.0,
        204
    );
    assert_eq!(
        s.get("/v1/topics/orders/jobs/o-1").await.1["state"],
        "ready"
    );

    // Release: back at once, attempt not counted.
    let (_, v) = s.post("/v1/reserve", json!({"topics": ["orders"]})).await;
    let token = v["jobs"][0]["token"].as_u64().unwrap();
    assert_eq!(
        s.post(
            "/v1/topics/orders/jobs/o-1/release",
            json!({"token": token})
        )
        .await
        .0,
        204
    );
    let (_, v) = s.post("/v1/reserve", json!({"topics": ["orders"]})).await;
    assert_eq!(v["jobs"][0]["job"]["attempts"], 1);
    let token = v["jobs"][0]["token"].as_u64().unwrap();
    assert_eq!(
        s.post("/v1/topics/orders/jobs/o-1/ack", json!({"token": token}))
            .await
            .0,
        204
    );
    assert_eq!(s.get("/v1/topics/orders/jobs/o-1").await.0, 404);

    // Batch ack: one good, one stale.
    let (_, v) = s
        .post("/v1/reserve", json!({"topics": ["mail"], "max": 2}))
        .await;
    let leases: Vec<Value> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| json!({"topic": "mail", "id": d["job"]["id"], "token": d["token"]}))
        .collect();
    assert_eq!(leases.len(), 2);
    let (st, v) = s
        .post(
            "/v1/ack",
            json!({"leases": [leases[0], {"topic": "mail", "id": "m2", "token": 999_999}]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["results"][0]["ok"], true);
    assert_eq!(v["results"][1]["error"]["code"], "lease_lost");

    // Nack to dead, kick all.
    let (_, v) = s
        .post(
            "/v1/topics/kk/jobs",
            json!({"body": "x", "max_attempts": 1}),
        )
        .await;
    let id = v["id"].as_str().unwrap().to_string();
    let (_, v) = s.post("/v1/reserve", json!({"topics": ["kk"]})).await;
    let token = v["jobs"][0]["token"].as_u64().unwrap();
    let (_, v) = s
        .post(
            &format!("/v1/topics/kk/jobs/{id}/nack"),
            json!({"token": token}),
        )
        .await;
    assert_eq!(v["outcome"], "dead");
    let (st, v) = s.post("/v1/topics/kk/kick", json!({})).await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(1)));

    // Stats and topics.
    let (st, v) = s.get("/v1/topics/kk/stats").await;
    assert_eq!((st, v["ready"].as_u64()), (200, Some(1)), "{v}");
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!(st, 200);
    let names: Vec<&str> = v["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["topic"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["kk", "mail", "orders"]);

    // Delete and purge.
    assert_eq!(s.delete("/v1/topics/orders/jobs/bin").await.0, 204);
    assert_eq!(s.delete("/v1/topics/orders/jobs/bin").await.0, 404);
    let (st, v) = s.delete("/v1/topics/orders").await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(1)));

    // The OpenAPI document is served and names every route.
    let (st, doc) = s.get("/v1/openapi.json").await;
    assert_eq!(st, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for p in [
        "/v1/reserve",
        "/v1/ack",
        "/v1/topics/{topic}/jobs/{id}/nack",
        "/v1/topics/{topic}/batch",
    ] {
        assert!(
            doc["paths"].get(p).is_some(),
            "{p} missing from the document"
        );
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn every_error_code(setup: Setup) {
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            max_request_bytes: 64 * 1024,
            ..ServerConfig::default()
        },
    )
    .await;
    let cases: Vec<(&str, &str, Option<Value>, u16, &str)> = vec![
        (
            "POST",
            "/v1/topics/bad%20topic/jobs",
            Some(json!({"body": "x"})),
            400,
            "invalid_topic",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"id": "two words", "body": "x"})),
            400,
            "invalid_id",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x", "delay_ms": 315_576_000_001_u64})),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x", "ready_at": "tomorrow"})),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x", "delay_ms": 1, "ready_at": "2030-01-01T00:00:00Z"})),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x", "ttr_ms": 10})),
            400,
            "invalid_ttr",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x", "max_attempts": 0})),
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "***", "encoding": "base64"})),
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x", "colour": "red"})),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"nobody": 1})),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x".repeat(2049)})),
            413,
            "body_too_large",
        ),
        (
            "POST",
            "/v1/topics/t/jobs",
            Some(json!({"body": "x".repeat(70_000)})),
            413,
            "body_too_large",
        ),
        (
            "POST",
            "/v1/reserve",
            Some(json!({"topics": ["t"], "max": 0})),
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/reserve",
            Some(json!({"topics": []})),
            400,
            "invalid_argument",
        ),
        ("GET", "/v1/topics/t/jobs/missing", None, 404, "not_found"),
        (
            "DELETE",
            "/v1/topics/t/jobs/missing",
            None,
            404,
            "not_found",
        ),
        (
            "POST",
            "/v1/topics/t/jobs/missing/ack",
            Some(json!({"token": 1})),
            404,
            "not_found",
        ),
        (
            "POST",
            "/v1/topics/t/jobs/missing/kick",
            Some(json!({})),
            404,
            "not_found",
        ),
        (
            "GET",
            "/v1/topics/t/jobs?state=zombie",
            None,
            400,
            "invalid_argument",
        ),
        (
            "GET",
            "/v1/topics/t/jobs?state=ready&cursor=nonsense",
            None,
            400,
            "invalid_argument",
        ),
        ("GET", "/v1/nowhere", None, 404, "not_found"),
        (
            "PUT",
            "/v1/reserve",
            Some(json!({})),
            405,
            "method_not_allowed",
        ),
    ];
    for (method, path, body, status, expected) in cases {
        let (st, v) = s.call(method, path, body).await;
        assert_eq!((st, code(&v)), (status, expected), "{method} {path}: {v}");
        assert!(
            !v["error"]["message"].as_str().unwrap_or("").is_empty(),
            "{method} {path}: no message"
        );
    }
    // Wrong state: reschedule a reserved job; kick a ready one.
    s.post("/v1/topics/w/jobs", json!({"id": "a", "body": "x"}))
        .await;
    s.post("/v1/reserve", json!({"topics": ["w"]})).await;
    let (st, v) = s
        .post("/v1/topics/w/jobs/a/reschedule", json!({"delay_ms": 5}))
        .await;
    assert_eq!((st, code(&v)), (409, "wrong_state"));
    s.post("/v1/topics/w/jobs", json!({"id": "b", "body": "x"}))
        .await;
    let (st, v) = s.post("/v1/topics/w/jobs/b/kick", json!({})).await;
    assert_eq!((st, code(&v)), (409, "wrong_state"));
}

async fn auth_on_and_off(setup: Setup) {
    let token = "a-long-enough-secret-token".to_string();
    let s = TestServer::start(
        setup.engine.clone(),
        ServerConfig {
            tokens: vec![token.clone()],
            ..ServerConfig::default()
        },
    )
    .await;
    let anonymous = reqwest::Client::new();
    for path in ["/v1/topics", "/metrics", "/v1/series"] {
        let r = anonymous.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let v: Value = r.json().await.unwrap();
        assert_eq!(code(&v), "unauthorized");
    }
    let r = anonymous
        .get(s.url("/v1/topics"))
        .bearer_auth("wrong-token-of-some-length")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    for path in ["/healthz", "/readyz", "/v1/openapi.json"] {
        assert_eq!(
            anonymous
                .get(s.url(path))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            200,
            "{path} stays open"
        );
    }
    assert_eq!(s.get("/v1/topics").await.0, 200, "the token is accepted");
    let open = TestServer::start(setup.engine, ServerConfig::default()).await;
    assert_eq!(
        anonymous
            .get(open.url("/v1/topics"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}

async fn long_poll_returns_when_a_job_is_due(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let client = s.client.clone();
    let url = s.url("/v1/reserve");
    let start = Instant::now();
    let poll = tokio::spawn(async move {
        let r = client
            .post(url)
            .json(&json!({"topics": ["lp"], "wait_ms": 20_000}))
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap(),
            start.elapsed(),
        )
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.post(
        "/v1/topics/lp/jobs",
        json!({"body": "due soon", "delay_ms": 300}),
    )
    .await;
    let (st, v, took) = poll.await.unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["jobs"][0]["job"]["body"], "due soon");
    assert!(
        took < Duration::from_secs(3),
        "the long-poll answered after {took:?}"
    );
    assert!(v["jobs"][0]["lateness_ms"].as_f64().unwrap() < 100.0, "{v}");
    // With nothing due, it answers empty when the wait ends.
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["lp"], "wait_ms": 200}))
        .await;
    assert_eq!((st, v["jobs"].as_array().map(Vec::len)), (200, Some(0)));
}

async fn shutdown_ends_open_long_polls(setup: Setup) {
    let mut s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let client = s.client.clone();
    let url = s.url("/v1/reserve");
    let poll = tokio::spawn(async move {
        let start = Instant::now();
        let r = client
            .post(url)
            .json(&json!({"topics": ["sd"], "wait_ms": 25_000}))
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap(),
            start.elapsed(),
        )
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.begin_shutdown();
    let (st, v, took) = poll.await.unwrap();
    assert_eq!(
        (st, v["jobs"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the long-poll took {took:?} to end"
    );
    s.shutdown().await;
    assert!(
        reqwest::get(s.url("/healthz")).await.is_err(),
        "the server still accepts connections"
    );
}

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

/// A purged topic leaves `GET /v1/topics` and its series leave `/metrics`; the next push
/// brings both back.
// See: issue 12 (a purged topic stayed listed, and its series stayed, forever).
async fn purged_topic_leaves_topics_and_metrics_issue_12(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    for topic in ["gone", "kept"] {
        let (st, v) = s
            .post(&format!("/v1/topics/{topic}/jobs"), json!({"body": "x"}))
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let names = |v: &Value| -> Vec<String> {
        v["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["topic"].as_str().unwrap().to_string())
            .collect()
    };
    let series = "delayq_jobs_pushed_total{topic=\"gone\"}";
    assert_eq!(names(&s.get("/v1/topics").await.1), ["gone", "kept"]);
    assert!(s.text("/metrics").await.1.contains(series));

    let (st, v) = s.delete("/v1/topics/gone").await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(names(&s.get("/v1/topics").await.1), ["kept"]);
    let (st, text) = s.text("/metrics").await;
    assert_eq!(st, 200);
    assert!(!text.contains("topic=\"gone\""), "{text}");
    assert!(
        text.contains("delayq_jobs_pushed_total{topic=\"kept\"} 1"),
        "{text}"
    );

    s.post("/v1/topics/gone/jobs", json!({"body": "again"}))
        .await;
    assert_eq!(names(&s.get("/v1/topics").await.1), ["gone", "kept"]);
    assert!(s.text("/metrics").await.1.contains(series));
}

/// A push with `on_conflict` (issue 14): `replace` rewrites a waiting job and says so,
/// `debounce` moves it back within `max_wait_ms`; bad fields are refused at their pointer.
// See: issue 14
async fn push_on_conflict_over_http_issue_14(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let (st, v) = s
        .post(
            "/v1/topics/c/jobs",
            json!({"id": "a", "body": "v1", "delay_ms": 3_600_000}),
        )
        .await;
    assert_eq!(
        (st, &v["created"], &v["replaced"]),
        (201, &json!(true), &json!(false))
    );
    let (st, v) = s
        .post(
            "/v1/topics/c/jobs",
            json!({"id": "a", "body": "v2", "on_conflict": "replace"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["created"], &v["replaced"], &v["state"]),
        (&json!(false), &json!(true), &json!("ready"))
    );
    assert_eq!(s.get("/v1/topics/c/jobs/a").await.1["body"], "v2");
    let (_, v) = s
        .post("/v1/topics/c/jobs", json!({"id": "a", "body": "v3"}))
        .await;
    assert_eq!(v["replaced"], false, "keep is the default");
    let (st, v) = s
        .post(
            "/v1/topics/c/jobs",
            json!({"id": "b", "body": "x", "delay_ms": 500, "on_conflict": "debounce", "max_wait_ms": 2000}),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    for (body, field) in [
        (json!({"body": "x", "on_conflict": "merge"}), "/on_conflict"),
        (json!({"body": "x", "max_wait_ms": 5}), "/max_wait_ms"),
        (
            json!({"body": "x", "on_conflict": "debounce", "max_wait_ms": 400_000_000_000_u64}),
            "/max_wait_ms",
        ),
    ] {
        let (st, e) = s.post("/v1/topics/c/jobs", body.clone()).await;
        assert_eq!(st, 400, "{body}: {e}");
        assert_eq!(e["error"]["field"], field, "{body}: {e}");
    }
}

/// A push with an expiry (issue 14): the job shows it, a paused topic lets it expire, it
/// goes dead with the reason `expired` (or is dropped), the topic's stats and the metrics
/// count it; bad expiries are refused at their pointer and change nothing.
// See: issue 14
async fn expiry_over_http_issue_14(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let (st, _) = s.post("/v1/topics/ex/pause", json!({})).await;
    assert_eq!(st, 200);
    let (st, v) = s
        .post(
            "/v1/topics/ex/jobs",
            json!({"id": "a", "body": "x", "max_lateness_ms": 200}),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let pushed_at = v["ready_at_ms"].as_u64().unwrap();
    let (_, job) = s.get("/v1/topics/ex/jobs/a").await;
    assert_eq!(job["expires_at_ms"], json!(pushed_at + 200), "{job}");
    assert_eq!(job["on_expire"], "dead");
    assert!(
        job["expires_at"].as_str().unwrap().ends_with("+00:00"),
        "{job}"
    );
    let (st, v) = s
        .post(
            "/v1/topics/ex/jobs",
            json!({"id": "b", "body": "x", "max_lateness_ms": 200, "on_expire": "drop"}),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let (_, plain) = s
        .post("/v1/topics/ex/jobs", json!({"id": "c", "body": "x"}))
        .await;
    assert_eq!(plain["created"], true);
    assert!(
        s.get("/v1/topics/ex/jobs/c")
            .await
            .1
            .get("expires_at")
            .is_none()
    );

    tokio::time::sleep(Duration::from_millis(400)).await;
    let (st, _) = s.post("/v1/topics/ex/resume", json!({})).await;
    assert_eq!(st, 204);
    let (_, v) = s
        .post("/v1/reserve", json!({"topics": ["ex"], "max": 10}))
        .await;
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["job"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c"], "{v}");
    let (_, a) = s.get("/v1/topics/ex/jobs/a").await;
    assert_eq!(
        (&a["state"], &a["last_error"]),
        (&json!("dead"), &json!("expired"))
    );
    assert_eq!(s.get("/v1/topics/ex/jobs/b").await.0, 404);
    let (_, stats) = s.get("/v1/topics/ex/stats").await;
    assert_eq!(stats["expired_jobs"], 2, "{stats}");
    let (_, text) = s.text("/metrics").await;
    assert!(
        text.contains("delayq_jobs_expired_total{topic=\"ex\"} 2"),
        "{text}"
    );

    let soon = s.get("/v1/topics/ex/jobs/c").await.1["created_at"].clone();
    for (body, field) in [
        (
            json!({"body": "x", "expires_at": soon, "max_lateness_ms": 5}),
            "/max_lateness_ms",
        ),
        (
            json!({"body": "x", "max_lateness_ms": 0}),
            "/max_lateness_ms",
        ),
        (
            json!({"body": "x", "max_lateness_ms": -1}),
            "/max_lateness_ms",
        ),
        (json!({"body": "x", "on_expire": "drop"}), "/on_expire"),
        (
            json!({"body": "x", "max_lateness_ms": 5, "on_expire": "later"}),
            "/on_expire",
        ),
        (
            json!({"body": "x", "expires_at": "tomorrow"}),
            "/expires_at",
        ),
        (
            json!({"id": "d", "body": "x", "expires_at": soon}),
            "/expires_at",
        ),
        (
            json!({"id": "d", "body": "x", "delay_ms": 60_000, "expires_at": "2099-01-01T00:00:00Z"}),
            "/expires_at",
        ),
    ] {
        let (st, e) = s.post("/v1/topics/ex/jobs", body.clone()).await;
        if body.get("delay_ms").is_some() {
            // An expiry after the due time is fine.
            assert_eq!(st, 201, "{body}: {e}");
            continue;
        }
        assert_eq!(st, 400, "{body}: {e}");
        assert_eq!(e["error"]["field"], field, "{body}: {e}");
    }
    assert_eq!(
        s.get("/v1/topics/ex/jobs/d").await.1["expires_at"],
        "2099-01-01T00:00:00.000+00:00"
    );
    // A batch naming the item whose expiry comes before its due time.
    let (st, e) = s
        .post(
            "/v1/topics/ex/batch",
            json!({"jobs": [
                {"id": "e", "body": "x"},
                {"id": "f", "body": "x", "ready_at": "2030-01-01T00:00:00Z", "expires_at": "2029-06-01T00:00:00Z"},
            ]}),
        )
        .await;
    assert_eq!(st, 400, "{e}");
    assert_eq!(e["error"]["field"], "/jobs/1/expires_at", "{e}");
    assert_eq!(
        s.get("/v1/topics/ex/jobs/e").await.0,
        404,
        "nothing written"
    );
}

/// `POST /v1/topics/{topic}/pause` and `.../resume` (issue 14): a paused topic hands out
/// nothing and says so in its stats and the metrics; a timed pause answers its end; bad
/// fields are refused at their pointer; resume brings the jobs back.
// See: issue 14
async fn pause_over_http_issue_14(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    assert_eq!(
        s.post("/v1/topics/p/jobs", json!({"id": "a", "body": "x"}))
            .await
            .0,
        201
    );
    let (st, v) = s.post("/v1/topics/p/pause", json!({})).await;
    assert_eq!(
        (st, &v),
        (
            200,
            &json!({"paused": true, "paused_until": null, "known": true})
        )
    );
    let (_, stats) = s.get("/v1/topics/p/stats").await;
    assert_eq!(
        (&stats["paused"], &stats["ready"]),
        (&json!(true), &json!(1)),
        "{stats}"
    );
    let (_, got) = s.post("/v1/reserve", json!({"topics": ["p"]})).await;
    assert_eq!(got["jobs"], json!([]), "a paused topic handed out a job");
    let (_, metrics) = s.text("/metrics").await;
    assert!(
        metrics.contains("delayq_topic_paused{topic=\"p\"} 1"),
        "{metrics}"
    );

    let (st, v) = s
        .post("/v1/topics/p/pause", json!({"for_ms": 3_600_000}))
        .await;
    assert_eq!((st, &v["paused"]), (200, &json!(true)), "{v}");
    assert!(v["paused_until"].as_str().is_some(), "{v}");
    for (body, field) in [
        (
            json!({"for_ms": 1, "until": "2030-01-01T00:00:00Z"}),
            "/for_ms",
        ),
        (json!({"until": "soon"}), "/until"),
        (json!({"for_ms": 400_000_000_000_u64}), "/for_ms"),
        (json!({"for": 5}), "/for"),
    ] {
        let (st, e) = s.post("/v1/topics/p/pause", body.clone()).await;
        assert_eq!(st, 400, "{body}: {e}");
        assert_eq!(e["error"]["field"], field, "{body}: {e}");
    }

    let (st, _) = s.post("/v1/topics/p/resume", json!(null)).await;
    assert_eq!(st, 204);
    let (_, stats) = s.get("/v1/topics/p/stats").await;
    assert_eq!(
        (&stats["paused"], &stats["paused_until"]),
        (&json!(false), &json!(null))
    );
    let (_, got) = s.post("/v1/reserve", json!({"topics": ["p"]})).await;
    assert_eq!(got["jobs"].as_array().map(Vec::len), Some(1), "{got}");
}

/// The names in `GET /v1/topics`, with whether each is paused.
async fn listed_topics(s: &TestServer) -> Vec<(String, bool)> {
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!(st, 200, "{v}");
    v["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["topic"].as_str().unwrap().to_string(),
                t["paused"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// A paused topic with no jobs is in `GET /v1/topics` and `/metrics` until its pause ends; a
/// pause of a topic the server does not know holds and says `known: false`; a resume or a
/// purge of one (no jobs, no settings, no pause: a typo) answers 404 `not_found` naming it,
/// and changes nothing.
// See: issue 36
async fn unknown_topics_are_said_and_paused_empty_ones_listed_issue_36(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let (st, v) = s
        .post("/v1/topics/busy/jobs", json!({"id": "a", "body": "x"}))
        .await;
    assert_eq!(st, 201, "{v}");

    // Paused ahead of its first push: held, said, listed, in the metrics.
    let (st, v) = s.post("/v1/topics/ahead/pause", json!({})).await;
    assert_eq!(
        (st, &v),
        (
            200,
            &json!({"paused": true, "paused_until": null, "known": false})
        )
    );
    assert_eq!(
        listed_topics(&s).await,
        [("ahead".to_string(), true), ("busy".to_string(), false)]
    );
    let (_, metrics) = s.text("/metrics").await;
    for series in [
        "delayq_topic_paused{topic=\"ahead\"} 1",
        "delayq_jobs{topic=\"ahead\",state=\"ready\"} 0",
    ] {
        assert!(metrics.contains(series), "{series} missing: {metrics}");
    }
    let (st, v) = s
        .post("/v1/topics/ahead/pause", json!({"for_ms": 3_600_000}))
        .await;
    assert_eq!((st, &v["known"]), (200, &json!(true)), "{v}");

    // Resumed, it leaves the list and the metrics; a second resume is a typo's answer.
    assert_eq!(s.post("/v1/topics/ahead/resume", json!({})).await.0, 204);
    assert_eq!(listed_topics(&s).await, [("busy".to_string(), false)]);
    assert!(!s.text("/metrics").await.1.contains("topic=\"ahead\""));
    for (method, path, verb) in [
        ("POST", "/v1/topics/ahead/resume", "resume"),
        ("POST", "/v1/topics/bsuy/resume", "resume"),
        ("DELETE", "/v1/topics/bsuy", "purge"),
    ] {
        let (st, v) = s.call(method, path, None).await;
        assert_eq!((st, code(&v)), (404, "not_found"), "{path}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        for needle in [
            "topic ",
            "no jobs, no settings and no pause",
            verb,
            "/v1/topics",
        ] {
            assert!(message.contains(needle), "{needle:?} missing: {message}");
        }
    }
    assert_eq!(listed_topics(&s).await, [("busy".to_string(), false)]);
    assert_eq!(
        s.get("/v1/topics/busy/jobs/a").await.0,
        200,
        "nothing purged"
    );

    // A topic with settings only is known: resumed and purged as any other.
    let (st, v) = s
        .call("PUT", "/v1/topics/set", Some(json!({"max_attempts": 3})))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(s.post("/v1/topics/set/resume", json!({})).await.0, 204);
    let (st, v) = s.delete("/v1/topics/set").await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(0)), "{v}");

    // Purged while paused, a topic stays listed, empty and paused; resumed, it goes, and a
    // second purge finds nothing to purge.
    assert_eq!(s.post("/v1/topics/busy/pause", json!({})).await.0, 200);
    let (st, v) = s.delete("/v1/topics/busy").await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(listed_topics(&s).await, [("busy".to_string(), true)]);
    assert_eq!(s.post("/v1/topics/busy/resume", json!({})).await.0, 204);
    assert!(listed_topics(&s).await.is_empty());
    let (st, v) = s.delete("/v1/topics/busy").await;
    assert_eq!((st, code(&v)), (404, "not_found"), "{v}");

    // The document says it.
    let (_, doc) = s.get("/v1/openapi.json").await;
    for (path, method) in [
        ("/v1/topics/{topic}/resume", "post"),
        ("/v1/topics/{topic}", "delete"),
    ] {
        assert!(
            doc["paths"][path][method]["responses"].get("404").is_some(),
            "{method} {path} does not document its 404"
        );
    }
    let pause = &doc["components"]["schemas"]["PauseResponse"];
    assert!(
        pause["required"]
            .as_array()
            .unwrap()
            .contains(&json!("known")),
        "{pause}"
    );
}

/// `PUT`, `GET`, `DELETE /v1/schedules/{name}` and `GET /v1/schedules` (issue 14): a put
/// stores the schedule and pushes its next fire at once (a job with the derived id, due at
/// the fire time), answers the next fire time; a replacement bumps the revision and deletes
/// the old definition's pending fire; bad fields are refused naming the field and change
/// nothing; a delete removes the pending fire; unknown names answer 404.
// See: issue 14
async fn schedules_over_http_issue_14(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    assert_eq!(
        s.get("/v1/schedules").await,
        (200, json!({"schedules": []}))
    );
    let (st, v) = s.get("/v1/schedules/nightly").await;
    assert_eq!((st, code(&v)), (404, "not_found"), "{v}");

    let def = json!({
        "cron": "0 3 * * *", "time_zone": "Europe/Berlin", "topic": "reports",
        "body": "build the report", "priority": 2, "ttr_ms": 60000,
        "misfire": "each", "misfire_limit": 5
    });
    let (st, v) = s
        .call("PUT", "/v1/schedules/nightly", Some(def.clone()))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (
            &v["name"],
            &v["cron"],
            &v["time_zone"],
            &v["topic"],
            &v["revision"]
        ),
        (
            &json!("nightly"),
            &json!("0 3 * * *"),
            &json!("Europe/Berlin"),
            &json!("reports"),
            &json!(1)
        )
    );
    assert_eq!(
        (&v["misfire"], &v["misfire_limit"]),
        (&json!("each"), &json!(5))
    );
    let next = v["next_fire_ms"].as_u64().expect("a next fire");
    assert_eq!(
        v["pushed_through"], v["next_fire"],
        "the next fire is pushed at once"
    );
    let id = format!("schedule:nightly:{next}");
    let (st, job) = s.get(&format!("/v1/topics/reports/jobs/{id}")).await;
    assert_eq!(st, 200, "{job}");
    assert_eq!(
        (
            &job["state"],
            &job["ready_at_ms"],
            &job["body"],
            &job["priority"],
            &job["ttr_ms"]
        ),
        (
            &json!("delayed"),
            &json!(next),
            &json!("build the report"),
            &json!(2),
            &json!(60000)
        )
    );
    assert_eq!(s.get("/v1/schedules/nightly").await, (200, v.clone()));
    let (_, all) = s.get("/v1/schedules").await;
    assert_eq!(all["schedules"], json!([v]));

    // Bad fields: refused at the field, nothing changed.
    for (patch, field) in [
        (json!({"cron": "61 * * * *"}), "/cron"),
        (json!({"cron": "0 0 30 2 *"}), "/cron"),
        (json!({"time_zone": "Mars/Olympus"}), "/time_zone"),
        (json!({"topic": "no spaces"}), "/topic"),
        (json!({"ttr_ms": 10}), "/ttr_ms"),
        (json!({"jitter_ms": 3_600_001}), "/jitter_ms"),
        (json!({"misfire_limit": 0}), "/misfire_limit"),
        (json!({"start": "tomorrow"}), "/start"),
        (
            json!({"start": "2030-01-02T00:00:00Z", "end": "2030-01-01T00:00:00Z"}),
            "/end",
        ),
        (json!({"cronn": "* * * * *"}), "/cronn"),
    ] {
        let mut body = def.clone();
        for (k, val) in patch.as_object().unwrap() {
            body[k] = val.clone();
        }
        let (st, e) = s.call("PUT", "/v1/schedules/nightly", Some(body)).await;
        assert_eq!(st, 400, "{patch}: {e}");
        assert_eq!(e["error"]["field"], field, "{patch}: {e}");
    }
    let (st, e) = s
        .call("PUT", "/v1/schedules/bad%20name", Some(def.clone()))
        .await;
    assert_eq!((st, code(&e)), (400, "invalid_argument"), "{e}");
    assert_eq!(s.get("/v1/schedules/nightly").await, (200, v.clone()));

    // Replace: revision 2, the old pending fire gone, the new one pushed.
    let mut hourly = def.clone();
    hourly["cron"] = json!("30 * * * *");
    let (st, v2) = s.call("PUT", "/v1/schedules/nightly", Some(hourly)).await;
    assert_eq!((st, &v2["revision"]), (200, &json!(2)), "{v2}");
    assert_eq!(s.get(&format!("/v1/topics/reports/jobs/{id}")).await.0, 404);
    let id2 = format!("schedule:nightly:{}", v2["next_fire_ms"]);
    assert_eq!(
        s.get(&format!("/v1/topics/reports/jobs/{id2}")).await.0,
        200
    );

    // Delete: answers the schedule, removes the pending fire; then 404.
    let (st, gone) = s.call("DELETE", "/v1/schedules/nightly", None).await;
    assert_eq!((st, &gone["revision"]), (200, &json!(2)), "{gone}");
    assert_eq!(
        s.get(&format!("/v1/topics/reports/jobs/{id2}")).await.0,
        404
    );
    let (st, v) = s.call("DELETE", "/v1/schedules/nightly", None).await;
    assert_eq!((st, code(&v)), (404, "not_found"), "{v}");
    assert_eq!(
        s.get("/v1/schedules").await,
        (200, json!({"schedules": []}))
    );
}

/// `GET` and `PUT /v1/topics/{topic}`: a topic's settings fill what a push leaves unset,
/// its body limit answers 413 at `/body`, bad settings are refused naming the field, and
/// setting them does not list the topic.
async fn topic_settings_over_http(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let unset = json!({"ttr_ms": null, "max_attempts": null, "backoff": null, "max_body": null, "retention": null, "partitions": null});
    assert_eq!(s.get("/v1/topics/cfg").await, (200, unset.clone()));
    let settings = json!({"ttr_ms": 60000, "max_attempts": 5, "backoff": {"kind": "fixed", "base_ms": 2000}, "max_body": 8});
    let (st, v) = s.call("PUT", "/v1/topics/cfg", Some(settings)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["ttr_ms"].as_u64(), v["max_body"].as_u64()),
        (Some(60000), Some(8))
    );
    assert_eq!(v["backoff"]["kind"], "fixed");
    assert_eq!(s.get("/v1/topics/cfg").await, (200, v));

    let (st, _) = s
        .post("/v1/topics/cfg/jobs", json!({"id": "a", "body": "x"}))
        .await;
    assert_eq!(st, 201);
    let (_, a) = s.get("/v1/topics/cfg/jobs/a").await;
    assert_eq!(
        (
            a["ttr_ms"].as_u64(),
            a["max_attempts"].as_u64(),
            a["backoff"]["base_ms"].as_u64()
        ),
        (Some(60000), Some(5), Some(2000)),
        "{a}"
    );
    let (st, _) = s
        .post(
            "/v1/topics/cfg/jobs",
            json!({"id": "b", "body": "x", "ttr_ms": 1000}),
        )
        .await;
    assert_eq!(st, 201);
    assert_eq!(s.get("/v1/topics/cfg/jobs/b").await.1["ttr_ms"], 1000);
    let (st, v) = s
        .post("/v1/topics/cfg/jobs", json!({"body": "9 bytes!!"}))
        .await;
    assert_eq!((st, code(&v)), (413, "body_too_large"), "{v}");
    assert_eq!(v["error"]["field"], "/body");

    for (body, status, error, field) in [
        (json!({"ttr_ms": 10}), 400, "invalid_ttr", "/ttr_ms"),
        (
            json!({"max_attempts": 0}),
            400,
            "invalid_argument",
            "/max_attempts",
        ),
        (json!({"max_body": 0}), 400, "invalid_argument", "/max_body"),
        (
            json!({"backoff": {"kind": "exponential", "base_ms": 5000, "max_ms": 1000}}),
            400,
            "invalid_argument",
            "/backoff",
        ),
        (
            json!({"max_body": -1}),
            400,
            "invalid_argument",
            "/max_body",
        ),
        (json!({"ttl_ms": 5}), 400, "invalid_request", "/ttl_ms"),
        (
            json!({"partitions": 0}),
            400,
            "invalid_argument",
            "/partitions",
        ),
        (
            json!({"partitions": 1025}),
            400,
            "invalid_argument",
            "/partitions",
        ),
        (
            json!({"partitions": 70000}),
            400,
            "invalid_argument",
            "/partitions",
        ),
    ] {
        let (st, v) = s.call("PUT", "/v1/topics/cfg", Some(body.clone())).await;
        assert_eq!((st, code(&v)), (status, error), "{body}: {v}");
        assert_eq!(v["error"]["field"], field, "{body}: {v}");
    }
    let (_, v) = s
        .call("PUT", "/v1/topics/cfg", Some(json!({"partitions": 70000})))
        .await;
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("70000 is outside 1 to 1024"), "{message}");
    assert_eq!(s.get("/v1/topics/cfg").await.1["ttr_ms"], 60000);
    // cfg holds jobs: its partition count cannot change, and nothing else changes either.
    let (st, v) = s
        .call(
            "PUT",
            "/v1/topics/cfg",
            Some(json!({"ttr_ms": 5000, "partitions": 8})),
        )
        .await;
    assert_eq!((st, code(&v)), (409, "partitions_in_use"), "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("from 1 to 8"), "{message}");
    assert_eq!(s.get("/v1/topics/cfg").await.1["ttr_ms"], 60000);
    let (st, v) = s
        .call("PUT", "/v1/topics/parts", Some(json!({"partitions": 8})))
        .await;
    assert_eq!((st, v["partitions"].as_u64()), (200, Some(8)), "{v}");

    let (st, _) = s.call("PUT", "/v1/topics/quiet", Some(json!({}))).await;
    assert_eq!(st, 200);
    let (_, topics) = s.get("/v1/topics").await;
    assert_eq!(topics["topics"].as_array().unwrap().len(), 1, "{topics}");
    assert_eq!(topics["topics"][0]["topic"], "cfg");
    assert_eq!(
        s.call("PUT", "/v1/topics/cfg", Some(json!({}))).await,
        (200, unset)
    );
    let (_, doc) = s.get("/v1/openapi.json").await;
    let path = &doc["paths"]["/v1/topics/{topic}"];
    for method in ["get", "put", "delete"] {
        assert!(path[method].is_object(), "{method} missing: {path}");
    }
}

/// A topic's retention over HTTP: an acked job reads as `done` with the time of its ack,
/// `state=done` lists it, the stats and `/metrics` count it; a bad retention names its field.
async fn done_jobs_over_http(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let retention = json!({"retention": {"max_jobs": 10, "max_age_ms": 3_600_000}});
    let (st, v) = s.call("PUT", "/v1/topics/kept", Some(retention)).await;
    assert_eq!(
        (st, v["retention"]["max_jobs"].as_u64()),
        (200, Some(10)),
        "{v}"
    );
    s.post("/v1/topics/kept/jobs", json!({"id": "a", "body": "x"}))
        .await;
    let (_, v) = s.post("/v1/reserve", json!({"topics": ["kept"]})).await;
    let receipt = v["jobs"][0]["receipt"].as_str().unwrap().to_string();
    let (st, v) = s
        .post("/v1/topics/kept/jobs/a/ack", json!({"receipt": receipt}))
        .await;
    assert_eq!(st, 204, "{v}");
    let (st, j) = s.get("/v1/topics/kept/jobs/a").await;
    assert_eq!(
        (st, j["state"].as_str(), j["attempts"].as_u64()),
        (200, Some("done"), Some(1)),
        "{j}"
    );
    assert!(j["deadline"].as_str().unwrap().ends_with("+00:00"), "{j}");
    let (st, page) = s.get("/v1/topics/kept/jobs?state=done").await;
    assert_eq!(st, 200, "{page}");
    assert_eq!(page["jobs"][0]["id"], "a");
    assert_eq!(s.get("/v1/topics/kept/stats").await.1["done"], 1);
    let (_, text) = s.text("/metrics").await;
    assert!(
        text.contains("delayq_jobs{topic=\"kept\",state=\"done\"} 1"),
        "{text}"
    );
    let (st, v) = s
        .post("/v1/topics/kept/jobs/a/ack", json!({"receipt": receipt}))
        .await;
    assert_eq!((st, code(&v)), (409, "lease_lost"), "{v}");
    for (bad, field) in [
        (
            json!({"retention": {"max_jobs": 0, "max_age_ms": 60000}}),
            "/retention",
        ),
        (
            json!({"retention": {"max_jobs": 5}}),
            "/retention/max_age_ms",
        ),
        (
            json!({"retention": {"max_jobs": 5, "max_age_ms": -1}}),
            "/retention/max_age_ms",
        ),
    ] {
        let (st, v) = s.call("PUT", "/v1/topics/kept", Some(bad.clone())).await;
        assert_eq!((st, code(&v)), (400, "invalid_argument"), "{bad}: {v}");
        assert_eq!(v["error"]["field"], field, "{bad}: {v}");
    }
}

/// A consumer's cycle in one request: `settle` records what it finished (each answered in
/// order, a lost lease among them), then the next jobs come; bad settlements are refused
/// whole and change nothing; `max` 0 settles only.
async fn reserve_settles_first(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    for i in 0..4 {
        let (st, v) = s
            .post(
                "/v1/topics/cy/jobs",
                json!({"id": format!("j{i}"), "body": "x"}),
            )
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["cy"], "max": 2}))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["settled"], json!([]));
    let token = |v: &Value, i: usize| v["jobs"][i]["token"].as_u64().unwrap();
    let (t0, t1) = (token(&v, 0), token(&v, 1));

    // Bad settlements: refused whole, before anything is settled.
    let bad = [
        (
            json!({"topic": "cy", "id": "j0", "token": t0, "delay_ms": 5}),
            "invalid_argument",
        ),
        (
            json!({"topic": "cy", "id": "j0", "token": t0, "outcome": "release", "reason": "x"}),
            "invalid_argument",
        ),
        (
            json!({"topic": "cy", "id": "j0", "token": t0, "outcome": "nack", "delay_ms": 315_576_000_001_u64}),
            "invalid_delay",
        ),
        (
            json!({"topic": "bad topic", "id": "j0", "token": t0}),
            "invalid_topic",
        ),
        (
            json!({"topic": "cy", "id": "j0", "token": t0, "outcome": "later"}),
            "invalid_argument",
        ),
    ];
    for (item, want) in bad {
        let (st, v) = s
            .post("/v1/reserve", json!({"topics": ["cy"], "max": 5, "settle": [{"topic": "cy", "id": "j1", "token": t1}, item]}))
            .await;
        assert_eq!((st, code(&v)), (400, want), "{v}");
    }
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["cy"], "max": 0}))
        .await;
    assert_eq!((st, code(&v)), (400, "invalid_argument"), "{v}");
    let (_, j) = s.get("/v1/topics/cy/jobs/j1").await;
    assert_eq!(j["state"], "reserved", "a refused request settled j1: {j}");

    // Ack one, nack one with no delay, and the acked one again: all answered, then jobs come,
    // the nacked one among them as its second attempt.
    let (st, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["cy"], "max": 10, "settle": [
                {"topic": "cy", "id": "j0", "token": t0},
                {"topic": "cy", "id": "j1", "token": t1, "outcome": "nack", "delay_ms": 0, "reason": "flaky"},
                {"topic": "cy", "id": "j0", "token": t0 + 1000},
            ]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["settled"][0],
        json!({"ok": true, "outcome": null, "ready_at": null, "error": null})
    );
    assert_eq!(v["settled"][1]["ok"], true, "{v}");
    assert_eq!(v["settled"][1]["outcome"], "retry", "{v}");
    assert_eq!(v["settled"][2]["ok"], false, "{v}");
    // j0 was acked by the first item: the job is gone (see: issue 12).
    assert_eq!(v["settled"][2]["error"]["code"], "not_found", "{v}");
    let mut got: Vec<(String, u64)> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["job"]["id"].as_str().unwrap().to_string(),
                d["job"]["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![("j1".into(), 2), ("j2".into(), 1), ("j3".into(), 1)]
    );
    let (st, _) = s.get("/v1/topics/cy/jobs/j0").await;
    assert_eq!(st, 404, "j0 was acked");

    // Settle only: max 0 answers at once with no jobs, even with a long wait.
    let leases: Vec<Value> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| json!({"topic": "cy", "id": d["job"]["id"], "token": d["token"], "outcome": "bury", "reason": "done with it"}))
        .collect();
    let started = Instant::now();
    let (st, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["cy"], "max": 0, "wait_ms": 20_000, "settle": leases}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert!(started.elapsed() < Duration::from_secs(10), "max 0 waited");
    assert_eq!(v["jobs"], json!([]));
    assert!(
        v["settled"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["ok"] == true),
        "{v}"
    );
    let (_, st) = s.get("/v1/topics/cy/stats").await;
    assert_eq!(
        (st["dead"].as_u64(), st["ready"].as_u64()),
        (Some(3), Some(0)),
        "{st}"
    );
    let (_, text) = s.text("/metrics").await;
    for needle in [
        "delayq_jobs_acked_total{topic=\"cy\"} 1",
        "delayq_jobs_buried_total{topic=\"cy\"} 3",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
}

/// A wait over the server's long-poll limit is cut to it, not refused, and the answer says
/// the wait used.
async fn long_wait_is_cut_to_the_limit_issue_12(setup: Setup) {
    // See: issue 12
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            max_wait: Duration::from_millis(300),
            ..ServerConfig::default()
        },
    )
    .await;
    let started = Instant::now();
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["cut"], "wait_ms": 31_000}))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["jobs"].as_array().map(Vec::len), &v["wait_ms"]),
        (Some(0), &json!(300))
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the reserve waited longer than the server's limit"
    );
    for (asked, used) in [(json!(100), 100), (json!(null), 0), (json!(u64::MAX), 300)] {
        let (st, v) = s
            .post("/v1/reserve", json!({"topics": ["cut"], "wait_ms": asked}))
            .await;
        assert_eq!((st, &v["wait_ms"]), (200, &json!(used)), "{v}");
    }
    s.post("/v1/topics/cut/jobs", json!({"body": "x"})).await;
    let (_, v) = s
        .post("/v1/reserve", json!({"topics": ["cut"], "wait_ms": 31_000}))
        .await;
    assert_eq!(
        (v["jobs"][0]["job"]["body"].as_str(), &v["wait_ms"]),
        (Some("x"), &json!(300))
    );
}

/// Each delivery has a receipt, and every lease operation takes it alone: a batch ack's
/// `receipts`, `receipt` in the per-job operations and in a reserve's `settle`. Receipts keep
/// apart the same id in two topics; a stale one is `lease_lost`, a bad one `invalid_receipt`
/// naming the field and item; the token forms still work.
async fn receipts_answer_for_deliveries_issue_12(setup: Setup) {
    // See: issue 12
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    for topic in ["ra", "rb"] {
        for id in ["same", "j1", "j2", "j3", "j4", "j5"] {
            let (st, v) = s
                .post(
                    &format!("/v1/topics/{topic}/jobs"),
                    json!({"id": id, "body": id}),
                )
                .await;
            assert_eq!(st, 201, "{v}");
        }
    }
    let reserve = |topics: Value, max: usize| json!({"topics": topics, "max": max});
    let (_, v) = s
        .post("/v1/reserve", reserve(json!(["ra", "rb"]), 12))
        .await;
    let receipts: std::collections::HashMap<(String, String), String> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let r = d["receipt"]
                .as_str()
                .unwrap_or_else(|| panic!("no receipt in {d}"));
            let key = (
                d["job"]["topic"].as_str().unwrap().to_string(),
                d["job"]["id"].as_str().unwrap().to_string(),
            );
            (key, r.to_string())
        })
        .collect();
    assert_eq!(receipts.len(), 12, "{v}");
    let r = |topic: &str, id: &str| receipts[&(topic.to_string(), id.to_string())].clone();

    // Batch ack by receipts: the same id in two topics, each acked by its own receipt.
    let (st, v) = s
        .post(
            "/v1/ack",
            json!({"receipts": [r("ra", "same"), r("rb", "same")]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["results"][0]["ok"], &v["results"][1]["ok"]),
        (&json!(true), &json!(true)),
        "{v}"
    );
    assert_eq!(s.get("/v1/topics/ra/jobs/same").await.0, 404);
    assert_eq!(s.get("/v1/topics/rb/jobs/same").await.0, 404);

    // Each per-job operation with a receipt alone.
    let post_receipt = |topic: &str, id: &str, op: &str, extra: Value| {
        let mut body = extra;
        body["receipt"] = json!(r(topic, id));
        (format!("/v1/topics/{topic}/jobs/{id}/{op}"), body)
    };
    let (path, body) = post_receipt("ra", "j1", "touch", json!({"ttr_ms": 20_000}));
    let (st, v) = s.post(&path, body).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["deadline_ms"].as_u64().unwrap() > 0, "{v}");
    let (path, body) = post_receipt("ra", "j1", "ack", json!({}));
    assert_eq!(s.post(&path, body).await.0, 204);
    let (path, body) = post_receipt("ra", "j2", "nack", json!({"delay_ms": 60_000}));
    let (st, v) = s.post(&path, body).await;
    assert_eq!((st, v["outcome"].as_str()), (200, Some("retry")), "{v}");
    let (path, body) = post_receipt("ra", "j3", "bury", json!({"reason": "poison"}));
    assert_eq!(s.post(&path, body).await.0, 204);
    let (path, body) = post_receipt("ra", "j4", "release", json!({}));
    assert_eq!(s.post(&path, body).await.0, 204);
    // The released job comes back with a new receipt: the old one is stale.
    let (_, v) = s.post("/v1/reserve", reserve(json!(["ra"]), 1)).await;
    assert_eq!(v["jobs"][0]["job"]["id"], "j4", "{v}");
    let fresh = v["jobs"][0]["receipt"].as_str().unwrap().to_string();
    assert_ne!(fresh, r("ra", "j4"));
    let (path, body) = post_receipt("ra", "j4", "ack", json!({}));
    let (st, v) = s.post(&path, body).await;
    assert_eq!((st, code(&v)), (409, "lease_lost"), "{v}");
    let (_, v) = s
        .post("/v1/ack", json!({"receipts": [r("ra", "j4")]}))
        .await;
    assert_eq!(v["results"][0]["error"]["code"], "lease_lost", "{v}");

    // A reserve's settle takes receipts too, next to the token form.
    let (st, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["rb"], "max": 0, "settle": [
                {"receipt": fresh},
                {"receipt": r("rb", "j1"), "outcome": "nack", "delay_ms": 60_000},
                {"receipt": r("rb", "j2"), "outcome": "bury"},
                {"topic": "rb", "id": "j3", "token": 0, "outcome": "release"},
            ]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let oks: Vec<&Value> = v["settled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["ok"])
        .collect();
    assert_eq!(
        oks,
        [&json!(true), &json!(true), &json!(true), &json!(false)],
        "{v}"
    );
    assert_eq!(
        s.get("/v1/topics/ra/jobs/j4").await.0,
        404,
        "acked by its receipt"
    );
    let (_, st) = s.get("/v1/topics/rb/stats").await;
    assert_eq!(
        (st["delayed"].as_u64(), st["dead"].as_u64()),
        (Some(1), Some(1)),
        "{st}"
    );

    // Bad receipts: invalid_receipt, naming the field and the item; nothing changes.
    let cases = [
        (
            "/v1/ack",
            json!({"receipts": [r("rb", "j4"), "not a receipt"]}),
            "invalid_receipt",
            "/receipts/1",
        ),
        (
            "/v1/ack",
            json!({"receipts": [r("rb", "j4")], "leases": [{"topic": "rb", "id": "j5", "token": 1}]}),
            "invalid_argument",
            "/leases",
        ),
        ("/v1/ack", json!({}), "invalid_argument", "/receipts"),
        (
            "/v1/ack",
            json!({"receipts": [42]}),
            "invalid_receipt",
            "/receipts/0",
        ),
        (
            "/v1/reserve",
            json!({"topics": ["rb"], "settle": [{"receipt": r("rb", "j4")}, {"receipt": "AAAA"}]}),
            "invalid_receipt",
            "/settle/1/receipt",
        ),
        (
            "/v1/reserve",
            json!({"topics": ["rb"], "settle": [{"receipt": r("rb", "j4"), "token": 1}]}),
            "invalid_argument",
            "/settle/0/receipt",
        ),
        (
            "/v1/reserve",
            json!({"topics": ["rb"], "settle": [{"topic": "rb", "id": "j4"}]}),
            "invalid_argument",
            "/settle/0/token",
        ),
        (
            "/v1/topics/rb/jobs/j5/ack",
            json!({"receipt": r("rb", "j4")}),
            "invalid_receipt",
            "/receipt",
        ),
        (
            "/v1/topics/rb/jobs/j4/ack",
            json!({"receipt": r("rb", "j4"), "token": 1}),
            "invalid_argument",
            "/receipt",
        ),
        (
            "/v1/topics/rb/jobs/j4/ack",
            json!({}),
            "invalid_argument",
            "/token",
        ),
    ];
    for (path, body, want, field) in cases {
        let (st, v) = s.post(path, body).await;
        assert_eq!(
            (st, code(&v), &v["error"]["field"]),
            (400, want, &json!(field)),
            "{path}: {v}"
        );
    }
    let (_, j) = s.get("/v1/topics/rb/jobs/j4").await;
    assert_eq!(j["state"], "reserved", "a refused request settled j4: {j}");

    // At most once: no lease, no receipt.
    s.post("/v1/topics/amo/jobs", json!({"body": "x"})).await;
    let (_, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["amo"], "mode": "at_most_once"}),
        )
        .await;
    assert_eq!(v["jobs"][0]["job"]["body"], "x", "{v}");
    assert!(v["jobs"][0].get("receipt").is_none(), "{v}");
}

/// Whether `t` is a time in the one form answers use: UTC, milliseconds, `+00:00` (what
/// Python 3.10's `datetime.fromisoformat` reads).
fn is_answer_time(t: &Value) -> bool {
    let t = t.as_str().unwrap_or("");
    let digits = |r: std::ops::Range<usize>| {
        t.get(r)
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
    };
    t.len() == 29
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
        && digits(11..13)
        && digits(14..16)
        && digits(17..19)
        && digits(20..23)
        && [
            (4, '-'),
            (7, '-'),
            (10, 'T'),
            (13, ':'),
            (16, ':'),
            (19, '.'),
        ]
        .iter()
        .all(|&(i, c)| t[i..].starts_with(c))
        && t.ends_with("+00:00")
}

/// A delivery says each fact once (the attempt is `job.attempts`, the lease deadline
/// `job.deadline`), carries no nulls, and every time in every answer has milliseconds and
/// `+00:00`.
async fn deliveries_say_each_fact_once_issue_12(setup: Setup) {
    // See: issue 12
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let (_, pushed) = s
        .post(
            "/v1/topics/orders/jobs",
            json!({"id": "order-42", "body": "cancel order 42"}),
        )
        .await;
    s.post(
        "/v1/topics/orders/jobs",
        json!({"id": "later", "body": "x", "delay_ms": 60_000}),
    )
    .await;
    let (_, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["orders"], "wait_ms": 1000}),
        )
        .await;
    let d = &v["jobs"][0];
    let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["job", "lateness_ms", "receipt", "token"], "{d}");
    let job = d["job"].as_object().unwrap();
    assert!(job.values().all(|x| !x.is_null()), "a null in {d}");
    assert_eq!(
        (&d["job"]["attempts"], &d["job"]["state"]),
        (&json!(1), &json!("reserved"))
    );
    assert!(d["job"]["deadline_ms"].as_u64().unwrap() > d["job"]["ready_at_ms"].as_u64().unwrap());
    let token = d["token"].as_u64().unwrap();
    let (_, touched) = s
        .post(
            "/v1/topics/orders/jobs/order-42/touch",
            json!({"token": token}),
        )
        .await;
    let (_, nacked) = s
        .post(
            "/v1/topics/orders/jobs/order-42/nack",
            json!({"token": token, "delay_ms": 60_000}),
        )
        .await;
    let (_, got) = s.get("/v1/topics/orders/jobs/order-42").await;
    let (_, stats) = s.get("/v1/topics/orders/stats").await;
    let (_, later) = s
        .post(
            "/v1/topics/orders/jobs/later/reschedule",
            json!({"delay_ms": 30_000}),
        )
        .await;
    for t in [
        &pushed["ready_at"],
        &d["job"]["ready_at"],
        &d["job"]["created_at"],
        &d["job"]["deadline"],
        &touched["deadline"],
        &nacked["ready_at"],
        &got["ready_at"],
        &got["created_at"],
        &stats["next_due"],
        &later["ready_at"],
    ] {
        assert!(is_answer_time(t), "{t} is not in the answers' time form");
    }
    assert!(!is_answer_time(&json!("2026-01-02T15:04:05.12Z")));
}

/// Serde's words that must never reach a client.
const SERDE_WORDS: [&str; 7] = [
    "expected u",
    "expected i",
    "floating point",
    "untagged",
    "invalid type",
    "invalid value",
    "did not match",
];

/// Checks an error answer: status 400, `code`, the field's pointer in `error.field` and in
/// the message, what is accepted (`accepts`) in the message, and none of serde's words.
fn assert_field_error(answer: &(u16, Value), code_: &str, field: &str, accepts: &str) {
    let (st, v) = answer;
    assert_eq!((*st, code(v)), (400, code_), "{v}");
    assert_eq!(v["error"]["field"], field, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(field), "{v}");
    assert!(message.contains(accepts), "{v}");
    for words in SERDE_WORDS {
        assert!(!message.contains(words), "serde's words in {v}");
    }
}

/// Every decode error of a request names the field as a JSON pointer, uses the field's own
/// code, says what is accepted, and leaks nothing of serde.
async fn decode_errors_name_the_field_issue_12(setup: Setup) {
    // See: issue 12
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let push = "/v1/topics/t/jobs";
    let delay = "0 to 315576000000";
    for body in [
        r#"{"body": "x", "delay_ms": -5}"#,
        r#"{"body": "x", "delay_ms": 1e15}"#,
        r#"{"body": "x", "delay_ms": 1000000000000000}"#,
        r#"{"body": "x", "delay_ms": 99999999999999999999}"#,
        r#"{"body": "x", "delay_ms": 1.5}"#,
        r#"{"body": "x", "delay_ms": "30s"}"#,
    ] {
        let answer = s.post_raw(push, body).await;
        let accepts = if body.contains("1000000000000000}") {
            "10 years"
        } else {
            delay
        };
        assert_field_error(&answer, "invalid_delay", "/delay_ms", accepts);
    }
    assert_field_error(
        &s.post_raw(push, r#"{"body": "x", "priority": -1}"#).await,
        "invalid_argument",
        "/priority",
        "0 to 4294967295",
    );
    assert_field_error(
        &s.post_raw(push, r#"{"body": "x", "ttr_ms": "1m"}"#).await,
        "invalid_ttr",
        "/ttr_ms",
        "1000 (1 s) to 86400000 (24 h)",
    );
    assert_field_error(
        &s.post_raw(push, r#"{"body": 42}"#).await,
        "invalid_argument",
        "/body",
        "a string",
    );
    assert_field_error(
        &s.post_raw(push, r#"{"delay_ms": 5}"#).await,
        "invalid_argument",
        "/body",
        "missing",
    );
    assert_field_error(
        &s.post_raw(
            push,
            r#"{"body": "x", "backoff": {"kind": "linear", "base_ms": 5}}"#,
        )
        .await,
        "invalid_argument",
        "/backoff/kind",
        "\"fixed\" or \"exponential\"",
    );
    assert_field_error(
        &s.post_raw(push, r#"{"body": "x", "colour": "red"}"#).await,
        "invalid_request",
        "/colour",
        "the fields here are id, body",
    );
    // A list's query parameters: named, with their own code and what they accept.
    for (query, name, accepts) in [
        (
            "state=zombie",
            "state",
            "delayed, ready, reserved, dead, done",
        ),
        ("", "state", "missing"),
        ("state=ready&limit=many", "limit", "1 to 1000"),
    ] {
        let (st, v) = s.get(&format!("/v1/topics/t/jobs?{query}")).await;
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("invalid_argument")),
            "{v}"
        );
        assert!(
            message.starts_with(&format!("query parameter {name}:")) && message.contains(accepts),
            "{query}: {v}"
        );
        assert!(
            !message.contains("variant") && !message.contains("deserialize"),
            "{v}"
        );
    }
    // Reschedule with nothing, and with a bad value of each form.
    s.post(push, json!({"id": "r", "body": "x", "delay_ms": 60_000}))
        .await;
    let reschedule = "/v1/topics/t/jobs/r/reschedule";
    assert_field_error(
        &s.post_raw(reschedule, "{}").await,
        "invalid_delay",
        "/delay_ms",
        "give delay_ms",
    );
    assert_field_error(
        &s.post_raw(reschedule, r#"{"delay_ms": -5}"#).await,
        "invalid_delay",
        "/delay_ms",
        delay,
    );
    assert_field_error(
        &s.post_raw(reschedule, r#"{"ready_at": 5}"#).await,
        "invalid_delay",
        "/ready_at",
        "RFC 3339",
    );
    // A reserve's and an ack's fields.
    assert_field_error(
        &s.post_raw("/v1/reserve", r#"{"topics": ["t"], "max": -1}"#)
            .await,
        "invalid_argument",
        "/max",
        "0 to 1000",
    );
    assert_field_error(
        &s.post_raw("/v1/reserve", r#"{"topics": "t"}"#).await,
        "invalid_argument",
        "/topics",
        "a list of 1 to 64",
    );
    assert_field_error(
        &s.post_raw("/v1/reserve", r#"{"topics": ["t", 5]}"#).await,
        "invalid_topic",
        "/topics/1",
        "each item of topics takes a topic name",
    );
    assert_field_error(
        &s.post_raw("/v1/reserve", r#"{"topics": []}"#).await,
        "invalid_argument",
        "/topics",
        "1 to 64",
    );
    assert_field_error(
        &s.post_raw("/v1/topics/t/jobs/r/ack", r#"{"token": "abc"}"#)
            .await,
        "invalid_argument",
        "/token",
        "\"token\" of the delivery",
    );
    // Not JSON at all: no field, still our words.
    for body in [r#"{"body": "x","#, r#"{"body": "x"} 5"#, "body=x"] {
        let (st, v) = s.post_raw(push, body).await;
        assert_eq!((st, code(&v)), (400, "invalid_request"), "{v}");
        assert!(v["error"].get("field").is_none(), "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("not valid JSON") && !message.contains('`'),
            "{v}"
        );
    }
    let (_, st) = s.get("/v1/topics/t/stats").await;
    assert_eq!(st["delayed"], 1, "a refused push changed something: {st}");
}

/// A refused batch says which item: its index in `error.index`, its pointer in
/// `error.field`, both in the message; and nothing of the batch is pushed.
async fn batch_errors_name_the_item_issue_12(setup: Setup) {
    // See: issue 12
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let batch = "/v1/topics/b/batch";
    let ok = json!({"body": "fine"});
    let far = "2100-01-01T00:00:00.000+00:00";
    let cases = [
        (json!({"id": "two words", "body": "x"}), "invalid_id", "/id"),
        (
            json!({"body": "x", "delay_ms": -5}),
            "invalid_delay",
            "/delay_ms",
        ),
        (
            json!({"body": "x", "delay_ms": 315_576_000_001_u64}),
            "invalid_delay",
            "/delay_ms",
        ),
        (
            json!({"body": "x", "ready_at": far}),
            "invalid_delay",
            "/ready_at",
        ),
        (json!({"body": "x", "ttr_ms": 10}), "invalid_ttr", "/ttr_ms"),
        (
            json!({"body": "x", "max_attempts": 0}),
            "invalid_argument",
            "/max_attempts",
        ),
        (
            json!({"body": "***", "encoding": "base64"}),
            "invalid_argument",
            "/body",
        ),
        (json!({"body": "x".repeat(2049)}), "body_too_large", "/body"),
    ];
    for (bad, want, field) in cases {
        let (st, v) = s
            .post(batch, json!({"jobs": [ok.clone(), ok.clone(), bad]}))
            .await;
        assert_eq!(code(&v), want, "{v}");
        assert!(st == 400 || st == 413, "{v}");
        let pointer = format!("/jobs/2{field}");
        assert_eq!(v["error"]["field"], pointer, "{v}");
        assert_eq!(v["error"]["index"], 2, "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("item 2") && message.contains(&pointer),
            "{v}"
        );
    }
    // The same for the other lists: a reserve's topics and settle, a batch ack's leases.
    let (_, v) = s
        .post("/v1/reserve", json!({"topics": ["b", "bad topic"]}))
        .await;
    assert_eq!(
        (code(&v), &v["error"]["field"], &v["error"]["index"]),
        ("invalid_topic", &json!("/topics/1"), &json!(1)),
        "{v}"
    );
    let (_, v) = s
        .post(
            "/v1/reserve",
            json!({"topics": ["b"], "settle": [{"topic": "b", "id": "x", "token": 1}, {"topic": "b", "id": "x", "token": 1, "reason": "no"}]}),
        )
        .await;
    assert_eq!(
        (code(&v), &v["error"]["field"], &v["error"]["index"]),
        ("invalid_argument", &json!("/settle/1/reason"), &json!(1)),
        "{v}"
    );
    let (_, v) = s
        .post(
            "/v1/ack",
            json!({"leases": [{"topic": "b", "id": "x", "token": 1}, {"topic": "b", "id": "", "token": 1}]}),
        )
        .await;
    assert_eq!(
        (code(&v), &v["error"]["field"], &v["error"]["index"]),
        ("invalid_id", &json!("/leases/1/id"), &json!(1)),
        "{v}"
    );
    // A batch of too many jobs names the list (issue 36: 10,000 jobs named no field).
    let many: Vec<Value> = (0..10_000).map(|_| ok.clone()).collect();
    let (st, v) = s.post(batch, json!({ "jobs": many })).await;
    assert_eq!(
        (st, code(&v), &v["error"]["field"]),
        (400, "invalid_argument", &json!("/jobs")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 to 1000"),
        "{v}"
    );
    let (_, st) = s.get("/v1/topics/b/stats").await;
    assert_eq!(
        (st["ready"].as_u64(), st["delayed"].as_u64()),
        (Some(0), Some(0)),
        "a refused batch pushed something: {st}"
    );
}

async fn unavailable_engine_is_503(setup: Setup, kill: impl FnOnce()) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    kill();
    let (st, v) = s.post("/v1/topics/t/jobs", json!({"body": "x"})).await;
    assert_eq!((st, code(&v)), (503, "unavailable"), "{v}");
    assert!(
        !v["error"]["message"].as_str().unwrap().contains("os error"),
        "internal details leaked: {v}"
    );
    assert_eq!(s.text("/readyz").await.0, 503);
    assert_eq!(s.text("/healthz").await.0, 200);
}

macro_rules! engine_tests {
    ($module:ident, $setup:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_endpoint() {
                super::every_endpoint($setup(small_limits()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_error_code() {
                super::every_error_code($setup(small_limits()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn auth_on_and_off() {
                super::auth_on_and_off($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn long_poll_returns_when_a_job_is_due() {
                super::long_poll_returns_when_a_job_is_due($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn shutdown_ends_open_long_polls() {
                super::shutdown_ends_open_long_polls($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reserve_settles_first() {
                super::reserve_settles_first($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn decode_errors_name_the_field_issue_12() {
                super::decode_errors_name_the_field_issue_12($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn batch_errors_name_the_item_issue_12() {
                super::batch_errors_name_the_item_issue_12($setup(small_limits()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn long_wait_is_cut_to_the_limit_issue_12() {
                super::long_wait_is_cut_to_the_limit_issue_12($setup(Limits::default()).await)
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn receipts_answer_for_deliveries_issue_12() {
                super::receipts_answer_for_deliveries_issue_12($setup(Limits::default()).await)
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn deliveries_say_each_fact_once_issue_12() {
                super::deliveries_say_each_fact_once_issue_12($setup(Limits::default()).await)
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn metrics_follow_the_session() {
                super::metrics_follow_the_session($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn series_follow_the_session_issue_15() {
                super::series_follow_the_session_issue_15($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn done_jobs_over_http() {
                super::done_jobs_over_http($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn push_on_conflict_over_http_issue_14() {
                super::push_on_conflict_over_http_issue_14($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn expiry_over_http_issue_14() {
                super::expiry_over_http_issue_14($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn pause_over_http_issue_14() {
                super::pause_over_http_issue_14($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn unknown_topics_are_said_and_paused_empty_ones_listed_issue_36() {
                super::unknown_topics_are_said_and_paused_empty_ones_listed_issue_36(
                    $setup(Limits::default()).await,
                )
                .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn schedules_over_http_issue_14() {
                super::schedules_over_http_issue_14($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn topic_settings_over_http() {
                super::topic_settings_over_http($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn archive_buries_a_waiting_job_issue_15() {
                super::archive_buries_a_waiting_job_issue_15($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn list_filters_by_id_prefix_issue_15() {
                super::list_filters_by_id_prefix_issue_15($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn bulk_acts_on_all_that_match_issue_15() {
                super::bulk_acts_on_all_that_match_issue_15($setup(Limits::default()).await).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn purged_topic_leaves_topics_and_metrics_issue_12() {
                super::purged_topic_leaves_topics_and_metrics_issue_12(
                    $setup(Limits::default()).await,
                )
                .await;
            }
        }
    };
}

/// `POST …/archive` sends a delayed or ready job to dead with its reason, attempts as they
/// were; a reserved, dead or missing job and a long reason are refused and change nothing; a
/// read-only dashboard's request is refused.
async fn archive_buries_a_waiting_job_issue_15(setup: Setup) {
    let s = TestServer::start(setup.engine.clone(), ServerConfig::default()).await;
    let (st, v) = s
        .post("/v1/topics/arch/jobs", json!({"id": "r", "body": "x"}))
        .await;
    assert_eq!(st, 201, "{v}");
    let (_, v) = s.post("/v1/reserve", json!({"topics": ["arch"]})).await;
    assert_eq!(v["jobs"][0]["job"]["id"], "r", "{v}");
    for (id, delay) in [("a", 3_600_000), ("b", 0)] {
        let (st, v) = s
            .post(
                "/v1/topics/arch/jobs",
                json!({"id": id, "body": "x", "delay_ms": delay}),
            )
            .await;
        assert_eq!(st, 201, "{v}");
    }

    let (st, v) = s
        .post(
            "/v1/topics/arch/jobs/a/archive",
            json!({"reason": "by hand"}),
        )
        .await;
    assert_eq!(st, 204, "{v}");
    let (_, a) = s.get("/v1/topics/arch/jobs/a").await;
    assert_eq!(
        (&a["state"], &a["last_error"], &a["attempts"]),
        (&json!("dead"), &json!("by hand"), &json!(0)),
        "{a}"
    );
    let (st, v) = s.post("/v1/topics/arch/jobs/b/archive", json!({})).await;
    assert_eq!(st, 204, "{v}");
    assert_eq!(s.get("/v1/topics/arch/jobs/b").await.1["state"], "dead");

    for id in ["r", "a"] {
        let (st, v) = s
            .post(&format!("/v1/topics/arch/jobs/{id}/archive"), json!({}))
            .await;
        assert_eq!((st, code(&v)), (409, "wrong_state"), "{id}: {v}");
    }
    assert_eq!(s.get("/v1/topics/arch/jobs/r").await.1["state"], "reserved");
    let (st, v) = s
        .post("/v1/topics/arch/jobs/missing/archive", json!({}))
        .await;
    assert_eq!((st, code(&v)), (404, "not_found"), "{v}");
    s.post("/v1/topics/arch/jobs", json!({"id": "c", "body": "x"}))
        .await;
    let (st, v) = s
        .post(
            "/v1/topics/arch/jobs/c/archive",
            json!({"reason": "x".repeat(4097)}),
        )
        .await;
    assert_eq!(
        (st, v["error"]["field"].as_str()),
        (400, Some("/reason")),
        "{v}"
    );
    let (st, v) = s
        .post("/v1/topics/arch/jobs/c/archive", json!({"why": "x"}))
        .await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(s.get("/v1/topics/arch/jobs/c").await.1["state"], "ready");

    let ro = read_only(setup.engine.clone()).await;
    let (st, v) = ro
        .post_from_ui("/v1/topics/arch/jobs/c/archive", json!({}))
        .await;
    assert_eq!((st, code(&v)), (403, "read_only"), "{v}");
    assert_eq!(s.get("/v1/topics/arch/jobs/c").await.1["state"], "ready");
    let doc = s.text("/v1/openapi.json").await.1;
    assert!(
        doc.contains("/v1/topics/{topic}/jobs/{id}/archive"),
        "not in the OpenAPI document"
    );
}

/// A server whose dashboard is read-only (`--ui read-only`).
async fn read_only(engine: Arc<dyn Engine>) -> TestServer {
    TestServer::start(
        engine,
        ServerConfig {
            ui: delayq_server::UiMode::ReadOnly,
            ..ServerConfig::default()
        },
    )
    .await
}

/// Pushes `ids` to `topic`, ready now, 1000 per request.
async fn push_ids(s: &TestServer, topic: &str, ids: &[String]) {
    for chunk in ids.chunks(1000) {
        let jobs: Vec<Value> = chunk
            .iter()
            .map(|id| json!({"id": id, "body": "x"}))
            .collect();
        let (st, v) = s
            .post(
                &format!("/v1/topics/{topic}/batch"),
                json!({ "jobs": jobs }),
            )
            .await;
        assert_eq!(st, 200, "{v}");
    }
}

/// Follows a filtered listing to its end: every page's jobs, and what each page scanned.
async fn follow(s: &TestServer, query: &str) -> (Vec<String>, Vec<u64>) {
    let (mut ids, mut scanned, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("{query}&cursor={}", urlencode(c)),
            None => query.to_string(),
        };
        let (st, page) = s.get(&path).await;
        assert_eq!(st, 200, "{page}");
        ids.extend(
            page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_str().unwrap().to_string()),
        );
        scanned.push(page["scanned"].as_u64().unwrap());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (ids, scanned),
        }
        assert!(scanned.len() < 50, "the listing does not end");
    }
}

/// `GET …/jobs?prefix=` answers only the jobs whose id starts with the prefix, page by page
/// with the engine's cursor, whether the matches lie in one engine page or several; a
/// request looks at most 10,000 jobs and says how many it did; a bad prefix is refused,
/// naming the field.
async fn list_filters_by_id_prefix_issue_15(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    // 12,000 ready jobs in push order; every 100th, spread over 12 engine pages, matches.
    let ids: Vec<String> = (0..12_000)
        .map(|i| {
            if i % 100 == 0 {
                format!("match-{i:05}")
            } else {
                format!("other-{i:05}")
            }
        })
        .collect();
    push_ids(&s, "pf", &ids).await;
    let want: Vec<String> = ids
        .iter()
        .filter(|i| i.starts_with("match-"))
        .cloned()
        .collect();

    let (got, scanned) = follow(&s, "/v1/topics/pf/jobs?state=ready&prefix=match-&limit=50").await;
    assert_eq!(got, want);
    // 50 matches reach up to job 4901; the next 50 up to 9901; the rest to the end.
    assert_eq!(scanned, [4901, 5000, 2099], "{scanned:?}");

    // Nothing matches: the first request stops at 10,000 jobs with a cursor to go on.
    let (got, scanned) = follow(&s, "/v1/topics/pf/jobs?state=ready&prefix=nothing").await;
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(scanned, [10_000, 2000]);

    // A prefix in one page only, and another state.
    let (got, _) = follow(&s, "/v1/topics/pf/jobs?state=ready&prefix=match-0000").await;
    assert_eq!(got, ["match-00000"]);
    let (got, scanned) = follow(&s, "/v1/topics/pf/jobs?state=dead&prefix=match").await;
    assert_eq!((got.len(), scanned), (0, vec![0]));

    for bad in ["a%20b", &"x".repeat(201)] {
        let (st, v) = s
            .get(&format!("/v1/topics/pf/jobs?state=ready&prefix={bad}"))
            .await;
        assert_eq!(
            (st, v["error"]["field"].as_str()),
            (400, Some("prefix")),
            "{v}"
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains("prefix"),
            "{v}"
        );
    }
    let (st, v) = s
        .get("/v1/topics/pf/jobs?state=ready&prefix=match&limit=1001")
        .await;
    assert_eq!(st, 400, "{v}");
    // Without a prefix the listing is as before, with no `scanned`.
    let (_, page) = s.get("/v1/topics/pf/jobs?state=ready&limit=3").await;
    assert_eq!(page["jobs"][0]["id"], "match-00000");
    assert!(page.get("scanned").is_none(), "{page}");
}

/// `POST /v1/topics/{topic}/bulk` acts on listed ids, or on every job of a state matching a
/// prefix, at most 10,000 looked at per request, answering how many it did, the failures
/// (counted, not fatal) and whether more remain; bad requests name the field; a read-only
/// dashboard's request is refused.
async fn bulk_acts_on_all_that_match_issue_15(setup: Setup) {
    let s = TestServer::start(setup.engine.clone(), ServerConfig::default()).await;
    let bulk = "/v1/topics/bk/bulk";

    // By ids: run two delayed jobs now; a missing one is a failure, not an error.
    for id in ["d1", "d2", "d3"] {
        s.post(
            "/v1/topics/bk/jobs",
            json!({"id": id, "body": "x", "delay_ms": 3_600_000}),
        )
        .await;
    }
    let (st, v) = s
        .post(
            bulk,
            json!({"action": "run_now", "ids": ["d1", "d2", "missing"]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["done"], &v["failed"], &v["more"]),
        (&json!(2), &json!(1), &json!(false)),
        "{v}"
    );
    assert_eq!(v["failures"][0]["id"], "missing", "{v}");
    assert_eq!(v["failures"][0]["code"], "not_found", "{v}");
    assert_eq!(s.get("/v1/topics/bk/jobs/d1").await.1["state"], "ready");
    assert_eq!(s.get("/v1/topics/bk/jobs/d3").await.1["state"], "delayed");

    // By state and prefix: bury the delayed "d" jobs, then kick every dead one.
    let (_, v) = s
        .post(
            bulk,
            json!({"action": "bury", "state": "delayed", "prefix": "d", "reason": "by hand"}),
        )
        .await;
    assert_eq!((&v["done"], &v["failed"]), (&json!(1), &json!(0)), "{v}");
    let (_, d3) = s.get("/v1/topics/bk/jobs/d3").await;
    assert_eq!(
        (&d3["state"], &d3["last_error"]),
        (&json!("dead"), &json!("by hand"))
    );
    let (_, v) = s
        .post(bulk, json!({"action": "kick", "state": "dead"}))
        .await;
    assert_eq!(v["done"], 1, "{v}");
    assert_eq!(s.get("/v1/topics/bk/jobs/d3").await.1["state"], "ready");

    // Over the bound: 10,500 ready jobs, every other one matching, deleted in two requests.
    let ids: Vec<String> = (0..10_500)
        .map(|i| {
            if i % 2 == 0 {
                format!("gone-{i:05}")
            } else {
                format!("keep-{i:05}")
            }
        })
        .collect();
    push_ids(&s, "many", &ids).await;
    let del = json!({"action": "delete", "state": "ready", "prefix": "gone-"});
    let (st, v) = s.post("/v1/topics/many/bulk", del.clone()).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["done"], &v["scanned"], &v["more"]),
        (&json!(5000), &json!(10_000), &json!(true)),
        "{v}"
    );
    let mut again = del.clone();
    again["cursor"] = v["next_cursor"].clone();
    let (_, v) = s.post("/v1/topics/many/bulk", again).await;
    assert_eq!(
        (&v["done"], &v["more"]),
        (&json!(250), &json!(false)),
        "{v}"
    );
    let (_, stats) = s.get("/v1/topics/many/stats").await;
    assert_eq!(stats["ready"], 5250, "{stats}");
    let (_, page) = s.get("/v1/topics/many/jobs?state=ready&prefix=gone-").await;
    assert_eq!(page["jobs"], json!([]), "{page}");

    // Bad requests name the field and change nothing.
    for (body, field) in [
        (json!({"action": "delete"}), "/ids"),
        (
            json!({"action": "delete", "ids": ["d1"], "state": "ready"}),
            "/ids",
        ),
        (json!({"action": "delete", "ids": []}), "/ids"),
        (json!({"action": "delete", "ids": ["d1", "a b"]}), "/ids/1"),
        (json!({"action": "explode", "ids": ["d1"]}), "/action"),
        (json!({"action": "run_now", "state": "ready"}), "/state"),
        (json!({"action": "kick", "state": "ready"}), "/state"),
        (
            json!({"action": "delete", "ids": ["d1"], "reason": "x"}),
            "/reason",
        ),
        (
            json!({"action": "delete", "ids": ["d1"], "prefix": "x"}),
            "/prefix",
        ),
        (
            json!({"action": "delete", "state": "ready", "prefix": "a b"}),
            "/prefix",
        ),
    ] {
        let (st, v) = s.post(bulk, body.clone()).await;
        assert_eq!(
            (st, v["error"]["field"].as_str()),
            (400, Some(field)),
            "{body}: {v}"
        );
        if body.get("state").is_some() == body.get("ids").is_some() {
            // Neither or both: the message says exactly one, whichever was wrong.
            let message = v["error"]["message"].as_str().unwrap_or("");
            assert!(message.contains("exactly one of ids"), "{body}: {v}");
        }
    }
    assert_eq!(s.get("/v1/topics/bk/jobs/d1").await.1["state"], "ready");

    let ro = read_only(setup.engine.clone()).await;
    let (st, v) = ro
        .post_from_ui(bulk, json!({"action": "delete", "ids": ["d1"]}))
        .await;
    assert_eq!((st, code(&v)), (403, "read_only"), "{v}");
    assert_eq!(s.get("/v1/topics/bk/jobs/d1").await.1["state"], "ready");
}

engine_tests!(on_redis, redis);
engine_tests!(on_sqlite, sqlite);
engine_tests!(on_postgres, postgres);
engine_tests!(on_cluster, cluster);

/// Redis down: the API answers 503 `unavailable` and readiness fails, health does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_unavailable() {
    let mut server = delayq_testkit::RedisServer::start();
    let engine = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(server.url()))
        .await
        .unwrap();
    let setup = Setup {
        engine: Arc::new(engine),
        _guard: Box::new(()),
    };
    unavailable_engine_is_503(setup, move || server.kill()).await;
}

/// `--redis-wait-replicas` on a Redis without the replicas asked for: a push is applied but
/// answers 503 `not_replicated`; retrying it is safe (the job exists once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_is_503_not_replicated_issue_13() {
    // See: issue 13
    let server = delayq_testkit::RedisServer::start();
    let config = delayq_redis::RedisConfig::new(server.url())
        .with_wait_replicas(1, Duration::from_millis(100));
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    let (st, v) = s
        .post("/v1/topics/t/jobs", json!({"id": "j1", "body": "x"}))
        .await;
    assert_eq!((st, code(&v)), (503, "not_replicated"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0 of the 1 replicas"),
        "{v}"
    );
    let (st, v) = s.get("/v1/topics/t/jobs/j1").await;
    assert_eq!(st, 200, "the push was applied: {v}");
    let (st, v) = s
        .post("/v1/topics/t/jobs", json!({"id": "j1", "body": "x"}))
        .await;
    assert_eq!((st, code(&v)), (503, "not_replicated"), "{v}");
    let (st, v) = s.get("/v1/topics/t/stats").await;
    assert_eq!((st, v["ready"].as_u64()), (200, Some(1)), "{v}");
    drop(server);
}

/// A full store over HTTP: Redis at `maxmemory` (with `noeviction`) and the embedded engine
/// at its `max_db_bytes` answer a push 503 `engine_full`, with the engine's message saying
/// that nothing was written and what to do; the refused job is not there, reads still
/// answer, and once space is freed the push succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_is_503_engine_full_issue_17() {
    // See: issue 17
    let redis = delayq_testkit::RedisServer::start();
    let engine = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(redis.url()))
        .await
        .unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    let mut admin = redis.connection().await;
    let mut maxmemory = async |bytes: &str| {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(bytes)
            .query_async::<()>(&mut admin)
            .await
            .unwrap();
    };
    let (st, v) = s
        .post("/v1/topics/t/jobs", json!({"id": "kept", "body": "x"}))
        .await;
    assert!(st < 300, "{v}");
    maxmemory("1").await;
    let (st, v) = s
        .post("/v1/topics/t/jobs", json!({"id": "j1", "body": "x"}))
        .await;
    assert_eq!((st, code(&v)), (503, "engine_full"), "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    for words in ["maxmemory", "nothing was written", "retry"] {
        assert!(message.contains(words), "{message}");
    }
    assert_eq!(
        s.get("/v1/topics/t/jobs/j1").await.0,
        404,
        "a refused push was stored"
    );
    assert_eq!(
        s.get("/v1/topics/t/jobs/kept").await.0,
        200,
        "reads answer at maxmemory"
    );
    maxmemory("0").await;
    let (st, v) = s
        .post("/v1/topics/t/jobs", json!({"id": "j1", "body": "x"}))
        .await;
    assert!(st < 300, "memory freed, the push succeeds: {v}");

    let dir = tempfile::tempdir().unwrap();
    let config = delayq_sqlite::SqliteConfig::dir(dir.path()).with_max_db_bytes(256 * 1024);
    let engine = delayq_sqlite::SqliteEngine::open(config).unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    let body = "y".repeat(16 * 1024);
    let mut stored = 0;
    let v = loop {
        let (st, v) = s
            .post(
                "/v1/topics/t/jobs",
                json!({"id": format!("j{stored}"), "body": body}),
            )
            .await;
        if st >= 300 {
            assert_eq!((st, code(&v)), (503, "engine_full"), "{v}");
            break v;
        }
        stored += 1;
        assert!(stored < 100, "max_db_bytes was never reached");
    };
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_db_bytes"), "{message}");
    let refused = format!("/v1/topics/t/jobs/j{stored}");
    assert_eq!(s.get(&refused).await.0, 404, "a refused push was stored");
    let (st, v) = s.get("/v1/topics/t/stats").await;
    assert_eq!((st, v["ready"].as_u64()), (200, Some(stored)), "{v}");
}

/// Holds a request in flight: its headers are sent, its body never ends, so the server has
/// taken the request's permit and waits in the handler.
fn request_in_flight(s: &common::TestServer, path: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(s.addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{",
        s.addr
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.flush().unwrap();
    stream
}

/// True when the server has answered a request sent with [`request_in_flight`].
fn answered(stream: &std::net::TcpStream) -> bool {
    let mut buf = [0u8; 1];
    stream.set_nonblocking(true).unwrap();
    let got = matches!(stream.peek(&mut buf), Ok(n) if n > 0);
    stream.set_nonblocking(false).unwrap();
    got
}

/// `--concurrency` bounds the requests of the whole server, not of each route; reserves
/// (long-polls) count against their own limit, so an open long-poll does not starve pushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_bounds_the_whole_server_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            concurrency: 1,
            max_long_polls: 1,
            ..ServerConfig::default()
        },
    )
    .await;
    let mut held = request_in_flight(&s, "/v1/topics/a/jobs");
    // Wait (bounded) until the held request has its permit. The held request and a probe
    // race for the one permit: when the probe won, the held request was answered 503 at
    // once (and holds nothing), so it is sent again.
    let start = Instant::now();
    loop {
        let (st, v) = s.get("/v1/topics/b/stats").await;
        if st == 503 {
            assert_eq!(code(&v), "overloaded", "{v}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never shed: {st} {v}"
        );
        if answered(&held) {
            held = request_in_flight(&s, "/v1/topics/a/jobs");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another route is refused too: the limit is the server's.
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!((st, code(&v)), (503, "overloaded"), "{v}");
    // Health is never shed.
    assert_eq!(s.text("/healthz").await.0, 200);
    // A long-poll takes its own permit, not the one the held request holds...
    let client = s.client.clone();
    let url = s.url("/v1/reserve");
    let poll = tokio::spawn(async move {
        client
            .post(url)
            .json(&json!({"topics": ["lp"], "wait_ms": 1500}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    drop(held);
    // ...and pushes go through while it is open.
    let start = Instant::now();
    loop {
        let (st, v) = s
            .post(
                "/v1/topics/a/jobs",
                json!({"body": "x", "delay_ms": 60_000}),
            )
            .await;
        if st == 201 {
            break;
        }
        assert_eq!((st, code(&v)), (503, "overloaded"), "{v}");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the held request never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A second long-poll finds the long-poll limit reached (unless the first already ended).
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["lp"], "wait_ms": 0}))
        .await;
    if poll.is_finished() {
        assert_eq!(st, 200, "{v}");
    } else {
        assert_eq!((st, code(&v)), (503, "overloaded"), "{v}");
    }
    assert_eq!(poll.await.unwrap(), 200);
}

/// The `Bearer` scheme is case-insensitive (RFC 7235): `bearer`, `BEARER` are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_scheme_is_case_insensitive_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let token = "a-long-enough-secret-token";
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            tokens: vec![token.to_string()],
            ..ServerConfig::default()
        },
    )
    .await;
    let anonymous = reqwest::Client::new();
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let r = anonymous
            .get(s.url("/v1/topics"))
            .header("authorization", format!("{scheme} {token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{scheme}");
    }
    let r = anonymous
        .get(s.url("/v1/topics"))
        .header("authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "another scheme is refused");
}

/// `/readyz` answers at once while Redis is down (a readiness probe has a short timeout),
/// on every call, not only the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_at_once_while_redis_is_down_issue_12() {
    // See: issue 12
    let mut server = delayq_testkit::RedisServer::start();
    let engine = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(server.url()))
        .await
        .unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    assert_eq!(s.text("/readyz").await.0, 200);
    server.kill();
    // The server waits at most 80 ms for the engine; the bound here is loose for a busy
    // machine. Before, each call waited for the client's reconnect tries (over a second).
    for _ in 0..5 {
        let start = Instant::now();
        let (st, body) = s.text("/readyz").await;
        let took = start.elapsed();
        assert_eq!(st, 503, "{body}");
        assert!(took < Duration::from_millis(600), "/readyz took {took:?}");
    }
    server.restart();
    let start = Instant::now();
    while s.text("/readyz").await.0 != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not ready again after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

/// With tokens set, `metrics_public` leaves `/metrics` open for scrapers; the API still
/// needs a token and the OpenAPI document stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_public_leaves_only_metrics_open_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            tokens: vec!["a-long-enough-secret-token".into()],
            metrics_public: true,
            ..ServerConfig::default()
        },
    )
    .await;
    let anonymous = reqwest::Client::new();
    for (path, status) in [
        ("/metrics", 200),
        ("/v1/openapi.json", 200),
        ("/healthz", 200),
        ("/v1/topics", 401),
    ] {
        let r = anonymous.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
    }
}

/// Reads one answer with a `content-length` from `stream`: its head, lowercased, and body.
fn read_answer(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                return (head, buf[end + 4..end + 4 + len].to_vec());
            }
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before a whole answer: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Every HTTP/1 answer, errors included, announces how long the server keeps the connection
/// idle (`keep-alive: timeout=N`, the request timeout in whole seconds), and the server
/// keeps it that long: a client that honours the hint (Node's `fetch`) drops the connection
/// first instead of sending a request into the server's close. Before, with a request
/// timeout shorter than the client's own idle timeout, such a request failed now and then
/// with "other side closed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_announce_how_long_an_idle_connection_stays_open() {
    use std::io::Write;
    let setup = sqlite(Limits::default()).await;
    let config = ServerConfig {
        request_timeout: Duration::from_millis(3_900),
        max_wait: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let s = TestServer::start(setup.engine, config).await;
    let r = s.client.get(s.url("/v1/topics")).send().await.unwrap();
    assert_eq!(r.headers()["keep-alive"], "timeout=3", "rounded down");
    let r = s.client.get(s.url("/no/such/route")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.headers()["keep-alive"], "timeout=3", "errors say it too");

    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        let request = format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\n\r\n");
        conn.write_all(request.as_bytes()).unwrap();
        let (head, body) = read_answer(&mut conn);
        assert!(head.contains("\r\nkeep-alive: timeout=3"), "{head}");
        assert_eq!(body, b"ok\n");
        // Idle well within the announced time: the connection still serves a request.
        std::thread::sleep(Duration::from_secs(1));
        conn.write_all(request.as_bytes()).unwrap();
        let (head, _) = read_answer(&mut conn);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        // Idle past the request timeout: the server closes it (bounded for a busy machine).
        let idle = Instant::now();
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut rest = Vec::new();
        let closed = std::io::Read::read_to_end(&mut conn, &mut rest);
        assert!(closed.is_ok() && rest.is_empty(), "{closed:?} {rest:?}");
        assert!(
            idle.elapsed() >= Duration::from_secs(3),
            "closed before the announced {:?}",
            idle.elapsed()
        );
    })
    .await
    .unwrap();
}

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
