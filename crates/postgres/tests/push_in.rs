//! A push that joins the caller's own transaction (issue 21): the job exists if and only if
//! that transaction commits, a reserver waiting meanwhile gets it at the commit (or at its
//! due time), and a refused push leaves the caller's transaction usable.

use std::time::Duration;

use delayq_core::{Engine, Error, JobId, NewJob, Reserve, Timestamp, Topic};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;

async fn setup() -> (PostgresServer, PostgresEngine, tokio_postgres::Client) {
    let server = PostgresServer::start();
    let engine = PostgresEngine::connect(PostgresConfig::new(server.url()))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", server.log()));
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("the application's connection");
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE orders (id integer PRIMARY KEY)")
        .await
        .expect("the application's table");
    (server, engine, client)
}

fn topic() -> Topic {
    Topic::new("orders").expect("topic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_transaction_leaves_no_job() {
    let (_server, engine, mut client) = setup().await;
    let tx_job = NewJob::new(topic(), "cancel 1").with_id(JobId::new("o-1").expect("id"));
    let mut tx = client.transaction().await.expect("begin");
    tx.execute("INSERT INTO orders (id) VALUES (1)", &[])
        .await
        .expect("the order");
    let pushed = engine.push_in(&mut tx, tx_job).await.expect("push in");
    assert!(pushed.created);
    tx.rollback().await.expect("rollback");

    let id = JobId::new("o-1").expect("id");
    assert_eq!(engine.get(&topic(), &id).await.expect("get"), None);
    let got = engine
        .reserve(&Reserve::new(topic()).wait(Duration::from_millis(300)))
        .await
        .expect("reserve");
    assert!(got.is_empty(), "a rolled back push delivered {got:?}");
    let orders: i64 = client
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(orders, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_makes_the_job_due_on_time() {
    let (_server, engine, mut client) = setup().await;
    // A worker waits before the job exists.
    let waiting = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let req = Reserve::new(topic()).wait(Duration::from_secs(10));
            engine.reserve(&req).await.expect("reserve")
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut tx = client.transaction().await.expect("begin");
    tx.execute("INSERT INTO orders (id) VALUES (2)", &[])
        .await
        .expect("the order");
    let job = NewJob::new(topic(), "cancel 2")
        .with_id(JobId::new("o-2").expect("id"))
        .with_delay(Duration::from_millis(400));
    engine.push_in(&mut tx, job).await.expect("push in");
    // Not visible to anyone before the commit.
    let id = JobId::new("o-2").expect("id");
    assert_eq!(engine.get(&topic(), &id).await.expect("get"), None);
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.commit().await.expect("commit");

    let got = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the worker answers")
        .expect("worker");
    assert_eq!(got.len(), 1, "{got:?}");
    let d = &got[0];
    assert_eq!(d.job.id, id);
    // Woken at its due time, not by the waiters' ten-second safety look.
    assert!(
        d.lateness < Duration::from_secs(2),
        "late by {:?}",
        d.lateness
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_push_leaves_the_callers_transaction_usable() {
    let (_server, engine, mut client) = setup().await;
    let mut tx = client.transaction().await.expect("begin");
    tx.execute("INSERT INTO orders (id) VALUES (3)", &[])
        .await
        .expect("the order");
    let far = Timestamp::from_millis(
        engine.now().await.expect("now").as_millis() + 20 * 365 * 24 * 3600 * 1000,
    );
    let job = NewJob::new(topic(), "too far").with_ready_at(far);
    match engine.push_in(&mut tx, job).await {
        Err(Error::InvalidDelay { .. }) => {}
        other => panic!("a due time 20 years ahead: {other:?}"),
    }
    // The caller's transaction goes on and commits its own rows, with a good job.
    tx.execute("INSERT INTO orders (id) VALUES (4)", &[])
        .await
        .expect("another order after the refusal");
    let ok = NewJob::new(topic(), "cancel 4").with_id(JobId::new("o-4").expect("id"));
    engine.push_in(&mut tx, ok).await.expect("push in");
    tx.commit().await.expect("commit");
    let orders: i64 = client
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(orders, 2);
    let got = engine
        .reserve(&Reserve::new(topic()).max(10))
        .await
        .expect("reserve");
    assert_eq!(got.len(), 1, "only the good job: {got:?}");
}
