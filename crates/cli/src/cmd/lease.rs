//! `delayq ack`, `nack`, `touch`, `release` and `bury`: what a worker answers for a delivery,
//! each one request with the lease token that `delayq reserve` printed.

use delayq_server::http::dto::{
    BuryRequest, NackRequest, NackResponse, TokenRequest, TouchRequest, TouchResponse,
};
use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::{BuryArgs, LeaseArgs, NackArgs, TouchArgs};
use crate::client::{Client, job_path, read, report, request};

/// Posts `body` to the delivery's `verb` route.
async fn post(lease: &LeaseArgs, verb: &str, body: &impl Serialize) -> anyhow::Result<Value> {
    let path = format!("{}/{verb}", job_path(&lease.topic, &lease.id));
    Ok(Client::new(&lease.client)?
        .call(Method::POST, &path, Some(&request(body)?))
        .await?)
}

/// The lease of `lease`, by its token.
fn token(lease: &LeaseArgs) -> TokenRequest {
    TokenRequest {
        token: Some(lease.lease_token),
        receipt: None,
    }
}

pub async fn ack(a: LeaseArgs) -> anyhow::Result<()> {
    post(&a, "ack", &token(&a)).await?;
    report(&a.client, &json!({ "acked": true }), || {
        format!("acked {} in {}", a.id, a.topic)
    });
    Ok(())
}

pub async fn nack(a: NackArgs) -> anyhow::Result<()> {
    let l = &a.lease;
    let body = NackRequest {
        token: Some(l.lease_token),
        receipt: None,
        delay_ms: a.delay.map(|d| d.as_millis() as u64),
        reason: a.reason.clone(),
    };
    let v = post(l, "nack", &body).await?;
    let nacked: NackResponse = read(&v)?;
    report(&l.client, &v, || match nacked.outcome.as_str() {
        "dead" => format!("nacked {} in {}: dead, out of attempts", l.id, l.topic),
        _ => format!(
            "nacked {} in {}: retry at {}",
            l.id,
            l.topic,
            nacked.ready_at.as_deref().unwrap_or("?")
        ),
    });
    Ok(())
}

pub async fn touch(a: TouchArgs) -> anyhow::Result<()> {
    let l = &a.lease;
    let body = TouchRequest {
        token: Some(l.lease_token),
        receipt: None,
        ttr_ms: a.ttr.map(|d| d.as_millis() as u64),
    };
    let v = post(l, "touch", &body).await?;
    let touched: TouchResponse = read(&v)?;
    report(&l.client, &v, || {
        format!(
            "touched {} in {}: lease until {}",
            l.id, l.topic, touched.deadline
        )
    });
    Ok(())
}

pub async fn release(a: LeaseArgs) -> anyhow::Result<()> {
    post(&a, "release", &token(&a)).await?;
    report(&a.client, &json!({ "released": true }), || {
        format!("released {} in {}: ready again", a.id, a.topic)
    });
    Ok(())
}

pub async fn bury(a: BuryArgs) -> anyhow::Result<()> {
    let l = &a.lease;
    let body = BuryRequest {
        token: Some(l.lease_token),
        receipt: None,
        reason: a.reason.clone(),
    };
    post(l, "bury", &body).await?;
    report(&l.client, &json!({ "buried": true }), || {
        format!("buried {} in {}: dead", l.id, l.topic)
    });
    Ok(())
}
