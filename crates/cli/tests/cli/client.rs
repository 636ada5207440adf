//! How the client subcommands reach a server and report back: `--server` and the client
//! options before or after the subcommand, a server without a scheme, errors as JSON with
//! `--json` and text for people without it, and `delayq health`.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{BIN, Server, exits_within, fails, json_of, ok, reserve_token};

/// A `--server` without a scheme is bad usage (exit 2) that says to add `http://`, not a
/// server that cannot be reached (exit 5); so is a scheme delayq does not speak.
// See: issue 36
#[test]
fn a_server_without_a_scheme_is_bad_usage_issue_36() {
    for (server, says) in [
        ("127.0.0.1:7070", "add http://"),
        ("localhost:7070", "add http://"),
        ("ftp://127.0.0.1:7070", "`ftp` is not a scheme"),
    ] {
        let o = Command::new(BIN)
            .args(["stats", "--server", server])
            .env_remove("DELAYQ_SERVER")
            .env_remove("DELAYQ_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{server}: {err}");
        assert!(err.contains(says), "{server}: {err}");
        assert!(err.contains("e.g. http://"), "{server}: {err}");
        assert!(!err.contains("cannot reach"), "{server}: {err}");
    }
}

/// The client options go before the subcommand too (`delayq --json stats`), as kubectl and
/// redis-cli take them: before it they win over the environment, after it over before it;
/// before a subcommand that talks to no server they are bad usage (exit 2), not ignored.
// See: issue 36
#[test]
fn client_options_go_before_the_subcommand_too_issue_36() {
    let s = Server::start(&[]);
    let elsewhere = "http://127.0.0.1:1";
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("DELAYQ_SERVER", elsewhere)
            .env_remove("DELAYQ_TOKEN")
            .output()
            .unwrap()
    };
    let out = ok(run(&[
        "--server", &s.url, "push", "orders", "x", "--id", "o1",
    ]));
    assert!(out.starts_with("pushed o1 in orders"), "{out}");
    let v = json_of(&ok(run(&["--json", "--server", &s.url, "stats"])));
    assert_eq!(v["topics"][0]["topic"], "orders", "{v}");
    let v = json_of(&ok(run(&[
        "--server", &s.url, "--json", "get", "orders", "o1",
    ])));
    assert_eq!(v["id"], "o1", "{v}");
    let out = ok(run(&[
        "--server", elsewhere, "get", "orders", "o1", "--server", &s.url,
    ]));
    assert!(out.contains("state: ready"), "{out}");
    let (code, _) = fails(run(&["stats"]));
    assert_eq!(
        code,
        Some(5),
        "without --server the environment's server is asked"
    );

    let (code, err) = fails(exits_within(
        Command::new(BIN).args(["--server", &s.url, "serve"]),
        Duration::from_secs(10),
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`delayq serve` takes no --server"), "{err}");
    let (code, err) = fails(run(&["--json", "man"]));
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(json_of(&err)["error"]["code"], "usage", "{err}");
}

/// With --json an error is JSON on standard error, in the server's shape (code, message,
/// the field at fault); `stats --json` and `topics --json` print one shape; the text output
/// writes durations for people ("1s 200ms", "30s"), keeps a long topic name from widening
/// every row, and counts "1 job" and "2 jobs".
// See: issue 36
#[test]
fn json_errors_and_text_for_people_issue_36() {
    let s = Server::start(&[]);
    let (code, err) = fails(s.run(&["get", "orders", "missing", "--json"]));
    assert_eq!(code, Some(3));
    let v = json_of(&err);
    assert_eq!(v["error"]["code"], "not_found", "{err}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{err}"
    );
    let (code, err) = fails(s.run(&["push", "orders", "x", "--at", "tomorrow", "--json"]));
    assert_eq!(code, Some(1));
    assert_eq!(json_of(&err)["error"]["field"], "/ready_at", "{err}");
    let (code, err) = fails(Command::new(BIN).args(["push", "--json"]).output().unwrap());
    assert_eq!(code, Some(2));
    assert_eq!(json_of(&err)["error"]["code"], "usage", "{err}");
    let (code, err) = fails(
        Command::new(BIN)
            .args(["stats", "--json", "--server", "http://127.0.0.1:1"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, Some(5));
    assert_eq!(json_of(&err)["error"]["code"], "unreachable", "{err}");
    // Without --json the same error is a line of text.
    let (_, err) = fails(s.run(&["get", "orders", "missing"]));
    assert!(err.starts_with("delayq: not_found: "), "{err}");

    let long = "invoices.reminders.for-customers-on-the-yearly-plan";
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));
    ok(s.run(&["push", long, "x"]));
    ok(s.run(&["push", "mail", "x", "--id", "m1"]));
    let topics = json_of(&ok(s.run(&["topics", "--json"])));
    let stats = json_of(&ok(s.run(&["stats", "--json"])));
    let one = json_of(&ok(s.run(&["stats", "orders", "--json"])));
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["topics"]
            .as_array()
            .unwrap_or_else(|| panic!("{{\"topics\": [...]}}: {v}"))
            .iter()
            .map(|t| t["topic"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    assert_eq!(names(&topics), names(&stats));
    assert_eq!(names(&one), ["orders"]);
    let keys = |row: &serde_json::Value| -> Vec<String> {
        row.as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(keys(&topics["topics"][0]), keys(&stats["topics"][0]));
    assert_eq!(keys(&one["topics"][0]), keys(&stats["topics"][0]));

    // The ready jobs are overdue for more than a second now.
    std::thread::sleep(Duration::from_millis(1200));
    let table = ok(s.run(&["stats"]));
    let lines: Vec<&str> = table.lines().collect();
    let overdue = lines[0].find("OLDEST OVERDUE").unwrap();
    let orders = lines.iter().find(|l| l.starts_with("orders ")).unwrap();
    let cell = orders[overdue..].trim_start().split("  ").next().unwrap();
    let took = humantime::parse_duration(cell).unwrap_or_else(|e| panic!("{cell:?}: {e}\n{table}"));
    assert!(
        took >= Duration::from_secs(1) && !cell.contains(" ms"),
        "{table}"
    );
    assert!(
        lines.contains(&long),
        "the long name on a line of its own:\n{table}"
    );
    assert!(
        lines[0].find("DELAYED").unwrap() < 30,
        "the long name does not widen the table:\n{table}"
    );
    let get = ok(s.run(&["get", "orders", "o1"]));
    assert!(get.contains("ttr: 30s"), "{get}");

    let token = reserve_token(&s, "mail");
    ok(s.run(&["bury", "mail", "m1", &token]));
    assert_eq!(ok(s.run(&["kick", "mail"])), "kicked 1 dead job in mail\n");
    assert_eq!(
        ok(s.run(&["purge", "mail", "--yes"])),
        "purged mail: 1 job removed\n"
    );
}

/// `delayq health` exits 0 while the server is ready (its /readyz), 5 with the reason when
/// its store is down, when nothing listens, or when the server does not answer in
/// --timeout.
// See: issue 36
#[test]
fn health_says_whether_the_server_is_ready_issue_36() {
    let mut redis = delayq_testkit::RedisServer::start();
    let s = Server::start(&["--redis", &redis.url()]);
    s.wait_for_log("serving on");
    let out = ok(s.run(&["health"]));
    assert_eq!(out, format!("ready: {}\n", s.url));
    assert_eq!(
        json_of(&ok(s.run(&["health", "--json"]))),
        serde_json::json!({"ready": true})
    );
    redis.kill();
    let (code, err) = fails(s.run(&["health"]));
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("unavailable"), "{err}");

    let (code, err) = fails(
        Command::new(BIN)
            .args(["health", "--server", "http://127.0.0.1:1"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("cannot reach the server"), "{err}");
    // A listener that never answers: its backlog takes the connection.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let start = Instant::now();
    let (code, err) = fails(exits_within(
        Command::new(BIN).args(["health", "--timeout", "500ms", "--server", &url]),
        Duration::from_secs(10),
    ));
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("did not answer /readyz within 500ms"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
}
