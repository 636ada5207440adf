//! `delayq list` (and `delayq dead list`, which is `list --state dead`): one page of a
//! topic's jobs in one state, one line per job, and the cursor of the next page.

use reqwest::Method;

use crate::args::ClientArgs;
use crate::cli::{ListArgs, PageArgs, StateArg};
use crate::client::{Client, seg};

pub async fn run(a: ListArgs) -> anyhow::Result<()> {
    page(&a.topic, a.state, &a.page, &a.client).await
}

/// Prints one page of `topic`'s jobs in `state`.
pub async fn page(
    topic: &str,
    state: StateArg,
    page: &PageArgs,
    client: &ClientArgs,
) -> anyhow::Result<()> {
    let mut path = format!(
        "/v1/topics/{}/jobs?state={}&limit={}",
        seg(topic),
        state.as_str(),
        page.limit
    );
    if let Some(c) = &page.cursor {
        path.push_str(&format!("&cursor={}", seg(c)));
    }
    let v = Client::new(client)?.call(Method::GET, &path, None).await?;
    if client.json {
        println!("{v}");
        return Ok(());
    }
    let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
    if jobs.is_empty() {
        println!("no {} jobs in {topic}", state.as_str());
    }
    for j in jobs {
        let text = |k: &str| j[k].as_str().unwrap_or("?").to_string();
        let when = match state {
            StateArg::Delayed | StateArg::Ready => format!("due {}", text("ready_at")),
            StateArg::Reserved => format!("lease until {}", text("deadline")),
            StateArg::Dead => format!("died {}", text("deadline")),
            StateArg::Done => format!("acked {}", text("deadline")),
        };
        let line = format!(
            "{}  {when}  attempts {}/{}  {}",
            text("id"),
            j["attempts"],
            j["max_attempts"],
            j["last_error"].as_str().unwrap_or("")
        );
        println!("{}", line.trim_end());
    }
    if let Some(c) = v["next_cursor"].as_str() {
        println!("more: --cursor '{c}'");
    }
    Ok(())
}
