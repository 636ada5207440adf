//! The beanstalkd port over a Redis Cluster one of whose primaries stopped answering
//! (SIGSTOP: its connections stay open, nothing answers): a connection watching a tube of
//! the stopped primary and one of a healthy primary reserves the healthy tube's job,
//! `list-tubes` answers with both tubes, `stats` answers (`INTERNAL_ERROR`: beanstalkd has
//! no partial counts), each within a few slot timeouts rather than after the response
//! timeout (10 s) a read of the stopped primary's counts waited before; once the primary
//! is continued, the stopped tube's job is reserved.
//!
//! The primary is always continued, even when the test fails (`Stopped`'s drop).
//!
//! See: issue 37.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Client;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisCluster, Stopped};

/// The slot timeout: a wait on the stopped primary far apart from the response timeout.
const SLOT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long an answer that must not wait for the stopped primary's response timeout may
/// take: a few slot timeouts, well under the 10 s it took.
const NOT_HELD: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_primary_holds_up_only_its_own_tubes_issue_37() {
    // See: issue 37
    let cluster = RedisCluster::start_for_stopping().await;
    // The stopped primary holds neither the topic registry nor the set of paused topics,
    // which `list-tubes` and `stats` read.
    let (stopped_node, healthy_node) = cluster.stoppable_and_healthy();
    // Letters, digits and '-': the tube's topic has the tube's name.
    let stalled = stopped_node.topic_named("stalled");
    let healthy = healthy_node.topic_named("healthy");
    let config = RedisConfig::new(cluster.url()).with_slot_timeout(SLOT_TIMEOUT);
    let engine = RedisEngine::connect(config).await.unwrap();
    let addr = common::serve(Arc::new(engine)).await;
    let mut c = Client::connect(addr).await;
    for tube in [&stalled, &healthy] {
        assert_eq!(
            c.line(&format!("use {tube}\r\n")).await,
            format!("USING {tube}")
        );
        c.put(tube).await;
        assert_eq!(
            c.line(&format!("watch {tube}\r\n")).await.split(' ').next(),
            Some("WATCHING")
        );
    }
    assert_eq!(c.line("ignore default\r\n").await, "WATCHING 2");

    let pid = cluster.server(stopped_node.port).pid().unwrap();
    let stopped = Stopped::new(pid);

    let t0 = Instant::now();
    let (line, body) = c.call("reserve-with-timeout 5\r\n").await;
    let took = t0.elapsed();
    println!("reserve over both tubes with the primary stopped: {line:?} in {took:?}");
    assert!(line.starts_with("RESERVED "), "{line}");
    assert_eq!(String::from_utf8(body).unwrap(), healthy);
    assert!(took < NOT_HELD, "the reserve took {took:?}");
    let id = line.split(' ').nth(1).unwrap().to_string();
    assert_eq!(c.line(&format!("delete {id}\r\n")).await, "DELETED");

    let t0 = Instant::now();
    let (line, body) = c.call("list-tubes\r\n").await;
    let took = t0.elapsed();
    println!("list-tubes with the primary stopped: {line:?} in {took:?}");
    assert!(line.starts_with("OK "), "{line}");
    let yaml = String::from_utf8(body).unwrap();
    for tube in ["default", &stalled, &healthy] {
        assert!(
            yaml.contains(&format!("- {tube}\n")),
            "{tube} not in {yaml:?}"
        );
    }
    assert!(took < NOT_HELD, "list-tubes took {took:?}");

    let t0 = Instant::now();
    let line = c.line("stats\r\n").await;
    let took = t0.elapsed();
    println!("stats with the primary stopped: {line:?} in {took:?}");
    assert_eq!(line, "INTERNAL_ERROR");
    assert!(took < NOT_HELD, "stats took {took:?}");

    drop(stopped);
    let (line, body) = c.call("reserve-with-timeout 10\r\n").await;
    assert!(line.starts_with("RESERVED "), "{line}");
    assert_eq!(String::from_utf8(body).unwrap(), stalled);
    let (line, _) = c.call("stats\r\n").await;
    assert!(line.starts_with("OK "), "{line}");
}
