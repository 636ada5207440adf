//! What a destination is: its JSON document (what the API takes and the engine stores), the
//! checks a document passes before it is stored, and the view of it that leaves out secrets.
//!
//! ```json
//! {"type": "webhook", "url": "https://example.com/hooks/delayq",
//!  "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
//!  "headers": {"authorization": "Bearer …"}, "content_type": "application/json",
//!  "max_concurrency": 16, "timeout_ms": 10000}
//! ```
//!
//! The file is long (about 510 lines of code, 245 of tests): the checks of every kind of
//! destination are tested next to them.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq_core::limits::MAX_TTR;
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::secret::{is_secret_header, masked_url, secret_key};

/// The most requests one server sends to one destination at once, unless set.
pub const DEFAULT_MAX_CONCURRENCY: u32 = 16;
/// The largest `max_concurrency`.
pub const MAX_CONCURRENCY: u32 = 1000;
/// The most secrets a webhook has at once (rotation keeps two or three).
pub const MAX_SECRETS: usize = 10;
/// The most extra headers of a webhook.
pub const MAX_HEADERS: usize = 32;
/// The shortest `timeout_ms`.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(10);

/// A destination refused: the field at fault (a JSON pointer-like path, `secrets[1]`) and
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DestinationError {
    /// The field at fault.
    pub field: String,
    /// What is wrong and what to send instead.
    pub message: String,
}

impl DestinationError {
    /// The field as a JSON pointer into the document (`/secrets/1`, `/headers/x-tenant`),
    /// `None` for the whole document.
    pub fn pointer(&self) -> Option<String> {
        if self.field == "destination" {
            return None;
        }
        let mut p = String::new();
        let (head, rest) = match self.field.split_once('.') {
            Some((h, r)) => (h, Some(r)),
            None => (self.field.as_str(), None),
        };
        for part in head.split(['[', ']']).filter(|s| !s.is_empty()) {
            p.push('/');
            p.push_str(&part.replace('~', "~0").replace('/', "~1"));
        }
        if let Some(r) = rest {
            p.push('/');
            p.push_str(&r.replace('~', "~0").replace('/', "~1"));
        }
        Some(p)
    }

    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        DestinationError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Where a topic's due jobs go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Destination {
    /// An HTTP POST of each job's body, signed as Standard Webhooks says.
    Webhook(Webhook),
    /// A publish to a NATS JetStream subject, acked after the `PubAck`.
    Nats(Nats),
    /// A publish to a RabbitMQ exchange, acked after the publisher confirm.
    #[serde(rename = "rabbitmq")]
    RabbitMq(RabbitMq),
}

/// A RabbitMQ exchange and routing key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitMq {
    /// `amqp://` or `amqps://` with a host, optionally `user:password@` and a vhost path
    /// (`/%2f` is the default vhost `/`).
    pub url: String,
    /// The exchange; empty (the default) is the default exchange, which routes to the queue
    /// named by the routing key.
    #[serde(default)]
    pub exchange: String,
    /// The routing key: a queue's name for the default exchange.
    pub routing_key: String,
    /// The messages' `content_type` property (none unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The most publishes awaiting their confirm from one server (default 16, at most
    /// 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// How long one send may wait for its answer, in milliseconds (10 ms to 24 h); unset:
    /// until the job's lease ends. A longer one is cut there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl RabbitMq {
    fn validate(&self) -> Result<(), DestinationError> {
        check_url(
            &self.url,
            &["amqp", "amqps"],
            "amqp://user:password@host:5672/%2f",
        )?;
        self.url.parse::<lapin::uri::AMQPUri>().map_err(|e| {
            DestinationError::new(
                "url",
                format!("{e}; send amqp://user:password@host:5672/%2f"),
            )
        })?;
        // RabbitMQ's names: at most 255 bytes of letters, digits, '-', '_', '.', ':'.
        let name_chars = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        };
        if self.exchange.len() > 255 || !name_chars(&self.exchange) {
            return Err(DestinationError::new(
                "exchange",
                format!(
                    "{:?} is not an exchange name: at most 255 letters, digits, '-', '_', '.' or ':' (empty for the default exchange)",
                    self.exchange
                ),
            ));
        }
        if self.routing_key.len() > 255 || self.routing_key.chars().any(char::is_control) {
            return Err(DestinationError::new(
                "routing_key",
                "a routing key is at most 255 bytes, without control characters",
            ));
        }
        if self.exchange.is_empty() && self.routing_key.is_empty() {
            return Err(DestinationError::new(
                "routing_key",
                "empty with the default exchange, which routes by queue name: send the queue's name, or an exchange",
            ));
        }
        if let Some(ct) = &self.content_type
            && (ct.is_empty() || ct.len() > 255 || ct.chars().any(char::is_control))
        {
            return Err(DestinationError::new(
                "content_type",
                "not a content type; e.g. application/json",
            ));
        }
        check_concurrency(self.max_concurrency)?;
        check_timeout(self.timeout_ms)
    }
}

