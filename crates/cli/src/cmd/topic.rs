//! `delayq topic get` and `delayq topic set`: a topic's settings (`GET` and `PUT
//! /v1/topics/{topic}`), the defaults of the jobs pushed to it without their own, its body
//! limit and the retention of its done jobs. The clap types live here; `cli.rs` only names
//! the subcommand.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use delayq_server::http::dto::{BackoffDto, BackoffKind, RetentionDto, TopicConfigDto};
use reqwest::Method;
use serde_json::Value;

use crate::args::ClientArgs;
use crate::client::{Client, read, request, seg};
use crate::duration::DurationParser;
use crate::failure::Failure;

/// `delayq topic`.
#[derive(Args, Debug)]
pub struct TopicArgs {
    #[command(subcommand)]
    pub command: TopicCommand,
}

/// Subcommands of `delayq topic`.
#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Show a topic's settings ("default" where none is set).
    Get(TopicGetArgs),
    /// Change a topic's settings, for every server of the engine. Only the settings given
    /// change (unless --reset); they apply to jobs pushed from then on, whose own fields win.
    ///
    /// Example: `delayq topic set orders --ttr 1m --max-attempts 5 --backoff-base 10s
    /// --backoff-max 10m`.
    Set(TopicSetArgs),
}

/// `delayq topic get`.
#[derive(Args, Debug)]
pub struct TopicGetArgs {
    /// The topic.
    pub topic: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq topic set`.
#[derive(Args, Debug)]
pub struct TopicSetArgs {
    /// The topic.
    pub topic: String,
    /// Lease length of jobs pushed without --ttr, e.g. 1m (1s to 24h).
    #[arg(long, value_parser = DurationParser)]
    pub ttr: Option<Duration>,
    /// Deliveries allowed to jobs pushed without a number (1 to 10000).
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Retry back-off of jobs pushed without one: the first delay, e.g. 10s. Alone it is a
    /// fixed back-off; with --backoff-max it grows by --backoff-factor up to that cap.
    #[arg(long, value_parser = DurationParser)]
    pub backoff_base: Option<Duration>,
    /// The cap of a growing back-off, e.g. 1h (needs --backoff-base).
    #[arg(long, value_parser = DurationParser, requires = "backoff_base")]
    pub backoff_max: Option<Duration>,
    /// How much a growing back-off grows per retry (1 to 100) [default: 2].
    #[arg(long, requires = "backoff_max")]
    pub backoff_factor: Option<u32>,
    /// Jitter: each delay is shortened by a random part of up to this share of it (0 to 1)
    /// [default: 0].
    #[arg(long, requires = "backoff_base")]
    pub backoff_jitter: Option<f64>,
    /// Largest body of this topic's jobs in bytes; the server's --max-body stays in force
    /// when it is smaller.
    #[arg(long)]
    pub max_body: Option<u64>,
    /// Keep up to this many acked jobs, as done (1 to 100000), for --retain-for; see them
    /// with `GET /v1/topics/<topic>/jobs?state=done` or `delayq get`.
    #[arg(long, requires = "retain_for")]
    pub retain_jobs: Option<u32>,
    /// How long an acked job is kept, e.g. 1h or 7d (1s to 30d; needs --retain-jobs).
    #[arg(long, value_parser = DurationParser, requires = "retain_jobs")]
    pub retain_for: Option<Duration>,
    /// How many partitions hold the topic's jobs (1 to 1024); order is promised within a
    /// partition only. It changes only while the topic holds no job.
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Unset a setting (repeatable): the built-in default applies again.
    #[arg(long, value_enum)]
    pub unset: Vec<Setting>,
    /// Start from no setting at all instead of the topic's current ones.
    #[arg(long)]
    pub reset: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// A setting that `--unset` clears.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// --ttr.
    Ttr,
    /// --max-attempts.
    MaxAttempts,
    /// The back-off (every --backoff-* setting).
    Backoff,
    /// --max-body.
    MaxBody,
    /// The retention of done jobs (--retain-jobs and --retain-for): acked jobs are removed.
    Retention,
    /// --partitions: back to one partition (only while the topic holds no job).
    Partitions,
}

pub async fn run(a: TopicArgs) -> anyhow::Result<()> {
    match a.command {
        TopicCommand::Get(a) => get(a).await,
        TopicCommand::Set(a) => set(a).await,
    }
}

fn path(topic: &str) -> String {
    format!("/v1/topics/{}", seg(topic))
}

async fn get(a: TopicGetArgs) -> anyhow::Result<()> {
    let v = Client::new(&a.client)?
        .call(Method::GET, &path(&a.topic), None)
        .await?;
    show(&a.topic, &v, a.client.json)?;
    Ok(())
}

async fn set(a: TopicSetArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.client)?;
    let current = if a.reset {
        TopicConfigDto::default()
    } else {
        read(&client.call(Method::GET, &path(&a.topic), None).await?)?
    };
    let v = client
        .call(
            Method::PUT,
            &path(&a.topic),
            Some(&request(&merged(current, &a))?),
        )
        .await?;
    show(&a.topic, &v, a.client.json)?;
    Ok(())
}

/// The settings to send: `current` with the given ones set and the `--unset` ones removed.
fn merged(mut out: TopicConfigDto, a: &TopicSetArgs) -> TopicConfigDto {
    let ms = |d: Duration| d.as_millis() as u64;
    if let Some(d) = a.ttr {
        out.ttr_ms = Some(ms(d));
    }
    if let Some(n) = a.max_attempts {
        out.max_attempts = Some(n);
    }
    if let Some(base) = a.backoff_base {
        let mut b = BackoffDto {
            kind: BackoffKind::Fixed,
            base_ms: ms(base),
            max_ms: None,
            factor: None,
            jitter: None,
        };
        if let Some(max) = a.backoff_max {
            b.kind = BackoffKind::Exponential;
            b.max_ms = Some(ms(max));
            b.factor = Some(a.backoff_factor.unwrap_or(2));
        }
        b.jitter = a.backoff_jitter;
        out.backoff = Some(b);
    }
    if let Some(n) = a.max_body {
        out.max_body = Some(n);
    }
    if let (Some(n), Some(d)) = (a.retain_jobs, a.retain_for) {
        out.retention = Some(RetentionDto {
            max_jobs: n,
            max_age_ms: ms(d),
        });
    }
    if let Some(n) = a.partitions {
        out.partitions = Some(n);
    }
    for s in &a.unset {
        match s {
            Setting::Ttr => out.ttr_ms = None,
            Setting::MaxAttempts => out.max_attempts = None,
            Setting::Backoff => out.backoff = None,
            Setting::MaxBody => out.max_body = None,
            Setting::Retention => out.retention = None,
            Setting::Partitions => out.partitions = None,
        }
    }
    out
}

/// Prints the settings: the server's JSON with --json, else one line per setting.
fn show(topic: &str, v: &Value, json: bool) -> Result<(), Failure> {
    if json {
        println!("{v}");
    } else {
        print!("{}", text(topic, &read(v)?));
    }
    Ok(())
}

/// The settings as text, "default" where none is set.
fn text(topic: &str, v: &TopicConfigDto) -> String {
    let dur = |ms: u64| humantime::format_duration(Duration::from_millis(ms)).to_string();
    let backoff = v.backoff.as_ref().map(|b| {
        let shape = match b.kind {
            BackoffKind::Fixed => format!("fixed {}", dur(b.base_ms)),
            BackoffKind::Exponential => format!(
                "from {} growing x{} up to {}",
                dur(b.base_ms),
                b.factor.unwrap_or(2),
                b.max_ms.map(dur).unwrap_or_default()
            ),
        };
        match b.jitter {
            Some(j) if j > 0.0 => format!("{shape}, jitter {j}"),
            _ => shape,
        }
    });
    let rows = [
        ("ttr", v.ttr_ms.map(dur), "30s"),
        ("max attempts", v.max_attempts.map(|n| n.to_string()), "3"),
        (
            "back-off",
            backoff,
            "from 1s growing x2 up to 1h, jitter 0.1",
        ),
        (
            "max body",
            v.max_body.map(|n| format!("{n} bytes")),
            "the server's --max-body",
        ),
        (
            "retention",
            v.retention.map(|r| {
                format!(
                    "up to {} done jobs, each for {}",
                    r.max_jobs,
                    dur(r.max_age_ms)
                )
            }),
            "none: acked jobs are removed",
        ),
        ("partitions", v.partitions.map(|n| n.to_string()), "1"),
    ];
    let mut out = format!("topic {topic}\n");
    for (name, value, default) in rows {
        let value = value.unwrap_or_else(|| format!("default ({default})"));
        out.push_str(&format!("  {name:<13} {value}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    /// A command line with only `delayq topic` on it, parsed as `cli::Cli` parses that
    /// subcommand; these tests do not name `cli`, which names this module.
    #[derive(Parser, Debug)]
    #[command(name = "delayq")]
    enum Line {
        Topic(TopicArgs),
    }

    fn set_args(args: &[&str]) -> TopicSetArgs {
        let line = Line::try_parse_from(["delayq", "topic", "set", "orders"].iter().chain(args))
            .expect("parses");
        match line {
            Line::Topic(TopicArgs {
                command: TopicCommand::Set(a),
            }) => a,
            other => panic!("not a topic set: {other:?}"),
        }
    }

    #[test]
    fn set_merges_into_the_current_settings() {
        // The settings sent, as JSON, from the current ones as JSON.
        let merged = |current: Value, a: &TopicSetArgs| {
            request(&merged(read(&current).expect("settings"), a)).expect("JSON")
        };
        let a = set_args(&["--ttr", "1m", "--backoff-base", "1s", "--backoff-max", "1h"]);
        let current = json!({"ttr_ms": 5000, "max_attempts": 4, "backoff": null, "max_body": null});
        assert_eq!(
            merged(current, &a),
            json!({"ttr_ms": 60000, "max_attempts": 4, "backoff": {"kind": "exponential", "base_ms": 1000, "max_ms": 3_600_000, "factor": 2}})
        );
        let a = set_args(&["--unset", "max-attempts", "--backoff-base", "10s"]);
        assert_eq!(
            merged(json!({"max_attempts": 4, "max_body": 9}), &a),
            json!({"max_body": 9, "backoff": {"kind": "fixed", "base_ms": 10000}})
        );
        let a = set_args(&["--retain-jobs", "100", "--retain-for", "1h"]);
        assert_eq!(
            merged(json!({}), &a),
            json!({"retention": {"max_jobs": 100, "max_age_ms": 3_600_000}})
        );
        let a = set_args(&["--unset", "retention"]);
        assert_eq!(
            merged(
                json!({"retention": {"max_jobs": 1, "max_age_ms": 1000}}),
                &a
            ),
            json!({})
        );
        // The partition count is kept unless named: a PUT without it would ask for one.
        let a = set_args(&["--ttr", "1m"]);
        assert_eq!(
            merged(json!({"partitions": 8}), &a),
            json!({"partitions": 8, "ttr_ms": 60000})
        );
        let a = set_args(&["--partitions", "16"]);
        assert_eq!(merged(json!({}), &a), json!({"partitions": 16}));
        let a = set_args(&["--unset", "partitions"]);
        assert_eq!(merged(json!({"partitions": 8}), &a), json!({}));
    }

    #[test]
    fn retention_needs_both_bounds() {
        for args in [&["--retain-jobs", "5"][..], &["--retain-for", "1h"][..]] {
            let r = Line::try_parse_from(["delayq", "topic", "set", "t"].iter().chain(args));
            assert!(r.is_err(), "{args:?}");
        }
    }

    #[test]
    fn a_growing_backoff_needs_its_base() {
        let r = Line::try_parse_from(["delayq", "topic", "set", "t", "--backoff-max", "1h"]);
        assert!(r.is_err());
    }

    #[test]
    fn text_says_default_where_unset() {
        let t = text(
            "orders",
            &read(&json!({"ttr_ms": 60000, "max_attempts": null, "backoff": {"kind": "fixed", "base_ms": 2000, "jitter": 0.0}, "max_body": 8}))
                .expect("settings"),
        );
        assert!(t.contains("ttr           1m"), "{t}");
        assert!(t.contains("max attempts  default (3)"), "{t}");
        assert!(t.contains("back-off      fixed 2s"), "{t}");
        assert!(t.contains("max body      8 bytes"), "{t}");
        assert!(t.contains("retention     default (none"), "{t}");
    }
}
