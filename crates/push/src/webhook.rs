//! The webhook destination: one signed POST per job, and what its answer means.
//!
//! Signatures follow Standard Webhooks (<https://www.standardwebhooks.com>): the headers
//! `webhook-id` (the same for every attempt of one job), `webhook-timestamp` (Unix seconds
//! at sending) and `webhook-signature`, a space-separated list of `v1,<base64>`, one per
//! secret, each the HMAC-SHA256 of `<id>.<timestamp>.<body>` under the secret's key.
//! Beside them: `delayq-topic`, `delayq-job-id`, `delayq-attempt` (1 for the first),
//! `delayq-due-at` (the due time, Unix milliseconds) and the destination's own headers.
//!
//! A `2xx` answer acks the job. `429` and `503` with a `Retry-After` are [`Outcome::Throttled`]:
//! the forwarder waits and sends again within the same attempt when that fits (see
//! `retry`). Other `429` and `5xx` answers retry the job with its back-off, or after the
//! answer's `Retry-After`; a timeout or a connection error retries too. Any other status
//! sends it to dead with the status and the start of the answer's body as the reason.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use sha2::Sha256;

use crate::destination::Webhook;
use crate::secret::secret_key;

/// How much of an answer's body a dead job's reason keeps.
const EXCERPT: usize = 512;

/// One job to send (to any destination).
#[derive(Clone, Debug)]
pub struct Message<'a> {
    /// `webhook-id`: the same for every attempt of one job.
    pub id: &'a str,
    /// The topic.
    pub topic: &'a str,
    /// The job's id.
    pub job_id: &'a str,
    /// Its attempt, 1 for the first.
    pub attempt: u32,
    /// Its due time, Unix milliseconds.
    pub due_at_ms: u64,
    /// Its body.
    pub body: &'a Bytes,
}

/// What one send came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A `2xx`: ack.
    Delivered,
    /// Try again: after `after` when the receiver said so (`Retry-After`), else with the
    /// job's back-off. `cause` is the metric label (`status_429`, `status_5xx`, `timeout`,
    /// `connect`, `other`), `reason` what the job records.
    Retry {
        /// The receiver's `Retry-After`, if it gave one.
        after: Option<Duration>,
        /// The metric label.
        cause: &'static str,
        /// What the job records.
        reason: String,
    },
    /// The destination is up but asks to come back after `after` (a `429` or `503` with
    /// `Retry-After`): sent again after that wait within the same attempt when the lease
    /// allows, else retried after it as the next attempt.
    Throttled {
        /// The receiver's `Retry-After`.
        after: Duration,
        /// The metric label (`status_429`, `status_5xx`).
        cause: &'static str,
        /// What the job records.
        reason: String,
    },
    /// A refusal that no retry can change (a webhook's 4xx other than 429, a message too
    /// large for NATS): dead, with `reason`.
    Refused {
        /// The metric label (`status_4xx`, `too_large`).
        cause: &'static str,
        /// What the job records: for a webhook, the status and the start of the answer.
        reason: String,
    },
}

impl Outcome {
    /// Try again with the job's own back-off.
    pub fn retry(cause: &'static str, reason: impl Into<String>) -> Self {
        Outcome::Retry {
            after: None,
            cause,
            reason: reason.into(),
        }
    }
}

