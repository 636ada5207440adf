//! `delayq push`.

use std::io::Read;

use anyhow::Context;
use delayq_server::http::dto::{Encoding, OnConflictDto, PushRequest, PushResponse};
use reqwest::Method;

use crate::args::{job_fields, ms};
use crate::cli::{OnConflictArg, PushArgs};
use crate::client::{Client, read, request, seg, wire_name};

pub async fn run(a: PushArgs) -> anyhow::Result<()> {
    let req = request(&push_request(&a)?)?;
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
        let p: PushResponse = read(&v)?;
        let verb = if p.created {
            "pushed"
        } else if p.replaced {
            "replaced"
        } else {
            "exists (unchanged)"
        };
        println!(
            "{verb} {} in {}: {}, due {}",
            p.id,
            a.topic,
            wire_name(&p.state),
            p.ready_at
        );
    }
    Ok(())
}

/// The request of `POST /v1/topics/{topic}/jobs`.
fn push_request(a: &PushArgs) -> anyhow::Result<PushRequest> {
    let (body, encoding) = body(a)?;
    let job = job_fields(&a.job, &a.expiry);
    Ok(PushRequest {
        id: a.id.clone(),
        body,
        encoding,
        delay_ms: a.delay.map(ms),
        ready_at: a.at.clone(),
        ttr_ms: job.ttr_ms,
        max_attempts: job.max_attempts,
        priority: job.priority,
        backoff: None,
        on_conflict: match a.on_conflict {
            None | Some(OnConflictArg::Keep) => OnConflictDto::Keep,
            Some(OnConflictArg::Replace) => OnConflictDto::Replace,
            Some(OnConflictArg::Debounce) => OnConflictDto::Debounce,
        },
        max_wait_ms: a.max_wait.map(ms),
        expires_at: job.expires_at,
        max_lateness_ms: job.max_lateness_ms,
        on_expire: job.on_expire,
    })
}

/// The body and its encoding: the argument as text, or a file sent as text when it is
/// UTF-8, else as base64. The argument `-` reads standard input as a line of text, without
/// the newline `echo` ends it with (as `$(…)` and `curl -d @-` drop it); `--file -` keeps
/// every byte (as `curl --data-binary @-`).
fn body(a: &PushArgs) -> anyhow::Result<(String, Encoding)> {
    let bytes = match (&a.body, &a.file) {
        (Some(b), _) if b == "-" => without_final_newline(read_stdin()?),
        (Some(b), _) => return Ok((b.clone(), Encoding::Utf8)),
        (None, Some(p)) if p.as_os_str() == "-" => read_stdin()?,
        (None, Some(p)) => {
            std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?
        }
        (None, None) => {
            anyhow::bail!("give the body as an argument, or --file PATH ('-' for standard input)")
        }
    };
    Ok(match String::from_utf8(bytes) {
        Ok(s) => (s, Encoding::Utf8),
        Err(e) => {
            use base64::Engine as _;
            (
                base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                Encoding::Base64,
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
