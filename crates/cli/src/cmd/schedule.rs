//! `delayq schedule put|get|list|delete`: recurring jobs (`/v1/schedules`), a cron
//! expression in a time zone that every server runs (issue 14). The clap types live here;
//! `cli.rs` only names the subcommand.

use std::time::Duration;

use clap::{Arg, Args, Subcommand, ValueEnum};
use delayq_server::http::dto::Encoding;
use delayq_server::http::{MisfireDto, ScheduleDto, ScheduleRequest, SchedulesResponse};
use reqwest::Method;
use serde_json::Value;

use crate::args::{ClientArgs, ExpiryOptions, JobOptions, job_fields, ms};
use crate::client::{Client, read, request, seg};
use crate::duration::DurationParser;
use crate::failure::Failure;

/// `delayq schedule`.
#[derive(Args, Debug)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

/// Subcommands of `delayq schedule`.
#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create or replace a schedule; its next fire is pushed at once, as a delayed job
    /// `schedule:<name>:<fire ms>`.
    ///
    /// Example: `delayq schedule put nightly-report --cron "30 2 * * *" --tz Europe/Berlin
    /// --topic reports "build the report"`.
    Put(Box<SchedulePutArgs>),
    /// Show one schedule and its next fire time.
    Get(ScheduleNameArgs),
    /// List the schedules with their next fire times, one per line.
    List(ScheduleListArgs),
    /// Delete a schedule and its fire pushed ahead (jobs already due stay).
    Delete(ScheduleNameArgs),
}

/// What to do with fires missed while no server ran.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MisfireArg {
    /// Push nothing for them (as cron).
    Skip,
    /// Push one job now, for the latest.
    Once,
    /// Push one job now for each, at most --misfire-limit.
    Each,
}