/// The `webhook-signature` value of `msg` at `timestamp` under each of `secrets`.
pub fn signature(
    secrets: &[String],
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Result<String, String> {
    let macs = secrets
        .iter()
        .map(|s| keyed(&secret_key(s)?))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(sign(&macs, id, timestamp, body))
}

/// An HMAC-SHA256 keyed with `key`, ready to be cloned for each message.
fn keyed(key: &[u8]) -> Result<Hmac<Sha256>, String> {
    Hmac::<Sha256>::new_from_slice(key).map_err(|e| e.to_string())
}

/// One `v1,<base64>` per keyed MAC, space-separated.
fn sign(macs: &[Hmac<Sha256>], id: &str, timestamp: u64, body: &[u8]) -> String {
    let mut out = String::with_capacity(macs.len() * 48);
    for mac in macs {
        let mut mac = mac.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("v1,");
        base64::engine::general_purpose::STANDARD
            .encode_string(mac.finalize().into_bytes(), &mut out);
    }
    out
}

/// A webhook made ready to send to, once per destination: its URL parsed, its secrets'
/// keys decoded into keyed MACs, its own headers and content type built.
pub struct Hook {
    url: reqwest::Url,
    macs: Vec<Hmac<Sha256>>,
    fixed: HeaderMap,
}

impl Hook {
    /// Prepares `hook` (a checked destination; an error says what does not read).
    pub fn new(hook: &Webhook) -> Result<Self, String> {
        let url = reqwest::Url::parse(&hook.url).map_err(|e| format!("url: {e}"))?;
        let macs = hook
            .secrets
            .iter()
            .map(|s| keyed(&secret_key(s)?))
            .collect::<Result<Vec<_>, String>>()?;
        let mut fixed = HeaderMap::new();
        for (k, v) in &hook.headers {
            let name =
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            fixed.insert(name, header_value(v)?);
        }
        fixed.insert("content-type", header_value(hook.content_type())?);
        Ok(Hook { url, macs, fixed })
    }
}

fn header_value(v: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(v).map_err(|e| format!("header value {v:?}: {e}"))
}

/// Sends webhooks with one shared HTTP client.
#[derive(Clone, Debug)]
pub struct Sender {
    client: reqwest::Client,
}

impl Sender {
    /// A sender whose connections are reused across jobs.
    pub fn new() -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("delayq/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Sender { client })
    }

    /// POSTs `msg` to `hook`, waiting at most `timeout` for the whole answer.
    pub async fn send(&self, hook: &Hook, msg: &Message<'_>, timeout: Duration) -> Outcome {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let headers = match headers(hook, msg, now) {
            Ok(h) => h,
            Err(reason) => {
                return Outcome::retry("other", reason);
            }
        };
        let sent = self
            .client
            .post(hook.url.clone())
            .headers(headers)
            .body(msg.body.clone())
            .timeout(timeout)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return failed(&e),
        };
        let status = response.status();
        if status.is_success() {
            // Read the answer so the connection can be reused; its content does not matter.
            let _ = response.bytes().await;
            return Outcome::Delivered;
        }
        let after = retry_after(response.headers());
        let body = response.bytes().await.unwrap_or_default();
        let excerpt = String::from_utf8_lossy(&body[..body.len().min(EXCERPT)]).into_owned();
        let reason = format!("webhook answered {}: {excerpt}", status.as_u16());
        let code = status.as_u16();
        if code == 429 || status.is_server_error() {
            let cause = if code == 429 {
                "status_429"
            } else {
                "status_5xx"
            };
            match after {
                Some(after) if code == 429 || code == 503 => Outcome::Throttled {
                    after,
                    cause,
                    reason,
                },
                after => Outcome::Retry {
                    after,
                    cause,
                    reason,
                },
            }
        } else {
            Outcome::Refused {
                cause: "status_4xx",
                reason,
            }
        }
    }
}

fn failed(e: &reqwest::Error) -> Outcome {
    let (cause, what) = if e.is_timeout() {
        ("timeout", "timed out")
    } else if e.is_connect() {
        ("connect", "cannot connect")
    } else {
        ("other", "failed")
    };
    let mut reason = format!("webhook {what}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        reason.push_str(&format!(": {s}"));
        source = s.source();
    }
    Outcome::retry(cause, reason)
}

/// The headers of one request.
fn headers(hook: &Hook, msg: &Message<'_>, now: u64) -> Result<HeaderMap, String> {
    let mut h = hook.fixed.clone();
    h.insert("webhook-id", header_value(msg.id)?);
    h.insert("webhook-timestamp", HeaderValue::from(now));
    h.insert(
        "webhook-signature",
        header_value(&sign(&hook.macs, msg.id, now, msg.body))?,
    );
    h.insert("delayq-topic", header_value(msg.topic)?);
    h.insert("delayq-job-id", header_value(msg.job_id)?);
    h.insert("delayq-attempt", HeaderValue::from(msg.attempt));
    h.insert("delayq-due-at", HeaderValue::from(msg.due_at_ms));
    Ok(h)
}

/// A `Retry-After` of whole seconds (the HTTP-date form is not used by the receivers this
/// talks to and is ignored), at most a day.
fn retry_after(h: &HeaderMap) -> Option<Duration> {
    let secs: u64 = h.get("retry-after")?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(86_400)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries.
    #[test]
    fn signature_matches_the_reference_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string();
        let sig = signature(
            &[secret],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(
            sig.as_deref(),
            Ok("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn each_secret_signs() {
        let a = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string();
        let b = format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        );
        let both = signature(&[a.clone(), b.clone()], "i", 1, b"x").unwrap_or_default();
        let (one, two) = (
            signature(&[a], "i", 1, b"x").unwrap_or_default(),
            signature(&[b], "i", 1, b"x").unwrap_or_default(),
        );
        assert_eq!(both, format!("{one} {two}"));
    }

    #[test]
    fn retry_after_in_seconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
    }
}
