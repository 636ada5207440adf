//! Push delivery (issue 20): a topic with a destination (a webhook, a RabbitMQ exchange, a
//! NATS JetStream subject) has its due jobs sent there by the server, which acks each job only once the destination
//! confirmed it.
//!
//! - `destination`: the destination's JSON document, its checks, and its public view
//!   (no secrets).
//! - `secret`: what is secret in a destination (signing keys, credential headers, a URL's
//!   password), how a secret's key is read and how the rest is masked.
//! - `retry`: the receiver schedule a topic gets with its destination
//!   ([`put_destination`]), and when a `Retry-After` is waited out within the attempt.
//! - `webhook`: a signed POST per job (Standard Webhooks) and what each answer means.
//! - `rabbitmq`: a publish per job to a RabbitMQ exchange, acked after the publisher
//!   confirm.
//! - `nats`: a publish per job to a NATS JetStream subject, acked after the `PubAck`.
//! - `forward`: the [`Forwarder`] every server runs: one worker per destination, kept in
//!   step with the engine's destinations.
//! - `metrics`: deliveries, failures by cause, latency and lateness per topic.

mod destination;
mod forward;
mod metrics;
mod nats;
mod rabbitmq;
mod retry;
mod secret;
mod webhook;

pub use destination::{
    DEFAULT_MAX_CONCURRENCY, Destination, DestinationError, MAX_CONCURRENCY, MAX_HEADERS,
    MAX_SECRETS, MIN_TIMEOUT, Nats, RabbitMq, Webhook,
};
pub use forward::{Forwarder, REFRESH};
pub use metrics::PushMetrics;
pub use nats::Publisher as NatsPublisher;
pub use rabbitmq::Publisher as RabbitMqPublisher;
pub use retry::{
    MAX_WAITS, RECEIVER_MAX_ATTEMPTS, put_destination, receiver_backoff, with_receiver_defaults,
};
pub use secret::{is_secret_header, masked_url, secret_key};
pub use webhook::{Hook, Message, Outcome, Sender, signature};
