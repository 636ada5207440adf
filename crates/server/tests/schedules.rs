//! Schedules over HTTP through an outage, on each engine (issue 36: "the 'skip' misfire
//! default delivered 7 jobs at once after a 100 s outage of a 10-second schedule"). Three
//! every-second schedules are put on a server, the server stops for about 4.5 s (its
//! scheduler with it; the engine stays), and a new server on the same engine takes over.
//! Counted are the jobs that can be reserved after its first tick of fires from the one
//! pushed ahead before the outage to the restart (the catch-up): with `skip`, only the fire
//! pushed ahead (it used to be every fire of the last 60 s too); with `once`, that one and
//! the latest missed fire;
//! with `skip` and a `max_lateness_ms` under the outage, none (the fire pushed ahead
//! expired and was dropped). The schedules' expiry fields are answered as put, and bad ones
//! refused at their field.
//!
//! See: issue 36.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, code};
use delayq_core::{Engine, ScheduleName, Store};
use delayq_server::ServerConfig;
use serde_json::{Value, json};

/// The schedules: name (also its topic), misfire policy, extra fields, catch-up expected.
const CASES: [(&str, &str, &str, usize); 3] = [
    ("skip", "skip", "{}", 1),
    ("once", "once", "{}", 2),
    (
        "fresh",
        "skip",
        r#"{"max_lateness_ms": 500, "on_expire": "drop"}"#,
        0,
    ),
];

/// The fire time (ms) in a scheduled job's id, `schedule:<name>:<ms>`.
fn fire_of(id: &str) -> u64 {
    id.rsplit(':').next().unwrap().parse().unwrap()
}

/// The latest fire a schedule has pushed (its progress as the engine keeps it), in ms.
async fn through(engine: &dyn Store, name: &str) -> u64 {
    let name = ScheduleName::new(name).unwrap();
    let stored = engine.schedule(&name).await.unwrap().unwrap();
    stored.through.unwrap().as_millis()
}

