//! Bearer tokens: on and off (on each engine), the scheme's case, and `metrics_public`
//! leaving only `/metrics` open.

use crate::common::{TestServer, code};
use crate::{Setup, sqlite};
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::Value;

async fn auth_on_and_off(setup: Setup) {
    let token = "a-long-enough-secret-token".to_string();
    let s = TestServer::start(
        setup.engine.clone(),
        ServerConfig {
            tokens: vec![token.clone()],
            ..ServerConfig::default()
        },
    )
    .await;
    let anonymous = reqwest::Client::new();
    for path in ["/v1/topics", "/metrics", "/v1/series"] {
        let r = anonymous.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let v: Value = r.json().await.unwrap();
        assert_eq!(code(&v), "unauthorized");
    }
    let r = anonymous
        .get(s.url("/v1/topics"))
        .bearer_auth("wrong-token-of-some-length")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    for path in ["/healthz", "/readyz", "/v1/openapi.json"] {
        assert_eq!(
            anonymous
                .get(s.url(path))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            200,
            "{path} stays open"
        );
    }
    assert_eq!(s.get("/v1/topics").await.0, 200, "the token is accepted");
    let open = TestServer::start(setup.engine, ServerConfig::default()).await;
    assert_eq!(
        anonymous
            .get(open.url("/v1/topics"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}

/// The `Bearer` scheme is case-insensitive (RFC 7235): `bearer`, `BEARER` are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_scheme_is_case_insensitive_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let token = "a-long-enough-secret-token";
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            tokens: vec![token.to_string()],
            ..ServerConfig::default()
        },
    )
    .await;
    let anonymous = reqwest::Client::new();
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let r = anonymous
            .get(s.url("/v1/topics"))
            .header("authorization", format!("{scheme} {token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{scheme}");
    }
    let r = anonymous
        .get(s.url("/v1/topics"))
        .header("authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "another scheme is refused");
}

/// With tokens set, `metrics_public` leaves `/metrics` open for scrapers; the API still
/// needs a token and the OpenAPI document stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_public_leaves_only_metrics_open_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            tokens: vec!["a-long-enough-secret-token".into()],
            metrics_public: true,
            ..ServerConfig::default()
        },
    )
    .await;
    let anonymous = reqwest::Client::new();
    for (path, status) in [
        ("/metrics", 200),
        ("/v1/openapi.json", 200),
        ("/healthz", 200),
        ("/v1/topics", 401),
    ] {
        let r = anonymous.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
    }
}

engine_tests! {
    auth_on_and_off(Limits::default()),
}
