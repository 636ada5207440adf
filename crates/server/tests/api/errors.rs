//! Error answers, on each engine: every error code with its status, decode errors naming
//! the field as a JSON pointer in our own words (never serde's), and a refused batch or
//! list naming the item.

use crate::common::{TestServer, code};
use crate::{Setup, small_limits};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::{Value, json};

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

engine_tests! {
    every_error_code(small_limits()),
    decode_errors_name_the_field_issue_12(Limits::default()),
    batch_errors_name_the_item_issue_12(small_limits()),
}
