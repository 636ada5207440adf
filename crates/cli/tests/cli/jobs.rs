//! Jobs from the command line: `push` (ids, conflicts, expiry, a body from a file or from
//! standard input), `get`, `list` page by page, `reschedule`, `delete`, `dead list`, `kick`,
//! `topics` and `purge`, and the example of docs/cli.md run as written.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{BIN, Server, exits_within, fails, json_of, no_job, ok, stdout};

#[test]
fn client_subcommands_and_exit_codes() {
    let s = Server::start(&[]);
    let out = ok(s.run(&[
        "push",
        "orders",
        "cancel order 42",
        "--id",
        "order-42",
        "--delay",
        "3s",
    ]));
    // 3 s: the two commands below must see it still delayed, even on a loaded machine.
    assert!(out.contains("pushed order-42 in orders: delayed"), "{out}");
    let out = ok(s.run(&["push", "orders", "again", "--id", "order-42"]));
    assert!(out.contains("exists (unchanged)"), "{out}");
    let out = ok(s.run(&["get", "orders", "order-42"]));
    assert!(
        out.contains("state: delayed") && out.contains("body: cancel order 42"),
        "{out}"
    );

    let out = ok(s.run(&["reserve", "orders", "--wait", "10s", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let token = v["jobs"][0]["token"].as_u64().unwrap().to_string();
    ok(s.run(&["ack", "orders", "order-42", &token]));
    // Acked: the job is gone, so acking again finds nothing (see: issue 12).
    let again = s.run(&["ack", "orders", "order-42", &token]);
    assert_eq!(again.status.code(), Some(3), "an acked job is not found");
    let missing = s.run(&["get", "orders", "order-42"]);
    assert_eq!(missing.status.code(), Some(3), "not found");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not_found"));

    // Dead jobs: push with one attempt, reserve, let the CLI see it in `dead list`, kick it.
    ok(s.run(&[
        "push",
        "mail",
        "x",
        "--id",
        "m1",
        "--max-attempts",
        "1",
        "--ttr",
        "1s",
    ]));
    ok(s.run(&["reserve", "mail"]));
    let start = Instant::now();
    loop {
        let out = ok(s.run(&["dead", "list", "mail"]));
        if out.contains("m1") {
            assert!(out.contains("lease expired"), "{out}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "m1 never went dead: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = ok(s.run(&["kick", "mail"]));
    assert!(out.contains("kicked 1"), "{out}");
    let out = ok(s.run(&["stats"]));
    assert!(out.lines().next().unwrap().starts_with("TOPIC"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("mail ") && l.split_whitespace().nth(2) == Some("1")),
        "{out}"
    );
    let out = ok(s.run(&["stats", "mail", "--json"]));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["topics"][0]["ready"],
        1
    );
    ok(s.run(&["delete", "mail", "m1"]));
    assert_eq!(s.run(&["delete", "mail", "m1"]).status.code(), Some(3));

    // A body from a file that is not UTF-8 goes as base64.
    let file = s._dir.path().join("blob");
    std::fs::write(&file, [0xffu8, 0x00, 0x10]).unwrap();
    ok(s.run(&[
        "push",
        "blobs",
        "--file",
        file.to_str().unwrap(),
        "--id",
        "b",
    ]));
    let out = ok(s.run(&["get", "blobs", "b", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["encoding"].as_str(), v["body"].as_str()),
        (Some("base64"), Some("/wAQ"))
    );

    // Unreachable server.
    let down = Command::new(BIN)
        .args(["stats", "--server", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(5));
    // Bad usage is clap's 2.
    assert_eq!(
        Command::new(BIN)
            .args(["push"])
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
}

/// `delayq push --max-lateness / --expires-at / --on-expire` (issue 14): `get` shows the
/// expiry; a job that expired on a paused topic is dead "expired" and counted in `stats`;
/// bad expiries exit 1 naming the field.
// See: issue 14
#[test]
fn expiry_from_the_command_line_issue_14() {
    let s = Server::start(&[]);
    ok(s.run(&["pause", "mail"]));
    ok(s.run(&[
        "push",
        "mail",
        "hello",
        "--id",
        "m1",
        "--max-lateness",
        "200ms",
    ]));
    ok(s.run(&[
        "push",
        "mail",
        "later",
        "--id",
        "m2",
        "--delay",
        "1h",
        "--expires-at",
        "2030-01-01T00:00:00Z",
        "--on-expire",
        "drop",
    ]));
    let m2 = ok(s.run(&["get", "mail", "m2"]));
    assert!(
        m2.contains("expires_at: 2030-01-01T00:00:00.000+00:00") && m2.contains("on_expire: drop"),
        "{m2}"
    );
    std::thread::sleep(std::time::Duration::from_millis(400));
    ok(s.run(&["resume", "mail"]));
    let none = no_job(s.run(&["reserve", "mail", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&none).unwrap();
    assert_eq!(v["jobs"], serde_json::json!([]), "{v}");
    let m1 = ok(s.run(&["get", "mail", "m1"]));
    assert!(
        m1.contains("state: dead") && m1.contains("last_error: expired"),
        "{m1}"
    );
    let stats = ok(s.run(&["stats"]));
    assert!(stats.contains("EXPIRED"), "{stats}");
    let row = stats.lines().find(|l| l.starts_with("mail")).unwrap_or("");
    assert_eq!(
        row.split_whitespace().take(7).collect::<Vec<_>>(),
        ["mail", "1", "0", "0", "1", "0", "1"],
        "{stats}"
    );
    for (args, field) in [
        (
            &["push", "mail", "x", "--on-expire", "drop"][..],
            "/on_expire",
        ),
        (
            &["push", "mail", "x", "--max-lateness", "0s"][..],
            "/max_lateness_ms",
        ),
        (
            &[
                "push",
                "mail",
                "x",
                "--delay",
                "1h",
                "--expires-at",
                "2026-01-01T00:00:00Z",
            ][..],
            "/expires_at",
        ),
    ] {
        let (code, err) = fails(s.run(args));
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(field), "{args:?}: {err}");
    }
}

/// `reschedule`, `list` (page by page), `topics` and `purge` (which asks for --yes).
#[test]
fn job_and_topic_subcommands() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "orders", "a", "--id", "o1", "--delay", "1h"]));
    ok(s.run(&["push", "orders", "b", "--id", "o2", "--delay", "2h"]));
    ok(s.run(&["push", "mail", "c", "--id", "m1"]));

    let out = ok(s.run(&["list", "orders", "--state", "delayed"]));
    let ids: Vec<&str> = out.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(ids, ["o1", "o2"], "{out}");
    let out = ok(s.run(&["list", "orders", "--state", "delayed", "--limit", "1"]));
    assert!(out.starts_with("o1  due "), "{out}");
    let cursor = out
        .lines()
        .find_map(|l| l.strip_prefix("more: --cursor '"))
        .and_then(|c| c.strip_suffix('\''))
        .unwrap_or_else(|| panic!("no cursor: {out}"));
    let out = ok(s.run(&[
        "list", "orders", "--state", "delayed", "--limit", "1", "--cursor", cursor,
    ]));
    assert!(
        out.starts_with("o2  due ") && !out.contains("more:"),
        "{out}"
    );
    let out = ok(s.run(&["list", "orders", "--state", "dead"]));
    assert_eq!(out.trim(), "no dead jobs in orders");
    let (code, _) = fails(s.run(&["list", "orders", "--state", "gone"]));
    assert_eq!(code, Some(2));

    let out = ok(s.run(&["reschedule", "orders", "o2", "--delay", "0s"]));
    assert!(out.starts_with("rescheduled o2 in orders: due 20"), "{out}");
    let out = ok(s.run(&["list", "orders", "--state", "ready"]));
    assert!(out.starts_with("o2  due "), "{out}");
    let out = ok(s.run(&[
        "reschedule",
        "orders",
        "o1",
        "--at",
        "2030-01-01T00:00:00Z",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ready_at"], "2030-01-01T00:00:00.000+00:00", "{out}");
    let (code, _) = fails(s.run(&["reschedule", "orders", "gone", "--delay", "1s"]));
    assert_eq!(code, Some(3), "not found");
    let (code, _) = fails(s.run(&["reschedule", "orders", "o1"]));
    assert_eq!(code, Some(2), "--delay or --at is required");

    assert_eq!(ok(s.run(&["topics"])), "mail\norders\n");
    // At most once: the job is removed as it is handed out, with no lease to answer for.
    let out = ok(s.run(&["reserve", "mail", "--at-most-once"]));
    assert!(out.starts_with("mail m1 token=- attempt=1"), "{out}");
    let (code, _) = fails(s.run(&["get", "mail", "m1"]));
    assert_eq!(
        code,
        Some(3),
        "an at-most-once delivery leaves nothing behind"
    );
    let out = ok(s.run(&["topics", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["topics"][1]["topic"], "orders", "{out}");

    let (code, err) = fails(s.run(&["purge", "orders"]));
    assert_eq!(code, Some(2));
    assert!(err.contains("add --yes"), "{err}");
    let out = ok(s.run(&["list", "orders", "--state", "ready"]));
    assert!(
        out.starts_with("o2 "),
        "without --yes nothing is removed: {out}"
    );
    let out = ok(s.run(&["purge", "orders", "--yes"]));
    assert_eq!(out.trim(), "purged orders: 2 jobs removed");
    let out = ok(s.run(&["stats", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &v["topics"][0];
    assert_eq!(
        (&row["delayed"], &row["ready"]),
        (&serde_json::json!(0), &serde_json::json!(0)),
        "{out}"
    );
}

/// The command-line example of docs/cli.md, pasted into a shell against a fresh server, runs
/// top to bottom: every command succeeds, in order. The block is read from docs/cli.md between
/// its markers, so the test follows the page.
#[test]
fn the_cli_page_example_runs_as_written_issue_12() {
    // See: issue 12
    let page = include_str!("../../../../docs/cli.md");
    let block = page
        .split_once("<!-- cli-example: start -->")
        .and_then(|(_, rest)| rest.split_once("<!-- cli-example: end -->"))
        .and_then(|(block, _)| block.split_once("```sh\n"))
        .and_then(|(_, code)| code.split_once("```"))
        .map(|(code, _)| code)
        .expect("docs/cli.md has a sh block between <!-- cli-example: start --> and end");
    assert!(
        block.contains("delayq push") && block.contains("delayq ack"),
        "{block}"
    );

    let s = Server::start(&[]);
    let script = s._dir.path().join("example.sh");
    std::fs::write(&script, block).unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = exits_within(
        Command::new("sh")
            .arg("-eux")
            .arg(&script)
            .env("PATH", path)
            .env("DELAYQ_SERVER", &s.url)
            .env_remove("DELAYQ_TOKEN"),
        Duration::from_secs(60),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "the example of docs/cli.md stopped ({:?}):\n{text}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "acked order-42 in orders",
        "buried order-43 in orders: dead",
        "kicked 1 dead job in orders",
        "deleted order-43 from orders",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    let (code, _) = fails(s.run(&["get", "orders", "order-42"]));
    assert_eq!(code, Some(3), "order-42 was acked");
}

/// Runs `delayq` with `args` and `input` on its standard input.
fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("DELAYQ_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `echo body | delayq push t -` pushes "body", without the newline echo ends it with (as
/// `$(…)` and `curl -d @-` drop it); `--file -` keeps every byte.
// See: issue 36
#[test]
fn a_body_from_standard_input_drops_the_newline_echo_adds_issue_36() {
    let s = Server::start(&[]);
    let server = ["--server", s.url.as_str()];
    let push = |args: &[&str], input: &[u8]| {
        let args: Vec<&str> = args.iter().chain(&server).copied().collect();
        ok(run_with_stdin(&args, input))
    };
    push(&["push", "t", "-", "--id", "line"], b"cancel order 42\n");
    push(
        &["push", "t", "--file", "-", "--id", "bytes"],
        b"cancel order 42\n",
    );
    let body = |id: &str| json_of(&ok(s.run(&["get", "t", id, "--json"])))["body"].clone();
    assert_eq!(body("line"), "cancel order 42");
    assert_eq!(body("bytes"), "cancel order 42\n");
    let help = ok(Command::new(BIN).args(["push", "--help"]).output().unwrap());
    assert!(help.contains("one trailing newline is dropped"), "{help}");
}
