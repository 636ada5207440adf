//! `delayq push`.

use std::io::Read;

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use crate::args::OnExpireArg;
use crate::cli::{OnConflictArg, PushArgs};
use crate::client::{Client, seg};

pub async fn run(a: PushArgs) -> anyhow::Result<()> {
    let (body, encoding) = body(&a)?;
    let mut req = json!({ "body": body, "encoding": encoding });
    let fields: [(&str, Option<Value>); 11] = [
        ("id", a.id.clone().map(Value::from)),
        (
            "delay_ms",
            a.delay.map(|d| Value::from(d.as_millis() as u64)),
        ),
        ("ready_at", a.at.clone().map(Value::from)),
        ("priority", a.priority.map(Value::from)),
        ("ttr_ms", a.ttr.map(|d| Value::from(d.as_millis() as u64))),
        ("max_attempts", a.max_attempts.map(Value::from)),
        (
            "on_conflict",
            a.on_conflict.map(|c| {
                Value::from(match c {
                    OnConflictArg::Keep => "keep",
                    OnConflictArg::Replace => "replace",
                    OnConflictArg::Debounce => "debounce",
                })
            }),
        ),
        (
            "max_wait_ms",
            a.max_wait.map(|d| Value::from(d.as_millis() as u64)),
        ),
        ("expires_at", a.expires_at.clone().map(Value::from)),
        (
            "max_lateness_ms",
            a.max_lateness.map(|d| Value::from(d.as_millis() as u64)),
        ),
        (
            "on_expire",
            a.on_expire.map(|o| {
                Value::from(match o {
                    OnExpireArg::Dead => "dead",
                    OnExpireArg::Drop => "drop",
                })
            }),
        ),
    ];
    for (k, v) in fields {
        if let Some(v) = v {
            req[k] = v;
        }
    }
    let client = Client::new(&a.client)?;
    let v = client
        .call(
            Method::POST,
            &format!("/v1/topics/{}/jobs", seg(&a.topic)),
            Some(&req),
        )
        .await?;
    if a.client.json {
        println!("{v}");
    } else {
        let verb = if v["created"].as_bool() == Some(true) {
            "pushed"
        } else if v["replaced"].as_bool() == Some(true) {
            "replaced"
        } else {
            "exists (unchanged)"
        };
        println!(
            "{verb} {} in {}: {}, due {}",
            v["id"].as_str().unwrap_or("?"),
            a.topic,
            v["state"].as_str().unwrap_or("?"),
            v["ready_at"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

/// The body and its encoding: the argument as text, or a file sent as text when it is
/// UTF-8, else as base64. The argument `-` reads standard input as a line of text, without
/// the newline `echo` ends it with (as `$(…)` and `curl -d @-` drop it); `--file -` keeps
/// every byte (as `curl --data-binary @-`).
fn body(a: &PushArgs) -> anyhow::Result<(String, &'static str)> {
    let bytes = match (&a.body, &a.file) {
        (Some(b), _) if b == "-" => without_final_newline(read_stdin()?),
        (Some(b), _) => return Ok((b.clone(), "utf8")),
        (None, Some(p)) if p.as_os_str() == "-" => read_stdin()?,
        (None, Some(p)) => {
            std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?
        }
        (None, None) => {
            anyhow::bail!("give the body as an argument, or --file PATH ('-' for standard input)")
        }
    };
    Ok(match String::from_utf8(bytes) {
        Ok(s) => (s, "utf8"),
        Err(e) => {
            use base64::Engine as _;
            (
                base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                "base64",
            )
        }
    })
}

fn read_stdin() -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .context("cannot read standard input")?;
    Ok(buf)
}

/// `bytes` without one final line ending (`\n` or `\r\n`).
fn without_final_newline(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_final_newline_is_dropped() {
        let cut = |b: &[u8]| without_final_newline(b.to_vec());
        assert_eq!(cut(b"body\n"), b"body");
        assert_eq!(cut(b"body\r\n"), b"body");
        assert_eq!(cut(b"two\nlines\n\n"), b"two\nlines\n");
        assert_eq!(cut(b"none"), b"none");
        assert_eq!(cut(b""), b"");
    }
}
