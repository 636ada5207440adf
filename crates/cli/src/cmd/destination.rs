//! `delayq destination set | get | delete`: a topic's push destination (`PUT`, `GET` and
//! `DELETE /v1/topics/{topic}/destination`), where every server sends the topic's due jobs.
//! The clap types live here; `cli.rs` only names the subcommand.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use delayq_server::http::{DestinationType, DestinationView};
use reqwest::Method;
use serde_json::{Value, json};

use crate::args::ClientArgs;
use crate::client::{Client, read, seg, wire_name};
use crate::failure::Failure;

/// `delayq destination`.
#[derive(Args, Debug)]
pub struct DestinationArgs {
    #[command(subcommand)]
    pub command: DestinationCommand,
}

/// Subcommands of `delayq destination`.
#[derive(Subcommand, Debug)]
pub enum DestinationCommand {
    /// Send a topic's due jobs to a webhook, a RabbitMQ exchange or a NATS JetStream
    /// subject, from every server (replacing the destination it had). To a webhook each job
    /// is a signed POST (Standard Webhooks), acked on a 2xx answer; to RabbitMQ a persistent
    /// publish, acked after the broker's confirm; to NATS a publish, acked after
    /// JetStream's PubAck.
    ///
    /// Example: `delayq destination set orders.cancel --webhook https://billing/hooks/cancel
    /// --secret "whsec_$(openssl rand -base64 32)"`. A secret given as a flag is visible to
    /// other users of the machine (`ps`) and kept in shell history: prefer
    /// DELAYQ_WEBHOOK_SECRETS or --file.
    Set(Box<DestinationSetArgs>),
    /// Show a topic's destination (without its secrets).
    Get(DestinationTopicArgs),
    /// Remove a topic's destination: its jobs stay and wait for workers.
    Delete(DestinationTopicArgs),
}

