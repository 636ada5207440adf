//! `delayq topics` and `delayq purge`: the topics a server knows, and emptying one.

use delayq_server::http::dto::{CountResponse, TopicsResponse};
use reqwest::Method;

use crate::cli::{PurgeArgs, TopicsArgs};
use crate::client::{Client, read, report, seg};
use crate::failure::Failure;

pub async fn list(a: TopicsArgs) -> anyhow::Result<()> {
    let v = Client::new(&a.client)?
        .call(Method::GET, "/v1/topics", None)
        .await?;
    let names: Vec<String> = read::<TopicsResponse>(&v)?
        .topics
        .into_iter()
        .map(|t| t.topic)
        .collect();
    // One name per line, nothing at all when there is none: the text is for scripts too.
    if a.client.json || !names.is_empty() {
        report(&a.client, &v, || names.join("\n"));
    }
    Ok(())
}

pub async fn purge(a: PurgeArgs) -> anyhow::Result<()> {
    if !a.yes {
        return Err(Failure::usage(format!(
            "purge removes every job of {} in every state, for good; add --yes to do it",
            a.topic
        ))
        .into());
    }
    let v = Client::new(&a.client)?
        .call(
            Method::DELETE,
            &format!("/v1/topics/{}", seg(&a.topic)),
            None,
        )
        .await?;
    let purged: CountResponse = read(&v)?;
    report(&a.client, &v, || {
        format!(
            "purged {}: {} removed",
            a.topic,
            crate::text::count(purged.count, "job")
        )
    });
    Ok(())
}
