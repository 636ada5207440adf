//! One HTTP call of a chaos client and how its answer is classified: an answer (2xx, or an
//! error with its stable code), or a fault that leaves the outcome unknown (the connection
//! refused, cut mid-request, a timeout, a 503 or another 5xx). Every fault is counted by
//! operation and kind; `until_answered` retries as a real client does, on any live server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng as _;
use rand::rngs::StdRng;
use serde_json::Value;

use super::fleet::Endpoints;

/// Counters shared by every client thread, by name (`push.fault.timeout` ...).
#[derive(Default)]
pub struct Tally(Mutex<BTreeMap<String, u64>>);

impl Tally {
    /// Adds one to `key`.
    pub fn add(&self, key: &str) {
        *self
            .0
            .lock()
            .expect("tally lock")
            .entry(key.to_string())
            .or_default() += 1;
    }

    /// The counters so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().expect("tally lock").clone()
    }
}

/// A call whose outcome is unknown to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The connection was refused or could not be made: nothing was sent.
    Refused,
    /// The connection broke after the request went out (reset, closed, a cut body).
    Cut,
    /// No answer within the client's timeout.
    Timeout,
    /// The server answered 503 with this code (`unavailable`, `overloaded` ...).
    Unavailable(String),
    /// Another 5xx answer (a server bug: counted and reported).
    ServerError(u16, String),
}

impl Fault {
    /// The kind, as counted.
    pub fn label(&self) -> String {
        match self {
            Fault::Refused => "refused".into(),
            Fault::Cut => "cut".into(),
            Fault::Timeout => "timeout".into(),
            Fault::Unavailable(code) => format!("503_{code}"),
            Fault::ServerError(status, code) => format!("{status}_{code}"),
        }
    }

    /// True when the request may have been applied (anything but a refused connection).
    pub fn ambiguous(&self) -> bool {
        *self != Fault::Refused
    }
}

/// A definite answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 2xx, with its JSON body (`Null` when empty).
    Ok(Value),
    /// 4xx, with its error code.
    Rejected(u16, String),
}

/// What a retried call ended with.
pub struct Retried {
    /// The answer, or `None` when the client gave up.
    pub reply: Option<Reply>,
    /// The faults of the tries before it, in order.
    pub faults: Vec<Fault>,
}

impl Retried {
    /// True when a try before the answer may have been applied.
    pub fn after_ambiguity(&self) -> bool {
        self.faults.iter().any(Fault::ambiguous)
    }
}

/// A client: an HTTP connection pool, the servers' addresses, and the shared counters.
pub struct Caller {
    http: reqwest::blocking::Client,
    endpoints: Arc<Endpoints>,
    tally: Arc<Tally>,
    /// This client's random source.
    pub rng: StdRng,
}

impl Caller {
    /// A client with a request timeout of `timeout`.
    pub fn new(endpoints: Arc<Endpoints>, tally: Arc<Tally>, rng: StdRng) -> Caller {
        Caller {
            http: reqwest::blocking::Client::builder()
                .connect_timeout(Duration::from_secs(1))
                .timeout(Duration::from_secs(5))
                .build()
                .expect("an HTTP client"),
            endpoints,
            tally,
            rng,
        }
    }

    /// One POST (or GET without a body) to a server picked at random; a fault is counted as
    /// `<op>.fault.<kind>`.
    pub fn once(&mut self, op: &str, path: &str, body: Option<&Value>) -> Result<Reply, Fault> {
        let url = format!(
            "{}{path}",
            self.endpoints.get(self.rng.random::<u32>() as usize)
        );
        let req = match body {
            Some(b) => self.http.post(url).json(b),
            None => self.http.get(url),
        };
        let out = classify(req.send());
        if let Err(f) = &out {
            self.tally.add(&format!("{op}.fault.{}", f.label()));
        }
        out
    }

    /// Retries `once` (jittered pauses, any server) until an answer or `give_up`.
    pub fn until_answered(
        &mut self,
        op: &str,
        path: &str,
        body: &Value,
        give_up: Duration,
    ) -> Retried {
        let start = Instant::now();
        let mut faults = Vec::new();
        loop {
            match self.once(op, path, Some(body)) {
                Ok(reply) => {
                    return Retried {
                        reply: Some(reply),
                        faults,
                    };
                }
                Err(f) => faults.push(f),
            }
            if start.elapsed() > give_up {
                self.tally.add(&format!("{op}.gave_up"));
                return Retried {
                    reply: None,
                    faults,
                };
            }
            let pause = self.rng.random_range(20..120);
            std::thread::sleep(Duration::from_millis(pause));
        }
    }
}

fn classify(sent: reqwest::Result<reqwest::blocking::Response>) -> Result<Reply, Fault> {
    let resp = sent.map_err(|e| fault_of(&e))?;
    let status = resp.status().as_u16();
    let text = resp.text().map_err(|e| fault_of(&e))?;
    let json: Value = if text.is_empty() {
        Value::Null
    } else {
        // A body cut short by a crash does not parse: the answer never fully came.
        serde_json::from_str(&text).map_err(|_| Fault::Cut)?
    };
    let code = json["error"]["code"].as_str().unwrap_or("").to_string();
    match status {
        200..=299 => Ok(Reply::Ok(json)),
        503 => Err(Fault::Unavailable(code)),
        500..=599 => Err(Fault::ServerError(status, code)),
        _ => Ok(Reply::Rejected(status, code)),
    }
}

fn fault_of(e: &reqwest::Error) -> Fault {
    if e.is_connect() {
        Fault::Refused
    } else if e.is_timeout() {
        Fault::Timeout
    } else {
        Fault::Cut
    }
}
