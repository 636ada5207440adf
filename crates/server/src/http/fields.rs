//! What each field of a request body accepts and the error code of a bad value, and the
//! answer to a body that does not decode: the field's JSON pointer, that code, and what the
//! field accepts, in our words (never serde's: "expected u64", "untagged enum" ...).

use serde_json::Value;
use serde_json::error::Category;

use super::error::ApiError;

/// The error code of a bad value of field `name`, and what the field accepts.
///
/// One table for every request, so the same mistake gets the same code everywhere: a bad
/// `delay_ms` is `invalid_delay` whether it is negative, fractional, a string or too large,
/// in a push, a batch item, a nack or a reschedule.
pub fn rule(name: &str) -> (&'static str, &'static str) {
    const MS_10Y: &str = "a whole number of milliseconds from 0 to 315576000000 (10 years)";
    match name {
        "topic" => (
            "invalid_topic",
            "a topic name: 1 to 200 characters from A-Z, a-z, 0-9, '_', '.', ':' and '-'",
        ),
        "topics" => (
            "invalid_argument",
            "a list of 1 to 64 distinct topic names, each 1 to 200 characters from A-Z, a-z, 0-9, '_', '.', ':' and '-'",
        ),
        "id" => (
            "invalid_id",
            "a job id: a string of 1 to 200 visible ASCII characters",
        ),
        "delay_ms" => ("invalid_delay", MS_10Y),
        "ready_at" => (
            "invalid_delay",
            "an RFC 3339 time such as \"2026-01-02T15:04:05.000+00:00\", at most 10 years ahead",
        ),
        "ttr_ms" => (
            "invalid_ttr",
            "a whole number of milliseconds from 1000 (1 s) to 86400000 (24 h)",
        ),
        "body" => (
            "invalid_argument",
            "a string: UTF-8 text, or base64 with \"encoding\": \"base64\"",
        ),
        "encoding" => ("invalid_argument", "\"utf8\" (the default) or \"base64\""),
        "max_attempts" => ("invalid_argument", "a whole number from 1 to 10000"),
        "retention" => (
            "invalid_argument",
            "null, or an object {\"max_jobs\": 1 to 100000, \"max_age_ms\": 1000 (1 s) to 2592000000 (30 days)}",
        ),
        "max_jobs" => ("invalid_argument", "a whole number from 1 to 100000"),
        "max_age_ms" => (
            "invalid_argument",
            "a whole number of milliseconds from 1000 (1 s) to 2592000000 (30 days)",
        ),
        "max_body" => (
            "invalid_argument",
            "a whole number of bytes from 1 to 536870912 (the server's --max-body stays in force when it is smaller)",
        ),
        "partitions" => (
            "invalid_argument",
            "a whole number from 1 to 1024, which can change only while the topic holds no job (default 1)",
        ),
        "priority" => (
            "invalid_argument",
            "a whole number from 0 to 4294967295 (lower runs first; default 0)",
        ),
        "backoff" => (
            "invalid_argument",
            "an object {\"kind\": \"fixed\" or \"exponential\", \"base_ms\", and optionally \"max_ms\", \"factor\", \"jitter\"}",
        ),
        "kind" => ("invalid_argument", "\"fixed\" or \"exponential\""),
        "base_ms" | "max_ms" => ("invalid_argument", MS_10Y),
        "factor" => ("invalid_argument", "a whole number from 1 to 100"),
        "jitter" => ("invalid_argument", "a number from 0 to 1"),
        "jobs" => (
            "invalid_argument",
            "a list of 1 to 1000 jobs, each an object with at least \"body\"",
        ),
        "max" => ("invalid_argument", "a whole number from 0 to 1000"),
        "wait_ms" => (
            "invalid_argument",
            "a whole number of milliseconds (a wait over the server's limit is cut to it)",
        ),
        "mode" => (
            "invalid_argument",
            "\"at_least_once\" (the default) or \"at_most_once\"",
        ),
        "settle" => (
            "invalid_argument",
            "a list of up to 1000 leases to settle, each {\"receipt\"} or {\"topic\", \"id\", \"token\"}, with an optional \"outcome\"",
        ),
        "outcome" => (
            "invalid_argument",
            "\"ack\" (the default), \"nack\", \"bury\" or \"release\"",
        ),
        "reason" => ("invalid_argument", "a string of at most 4096 bytes"),
        "token" => (
            "invalid_argument",
            "the whole number \"token\" of the delivery, as the reserve answered it",
        ),
        "receipt" => (
            "invalid_receipt",
            "the \"receipt\" string of a delivery, unchanged",
        ),
        "receipts" => (
            "invalid_argument",
            "a list of 1 to 1000 receipts, each the \"receipt\" string of a delivery, unchanged",
        ),
        "leases" => (
            "invalid_argument",
            "a list of 1 to 1000 leases, each {\"topic\", \"id\", \"token\"}",
        ),
        "state" => (
            "invalid_argument",
            "one of delayed, ready, reserved, dead, done",
        ),
        "limit" => ("invalid_argument", "a whole number from 1 to 1000"),
        "action" => (
            "invalid_argument",
            "\"kick\", \"delete\", \"run_now\" or \"bury\"",
        ),
        "ids" => ("invalid_argument", "a list of 1 to 10000 job ids"),
        "prefix" => (
            "invalid_argument",
            "the start of a job id: 1 to 200 visible ASCII characters, no space",
        ),
        "cursor" => (
            "invalid_argument",
            "the next_cursor of the previous page, unchanged",
        ),
        "cron" => (
            "invalid_argument",
            "a cron expression: five fields (minute hour day-of-month month day-of-week), six with seconds first, or a nickname such as @daily",
        ),
        "time_zone" => (
            "invalid_argument",
            "an IANA time zone name such as \"Europe/Berlin\" (default \"UTC\")",
        ),
        "start" | "end" => (
            "invalid_argument",
            "an RFC 3339 time such as \"2026-01-02T15:04:05.000+00:00\", the end not before the start",
        ),
        "jitter_ms" => (
            "invalid_argument",
            "a whole number of milliseconds from 0 to 3600000 (1 h)",
        ),
        "misfire" => (
            "invalid_argument",
            "\"skip\" (the default), \"once\" or \"each\"",
        ),
        "misfire_limit" => ("invalid_argument", "a whole number from 1 to 1000"),
        "on_conflict" => (
            "invalid_argument",
            "\"keep\" (the default), \"replace\" or \"debounce\"",
        ),
        "max_wait_ms" => (
            "invalid_argument",
            "a whole number of milliseconds from 0 to 315576000000 (10 years), with \"on_conflict\": \"debounce\"",
        ),
        "expires_at" => (
            "invalid_argument",
            "an RFC 3339 time such as \"2026-01-02T15:04:05.000+00:00\", after the job's due time",
        ),
        "max_lateness_ms" => (
            "invalid_argument",
            "a whole number of milliseconds from 1 to 315576000000 (10 years)",
        ),
        "on_expire" => (
            "invalid_argument",
            "\"dead\" (the default) or \"drop\", with expires_at or max_lateness_ms",
        ),
        "until" => (
            "invalid_argument",
            "an RFC 3339 time such as \"2026-01-02T15:04:05.000+00:00\", at most 10 years ahead",
        ),
        "for_ms" => (
            "invalid_argument",
            "a whole number of milliseconds from 0 to 315576000000 (10 years)",
        ),
        _ => (
            "invalid_request",
            "what the API document (/v1/openapi.json) describes",
        ),
    }
}

