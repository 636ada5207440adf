//! The webhook destination end to end: a real receiver (axum on a free loopback port) that
//! verifies every signature with its own HMAC, a forwarder over a real engine (the embedded
//! one, and a redis-server of the test's own), jobs pushed with delays.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;
use common::{Forwarding, forward, sqlite, topic, until_acked};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use delayq_core::{Backoff, Engine, JobId, JobState, NewJob, Store, Topic};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const OLD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn new_secret(byte: u8) -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([byte; 32])
    )
}

/// One request the receiver took.
#[derive(Clone, Debug)]
struct Got {
    at: Instant,
    job: String,
    attempt: u32,
    due_at_ms: u64,
    received_ms: u64,
    body: Bytes,
}

/// One scripted answer: a status, extra headers, a body.
type Answer = (u16, Vec<(&'static str, &'static str)>, &'static str);

/// What the receiver answers: `answers` front to back (then 204), after `delay`.
#[derive(Default)]
struct Script {
    answers: Vec<Answer>,
    delay: Duration,
}

#[derive(Default)]
struct Receiver {
    /// The secrets it accepts (any one signature verifying is enough).
    secrets: Vec<String>,
    script: Mutex<Script>,
    got: Mutex<Vec<Got>>,
    bad_signatures: Mutex<u32>,
    in_flight: Mutex<(u32, u32)>,
}

fn verifies(secret: &str, id: &str, ts: &str, body: &[u8], header: &str) -> bool {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    let want = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    header
        .split(' ')
        .any(|s| s.strip_prefix("v1,") == Some(want.as_str()))
}

async fn hook(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> Response {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    {
        let mut f = r.in_flight.lock().unwrap();
        f.0 += 1;
        f.1 = f.1.max(f.0);
    }
    let (answer, delay) = {
        let mut s = r.script.lock().unwrap();
        let a = if s.answers.is_empty() {
            (204, vec![], "")
        } else {
            s.answers.remove(0)
        };
        (a, s.delay)
    };
    tokio::time::sleep(delay).await;
    let now_s = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let ts = h("webhook-timestamp");
    let fresh = ts
        .parse::<u64>()
        .is_ok_and(|t| t.abs_diff(now_s.as_secs()) <= 300);
    let signed = r
        .secrets
        .iter()
        .any(|s| verifies(s, &h("webhook-id"), &ts, &body, &h("webhook-signature")));
    r.in_flight.lock().unwrap().0 -= 1;
    if !(signed && fresh) {
        *r.bad_signatures.lock().unwrap() += 1;
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    assert_eq!(h("content-type"), "application/json");
    assert_eq!(h("x-tenant"), "t-1", "the destination's own header");
    r.got.lock().unwrap().push(Got {
        at: Instant::now(),
        job: h("delayq-job-id"),
        attempt: h("delayq-attempt").parse().unwrap(),
        due_at_ms: h("delayq-due-at").parse().unwrap(),
        received_ms: now_s.as_millis() as u64,
        body,
    });
    let (status, extra, text) = answer;
    let mut resp = (StatusCode::from_u16(status).unwrap(), text).into_response();
    for (k, v) in extra {
        resp.headers_mut().insert(k, v.parse().unwrap());
    }
    resp
}

/// Serves `r` on a free loopback port.
async fn receive(r: Arc<Receiver>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_on(r, listener)
}

/// Serves `r` on `listener`.
fn serve_on(r: Arc<Receiver>, listener: tokio::net::TcpListener) -> SocketAddr {
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(r);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn webhook_doc(addr: SocketAddr, secrets: &[&str], max_concurrency: u32) -> String {
    serde_json::json!({
        "type": "webhook",
        "url": format!("http://{addr}/hook"),
        "secrets": secrets,
        "headers": {"x-tenant": "t-1"},
        "content_type": "application/json",
        "max_concurrency": max_concurrency,
    })
    .to_string()
}

/// A receiver that accepts `secrets`, scripted by `script`, and topic `name` of `engine`
/// pointed at it with `signing` secrets and `max_concurrency`, forwarded until the guard
/// drops.
async fn hooked(
    engine: &Arc<dyn Store>,
    name: &str,
    secrets: &[&str],
    signing: &[&str],
    max_concurrency: u32,
    script: Script,
) -> (Arc<Receiver>, Topic, Forwarding) {
    let r = Arc::new(Receiver {
        secrets: secrets.iter().map(|s| s.to_string()).collect(),
        script: Mutex::new(script),
        ..Receiver::default()
    });
    let addr = receive(r.clone()).await;
    let t = topic(name);
    engine
        .put_destination(&t, &webhook_doc(addr, signing, max_concurrency))
        .await
        .unwrap();
    (r, t, forward(engine.clone()))
}

/// Waits (bounded) until the job `id` is dead, and answers it.
async fn dead(engine: &Arc<dyn Store>, t: &Topic, id: &JobId, limit: Duration) -> delayq_core::Job {
    let start = Instant::now();
    loop {
        let j = engine.get(t, id).await.unwrap().unwrap();
        if j.state == JobState::Dead {
            return j;
        }
        assert!(start.elapsed() < limit, "not dead: {j:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded) until `f` holds.
async fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn delivered_once_each(engine: Arc<dyn Store>) {
    let (r, t, _f) = hooked(&engine, "hooks", &[OLD], &[OLD], 8, Script::default()).await;
    let n = 300;
    let jobs = (0..n)
        .map(|i| {
            NewJob::new(t.clone(), format!("{{\"n\":{i}}}"))
                .with_id(JobId::new(format!("j{i}")).unwrap())
                .with_delay(Duration::from_millis(200 + (i % 50) * 20))
        })
        .collect();
    engine.push_batch(jobs).await.unwrap();
    until("every job delivered", Duration::from_secs(30), || {
        r.got.lock().unwrap().len() >= n as usize
    })
    .await;
    // Acked: nothing left on the topic (the ack follows the answer).
    until_acked(&engine, &t, Duration::from_secs(10)).await;
    let got = r.got.lock().unwrap().clone();
    let mut seen = HashMap::new();
    for g in &got {
        *seen.entry(g.job.clone()).or_insert(0) += 1;
        assert_eq!(g.attempt, 1);
        assert!(g.received_ms + 5 >= g.due_at_ms, "early: {g:?}");
        let i: usize = g.job[1..].parse().unwrap();
        assert_eq!(g.body, Bytes::from(format!("{{\"n\":{i}}}")));
    }
    assert_eq!(seen.len(), n as usize);
    assert!(seen.values().all(|&c| c == 1), "a job sent twice");
    assert_eq!(*r.bad_signatures.lock().unwrap(), 0);
    assert!(
        r.in_flight.lock().unwrap().1 <= 8,
        "more than max_concurrency at once"
    );
}

/// Every job is sent once, signed, with its headers, no earlier than due, then acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_is_delivered_once_signed_on_the_embedded_engine() {
    let (e, _dir) = sqlite();
    delivered_once_each(e).await;
}

/// The same on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_is_delivered_once_signed_on_redis() {
    let server = delayq_testkit::RedisServer::start();
    let e = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(server.url()))
        .await
        .unwrap();
    delivered_once_each(Arc::new(e)).await;
}

/// A receiver that fails (503) for a while gets every job once it answers again, each
/// retried with its back-off; a 429 with `Retry-After` is waited out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_gets_everything_after_it_recovers() {
    let (engine, _dir) = sqlite();
    let script = Script {
        answers: (0..12)
            .map(|_| (503, vec![], "down for maintenance"))
            .chain([(429, vec![("retry-after", "1")], "slow down")])
            .collect(),
        ..Script::default()
    };
    let (r, t, _f) = hooked(&engine, "flaky", &[OLD], &[OLD], 1, script).await;
    let backoff = Backoff::exponential(Duration::from_millis(50), Duration::from_millis(400));
    let jobs = (0..4)
        .map(|i| {
            NewJob::new(t.clone(), "x")
                .with_id(JobId::new(format!("f{i}")).unwrap())
                .with_max_attempts(20)
                .with_backoff(backoff)
        })
        .collect();
    engine.push_batch(jobs).await.unwrap();
    // 12 failures, one 429, then the 4 jobs delivered.
    until(
        "every job delivered after the failures",
        Duration::from_secs(30),
        || r.got.lock().unwrap().len() >= 4 + 13,
    )
    .await;
    let got = r.got.lock().unwrap().clone();
    // The 429's job came back no sooner than its Retry-After.
    let limited = &got[12];
    let next = got[13..]
        .iter()
        .find(|g| g.job == limited.job)
        .expect("the rate-limited job again");
    assert!(
        next.at.duration_since(limited.at) >= Duration::from_millis(950),
        "Retry-After not honoured: {:?}",
        next.at.duration_since(limited.at)
    );
    assert!(
        got.iter().any(|g| g.attempt > 2),
        "retried with attempts counted"
    );
    until_acked(&engine, &t, Duration::from_secs(10)).await;
}

/// A 4xx other than 429 sends the job to dead at once, its reason the status and the start
/// of the answer; the failure is counted by cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_sends_the_job_to_dead_with_the_status() {
    let (engine, _dir) = sqlite();
    let script = Script {
        answers: vec![(404, vec![], "no such hook here")],
        ..Script::default()
    };
    let (_r, t, f) = hooked(&engine, "refused", &[OLD], &[OLD], 1, script).await;
    let id = JobId::new("r1").unwrap();
    engine
        .push(
            NewJob::new(t.clone(), "x")
                .with_id(id.clone())
                .with_max_attempts(5),
        )
        .await
        .unwrap();
    let job = dead(&engine, &t, &id, Duration::from_secs(10)).await;
    let reason = job.last_error.unwrap_or_default();
    assert!(
        reason.contains("404") && reason.contains("no such hook here"),
        "{reason}"
    );
    assert_eq!(job.attempts, 1, "not retried");
    let mut registry = prometheus_client::registry::Registry::with_prefix("delayq");
    f.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"delayq_push_failures_total{topic="refused",destination="webhook",cause="status_4xx"} 1"#),
        "{text}"
    );
}

/// During a rotation the destination holds both secrets: a receiver that knows only the
/// old one and a receiver that knows only the new one both verify every request; one that
/// knows neither refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_secrets_verify_during_a_rotation() {
    let (engine, _dir) = sqlite();
    let new = new_secret(9);
    let stranger = new_secret(3);
    for (name, knows, verified) in [
        ("rot-old", OLD, true),
        ("rot-new", new.as_str(), true),
        ("rot-none", stranger.as_str(), false),
    ] {
        let (r, t, _f) = hooked(&engine, name, &[knows], &[OLD, &new], 4, Script::default()).await;
        for i in 0..5 {
            engine
                .push(NewJob::new(t.clone(), "x").with_id(JobId::new(format!("k{i}")).unwrap()))
                .await
                .unwrap();
        }
        until(name, Duration::from_secs(10), || {
            r.got.lock().unwrap().len() + *r.bad_signatures.lock().unwrap() as usize >= 5
        })
        .await;
        let bad = *r.bad_signatures.lock().unwrap();
        assert_eq!(bad == 0, verified, "{name}: {bad} refused");
    }
}

