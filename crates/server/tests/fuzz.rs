//! Fuzzed HTTP input (issue 17): every route of the app, driven without a socket
//! (`tower::ServiceExt::oneshot`) over the embedded engine in memory, with arbitrary bytes
//! as bodies, valid bodies with one field made wrong (wrong types, out-of-range and huge
//! numbers, unicode, lone surrogates, deep nesting, long strings), fields dropped or added,
//! and arbitrary query strings and path segments.
//!
//! Each case seeds a fresh engine with a job in each state, then sends one request. The
//! server must not panic and never answer `500`; every `4xx` (and `503`) has the JSON error
//! shape with a `code` and a message that is not a serde message; and a request answered
//! `4xx` changed nothing: the topics' stats and settings, every state's listing and the
//! schedules are what they were before it.
//!
//! Bounded: 256 cases per property (about 20 s in all, debug build);
//! `DELAYQ_FUZZ_CASES=<n>` for a longer run.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine as _;
use delayq_server::{AppState, ServerConfig};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde_json::{Value, json};
use tower::ServiceExt;

fn config() -> Config {
    Config {
        cases: delayq_testkit::fuzz_cases(256),
        failure_persistence: None,
        ..Config::default()
    }
}

/// A fresh app over the embedded engine in memory, seeded with one job in each state of
/// topic `orders`: `d1` delayed an hour, `r1` ready, `x1` reserved (its receipt and token
/// answered), `dead1` dead; and a schedule `nightly`.
struct Fixture {
    app: Router,
    state: AppState,
    receipt: String,
    token: u64,
}

