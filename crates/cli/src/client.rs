//! The HTTP client of the CLI: one request helper, and the mapping from the server's error
//! codes to exit codes.

use std::fmt;

use reqwest::Method;
use serde_json::Value;

use crate::cli::ClientArgs;

/// Exit codes, documented in `delayq --help`.
pub mod exit {
    /// Any other error.
    pub const ERROR: i32 = 1;
    /// Bad usage (clap's own errors end with this code too).
    pub const USAGE: i32 = 2;
    /// The job (or route) does not exist.
    pub const NOT_FOUND: i32 = 3;
    /// Lease lost, wrong state, partitions in use (and `already_exists`, which no route
    /// answers today).
    pub const CONFLICT: i32 = 4;
    /// The server cannot be reached, its store is unavailable or full (`engine_full`), or a
    /// write was not acknowledged by the replicas asked for (`not_replicated`): retry later.
    pub const UNAVAILABLE: i32 = 5;
}

/// A failed command, with the exit code it should end with.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Refuses a `--server` that is not an `http://` or `https://` URL with a host: bad usage
/// (exit 2), said as such, rather than a failure to reach it.
fn check_server(server: &str) -> Result<(), Failure> {
    let usage = |why: &str| Failure {
        code: exit::USAGE,
        message: format!(
            "--server {server}: {why}; give the server's base URL with its scheme, e.g. http://{}",
            server
                .split_once("://")
                .map_or(server, |(_, rest)| rest)
                .trim_start_matches('/')
        ),
    };
    if !server.contains("://") {
        return Err(usage("it has no scheme (add http:// or https://)"));
    }
    match reqwest::Url::parse(server) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(()),
        Ok(url) if matches!(url.scheme(), "http" | "https") => Err(usage("it names no host")),
        Ok(url) => Err(usage(&format!(
            "`{}` is not a scheme delayq speaks (http or https)",
            url.scheme()
        ))),
        Err(e) => Err(usage(&format!("it is not a URL ({e})"))),
    }
}

/// A client of one server.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client of `args.server`: `https://` servers are checked against the system's
    /// certificate authorities, and against `--ca-cert` when given (a self-signed server).
    pub fn new(args: &ClientArgs) -> Result<Self, Failure> {
        check_server(&args.server)?;
        let mut builder = reqwest::Client::builder();
        if let Some(path) = &args.ca_cert {
            let usage = |why: String| Failure {
                code: exit::USAGE,
                message: format!(
                    "--ca-cert {}: {why}; give the PEM file of the certificate (or its authority) that the server's --tls-cert was issued by",
                    path.display()
                ),
            };
            let pem = std::fs::read(path).map_err(|e| usage(e.to_string()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| usage(format!("not a PEM certificate ({e})")))?;
            if certs.is_empty() {
                return Err(usage("it holds no certificate".into()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| Failure {
            code: exit::ERROR,
            message: format!("cannot set up the HTTP client: {e}"),
        })?;
        Ok(Client {
            http,
            base: args.server.trim_end_matches('/').to_string(),
            token: args.token.clone(),
        })
    }

    /// Sends a request; answers the JSON body of a 2xx (Null when empty) or a [`Failure`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let mut rb = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let resp = rb.send().await.map_err(|e| Failure {
            code: exit::UNAVAILABLE,
            message: format!("cannot reach the server at {}: {e}; is `delayq serve` running? (set --server or DELAYQ_SERVER)", self.base),
        })?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| Failure {
            code: exit::UNAVAILABLE,
            message: format!("the server's answer was cut: {e}"),
        })?;
        let json: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(json);
        }
        let code = json["error"]["code"].as_str().unwrap_or("");
        let message = json["error"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("HTTP {status}"));
        Err(Failure {
            code: match code {
                "not_found" => exit::NOT_FOUND,
                "lease_lost" | "wrong_state" | "already_exists" | "partitions_in_use" => {
                    exit::CONFLICT
                }
                "unavailable" | "engine_full" | "not_replicated" | "overloaded" | "timeout" => {
                    exit::UNAVAILABLE
                }
                _ => exit::ERROR,
            },
            message: format!("{code}: {message}"),
        })
    }
}

/// The path of a job: `/v1/topics/{topic}/jobs/{id}`, both escaped.
pub fn job_path(topic: &str, id: &str) -> String {
    format!("/v1/topics/{}/jobs/{}", seg(topic), seg(id))
}

/// Prints the outcome of a command: `answer` with `--json`, else the `text` line.
pub fn report(args: &ClientArgs, answer: &Value, text: impl FnOnce() -> String) {
    if args.json {
        println!("{answer}");
    } else {
        println!("{}", text());
    }
}

/// Percent-encodes a path segment (job ids may hold `/`, `?`, `#` ...).
pub fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_escaped() {
        assert_eq!(seg("order-42:a"), "order-42:a");
        assert_eq!(seg("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
    }
}
