//! `delayq get`, `delayq reschedule` and `delayq delete`: one job by its id.

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::{JobArgs, RescheduleArgs};
use crate::client::{Client, job_path, report};

pub async fn get(a: JobArgs) -> anyhow::Result<()> {
    let v = Client::new(&a.client)?
        .call(Method::GET, &job_path(&a.topic, &a.id), None)
        .await?;
    if a.client.json {
        println!("{v}");
        return Ok(());
    }
    for key in [
        "topic",
        "id",
        "state",
        "priority",
        "ready_at",
        "created_at",
        "attempts",
        "max_attempts",
        "ttr_ms",
        "deadline",
        "expires_at",
        "on_expire",
        "last_error",
        "encoding",
        "body",
    ] {
        match &v[key] {
            Value::Null => {}
            // Durations for people ("30s", not 30000), named without the unit.
            Value::Number(ms) if key.ends_with("_ms") => {
                let d = std::time::Duration::from_millis(ms.as_u64().unwrap_or(0));
                println!(
                    "{:>12}: {}",
                    key.trim_end_matches("_ms"),
                    crate::text::duration(d)
                );
            }
            Value::String(s) => println!("{key:>12}: {s}"),
            other => println!("{key:>12}: {other}"),
        }
    }
    Ok(())
}

pub async fn delete(a: JobArgs) -> anyhow::Result<()> {
    Client::new(&a.client)?
        .call(Method::DELETE, &job_path(&a.topic, &a.id), None)
        .await?;
    report(&a.client, &json!({ "deleted": true }), || {
        format!("deleted {} from {}", a.id, a.topic)
    });
    Ok(())
}

pub async fn reschedule(a: RescheduleArgs) -> anyhow::Result<()> {
    let body = match (&a.delay, &a.at) {
        (Some(d), _) => json!({ "delay_ms": d.as_millis() as u64 }),
        (None, Some(at)) => json!({ "ready_at": at }),
        (None, None) => anyhow::bail!("give the new due time with --delay or --at"),
    };
    let v = Client::new(&a.client)?
        .call(
            Method::POST,
            &format!("{}/reschedule", job_path(&a.topic, &a.id)),
            Some(&body),
        )
        .await?;
    report(&a.client, &v, || {
        format!(
            "rescheduled {} in {}: due {}",
            a.id,
            a.topic,
            v["ready_at"].as_str().unwrap_or("?")
        )
    });
    Ok(())
}