impl Fixture {
    async fn new() -> Fixture {
        let engine = delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::memory())
            .expect("open the embedded engine in memory");
        let config = ServerConfig {
            // A fuzzed reserve that is valid must not wait.
            max_wait: std::time::Duration::ZERO,
            ..ServerConfig::default()
        };
        let state = AppState::new(Arc::new(engine), config);
        let app = delayq_server::app(state.clone());
        let mut f = Fixture {
            app,
            state,
            receipt: String::new(),
            token: 0,
        };
        for (path, body) in [
            (
                "/v1/topics/orders/jobs",
                json!({"id": "x1", "body": "reserved"}),
            ),
            (
                "/v1/topics/orders/jobs",
                json!({"id": "d1", "body": "delayed", "delay_ms": 3_600_000}),
            ),
            (
                "/v1/topics/orders/jobs",
                json!({"id": "dead1", "body": "dead", "delay_ms": 3_600_000}),
            ),
        ] {
            f.expect(Method::POST, path, body, StatusCode::CREATED)
                .await;
        }
        let v = f
            .expect(
                Method::POST,
                "/v1/reserve",
                json!({"topics": ["orders"]}),
                StatusCode::OK,
            )
            .await;
        f.receipt = v["jobs"][0]["receipt"].as_str().unwrap().to_string();
        f.token = v["jobs"][0]["token"].as_u64().unwrap();
        f.expect(
            Method::POST,
            "/v1/topics/orders/jobs",
            json!({"id": "r1", "body": "é\u{1f600}"}),
            StatusCode::CREATED,
        )
        .await;
        f.expect(
            Method::POST,
            "/v1/topics/orders/jobs/dead1/archive",
            json!({"reason": "seeded"}),
            StatusCode::NO_CONTENT,
        )
        .await;
        f.expect(
            Method::PUT,
            "/v1/schedules/nightly",
            json!({"cron": "0 3 * * *", "time_zone": "Europe/Berlin", "topic": "orders", "body": "n"}),
            StatusCode::OK,
        )
        .await;
        f
    }

    /// Sends a request; the status and the body as JSON (a string when it is not JSON).
    async fn send(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    async fn expect(&self, method: Method, path: &str, body: Value, want: StatusCode) -> Value {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let (status, v) = self.send(request).await;
        assert_eq!(status, want, "{path}: {v}");
        v
    }

    async fn get(&self, path: &str) -> Value {
        let request = Request::builder().uri(path).body(Body::empty()).unwrap();
        let (status, v) = self.send(request).await;
        assert_eq!(status, StatusCode::OK, "{path}: {v}");
        v
    }

    /// Everything a request could change: every topic's stats (less the time-dependent
    /// `oldest_overdue_ms`), the settings and every state's listing of the seeded topic, the
    /// schedules.
    async fn snapshot(&self) -> Value {
        let mut topics = self.get("/v1/topics").await;
        for t in topics["topics"].as_array_mut().unwrap() {
            t.as_object_mut().unwrap().remove("oldest_overdue_ms");
        }
        let mut out = json!({"topics": topics, "schedules": self.get("/v1/schedules").await});
        for state in ["delayed", "ready", "reserved", "dead", "done"] {
            out[state] = self
                .get(&format!("/v1/topics/orders/jobs?state={state}&limit=1000"))
                .await;
        }
        out["config"] = self.get("/v1/topics/orders").await;
        out
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}

/// A valid body for each route, from which the fuzzer makes wrong ones; `{}` for the rest.
fn template(method: &str, path: &str, receipt: &str, token: u64) -> Value {
    let push = json!({
        "id": "n1", "body": "aGk=", "encoding": "base64", "delay_ms": 1000, "ttr_ms": 5000,
        "max_attempts": 3, "priority": 1, "on_conflict": "debounce", "max_wait_ms": 60000,
        "max_lateness_ms": 1000, "on_expire": "drop",
        "backoff": {"kind": "exponential", "base_ms": 100, "max_ms": 1000, "factor": 2, "jitter": 0.1}
    });
    match (method, path) {
        ("post", "/v1/topics/{topic}/jobs") => push,
        ("post", "/v1/topics/{topic}/batch") => {
            json!({"jobs": [push, {"body": "x", "ready_at": "2030-01-02T15:04:05.000+00:00", "expires_at": "2031-01-01T00:00:00Z"}]})
        }
        ("post", "/v1/topics/{topic}/jobs/{id}/reschedule") => json!({"delay_ms": 5000}),
        ("post", "/v1/topics/{topic}/jobs/{id}/archive") => json!({"reason": "r"}),
        ("post", "/v1/topics/{topic}/bulk") => {
            json!({"action": "kick", "state": "dead", "prefix": "d", "cursor": null, "reason": "r"})
        }
        ("post", "/v1/reserve") => json!({
            "topics": ["orders", "other"], "max": 2, "wait_ms": 0, "mode": "at_least_once",
            "settle": [
                {"receipt": receipt, "outcome": "nack", "delay_ms": 10, "reason": "x"},
                {"topic": "orders", "id": "x1", "token": token, "outcome": "bury"}
            ]
        }),
        ("post", "/v1/ack") => {
            json!({"receipts": [receipt], "leases": [{"topic": "orders", "id": "x1", "token": token}]})
        }
        ("post", "/v1/topics/{topic}/jobs/{id}/nack") => {
            json!({"receipt": receipt, "token": token, "delay_ms": 10, "reason": "r"})
        }
        ("post", "/v1/topics/{topic}/jobs/{id}/touch") => {
            json!({"receipt": receipt, "token": token, "ttr_ms": 5000})
        }
        ("post", "/v1/topics/{topic}/jobs/{id}/bury") => {
            json!({"receipt": receipt, "token": token, "reason": "r"})
        }
        ("post", p) if p.ends_with("/ack") || p.ends_with("/release") => {
            json!({"receipt": receipt, "token": token})
        }
        ("put", "/v1/topics/{topic}") => json!({
            "ttr_ms": 5000, "max_attempts": 3, "max_body": 1000,
            "backoff": {"kind": "fixed", "base_ms": 100},
            "retention": {"max_jobs": 10, "max_age_ms": 60000}
        }),
        ("post", "/v1/topics/{topic}/pause") => {
            json!({"for_ms": 1000, "until": "2030-01-01T00:00:00Z"})
        }
        ("put", "/v1/schedules/{name}") => json!({
            "cron": "*/5 * * * *", "time_zone": "Europe/Berlin", "topic": "orders", "body": "x",
            "encoding": "utf8", "priority": 1, "ttr_ms": 5000, "max_attempts": 3,
            "backoff": {"kind": "fixed", "base_ms": 100}, "start": "2030-01-01T00:00:00Z",
            "end": "2031-01-01T00:00:00Z", "jitter_ms": 10, "misfire": "each", "misfire_limit": 5
        }),
        _ => json!({}),
    }
}

/// Every route of the API as the OpenAPI document lists it (method, path template), and
/// the routes outside it.
fn routes() -> Vec<(String, String)> {
    let doc: Value = serde_json::from_str(&delayq_server::openapi_json()).unwrap();
    let mut routes: Vec<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .filter(|m| ["get", "post", "put", "delete", "patch"].contains(&m.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/openapi.json",
        "/ui",
        "/nowhere",
    ] {
        routes.push(("get".into(), path.into()));
    }
    routes.sort();
    assert!(
        routes.len() >= 30,
        "the document lists {} routes",
        routes.len()
    );
    routes
}

/// Raw JSON text that is wrong somewhere: types, ranges, huge or negative numbers, unicode,
/// a lone surrogate, control characters, deep nesting, long strings.
fn nasty_json() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "null",
        "true",
        "-1",
        "-0",
        "0",
        "0.5",
        "1e3",
        "1e400",
        "-1e400",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999999",
        "-9223372036854775809",
        "315576000001",
        "86400001",
        "4294967296",
        "\"\"",
        "\"\\ud800\"",
        "\"\\u0000\"",
        "\"a\\u0000b\"",
        "\"\u{202e}\u{1f600}\u{fffd}\"",
        "\"2026-13-45T99:99:99Z\"",
        "\"-0001-01-01T00:00:00Z\"",
        "\"9999-12-31T23:59:59.999999999+23:59\"",
        "\"at_most_once\"",
        "\"AT_LEAST_ONCE\"",
        "[]",
        "{}",
        "[null]",
        "{\"\": null}",
        "\"/wA=\"",
        "\"***\"",
        "\"a==\"",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        4 => fixed,
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|f| serde_json::to_string(&f).unwrap()),
        2 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        1 => (1usize..400).prop_map(|d| format!("{}{}", "[".repeat(d), "]".repeat(d))),
        1 => (1usize..200).prop_map(|d| format!("{}1{}", "{\"a\":".repeat(d), "}".repeat(d))),
        1 => (0usize..70_000).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
        1 => prop::collection::vec(any::<String>(), 0..5)
            .prop_map(|v| serde_json::to_string(&v).unwrap()),
    ]
}

