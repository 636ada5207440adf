//! The `delayq` binary end to end: `serve` as a child process on a free port (embedded engine,
//! Redis and PostgreSQL), the client subcommands and their exit codes, graceful shutdown on
//! SIGTERM with a long-poll open, and property-based fuzzing of the served OpenAPI document with
//! schemathesis (no 5xx, no response outside the document).
//!
//! One test binary (`cargo test -p delayq-cli --test cli`), one module per subject:
//!
//! - [`jobs`]: `push`, `get`, `list`, `reschedule`, `delete`, `dead list`, `kick`, `purge`,
//!   a body from standard input, and the example of docs/cli.md run as written.
//! - [`readme`]: the README's quick start (push, reserve, ack with curl) run as written.
//! - [`leases`]: `reserve` and the lease subcommands (`touch`, `nack`, `release`, `bury`,
//!   `ack`), `archive`.
//! - [`topics`]: `topic set` / `topic get`, `pause` and `resume`, unknown topics.
//! - [`schedules`]: `schedule put|get|list|delete`.
//! - [`client`]: `--server` and the client options, JSON errors and text output, `health`.
//! - [`serve`]: startup errors, waiting for the engine, PostgreSQL, beanstalkd, signals.
//! - [`tls`]: HTTPS serving, SIGHUP reload, `--ca-cert`.
//! - [`help`]: `--version`, `--help`, completions and manual pages.
//! - [`bench`]: `delayq bench`.
//! - [`schemathesis`]: fuzzing the OpenAPI document (needs `schemathesis`).
//!
//! This file holds what several modules share: [`Server`] (a `delayq serve` child process
//! and the client subcommands run against it) and the helpers that read a command's output.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

#[path = "../support/mod.rs"]
mod support;

mod bench;
mod client;
mod help;
mod jobs;
mod leases;
mod readme;
mod schedules;
mod schemathesis;
mod serve;
mod tls;
mod topics;

use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_delayq");

/// A `delayq serve` child process, killed on drop.
pub(crate) struct Server {
    pub(crate) serving: support::Serving,
    pub(crate) url: String,
    pub(crate) _dir: TempDir,
}

impl Server {
    /// Starts `delayq serve` and waits until it accepts connections.
    pub(crate) fn start(extra: &[&str]) -> Server {
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
    pub(crate) fn wait_for_log(&self, needle: &str) {
        wait_for_log(|| self.log(), needle);
    }

    pub(crate) fn log(&self) -> String {
        self.serving.log()
    }

    /// Runs a client subcommand against this server.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .args(["--server", &self.url])
            .env_remove("DELAYQ_TOKEN")
            .output()
            .unwrap()
    }
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The standard output of a `delayq reserve` that got no job: it exits 6.
pub(crate) fn no_job(o: Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(6),
        "a reserve that got nothing exits 6: {}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

pub(crate) fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "failed ({:?}): {}{}",
        o.status.code(),
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

/// A loopback port where a tiny HTTP server answers every connection with a 400, for at
/// most `connections` connections.
pub(crate) fn http_listener(connections: usize) -> u16 {
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

/// Runs a client subcommand that must fail, and answers its exit code and standard error.
pub(crate) fn fails(o: Output) -> (Option<i32>, String) {
    assert!(!o.status.success(), "succeeded: {}", stdout(&o));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The lease token of the one job `delayq reserve --json` handed out.
pub(crate) fn reserve_token(s: &Server, topic: &str) -> String {
    let out = ok(s.run(&["reserve", topic, "--wait", "5s", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["jobs"][0]["token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job reserved: {out}"))
        .to_string()
}

/// Runs a command that should exit on its own; kills it (and fails) when it is still running
/// after `limit`, e.g. a server that started although its settings were wrong.
pub(crate) fn exits_within(cmd: &mut Command, limit: Duration) -> Output {
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

/// Waits, 30 s at most, until the log holds `needle`. A server accepts connections a moment
/// before its startup line reaches the log file.
pub(crate) fn wait_for_log(log: impl Fn() -> String, needle: &str) {
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

/// Parses the JSON a command printed (on standard output or error).
pub(crate) fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}
