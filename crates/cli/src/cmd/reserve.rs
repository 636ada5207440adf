//! `delayq reserve`: due jobs with their lease tokens, or exit 6 when none came.

use delayq_server::http::dto::{ModeDto, ReserveRequest, ReserveResponse};
use reqwest::Method;

use crate::cli::ReserveArgs;
use crate::client::{Client, read, request};
use crate::failure::{Failure, exit};

pub async fn reserve(a: ReserveArgs) -> anyhow::Result<()> {
    // clap sees -q and --json conflict only when both follow the subcommand.
    if a.quiet && a.client.json {
        return Err(
            Failure::usage("-q prints lease tokens and --json the whole answer: give one").into(),
        );
    }
    let req = request(&ReserveRequest {
        topics: a.topics.clone(),
        max: Some(a.max),
        wait_ms: Some(a.wait.as_millis() as u64),
        mode: if a.at_most_once {
            ModeDto::AtMostOnce
        } else {
            ModeDto::AtLeastOnce
        },
        settle: Vec::new(),
    })?;
    let v = Client::new(&a.client)?
        .call(Method::POST, "/v1/reserve", Some(&req))
        .await?;
    let jobs = read::<ReserveResponse>(&v)?.jobs;
    if a.client.json {
        println!("{v}");
    } else if a.quiet {
        for d in &jobs {
            println!("{}", token(d.token, "null"));
        }
    } else if jobs.is_empty() {
        println!("no job due");
    }
    if jobs.is_empty() {
        // Said on standard output already (or, with -q, said here): exit 6, so that
        // `token=$(delayq reserve … -q)` does not go on with an empty token.
        let message = if a.quiet {
            format!(
                "no job due in {} within --wait {}",
                a.topics.join(", "),
                humantime::format_duration(a.wait)
            )
        } else {
            String::new()
        };
        return Err(Failure::new(exit::NO_JOB, "no_job", message).into());
    }
    if a.client.json || a.quiet {
        return Ok(());
    }
    for d in jobs {
        let j = &d.job;
        println!(
            "{} {} token={} attempt={} late={:.1}ms body={}",
            j.topic,
            j.id,
            token(d.token, "-"),
            j.attempts,
            d.lateness_ms,
            j.body
        );
    }
    Ok(())
}

/// A delivery's lease token, or `none` without one (at most once).
fn token(t: Option<u64>, none: &str) -> String {
    t.map_or_else(|| none.to_string(), |t| t.to_string())
}