/// A NATS JetStream subject that a stream takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nats {
    /// `nats://` (or `tls://`) with a host, optionally `user:password@` or `token@`.
    pub url: String,
    /// The subject to publish to: no wildcards, no spaces.
    pub subject: String,
    /// The most publishes awaiting their `PubAck` from one server (default 16, at most
    /// 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// How long one send may wait for its answer, in milliseconds (10 ms to 24 h); unset:
    /// until the job's lease ends. A longer one is cut there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl Nats {
    fn validate(&self) -> Result<(), DestinationError> {
        check_url(&self.url, &["nats", "tls"], "nats://host:4222")?;
        let bad_token = self
            .subject
            .split('.')
            .any(|t| t.is_empty() || t == "*" || t == ">");
        if self.subject.is_empty()
            || self.subject.len() > 256
            || bad_token
            || self
                .subject
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(DestinationError::new(
                "subject",
                format!(
                    "{:?} is not a subject to publish to: dot-separated tokens, no wildcards or spaces, at most 256 bytes",
                    self.subject
                ),
            ));
        }
        check_concurrency(self.max_concurrency)?;
        check_timeout(self.timeout_ms)
    }
}

/// `url` as a URL with a host and one of `schemes`; the error shows `example`.
fn check_url(url: &str, schemes: &[&str], example: &str) -> Result<(), DestinationError> {
    let parsed = Url::parse(url)
        .map_err(|e| DestinationError::new("url", format!("{e}; send {example}")))?;
    if !schemes.contains(&parsed.scheme()) || parsed.host().is_none() {
        let schemes: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
        return Err(DestinationError::new(
            "url",
            format!(
                "{:?} is not a {} URL with a host; send one, e.g. {example}",
                masked_url(url),
                schemes.join(" or ")
            ),
        ));
    }
    Ok(())
}

fn check_concurrency(n: Option<u32>) -> Result<(), DestinationError> {
    if let Some(n) = n
        && !(1..=MAX_CONCURRENCY).contains(&n)
    {
        return Err(DestinationError::new(
            "max_concurrency",
            format!("{n} is outside 1 to {MAX_CONCURRENCY}"),
        ));
    }
    Ok(())
}

fn check_timeout(ms: Option<u64>) -> Result<(), DestinationError> {
    if let Some(ms) = ms
        && !(MIN_TIMEOUT..=MAX_TTR).contains(&Duration::from_millis(ms))
    {
        return Err(DestinationError::new(
            "timeout_ms",
            format!(
                "{ms} ms is outside {} ms to {} ms (24 h); leave it out to wait until the job's lease ends",
                MIN_TIMEOUT.as_millis(),
                MAX_TTR.as_millis()
            ),
        ));
    }
    Ok(())
}

