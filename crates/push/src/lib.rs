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
//!
//! # How it works
//!
//! Push delivery (issue 20). `destination` is the destination's JSON document: read with the
//! `type` apart so that an error names its field (`secrets[1]`, or as a pointer
//! `/secrets/1`), checked whole (URL, `whsec_` secrets of 24 to 64 bytes, headers delayq does
//! not set itself, `max_concurrency`, `timeout_ms`), and shown without secrets (`public_view`).
//! `secret` owns what is secret in it: a secret's key (standard base64, padded or not, as the
//! Standard Webhooks libraries read it), which headers carry credentials (their values masked,
//! the others shown), a URL's password. The engine stores the document unread
//! (`Engine::put_destination`, one per topic); `retry::put_destination`, which the API calls,
//! stores it and then fills the topic's unset `max_attempts` and `backoff` with the receiver
//! schedule (10 attempts over about 27 hours), so the engine needs no notion of it: jobs
//! pushed afterwards take them as any topic setting. `webhook` signs (the
//! Standard Webhooks scheme, pinned by the specification's own example) and sends one `POST`
//! per job with one shared `reqwest` client, each webhook prepared once when its worker starts
//! (`Hook`: the URL parsed, the secrets' keys as keyed MACs cloned per message, the fixed
//! headers built), and turns the answer into an `Outcome`
//! (delivered, throttled: a `429` or `503` with `Retry-After`, retry with an optional
//! `Retry-After`, refused). `nats` publishes to a JetStream
//! subject over one `async-nats` connection per destination, made at the first send, and
//! waits for the `PubAck` within the job's ttr (`Nats-Msg-Id` = the webhook id, so JetStream
//! drops a resend). `rabbitmq` publishes to an exchange and routing key over one `lapin`
//! connection and one channel in confirm mode per destination (made at the first send; a
//! channel the broker closed, as a missing exchange does, is opened again on the same
//! connection, a lost connection made again), `mandatory` so that an unroutable message comes
//! back with its confirm instead of vanishing, and acks after the `basic.ack` within the job's
//! ttr. `forward` is the `Forwarder`
//! every `AppState` starts: every second it reads `Engine::destinations()` (one `HGETALL` or
//! one query) and keeps one `delayq_worker::Worker` per topic with a destination (concurrency
//! = `max_concurrency`, the worker's own adaptive prefetch so that sends never wait a round
//! trip for their next job, no lease renewal, and `min_lease_left` 0.9, so that a send starts
//! with at least 90 % of the job's ttr and takes at most the rest of its lease: the send's
//! timeout is the lease's end less 2 % of the ttr (at most 1 s) for the nack to arrive, or the
//! destination's `timeout_ms` when sooner, so an unanswered send fails as a `timeout` with the
//! destination's retry, never by the lease running out; `tests/ttr.rs`; a throttled send waits
//! its `Retry-After` and is sent again within the same lease, so it counts no attempt, while
//! `retry::waits_in_place` allows: 5 waits, half the ttr; `tests/retry.rs`),
//! replacing it when the document changes and stopping it when it goes; the worker's handler
//! sends and maps the outcome onto ack, nack (with the `Retry-After` as delay) or bury.
//! `metrics` are the `delayq_push_*` series, registered in the server's registry.
//!
//! **Architecture Invariant:** forwarding uses the contract and nothing else: a job is acked
//! only after its destination confirmed it, so a server killed mid-send loses nothing (the
//! lease runs out and another server sends it again), and servers sharing a topic share its
//! jobs the way workers do.

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
