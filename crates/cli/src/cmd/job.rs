//! `delayq get` and `delayq delete`.

use reqwest::Method;
use serde_json::Value;

use crate::cli::JobArgs;
use crate::client::{Client, seg};

pub async fn get(a: JobArgs) -> anyhow::Result<()> {
    let v = Client::new(&a.client)
        .call(
            Method::GET,
            &format!("/v1/topics/{}/jobs/{}", seg(&a.topic), seg(&a.id)),
            None,
        )
        .await?;
    if a.client.json {
        println!("{v}");
        return Ok(());
    }
    for key in [
        "topic",
        "id",
        "state",
        "priority",
        "ready_at",
        "created_at",
        "attempts",
        "max_attempts",
        "ttr_ms",
        "deadline",
        "last_error",
        "encoding",
        "body",
    ] {
        match &v[key] {
            Value::Null => {}
            Value::String(s) => println!("{key:>12}: {s}"),
            other => println!("{key:>12}: {other}"),
        }
    }
    Ok(())
}

pub async fn delete(a: JobArgs) -> anyhow::Result<()> {
    Client::new(&a.client)
        .call(
            Method::DELETE,
            &format!("/v1/topics/{}/jobs/{}", seg(&a.topic), seg(&a.id)),
            None,
        )
        .await?;
    if a.client.json {
        println!("{{\"deleted\":true}}");
    } else {
        println!("deleted {} from {}", a.id, a.topic);
    }
    Ok(())
}