/// An HTTP endpoint that takes a POST per job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `http://` or `https://`, with a host.
    pub url: String,
    /// The signing secrets, `whsec_` and the base64 of 24 to 64 random bytes; every request
    /// carries one signature per secret, so a receiver that knows either the old or the new
    /// secret verifies during a rotation.
    pub secrets: Vec<String>,
    /// Extra headers sent with every request (an `authorization` header, a tenant id).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The requests' `content-type` (default `application/octet-stream`: the body is the
    /// job's bytes as pushed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The most requests in flight from one server (default 16, at most 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// How long one send may wait for its answer, in milliseconds (10 ms to 24 h); unset:
    /// until the job's lease ends. A longer one is cut there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// Headers a webhook's `headers` may not set: delayq sets them.
const RESERVED: &[&str] = &[
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
];

impl Destination {
    /// Reads and checks a document (as the API receives it or the engine hands it back).
    pub fn from_json(doc: &str) -> Result<Destination, DestinationError> {
        let v: serde_json::Value = serde_json::from_str(doc).map_err(|e| {
            DestinationError::new("destination", format!("not JSON ({e}); send a JSON object"))
        })?;
        let serde_json::Value::Object(mut fields) = v else {
            return Err(DestinationError::new(
                "destination",
                "a destination is a JSON object with a \"type\"; see docs/push-delivery.md",
            ));
        };
        // The type is read apart (not with serde's internal tagging), so that an error in a
        // field names that field.
        let d = match fields.remove("type") {
            Some(serde_json::Value::String(t)) if t == "webhook" => {
                Destination::Webhook(fields_of(fields)?)
            }
            Some(serde_json::Value::String(t)) if t == "nats" => {
                Destination::Nats(fields_of(fields)?)
            }
            Some(serde_json::Value::String(t)) if t == "rabbitmq" => {
                Destination::RabbitMq(fields_of(fields)?)
            }
            Some(other) => {
                return Err(DestinationError::new(
                    "type",
                    format!(
                        "{other} is not a destination type; use \"webhook\", \"rabbitmq\" or \"nats\""
                    ),
                ));
            }
            None => {
                return Err(DestinationError::new(
                    "type",
                    "missing; say where jobs go: \"webhook\", \"rabbitmq\" or \"nats\"",
                ));
            }
        };
        d.validate()?;
        Ok(d)
    }

    /// The document the engine stores.
    pub fn to_json(&self) -> String {
        // A plain struct of strings and numbers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The most requests in flight from one server.
    pub fn max_concurrency(&self) -> u32 {
        match self {
            Destination::Webhook(w) => w.max_concurrency,
            Destination::Nats(n) => n.max_concurrency,
            Destination::RabbitMq(r) => r.max_concurrency,
        }
        .unwrap_or(DEFAULT_MAX_CONCURRENCY)
    }

    /// How long one send may wait for its answer, when set (the job's lease bounds it too).
    pub fn timeout(&self) -> Option<Duration> {
        match self {
            Destination::Webhook(w) => w.timeout_ms,
            Destination::Nats(n) => n.timeout_ms,
            Destination::RabbitMq(r) => r.timeout_ms,
        }
        .map(Duration::from_millis)
    }

    /// Its kind, for metrics and logs: `webhook`, `nats`, `rabbitmq`.
    pub fn kind(&self) -> &'static str {
        match self {
            Destination::Webhook(_) => "webhook",
            Destination::Nats(_) => "nats",
            Destination::RabbitMq(_) => "rabbitmq",
        }
    }

    /// Checks every field; the first fault is the error.
    pub fn validate(&self) -> Result<(), DestinationError> {
        match self {
            Destination::Webhook(w) => w.validate(),
            Destination::Nats(n) => n.validate(),
            Destination::RabbitMq(r) => r.validate(),
        }
    }

