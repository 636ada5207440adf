//! Starting `delayq serve` in the tests of the binary: a free loopback port, the command
//! (its log in a file, the environment that would change it removed), and the wait until it
//! listens. Each test binary keeps its own `Server` around these: what it adds (a fake clock,
//! memory readings, client subcommands) differs.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1 (free when asked; the server binds it just after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// `delayq serve --listen <listen> --data-dir <data>`, its stderr (the log) into `log`, with
/// `DELAYQ_REDIS_URL`, `DELAYQ_POSTGRES_URL`, `DELAYQ_TOKENS` and `DELAYQ_CONFIG` removed so that the machine's
/// environment cannot change what the test starts. Callers add their flags and spawn it.
pub fn serve_command(listen: &str, data: &Path, log: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(["serve", "--listen", listen, "--data-dir"])
        .arg(data)
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_POSTGRES_URL")
        .env_remove("DELAYQ_TOKENS")
        .env_remove("DELAYQ_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(log).expect("the server's log file"),
        ));
    cmd
}

/// Waits, 20 s at most, until something accepts connections at `listen`; on time out, fails
/// with the server's log.
pub fn wait_listening(listen: &str, log: impl Fn() -> String) {
    let start = Instant::now();
    while std::net::TcpStream::connect(listen).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "delayq serve did not start:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A spawned `delayq serve` and its log file: killed (SIGKILL) and reaped on drop, its log
/// printed when the test is failing.
pub struct Serving {
    pub child: Child,
    pub log: PathBuf,
}

impl Serving {
    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- delayq serve log ---\n{}", self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
