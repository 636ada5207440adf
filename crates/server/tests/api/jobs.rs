//! The job endpoints: push (with `on_conflict` and an expiry), batch, get, list (paged
//! with a cursor, filtered by an id prefix) and the job endpoints in one session, on each
//! engine.

use std::time::Duration;

use crate::common::TestServer;
use crate::{Setup, push_ids, small_limits};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::json;

/// The job endpoints in one session, after health and readiness: a push is created, then
/// exists; a get answers every field, the body as text; a binary body goes in and comes out
/// as base64; an id with a slash goes percent-encoded in the path; a batch is answered in
/// order, a duplicate inside; a list pages with a cursor. (The first part of what was one
/// `every_endpoint`; `leases::every_lease_and_topic_endpoint` goes on from the state it
/// leaves.)
async fn every_job_endpoint(setup: Setup) {
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

engine_tests! {
    every_job_endpoint(small_limits()),
    push_on_conflict_over_http_issue_14(Limits::default()),
    expiry_over_http_issue_14(Limits::default()),
    list_filters_by_id_prefix_issue_15(Limits::default()),
}
