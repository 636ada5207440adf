//! What is compared of a reply: [`normalise`] turns one reply unit into the text that must
//! be equal between beanstalkd and delayq, and [`Ids`] keeps one server's job ids in the
//! order they first appeared (and puts them back into the commands a script sends).
//!
//! Everything this leaves out is named here with its reason, and where delayq differs on
//! purpose the reason is an entry of `differences::DIFFERENCES`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One reply unit as read from a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A line (without CRLF) and, for `RESERVED`, `FOUND` and `OK`, its body (without the
    /// CRLF after it).
    Reply {
        line: Vec<u8>,
        body: Option<Vec<u8>>,
    },
    /// The server closed the connection (`partial`: bytes of an unfinished unit before).
    Closed { partial: Vec<u8> },
    /// Nothing (complete) came within the step's wait.
    NoAnswer { waited: Duration, partial: Vec<u8> },
}

/// The replies whose line ends with the byte count of a body that follows.
pub fn has_body(line: &[u8]) -> bool {
    line.starts_with(b"RESERVED ") || line.starts_with(b"FOUND ") || line.starts_with(b"OK ")
}

/// One server's job ids, numbered `#1`, `#2`, ... in the order the server first named them.
#[derive(Default, Debug)]
pub struct Ids {
    seen: Vec<u64>,
}

impl Ids {
    /// The stable name of a raw id: `#k`, k its rank of first appearance.
    pub fn name(&mut self, raw: u64) -> String {
        let k = match self.seen.iter().position(|&s| s == raw) {
            Some(i) => i + 1,
            None => {
                self.seen.push(raw);
                self.seen.len()
            }
        };
        format!("#{k}")
    }