/// A core error as an answer; when it is about one field of the request (a value out of
/// range), about that field. `delay_field` is the pointer of the field that set the due time
/// (`/delay_ms` or `/ready_at`). Topics and ids are located by their callers, which know
/// whether they came from the path or the body.
pub fn locate(e: delayq_core::Error, delay_field: &str) -> ApiError {
    use delayq_core::Error;
    let field = match &e {
        Error::InvalidDelay { .. } => Some(delay_field.to_string()),
        Error::InvalidTtr { .. } => Some("/ttr_ms".to_string()),
        Error::BodyTooLarge { .. } => Some("/body".to_string()),
        Error::InvalidArgument { what: "wait", .. } => Some("/wait_ms".to_string()),
        Error::InvalidArgument {
            what: "max_wait", ..
        } => Some("/max_wait_ms".to_string()),
        Error::InvalidArgument {
            what: "max_lateness",
            ..
        } => Some("/max_lateness_ms".to_string()),
        Error::InvalidArgument { what, .. } if rule(what).0 != "invalid_request" => {
            Some(format!("/{what}"))
        }
        _ => None,
    };
    let e = ApiError::from(e);
    match field {
        Some(f) => e.at(f),
        None => e,
    }
}

/// The answer to a request body that is not JSON (or has something after its JSON value).
pub fn not_json(e: &serde_json::Error) -> ApiError {
    let place = format!("line {}, column {}", e.line(), e.column());
    let what = match e.classify() {
        Category::Eof => format!("it ends before its JSON value does ({place})"),
        _ => format!("the first thing that is not JSON is at {place}"),
    };
    ApiError::invalid_request(format!(
        "the body is not valid JSON: {what}; send one JSON object as /v1/openapi.json describes"
    ))
}

