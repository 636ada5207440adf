//! `delayq ack`, `nack`, `touch`, `release` and `bury`: what a worker answers for a delivery,
//! each one request with the lease token that `delayq reserve` printed.

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::{BuryArgs, LeaseArgs, NackArgs, TouchArgs};
use crate::client::{Client, job_path, report};

/// Posts `body` (with the lease token added) to the delivery's `verb` route.
async fn post(lease: &LeaseArgs, verb: &str, mut body: Value) -> anyhow::Result<Value> {
    body["token"] = json!(lease.lease_token);
    let path = format!("{}/{verb}", job_path(&lease.topic, &lease.id));
    Ok(Client::new(&lease.client)?
        .call(Method::POST, &path, Some(&body))
        .await?)
}

pub async fn ack(a: LeaseArgs) -> anyhow::Result<()> {
    post(&a, "ack", json!({})).await?;
    report(&a.client, &json!({ "acked": true }), || {
        format!("acked {} in {}", a.id, a.topic)
    });
    Ok(())
}

pub async fn nack(a: NackArgs) -> anyhow::Result<()> {
    let mut body = json!({});
    if let Some(d) = a.delay {
        body["delay_ms"] = json!(d.as_millis() as u64);
    }
    if let Some(r) = &a.reason {
        body["reason"] = json!(r);
    }
    let l = &a.lease;
    let v = post(l, "nack", body).await?;
    report(&l.client, &v, || match v["outcome"].as_str() {
        Some("dead") => format!("nacked {} in {}: dead, out of attempts", l.id, l.topic),
        _ => format!(
            "nacked {} in {}: retry at {}",
            l.id,
            l.topic,
            v["ready_at"].as_str().unwrap_or("?")
        ),
    });
    Ok(())
}

pub async fn touch(a: TouchArgs) -> anyhow::Result<()> {
    let mut body = json!({});
    if let Some(d) = a.ttr {
        body["ttr_ms"] = json!(d.as_millis() as u64);
    }
    let l = &a.lease;
    let v = post(l, "touch", body).await?;
    report(&l.client, &v, || {
        format!(
            "touched {} in {}: lease until {}",
            l.id,
            l.topic,
            v["deadline"].as_str().unwrap_or("?")
        )
    });
    Ok(())
}

pub async fn release(a: LeaseArgs) -> anyhow::Result<()> {
    post(&a, "release", json!({})).await?;
    report(&a.client, &json!({ "released": true }), || {
        format!("released {} in {}: ready again", a.id, a.topic)
    });
    Ok(())
}

pub async fn bury(a: BuryArgs) -> anyhow::Result<()> {
    let mut body = json!({});
    if let Some(r) = &a.reason {
        body["reason"] = json!(r);
    }
    let l = &a.lease;
    post(l, "bury", body).await?;
    report(&l.client, &json!({ "buried": true }), || {
        format!("buried {} in {}: dead", l.id, l.topic)
    });
    Ok(())
}
