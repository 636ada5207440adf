//! The HTTP client of the CLI: one request helper; the server's own wire types
//! (`delayq_server::http`) for what it sends ([`request`]) and reads ([`read`]); and the
//! mapping from the server's error codes to exit codes (the codes and [`Failure`] itself are
//! `failure`'s).

use delayq_server::http::error::ErrorBody;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::args::ClientArgs;
use crate::failure::{Failure, exit};

/// Refuses a `--server` that is not an `http://` or `https://` URL with a host: bad usage
/// (exit 2), said as such, rather than a failure to reach it.
fn check_server(server: &str) -> Result<(), Failure> {
    let usage = |why: &str| {
        Failure::usage(format!(
            "--server {server}: {why}; give the server's base URL with its scheme, e.g. http://{}",
            server
                .split_once("://")
                .map_or(server, |(_, rest)| rest)
                .trim_start_matches('/')
        ))
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
    /// certificate authorities, and with `--ca-cert` against the certificates of that file
    /// too, each as an authority or as exactly the server's own (a self-signed server; see
    /// `tls`).
    pub fn new(args: &ClientArgs) -> Result<Self, Failure> {
        check_server(&args.server)?;
        let mut builder = reqwest::Client::builder();
        if let Some(path) = &args.ca_cert {
            builder = builder.use_preconfigured_tls(crate::tls::client_config(path)?);
        }
        let http = builder.build().map_err(|e| {
            Failure::new(
                exit::ERROR,
                "error",
                format!("cannot set up the HTTP client: {e}"),
            )
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
        let resp = rb.send().await.map_err(|e| self.unreachable(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| {
            Failure::new(
                exit::UNAVAILABLE,
                "unreachable",
                format!("the server's answer was cut: {e}"),
            )
        })?;
        let json: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(json);
        }
        // Anything but the server's error body (a proxy's page, say) is known by its status.
        let error = ErrorBody::deserialize(&json).ok().map(|b| b.error);
        let code = error.as_ref().map_or("", |e| e.code.as_str());
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
            kind: code.to_string(),
            message: error
                .as_ref()
                .map_or_else(|| format!("HTTP {status}"), |e| e.message.clone()),
            field: error.as_ref().and_then(|e| e.field.clone()),
            index: error.and_then(|e| e.index),
            from_server: true,
        })
    }

    /// A request that got no answer: a TLS failure says its cause and what to do (exit 1:
    /// waiting does not fix it); anything else is a server that cannot be reached (exit 5).
    fn unreachable(&self, e: &reqwest::Error) -> Failure {
        if let Some(tls) = crate::tls::cause(e) {
            return Failure::new(exit::ERROR, "tls", crate::tls::explain(tls, &self.base));
        }
        // reqwest's own text says only "error sending request"; its causes say why.
        let mut why = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            why = format!("{why}: {s}");
            source = s.source();
        }
        Failure::new(
            exit::UNAVAILABLE,
            "unreachable",
            format!(
                "cannot reach the server at {}: {why}; is `delayq serve` running? (set --server or DELAYQ_SERVER)",
                self.base
            ),
        )
    }
}

/// Reads an answer of the server as its wire type, the server's own (`delayq_server::http`):
/// the CLI prints the answer as it came with `--json`, and reads its fields through this.
pub fn read<T: DeserializeOwned>(answer: &Value) -> Result<T, Failure> {
    T::deserialize(answer).map_err(|e| {
        Failure::new(
            exit::ERROR,
            "error",
            format!(
                "cannot read the server's answer ({e}); is the server the same version as this delayq ({})?",
                env!("CARGO_PKG_VERSION")
            ),
        )
    })
}

/// A request as JSON, from the server's own wire type: its unset (null) fields left out,
/// as the server reads an absent field and a null one alike.
pub fn request<T: Serialize>(req: &T) -> Result<Value, Failure> {
    let mut v = serde_json::to_value(req).map_err(|e| {
        Failure::new(
            exit::ERROR,
            "error",
            format!("cannot write the request: {e}"),
        )
    })?;
    drop_nulls(&mut v);
    Ok(v)
}

/// Removes the null members of every object in `v`.
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// The wire name of a value of the server's enums (`"delayed"`, `"utf8"`, `"drop"` ...).
pub fn wire_name<T: Serialize>(t: &T) -> String {
    match serde_json::to_value(t) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
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
    fn an_answer_of_another_shape_is_an_error_that_names_the_field_and_the_version() {
        use delayq_server::http::dto::CountResponse;
        let ok: CountResponse = read(&serde_json::json!({"count": 3})).expect("a count reads");
        assert_eq!(ok.count, 3);
        let Err(f) = read::<CountResponse>(&serde_json::json!({"kicked": 3})) else {
            panic!("an answer without `count` must not read");
        };
        assert_eq!((f.code, f.kind.as_str()), (exit::ERROR, "error"));
        assert!(f.message.contains("`count`"), "{}", f.message);
        assert!(
            f.message.contains(&format!(
                "is the server the same version as this delayq ({})?",
                env!("CARGO_PKG_VERSION")
            )),
            "{}",
            f.message
        );
    }

    #[test]
    fn segments_are_escaped() {
        assert_eq!(seg("order-42:a"), "order-42:a");
        assert_eq!(seg("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
    }
}
