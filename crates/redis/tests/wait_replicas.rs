//! The wait-replicas option on one primary with one replica, both started by the test
//! (issue 13, item 6): a call answers success only once the replica holds its write, and
//! too few acknowledgements answer `NotReplicated` with the write applied on the primary.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::time::{Duration, Instant};

use delayq_core::{Engine, Error, JobId, NewJob, Reserve, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisOptions, RedisServer};

fn topic(s: &str) -> Topic {
    Topic::new(s).unwrap()
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// A primary and its replica, the replica synced and its stream flowing.
async fn primary_and_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start_with(RedisOptions {
        // Sync a replica at once (Redis 7 otherwise waits 5 s for more replicas).
        extra_args: vec!["--repl-diskless-sync-delay".into(), "0".into()],
        ..RedisOptions::default()
    });
    let replica = RedisServer::start_with(RedisOptions {
        extra_args: vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            primary.port().to_string(),
        ],
        ..RedisOptions::default()
    });
    wait_replicated(&primary).await;
    (primary, replica)
}

/// Waits (at most 30 s) until the replica acknowledges a write made through the primary:
/// `WAIT` on the connection that wrote (one that wrote nothing is answered at once).
async fn wait_replicated(primary: &RedisServer) {
    let mut conn = primary.connection().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (acked,): (usize,) = redis::pipe()
            .cmd("SET")
            .arg("test:sync")
            .arg(1)
            .ignore()
            .cmd("DEL")
            .arg("test:sync")
            .ignore()
            .cmd("WAIT")
            .arg(1)
            // Short: the test connection has a response timeout of its own.
            .arg(100)
            .query_async(&mut conn)
            .await
            .unwrap();
        if acked == 1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not sync; primary log:\n{}",
            primary.log()
        );
    }
}

async fn engine(primary: &RedisServer, replicas: usize, timeout: Duration) -> RedisEngine {
    RedisEngine::connect(RedisConfig::new(primary.url()).with_wait_replicas(replicas, timeout))
        .await
        .unwrap()
}

/// True when the replica holds job `j` of topic `t` (read on the replica itself).
async fn on_replica(replica: &RedisServer, t: &str, j: &str) -> bool {
    let mut conn = replica.connection().await;
    redis::cmd("HEXISTS")
        .arg(format!("delayq:{{{t}}}:jobs"))
        .arg(j)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Sends `signal` (`STOP`, `CONT`) to the server's process.
fn signal(server: &RedisServer, signal: &str) {
    let pid = server.pid().unwrap();
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

#[tokio::test]
async fn a_write_answers_once_the_replica_holds_it_else_not_replicated_issue_13() {
    // See: issue 13
    let (primary, replica) = primary_and_replica().await;
    let t = topic("orders");
    let e = engine(&primary, 1, Duration::from_secs(2)).await;

    // Success means the replica acknowledged the write: it holds the job at once.
    let pushed = e
        .push_batch(
            (0..20)
                .map(|i| NewJob::new(t.clone(), "x").with_id(id(&format!("j{i}"))))
                .collect(),
        )
        .await
        .unwrap();
    assert!(pushed.iter().all(|p| p.created));
    for i in 0..20 {
        assert!(
            on_replica(&replica, "orders", &format!("j{i}")).await,
            "j{i}"
        );
    }
    let got = e.reserve(&Reserve::new(t.clone()).max(5)).await.unwrap();
    assert_eq!(got.len(), 5);
    let leases: Vec<_> = got.iter().map(|d| d.lease.clone().unwrap()).collect();
    assert!(
        e.ack_batch(&leases)
            .await
            .unwrap()
            .iter()
            .all(|r| r.is_ok())
    );
    assert!(
        !on_replica(&replica, "orders", leases[0].id.as_str()).await,
        "an acknowledged ack is on the replica"
    );

    // Asking for more replicas than there are: applied, but answered `NotReplicated`.
    let two = engine(&primary, 2, Duration::from_millis(200)).await;
    match two
        .push(NewJob::new(t.clone(), "y").with_id(id("two")))
        .await
    {
        Err(Error::NotReplicated { acked, wanted }) => assert_eq!((acked, wanted), (1, 2)),
        other => panic!("{other:?}"),
    }
    assert!(e.get(&t, &id("two")).await.unwrap().is_some(), "applied");

    // The replica stops answering: writes are applied on the primary and answered
    // `NotReplicated` (retryable), reads go on; without the option, writes go on too.
    signal(&replica, "STOP");
    let r = e
        .push(NewJob::new(t.clone(), "z").with_id(id("stopped")))
        .await;
    signal(&replica, "CONT");
    match &r {
        Err(
            err @ Error::NotReplicated {
                acked: 0,
                wanted: 1,
            },
        ) => assert!(err.is_retryable()),
        other => panic!("{other:?}"),
    }
    assert!(e.get(&t, &id("stopped")).await.unwrap().is_some());
    // Once the replica is back, retrying the push is safe: the job exists once.
    wait_replicated(&primary).await;
    let again = e
        .push(NewJob::new(t.clone(), "z").with_id(id("stopped")))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(e.stats(&t).await.unwrap().ready, 15 + 2);

    let plain = engine(&primary, 0, Duration::from_secs(1)).await;
    signal(&replica, "STOP");
    let r = plain
        .push(NewJob::new(t.clone(), "w").with_id(id("plain")))
        .await;
    signal(&replica, "CONT");
    assert!(r.unwrap().created, "without the option nothing waits");
}

#[tokio::test]
async fn a_wait_timeout_the_response_timeout_would_cut_is_refused_issue_13() {
    // See: issue 13
    let primary = RedisServer::start();
    let config = RedisConfig::new(primary.url()).with_wait_replicas(1, Duration::from_secs(10));
    match RedisEngine::connect(config).await {
        Err(Error::InvalidConfig { reason }) => {
            assert!(reason.contains("wait timeout"), "{reason}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a 10 s wait timeout with a 10 s response timeout was accepted"),
    }
}
