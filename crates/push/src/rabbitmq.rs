//! The RabbitMQ destination: one publish per job to the destination's exchange and routing
//! key on a channel in confirm mode, acked once the broker confirms it.
//!
//! The message is the job's body, persistent (`delivery_mode` 2), `mandatory`, with
//! `message_id` (the same for every attempt of one job: a consumer drops a repeat after a
//! lease expiry by it), `app_id` `delayq`, a `timestamp`, the destination's `content_type`,
//! and the headers `delayq-topic`, `delayq-job-id`, `delayq-attempt` and `delayq-due-at`
//! (Unix ms). A confirm (`basic.ack`) that did not come back unroutable acks the job. No
//! confirm within the job's ttr, a `basic.nack`, a message returned unroutable (no queue
//! bound for the routing key), an exchange that does not exist or no connection retry the
//! job with its back-off; a message larger than the broker takes goes to dead.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind};

use crate::destination::RabbitMq;
use crate::secret::masked_url;
use crate::webhook::{Message, Outcome};

/// Publishes to one destination over one connection and one confirm-mode channel, made at
/// the first send and made again once the broker closed either.
pub struct Publisher {
    dest: RabbitMq,
    link: tokio::sync::Mutex<Option<Link>>,
}

/// A connection and its confirm-mode channel. The connection is kept: dropping it closes
/// the channel.
struct Link {
    connection: Connection,
    channel: Channel,
}

impl Publisher {
    /// A publisher for `r`; it connects at the first send.
    pub fn new(r: &RabbitMq) -> Self {
        Publisher {
            dest: r.clone(),
            link: tokio::sync::Mutex::new(None),
        }
    }

    /// The open channel, opened (and the connection made) when there is none.
    async fn channel(&self, timeout: Duration) -> Result<Channel, Outcome> {
        let mut link = self.link.lock().await;
        if let Some(l) = link.as_mut() {
            if l.channel.status().connected() {
                return Ok(l.channel.clone());
            }
            // The broker closed the channel (an exchange that does not exist closes it):
            // a new one on the same connection, while that is up.
            if l.connection.status().connected()
                && let Ok(channel) = confirming(&l.connection).await
            {
                l.channel = channel.clone();
                return Ok(channel);
            }
        }
        *link = None;
        let connect = async {
            let properties = ConnectionProperties::default()
                .with_connection_name(concat!("delayq/", env!("CARGO_PKG_VERSION")).into());
            let connection = Connection::connect(&self.dest.url, properties).await?;
            let channel = confirming(&connection).await?;
            Ok::<_, lapin::Error>(Link {
                connection,
                channel,
            })
        };
        let failed = |e: String| {
            Outcome::retry(
                "connect",
                format!(
                    "cannot connect to RabbitMQ at {}: {e}",
                    masked_url(&self.dest.url)
                ),
            )
        };
        match tokio::time::timeout(timeout.min(Duration::from_secs(5)), connect).await {
            Ok(Ok(l)) => {
                let c = l.channel.clone();
                *link = Some(l);
                Ok(c)
            }
            Ok(Err(e)) => Err(failed(e.to_string())),
            Err(_) => Err(failed("no answer within the time limit".into())),
        }
    }

    /// Publishes `msg`, waiting at most `timeout` for the broker's confirm.
    pub async fn send(&self, msg: &Message<'_>, timeout: Duration) -> Outcome {
        let started = tokio::time::Instant::now();
        let channel = match self.channel(timeout).await {
            Ok(c) => c,
            Err(o) => return o,
        };
        let publish = async {
            channel
                .basic_publish(
                    self.dest.exchange.as_str().into(),
                    self.dest.routing_key.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    msg.body,
                    self.properties(msg),
                )
                .await?
                .await
        };
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, publish).await {
            Ok(Ok(Confirmation::Ack(None))) => Outcome::Delivered,
            Ok(Ok(Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)))) => {
                Outcome::retry(
                    "unroutable",
                    format!(
                        "RabbitMQ returned the message ({} {}): no queue is bound to exchange {:?} for routing key {:?}; bind one",
                        returned.reply_code,
                        returned.reply_text,
                        self.dest.exchange,
                        self.dest.routing_key
                    ),
                )
            }
            Ok(Ok(Confirmation::Nack(None))) => {
                Outcome::retry("nack", "RabbitMQ refused to take the message (basic.nack)")
            }
            // The channel was opened in confirm mode: this does not happen.
            Ok(Ok(Confirmation::NotRequested)) => {
                Outcome::retry("other", "the channel was not in confirm mode")
            }
            Ok(Err(e)) => self.failed(&e),
            Err(_) => Outcome::retry(
                "timeout",
                format!("RabbitMQ did not confirm within {timeout:?}"),
            ),
        }
    }

    fn properties(&self, msg: &Message<'_>) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert(
            "delayq-topic".into(),
            AMQPValue::LongString(msg.topic.into()),
        );
        headers.insert(
            "delayq-job-id".into(),
            AMQPValue::LongString(msg.job_id.into()),
        );
        headers.insert(
            "delayq-attempt".into(),
            AMQPValue::LongLongInt(i64::from(msg.attempt)),
        );
        headers.insert(
            "delayq-due-at".into(),
            AMQPValue::LongLongInt(i64::try_from(msg.due_at_ms).unwrap_or(i64::MAX)),
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut p = BasicProperties::default()
            .with_message_id(msg.id.into())
            .with_app_id("delayq".into())
            .with_delivery_mode(2)
            .with_timestamp(now)
            .with_headers(headers);
        if let Some(ct) = &self.dest.content_type {
            p = p.with_content_type(ct.as_str().into());
        }
        p
    }

    /// What a publish that failed comes to.
    fn failed(&self, e: &lapin::Error) -> Outcome {
        match e.kind() {
            ErrorKind::ProtocolError(p) => match p.kind() {
                AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => Outcome::retry(
                    "no_exchange",
                    format!(
                        "RabbitMQ has no exchange {:?}: declare it ({})",
                        self.dest.exchange,
                        p.get_message()
                    ),
                ),
                AMQPErrorKind::Soft(AMQPSoftError::CONTENTTOOLARGE) => Outcome::Refused {
                    cause: "too_large",
                    reason: format!("RabbitMQ refused the message: {p}"),
                },
                AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)
                    if p.get_message().as_str().contains("larger than") =>
                {
                    Outcome::Refused {
                        cause: "too_large",
                        reason: format!("RabbitMQ refused the message: {p}"),
                    }
                }
                _ => Outcome::retry("other", format!("RabbitMQ closed the channel: {p}")),
            },
            ErrorKind::IOError(_)
            | ErrorKind::InvalidConnectionState(_)
            | ErrorKind::InvalidChannelState(..) => Outcome::retry(
                "connect",
                format!(
                    "the connection to RabbitMQ at {} failed: {e}",
                    masked_url(&self.dest.url)
                ),
            ),
            _ => Outcome::retry("other", format!("publishing to RabbitMQ failed: {e}")),
        }
    }
}

/// A new channel on `connection` with publisher confirms on.
async fn confirming(connection: &Connection) -> lapin::Result<Channel> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}
