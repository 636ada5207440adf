//! Over HTTP, a reserve over topics of a Redis Cluster primary that stopped answering and of
//! a healthy one answers the healthy topic's job and names the stopped primary's topics in
//! `unreachable`; `/metrics` shows `delayq_topic_unreachable` at 1 for them (0 for the
//! healthy one) and `/v1/topics` lists them apart, without waiting on the primary for their
//! stats (a listing before any call found the primary silent waits for it at most the slot
//! timeout). Once the primary answers again (its probe is answered), `unreachable` is empty,
//! the gauge 0, and the stopped topics' jobs are delivered.
//!
//! The primary is stopped with SIGSTOP (its connections stay open and nothing answers) and
//! always continued, even when the test fails (`Stopped`'s drop).
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use delayq_core::{Engine, NewJob, Topic};
use delayq_server::ServerConfig;
use delayq_testkit::{RedisCluster, Stopped};
use serde_json::{Value, json};

/// The slot timeout: one wait on the stopped primary far apart from none on a busy machine.
const SLOT_TIMEOUT: Duration = Duration::from_secs(2);

/// The value of `delayq_topic_unreachable` for `topic` in a `/metrics` page.
fn gauge(metrics: &str, topic: &str) -> Option<u8> {
    let line = format!("delayq_topic_unreachable{{topic=\"{topic}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .map(|v| v.trim().parse().unwrap())
}

/// The topics a `/v1/topics` answer lists with their stats, in its order.
fn listed(v: &Value) -> Vec<String> {
    v["topics"]
        .as_array()
        .unwrap_or_else(|| panic!("no topics: {v}"))
        .iter()
        .map(|t| t["topic"].as_str().unwrap().to_string())
        .collect()
}

async fn metrics(s: &TestServer) -> String {
    let (st, page) = s.text("/metrics").await;
    assert_eq!(st, 200, "{page}");
    page
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserve_names_the_topics_of_a_stopped_primary_unreachable_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    // The stopped primary holds neither the topic registry nor the set of paused topics,
    // which the topic list of `/metrics` and `/v1/topics` reads.
    let (stopped_node, healthy_node) = cluster.stoppable_and_healthy();
    let stalled = [
        stopped_node.topic_named("stalled-a"),
        stopped_node.topic_named("stalled-b"),
    ];
    let healthy = healthy_node.topic_named("healthy");
    let config = delayq_redis::RedisConfig::new(cluster.url()).with_slot_timeout(SLOT_TIMEOUT);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    let all = [healthy.clone(), stalled[0].clone(), stalled[1].clone()];
    for t in &all {
        let (st, v) = s
            .post(&format!("/v1/topics/{t}/jobs"), json!({"body": t}))
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let page = metrics(&s).await;
    for t in &all {
        assert_eq!(gauge(&page, t), Some(0), "{t}: {page}");
    }

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);

    // Before any call found the primary silent, the topic list waits for it at most the
    // slot timeout, not the response timeout (10 s), and lists its topics apart; so does
    // `/metrics` right after, without a wait. Both once waited 10 s and answered 503.
    let t0 = Instant::now();
    let (st, v) = s.get("/v1/topics").await;
    let took = t0.elapsed();
    println!("the topic list answered in {took:?} with a primary stopped");
    assert_eq!(st, 200, "{v}");
    assert_eq!(names(&v["unreachable"]), stalled.to_vec(), "{v}");
    assert_eq!(v["topics"][0]["topic"], healthy.as_str(), "{v}");
    assert_eq!(v["topics"].as_array().unwrap().len(), 1, "{v}");
    let page = metrics(&s).await;
    let took = t0.elapsed();
    assert!(
        took < SLOT_TIMEOUT * 2,
        "the topic list and /metrics waited on the stopped primary: {took:?}"
    );
    for t in &stalled {
        assert_eq!(gauge(&page, t), Some(1), "{t}: {page}");
    }

    let (st, v) = s
        .post("/v1/reserve", json!({"topics": all, "max": 10}))
        .await;
    assert_eq!(st, 200, "{v}");
    let got: Vec<&Value> = v["jobs"].as_array().unwrap().iter().collect();
    assert_eq!(got.len(), 1, "{v}");
    assert_eq!(got[0]["job"]["topic"], healthy.as_str(), "{v}");
    assert_eq!(names(&v["unreachable"]), stalled.to_vec(), "{v}");
    let (st, v) = s
        .post(
            "/v1/ack",
            json!({"receipts": [got[0]["receipt"].as_str().unwrap()]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");

    // While the primary does not answer the server's pages say so, without waiting on it.
    let t0 = Instant::now();
    let page = metrics(&s).await;
    assert_eq!(gauge(&page, &healthy), Some(0), "{page}");
    for t in &stalled {
        assert_eq!(gauge(&page, t), Some(1), "{t}: {page}");
    }
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(names(&v["unreachable"]), stalled.to_vec(), "{v}");
    assert_eq!(listed(&v), std::slice::from_ref(&healthy), "{v}");
    assert!(
        t0.elapsed() < SLOT_TIMEOUT * 2,
        "the pages waited on the stopped primary: {:?}",
        t0.elapsed()
    );

    // Continued: the probe of its shard is answered, and its topics are reached (their
    // jobs delivered) and no longer listed.
    drop(stop);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut delivered = BTreeSet::new();
    loop {
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": all, "max": 10, "wait_ms": 200}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        for d in v["jobs"].as_array().unwrap() {
            delivered.insert(d["job"]["topic"].as_str().unwrap().to_string());
        }
        let reached = names(&v["unreachable"]).is_empty();
        if reached && delivered.len() == stalled.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "30 s after SIGCONT: delivered {delivered:?}, last answer {v}"
        );
    }
    assert_eq!(
        delivered,
        stalled.iter().cloned().collect(),
        "the stalled jobs"
    );
    let page = metrics(&s).await;
    for t in &all {
        assert_eq!(gauge(&page, t), Some(0), "{t}: {page}");
    }
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(names(&v["unreachable"]), Vec::<String>::new(), "{v}");
}

/// A batch push to a topic partitioned over every primary, one of them stopped: the jobs of
/// the healthy primaries' partitions are stored within the slot timeout, and the answer is
/// the first failed job's error with what became of each job (`results`, null for a job not
/// stored) and every job's id (`ids`). Sent again with those ids once the primary answers,
/// every job is stored exactly once. The stopped primary once held the whole batch for the
/// response timeout (30 s here) and answered an error that said nothing of the jobs stored,
/// so a batch of generated ids sent again stored those twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_push_stores_the_healthy_partitions_jobs_and_says_which_issue_37() {
    // See: issue 37
    const JOBS: usize = 90;
    let cluster = RedisCluster::start_for_stopping().await;
    let (stopped_node, healthy_node) = cluster.stoppable_and_healthy();
    // The topic's home (its settings and partition count) is on a healthy primary; its 32
    // partitions lie on every primary (all on two of three: a chance of 2.3 in a million).
    let topic = healthy_node.topic_named("parted");
    let mut config = delayq_redis::RedisConfig::new(cluster.url()).with_slot_timeout(SLOT_TIMEOUT);
    config.response_timeout = Duration::from_secs(30);
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    let (st, v) = s
        .call(
            "PUT",
            &format!("/v1/topics/{topic}"),
            Some(json!({"partitions": 32})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s
        .post(
            &format!("/v1/topics/{topic}/jobs"),
            json!({"body": "first"}),
        )
        .await;
    assert_eq!(st, 201, "{v}");

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);
    // No ids given: the server generates them, and the answer must say which.
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| json!({"body": format!("job {i}")}))
        .collect();
    let t0 = Instant::now();
    let (st, v) = s
        .post(&format!("/v1/topics/{topic}/batch"), json!({"jobs": jobs}))
        .await;
    let took = t0.elapsed();
    println!(
        "a batch push with a primary stopped answered {st} in {took:?}: {}",
        v["error"]
    );
    assert!(
        took < SLOT_TIMEOUT * 2,
        "the batch waited on the stopped primary: {took:?}"
    );
    assert_eq!(st, 503, "{v}");
    assert_eq!(v["error"]["code"], "unavailable", "{v}");
    let results = v["results"].as_array().unwrap_or_else(|| panic!("{v}"));
    let ids: Vec<String> = names(&v["ids"]);
    assert_eq!((results.len(), ids.len()), (JOBS, JOBS), "{v}");
    let stored: Vec<usize> = (0..JOBS).filter(|&i| !results[i].is_null()).collect();
    let failed: Vec<usize> = (0..JOBS).filter(|&i| results[i].is_null()).collect();
    assert!(
        !stored.is_empty() && !failed.is_empty(),
        "stored {stored:?}, failed {failed:?}"
    );
    assert_eq!(v["error"]["index"], failed[0], "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{} of {JOBS} jobs were stored", stored.len())),
        "{message}"
    );
    for &i in &stored {
        assert_eq!(results[i]["id"], ids[i].as_str(), "{v}");
        assert_eq!(results[i]["created"], true, "{v}");
    }
    // The stored jobs can be read now; a job not stored is not there (its call waits in
    // the stopped primary).
    let (st, got) = s
        .get(&format!("/v1/topics/{topic}/jobs/{}", ids[stored[0]]))
        .await;
    assert_eq!(st, 200, "{got}");
    assert_eq!(got["body"], format!("job {}", stored[0]), "{got}");

    // Continued: the jobs not stored, sent again with their ids, are stored once (the
    // late calls may have stored them first: then `created` is false), and the topic
    // holds every job once.
    drop(stop);
    let again: Vec<Value> = failed
        .iter()
        .map(|&i| json!({"id": ids[i], "body": format!("job {i}")}))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let (st, v) = s
            .post(&format!("/v1/topics/{topic}/batch"), json!({"jobs": again}))
            .await;
        if st == 200 {
            break v;
        }
        assert_eq!(st, 503, "{v}");
        assert!(Instant::now() < deadline, "30 s after SIGCONT: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let answered: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let wanted: Vec<&str> = failed.iter().map(|&i| ids[i].as_str()).collect();
    assert_eq!(answered, wanted, "{v}");
    let (st, stats) = s.get(&format!("/v1/topics/{topic}/stats")).await;
    assert_eq!(st, 200, "{stats}");
    assert_eq!(stats["ready"], JOBS + 1, "every job once: {stats}");
}

