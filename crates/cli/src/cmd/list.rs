//! `delayq list` (and `delayq dead list`, which is `list --state dead`): one page of a
//! topic's jobs in one state, one line per job, and the cursor of the next page.

use delayq_server::http::dto::ListResponse;
use reqwest::Method;

use crate::args::ClientArgs;
use crate::cli::{ListArgs, PageArgs, StateArg};
use crate::client::{Client, read, seg};

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
    let page: ListResponse = read(&v)?;
    if page.jobs.is_empty() {
        println!("no {} jobs in {topic}", state.as_str());
    }
    for j in page.jobs {
        let deadline = j.deadline.as_deref().unwrap_or("?");
        let when = match state {
            StateArg::Delayed | StateArg::Ready => format!("due {}", j.ready_at),
            StateArg::Reserved => format!("lease until {deadline}"),
            StateArg::Dead => format!("died {deadline}"),
            StateArg::Done => format!("acked {deadline}"),
        };
        let line = format!(
            "{}  {when}  attempts {}/{}  {}",
            j.id,
            j.attempts,
            j.max_attempts,
            j.last_error.as_deref().unwrap_or("")
        );
        println!("{}", line.trim_end());
    }
    if let Some(c) = page.next_cursor {
        println!("more: --cursor '{c}'");
    }
    Ok(())
}