/// `delayq destination get` and `delete`.
#[derive(Args, Debug)]
pub struct DestinationTopicArgs {
    /// The topic.
    pub topic: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq destination set`.
#[derive(Args, Debug)]
pub struct DestinationSetArgs {
    /// The topic.
    pub topic: String,
    /// The webhook's URL (http:// or https://).
    #[arg(long, required_unless_present_any = ["file", "nats", "rabbitmq"], conflicts_with_all = ["file", "nats", "rabbitmq"])]
    pub webhook: Option<String>,
    /// A RabbitMQ broker's URL (amqp://user:password@host:5672/%2f), to publish to
    /// --exchange with --routing-key and publisher confirms.
    #[arg(long, requires = "routing_key", conflicts_with_all = ["file", "nats"])]
    pub rabbitmq: Option<String>,
    /// The exchange to publish to (with --rabbitmq) [default: the default exchange, which
    /// routes to the queue named by --routing-key].
    #[arg(long, requires = "rabbitmq")]
    pub exchange: Option<String>,
    /// The routing key (with --rabbitmq): a queue's name for the default exchange.
    #[arg(long, requires = "rabbitmq")]
    pub routing_key: Option<String>,
    /// A NATS server's URL (nats://host:4222), to publish to --subject with JetStream.
    #[arg(long, requires = "subject", conflicts_with = "file")]
    pub nats: Option<String>,
    /// The JetStream subject to publish to (with --nats); a stream must take it.
    #[arg(long, requires = "nats")]
    pub subject: Option<String>,
    /// A signing secret, `whsec_` and the base64 of 24 to 64 random bytes (repeat it while
    /// rotating: every request carries one signature per secret).
    #[arg(
        long = "secret",
        env = "DELAYQ_WEBHOOK_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub secrets: Vec<String>,
    /// An extra header sent with every request, NAME=VALUE (repeatable).
    #[arg(long = "header", value_parser = header)]
    pub headers: Vec<(String, String)>,
    /// The requests' content type [default: application/octet-stream]; with --rabbitmq,
    /// the messages' content_type property [default: none].
    #[arg(long)]
    pub content_type: Option<String>,
    /// The most requests in flight from one server (1 to 1000) [default: 16].
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// The whole destination as a JSON file (the API's document), instead of the flags.
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub client: ClientArgs,
}

fn header(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))
}

fn path(topic: &str) -> String {
    format!("/v1/topics/{}/destination", seg(topic))
}

/// The document `set` sends. It is JSON, as a --file document is, not the engine's typed
/// `delayq_push::Destination`: a flag the kind does not take (--header or --content-type
/// with --nats) goes to the server, which refuses it naming the field, rather than being
/// dropped here. (The four `doc["…"]` writes below are this document's, not lookups of an
/// answer.)
fn document(a: &DestinationSetArgs) -> anyhow::Result<Value> {
    if let Some(file) = &a.file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--file {}: cannot read it", file.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("--file {}: not JSON", file.display()));
    }
    let mut doc = if let (Some(url), Some(subject)) = (&a.nats, &a.subject) {
        json!({"type": "nats", "url": url, "subject": subject})
    } else if let (Some(url), Some(key)) = (&a.rabbitmq, &a.routing_key) {
        let mut doc = json!({"type": "rabbitmq", "url": url, "routing_key": key});
        if let Some(e) = &a.exchange {
            doc["exchange"] = e.clone().into();
        }
        doc
    } else {
        json!({"type": "webhook", "url": a.webhook, "secrets": a.secrets})
    };
    if !a.headers.is_empty() {
        let map: serde_json::Map<String, Value> = a
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        doc["headers"] = Value::Object(map);
    }
    if let Some(ct) = &a.content_type {
        doc["content_type"] = ct.clone().into();
    }
    if let Some(n) = a.max_concurrency {
        doc["max_concurrency"] = n.into();
    }
    Ok(doc)
}

pub async fn run(a: DestinationArgs) -> anyhow::Result<()> {
    match a.command {
        DestinationCommand::Set(a) => {
            let doc = document(&a)?;
            let v = Client::new(&a.client)?
                .call(Method::PUT, &path(&a.topic), Some(&doc))
                .await?;
            show(&a.topic, &v, a.client.json)?;
        }
        DestinationCommand::Get(a) => {
            let v = Client::new(&a.client)?
                .call(Method::GET, &path(&a.topic), None)
                .await?;
            show(&a.topic, &v, a.client.json)?;
        }
        DestinationCommand::Delete(a) => {
            Client::new(&a.client)?
                .call(Method::DELETE, &path(&a.topic), None)
                .await?;
            if a.client.json {
                println!("{}", json!({"topic": a.topic, "deleted": true}));
            } else {
                println!("{}: no destination now; its jobs wait for workers", a.topic);
            }
        }
    }
    Ok(())
}

/// One destination as one line.
fn show(topic: &str, v: &Value, json: bool) -> Result<(), Failure> {
    if json {
        println!("{v}");
        return Ok(());
    }
    let d: DestinationView = read(v)?;
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    match d.kind {
        DestinationType::Nats => println!(
            "{topic} -> nats {} subject {}  max-concurrency {}",
            d.url,
            text(&d.subject),
            d.max_concurrency,
        ),
        DestinationType::Rabbitmq => println!(
            "{topic} -> rabbitmq {} exchange {:?} routing-key {:?}  content-type {}  max-concurrency {}",
            d.url,
            text(&d.exchange),
            text(&d.routing_key),
            text(&d.content_type),
            d.max_concurrency,
        ),
        DestinationType::Webhook => {
            let headers: Vec<&str> = d
                .headers
                .iter()
                .flat_map(|m| m.keys().map(String::as_str))
                .collect();
            println!(
                "{topic} -> {} {}  secrets {}  headers [{}]  content-type {}  max-concurrency {}",
                wire_name(&d.kind),
                d.url,
                d.secret_count
                    .map_or_else(|| "null".to_string(), |n| n.to_string()),
                headers.join(", "),
                text(&d.content_type),
                d.max_concurrency,
            )
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_as_name_equals_value() {
        assert_eq!(header("x-a=b=c"), Ok(("x-a".into(), "b=c".into())));
        assert!(header("x-a").is_err());
        assert!(header("=v").is_err());
    }
}