    /// What `GET` shows: the document without its secrets (their count instead), the
    /// values of headers that carry credentials ([`is_secret_header`]) and a password in
    /// the URL masked as `***`; `timeout_ms` null when unset.
    pub fn public_view(&self) -> serde_json::Value {
        let timeout_ms = self.timeout().map(|t| t.as_millis() as u64);
        match self {
            Destination::Webhook(w) => {
                let headers: BTreeMap<&str, &str> = w
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        let shown = if is_secret_header(k) {
                            "***"
                        } else {
                            v.as_str()
                        };
                        (k.as_str(), shown)
                    })
                    .collect();
                serde_json::json!({
                    "type": "webhook",
                    "url": masked_url(&w.url),
                    "secret_count": w.secrets.len(),
                    "headers": headers,
                    "content_type": w.content_type(),
                    "max_concurrency": self.max_concurrency(),
                    "timeout_ms": timeout_ms,
                })
            }
            Destination::Nats(n) => serde_json::json!({
                "type": "nats",
                "url": masked_url(&n.url),
                "subject": n.subject,
                "max_concurrency": self.max_concurrency(),
                "timeout_ms": timeout_ms,
            }),
            Destination::RabbitMq(r) => serde_json::json!({
                "type": "rabbitmq",
                "url": masked_url(&r.url),
                "exchange": r.exchange,
                "routing_key": r.routing_key,
                "content_type": r.content_type,
                "max_concurrency": self.max_concurrency(),
                "timeout_ms": timeout_ms,
            }),
        }
    }
}

/// A destination's fields (all but `type`) as `T`, an error naming the field.
fn fields_of<T: serde::de::DeserializeOwned>(
    fields: serde_json::Map<String, serde_json::Value>,
) -> Result<T, DestinationError> {
    serde_path_to_error::deserialize(serde_json::Value::Object(fields)).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "destination".to_string()
        } else {
            path
        };
        DestinationError::new(field, e.inner().to_string())
    })
}

impl Webhook {
    /// The requests' content type.
    pub fn content_type(&self) -> &str {
        self.content_type
            .as_deref()
            .unwrap_or("application/octet-stream")
    }