/// A receiver slower than the job's ttr: the send times out and the job is retried, never
/// acked early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_longer_than_the_ttr_is_retried() {
    let (engine, _dir) = sqlite();
    let script = Script {
        delay: Duration::from_millis(1500),
        ..Script::default()
    };
    let (r, t, _f) = hooked(&engine, "slow", &[OLD], &[OLD], 1, script).await;
    let id = JobId::new("s1").unwrap();
    engine
        .push(
            NewJob::new(t.clone(), "x")
                .with_id(id.clone())
                .with_ttr(Duration::from_secs(1))
                .with_max_attempts(2)
                .with_backoff(Backoff::fixed(Duration::from_millis(100))),
        )
        .await
        .unwrap();
    let job = dead(&engine, &t, &id, Duration::from_secs(20)).await;
    assert_eq!(job.attempts, 2);
    let reason = job.last_error.unwrap_or_default();
    assert!(
        reason.contains("timed out") || reason.contains("lease"),
        "{reason}"
    );
    assert!(
        r.got.lock().unwrap().len() <= 2,
        "sent more than its attempts"
    );
}

/// A receiver that is down (nothing listens on its port) when the jobs fall due gets every
/// one of them once it comes up, each retried with its back-off meanwhile (counted as
/// `connect` failures), none lost and none sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_a_while_gets_everything_when_it_comes_back() {
    let (engine, _dir) = sqlite();
    // Take a free port and leave it closed for now.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let t = topic("down");
    engine
        .put_destination(&t, &webhook_doc(addr, &[OLD], 4))
        .await
        .unwrap();
    let f = forward(engine.clone());
    let backoff = Backoff::exponential(Duration::from_millis(100), Duration::from_millis(500));
    let jobs = (0..20)
        .map(|i| {
            NewJob::new(t.clone(), "x")
                .with_id(JobId::new(format!("d{i}")).unwrap())
                .with_max_attempts(50)
                .with_backoff(backoff)
        })
        .collect();
    engine.push_batch(jobs).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut registry = prometheus_client::registry::Registry::with_prefix("delayq");
    f.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains(r#"cause="connect"} "#), "{text}");

    let r = Arc::new(Receiver {
        secrets: vec![OLD.into()],
        ..Receiver::default()
    });
    serve_on(
        r.clone(),
        tokio::net::TcpListener::bind(addr).await.unwrap(),
    );
    until(
        "every job after the receiver came up",
        Duration::from_secs(20),
        || r.got.lock().unwrap().len() >= 20,
    )
    .await;
    until_acked(&engine, &t, Duration::from_secs(10)).await;
    let got = r.got.lock().unwrap().clone();
    let mut ids: Vec<&str> = got.iter().map(|g| g.job.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!((ids.len(), got.len()), (20, 20), "each job once");
    assert!(
        got.iter().all(|g| g.attempt > 1),
        "every job was retried meanwhile"
    );
}

/// How the Standard Webhooks libraries verify a request, in Python's standard library: the
/// secret read as `standardwebhooks.Webhook(secret)` reads it (the part after `whsec_`,
/// `base64.b64decode(secret + "==")`, so padded or not), the timestamp within 5 minutes,
/// any `v1` signature matching. When the `standardwebhooks` package itself is importable,
/// its `Webhook(secret).verify` must agree. Reads `{"secret", "headers", "body_b64"}` on
/// standard input; exits 0 and prints `verified` when the request verifies.
const VERIFY_PY: &str = r#"
import base64, hashlib, hmac, json, sys, time
req = json.load(sys.stdin)
secret = req["secret"]
if secret.startswith("whsec_"):
    secret = secret[len("whsec_"):]
key = base64.b64decode(secret + "==")
h = {k.lower(): v for k, v in req["headers"].items()}
body = base64.b64decode(req["body_b64"])
ts = int(h["webhook-timestamp"])
fresh = abs(time.time() - ts) <= 300
want = hmac.new(key, f'{h["webhook-id"]}.{ts}.'.encode() + body, hashlib.sha256).digest()
ok = fresh and any(
    version == "v1" and hmac.compare_digest(want, base64.b64decode(sig))
    for version, sig in (part.split(",", 1) for part in h["webhook-signature"].split(" "))
)
try:
    import standardwebhooks
except ImportError:
    standardwebhooks = None
if standardwebhooks is not None:
    try:
        standardwebhooks.Webhook(req["secret"]).verify(body, h, json_parse=False)
        library = True
    except Exception:
        library = False
    assert library == ok, f"the standardwebhooks library says {library}, the replica {ok}"
print("verified" if ok else "not verified")
sys.exit(0 if ok else 1)
"#;

/// Runs [`VERIFY_PY`] with `python3` (or `DELAYQ_PYTHON`) on one request; true when it
/// verifies.
fn python_verifies(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    use std::io::Write as _;
    let python = std::env::var("DELAYQ_PYTHON").unwrap_or_else(|_| "python3".into());
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().into()))
        .collect();
    let input = serde_json::json!({
        "secret": secret,
        "headers": headers,
        "body_b64": base64::engine::general_purpose::STANDARD.encode(body),
    });
    let mut child = std::process::Command::new(&python)
        .args(["-c", VERIFY_PY])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {python} ({e}): install python3 (apt-get install python3) or set DELAYQ_PYTHON")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() || stdout.contains("not verified"),
        "{python} failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.trim() == "verified"
}

