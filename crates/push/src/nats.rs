//! The NATS JetStream destination: one publish per job to the destination's subject, acked
//! once JetStream's `PubAck` says a stream stored it.
//!
//! The message is the job's body with the headers `Nats-Msg-Id` (the same for every attempt
//! of one job: JetStream drops a repeat inside the stream's duplicate window, so a resend
//! after a lease expiry is stored once), `delayq-topic`, `delayq-job-id`, `delayq-attempt`
//! and `delayq-due-at` (Unix ms). No `PubAck` within the job's ttr, no connection, or no
//! stream for the subject retries the job with its back-off; a message larger than the
//! server's `max_payload` goes to dead.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::context::PublishErrorKind;

use crate::destination::Nats;
use crate::secret::masked_url;
use crate::webhook::{Message, Outcome};

/// Publishes to one destination over one connection, made at the first send and kept (the
/// client reconnects by itself).
pub struct Publisher {
    url: String,
    subject: String,
    js: tokio::sync::Mutex<Option<jetstream::Context>>,
}

impl Publisher {
    /// A publisher for `n`; it connects at the first send.
    pub fn new(n: &Nats) -> Self {
        Publisher {
            url: n.url.clone(),
            subject: n.subject.clone(),
            js: tokio::sync::Mutex::new(None),
        }
    }

    async fn context(&self, timeout: Duration) -> Result<jetstream::Context, Outcome> {
        let mut js = self.js.lock().await;
        if let Some(c) = js.as_ref() {
            return Ok(c.clone());
        }
        let options = async_nats::ConnectOptions::new()
            .connection_timeout(timeout.min(Duration::from_secs(5)))
            .name(concat!("delayq/", env!("CARGO_PKG_VERSION")));
        match options.connect(self.url.as_str()).await {
            Ok(client) => {
                let c = jetstream::new(client);
                *js = Some(c.clone());
                Ok(c)
            }
            Err(e) => Err(Outcome::retry(
                "connect",
                format!("cannot connect to NATS at {}: {e}", masked_url(&self.url)),
            )),
        }
    }

    /// Publishes `msg`, waiting at most `timeout` for JetStream's acknowledgement.
    pub async fn send(&self, msg: &Message<'_>, timeout: Duration) -> Outcome {
        let js = match self.context(timeout).await {
            Ok(js) => js,
            Err(o) => return o,
        };
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", msg.id);
        headers.insert("delayq-topic", msg.topic);
        headers.insert("delayq-job-id", msg.job_id);
        headers.insert("delayq-attempt", msg.attempt.to_string().as_str());
        headers.insert("delayq-due-at", msg.due_at_ms.to_string().as_str());
        let publish = async {
            let ack = js
                .publish_with_headers(self.subject.clone(), headers, msg.body.clone())
                .await?;
            ack.await
        };
        match tokio::time::timeout(timeout, publish).await {
            Ok(Ok(_)) => Outcome::Delivered,
            Err(_) => Outcome::retry(
                "timeout",
                format!(
                    "JetStream did not acknowledge {} within {timeout:?}",
                    self.subject
                ),
            ),
            Ok(Err(e)) => match e.kind() {
                PublishErrorKind::StreamNotFound => Outcome::retry(
                    "no_stream",
                    format!(
                        "no JetStream stream takes subject {}: create one (e.g. `nats stream add`)",
                        self.subject
                    ),
                ),
                PublishErrorKind::MaxPayloadExceeded => Outcome::Refused {
                    cause: "too_large",
                    reason: format!("NATS refused the message: {e}"),
                },
                PublishErrorKind::TimedOut => {
                    Outcome::retry("timeout", format!("JetStream did not acknowledge: {e}"))
                }
                _ => Outcome::retry(
                    "other",
                    format!("publishing to {} failed: {e}", self.subject),
                ),
            },
        }
    }
}
