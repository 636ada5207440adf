//! Two beanstalkd-protocol servers on one Redis (issue 19: "on any number of servers sharing
//! one Redis"): job numbers never collide, a number put through one is found through the
//! other (`peek`, `stats-job`, `delete`, `kick-job`), a job reserved through one is not the
//! other's to delete, and a client that disconnects gives its jobs back to everyone.

use std::collections::HashSet;
use std::sync::Arc;

use delayq_core::Store;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;

mod common;

use common::Client;

/// A beanstalkd-protocol server on its own connection to `redis`; its address.
async fn server(redis: &RedisServer) -> std::net::SocketAddr {
    let engine: Arc<dyn Store> = Arc::new(
        RedisEngine::connect(RedisConfig::new(redis.url()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", redis.log())),
    );
    common::serve(engine).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_redis_share_jobs_and_numbers() {
    let redis = RedisServer::start();
    let (a, b) = (server(&redis).await, server(&redis).await);

    // Numbers never collide: 300 puts through each server at once, on two tubes.
    let mut tasks = Vec::new();
    for (addr, tube) in [(a, "shared"), (b, "shared"), (a, "other"), (b, "other")] {
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(addr).await;
            c.call(&format!("use {tube}\r\n")).await;
            let mut ids = Vec::new();
            for i in 0..150 {
                ids.push(c.put(&format!("{tube} {i}")).await);
            }
            ids
        }));
    }
    let mut all = HashSet::new();
    for t in tasks {
        for id in t.await.expect("putter") {
            assert!(all.insert(id), "number {id} was given twice");
            assert!(id < 1 << 53, "number {id} is not exact in JavaScript");
        }
    }
    assert_eq!(all.len(), 600);

    // A job put through A is found through B by its number alone.
    let mut ca = Client::connect(a).await;
    let mut cb = Client::connect(b).await;
    ca.call("use cross\r\n").await;
    let id = ca.put("from a").await;
    assert_eq!(
        cb.call(&format!("peek {id}\r\n")).await,
        (format!("FOUND {id} 6"), b"from a".to_vec())
    );
    let (l, yaml) = cb.call(&format!("stats-job {id}\r\n")).await;
    assert!(l.starts_with("OK "), "{l}");
    let yaml = String::from_utf8_lossy(&yaml).into_owned();
    assert!(
        yaml.contains("tube: cross\n") && yaml.contains("state: ready\n"),
        "{yaml}"
    );

    // Reserved through B: not A's to delete; B deletes it.
    cb.call("watch cross\r\n").await;
    cb.call("ignore default\r\n").await;
    assert_eq!(
        cb.call("reserve-with-timeout 5\r\n").await,
        (format!("RESERVED {id} 6"), b"from a".to_vec())
    );
    assert_eq!(ca.call(&format!("delete {id}\r\n")).await.0, "NOT_FOUND");
    assert_eq!(cb.call(&format!("delete {id}\r\n")).await.0, "DELETED");
    assert_eq!(ca.call(&format!("peek {id}\r\n")).await.0, "NOT_FOUND");

    // Buried through B, kicked by number through A.
    let id = ca.put("to bury").await;
    assert!(
        cb.call("reserve-with-timeout 5\r\n")
            .await
            .0
            .starts_with(&format!("RESERVED {id} ")),
    );
    assert_eq!(cb.call(&format!("bury {id} 3\r\n")).await.0, "BURIED");
    assert_eq!(ca.call(&format!("kick-job {id}\r\n")).await.0, "KICKED");

    // A client of B that disconnects holding the job gives it back: A's client gets it.
    let mut holder = Client::connect(b).await;
    holder.call("watch cross\r\n").await;
    assert!(
        holder
            .call("reserve-with-timeout 5\r\n")
            .await
            .0
            .starts_with(&format!("RESERVED {id} "))
    );
    drop(holder);
    let mut taker = Client::connect(a).await;
    taker.call("watch cross\r\n").await;
    let (l, body) = taker.call("reserve-with-timeout 5\r\n").await;
    assert_eq!(
        (l, body),
        (format!("RESERVED {id} 7"), b"to bury".to_vec()),
        "a job held by a closed connection is ready again at once (ttr is 60 s)"
    );
}