/// `delayq schedule put`. Its job options are a push's ([`JobOptions`], [`ExpiryOptions`]),
/// their help worded for the jobs a schedule pushes by [`jobs_wording`].
#[derive(Args, Debug)]
#[command(mut_args(jobs_wording))]
pub struct SchedulePutArgs {
    /// The schedule's name (1 to 100 characters from A-Z a-z 0-9 _ . : -).
    pub name: String,
    /// The body of each job.
    #[arg(default_value = "")]
    pub body: String,
    /// Five fields (minute hour day-of-month month day-of-week), six with seconds first, or
    /// @yearly, @annually, @monthly, @weekly, @daily, @hourly (a seventh field, the year, is
    /// refused: bound the schedule with --start and --end).
    #[arg(long)]
    pub cron: String,
    /// The topic the jobs go to.
    #[arg(long)]
    pub topic: String,
    /// An IANA time zone, e.g. Europe/Berlin [default: UTC].
    #[arg(long = "tz")]
    pub time_zone: Option<String>,
    #[command(flatten)]
    pub job: JobOptions,
    /// No fire before this RFC 3339 time.
    #[arg(long)]
    pub start: Option<String>,
    /// No fire after this RFC 3339 time.
    #[arg(long)]
    pub end: Option<String>,
    /// Each job is due up to this long after its fire time, e.g. 30s (at most 1h).
    #[arg(long, value_parser = DurationParser)]
    pub jitter: Option<Duration>,
    /// Fires missed while no server ran [default: skip].
    #[arg(long, value_enum)]
    pub misfire: Option<MisfireArg>,
    /// With --misfire each, the most missed fires pushed (1 to 1000) [default: 10].
    #[arg(long)]
    pub misfire_limit: Option<u32>,
    #[command(flatten)]
    pub expiry: ExpiryOptions,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// The help of the job options, worded for the jobs a schedule pushes (and for its end: no
/// fire is pushed after --expires-at). In place: `mut_args` keeps the options' order, which
/// the shell completions follow.
fn jobs_wording(a: Arg) -> Arg {
    let help = match a.get_id().as_str() {
        "priority" => "The jobs' priority (lower runs first) [default: 0]",
        "ttr" => "The jobs' lease length, e.g. 1m [default: the topic's]",
        "max_attempts" => "The jobs' deliveries before dead [default: the topic's]",
        "expires_at" => {
            "No job is delivered after this RFC 3339 time, and no fire due at or after it is \
             pushed (as a push's --expires-at)"
        }
        "max_lateness" => {
            "Each job is not delivered more than this long after its due time, e.g. 5m (as a \
             push's --max-lateness)"
        }
        _ => return a,
    };
    a.help(help)
}

/// A schedule by name.
#[derive(Args, Debug)]
pub struct ScheduleNameArgs {
    /// The schedule's name.
    pub name: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq schedule list`.
#[derive(Args, Debug)]
pub struct ScheduleListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

pub async fn run(a: ScheduleArgs) -> anyhow::Result<()> {
    match a.command {
        ScheduleCommand::Put(a) => {
            let v = Client::new(&a.client)?
                .call(
                    Method::PUT,
                    &path(&a.name),
                    Some(&request(&schedule_request(&a))?),
                )
                .await?;
            show(&v, a.client.json)?;
        }
        ScheduleCommand::Get(a) => {
            let v = Client::new(&a.client)?
                .call(Method::GET, &path(&a.name), None)
                .await?;
            show(&v, a.client.json)?;
        }
        ScheduleCommand::List(a) => {
            let v = Client::new(&a.client)?
                .call(Method::GET, "/v1/schedules", None)
                .await?;
            if a.client.json {
                println!("{v}");
            } else {
                for s in read::<SchedulesResponse>(&v)?.schedules {
                    println!("{}", line(&s));
                }
            }
        }
        ScheduleCommand::Delete(a) => {
            let v = Client::new(&a.client)?
                .call(Method::DELETE, &path(&a.name), None)
                .await?;
            if a.client.json {
                println!("{v}");
            } else {
                println!("deleted schedule {}", a.name);
            }
        }
    }
    Ok(())
}

fn path(name: &str) -> String {
    format!("/v1/schedules/{}", seg(name))
}

/// The request of `PUT /v1/schedules/{name}`.
fn schedule_request(a: &SchedulePutArgs) -> ScheduleRequest {
    let job = job_fields(&a.job, &a.expiry);
    ScheduleRequest {
        cron: a.cron.clone(),
        time_zone: a.time_zone.clone(),
        topic: a.topic.clone(),
        body: a.body.clone(),
        encoding: Encoding::Utf8,
        priority: job.priority,
        ttr_ms: job.ttr_ms,
        max_attempts: job.max_attempts,
        backoff: None,
        start: a.start.clone(),
        end: a.end.clone(),
        jitter_ms: a.jitter.map(ms),
        misfire: match a.misfire {
            None | Some(MisfireArg::Skip) => MisfireDto::Skip,
            Some(MisfireArg::Once) => MisfireDto::Once,
            Some(MisfireArg::Each) => MisfireDto::Each,
        },
        misfire_limit: a.misfire_limit,
        max_lateness_ms: job.max_lateness_ms,
        expires_at: job.expires_at,
        on_expire: job.on_expire,
    }
}

fn show(v: &Value, json: bool) -> Result<(), Failure> {
    if json {
        println!("{v}");
    } else {
        println!("{}", line(&read(v)?));
    }
    Ok(())
}

/// One schedule as one line: name, cron and zone, topic, next fire.
fn line(s: &ScheduleDto) -> String {
    format!(
        "{}  \"{}\" {}  -> {}  next {}",
        s.name,
        s.cron,
        s.time_zone,
        s.topic,
        s.next_fire.as_deref().unwrap_or("none (ended)")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    /// A command line with only `delayq schedule` on it, parsed as `cli::Cli` parses that
    /// subcommand; these tests do not name `cli`, which names this module.
    #[derive(Parser, Debug)]
    #[command(name = "delayq")]
    enum Line {
        Schedule(ScheduleArgs),
    }

    #[test]
    fn put_sends_what_was_given() {
        let line = Line::try_parse_from([
            "delayq",
            "schedule",
            "put",
            "nightly",
            "build it",
            "--cron",
            "30 2 * * *",
            "--tz",
            "Europe/Berlin",
            "--topic",
            "reports",
            "--jitter",
            "30s",
            "--misfire",
            "each",
            "--misfire-limit",
            "3",
            "--max-lateness",
            "5m",
            "--on-expire",
            "drop",
        ])
        .expect("parses");
        let Line::Schedule(ScheduleArgs {
            command: ScheduleCommand::Put(a),
        }) = line
        else {
            panic!("not a schedule put");
        };
        // The encoding is the default's, said: the body is text.
        assert_eq!(
            request(&schedule_request(&a)).expect("JSON"),
            json!({"cron": "30 2 * * *", "topic": "reports", "body": "build it", "encoding": "utf8",
                   "time_zone": "Europe/Berlin", "jitter_ms": 30000, "misfire": "each",
                   "misfire_limit": 3, "max_lateness_ms": 300000, "on_expire": "drop"})
        );
        assert!(
            Line::try_parse_from(["delayq", "schedule", "put", "n", "--topic", "t"]).is_err(),
            "--cron is required"
        );
    }

    /// The job options a push shares say, in `schedule put`, what they do to its jobs.
    #[test]
    fn put_words_the_job_options_for_its_jobs() {
        use clap::CommandFactory;
        let line = Line::command();
        let put = line
            .find_subcommand("schedule")
            .and_then(|s| s.find_subcommand("put"))
            .expect("schedule put");
        let help = |id: &str| {
            put.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        for id in ["priority", "ttr", "max_attempts"] {
            assert!(help(id).starts_with("The jobs'"), "{id}: {}", help(id));
        }
        assert!(
            help("expires_at").contains("no fire"),
            "{}",
            help("expires_at")
        );
        assert!(
            help("max_lateness").starts_with("Each job"),
            "{}",
            help("max_lateness")
        );
    }

    #[test]
    fn a_line_names_the_next_fire() {
        let s = json!({"name": "n", "cron": "0 * * * *", "time_zone": "UTC", "topic": "t",
                       "body": "", "encoding": "utf8", "priority": 0, "jitter_ms": 0,
                       "misfire": "skip", "revision": 1,
                       "next_fire": "2026-01-01T01:00:00.000+00:00"});
        assert_eq!(
            line(&read(&s).expect("a schedule")),
            "n  \"0 * * * *\" UTC  -> t  next 2026-01-01T01:00:00.000+00:00"
        );
    }
}