    fn validate(&self) -> Result<(), DestinationError> {
        check_url(
            &self.url,
            &["http", "https"],
            "https://example.com/hooks/delayq",
        )?;
        if self.secrets.is_empty() || self.secrets.len() > MAX_SECRETS {
            return Err(DestinationError::new(
                "secrets",
                format!(
                    "{} secrets is outside 1 to {MAX_SECRETS}; send the current one (and the next while rotating)",
                    self.secrets.len()
                ),
            ));
        }
        for (i, s) in self.secrets.iter().enumerate() {
            secret_key(s).map_err(|m| DestinationError::new(format!("secrets[{i}]"), m))?;
        }
        if self.headers.len() > MAX_HEADERS {
            return Err(DestinationError::new(
                "headers",
                format!(
                    "{} headers is more than {MAX_HEADERS}; send fewer",
                    self.headers.len()
                ),
            ));
        }
        for (name, value) in &self.headers {
            let field = format!("headers.{name}");
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                DestinationError::new(
                    &field,
                    "not a valid header name; use letters, digits and '-'",
                )
            })?;
            if RESERVED.contains(&n.as_str()) {
                return Err(DestinationError::new(
                    &field,
                    "delayq sets this header itself; leave it out",
                ));
            }
            HeaderValue::from_str(value).map_err(|_| {
                DestinationError::new(&field, "not a valid header value; use visible ASCII")
            })?;
        }
        if let Some(ct) = &self.content_type {
            HeaderValue::from_str(ct).map_err(|_| {
                DestinationError::new(
                    "content_type",
                    "not a valid header value; e.g. application/json",
                )
            })?;
        }
        check_concurrency(self.max_concurrency)?;
        check_timeout(self.timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn refused(doc: &str) -> DestinationError {
        match Destination::from_json(doc) {
            Err(e) => e,
            Ok(d) => panic!("{doc} was taken: {d:?}"),
        }
    }

    #[test]
    fn a_webhook_round_trips_and_its_view_hides_secrets() {
        let doc = format!(
            r#"{{"type":"webhook","url":"https://u:pw@example.com/h","secrets":["{SECRET}"],"headers":{{"authorization":"Bearer x"}},"max_concurrency":4}}"#
        );
        let d = Destination::from_json(&doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Destination::from_json(&d.to_json()), Ok(d.clone()));
        assert_eq!(d.max_concurrency(), 4);
        let view = d.public_view().to_string();
        assert!(
            !view.contains("whsec_") && !view.contains("Bearer") && !view.contains("pw@"),
            "{view}"
        );
        assert!(view.contains(r#""secret_count":1"#), "{view}");
        assert!(view.contains("https://u:***@example.com/h"), "{view}");
    }

    #[test]
    fn a_view_masks_only_the_headers_that_carry_credentials_issue_36() {
        // See: issue 36.
        let doc = format!(
            r#"{{"type":"webhook","url":"https://example.com/h","secrets":["{SECRET}"],"headers":{{"authorization":"Bearer x","x-api-key":"k-1","x-tenant":"t-1"}}}}"#
        );
        let d = Destination::from_json(&doc).unwrap_or_else(|e| panic!("{e}"));
        let view = d.public_view();
        assert_eq!(
            view["headers"],
            serde_json::json!({"authorization": "***", "x-api-key": "***", "x-tenant": "t-1"})
        );
        assert_eq!(view["timeout_ms"], serde_json::Value::Null, "{view}");
    }

    #[test]
    fn a_timeout_is_kept_shown_and_bounds_each_send_issue_36() {
        // See: issue 36.
        for (kind, fields) in [
            (
                "webhook",
                format!(r#""url":"https://x","secrets":["{SECRET}"]"#),
            ),
            ("nats", r#""url":"nats://x","subject":"a""#.to_string()),
            (
                "rabbitmq",
                r#""url":"amqp://x","routing_key":"k""#.to_string(),
            ),
        ] {
            let doc = format!(r#"{{"type":"{kind}",{fields},"timeout_ms":2500}}"#);
            let d = Destination::from_json(&doc).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(d.timeout(), Some(Duration::from_millis(2500)), "{kind}");
            assert_eq!(
                Destination::from_json(&d.to_json()),
                Ok(d.clone()),
                "{kind}"
            );
            assert_eq!(d.public_view()["timeout_ms"], 2500, "{kind}");
        }
    }

    #[test]
    fn a_nats_destination_round_trips_and_hides_its_password() {
        let doc = r#"{"type":"nats","url":"nats://u:pw@127.0.0.1:4222","subject":"orders.cancel"}"#;
        let d = Destination::from_json(doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Destination::from_json(&d.to_json()), Ok(d.clone()));
        assert_eq!(
            (d.kind(), d.max_concurrency()),
            ("nats", DEFAULT_MAX_CONCURRENCY)
        );
        let view = d.public_view().to_string();
        assert!(
            !view.contains("pw@") && view.contains("orders.cancel"),
            "{view}"
        );
    }

    #[test]
    fn a_rabbitmq_destination_round_trips_and_hides_its_password() {
        let doc = r#"{"type":"rabbitmq","url":"amqp://u:pw@127.0.0.1:5672/%2f","exchange":"orders","routing_key":"order.cancel"}"#;
        let d = Destination::from_json(doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Destination::from_json(&d.to_json()), Ok(d.clone()));
        assert_eq!(d.kind(), "rabbitmq");
        let view = d.public_view().to_string();
        assert!(
            !view.contains("pw@") && view.contains(r#""routing_key":"order.cancel""#),
            "{view}"
        );
        // The default exchange routes by queue name.
        let default = r#"{"type":"rabbitmq","url":"amqp://h","routing_key":"cancel"}"#;
        assert!(Destination::from_json(default).is_ok());
    }

    #[test]
    fn fields_as_pointers() {
        let p = |f: &str| DestinationError::new(f, "m").pointer();
        assert_eq!(p("destination"), None);
        assert_eq!(p("url"), Some("/url".into()));
        assert_eq!(p("secrets[1]"), Some("/secrets/1".into()));
        assert_eq!(p("headers.x-a/b"), Some("/headers/x-a~1b".into()));
    }

    #[test]
    fn bad_documents_name_the_field() {
        let cases = [
            (r#"{"type":"smtp"}"#.to_string(), "type"),
            (r#"{"url":"https://x"}"#.to_string(), "type"),
            ("[1]".to_string(), "destination"),
            ("{".to_string(), "destination"),
            (
                r#"{"type":"nats","url":"http://x","subject":"a"}"#.to_string(),
                "url",
            ),
            (
                r#"{"type":"nats","url":"nats://x","subject":"a.*"}"#.to_string(),
                "subject",
            ),
            (
                r#"{"type":"nats","url":"nats://x","subject":"a..b"}"#.to_string(),
                "subject",
            ),
            (
                r#"{"type":"nats","url":"nats://x"}"#.to_string(),
                "destination",
            ),
            (
                r#"{"type":"nats","url":"nats://x","subject":"a","secrets":[]}"#.to_string(),
                "secrets",
            ),
            (
                r#"{"type":"rabbitmq","url":"nats://x","routing_key":"k"}"#.to_string(),
                "url",
            ),
            (
                r#"{"type":"rabbitmq","url":"amqp://x","exchange":"a b","routing_key":"k"}"#
                    .to_string(),
                "exchange",
            ),
            (
                r#"{"type":"rabbitmq","url":"amqp://x","routing_key":""}"#.to_string(),
                "routing_key",
            ),
            (
                r#"{"type":"rabbitmq","url":"amqp://x"}"#.to_string(),
                "destination",
            ),
            (
                r#"{"type":"rabbitmq","url":"amqp://x","routing_key":"k","subject":"s"}"#
                    .to_string(),
                "subject",
            ),
            (
                format!(r#"{{"type":"webhook","url":"ftp://x","secrets":["{SECRET}"]}}"#),
                "url",
            ),
            (
                format!(r#"{{"type":"webhook","url":"not a url","secrets":["{SECRET}"]}}"#),
                "url",
            ),
            (
                r#"{"type":"webhook","url":"https://x","secrets":[]}"#.to_string(),
                "secrets",
            ),
            (
                format!(r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}","abc"]}}"#),
                "secrets[1]",
            ),
            (
                r#"{"type":"webhook","url":"https://x","secrets":["whsec_c2hvcnQ="]}"#.to_string(),
                "secrets[0]",
            ),
            (
                r#"{"type":"webhook","url":"https://x","secrets":["whsec_!!"]}"#.to_string(),
                "secrets[0]",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"headers":{{"webhook-id":"x"}}}}"#
                ),
                "headers.webhook-id",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"headers":{{"bad name":"x"}}}}"#
                ),
                "headers.bad name",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"max_concurrency":0}}"#
                ),
                "max_concurrency",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"extra":1}}"#
                ),
                "extra",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"max_concurrency":"a"}}"#
                ),
                "max_concurrency",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"timeout_ms":0}}"#
                ),
                "timeout_ms",
            ),
            (
                r#"{"type":"nats","url":"nats://x","subject":"a","timeout_ms":9}"#.to_string(),
                "timeout_ms",
            ),
            (
                r#"{"type":"rabbitmq","url":"amqp://x","routing_key":"k","timeout_ms":86400001}"#
                    .to_string(),
                "timeout_ms",
            ),
            (
                format!(
                    r#"{{"type":"webhook","url":"https://x","secrets":["{SECRET}"],"timeout_ms":"5s"}}"#
                ),
                "timeout_ms",
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .map(|(doc, field)| (doc, field, refused(doc)))
            .filter(|(_, field, e)| e.field != **field)
            .map(|(doc, field, e)| format!("{doc}: wanted {field}, got {e}"))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
