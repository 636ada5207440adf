//! Long-poll reserves, on each engine: one answers as soon as a job is due, or empty when
//! its wait ends; a wait over the server's limit is cut to it; a shutdown ends the open
//! ones.

use std::time::{Duration, Instant};

use crate::Setup;
use crate::common::TestServer;
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::{Value, json};

async fn long_poll_returns_when_a_job_is_due(setup: Setup) {
    let s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let client = s.client.clone();
    let url = s.url("/v1/reserve");
    let start = Instant::now();
    let poll = tokio::spawn(async move {
        let r = client
            .post(url)
            .json(&json!({"topics": ["lp"], "wait_ms": 20_000}))
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap(),
            start.elapsed(),
        )
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.post(
        "/v1/topics/lp/jobs",
        json!({"body": "due soon", "delay_ms": 300}),
    )
    .await;
    let (st, v, took) = poll.await.unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["jobs"][0]["job"]["body"], "due soon");
    assert!(
        took < Duration::from_secs(3),
        "the long-poll answered after {took:?}"
    );
    assert!(v["jobs"][0]["lateness_ms"].as_f64().unwrap() < 100.0, "{v}");
    // With nothing due, it answers empty when the wait ends.
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["lp"], "wait_ms": 200}))
        .await;
    assert_eq!((st, v["jobs"].as_array().map(Vec::len)), (200, Some(0)));
}

async fn shutdown_ends_open_long_polls(setup: Setup) {
    let mut s = TestServer::start(setup.engine, ServerConfig::default()).await;
    let client = s.client.clone();
    let url = s.url("/v1/reserve");
    let poll = tokio::spawn(async move {
        let start = Instant::now();
        let r = client
            .post(url)
            .json(&json!({"topics": ["sd"], "wait_ms": 25_000}))
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap(),
            start.elapsed(),
        )
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.begin_shutdown();
    let (st, v, took) = poll.await.unwrap();
    assert_eq!(
        (st, v["jobs"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the long-poll took {took:?} to end"
    );
    s.shutdown().await;
    assert!(
        reqwest::get(s.url("/healthz")).await.is_err(),
        "the server still accepts connections"
    );
}

/// A wait over the server's long-poll limit is cut to it, not refused, and the answer says
/// the wait used.
async fn long_wait_is_cut_to_the_limit_issue_12(setup: Setup) {
    // See: issue 12
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            max_wait: Duration::from_millis(300),
            ..ServerConfig::default()
        },
    )
    .await;
    let started = Instant::now();
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["cut"], "wait_ms": 31_000}))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["jobs"].as_array().map(Vec::len), &v["wait_ms"]),
        (Some(0), &json!(300))
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the reserve waited longer than the server's limit"
    );
    for (asked, used) in [(json!(100), 100), (json!(null), 0), (json!(u64::MAX), 300)] {
        let (st, v) = s
            .post("/v1/reserve", json!({"topics": ["cut"], "wait_ms": asked}))
            .await;
        assert_eq!((st, &v["wait_ms"]), (200, &json!(used)), "{v}");
    }
    s.post("/v1/topics/cut/jobs", json!({"body": "x"})).await;
    let (_, v) = s
        .post("/v1/reserve", json!({"topics": ["cut"], "wait_ms": 31_000}))
        .await;
    assert_eq!(
        (v["jobs"][0]["job"]["body"].as_str(), &v["wait_ms"]),
        (Some("x"), &json!(300))
    );
}

engine_tests! {
    long_poll_returns_when_a_job_is_due(Limits::default()),
    shutdown_ends_open_long_polls(Limits::default()),
    long_wait_is_cut_to_the_limit_issue_12(Limits::default()),
}
