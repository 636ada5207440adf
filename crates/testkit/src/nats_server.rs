//! [`NatsServer`]: a real `nats-server` with JetStream, owned by a test, on a free loopback
//! port, its store in a temporary directory, killed when dropped; the push delivery tests'
//! JetStream destination (crates/push/tests/nats.rs).
//!
//! No test ever connects to a NATS server it did not start (the machine's own, on 4222, is
//! not ours). A missing binary fails with a message that says what to install; it never
//! skips.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// The environment variable that overrides the `nats-server` binary.
pub const NATS_SERVER_ENV: &str = "DELAYQ_NATS_SERVER";

/// A running `nats-server -js` owned by the test.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    /// Holds the JetStream store and `nats.log`.
    dir: TempDir,
}

impl NatsServer {
    /// Starts a server with JetStream on a free port. Panics with its log if it does not
    /// come up.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("delayq-nats-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for nats-server: {e}"));
        let mut server = NatsServer {
            child: None,
            port: 0,
            dir,
        };
        // The last attempt's port is the one it listens on.
        crate::child::on_a_free_port("nats-server", |port| {
            server.port = port;
            server.spawn_and_wait()
        });
        server
    }

    /// Starts it again on the same port and store after [`NatsServer::kill`].
    pub fn restart(&mut self) {
        let port = self.port;
        crate::child::again("nats-server", port, 50, Duration::from_millis(100), || {
            self.spawn_and_wait()
        });
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Kills the server with SIGKILL; its store stays for [`NatsServer::restart`].
    pub fn kill(&mut self) {
        crate::child::kill(&mut self.child);
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats.log")
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", self.log_path().display()));
        let mut cmd = Command::new(crate::child::binary(NATS_SERVER_ENV, "nats-server"));
        cmd.args([
            "-a",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-js",
            "-sd",
        ])
        .arg(self.dir.path().join("store"))
        // No monitoring port, no cluster: nothing else is bound.
        .current_dir(self.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
        let child = crate::child::spawn(&mut cmd, "nats-server", NATS_SERVER_ENV);
        self.child = Some(child);
        let addr = self.addr();
        let log = self.log_path();
        // Up once it listens and its log says JetStream is ready.
        if crate::child::wait_until_up(&mut self.child, || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                && std::fs::read_to_string(&log).is_ok_and(|l| l.contains("Server is ready"))
        }) {
            return Ok(());
        }
        self.kill();
        Err(self.log())
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            eprintln!(
                "--- nats-server log (port {}) ---\n{}",
                self.port,
                self.log()
            );
        }
        self.kill();
    }
}
