//! What the server harnesses share about their child processes: finding the binary,
//! starting it with a clear message when it is missing, trying free ports, waiting until it
//! is up and killing it.

use std::ffi::OsStr;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A loopback port nothing listens on now (the caller retries when it is taken by then).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free loopback port: {e}"))
}

/// The binary named by the environment variable `env`, else `default` on the `PATH`.
pub(crate) fn binary(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Spawns `cmd`; a missing program panics with the Debian package that brings it and the
/// environment variable that overrides it, as scripts/test.sh installs it.
pub(crate) fn spawn(cmd: &mut Command, package: &str, env: &str) -> Child {
    cmd.spawn().unwrap_or_else(|e| {
        let program = cmd.get_program().to_string_lossy().into_owned();
        if e.kind() == std::io::ErrorKind::NotFound {
            panic!(
                "{program} is missing: install the Debian package {package} (scripts/test.sh \
                 does: `sudo apt-get install -y {package}`) or set {env} to the binary's path"
            )
        }
        panic!("cannot start {program}: {e}")
    })
}

/// Calls `attempt` with a fresh free loopback port until it succeeds, at most 10 times (a
/// port free when probed may be taken before the server binds it); panics with the last
/// log it returned.
pub(crate) fn on_a_free_port(
    what: impl AsRef<OsStr>,
    mut attempt: impl FnMut(u16) -> Result<(), String>,
) -> u16 {
    let mut last_log = String::new();
    for _ in 0..10 {
        let port = free_port();
        match attempt(port) {
            Ok(()) => return port,
            Err(log) => last_log = log,
        }
    }
    panic!(
        "{} did not start after 10 attempts; last log:\n{last_log}",
        what.as_ref().to_string_lossy()
    );
}

/// Calls `attempt` up to `tries` times, `pause` apart, until it succeeds: a server started
/// again on its old `port` after a kill (the port may linger a moment); panics with the last
/// log it returned.
pub(crate) fn again(
    what: &str,
    port: u16,
    tries: usize,
    pause: Duration,
    mut attempt: impl FnMut() -> Result<(), String>,
) {
    let mut last_log = String::new();
    for _ in 0..tries {
        match attempt() {
            Ok(()) => return,
            Err(log) => last_log = log,
        }
        std::thread::sleep(pause);
    }
    panic!("{what} did not restart on port {port}; last log:\n{last_log}");
}

/// Waits until `up` answers true, for at most 10 s: false when the child exits first or the
/// time runs out (the caller kills it and reports its log).
pub(crate) fn wait_until_up(child: &mut Option<Child>, up: impl Fn() -> bool) -> bool {
    wait_until_up_within(child, Duration::from_secs(10), up)
}

/// [`wait_until_up`] with its own limit, for servers slower to boot.
pub(crate) fn wait_until_up_within(
    child: &mut Option<Child>,
    limit: Duration,
    up: impl Fn() -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if up() {
            return true;
        }
        let exited = child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
            .is_some();
        if exited || Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills the child with SIGKILL and reaps it, if it runs.
pub(crate) fn kill(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Kills a child started with `process_group(0)` and everything in its group (a wrapper
/// script and the server under it, a postmaster and its backends) with SIGKILL, and reaps
/// it.
pub(crate) fn kill_group(child: &mut Option<Child>) {
    if let Some(c) = child.as_ref() {
        // The group's id is the child's pid.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", c.id())])
            .stderr(std::process::Stdio::null())
            .status();
    }
    kill(child);
}
