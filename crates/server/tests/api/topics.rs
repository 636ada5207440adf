//! The topic endpoints, on each engine: the list of topics (a purged topic leaves it, a
//! paused empty one stays), pause and resume, a typo's topic answered 404, settings, and
//! retention (done jobs).

use crate::Setup;
use crate::common::{TestServer, code};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::{Value, json};

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

engine_tests! {
    purged_topic_leaves_topics_and_metrics_issue_12(Limits::default()),
    pause_over_http_issue_14(Limits::default()),
    unknown_topics_are_said_and_paused_empty_ones_listed_issue_36(Limits::default()),
    topic_settings_over_http(Limits::default()),
    done_jobs_over_http(Limits::default()),
}
