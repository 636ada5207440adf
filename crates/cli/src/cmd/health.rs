//! `delayq health`: is the server ready (its `/readyz`), as an exit code.

use reqwest::Method;
use serde_json::json;

use crate::cli::HealthArgs;
use crate::client::{Client, report};
use crate::failure::{Failure, exit};

pub async fn run(a: HealthArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.client)?;
    // A probe must end on its own: a server that accepts and never answers is not ready.
    match tokio::time::timeout(a.timeout, client.call(Method::GET, "/readyz", None)).await {
        Ok(answer) => answer?,
        Err(_) => {
            return Err(Failure::new(
                exit::UNAVAILABLE,
                "timeout",
                format!(
                    "the server at {} did not answer /readyz within {}",
                    a.client.server,
                    humantime::format_duration(a.timeout)
                ),
            )
            .into());
        }
    };
    report(&a.client, &json!({ "ready": true }), || {
        format!("ready: {}", a.client.server)
    });
    Ok(())
}
