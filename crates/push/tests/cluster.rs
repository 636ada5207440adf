//! Push delivery on a Redis Cluster whose primary stops answering (SIGSTOP: its connections
//! stay open and nothing answers): the forwarder runs one worker per topic, so a topic on a
//! healthy primary keeps being delivered to its webhook while the stopped primary holds up
//! only its own topic, even when that primary also holds the destinations
//! (`delayq:destinations`, read once a second: the forwarder keeps its workers while the read
//! fails). Once the primary is continued, its topic's jobs are delivered too, each once.
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;
use common::forward;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use delayq_core::{Engine, JobId, NewJob, Store, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisCluster, Stopped};

/// The slot timeout: a call over several slots waits that long at most for a silent one.
const SLOT_TIMEOUT: Duration = Duration::from_millis(500);

/// How long a job of the healthy topic may take from its push to its webhook while the
/// other primary is stopped: its due time is now, the forwarder's long-poll wakes at once;
/// room for a busy machine, far below the stop (the response timeout is 30 s here).
const NOT_HELD: Duration = Duration::from_secs(3);

/// The webhook requests received, by job id, with when each arrived.
type Received = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

/// A receiver on a free loopback port that answers 204 and records each job id.
async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let record = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let record = record.clone();
            async move {
                let id = headers
                    .get("delayq-job-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                record
                    .lock()
                    .unwrap()
                    .entry(id)
                    .or_default()
                    .push(Instant::now());
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// Waits (bounded) until `id` reached the receiver; when it did.
async fn arrived(got: &Received, id: &str, limit: Duration) -> Instant {
    let start = Instant::now();
    loop {
        if let Some(at) = got.lock().unwrap().get(id).and_then(|v| v.first().copied()) {
            return at;
        }
        assert!(
            start.elapsed() < limit,
            "{id} did not arrive within {limit:?}: {:?}",
            got.lock().unwrap().keys().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_primary_holds_up_only_its_own_topics_webhook_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    // The stopped primary holds the destinations; another holds the healthy topic. (The
    // topic registry may be on either: both topics are registered before the stop.)
    let stopped_node = cluster.node_for_key("delayq:destinations");
    let healthy_node = cluster
        .primaries()
        .into_iter()
        .find(|p| p.id != stopped_node.id)
        .unwrap();
    let stalled = Topic::new(stopped_node.topic_named("stalled")).unwrap();
    let healthy = Topic::new(healthy_node.topic_named("healthy")).unwrap();
    let mut config = RedisConfig::new(cluster.url()).with_slot_timeout(SLOT_TIMEOUT);
    config.response_timeout = Duration::from_secs(30);
    let engine: Arc<dyn Store> = Arc::new(RedisEngine::connect(config).await.unwrap());
    let (url, got) = receiver().await;
    for t in [&stalled, &healthy] {
        let doc = serde_json::json!({
            "type": "webhook",
            "url": url,
            "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
            "max_concurrency": 4,
        });
        engine.put_destination(t, &doc.to_string()).await.unwrap();
    }
    let _forwarding = forward(engine.clone());
    let push = |t: &Topic, id: &str| NewJob::new(t.clone(), "x").with_id(JobId::new(id).unwrap());
    for t in [&stalled, &healthy] {
        engine.push(push(t, &format!("{t}-before"))).await.unwrap();
        arrived(&got, &format!("{t}-before"), Duration::from_secs(10)).await;
    }

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);
    // Longer than a destinations refresh (100 ms here), so that the forwarder has failed
    // to read them by the time the pushes below go out.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for k in 0..5 {
        let id = format!("{healthy}-during-{k}");
        let pushed = Instant::now();
        engine.push(push(&healthy, &id)).await.unwrap();
        let at = arrived(&got, &id, NOT_HELD * 2).await;
        let took = at.duration_since(pushed);
        println!("{id} reached its webhook {took:?} after its push");
        assert!(
            took < NOT_HELD,
            "{id} waited on the stopped primary: {took:?}"
        );
    }
    assert!(
        !got.lock()
            .unwrap()
            .contains_key(&format!("{stalled}-during")),
        "a job of the stopped primary's topic was delivered while it was stopped"
    );
    // The stalled topic's push waits for its primary (one slot: the response timeout
    // carries it through); it is sent now and answered once the primary is continued.
    let stalled_push = {
        let (engine, job) = (engine.clone(), push(&stalled, &format!("{stalled}-during")));
        tokio::spawn(async move { engine.push(job).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(stop);
    stalled_push.await.unwrap().unwrap();
    arrived(&got, &format!("{stalled}-during"), Duration::from_secs(30)).await;
    // Every job once.
    let twice: Vec<(String, usize)> = got
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(id, at)| (id.clone(), at.len()))
        .collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert_eq!(got.lock().unwrap().len(), 8);
}
