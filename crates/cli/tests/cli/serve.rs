//! `delayq serve` itself: startup errors as one sentence (a port in use, Redis or PostgreSQL
//! unreachable or refusing, a bare number for a duration), waiting for its engine, the
//! beanstalkd protocol beside the HTTP API, its log, and the signals (SIGTERM with a long-poll
//! open, SIGUSR1).

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{BIN, Server, exits_within, http_listener, no_job, ok, support, wait_for_log};

/// A port in use fails `serve` before the data directory is created or migrated.
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