/// The primary holding the topic registry (`delayq:topics`) stops answering: the topic list
/// and `/metrics` answer within the slot timeout with the topics known before (the registry
/// as this server last read it), the healthy topic with its stats and the stopped
/// primary's own topic as unreachable; the dashboard, which reads the same list, keeps
/// working. They once waited for the response timeout (30 s here) and answered 503. Once
/// the primary answers again, a topic registered meanwhile by another server is listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_topic_list_answers_while_the_registry_primary_is_stopped_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    let stopped_node = cluster.node_for_key("delayq:topics");
    let healthy_node = cluster
        .primaries()
        .into_iter()
        .find(|p| p.id != stopped_node.id)
        .unwrap();
    let stalled = stopped_node.topic_named("on-registry");
    let healthy = healthy_node.topic_named("healthy");
    let config = || {
        let mut c = delayq_redis::RedisConfig::new(cluster.url()).with_slot_timeout(SLOT_TIMEOUT);
        c.response_timeout = Duration::from_secs(30);
        c
    };
    let engine = delayq_redis::RedisEngine::connect(config()).await.unwrap();
    let s = TestServer::start(Arc::new(engine), ServerConfig::default()).await;
    for t in [&healthy, &stalled] {
        let (st, v) = s
            .post(&format!("/v1/topics/{t}/jobs"), json!({"body": t}))
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["topics"].as_array().unwrap().len(), 2, "{v}");

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stop = Stopped::new(pid);
    let t0 = Instant::now();
    let (st, v) = s.get("/v1/topics").await;
    let took = t0.elapsed();
    println!("the topic list answered {st} in {took:?} with the registry's primary stopped");
    assert_eq!(st, 200, "{v}");
    assert!(
        took < SLOT_TIMEOUT * 3,
        "the list waited on the registry: {took:?}"
    );
    assert_eq!(listed(&v), std::slice::from_ref(&healthy), "{v}");
    assert_eq!(v["topics"][0]["ready"], 1, "{v}");
    assert_eq!(
        names(&v["unreachable"]),
        std::slice::from_ref(&stalled),
        "{v}"
    );
    let t0 = Instant::now();
    let page = metrics(&s).await;
    assert!(t0.elapsed() < SLOT_TIMEOUT * 3, "{:?}", t0.elapsed());
    assert_eq!(gauge(&page, &healthy), Some(0), "{page}");
    assert_eq!(gauge(&page, &stalled), Some(1), "{page}");

    // Continued: a topic another server registered meanwhile is listed.
    drop(stop);
    let other = delayq_redis::RedisEngine::connect(config()).await.unwrap();
    let late = Topic::new(healthy_node.topic_named("late")).unwrap();
    other.push(NewJob::new(late.clone(), "late")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (st, v) = s.get("/v1/topics").await;
        assert_eq!(st, 200, "{v}");
        let listed: BTreeSet<String> = listed(&v).into_iter().collect();
        if listed.len() == 3 && names(&v["unreachable"]).is_empty() {
            assert!(listed.contains(late.as_str()), "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "30 s after SIGCONT: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
