//! The dashboard's actions on waiting jobs, on each engine: archive one (to dead with a
//! reason), act in bulk on many (listed ids, or a state and an id prefix); a read-only
//! dashboard's server refuses both.

use std::sync::Arc;

use crate::common::{TestServer, code};
use crate::{Setup, push_ids};
use delayq_core::{Limits, Store};
use delayq_server::ServerConfig;
use serde_json::json;

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
async fn read_only(engine: Arc<dyn Store>) -> TestServer {
    TestServer::start(
        engine,
        ServerConfig {
            ui: delayq_server::UiMode::ReadOnly,
            ..ServerConfig::default()
        },
    )
    .await
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

engine_tests! {
    archive_buries_a_waiting_job_issue_15(Limits::default()),
    bulk_acts_on_all_that_match_issue_15(Limits::default()),
}