/// Waits until a schedule's progress is past `old` (a tick pushed its next fire).
async fn through_past(engine: &dyn Store, name: &str, old: u64) {
    let start = Instant::now();
    loop {
        if through(engine, name).await > old {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{name}: no tick within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reserves (and acks) every job of `topic` that can be reserved now: their fire times, and
/// whether each was pushed as a catch-up: due after its fire time (a missed fire is pushed
/// due at the tick that finds it, while a fire pushed ahead is due at its own time, these
/// schedules having no jitter). Not when it was created: a fire pushed ahead by a tick a
/// moment before it is stamped after it when the push is slow (seen in CI, where all three
/// schedules' first own fire counted as a catch-up).
async fn reserve_all(s: &TestServer, topic: &str) -> Vec<(u64, bool)> {
    let mut fires = Vec::new();
    loop {
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": [topic], "max": 100, "wait_ms": 0}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        let jobs = v["jobs"].as_array().unwrap();
        if jobs.is_empty() {
            return fires;
        }
        let mut settle = Vec::new();
        for d in jobs {
            let id = d["job"]["id"].as_str().unwrap();
            let due = d["job"]["ready_at_ms"].as_u64().unwrap();
            let fire = fire_of(id);
            fires.push((fire, due > fire));
            settle.push(json!({"topic": topic, "id": id, "token": d["token"]}));
        }
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": [topic], "max": 0, "settle": settle}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
    }
}

async fn outage(engine: Arc<dyn Store>) {
    let mut s = TestServer::start(engine.clone(), ServerConfig::default()).await;
    for (name, misfire, extra, _) in CASES {
        let mut def = json!({
            "cron": "* * * * * *", "topic": name, "body": name, "misfire": misfire
        });
        let extra: Value = serde_json::from_str(extra).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            def[k] = v.clone();
        }
        let (st, v) = s
            .call("PUT", &format!("/v1/schedules/{name}"), Some(def))
            .await;
        assert_eq!(st, 200, "{v}");
        for (k, want) in extra.as_object().unwrap() {
            assert_eq!(&v[k], want, "{name}: {k} as put: {v}");
        }
    }
    s.shutdown().await;
    // The outage: no scheduler runs through the fire pushed ahead and the four after it.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let mut before = Vec::new();
    for (name, _, _, _) in CASES {
        before.push(through(engine.as_ref(), name).await);
    }
    // Fires at or after this are the new server's own (pushed ahead as usual, however long
    // its first tick takes under load), not a catch-up.
    let restart = engine.now().await.unwrap().as_millis();
    let s = TestServer::start(engine.clone(), ServerConfig::default()).await;
    let mut got = Vec::new();
    for ((name, _, _, want), ahead) in CASES.into_iter().zip(before) {
        through_past(engine.as_ref(), name, ahead).await;
        let fires = reserve_all(&s, name).await;
        // Fires before the one pushed ahead were due before the outage began. A catch-up
        // pushed by a first tick that came late under load can be for a fire at or after
        // `restart`: it is told from the new server's own fires by being due after its fire.
        let caught_up: Vec<u64> = fires
            .into_iter()
            .filter(|&(f, catch_up)| f >= ahead && (f < restart || catch_up))
            .map(|(f, _)| f)
            .collect();
        got.push((name, want, caught_up));
    }
    for (name, want, caught_up) in &got {
        assert_eq!(
            caught_up.len(),
            *want,
            "{name}: jobs of fires before the restart: {caught_up:?} (all: {got:?})"
        );
    }
    // `once`: the fire pushed ahead and the latest missed one, in that order.
    let once = &got[1].2;
    assert!(once[0] < once[1] && once[1] - once[0] >= 3000, "{once:?}");
}

/// The schedules' expiry fields are refused as a push's are, at their field.
async fn bad_expiry_is_refused(engine: Arc<dyn Store>) {
    let s = TestServer::start(engine, ServerConfig::default()).await;
    let def = json!({"cron": "@hourly", "topic": "t"});
    for (patch, field) in [
        (json!({"max_lateness_ms": 0}), "/max_lateness_ms"),
        (
            json!({"max_lateness_ms": 5, "expires_at": "2030-01-01T00:00:00Z"}),
            "/max_lateness_ms",
        ),
        (json!({"expires_at": "soon"}), "/expires_at"),
        (json!({"on_expire": "drop"}), "/on_expire"),
        (json!({"cron": "0 0 0 1 1 * 2030"}), "/cron"),
    ] {
        let mut body = def.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (st, e) = s.call("PUT", "/v1/schedules/bad", Some(body)).await;
        assert_eq!((st, code(&e)), (400, "invalid_argument"), "{patch}: {e}");
        assert_eq!(e["error"]["field"], field, "{patch}: {e}");
    }
    let (st, v) = s.get("/v1/schedules").await;
    assert_eq!((st, v), (200, json!({"schedules": []})));
    // `expires_at` ends the fires: none at or after it is pushed or announced.
    let (st, v) = s
        .call(
            "PUT",
            "/v1/schedules/ending",
            Some(json!({"cron": "@hourly", "topic": "t", "expires_at": "2001-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["expires_at"], &v["on_expire"], v.get("next_fire")),
        (
            &json!("2001-01-01T00:00:00.000+00:00"),
            &json!("dead"),
            None
        ),
        "{v}"
    );
}

async fn embedded() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::dir(dir.path())).unwrap();
    (Arc::new(engine), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_skip_delivers_the_fire_pushed_ahead_not_a_burst_embedded() {
    let (engine, _dir) = embedded().await;
    outage(engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_skip_delivers_the_fire_pushed_ahead_not_a_burst_redis() {
    let server = delayq_testkit::RedisServer::start();
    let engine = delayq_redis::RedisEngine::connect(delayq_redis::RedisConfig::new(server.url()))
        .await
        .unwrap();
    outage(Arc::new(engine)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_skip_delivers_the_fire_pushed_ahead_not_a_burst_postgres() {
    let server = tokio::task::spawn_blocking(delayq_testkit::PostgresServer::start)
        .await
        .unwrap();
    let engine = delayq_postgres::PostgresEngine::connect(delayq_postgres::PostgresConfig::new(
        server.url(),
    ))
    .await
    .unwrap();
    outage(Arc::new(engine)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedules_bad_expiry_and_year_field_are_refused_at_their_field() {
    let (engine, _dir) = embedded().await;
    bad_expiry_is_refused(engine).await;
}
