//! A topic's push destination (issue 20): put, read (without its secrets), delete. The
//! server's forwarder (`delayq-push`) picks a change up within a second on every server.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use delayq_push::Destination;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use super::extract::{Json, Path};
use super::params::{CommonErrors, TopicPath, topic};
use crate::AppState;

/// The kinds of destination.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // The OpenAPI document and the CLI read it.
pub enum DestinationType {
    /// An HTTP POST per job, signed as Standard Webhooks says.
    Webhook,
    /// A publish per job to a RabbitMQ exchange, acked after the publisher confirm.
    Rabbitmq,
    /// A publish per job to a NATS JetStream subject, acked after the `PubAck`.
    Nats,
}

/// Where a topic's due jobs go: a webhook (`url`, `secrets`, `headers`, `content_type`), a
/// RabbitMQ exchange (`url`, `exchange`, `routing_key`, `content_type`) or a NATS JetStream
/// subject (`url`, `subject`).
///
/// To a webhook, each due job is sent as a `POST` of its body with the headers `webhook-id` (the same for
/// every attempt of one job), `webhook-timestamp`, `webhook-signature` (Standard Webhooks:
/// `v1,<base64 HMAC-SHA256 of id.timestamp.body>`, one per secret), `delayq-topic`,
/// `delayq-job-id`, `delayq-attempt` and `delayq-due-at` (Unix ms). A `2xx` answer acks
/// the job; a `429` or `503` with `Retry-After` is waited out and sent again within the
/// same attempt while the lease allows (at most 5 times, waits adding up to at most half the
/// ttr), else the job is retried after it; other `429` and `5xx` answers retry it with its
/// back-off (or after `Retry-After`); any other status sends it to dead with the status and
/// the start of the answer as the reason. A send may take the job's ttr, or `timeout_ms`
/// when that is shorter.
///
/// Putting a destination fills the topic's unset `max_attempts` and `backoff` with the
/// receiver schedule (10 attempts; 5 s growing fourfold up to 10 h, 10 % jitter: about 27
/// hours in all), so that a receiver down for a while does not send jobs to dead; settings
/// the topic has are kept. `GET /v1/topics/{topic}` shows them.
///
/// To RabbitMQ, each due job is published (persistent, mandatory) to `exchange` with
/// `routing_key`, `message_id` the same for every attempt, and the headers `delayq-topic`,
/// `delayq-job-id`, `delayq-attempt` and `delayq-due-at`; it is acked once the broker
/// confirmed it. A message returned unroutable (no queue bound), a `nack`, a missing
/// exchange or a broker down retry it with its back-off.
///
/// To NATS, each due job is published to `subject` with the headers `Nats-Msg-Id` (the same
/// for every attempt: JetStream drops a repeat), `delayq-topic`, `delayq-job-id`,
/// `delayq-attempt` and `delayq-due-at`, and acked once JetStream's `PubAck` came; a stream
/// must take the subject.
#[derive(Deserialize, ToSchema)]
#[allow(dead_code)] // Read as JSON by `delayq-push`; this type documents it.
pub struct DestinationDoc {
    /// The kind: `webhook`, `rabbitmq` or `nats`.
    #[serde(rename = "type")]
    kind: DestinationType,
    /// A webhook's `http://` or `https://` URL; a RabbitMQ broker's `amqp://` or `amqps://`
    /// URL (`amqp://user:password@host:5672/%2f`); a NATS server's `nats://` or `tls://` URL.
    #[schema(example = "https://example.com/hooks/delayq")]
    url: String,
    /// Webhook: the signing secrets (1 to 10, required): `whsec_` and the standard base64
    /// (padded or not) of 24 to 64 random bytes. Each request carries one signature per secret; rotate by adding the
    /// new secret, moving the receiver to it, then removing the old one. Never returned.
    #[serde(default)]
    #[schema(example = json!(["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]))]
    secrets: Option<Vec<String>>,
    /// RabbitMQ: the exchange (default: the default exchange, which routes to the queue
    /// named by `routing_key`).
    #[serde(default)]
    exchange: Option<String>,
    /// RabbitMQ: the routing key (required; a queue's name for the default exchange).
    #[serde(default)]
    routing_key: Option<String>,
    /// NATS: the subject to publish to (required; no wildcards).
    #[serde(default)]
    subject: Option<String>,
    /// Webhook: extra headers (at most 32), e.g. `authorization`; the values of those that
    /// carry credentials (a name containing `auth`, `cookie`, `token`, `secret`, `key`,
    /// `pass`, `credential`, `session` or `signature`) are never returned.
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    /// Webhook: the requests' `content-type` (default `application/octet-stream`);
    /// RabbitMQ: the messages' `content_type` property (none unless set).
    #[serde(default)]
    content_type: Option<String>,
    /// The most sends in flight from one server (1 to 1,000; default 16).
    #[serde(default)]
    max_concurrency: Option<u32>,
    /// How long one send may wait for its answer, in ms (10 ms to 24 h); unset: until the
    /// job's lease ends (its ttr, less 2 % of it), which also bounds a longer one. A send cut
    /// short is a `timeout`, retried with the job's back-off.
    #[serde(default)]
    #[schema(minimum = 10, maximum = 86_400_000, example = 10000)]
    timeout_ms: Option<u64>,
}

