//! The OpenAPI document as a user gets it (`GET /v1/openapi.json` from the app, driven
//! without a socket) is a valid OpenAPI document: every operation has an `operationId` of
//! its own, a real validator (`openapi-spec-validator`) accepts it, and its numbers say what
//! the server takes.
//!
//! The validator is `DELAYQ_OPENAPI_VALIDATOR` or `openapi-spec-validator` on the PATH;
//! `scripts/test.sh` installs it into `target/openapi-validator-venv`. Without it the test
//! fails and says how to install it: it never skips.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use delayq_server::{AppState, ServerConfig};
use serde_json::Value;
use tower::ServiceExt;

/// The version `scripts/test.sh` pins (`OPENAPI_VALIDATOR_VERSION`).
const VALIDATOR_VERSION: &str = "0.9.0";

/// The document's text as `GET /v1/openapi.json` answers it, from the app over the embedded
/// engine in memory.
async fn served_document() -> String {
    let engine = delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::memory())
        .expect("open the embedded engine in memory");
    let app = delayq_server::app(AppState::new(Arc::new(engine), ServerConfig::default()));
    let request = Request::get("/v1/openapi.json")
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "application/json",
        "the document's content type"
    );
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Every operation of `doc` as (`operationId`, "METHOD /path"); `<none>` for an operation
/// without one.
fn operations(doc: &Value) -> Vec<(String, String)> {
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("the document has paths") {
        for (method, op) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let id = op["operationId"].as_str().unwrap_or("<none>").to_string();
            out.push((id, format!("{} {path}", method.to_uppercase())));
        }
    }
    out
}

// See: issue 36
/// OpenAPI requires each `operationId` to be unique among all operations; tools that
/// generate clients or load the document (openapi-core) refuse it otherwise.
#[tokio::test]
async fn every_operation_in_the_served_document_has_an_operation_id_of_its_own_issue_36() {
    let doc: Value = serde_json::from_str(&served_document().await).unwrap();
    let ops = operations(&doc);
    assert!(
        ops.len() >= 30,
        "the document lists {} operations",
        ops.len()
    );
    let mut by_id: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, route) in &ops {
        by_id.entry(id).or_default().push(route);
    }
    let missing = by_id.remove("<none>").unwrap_or_default();
    assert!(
        missing.is_empty(),
        "operations without an operationId: {missing:?}"
    );
    let duplicates: Vec<String> = by_id
        .iter()
        .filter(|(_, routes)| routes.len() > 1)
        .map(|(id, routes)| format!("`{id}` on {}", routes.join(", ")))
        .collect();
    assert!(
        duplicates.is_empty(),
        "operationIds used more than once: {}",
        duplicates.join("; ")
    );
}

/// The validator: `DELAYQ_OPENAPI_VALIDATOR` or `openapi-spec-validator` on the PATH.
fn validator() -> PathBuf {
    let bin = std::env::var_os("DELAYQ_OPENAPI_VALIDATOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "openapi-spec-validator".into());
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => bin,
        _ => panic!(
            "openapi-spec-validator not found ({}): scripts/test.sh installs it into \
             target/openapi-validator-venv; or run `pip install openapi-spec-validator=={VALIDATOR_VERSION}` \
             and put it on the PATH, or set DELAYQ_OPENAPI_VALIDATOR to its path",
            bin.display()
        ),
    }
}

// See: issue 36
/// The served document passes a real OpenAPI validator, which checks it against the
/// specification's own schema and its rules beyond the schema (unique operationIds, path
/// parameters declared, ...).
#[tokio::test]
async fn the_served_document_passes_openapi_spec_validator_issue_36() {
    let bin = validator();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, served_document().await).unwrap();
    let out = Command::new(&bin)
        .arg("--validation-errors")
        .arg("all")
        .arg(&file)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} rejects /v1/openapi.json ({}):\n{text}",
        bin.display(),
        out.status
    );
    assert!(text.contains("OK"), "{text}");
}

/// Every `priority` property of the document's schemas.
fn priorities(doc: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if let Some(p) = schema["properties"].get("priority") {
            out.push((name.clone(), p.clone()));
        }
    }
    out
}

// See: issue 36
/// The server takes a priority from 0 to 4294967295 (a `u32`); the document must not say
/// `int32`, whose values stop at 2147483647, and must give the bounds.
#[tokio::test]
async fn the_document_gives_priority_the_range_the_server_takes_issue_36() {
    let doc: Value = serde_json::from_str(&served_document().await).unwrap();
    let found = priorities(&doc);
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["PushRequest", "JobDto", "ScheduleRequest", "ScheduleDto"] {
        assert!(names.contains(&want), "no priority in {want}: {names:?}");
    }
    for (name, p) in &found {
        assert_eq!(
            (
                p["format"].as_str(),
                p["minimum"].as_u64(),
                p["maximum"].as_u64()
            ),
            (Some("int64"), Some(0), Some(u64::from(u32::MAX))),
            "{name}.priority is {p}"
        );
    }
}