/// Every place in `v` a value sits, as JSON pointers (the root first).
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                pointers(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// How a body is made wrong.
#[derive(Clone, Debug)]
enum Mutation {
    /// Arbitrary bytes.
    Bytes(Vec<u8>),
    /// The template with the value at one pointer replaced by raw JSON text.
    Replace(prop::sample::Index, String),
    /// The template with one value removed.
    Remove(prop::sample::Index),
    /// The template with an unknown field added in an object.
    Add(prop::sample::Index, String),
    /// Raw JSON text in place of the body.
    Whole(String),
    /// No body at all.
    Empty,
}

fn body_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Mutation::Bytes),
        6 => (any::<prop::sample::Index>(), nasty_json()).prop_map(|(i, s)| Mutation::Replace(i, s)),
        1 => any::<prop::sample::Index>().prop_map(Mutation::Remove),
        1 => (any::<prop::sample::Index>(), nasty_json()).prop_map(|(i, s)| Mutation::Add(i, s)),
        1 => nasty_json().prop_map(Mutation::Whole),
        1 => Just(Mutation::Empty),
    ]
}

/// The body bytes `b` makes of `template`.
fn render(template: &Value, b: &Mutation) -> Vec<u8> {
    const HOLE: &str = "\u{1}HOLE\u{1}";
    let hole = serde_json::to_string(HOLE).unwrap();
    let mut ptrs = Vec::new();
    pointers(template, String::new(), &mut ptrs);
    match b {
        Mutation::Bytes(bytes) => bytes.clone(),
        Mutation::Empty => Vec::new(),
        Mutation::Whole(text) => text.clone().into_bytes(),
        Mutation::Replace(i, text) => {
            let mut v = template.clone();
            *v.pointer_mut(i.get(&ptrs).as_str()).unwrap() = Value::String(HOLE.into());
            v.to_string().replace(&hole, text).into_bytes()
        }
        Mutation::Remove(i) => {
            let mut v = template.clone();
            let p = i.get(&ptrs).as_str();
            if let Some((parent, key)) = p.rsplit_once('/') {
                match v.pointer_mut(parent).unwrap() {
                    Value::Object(m) => {
                        m.remove(key);
                    }
                    Value::Array(a) => {
                        a.remove(key.parse::<usize>().unwrap());
                    }
                    _ => {}
                }
            }
            v.to_string().into_bytes()
        }
        Mutation::Add(i, text) => {
            let mut v = template.clone();
            let objects: Vec<&String> = ptrs
                .iter()
                .filter(|p| v.pointer(p).is_some_and(Value::is_object))
                .collect();
            let p = i.get(&objects).to_string();
            if let Some(Value::Object(m)) = v.pointer_mut(&p) {
                m.insert("unknown_field".into(), Value::String(HOLE.into()));
            }
            v.to_string().replace(&hole, text).into_bytes()
        }
    }
}