// See: issue 36
/// A secret in unpadded base64 (`whsec_` and 43 characters for 32 bytes, as some secret
/// generators write it) is taken, and the requests it signs verify the way the Standard
/// Webhooks libraries verify them, with the same secret as the receiver was given it; a
/// receiver with another key refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpadded_secret_signs_what_standard_webhooks_verifies_issue_36() {
    let (engine, _dir) = sqlite();
    let unpadded = new_secret(0xa7);
    let unpadded = unpadded.trim_end_matches('=').to_string();
    assert_eq!(unpadded.len(), "whsec_".len() + 43);
    let got: Arc<Mutex<Vec<(HeaderMap, Bytes)>>> = Arc::default();
    let record = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push((headers, body));
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let t = topic("unpadded");
    let doc = serde_json::json!({
        "type": "webhook",
        "url": format!("http://{addr}/hook"),
        "secrets": [unpadded],
    });
    engine.put_destination(&t, &doc.to_string()).await.unwrap();
    let _f = forward(engine.clone());
    engine
        .push(NewJob::new(t.clone(), r#"{"order": 42}"#).with_id(JobId::new("u1").unwrap()))
        .await
        .unwrap();
    until("the signed request", Duration::from_secs(10), || {
        !got.lock().unwrap().is_empty()
    })
    .await;
    let (headers, body) = got.lock().unwrap()[0].clone();
    assert!(
        python_verifies(&unpadded, &headers, &body),
        "signed with an unpadded secret, not verified with it"
    );
    assert!(
        python_verifies(&format!("{unpadded}="), &headers, &body),
        "the same secret padded"
    );
    assert!(
        !python_verifies(&new_secret(0xa8), &headers, &body),
        "another key verified it"
    );
}
