//! `delayq dead list` and `delayq kick`.

use reqwest::Method;
use serde_json::json;

use crate::cli::{DeadListArgs, KickArgs};
use crate::client::{Client, seg};

pub async fn list(a: DeadListArgs) -> anyhow::Result<()> {
    let mut path = format!(
        "/v1/topics/{}/jobs?state=dead&limit={}",
        seg(&a.topic),
        a.limit
    );
    if let Some(c) = &a.cursor {
        path.push_str(&format!("&cursor={}", seg(c)));
    }
    let v = Client::new(&a.client)
        .call(Method::GET, &path, None)
        .await?;
    if a.client.json {
        println!("{v}");
        return Ok(());
    }
    let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
    if jobs.is_empty() {
        println!("no dead jobs in {}", a.topic);
    }
    for j in jobs {
        println!(
            "{}  died {}  attempts {}/{}  {}",
            j["id"].as_str().unwrap_or("?"),
            j["deadline"].as_str().unwrap_or("?"),
            j["attempts"],
            j["max_attempts"],
            j["last_error"].as_str().unwrap_or("")
        );
    }
    if let Some(c) = v["next_cursor"].as_str() {
        println!("more: --cursor '{c}'");
    }
    Ok(())
}

pub async fn kick(a: KickArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.client);
    match &a.id {
        Some(id) => {
            client
                .call(
                    Method::POST,
                    &format!("/v1/topics/{}/jobs/{}/kick", seg(&a.topic), seg(id)),
                    Some(&json!({})),
                )
                .await?;
            if a.client.json {
                println!("{{\"count\":1}}");
            } else {
                println!("kicked {id} in {}", a.topic);
            }
        }
        None => {
            let v = client
                .call(
                    Method::POST,
                    &format!("/v1/topics/{}/kick", seg(&a.topic)),
                    Some(&json!({})),
                )
                .await?;
            if a.client.json {
                println!("{v}");
            } else {
                println!(
                    "kicked {} dead jobs in {}",
                    v["count"].as_u64().unwrap_or(0),
                    a.topic
                );
            }
        }
    }
    Ok(())
}
