//! The schedule endpoints (`/v1/schedules`), on each engine: put, get, list, replace and
//! delete, and bad fields refused naming the field.

use crate::Setup;
use crate::common::{TestServer, code};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::json;

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

engine_tests! {
    schedules_over_http_issue_14(Limits::default()),
}
