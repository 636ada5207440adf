//! `delayq get`, `delayq reschedule` and `delayq delete`: one job by its id.

use delayq_server::http::dto::{JobDto, ReadyAtResponse, RescheduleRequest};
use reqwest::Method;
use serde_json::json;

use crate::cli::{JobArgs, RescheduleArgs};
use crate::client::{Client, job_path, read, report, request, wire_name};

pub async fn get(a: JobArgs) -> anyhow::Result<()> {
    let v = Client::new(&a.client)?
        .call(Method::GET, &job_path(&a.topic, &a.id), None)
        .await?;
    if a.client.json {
        println!("{v}");
        return Ok(());
    }
    let j: JobDto = read(&v)?;
    // Durations for people ("30s", not 30000), named without the unit.
    let ttr = crate::text::duration(std::time::Duration::from_millis(j.ttr_ms));
    let rows = [
        ("topic", Some(j.topic)),
        ("id", Some(j.id)),
        ("state", Some(wire_name(&j.state))),
        ("priority", Some(j.priority.to_string())),
        ("ready_at", Some(j.ready_at)),
        ("created_at", Some(j.created_at)),
        ("attempts", Some(j.attempts.to_string())),
        ("max_attempts", Some(j.max_attempts.to_string())),
        ("ttr", Some(ttr)),
        ("deadline", j.deadline),
        ("expires_at", j.expires_at),
        ("on_expire", j.on_expire.as_ref().map(wire_name)),
        ("last_error", j.last_error),
        ("encoding", Some(wire_name(&j.encoding))),
        ("body", Some(j.body)),
    ];
    for (key, value) in rows {
        if let Some(value) = value {
            println!("{key:>12}: {value}");
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
        (Some(d), _) => RescheduleRequest {
            delay_ms: Some(d.as_millis() as u64),
            ready_at: None,
        },
        (None, Some(at)) => RescheduleRequest {
            delay_ms: None,
            ready_at: Some(at.clone()),
        },
        (None, None) => anyhow::bail!("give the new due time with --delay or --at"),
    };
    let v = Client::new(&a.client)?
        .call(
            Method::POST,
            &format!("{}/reschedule", job_path(&a.topic, &a.id)),
            Some(&request(&body)?),
        )
        .await?;
    let due: ReadyAtResponse = read(&v)?;
    report(&a.client, &v, || {
        format!("rescheduled {} in {}: due {}", a.id, a.topic, due.ready_at)
    });
    Ok(())
}
