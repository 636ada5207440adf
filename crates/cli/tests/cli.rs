//! The `delayq` binary end to end: `serve` as a child process on a free port (embedded engine
//! and Redis), the client subcommands and their exit codes, graceful shutdown on SIGTERM with
//! a long-poll open, and property-based fuzzing of the served OpenAPI document with
//! schemathesis (no 5xx, no response outside the document).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_delayq");

/// A `delayq serve` child process, killed on drop.
struct Server {
    serving: support::Serving,
    url: String,
    _dir: TempDir,
}

impl Server {
    /// Starts `delayq serve` and waits until it accepts connections.
    fn start(extra: &[&str]) -> Server {
        let server = Server::spawn(extra);
        let listen = server.url.trim_start_matches("http://").to_string();
        support::wait_listening(&listen, || server.log());
        server
    }

    /// Starts `delayq serve` on a free port, its log in a file.
    fn spawn(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{}", support::free_port());
        let log = dir.path().join("serve.log");
        let child = support::serve_command(&listen, &dir.path().join("data"), &log)
            .args(extra)
            .spawn()
            .unwrap();
        Server {
            serving: support::Serving { child, log },
            url: format!("http://{listen}"),
            _dir: dir,
        }
    }

    /// Waits (bounded) until the log has a line containing `needle`.
    fn wait_for_log(&self, needle: &str) {
        wait_for_log(|| self.log(), needle);
    }

    fn log(&self) -> String {
        self.serving.log()
    }

