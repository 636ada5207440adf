//! `delayq pause` and `delayq resume`: stop and restart handing out a topic's jobs, for
//! every server (`POST /v1/topics/{topic}/pause`, `/resume`). The clap types live here.
//! A pause of a topic the server did not know holds (pausing ahead of the first push is
//! legitimate) and adds a note on standard error, so that a typo is seen; a resume of one
//! fails, exit 3 (the server answers 404 `not_found`).

use std::time::Duration;

use clap::Args;
use delayq_server::http::dto::{PauseRequest, PauseResponse};
use reqwest::Method;

use crate::args::ClientArgs;
use crate::client::{Client, read, request, seg};
use crate::duration::DurationParser;
use crate::failure::Failure;

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

/// The request of `POST /v1/topics/{topic}/pause`.
fn pause_request(a: &PauseArgs) -> PauseRequest {
    match (&a.for_, &a.until) {
        (Some(d), _) => PauseRequest {
            for_ms: Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            until: None,
        },
        (None, Some(t)) => PauseRequest {
            for_ms: None,
            until: Some(t.clone()),
        },
        (None, None) => PauseRequest::default(),
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
            Some(&request(&pause_request(&a))?),
        )
        .await?;
    let paused: PauseResponse = read(&v)?;
    // A pause whose end has already passed on the server's clock lifts the topic's pause
    // at once: say so plainly, never "until resumed".
    if !paused.paused {
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
        match &paused.paused_until {
            Some(t) => println!("paused {} until {t}", a.topic),
            None => println!("paused {} until resumed", a.topic),
        }
        if let Some(note) = unknown_note(&a.topic, &paused) {
            eprintln!("{note}");
        }
    }
    Ok(())
}

/// The note for a pause the server answered `known: false`: the topic had no jobs,
/// settings or pause, so the name may be a typo.
fn unknown_note(topic: &str, answer: &PauseResponse) -> Option<String> {
    (!answer.known).then(|| {
        format!(
            "note: topic {topic} has no jobs yet; it is paused ahead of its first push (if you meant an existing topic, check the name against `delayq topics`, then `delayq resume {topic}`)"
        )
    })
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
    use serde_json::json;

    /// A command line with only `delayq pause` on it, parsed as `cli::Cli` parses that
    /// subcommand; these tests do not name `cli`, which names this module.
    #[derive(Parser, Debug)]
    #[command(name = "delayq")]
    enum Line {
        Pause(PauseArgs),
    }

    fn args(extra: &[&str]) -> PauseArgs {
        let line = Line::try_parse_from(["delayq", "pause", "orders"].iter().chain(extra))
            .expect("parses");
        let Line::Pause(a) = line;
        a
    }

    fn answer(known: bool) -> PauseResponse {
        PauseResponse {
            paused: true,
            paused_until: None,
            known,
        }
    }

    #[test]
    fn only_a_pause_of_an_unknown_topic_has_a_note() {
        let note = unknown_note("ordrs", &answer(false));
        let note = note.expect("a note");
        assert!(
            note.starts_with("note: topic ordrs has no jobs yet"),
            "{note}"
        );
        assert!(note.contains("delayq resume ordrs"), "{note}");
        assert_eq!(unknown_note("orders", &answer(true)), None);
    }

    #[test]
    fn pause_sends_its_end() {
        let sent = |extra: &[&str]| request(&pause_request(&args(extra))).expect("JSON");
        assert_eq!(sent(&[]), json!({}));
        assert_eq!(sent(&["--for", "10m"]), json!({"for_ms": 600_000}));
        assert_eq!(
            sent(&["--until", "2030-01-01T00:00:00Z"]),
            json!({"until": "2030-01-01T00:00:00Z"})
        );
        let both = Line::try_parse_from([
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
