//! `delayq pause` and `delayq resume`: stop and restart handing out a topic's jobs, for
//! every server (`POST /v1/topics/{topic}/pause`, `/resume`). The clap types live here.

use std::time::Duration;

use clap::Args;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::ClientArgs;
use crate::client::{Client, Failure, seg};
use crate::duration::DurationParser;

/// `delayq pause`.
#[derive(Args, Debug)]
pub struct PauseArgs {
    /// The topic.
    pub topic: String,
    /// End the pause after this long, e.g. 10m [default: until `delayq resume`].
    #[arg(long = "for", value_parser = DurationParser, conflicts_with = "until")]
    pub for_: Option<Duration>,
    /// End the pause at this RFC 3339 time, e.g. 2026-12-01T09:00:00Z.
    #[arg(long)]
    pub until: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq resume`.
#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// The topic.
    pub topic: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// The JSON of `POST /v1/topics/{topic}/pause`.
fn request(a: &PauseArgs) -> Value {
    match (&a.for_, &a.until) {
        (Some(d), _) => json!({"for_ms": u64::try_from(d.as_millis()).unwrap_or(u64::MAX)}),
        (None, Some(t)) => json!({"until": t}),
        (None, None) => json!({}),
    }
}

pub async fn pause(a: PauseArgs) -> anyhow::Result<()> {
    if a.for_.is_some_and(|d| d.is_zero()) {
        let message = format!(
            "--for 0s would end the pause of {} as it begins; give a longer time, or run `delayq resume {}` to lift a pause",
            a.topic, a.topic
        );
        return Err(Failure::usage(message).into());
    }
    let v = Client::new(&a.client)?
        .call(
            Method::POST,
            &format!("/v1/topics/{}/pause", seg(&a.topic)),
            Some(&request(&a)),
        )
        .await?;
    // A pause whose end has already passed on the server's clock lifts the topic's pause
    // at once: say so plainly, never "until resumed".
    if v["paused"] == Value::Bool(false) {
        let message = format!(
            "{} is not paused: --until {} has already passed on the server's clock, so the pause ended as it began (and lifted any pause the topic had); give a time in the future",
            a.topic,
            a.until.as_deref().unwrap_or("?")
        );
        return Err(Failure::usage(message).into());
    }
    if a.client.json {
        println!("{v}");
    } else {
        match v["paused_until"].as_str() {
            Some(t) => println!("paused {} until {t}", a.topic),
            None => println!("paused {} until resumed", a.topic),
        }
    }
    Ok(())
}

pub async fn resume(a: ResumeArgs) -> anyhow::Result<()> {
    Client::new(&a.client)?
        .call(
            Method::POST,
            &format!("/v1/topics/{}/resume", seg(&a.topic)),
            None,
        )
        .await?;
    if !a.client.json {
        println!("resumed {}", a.topic);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> PauseArgs {
        let cli =
            crate::cli::Cli::try_parse_from(["delayq", "pause", "orders"].iter().chain(extra))
                .expect("parses");
        match cli.command {
            crate::cli::Command::Pause(a) => a,
            other => panic!("not a pause: {other:?}"),
        }
    }

    #[test]
    fn pause_sends_its_end() {
        assert_eq!(request(&args(&[])), json!({}));
        assert_eq!(
            request(&args(&["--for", "10m"])),
            json!({"for_ms": 600_000})
        );
        assert_eq!(
            request(&args(&["--until", "2030-01-01T00:00:00Z"])),
            json!({"until": "2030-01-01T00:00:00Z"})
        );
        let both = crate::cli::Cli::try_parse_from([
            "delayq",
            "pause",
            "t",
            "--for",
            "1m",
            "--until",
            "2030-01-01T00:00:00Z",
        ]);
        assert!(both.is_err());
    }
}
