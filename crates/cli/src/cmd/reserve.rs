//! `delayq reserve`: due jobs with their lease tokens, or exit 6 when none came.

use reqwest::Method;
use serde_json::json;

use crate::cli::ReserveArgs;
use crate::client::Client;
use crate::failure::{Failure, exit};

pub async fn reserve(a: ReserveArgs) -> anyhow::Result<()> {
    // clap sees -q and --json conflict only when both follow the subcommand.
    if a.quiet && a.client.json {
        return Err(
            Failure::usage("-q prints lease tokens and --json the whole answer: give one").into(),
        );
    }
    let req = json!({
        "topics": a.topics,
        "max": a.max,
        "wait_ms": a.wait.as_millis() as u64,
        "mode": if a.at_most_once { "at_most_once" } else { "at_least_once" },
    });
    let v = Client::new(&a.client)?
        .call(Method::POST, "/v1/reserve", Some(&req))
        .await?;
    let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
    if a.client.json {
        println!("{v}");
    } else if a.quiet {
        for d in &jobs {
            println!("{}", d["token"]);
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
        let j = &d["job"];
        println!(
            "{} {} token={} attempt={} late={:.1}ms body={}",
            j["topic"].as_str().unwrap_or("?"),
            j["id"].as_str().unwrap_or("?"),
            d["token"]
                .as_u64()
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".into()),
            j["attempts"],
            d["lateness_ms"].as_f64().unwrap_or(0.0),
            j["body"].as_str().unwrap_or("")
        );
    }
    Ok(())
}