    /// Runs a client subcommand against this server.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .args(["--server", &self.url])
            .env_remove("DELAYQ_TOKEN")
            .output()
            .unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The standard output of a `delayq reserve` that got no job: it exits 6.
fn no_job(o: Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(6),
        "a reserve that got nothing exits 6: {}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "failed ({:?}): {}{}",
        o.status.code(),
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

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

/// A port in use fails `serve` before the data directory is created or migrated.
/// `delayq topic set` changes only the settings given and `delayq topic get` shows them; a
/// push then takes them; a bad value exits 1 naming the field.
/// `delayq pause` and `delayq resume` (issue 14): the stats show the pause, a reserve gets
/// nothing while it lasts and the job after resume.
// See: issue 14
#[test]
fn pause_and_resume_from_the_command_line_issue_14() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));
    assert_eq!(
        ok(s.run(&["pause", "orders"])),
        "paused orders until resumed\n"
    );
    assert!(ok(s.run(&["stats"])).contains("orders (paused)"));
    let none = no_job(s.run(&["reserve", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&none).unwrap();
    assert_eq!(v["jobs"], serde_json::json!([]), "{v}");
    // Replace and debounce from the command line.
    let out = ok(s.run(&[
        "push",
        "orders",
        "y",
        "--id",
        "o1",
        "--on-conflict",
        "replace",
    ]));
    assert!(out.starts_with("replaced o1 in orders"), "{out}");
    let out = ok(s.run(&[
        "push",
        "orders",
        "z",
        "--id",
        "o2",
        "--delay",
        "5s",
        "--on-conflict",
        "debounce",
        "--max-wait",
        "1m",
    ]));
    assert!(out.starts_with("pushed o2"), "{out}");
    let timed = ok(s.run(&["pause", "orders", "--for", "1h"]));
    assert!(timed.starts_with("paused orders until 20"), "{timed}");
    ok(s.run(&["resume", "orders"]));
    assert!(!ok(s.run(&["stats"])).contains("(paused)"));
    let got = ok(s.run(&["reserve", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(v["jobs"][0]["job"]["id"], "o1", "{v}");
    assert_eq!(v["jobs"][0]["job"]["body"], "y", "{v}");
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

#[test]
fn topic_settings_from_the_command_line() {
    let s = Server::start(&[]);
    let out = ok(s.run(&["topic", "get", "orders"]));
    assert!(out.contains("ttr           default (30s)"), "{out}");
    let out = ok(s.run(&[
        "topic",
        "set",
        "orders",
        "--ttr",
        "1m",
        "--max-attempts",
        "5",
        "--backoff-base",
        "1s",
        "--backoff-max",
        "10m",
    ]));
    assert!(out.contains("ttr           1m"), "{out}");
    assert!(
        out.contains("back-off      from 1s growing x2 up to 10m"),
        "{out}"
    );
    ok(s.run(&[
        "topic",
        "set",
        "orders",
        "--max-body",
        "64",
        "--unset",
        "ttr",
    ]));
    let out = ok(s.run(&["topic", "get", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            v["ttr_ms"].as_u64(),
            v["max_attempts"].as_u64(),
            v["max_body"].as_u64()
        ),
        (None, Some(5), Some(64)),
        "{v}"
    );
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));
    let out = ok(s.run(&["get", "orders", "o1", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (j["max_attempts"].as_u64(), j["ttr_ms"].as_u64()),
        (Some(5), Some(30_000))
    );
    let bad = s.run(&["topic", "set", "orders", "--ttr", "10ms"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/ttr_ms"));
    // With a retention, an acked job stays readable as done.
    ok(s.run(&[
        "topic",
        "set",
        "orders",
        "--retain-jobs",
        "10",
        "--retain-for",
        "1h",
    ]));
    let out = ok(s.run(&["reserve", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let token = v["jobs"][0]["token"].as_u64().unwrap().to_string();
    ok(s.run(&["ack", "orders", "o1", &token]));
    let out = ok(s.run(&["get", "orders", "o1"]));
    assert!(out.contains("state: done"), "{out}");
    let out = ok(s.run(&["topic", "set", "orders", "--reset"]));
    assert!(out.contains("max attempts  default (3)"), "{out}");
    assert!(out.contains("retention     default (none"), "{out}");
    let missing = s.run(&["get", "orders", "o1"]);
    assert_eq!(missing.status.code(), Some(3), "no retention, no done job");
    // Partitions (issue 18): set while the topic is empty, kept by a set that does not name
    // them, refused (exit 4, conflict) once it holds a job.
    let out = ok(s.run(&["topic", "set", "hot", "--partitions", "8"]));
    assert!(out.contains("partitions    8"), "{out}");
    let out = ok(s.run(&["topic", "set", "hot", "--ttr", "1m"]));
    assert!(out.contains("partitions    8"), "{out}");
    ok(s.run(&["push", "hot", "x", "--id", "h1"]));
    let refused = s.run(&["topic", "set", "hot", "--partitions", "4"]);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("partitions_in_use"),
        "{refused:?}"
    );
    let out = ok(s.run(&["topic", "get", "hot"]));
    assert!(out.contains("partitions    8"), "{out}");
}

#[test]
fn port_in_use_fails_before_the_data_directory_is_made_issue_12() {
    // See: issue 12
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = held.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = Command::new(BIN)
        .args(["serve", "--listen", &listen, "--data-dir"])
        .arg(&data)
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&listen), "{err}");
    assert!(
        !data.exists(),
        "serve created {} before failing",
        data.display()
    );
}

/// Runs `delayq serve` with `extra` and an unused data directory; it must fail.
/// Returns its standard error.
fn serve_fails(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(extra)
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_POSTGRES_URL")
        .env_remove("DELAYQ_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

/// The last line of a log: the error `delayq` exits with.
fn last_line(text: &str) -> &str {
    text.trim_end().lines().last().unwrap_or("")
}

/// A loopback port where a tiny HTTP server answers every connection with a 400, for at
/// most `connections` connections.
fn http_listener(connections: usize) -> u16 {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\nconnection: close\r\n\r\nBad Request",
            );
        }
    });
    port
}

/// Startup errors are one sentence each: what failed, what to do; no cause repeated, no
/// raw parser output.
#[test]
fn startup_errors_are_one_clear_sentence_issue_12() {
    // See: issue 12
    // Nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let err = serve_fails(&[
        "--redis",
        &format!("redis://{closed}"),
        "--redis-connect-timeout",
        "0s",
    ]);
    let line = last_line(&err);
    assert!(line.contains(&closed) && line.contains("refused"), "{err}");
    assert!(line.contains("start Redis"), "{err}");
    assert_eq!(line.matches("refused").count(), 1, "{err}");
    assert!(!line.contains("os error"), "{err}");
    // An HTTP server there.
    let http = format!("127.0.0.1:{}", http_listener(50));
    let err = serve_fails(&["--redis", &format!("redis://{http}")]);
    let line = last_line(&err);
    assert!(
        line.contains("not a Redis server") && line.contains(&http),
        "{err}"
    );
    for raw in ["Parse error", "Unexpected", "Incompatible"] {
        assert!(!err.contains(raw), "{err}");
    }
    // A port in use.
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = held.local_addr().unwrap().to_string();
    let out = Command::new(BIN)
        .args(["serve", "--listen", &listen, "--data-dir", "/nonexistent/x"])
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(last_line(&err).contains("in use"), "{err}");
    assert!(!err.contains("os error"), "{err}");
}

/// At startup `serve` waits for Redis (saying so in its log) instead of exiting; during an
/// outage, the errors of many failed requests make one log line (then a count), not one or
/// two per request; `--log-format json` logs JSON lines.
#[test]
fn serve_waits_for_redis_and_logs_an_outage_once_issue_12() {
    // See: issue 12
    let mut redis = delayq_testkit::RedisServer::start();
    redis.kill();
    let s = Server::start(&[
        "--redis",
        &redis.url(),
        "--connect-timeout",
        "60s",
        "--log-format",
        "json",
    ]);
    s.wait_for_log("waiting for Redis");
    redis.restart();
    s.wait_for_log("serving on");
    ok(s.run(&["stats"]));

    redis.kill();
    let pushes: Vec<_> = (0..8)
        .map(|i| {
            let url = s.url.clone();
            std::thread::spawn(move || {
                Command::new(BIN)
                    .args(["push", "t", &format!("job {i}"), "--server", &url])
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for p in pushes {
        let out = p.join().unwrap();
        assert_eq!(
            out.status.code(),
            Some(5),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let log = s.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let unavailable = lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("engine unavailable"))
        })
        .count();
    // The first failure may be a broken pipe, the others a refused connect: two messages.
    assert!((1..=2).contains(&unavailable), "{log}");
    assert!(
        lines.iter().all(|l| l["level"] != "ERROR"),
        "an outage is not an error of the server: {log}"
    );
}

/// `--version` names the version, the commit and the build date.
#[test]
fn version_names_the_commit_and_build_date_issue_12() {
    // See: issue 12
    let out = ok(Command::new(BIN).arg("--version").output().unwrap());
    let expected = format!("delayq {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(out.starts_with(&expected), "{out}");
    let commit = out[expected.len()..].split(',').next().unwrap();
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{out}"
    );
    let date = out
        .trim_end()
        .rsplit("built ")
        .next()
        .unwrap()
        .trim_end_matches(')');
    assert!(
        date == "unknown" || (date.len() == 10 && date.as_bytes()[4] == b'-'),
        "{out}"
    );
    let serve = ok(Command::new(BIN)
        .args(["serve", "--version"])
        .output()
        .unwrap());
    assert!(serve.contains(&out["delayq ".len()..]), "{serve}");
}

/// Writes a new self-signed certificate for 127.0.0.1 and its key; returns the
/// certificate's PEM.
fn write_self_signed(cert: &Path, key: &Path) -> String {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let pem = certified.cert.pem();
    std::fs::write(cert, &pem).unwrap();
    std::fs::write(key, certified.signing_key.serialize_pem()).unwrap();
    pem
}

/// An HTTPS client that trusts only `ca_pem`, with no connection kept between requests.
fn https_client(ca_pem: &str) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// With --tls-cert and --tls-key the server speaks HTTPS (auth on, the token never in
/// clear); SIGHUP makes it present the certificate now in the files.
#[test]
fn https_end_to_end_and_sighup_reload_issue_12() {
    // See: issue 12
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    let first = write_self_signed(&cert, &key);
    let token = "a-token-of-sixteen-chars-or-more";
    let s = Server::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--token",
        token,
    ]);
    let base = s.url.replace("http://", "https://");
    s.wait_for_log("serving on https://");
    let client = https_client(&first);
    let pushed = client
        .post(format!("{base}/v1/topics/tls/jobs"))
        .bearer_auth(token)
        .json(&serde_json::json!({"id": "j1", "body": "over TLS"}))
        .send()
        .unwrap();
    assert_eq!(pushed.status().as_u16(), 201);
    let job: serde_json::Value = client
        .get(format!("{base}/v1/topics/tls/jobs/j1"))
        .bearer_auth(token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(job["body"], "over TLS");
    let anonymous = client.get(format!("{base}/v1/topics")).send().unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    // The CLI talks HTTPS too, trusting the self-signed certificate with --ca-cert; without
    // it, the certificate is refused, saying why (a TLS failure: exit 1, not "unreachable");
    // a file that is not a certificate is a usage error.
    let cli = |extra: &[&str]| {
        Command::new(BIN)
            .args(["get", "tls", "j1", "--server", &base, "--token", token])
            .args(extra)
            .env_remove("DELAYQ_CA_CERT")
            .output()
            .unwrap()
    };
    let out = ok(cli(&["--ca-cert", cert.to_str().unwrap()]));
    assert!(out.contains("body: over TLS"), "{out}");
    let (code, err) = fails(cli(&[]));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("TLS with https://") && err.contains("--ca-cert"),
        "{err}"
    );
    let (code, err) = fails(cli(&["--ca-cert", key.to_str().unwrap()]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--ca-cert"), "{err}");
    // Plain HTTP gets no API.
    let plain = reqwest::blocking::get(format!("{}/healthz", s.url));
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    let second = write_self_signed(&cert, &key);
    let hup = Command::new("kill")
        .args(["-HUP", &s.serving.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    s.wait_for_log("reloaded the TLS certificate");
    let trusts_second = https_client(&second);
    let ok_now = trusts_second.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(ok_now.status().as_u16(), 200);
    assert!(
        https_client(&first)
            .get(format!("{base}/healthz"))
            .send()
            .is_err(),
        "the old certificate is still presented"
    );
    // A file that is not a certificate is refused and the current one stays.
    std::fs::write(&cert, "not a certificate").unwrap();
    Command::new("kill")
        .args(["-HUP", &s.serving.child.id().to_string()])
        .status()
        .unwrap();
    s.wait_for_log("the previous certificate stays in use");
    let still = trusts_second.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(still.status().as_u16(), 200);
}

/// Runs a client subcommand that must fail, and answers its exit code and standard error.
fn fails(o: Output) -> (Option<i32>, String) {
    assert!(!o.status.success(), "succeeded: {}", stdout(&o));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The lease token of the one job `delayq reserve --json` handed out.
fn reserve_token(s: &Server, topic: &str) -> String {
    let out = ok(s.run(&["reserve", topic, "--wait", "5s", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["jobs"][0]["token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job reserved: {out}"))
        .to_string()
}

/// `touch`, `nack`, `release` and `bury` answer for a delivery with its lease token, and a
/// stale token is a conflict (exit 4) for each.
#[test]
fn lease_subcommands_answer_for_a_delivery() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "work", "x", "--id", "w1", "--max-attempts", "5"]));
    let t1 = reserve_token(&s, "work");

    let out = ok(s.run(&["touch", "work", "w1", &t1, "--ttr", "1m"]));
    assert!(
        out.starts_with("touched w1 in work: lease until 20"),
        "{out}"
    );
    let out = ok(s.run(&["touch", "work", "w1", &t1, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["deadline_ms"].as_u64().is_some(), "{out}");

    let out = ok(s.run(&[
        "nack", "work", "w1", &t1, "--delay", "300ms", "--reason", "api down",
    ]));
    assert!(out.starts_with("nacked w1 in work: retry at 20"), "{out}");
    let out = ok(s.run(&["get", "work", "w1"]));
    assert!(out.contains("last_error: api down"), "{out}");
    for stale in [
        vec!["nack", "work", "w1", &t1],
        vec!["touch", "work", "w1", &t1],
        vec!["release", "work", "w1", &t1],
        vec!["bury", "work", "w1", &t1],
        vec!["ack", "work", "w1", &t1],
    ] {
        let (code, err) = fails(s.run(&stale));
        assert_eq!(code, Some(4), "{stale:?}: {err}");
    }

    let t2 = reserve_token(&s, "work");
    let out = ok(s.run(&["release", "work", "w1", &t2]));
    assert_eq!(out.trim(), "released w1 in work: ready again");
    let out = ok(s.run(&["list", "work", "--state", "ready"]));
    assert!(out.starts_with("w1  due "), "{out}");

    let t3 = reserve_token(&s, "work");
    let out = ok(s.run(&["list", "work", "--state", "reserved"]));
    assert!(out.starts_with("w1  lease until "), "{out}");
    let out = ok(s.run(&["bury", "work", "w1", &t3, "--reason", "order unknown"]));
    assert_eq!(out.trim(), "buried w1 in work: dead");
    let out = ok(s.run(&["dead", "list", "work"]));
    assert!(
        out.starts_with("w1  died ") && out.contains("order unknown"),
        "{out}"
    );

    // A job with one attempt left goes dead on nack, and says so.
    ok(s.run(&["push", "work", "y", "--id", "w2", "--max-attempts", "1"]));
    let t = reserve_token(&s, "work");
    let out = ok(s.run(&["nack", "work", "w2", &t, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["outcome"], "dead", "{out}");
    let (code, err) = fails(s.run(&["touch", "work", "w2", &t, "--ttr", "10"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--ttr 10: add a unit"), "{err}");
}

/// `delayq archive` sends a waiting job to dead with its reason; a reserved job is a
/// conflict (exit 4), a missing one not found (exit 3); `kick` brings it back.
// See: issue 15
#[test]
fn archive_sends_a_waiting_job_to_dead_issue_15() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "orders", "x", "--id", "held"]));
    reserve_token(&s, "orders");
    ok(s.run(&["push", "orders", "x", "--id", "o1", "--delay", "1h"]));
    let out = ok(s.run(&["archive", "orders", "o1", "--reason", "customer left"]));
    assert_eq!(out.trim(), "archived o1 in orders: dead");
    let out = ok(s.run(&["dead", "list", "orders"]));
    assert!(
        out.starts_with("o1  died ") && out.contains("customer left"),
        "{out}"
    );
    let (code, err) = fails(s.run(&["archive", "orders", "held"]));
    assert_eq!(code, Some(4), "{err}");
    let (code, err) = fails(s.run(&["archive", "orders", "o1"]));
    assert_eq!(code, Some(4), "{err}");
    let (code, err) = fails(s.run(&["archive", "orders", "missing"]));
    assert_eq!(code, Some(3), "{err}");
    ok(s.run(&["kick", "orders", "o1"]));
    let out = ok(s.run(&["list", "orders", "--state", "ready"]));
    assert!(out.starts_with("o1  due "), "{out}");
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

/// The README's command-line example, pasted into a shell against a fresh server, runs top to
/// bottom: every command succeeds, in order. The block is read from README.md between its
/// markers, so the test follows the README.
#[test]
fn the_readme_cli_example_runs_as_written_issue_12() {
    // See: issue 12
    let readme = include_str!("../../../README.md");
    let block = readme
        .split_once("<!-- cli-example: start -->")
        .and_then(|(_, rest)| rest.split_once("<!-- cli-example: end -->"))
        .and_then(|(block, _)| block.split_once("```sh\n"))
        .and_then(|(_, code)| code.split_once("```"))
        .map(|(code, _)| code)
        .expect("README.md has a sh block between <!-- cli-example: start --> and end");
    assert!(
        block.contains("delayq push") && block.contains("delayq ack"),
        "{block}"
    );

    let s = Server::start(&[]);
    let script = s._dir.path().join("readme.sh");
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
        "the README's example stopped ({:?}):\n{text}\n{}",
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

/// Runs a command that should exit on its own; kills it (and fails) when it is still running
/// after `limit`, e.g. a server that started although its settings were wrong.
fn exits_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still ran after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A bare number is not a duration: in a flag, an environment variable or the config file it
/// is refused with what to write instead, naming where it came from, and nothing starts.
#[test]
fn a_bare_number_is_not_a_duration_issue_12() {
    // See: issue 12
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let refused = |cmd: &mut Command, code: i32, expected: &str| {
        let out = exits_within(cmd, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{expected}: {err}");
        assert!(err.contains(expected), "expected {expected:?} in: {err}");
    };
    let serve = || {
        let mut c = Command::new(BIN);
        c.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .env_remove("DELAYQ_MAX_WAIT")
            .env_remove("DELAYQ_REQUEST_TIMEOUT")
            .env_remove("DELAYQ_CONFIG");
        c
    };
    refused(
        serve().args(["--max-wait", "30"]),
        2,
        "--max-wait 30: add a unit: 30s or 30ms",
    );
    refused(
        serve().env("DELAYQ_MAX_WAIT", "5"),
        2,
        "DELAYQ_MAX_WAIT=5: add a unit: 5s or 5ms",
    );
    refused(
        Command::new(BIN).args(["push", "orders", "x", "--delay", "30"]),
        2,
        "--delay 30: add a unit: 30s or 30ms",
    );
    let config = dir.path().join("delayq.toml");
    std::fs::write(&config, "max_wait = 30\n").unwrap();
    refused(
        serve().arg("--config").arg(&config),
        1,
        "max_wait = 30 in the config file",
    );
    refused(
        serve().arg("--config").arg(&config),
        1,
        "add a unit: max_wait = \"30s\" or \"30ms\"",
    );
    std::fs::write(&config, "request_timeout = \"60\"\n").unwrap();
    refused(
        serve().arg("--config").arg(&config),
        1,
        "request_timeout = \"60\" in the config file",
    );
    assert!(
        !data.exists(),
        "a refused setting must not create the data directory"
    );
}

/// Every subcommand, as `--help`, the completions and the manual page must show them.
const SUBCOMMANDS: [&str; 24] = [
    "serve",
    "push",
    "get",
    "list",
    "reschedule",
    "delete",
    "reserve",
    "ack",
    "nack",
    "touch",
    "release",
    "bury",
    "stats",
    "topics",
    "dead",
    "kick",
    "archive",
    "purge",
    "bench",
    "completions",
    "man",
    "topic",
    "destination",
    "health",
];

/// `delayq completions` prints a script for each shell, and bash takes it; `delayq man`
/// prints a page that names every subcommand and that groff reads without a warning, and
/// writes one page per subcommand into a directory.
#[test]
fn completions_and_manual_pages() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap());
        assert!(
            script.contains("reschedule") && script.contains("at-most-once"),
            "{shell}: {script}"
        );
    }
    let bash = ok(Command::new("bash")
        .args([
            "-c",
            &format!("source <({BIN} completions bash) && complete -p delayq"),
        ])
        .output()
        .unwrap());
    assert!(bash.contains("delayq"), "{bash}");

    let page = ok(Command::new(BIN).arg("man").output().unwrap());
    assert!(page.contains(".TH delayq 1"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("delayq\\-{sub}(1)")),
            "the manual page does not list {sub}"
        );
    }
    let mut groff = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut groff.stdin.take().unwrap(), page.as_bytes()).unwrap();
    let checked = groff.wait_with_output().unwrap();
    assert!(
        checked.status.success() && checked.stderr.is_empty(),
        "groff: {}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    ok(Command::new(BIN)
        .args(["man", "--dir"])
        .arg(&out)
        .output()
        .unwrap());
    for name in [
        "delayq.1",
        "delayq-push.1",
        "delayq-nack.1",
        "delayq-dead-list.1",
    ] {
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(text.starts_with(".ie"), "{name}: {text}");
    }
}

#[test]
fn help_is_complete() {
    let top = ok(Command::new(BIN).arg("--help").output().unwrap());
    for sub in SUBCOMMANDS {
        assert!(top.contains(sub), "delayq --help does not list {sub}");
        let help = ok(Command::new(BIN).args([sub, "--help"]).output().unwrap());
        assert!(help.contains("Usage: delayq"), "{sub} --help: {help}");
    }
    let serve = ok(Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap());
    for flag in [
        "--listen",
        "--data-dir",
        "--redis",
        "--sync",
        "--token",
        "--max-body",
        "--max-request-bytes",
        "--max-wait",
        "--request-timeout",
        "--concurrency",
        "--max-long-polls",
        "--tls-cert",
        "--tls-key",
        "--metrics-public",
        "16 characters",
        "--connect-timeout",
        "--redis-connect-timeout",
        "--postgres",
        "sslmode",
        "DELAYQ_POSTGRES_URL",
        "--log-format",
        "--log",
        "--config",
        "DELAYQ_REDIS_URL",
        "DELAYQ_LISTEN",
    ] {
        assert!(
            serve.contains(flag),
            "serve --help does not document {flag}"
        );
    }
    assert!(top.contains("Exit codes"), "{top}");
    // Secrets in the environment never show in the help.
    let with_secrets = ok(Command::new(BIN)
        .args(["serve", "--help"])
        .env("DELAYQ_TOKENS", "a-secret-token-value")
        .env("DELAYQ_REDIS_URL", "redis://app:hunter2@db")
        .env("DELAYQ_POSTGRES_URL", "postgres://app:hunter2@db/app")
        .output()
        .unwrap());
    assert!(
        !with_secrets.contains("a-secret-token-value") && !with_secrets.contains("hunter2"),
        "{with_secrets}"
    );
    ok(Command::new(BIN)
        .args(["dead", "list", "--help"])
        .output()
        .unwrap());
    let topic_set = ok(Command::new(BIN)
        .args(["topic", "set", "--help"])
        .output()
        .unwrap());
    for flag in [
        "--ttr",
        "--max-attempts",
        "--backoff-base",
        "--max-body",
        "--retain-jobs",
        "--retain-for",
        "--unset",
    ] {
        assert!(topic_set.contains(flag), "topic set --help lacks {flag}");
    }
}

#[test]
fn sigterm_ends_long_polls_and_exits_cleanly() {
    let mut s = Server::start(&[]);
    let url = s.url.clone();
    let poll = std::thread::spawn(move || {
        let start = Instant::now();
        let out = Command::new(BIN)
            .args([
                "reserve", "idle", "--wait", "25s", "--json", "--server", &url,
            ])
            .output()
            .unwrap();
        (out, start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    let term = Command::new("kill")
        .args(["-TERM", &s.serving.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let (out, took) = poll.join().unwrap();
    let answer = no_job(out);
    assert_eq!(
        answer.trim(),
        "{\"jobs\":[],\"settled\":[],\"unreachable\":[],\"wait_ms\":25000}",
        "the open long-poll answers empty"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = s.serving.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "delayq serve did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(s.log().contains("stopped"), "{}", s.log());
}

/// Waits, 30 s at most, until the log holds `needle`. A server accepts connections a moment
/// before its startup line reaches the log file.
fn wait_for_log(log: impl Fn() -> String, needle: &str) {
    let start = Instant::now();
    while !log().contains(needle) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no {needle:?} in the log:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The schemathesis binary: `DELAYQ_SCHEMATHESIS` or `schemathesis` on the PATH.
fn schemathesis() -> PathBuf {
    let bin = std::env::var_os("DELAYQ_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "schemathesis".into());
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => bin,
        _ => panic!(
            "schemathesis not found ({}): scripts/test.sh installs it into target/schemathesis-venv; \
             or run `pip install schemathesis==4.32.5` and put it on the PATH, or set DELAYQ_SCHEMATHESIS",
            bin.display()
        ),
    }
}

fn fuzz(server: &Server, dir: &Path) {
    let out = Command::new(schemathesis())
        .args(["run", &format!("{}/v1/openapi.json", server.url)])
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
        .args(["--max-examples", "25", "--seed", "7", "--request-timeout", "40"])
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "schemathesis failed:\n{text}");
    assert!(text.contains("passed"), "{text}");
    assert!(!text.contains("Server error"), "{text}");
}

#[test]
fn schemathesis_on_the_embedded_engine() {
    let s = Server::start(&[]);
    fuzz(&s, s._dir.path());
}

#[test]
fn schemathesis_on_redis() {
    let redis = delayq_testkit::RedisServer::start();
    let s = Server::start(&["--redis", &redis.url()]);
    fuzz(&s, s._dir.path());
}

#[test]
fn schemathesis_on_postgres() {
    let pg = delayq_testkit::PostgresServer::start();
    let s = Server::start(&["--postgres", &pg.url()]);
    s.wait_for_log("serving on");
    fuzz(&s, s._dir.path());
}

/// `delayq bench` runs its phases on a temporary embedded engine and on a Redis, reports
/// every job delivered and none early, and leaves no job behind.
#[test]
fn bench_measures_an_engine_and_cleans_up() {
    let args = [
        "bench",
        "--jobs",
        "300",
        "--delayed",
        "300",
        "--spread",
        "300ms",
        "--consumers",
        "10",
        "--json",
    ];
    let redis = delayq_testkit::RedisServer::start();
    for engine in [None, Some(redis.url())] {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        if let Some(url) = &engine {
            cmd.args(["--engine", url]);
        }
        let out = ok(cmd.output().unwrap());
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["drain"]["jobs"], 300, "{v}");
        assert_eq!(v["delayed"]["delivered"], 300, "{v}");
        assert_eq!(v["delayed"]["lateness_ms"]["early"], 0, "{v}");
    }
    // Only the purged topic's token counter (kept so that lease tokens never repeat) and
    // its config (which counts its purges) are left on the Redis; the purge took the topic
    // off the registry.
    let keys = ok(Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "--scan"])
        .output()
        .expect("redis-cli comes with redis-server"));
    assert!(
        keys.lines().all(|k| k.starts_with("delayq:{bench.")
            && (k.ends_with("}:seq") || k.ends_with("}:config"))),
        "keys left: {keys}"
    );
    let bad = Command::new(BIN)
        .args(["bench", "--jobs", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
}

/// `serve --beanstalk` (issue 19): the beanstalkd protocol beside the HTTP API on the same
/// engine (a job put over it is seen over HTTP); a warning when it is bound beyond loopback;
/// a port in use and a job size over --max-body refused at start, naming the flag.
#[test]
fn serve_speaks_beanstalk_on_request_issue_19() {
    use std::io::{BufRead, BufReader, Write};
    let port = support::free_port();
    let s = Server::start(&["--beanstalk", &format!("0.0.0.0:{port}")]);
    s.wait_for_log("beanstalkd protocol on");
    assert!(
        s.log()
            .contains("beyond loopback: it has no authentication"),
        "a warning when bound beyond loopback:\n{}",
        s.log()
    );
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    w.write_all(b"use orders\r\nput 5 60 30 15\r\ncancel order 42\r\n")
        .unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "USING orders\r\n");
    line.clear();
    r.read_line(&mut line).unwrap();
    let id = line
        .strip_prefix("INSERTED ")
        .unwrap_or_else(|| panic!("put answered {line:?}"))
        .trim_end()
        .to_string();
    let out = ok(s.run(&["get", "orders", &id]));
    assert!(
        out.contains("state: delayed") && out.contains("body: cancel order 42"),
        "{out}"
    );

    // Loopback: no warning.
    let quiet = Server::start(&[
        "--beanstalk",
        &format!("127.0.0.1:{}", support::free_port()),
    ]);
    quiet.wait_for_log("beanstalkd protocol on");
    assert!(!quiet.log().contains("beyond loopback"), "{}", quiet.log());

    let err = serve_fails(&["--beanstalk", &format!("127.0.0.1:{port}")]);
    assert!(
        last_line(&err).contains("address is in use")
            && last_line(&err).contains("choose another --beanstalk"),
        "{err}"
    );
    let err = serve_fails(&[
        "--beanstalk",
        "127.0.0.1:0",
        "--beanstalk-max-job-size",
        "300000",
    ]);
    assert!(
        last_line(&err).contains("--beanstalk-max-job-size 300000 is outside 1 to --max-body"),
        "{err}"
    );
}

/// `serve --postgres` (issue 21): the server runs on a PostgreSQL that wants TLS and a
/// password, waits for it at startup, never logs the password, and a login it cannot make
/// or a second engine is one clear sentence at once.
#[test]
fn serve_runs_on_postgres_issue_21() {
    // See: issue 21
    let mut pg = delayq_testkit::PostgresServer::start_secure();
    pg.kill();
    let s = Server::start(&["--postgres", &pg.url(), "--connect-timeout", "60s"]);
    s.wait_for_log("waiting for PostgreSQL");
    pg.restart();
    s.wait_for_log("serving on");
    let log = s.log();
    assert!(
        log.contains("postgresql at postgres://***@localhost:"),
        "{log}"
    );
    assert!(!log.contains(delayq_testkit::POSTGRES_PASSWORD), "{log}");

    let out = ok(s.run(&[
        "push",
        "orders",
        "cancel order 7",
        "--id",
        "order-7",
        "--delay",
        "300ms",
    ]));
    assert!(out.contains("pushed order-7 in orders: delayed"), "{out}");
    let out = ok(s.run(&["reserve", "orders", "--wait", "10s", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["jobs"][0]["job"]["id"], "order-7", "{v}");
    let token = v["jobs"][0]["token"].as_u64().unwrap().to_string();
    ok(s.run(&["ack", "orders", "order-7", &token]));
    assert_eq!(s.run(&["get", "orders", "order-7"]).status.code(), Some(3));

    // A wrong password fails at once, without waiting and without the password.
    let wrong = pg
        .url()
        .replace(delayq_testkit::POSTGRES_PASSWORD, "not-the-password");
    let started = Instant::now();
    let err = serve_fails(&["--postgres", &wrong, "--connect-timeout", "60s"]);
    let line = last_line(&err);
    assert!(
        line.contains("cannot open the engine (PostgreSQL)")
            && line.contains("refused the login")
            && line.contains("check the user and password"),
        "{err}"
    );
    assert!(!err.contains("not-the-password"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it waited: {err}"
    );

    // One engine at a time.
    let out = Command::new(BIN)
        .args([
            "serve",
            "--postgres",
            &pg.url(),
            "--redis",
            "redis://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--postgres") && err.contains("--redis"),
        "{err}"
    );
}

/// The startup log names the data directory exactly as given, capitals and all (it once
/// lowercased the whole description, setting and path).
// See: issue 36
#[test]
fn serve_logs_the_data_directory_as_given_issue_36() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("Queue").join("MyData");
    let listen = format!("127.0.0.1:{}", support::free_port());
    let log = dir.path().join("serve.log");
    let child = support::serve_command(&listen, &data, &log)
        .spawn()
        .unwrap();
    let serving = support::Serving { child, log };
    support::wait_listening(&listen, || serving.log());
    wait_for_log(|| serving.log(), "delayq serving on");
    let text = serving.log();
    assert!(
        text.contains(&format!("data in {} (synchronous=normal)", data.display())),
        "{text}"
    );
}

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

/// `delayq bench` against a PostgreSQL URL with a password never prints the password, in
/// its error as in its figures (`serve` masks it too).
// See: issue 36
#[test]
fn bench_never_prints_a_postgres_password_issue_36() {
    let port = support::free_port();
    let url = format!("postgres://app:s3cret-pw@127.0.0.1:{port}/db");
    let o = Command::new(BIN)
        .args(["bench", "--engine", &url, "--jobs", "10", "--delayed", "0"])
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_ne!(o.status.code(), Some(0), "nothing listens there: {out}");
    assert!(
        out.contains("127.0.0.1"),
        "the error names the engine: {out}"
    );
    assert!(!out.contains("s3cret-pw"), "the password shows: {out}");
}

/// `pause --for 0s` and `pause --until <a past time>` never print "paused … until resumed":
/// the first is refused before anything is sent, the second says the topic is not paused
/// (the server's clock decides what is past); both exit 2.
// See: issue 36
#[test]
fn a_pause_that_ends_as_it_begins_is_said_plainly_issue_36() {
    let s = Server::start(&[]);
    let o = s.run(&["push", "held", "x"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let zero = s.run(&["pause", "held", "--for", "0s"]);
    let err = String::from_utf8_lossy(&zero.stderr);
    assert_eq!(zero.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--for 0s") && err.contains("delayq resume held"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&zero.stdout).contains("paused"),
        "{zero:?}"
    );
    let past = s.run(&["pause", "held", "--until", "2001-01-01T00:00:00Z"]);
    let err = String::from_utf8_lossy(&past.stderr);
    assert_eq!(past.status.code(), Some(2), "{err}");
    assert!(err.contains("held is not paused"), "{err}");
    assert!(
        !String::from_utf8_lossy(&past.stdout).contains("until resumed"),
        "{past:?}"
    );
    let stats = s.run(&["stats", "held"]);
    let out = String::from_utf8_lossy(&stats.stdout);
    assert!(!out.contains("(paused)"), "{out}");
}

/// `delayq resume` and `delayq purge` of a topic the server does not know (no jobs, no
/// settings, no pause: a typo) fail with exit 3 naming it and change nothing; `delayq pause`
/// of one holds and says so on standard error; `delayq topics` and `delayq stats` show the
/// paused topic with no jobs until it is resumed.
// See: issue 36
#[test]
fn a_typo_in_resume_or_purge_exits_3_and_a_paused_empty_topic_shows_issue_36() {
    unknown_topics_from_the_command_line(&Server::start(&[]));
}

/// As [`a_typo_in_resume_or_purge_exits_3_and_a_paused_empty_topic_shows_issue_36`], served
/// on Redis.
// See: issue 36
#[test]
fn a_typo_in_resume_or_purge_exits_3_on_redis_issue_36() {
    let redis = delayq_testkit::RedisServer::start();
    unknown_topics_from_the_command_line(&Server::start(&["--redis", &redis.url()]));
}

/// As [`a_typo_in_resume_or_purge_exits_3_and_a_paused_empty_topic_shows_issue_36`], served
/// on PostgreSQL.
// See: issue 36
#[test]
fn a_typo_in_resume_or_purge_exits_3_on_postgres_issue_36() {
    let pg = delayq_testkit::PostgresServer::start();
    let s = Server::start(&["--postgres", &pg.url()]);
    s.wait_for_log("serving on");
    unknown_topics_from_the_command_line(&s);
}

fn unknown_topics_from_the_command_line(s: &Server) {
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));

    let (code, err) = fails(s.run(&["resume", "ordres"]));
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("topic ordres not found") && err.contains("`delayq topics`"),
        "{err}"
    );
    let (code, err) = fails(s.run(&["purge", "ordres", "--yes"]));
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("nothing to purge"), "{err}");
    let o = s.run(&["resume", "ordres", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let v = json_of(&String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    assert_eq!(ok(s.run(&["topics"])), "orders\n");
    assert!(ok(s.run(&["get", "orders", "o1"])).contains("ready"));

    // Paused ahead of its first push: it holds, a note says so, and it shows.
    let o = s.run(&["pause", "later"]);
    assert_eq!(ok(o.clone()), "paused later until resumed\n");
    let note = String::from_utf8_lossy(&o.stderr);
    assert!(
        note.starts_with("note: topic later has no jobs yet; it is paused ahead of its first push"),
        "{note}"
    );
    let again = s.run(&["pause", "later", "--for", "1h"]);
    assert!(
        ok(again.clone()).starts_with("paused later until 20"),
        "{again:?}"
    );
    assert!(
        again.stderr.is_empty(),
        "a known topic has no note: {again:?}"
    );
    assert_eq!(ok(s.run(&["topics"])), "later\norders\n");
    let stats = ok(s.run(&["stats"]));
    assert!(stats.contains("later (paused)"), "{stats}");
    let json = json_of(&ok(s.run(&["pause", "soon", "--json"])));
    assert_eq!(json["known"], false, "{json}");

    assert_eq!(ok(s.run(&["resume", "later"])), "resumed later\n");
    ok(s.run(&["resume", "soon"]));
    assert_eq!(ok(s.run(&["topics"])), "orders\n");
}

/// SIGUSR1 (beanstalkd's drain mode) no longer kills the server: it logs what to do instead
/// and goes on serving.
// See: issue 36
#[test]
fn sigusr1_is_logged_and_the_server_goes_on_issue_36() {
    let s = Server::start(&[]);
    // The handler is in place before the server says it serves (it is installed first
    // thing): the port may be bound earlier, while the engine still opens.
    s.wait_for_log("delayq serving on");
    let pid = s.serving.child.id().to_string();
    let kill = Command::new("kill").args(["-USR1", &pid]).status().unwrap();
    assert!(kill.success());
    s.wait_for_log("SIGUSR1 received and ignored");
    let o = s.run(&["push", "after-usr1", "x"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the server still answers: {o:?}\n{}",
        s.log()
    );
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

/// Parses the JSON a command printed (on standard output or error).
fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `openssl req -x509` as people type it to make a server certificate: self-signed for
/// 127.0.0.1, and so marked as an authority (CA:TRUE, openssl's default), which webpki
/// refuses as a server's own certificate. Writes `<name>.pem` and `<name>.key` into `dir`.
fn openssl_self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (scripts/test.sh installs it)");
    assert!(made.status.success(), "openssl: {made:?}");
    let ext = ok(Command::new("openssl")
        .args(["x509", "-noout", "-ext", "basicConstraints", "-in"])
        .arg(&cert)
        .output()
        .unwrap());
    assert!(
        ext.contains("CA:TRUE"),
        "the certificate is an authority: {ext}"
    );
    (cert, key)
}

/// `--ca-cert` takes the certificate `openssl req -x509` makes (CA:TRUE), as curl and the
/// Python and Node clients do: push, get and health over HTTPS. Without it, with another
/// certificate, for a host the certificate does not name, or against a server that does not
/// speak TLS, the command fails with exit 1 naming the TLS problem, never "is `delayq
/// serve` running?" (exit 5).
// See: issue 36
#[test]
fn ca_cert_trusts_an_openssl_self_signed_certificate_issue_36() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = openssl_self_signed(certs.path(), "server");
    let (other, _) = openssl_self_signed(certs.path(), "other");
    let s = Server::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    s.wait_for_log("serving on https://");
    let base = s.url.replace("http://", "https://");
    let cli = |args: &[&str], server: &str, ca: Option<&Path>| {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .args(["--server", server])
            .env_remove("DELAYQ_CA_CERT")
            .env_remove("DELAYQ_TOKEN");
        if let Some(ca) = ca {
            cmd.arg("--ca-cert").arg(ca);
        }
        cmd.output().unwrap()
    };
    let out = ok(cli(
        &["push", "tls", "over TLS", "--id", "j1"],
        &base,
        Some(&cert),
    ));
    assert!(out.starts_with("pushed j1 in tls"), "{out}");
    let out = ok(cli(&["get", "tls", "j1"], &base, Some(&cert)));
    assert!(out.contains("body: over TLS"), "{out}");
    let out = ok(cli(&["health"], &base, Some(&cert)));
    assert!(out.starts_with("ready"), "{out}");

    let refused = |args: &[&str], server: &str, ca: Option<&Path>, why: &str| {
        let (code, err) = fails(cli(args, server, ca));
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("TLS with https://") && err.contains(why),
            "{err}"
        );
        assert!(!err.contains("is `delayq serve` running"), "{err}");
        err
    };
    let err = refused(
        &["get", "tls", "j1"],
        &base,
        None,
        "this client does not trust",
    );
    assert!(err.contains("--ca-cert"), "{err}");
    refused(
        &["get", "tls", "j1"],
        &base,
        Some(&other),
        "this client does not trust",
    );
    // The exact certificate, but for another host than the one it names.
    let localhost = base.replace("127.0.0.1", "localhost");
    refused(
        &["get", "tls", "j1"],
        &localhost,
        Some(&cert),
        "does not name the host",
    );
    // A server that answers in plain HTTP.
    let plain = format!("https://127.0.0.1:{}", http_listener(1));
    refused(&["stats"], &plain, None, "did not answer in TLS");
    // With --json the TLS failure is JSON on standard error.
    let (code, err) = fails(cli(&["get", "tls", "j1", "--json"], &base, None));
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(json_of(&err)["error"]["code"], "tls", "{err}");
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

/// `delayq reserve` exits 6 when no job came, in every output mode, so that the README's
/// `token=$(delayq reserve … -q)` stops a `set -e` script instead of carrying on with an
/// empty token; with a job it exits 0. `--help` says so.
// See: issue 36
#[test]
fn reserve_exits_6_when_no_job_came_issue_36() {
    let s = Server::start(&[]);
    assert_eq!(no_job(s.run(&["reserve", "empty"])), "no job due\n");
    let quiet = s.run(&["reserve", "empty", "-q"]);
    assert_eq!(stdout(&quiet), "", "-q prints no token");
    let err = String::from_utf8_lossy(&quiet.stderr).into_owned();
    assert!(err.contains("no job due in empty"), "{err}");
    no_job(quiet);
    let json = s.run(&["reserve", "empty", "--json"]);
    assert!(json.stderr.is_empty(), "{json:?}");
    assert_eq!(json_of(&no_job(json))["jobs"], serde_json::json!([]));

    let script = "token=$(delayq reserve empty --wait 200ms -q)\necho \"reached with [$token]\"\n";
    let bin_dir = Path::new(BIN).parent().unwrap();
    let sh = |script: &str| {
        Command::new("sh")
            .args(["-ec", script])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin_dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("DELAYQ_SERVER", &s.url)
            .env_remove("DELAYQ_TOKEN")
            .output()
            .unwrap()
    };
    let stopped = sh(script);
    assert_eq!(stopped.status.code(), Some(6), "{stopped:?}");
    assert!(!stdout(&stopped).contains("reached"), "{stopped:?}");
    ok(s.run(&["push", "empty", "x", "--id", "e1"]));
    let went_on = ok(sh(script));
    assert!(
        went_on.starts_with("reached with [") && !went_on.contains("[]"),
        "{went_on}"
    );

    let help = ok(Command::new(BIN).arg("--help").output().unwrap());
    assert!(help.contains("6 `reserve` got no job"), "{help}");
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
