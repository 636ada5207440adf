//! Job ids `.` and `..` are refused at push, where the user meets them: a URL path cannot
//! name them (HTTP clients, the CLI and browsers remove dot segments, so
//! `/v1/topics/t/jobs/./ack` becomes `/v1/topics/t/ack`), so a job pushed with one could
//! never be got, acked or deleted again.
//!
//! See: issue 36.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;

use common::{TestServer, code};
use delayq_server::ServerConfig;
use serde_json::json;

#[tokio::test]
async fn ids_dot_and_dot_dot_are_refused_at_push_and_change_nothing_issue_36() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::dir(dir.path())).unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    for id in [".", ".."] {
        let (st, v) = s
            .post("/v1/topics/dots/jobs", json!({"id": id, "body": "x"}))
            .await;
        assert_eq!((st, code(&v)), (400, "invalid_id"), "{id}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("URL path"), "{id}: says why: {v}");
        let (st, v) = s
            .post(
                "/v1/topics/dots/batch",
                json!({"jobs": [{"id": "fine", "body": "x"}, {"id": id, "body": "x"}]}),
            )
            .await;
        assert_eq!((st, code(&v)), (400, "invalid_id"), "{id} in a batch: {v}");
        assert_eq!(v["error"]["index"], 1, "{v}");
    }
    // Nothing was pushed, not even the batch's valid job.
    let (st, v) = s.get("/v1/topics/dots/jobs/fine").await;
    assert_eq!((st, code(&v)), (404, "not_found"), "{v}");
    // Ids made of dots but not only one or two are ordinary ids.
    let (st, v) = s
        .post("/v1/topics/dots/jobs", json!({"id": "...", "body": "x"}))
        .await;
    assert!(st == 200 || st == 201, "{st} {v}");
}