/// A path segment: a valid one, arbitrary text percent-encoded, or raw oddities.
fn segment(valid: &'static [&'static str]) -> impl Strategy<Value = String> {
    let odd = prop::sample::select(vec![
        "..", "%", "%ZZ", "%FF%FE", "%2F", "%00", "%20", "a%2Fb", "%C3%A9", "-", ".",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        3 => prop::sample::select(valid).prop_map(str::to_string),
        2 => any::<String>().prop_map(|s| encode(s.as_bytes())),
        1 => prop::collection::vec(any::<u8>(), 1..40).prop_map(|b| encode(&b)),
        1 => odd,
        1 => (201usize..300).prop_map(|n| "a".repeat(n)),
    ]
}

/// Percent-encodes every byte but the unreserved ones.
fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A query string: arbitrary, or the parameters of a listing with wrong values.
fn query() -> impl Strategy<Value = Option<String>> {
    let value = prop_oneof![
        prop::sample::select(vec![
            "",
            "ready",
            "done",
            "Ready",
            "0",
            "1001",
            "-1",
            "1e3",
            "99999999999999999999",
            "%FF",
            "%",
            "a%2",
            "%00",
        ])
        .prop_map(str::to_string),
        any::<String>().prop_map(|s| encode(s.as_bytes())),
    ];
    let key = prop::sample::select(vec![
        "state", "limit", "cursor", "prefix", "topic", "state", "x", "",
    ]);
    prop_oneof![
        2 => Just(None),
        3 => prop::collection::vec((key, value), 0..5).prop_map(|kv| {
            Some(kv.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&"))
        }),
        1 => "[!-~&&[^#]]{0,60}".prop_map(Some),
        1 => prop::collection::vec(any::<u8>(), 0..60).prop_map(|b| Some(encode(&b))),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    route: prop::sample::Index,
    topic: String,
    id: String,
    name: String,
    query: Option<String>,
    body: Mutation,
    content_type: Option<&'static str>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<prop::sample::Index>(),
        segment(&["orders", "other"]),
        segment(&["x1", "r1", "d1", "dead1", "none"]),
        segment(&["nightly", "other"]),
        query(),
        body_strategy(),
        prop::sample::select(vec![
            Some("application/json"),
            Some("application/json"),
            Some("application/json"),
            Some("application/problem+json; charset=utf-8"),
            Some("text/plain"),
            Some("application/json\u{7f}"),
            None,
        ]),
    )
        .prop_map(|(route, topic, id, name, query, body, content_type)| Case {
            route,
            topic,
            id,
            name,
            query,
            body,
            content_type,
        })
}

/// Checks an answer: never 500, and a refusal has the error shape with a code and a
/// message in the server's own words.
fn check_answer(status: StatusCode, v: &Value, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        status != StatusCode::INTERNAL_SERVER_ERROR,
        "{what}: 500 {v}"
    );
    if status.is_client_error() || status.is_server_error() {
        let code = v["error"]["code"].as_str().unwrap_or_default();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        prop_assert!(
            !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{what}: {status} without a code: {v}"
        );
        prop_assert!(
            !message.is_empty(),
            "{what}: {status} without a message: {v}"
        );
        prop_assert!(
            !serde_words(message),
            "{what}: {status} answers a serde message: {message}"
        );
    }
    Ok(())
}

/// Whether a message has serde's words: its kinds of error, or its position suffix
/// `at line 1 column 2`.
fn serde_words(message: &str) -> bool {
    let position = message.match_indices("at line ").any(|(i, m)| {
        let rest = &message[i + m.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(" column ")
    });
    position
        || [
            "invalid type: ",
            "expected value",
            "EOF while",
            "unknown variant `",
        ]
        .iter()
        .any(|w| message.contains(w))
}

async fn one_case(c: Case, routes: &[(String, String)]) -> Result<(), TestCaseError> {
    let f = Fixture::new().await;
    let (method, template_path) = c.route.get(routes);
    let mut path = template_path
        .replace("{topic}", &c.topic)
        .replace("{id}", &c.id)
        .replace("{name}", &c.name);
    if let Some(q) = &c.query {
        path = format!("{path}?{q}");
    }
    let body = render(
        &template(method, template_path, &f.receipt, f.token),
        &c.body,
    );
    let mut request = Request::builder()
        .method(Method::from_bytes(method.to_uppercase().as_bytes()).unwrap())
        .uri(&path);
    if let Some(ct) = c.content_type {
        request = request.header("content-type", ct);
    }
    // A path or content type that is not a valid URI or header never reaches the app.
    let Ok(request) = request.body(Body::from(body.clone())) else {
        return Ok(());
    };
    let what = format!(
        "{} {path} with {:?}",
        method.to_uppercase(),
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    let before = f.snapshot().await;
    let (status, v) = f.send(request).await;
    check_answer(status, &v, &what)?;
    if status.is_client_error() {
        let after = f.snapshot().await;
        prop_assert!(
            before == after,
            "{what}: answered {status} {v}, and changed the state:\nbefore {before}\nafter {after}"
        );
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn every_route_survives_fuzzed_requests_and_bad_input_changes_nothing_issue_17() {
    let rt = runtime();
    let routes = routes();
    proptest!(config(), |(c in case())| {
        rt.block_on(one_case(c, &routes))?;
    });
}

/// Base64 bodies: whatever the string, a push with `encoding: base64` is created with
/// exactly the bytes it encodes or refused with `invalid_argument` at `/body`; the same for
/// a schedule's body.
#[test]
fn base64_bodies_decode_exactly_or_are_refused_issue_17() {
    let rt = runtime();
    let text = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300)
            .prop_map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
        prop::collection::vec(any::<u8>(), 0..300)
            .prop_map(|b| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)),
        "[A-Za-z0-9+/=\\-_ \n]{0,64}",
        any::<String>(),
    ];
    proptest!(config(), |(body in text)| {
        rt.block_on(async {
            let f = Fixture::new().await;
            let decoded = base64::engine::general_purpose::STANDARD.decode(&body).ok();
            for (method, path, req) in [
                (Method::POST, "/v1/topics/b64/jobs", json!({"id": "b", "body": body, "encoding": "base64", "delay_ms": 60_000})),
                (Method::PUT, "/v1/schedules/b64", json!({"cron": "0 3 * * *", "topic": "b64", "body": body, "encoding": "base64"})),
            ] {
                let request = Request::builder()
                    .method(method)
                    .uri(path)
                    .header("content-type", "application/json")
                    .body(Body::from(req.to_string()))
                    .unwrap();
                let before = f.snapshot().await;
                let (status, v) = f.send(request).await;
                check_answer(status, &v, path)?;
                match &decoded {
                    Some(_) => prop_assert!(status.is_success(), "{path}: {body:?} refused: {v}"),
                    None => {
                        prop_assert_eq!(status, StatusCode::BAD_REQUEST, "{}: {:?} taken: {}", path, body, v);
                        prop_assert_eq!(&v["error"]["code"], "invalid_argument");
                        prop_assert_eq!(&v["error"]["field"], "/body");
                        prop_assert_eq!(before, f.snapshot().await);
                    }
                }
            }
            if let Some(bytes) = decoded {
                let job = f.get("/v1/topics/b64/jobs/b").await;
                let stored = match job["encoding"].as_str() {
                    Some("base64") => base64::engine::general_purpose::STANDARD
                        .decode(job["body"].as_str().unwrap())
                        .unwrap(),
                    _ => job["body"].as_str().unwrap().as_bytes().to_vec(),
                };
                prop_assert_eq!(stored, bytes);
            }
            Ok(())
        })?;
    });
}