/// The answer to a request body that did not decode into its type.
pub fn decode_error(body: &[u8], err: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path: Vec<Step> = err.path().iter().filter_map(Step::of).collect();
    let inner = err.into_inner();
    let text = inner.to_string();
    if inner.classify() != Category::Data && !text.starts_with("number out of range") {
        return not_json(&inner);
    }
    if let Some(name) = quoted_after(&text, "missing field `") {
        let mut path = path;
        path.push(Step::Key(name.to_string()));
        let (code, accepts) = rule(name);
        return located(path, code, format!("missing; {name} takes {accepts}"));
    }
    if let Some(name) = quoted_after(&text, "unknown field `") {
        // The path ends at the object that holds the unknown key.
        let mut path = path;
        if path.last() != Some(&Step::Key(name.to_string())) {
            path.push(Step::Key(name.to_string()));
        }
        let known = expected_fields(&text);
        let hint = if known.is_empty() {
            "this object takes no fields".to_string()
        } else {
            format!("the fields here are {}", known.join(", "))
        };
        return located(
            path,
            "invalid_request",
            format!("{name} is not a field of this request; remove it ({hint})"),
        );
    }
    if let Some(name) = quoted_after(&text, "duplicate field `") {
        let mut path = path;
        path.push(Step::Key(name.to_string()));
        return located(
            path,
            "invalid_request",
            format!("{name} is given twice; give it once"),
        );
    }
    // A list's own problems (not a list, empty, too long) have the list's rule; an item of a
    // list of names has the name's rule (a bad item of topics is invalid_topic).
    let (name, rule_name) = match path.as_slice() {
        [.., Step::Key(list), Step::Index(_)] => (format!("each item of {list}"), item_of(list)),
        [.., Step::Key(key)] => (key.clone(), key.as_str()),
        _ => {
            return ApiError::invalid_request(format!(
                "the body is {}; send one JSON object as /v1/openapi.json describes",
                describe(serde_json::from_slice::<Value>(body).ok().as_ref())
            ));
        }
    };
    let got = serde_json::from_slice::<Value>(body).ok();
    let got = got.as_ref().and_then(|v| v.pointer(&pointer(&path)));
    let (code, accepts) = rule(rule_name);
    let message = format!("got {}; {name} takes {accepts}", describe(got));
    located(path, code, message)
}

/// The rule of an item of the list `list`: a list of names has the name's rule.
fn item_of(list: &str) -> &str {
    match list {
        "topics" => "topic",
        "receipts" => "receipt",
        other => other,
    }
}

/// One step of a path into the request body.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl Step {
    fn of(s: &serde_path_to_error::Segment) -> Option<Step> {
        match s {
            serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
            _ => None,
        }
    }
}

/// The RFC 6901 pointer of a path.
fn pointer(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
            Step::Index(i) => format!("/{i}"),
        })
        .collect()
}

/// An error at `path`; inside an item of a top-level list, about that item.
fn located(path: Vec<Step>, code: &'static str, message: String) -> ApiError {
    let e = ApiError::new(axum::http::StatusCode::BAD_REQUEST, code, message);
    match path.as_slice() {
        [Step::Key(list), Step::Index(i), rest @ ..] => e.at(pointer(rest)).in_item(list, *i),
        _ => e.at(pointer(&path)),
    }
}

/// What a client sent, in a few words.
fn describe(v: Option<&Value>) -> String {
    match v {
        None => "a value that is not accepted".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => match n.as_f64() {
            // A fraction, an exponent or a number past 2^64: JSON parsers read it as a float.
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() >= 1e15 => {
                format!("{f:e}, not a whole number in range")
            }
            Some(_) if n.is_f64() => format!("{n}, not a whole number in range"),
            _ => n.to_string(),
        },
        Some(Value::String(s)) if s.chars().count() > 40 => {
            let cut: String = s.chars().take(40).collect();
            format!("the string {cut:?}…")
        }
        Some(Value::String(s)) => format!("the string {s:?}"),
        Some(Value::Array(_)) => "a list".into(),
        Some(Value::Object(_)) => "an object".into(),
    }
}

/// The name between `` ` `` quotes right after `prefix` at the start of `text`.
fn quoted_after<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(prefix)?;
    rest.split('`').next()
}