/// A destination as `GET` shows it: no secrets, the values of headers that carry
/// credentials masked, a password in the URL masked.
#[derive(Serialize, Deserialize, ToSchema)]
#[allow(dead_code)] // The OpenAPI document and the CLI read it; the server writes `public_view`.
pub struct DestinationView {
    /// The kind: `webhook`, `rabbitmq` or `nats`.
    #[serde(rename = "type")]
    pub kind: DestinationType,
    /// The URL (a password in it as `***`).
    pub url: String,
    /// Webhook: how many signing secrets it has.
    pub secret_count: Option<usize>,
    /// Webhook: the extra headers, the value of each that carries credentials (a name
    /// containing `auth`, `cookie`, `token`, `secret`, `key`, `pass`, `credential`,
    /// `session` or `signature`) shown as `***`.
    pub headers: Option<BTreeMap<String, String>>,
    /// Webhook: the requests' `content-type`; RabbitMQ: the messages' `content_type`.
    pub content_type: Option<String>,
    /// RabbitMQ: the exchange (empty: the default exchange).
    pub exchange: Option<String>,
    /// RabbitMQ: the routing key.
    pub routing_key: Option<String>,
    /// NATS: the subject.
    pub subject: Option<String>,
    /// The most sends in flight from one server.
    pub max_concurrency: u32,
    /// How long one send may wait for its answer, in ms; null: until the job's lease ends.
    pub timeout_ms: Option<u64>,
}

/// The topic has no destination.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum NoDestination {
    /// The topic has no destination (`not_found`).
    #[response(status = 404)]
    NotFound(super::error::ErrorBody),
}

fn no_destination(t: &delayq_core::Topic) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("topic {t} has no destination; PUT one to /v1/topics/{t}/destination"),
    )
}

/// Read a topic's destination, without its secrets.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/destination",
    tag = "topics",
    params(TopicPath),
    responses(
        (status = 200, description = "The destination", body = DestinationView),
        NoDestination,
        CommonErrors
    )
)]
pub async fn get_destination(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let t = topic(&path.topic)?;
    let stored = state
        .engine
        .destination(&t)
        .await?
        .ok_or_else(|| no_destination(&t))?;
    let d = Destination::from_json(&stored.doc).map_err(|e| {
        tracing::error!(topic = %t, error = %e, "a stored destination does not read");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the stored destination does not read; PUT it again",
        )
    })?;
    Ok(axum::Json(d.public_view()))
}

/// Give a topic a destination (replacing the one it had), for every server of the engine.
///
/// Every server then sends the topic's due jobs there, within a second, and acks each one
/// once the destination confirmed it (at-least-once: a job is sent again only after a lease
/// expired, e.g. a server killed mid-send). Workers may still reserve from the topic too.
/// The topic's unset `max_attempts` and `backoff` become the receiver schedule (10
/// attempts over about 27 hours), for jobs pushed from then on without their own.
#[utoipa::path(
    put,
    path = "/v1/topics/{topic}/destination",
    tag = "topics",
    params(TopicPath),
    request_body = DestinationDoc,
    responses(
        (status = 200, description = "The destination now in force, without its secrets", body = DestinationView),
        CommonErrors
    )
)]
pub async fn put_destination(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(doc): Json<serde_json::Value>,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let t = topic(&path.topic)?;
    let d = Destination::from_json(&doc.to_string()).map_err(|e| {
        let err = ApiError::invalid_argument(e.message.clone());
        match e.pointer() {
            Some(p) => err.at(p),
            None => err,
        }
    })?;
    delayq_push::put_destination(state.engine.as_ref(), &t, &d).await?;
    Ok(axum::Json(d.public_view()))
}

/// Remove a topic's destination: its jobs stay and wait for workers.
#[utoipa::path(
    delete,
    path = "/v1/topics/{topic}/destination",
    tag = "topics",
    params(TopicPath),
    responses((status = 204, description = "Removed"), NoDestination, CommonErrors)
)]
pub async fn delete_destination(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<StatusCode, ApiError> {
    let t = topic(&path.topic)?;
    if state.engine.delete_destination(&t).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_destination(&t))
    }
}
