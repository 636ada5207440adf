//! Reserving and settling, on each engine: the lease endpoints in one session (reserve,
//! touch, nack, bury, kick, release, ack, a batch ack), then the topic endpoints on what
//! they leave; a reserve that settles first; receipts; and what a delivery says.

use std::time::{Duration, Instant};

use crate::common::{TestServer, code};
use crate::{Setup, small_limits};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::{Value, json};

/// The lease endpoints in one session, from the state `jobs::every_job_endpoint` leaves:
/// reschedule to now, reserve with a lease, touch, nack (a retry), reserve again, bury, the
/// dead list, kick, release (the attempt not counted), ack; a batch ack, one lease good and
/// one stale; a nack to dead and a kick of the whole topic. Then, on what those leave, the
/// topic endpoints: stats, the list of topics, a delete and a purge; and the OpenAPI
/// document names every route. (The second part of what was one `every_endpoint`.)
async fn every_lease_and_topic_endpoint(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    // The state the job endpoints leave (`jobs::every_job_endpoint`, the same requests): o-1,
    // a binary body and an id with a slash, delayed an hour, in orders; m1 and m2 in mail.
    for job in [
        json!({"id": "o-1", "body": "cancel 1", "delay_ms": 3_600_000, "priority": 2, "ttr_ms": 5000, "max_attempts": 4, "backoff": {"kind": "fixed", "base_ms": 250}}),
        json!({"id": "bin", "body": "/wA=", "encoding": "base64", "delay_ms": 3_600_000}),
        json!({"id": "a/b", "body": "x", "delay_ms": 3_600_000}),
    ] {
        let (st, v) = s.post("/v1/topics/orders/jobs", job).await;
        assert_eq!(st, 201, "{v}");
    }
    let (st, v) = s.post("/v1/topics/mail/batch", json!({"jobs": [{"id": "m1", "body": "1"}, {"id": "m2", "body": "2"}, {"id": "m1", "body": "again"}]})).await;
    assert_eq!(st, 200, "{v}");

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

engine_tests! {
    every_lease_and_topic_endpoint(small_limits()),
    reserve_settles_first(Limits::default()),
    receipts_answer_for_deliveries_issue_12(Limits::default()),
    deliveries_say_each_fact_once_issue_12(Limits::default()),
}