/// The field names a struct takes, from an unknown-field message (`expected one of ...`).
fn expected_fields(text: &str) -> Vec<&str> {
    let Some((_, list)) = text.split_once(", expected ") else {
        return Vec::new();
    };
    list.split('`').skip(1).step_by(2).collect()
}

/// The answer to a query string that did not decode into its type: the parameter named, with
/// its own code, what it was given and what it accepts (never serde's words).
pub fn query_error(
    query: &str,
    err: serde_path_to_error::Error<serde_urlencoded::de::Error>,
) -> ApiError {
    let text = err.inner().to_string();
    if let Some(unknown) = quoted_after(&text, "unknown field `") {
        return ApiError::invalid_request(format!(
            "query parameter {unknown} is not one of this route's; remove it"
        ));
    }
    let name = match err.path().iter().next_back() {
        Some(serde_path_to_error::Segment::Map { key }) => Some(key.clone()),
        _ => quoted_after(&text, "missing field `").map(str::to_string),
    };
    let Some(name) = name else {
        return ApiError::invalid_request(
            "the query string could not be read; the parameters of each route are in /v1/openapi.json",
        );
    };
    let given = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.into_owned());
    let (code, accepts) = rule(&name);
    let got = match given {
        Some(v) => format!("got {v:?}"),
        None => "missing".to_string(),
    };
    ApiError::new(
        axum::http::StatusCode::BAD_REQUEST,
        code,
        format!("query parameter {name}: {got}; {name} takes {accepts}"),
    )
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // Only decoded.
    struct Item {
        body: String,
        delay_ms: Option<u64>,
        priority: Option<u32>,
    }

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // Only decoded.
    struct Batch {
        jobs: Vec<Item>,
    }

    fn error_of(body: &str) -> ApiError {
        let mut de = serde_json::Deserializer::from_str(body);
        match serde_path_to_error::deserialize::<_, Batch>(&mut de) {
            Ok(b) => panic!("{body} decoded: {b:?}"),
            Err(e) => decode_error(body.as_bytes(), e),
        }
    }

    #[test]
    fn pointers_codes_and_our_words() {
        let cases = [
            (
                r#"{"jobs": [{"body": "a"}, {"body": "b", "delay_ms": -5}]}"#,
                "invalid_delay",
                Some("/jobs/1/delay_ms"),
                "got -5",
            ),
            (
                r#"{"jobs": [{"body": "a", "delay_ms": 99999999999999999999}]}"#,
                "invalid_delay",
                Some("/jobs/0/delay_ms"),
                "got 1e20, not a whole number in range; delay_ms takes a whole number of milliseconds",
            ),
            (
                r#"{"jobs": [{"body": "a", "priority": -1}]}"#,
                "invalid_argument",
                Some("/jobs/0/priority"),
                "got -1; priority takes a whole number from 0 to 4294967295",
            ),
            (
                r#"{"jobs": [{"delay_ms": 5}]}"#,
                "invalid_argument",
                Some("/jobs/0/body"),
                "missing; body takes a string",
            ),
            (
                r#"{"jobs": [{"body": "a", "colour": "red"}]}"#,
                "invalid_request",
                Some("/jobs/0/colour"),
                "the fields here are body, delay_ms, priority",
            ),
            (
                r#"{"jobs": "all of them"}"#,
                "invalid_argument",
                Some("/jobs"),
                "got the string \"all of them\"",
            ),
            (r#"[1, 2]"#, "invalid_request", None, "the body is a list"),
            (
                r#"{"jobs": [}"#,
                "invalid_request",
                None,
                "the body is not valid JSON: the first thing that is not JSON is at line 1, column 11",
            ),
            (
                r#"{"jobs": ["#,
                "invalid_request",
                None,
                "the body is not valid JSON: it ends before its JSON value does",
            ),
        ];
        for (body, code, field, words) in cases {
            let e = error_of(body);
            let m = e.message();
            assert_eq!((e.code(), e.field()), (code, field), "{body}: {m}");
            assert!(m.contains(words), "{body}: {m}");
            for serde_words in [
                "expected u",
                "expected i",
                "floating point",
                "untagged",
                "`",
            ] {
                assert!(!m.contains(serde_words), "{body}: serde's words in {m}");
            }
        }
        assert_eq!(
            error_of(r#"{"jobs": [{"body": "a"}, {"body": "b", "delay_ms": -5}]}"#)
                .detail()
                .index,
            Some(1)
        );
    }

    #[test]
    fn pointers_escape_their_keys() {
        assert_eq!(
            pointer(&[Step::Key("a/b~c".into()), Step::Index(2)]),
            "/a~1b~0c/2"
        );
    }
}
