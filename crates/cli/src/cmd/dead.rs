//! `delayq dead list`, `delayq kick` and `delayq archive`.

use delayq_server::http::ArchiveRequest;
use delayq_server::http::dto::CountResponse;
use reqwest::Method;
use serde_json::json;

use crate::cli::{ArchiveArgs, DeadListArgs, KickArgs, StateArg};
use crate::client::{Client, job_path, read, report, request, seg};

pub async fn list(a: DeadListArgs) -> anyhow::Result<()> {
    super::list::page(&a.topic, StateArg::Dead, &a.page, &a.client).await
}

pub async fn kick(a: KickArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.client)?;
    match &a.id {
        Some(id) => {
            client
                .call(
                    Method::POST,
                    &format!("{}/kick", job_path(&a.topic, id)),
                    Some(&json!({})),
                )
                .await?;
            report(&a.client, &json!({ "count": 1 }), || {
                format!("kicked {id} in {}", a.topic)
            });
        }
        None => {
            let v = client
                .call(
                    Method::POST,
                    &format!("/v1/topics/{}/kick", seg(&a.topic)),
                    Some(&json!({})),
                )
                .await?;
            let kicked: CountResponse = read(&v)?;
            report(&a.client, &v, || {
                format!(
                    "kicked {} in {}",
                    crate::text::count(kicked.count, "dead job"),
                    a.topic
                )
            });
        }
    }
    Ok(())
}

pub async fn archive(a: ArchiveArgs) -> anyhow::Result<()> {
    let body = request(&ArchiveRequest {
        reason: a.reason.clone(),
    })?;
    Client::new(&a.client)?
        .call(
            Method::POST,
            &format!("{}/archive", job_path(&a.topic, &a.id)),
            Some(&body),
        )
        .await?;
    report(&a.client, &json!({ "archived": true }), || {
        format!("archived {} in {}: dead", a.id, a.topic)
    });
    Ok(())
}
