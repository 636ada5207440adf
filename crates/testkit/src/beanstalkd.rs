//! [`Beanstalkd`]: a real `beanstalkd` process owned by a test, on a free loopback port, in
//! memory (no binlog), killed when dropped: the reference that delayq's beanstalkd protocol
//! server is compared with (crates/beanstalk/tests/differential.rs).
//!
//! No test ever connects to a beanstalkd it did not start. A missing binary fails with a
//! message that says what to install; it never skips.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// The environment variable that overrides the `beanstalkd` binary.
pub const BEANSTALKD_ENV: &str = "DELAYQ_BEANSTALKD";

/// Options of a test beanstalkd.
#[derive(Clone, Debug, Default)]
pub struct BeanstalkdOptions {
    /// The largest job body (`-z`); beanstalkd's default (65,535 bytes) when `None`.
    pub max_job_size: Option<usize>,
}

/// A running `beanstalkd` owned by the test.
pub struct Beanstalkd {
    child: Option<Child>,
    port: u16,
    /// Holds `beanstalkd.log` (the process's stderr, with `-V`).
    dir: TempDir,
    opts: BeanstalkdOptions,
}

impl Beanstalkd {
    /// Starts a server with beanstalkd's defaults. Panics with the server log if it does
    /// not come up.
    pub fn start() -> Self {
        Self::start_with(BeanstalkdOptions::default())
    }

    /// Starts a server with options.
    pub fn start_with(opts: BeanstalkdOptions) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("delayq-beanstalkd-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for beanstalkd: {e}"));
        let mut server = Beanstalkd {
            child: None,
            port: 0,
            dir,
            opts,
        };
        // The last attempt's port is the one it listens on.
        crate::child::on_a_free_port("beanstalkd", |port| {
            server.port = port;
            server.spawn_and_wait()
        });
        server
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The server's log so far (its stderr, verbose).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Puts the server into drain mode, as an operator does with `SIGUSR1`: from then on
    /// `put` answers `DRAINING`; everything else goes on.
    pub fn drain(&self) {
        let pid = self
            .pid()
            .unwrap_or_else(|| panic!("beanstalkd on port {} is not running", self.port));
        let status = Command::new("kill")
            .arg("-USR1")
            .arg(pid.to_string())
            .status()
            .unwrap_or_else(|e| panic!("cannot run `kill -USR1 {pid}`: {e}"));
        assert!(status.success(), "`kill -USR1 {pid}` failed: {status}");
    }

    /// Kills the server with SIGKILL (it keeps nothing: no binlog).
    pub fn kill(&mut self) {
        crate::child::kill(&mut self.child);
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("beanstalkd.log")
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let log = std::fs::File::create(self.log_path()).unwrap_or_else(|e| {
            panic!("cannot create {}: {e}", self.log_path().display());
        });
        let mut cmd = Command::new(crate::child::binary(BEANSTALKD_ENV, "beanstalkd"));
        cmd.arg("-l")
            .arg("127.0.0.1")
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-V");
        if let Some(z) = self.opts.max_job_size {
            cmd.arg("-z").arg(z.to_string());
        }
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        let child = crate::child::spawn(&mut cmd, "beanstalkd", BEANSTALKD_ENV);
        self.child = Some(child);
        let addr = self.addr();
        if crate::child::wait_until_up(&mut self.child, || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        }) {
            return Ok(());
        }
        self.kill();
        Err(self.log())
    }
}

impl Drop for Beanstalkd {
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            eprintln!(
                "--- beanstalkd log (port {}) ---\n{}",
                self.port,
                self.log()
            );
        }
        self.kill();
    }
}
