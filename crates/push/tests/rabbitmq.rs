//! The RabbitMQ destination end to end: a real RabbitMQ node the test starts
//! (delayq_testkit::RabbitMqServer, never the machine's own), an exchange bound to a queue,
//! a forwarder over the embedded engine; what the queue holds is read back message by
//! message.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;
use common::{failure_with, forward, jobs, sqlite, until_acked};

use std::collections::HashMap;
use std::time::Duration;

use delayq_core::{JobId, Topic};
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};

/// One message as the queue holds it.
#[derive(Debug)]
struct Got {
    job_id: String,
    attempt: i64,
    message_id: String,
    persistent: bool,
    content_type: Option<String>,
    body: String,
}

async fn channel(url: &str) -> (Connection, Channel) {
    let c = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    (c, ch)
}

/// Declares the durable direct exchange `orders`.
async fn declare_exchange(ch: &Channel) {
    ch.exchange_declare(
        "orders".into(),
        ExchangeKind::Direct,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Declares the durable queue `cancel`, bound to `orders` by `order.cancel`.
async fn declare_queue(ch: &Channel) {
    ch.queue_declare(
        "cancel".into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        "cancel".into(),
        "orders".into(),
        "order.cancel".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Every message of queue `cancel`, taken off it in order.
async fn drain(ch: &Channel) -> Vec<Got> {
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get("cancel".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        let p = &m.delivery.properties;
        let headers = p.headers().clone().unwrap_or_default();
        let header = |k: &str| headers.inner().get(k).cloned();
        let job_id = match header("delayq-job-id") {
            Some(AMQPValue::LongString(s)) => s.to_string(),
            other => panic!("delayq-job-id: {other:?}"),
        };
        let attempt = match header("delayq-attempt") {
            Some(AMQPValue::LongLongInt(n)) => n,
            other => panic!("delayq-attempt: {other:?}"),
        };
        assert!(
            matches!(header("delayq-due-at"), Some(AMQPValue::LongLongInt(n)) if n > 0),
            "{headers:?}"
        );
        out.push(Got {
            job_id,
            attempt,
            message_id: p.message_id().as_ref().unwrap().to_string(),
            persistent: *p.delivery_mode() == Some(2),
            content_type: p.content_type().as_ref().map(|c| c.to_string()),
            body: String::from_utf8_lossy(&m.delivery.data).into_owned(),
        });
    }
    out
}

fn doc(url: &str) -> String {
    serde_json::json!({
        "type": "rabbitmq",
        "url": url,
        "exchange": "orders",
        "routing_key": "order.cancel",
        "content_type": "text/plain",
        "max_concurrency": 8,
    })
    .to_string()
}

/// Every due job is published once to the exchange, persistent, with its message id and
/// headers, and acked after the broker's confirm: the bound queue holds each job exactly
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_is_published_once_and_acked_after_the_confirm() {
    let rabbit = delayq_testkit::RabbitMqServer::start();
    let (_c, ch) = channel(&rabbit.url()).await;
    declare_exchange(&ch).await;
    declare_queue(&ch).await;
    let (engine, _dir) = sqlite();
    let t = Topic::new("orders-rabbit").unwrap();
    engine
        .put_destination(&t, &doc(&rabbit.url()))
        .await
        .unwrap();
    let _f = forward(engine.clone());
    engine.push_batch(jobs(&t, 200, 100)).await.unwrap();
    until_acked(&engine, &t, Duration::from_secs(30)).await;
    let got = drain(&ch).await;
    assert_eq!(got.len(), 200, "each job once");
    let by_id: HashMap<&str, &Got> = got.iter().map(|g| (g.job_id.as_str(), g)).collect();
    assert_eq!(by_id.len(), 200);
    let n7 = by_id["n7"];
    assert_eq!(
        (n7.attempt, n7.body.as_str(), n7.persistent),
        (1, "body-7", true)
    );
    assert_eq!(n7.content_type.as_deref(), Some("text/plain"));
    assert!(
        n7.message_id.starts_with("orders-rabbit/n7/"),
        "{}",
        n7.message_id
    );
}

/// No exchange, then an exchange with no queue bound, then the broker down while jobs fall
/// due: each retries with its back-off (none goes to dead), and once the broker is back
/// with a bound queue every job is in it and acked. A repeat (a publish the broker stored
/// just before it died, unconfirmed) is possible and carries the same message id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_down_or_unroutable_for_a_while_loses_nothing() {
    let mut rabbit = delayq_testkit::RabbitMqServer::start();
    let url = rabbit.url();
    let (engine, _dir) = sqlite();
    let t = Topic::new("orders-down").unwrap();
    engine.put_destination(&t, &doc(&url)).await.unwrap();
    let _f = forward(engine.clone());

    // First: up, but no such exchange.
    engine.push_batch(jobs(&t, 10, 0)).await.unwrap();
    failure_with(&engine, &t, "n0", "has no exchange \"orders\"").await;

    // Then: the exchange, but no queue bound for the routing key.
    {
        let (_c, ch) = channel(&url).await;
        declare_exchange(&ch).await;
    }
    failure_with(&engine, &t, "n0", "no queue is bound").await;

    // Then: down for a while, jobs falling due meanwhile.
    rabbit.kill();
    let more: Vec<_> = jobs(&t, 40, 0).into_iter().skip(10).collect();
    engine.push_batch(more).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(engine.stats(&t).await.unwrap().dead, 0);
    let n0 = engine
        .get(&t, &JobId::new("n0").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(n0.attempts > 1, "{n0:?}");

    // Back, with a bound queue: everything arrives and is acked.
    rabbit.restart();
    let (_c, ch) = channel(&url).await;
    declare_exchange(&ch).await;
    declare_queue(&ch).await;
    until_acked(&engine, &t, Duration::from_secs(60)).await;
    let got = drain(&ch).await;
    let mut by_id: HashMap<&str, Vec<&Got>> = HashMap::new();
    for g in &got {
        by_id.entry(g.job_id.as_str()).or_default().push(g);
    }
    assert_eq!(by_id.len(), 40, "every job: {got:?}");
    for (id, copies) in &by_id {
        assert!(
            copies.iter().all(|c| c.message_id == copies[0].message_id),
            "{id}: {copies:?}"
        );
    }
    // n0 failed for want of an exchange, then of a route, so it came in a later attempt.
    assert!(
        by_id["n0"].iter().all(|g| g.attempt > 1),
        "{:?}",
        by_id["n0"]
    );
}
