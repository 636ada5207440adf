//! `delayq schedule put|get|list|delete` against a real server: the next fire pushed as a
//! delayed job, the expiry given to the jobs it pushes, bad input refused.

use crate::{Server, ok};

/// `delayq schedule put|get|list|delete` against a real server (issue 14): the put answers
/// the next fire, which is pushed at once as a delayed job with the derived id; the list
/// shows it; a bad time zone fails naming the field; delete removes it.
// See: issue 14
#[test]
fn schedules_from_the_command_line_issue_14() {
    let s = Server::start(&[]);
    let out = ok(s.run(&[
        "schedule",
        "put",
        "nightly",
        "build it",
        "--cron",
        "30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--topic",
        "reports",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let next = v["next_fire_ms"].as_u64().expect("a next fire");
    let id = format!("schedule:nightly:{next}");
    let job = ok(s.run(&["get", "reports", &id, "--json"]));
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    assert_eq!(
        (job["state"].as_str(), job["body"].as_str()),
        (Some("delayed"), Some("build it"))
    );
    let out = ok(s.run(&["schedule", "list"]));
    assert!(
        out.starts_with("nightly  \"30 2 * * *\" Europe/Berlin  -> reports  next "),
        "{out}"
    );
    let out = ok(s.run(&["schedule", "get", "nightly"]));
    assert!(out.contains(v["next_fire"].as_str().unwrap()), "{out}");
    let bad = s.run(&[
        "schedule",
        "put",
        "nightly",
        "--cron",
        "* * * * *",
        "--tz",
        "Mars/Olympus",
        "--topic",
        "reports",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/time_zone"));
    // The jobs' expiry (issue 36): kept with the schedule and given to the job it pushes.
    let out = ok(s.run(&[
        "schedule",
        "put",
        "hourly",
        "--cron",
        "@hourly",
        "--topic",
        "reports",
        "--max-lateness",
        "5m",
        "--on-expire",
        "drop",
        "--json",
    ]));
    let h: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (h["max_lateness_ms"].as_u64(), h["on_expire"].as_str()),
        (Some(300_000), Some("drop")),
        "{h}"
    );
    let both = s.run(&[
        "schedule",
        "put",
        "hourly",
        "--cron",
        "@hourly",
        "--topic",
        "reports",
        "--max-lateness",
        "5m",
        "--expires-at",
        "2100-01-01T00:00:00Z",
    ]);
    assert_eq!(both.status.code(), Some(2), "one of the two, as for a push");
    ok(s.run(&["schedule", "delete", "hourly"]));
    ok(s.run(&["schedule", "delete", "nightly"]));
    let gone = s.run(&["get", "reports", &id]);
    assert_ne!(gone.status.code(), Some(0), "the pending fire was deleted");
    assert_eq!(ok(s.run(&["schedule", "list"])), "");
}