    /// `text` with every `{idN}` replaced by the raw id this server gave the N-th job.
    pub fn substitute(&self, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = find(rest, b"{id") {
            out.extend_from_slice(&rest[..start]);
            let after = &rest[start + 3..];
            let end = find(after, b"}")
                .unwrap_or_else(|| panic!("unclosed {{id in {:?}", String::from_utf8_lossy(text)));
            let n: usize = std::str::from_utf8(&after[..end])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("bad {{idN}} in {:?}", String::from_utf8_lossy(text)));
            let raw = n
                .checked_sub(1)
                .and_then(|i| self.seen.get(i))
                .unwrap_or_else(|| {
                    panic!(
                        "the script uses {{id{n}}} but this server has named only {} job(s) so far",
                        self.seen.len()
                    )
                });
            out.extend_from_slice(raw.to_string().as_bytes());
            rest = &after[end + 1..];
        }
        out.extend_from_slice(rest);
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Printable text of protocol bytes: CR, LF and non-ASCII escaped.
pub fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// The comparable text of one reply unit. The rules, in full:
///
/// - **Job ids** (`INSERTED <id>`, `BURIED <id>`, `RESERVED <id>`, `FOUND <id>`, and `id` in
///   `stats-job`) become `#k`, their rank of first appearance in this server's replies
///   (`differences::JOB_IDS`). Nothing else is renumbered.
/// - **Bodies** of `RESERVED` and `FOUND` are compared byte for byte, with their length.
/// - **`OK <bytes>`**: the byte count is dropped (it follows from the YAML, whose values
///   differ where allowed below) and the YAML is compared as [`yaml`] says.
/// - Every other line is compared verbatim; a closed connection is `<closed>`.
pub fn normalise(unit: &Unit, ids: &mut Ids) -> String {
    let (line, body) = match unit {
        Unit::Reply { line, body } => (line, body),
        Unit::Closed { partial } if partial.is_empty() => return "<closed>".into(),
        Unit::Closed { partial } => return format!("<closed after {:?}>", show(partial)),
        Unit::NoAnswer { waited, partial } => {
            return format!(
                "<no answer within {:.1} s; got {:?}>",
                waited.as_secs_f64(),
                show(partial)
            );
        }
    };
    let text = String::from_utf8_lossy(line);
    let words: Vec<&str> = text.split(' ').collect();
    let id = |ids: &mut Ids, w: &str| match w.parse::<u64>() {
        Ok(raw) => ids.name(raw),
        Err(_) => format!("<not an id: {w:?}>"),
    };
    match (words.as_slice(), body) {
        (["INSERTED", n], None) => format!("INSERTED {}", id(ids, n)),
        (["BURIED", n], None) => format!("BURIED {}", id(ids, n)),
        ([verb @ ("RESERVED" | "FOUND"), n, len], Some(body)) => {
            format!("{verb} {} {len} {:?}", id(ids, n), show(body))
        }
        (["OK", _], Some(body)) => format!("OK {}", yaml(body, ids)),
        _ => show(line),
    }
}

/// `stats-job`: the keys whose values are compared. Not compared: `age`, `delay` and
/// `time-left` (whole seconds from two different clocks, which round a moment apart
/// differently), `reserves`, `timeouts`, `releases`, `buries` and `kicks` (per-job counters
/// delayq does not keep: `differences::JOB_COUNTERS`).
const STATS_JOB_VALUES: &[&str] = &["id", "tube", "state", "pri", "ttr", "file"];

/// `stats-tube`: the keys whose values are compared. Not compared: `total-jobs`,
/// `current-using`, `current-watching`, `current-waiting`, `cmd-delete` and
/// `cmd-pause-tube` (counted by each delayq server process for itself:
/// `differences::PROCESS_COUNTERS`), `pause` and `pause-time-left` (seconds, two clocks).
const STATS_TUBE_VALUES: &[&str] = &[
    "name",
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
];

/// `stats`: the keys whose values are compared. Not compared: every `cmd-*`,
/// `total-jobs`, `job-timeouts`, `current-tubes`, `current-connections`,
/// `current-producers`, `current-workers`, `current-waiting` and `total-connections`
/// (counted by each delayq server process for itself: `differences::PROCESS_COUNTERS`);
/// `pid`, `version`, `rusage-utime`, `rusage-stime`, `uptime`, `id`, `hostname`, `os` and
/// `platform` (which process on which machine answers); `binlog-*` (delayq has no binlog:
/// its engines persist: `differences::NO_BINLOG`).
const STATS_VALUES: &[&str] = &[
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "max-job-size",
    "draining",
];

/// The comparable text of a YAML body: a list (`list-tubes`, `list-tubes-watched`) as a
/// sorted set; a dictionary as its sorted key set plus the values of the keys compared for
/// its kind ([`STATS_JOB_VALUES`], [`STATS_TUBE_VALUES`], [`STATS_VALUES`]; the kind is told
/// by a key only it has: `state`, `current-watching` without `current-connections`,
/// `current-connections`). A dictionary of another kind is compared whole.
pub fn yaml(body: &[u8], ids: &mut Ids) -> String {
    let text = String::from_utf8_lossy(body);
    let Some(doc) = text.strip_prefix("---\n") else {
        return format!("<not YAML: {:?}>", show(body));
    };
    let mut items = BTreeSet::new();
    let mut dict = BTreeMap::new();
    for line in doc.lines() {
        if let Some(item) = line.strip_prefix("- ") {
            items.insert(item.to_owned());
        } else if let Some((k, v)) = line.split_once(": ") {
            dict.insert(k.to_owned(), v.to_owned());
        } else {
            return format!("<unexpected YAML line {line:?} in {:?}>", show(body));
        }
    }
    if dict.is_empty() {
        let items: Vec<String> = items.into_iter().collect();
        return format!("list {{{}}}", items.join(", "));
    }
    if !items.is_empty() {
        return format!("<a list and a dictionary at once: {:?}>", show(body));
    }
    let (kind, compared) = if dict.contains_key("state") {
        ("stats-job", STATS_JOB_VALUES)
    } else if dict.contains_key("current-connections") {
        ("stats", STATS_VALUES)
    } else if dict.contains_key("current-watching") {
        ("stats-tube", STATS_TUBE_VALUES)
    } else {
        return format!("dict {dict:?}");
    };
    let keys: Vec<&str> = dict.keys().map(String::as_str).collect();
    let mut out = format!("{kind} keys=[{}]", keys.join(" "));
    for key in compared {
        let value = match (dict.get(*key), *key) {
            (Some(v), "id") => v.parse().map_or_else(|_| v.clone(), |raw| ids.name(raw)),
            (Some(v), _) => v.clone(),
            (None, _) => "<missing>".into(),
        };
        out.push_str(&format!(" {key}={value}"));
    }
    out
}
