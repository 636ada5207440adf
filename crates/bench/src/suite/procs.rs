//! Processes the suite starts and measures: CPU time (of a process, or of a process with its
//! descendants, such as a PostgreSQL server's postmaster and backends) and memory read from
//! `/proc`, children stopped by their own pid and never by name.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, Command};

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux we run on;
/// `getconf CLK_TCK` says otherwise where it differs).
fn ticks_per_second() -> f64 {
    static HZ: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The fields of `/proc/<pid>/stat` after the command name (the state first), or `None`
/// when the process is gone.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let rest = stat.rsplit_once(')').map(|(_, r)| r)?;
    Some(rest.split_whitespace().map(String::from).collect())
}

/// Field `i` of [`stat_fields`] as a number (0 when absent).
fn stat_number(fields: &[String], i: usize) -> f64 {
    fields
        .get(i)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// CPU seconds (user + system) a process has used so far, or 0 when it is gone.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    // Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the state field.
    stat_fields(pid)
        .map(|f| (stat_number(&f, 11) + stat_number(&f, 12)) / ticks_per_second())
        .unwrap_or(0.0)
}

/// CPU seconds used so far by process `root` and all its descendants, with what the
/// children they reaped had used (a PostgreSQL postmaster reaps the backends of closed
/// connections: their time moves into its `cutime` and `cstime`, and is still counted).
/// Descendants are found by their parent pid, not by process group: each PostgreSQL
/// backend makes itself the leader of a group of its own.
pub(crate) fn tree_cpu_seconds(root: u32) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    // (pid, parent, ticks) of every process.
    let all: Vec<(u32, u32, f64)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let f = stat_fields(pid)?;
            let parent = f.get(1)?.parse().ok()?;
            // utime, stime, cutime, cstime: fields 14 to 17.
            Some((pid, parent, (11..=14).map(|i| stat_number(&f, i)).sum()))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(all.iter().filter(|p| p.1 == parent).map(|p| p.0));
        i += 1;
    }
    let ticks: f64 = all
        .iter()
        .filter(|p| tree.contains(&p.0))
        .map(|p| p.2)
        .sum();
    ticks / ticks_per_second()
}

/// What a CPU reading covers: one process, or a process with all its descendants (a
/// PostgreSQL server: its postmaster, its auxiliary processes and a backend per
/// connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proc {
    /// One process, by its pid.
    One(u32),
    /// This process and its descendants ([`tree_cpu_seconds`]).
    Tree(u32),
}

impl Proc {
    /// CPU seconds it has used so far.
    pub(crate) fn cpu_seconds(self) -> f64 {
        match self {
            Proc::One(pid) => cpu_seconds(pid),
            Proc::Tree(root) => tree_cpu_seconds(root),
        }
    }
}

/// Resident memory of a process in bytes, or 0 when it is gone.
pub(crate) fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// The bytes of every file under `dir`.
pub(crate) fn disk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// This process's own pid.
pub(crate) fn own_pid() -> u32 {
    std::process::id()
}

/// A child process the suite started; killed (SIGKILL, by its pid) when dropped.
pub(crate) struct Owned {
    child: Child,
    pid: u32,
    what: String,
}

impl Owned {
    /// Starts `program` with `args`, stdin and stdout piped, stderr to `log` (or inherited).
    pub(crate) fn spawn(
        what: &str,
        program: &Path,
        args: &[String],
        dir: Option<&Path>,
        log: Option<&Path>,
    ) -> anyhow::Result<Owned> {
        Self::spawn_with(what, program, args, dir, log, |_| {})
    }

    /// [`Owned::spawn`], with `prepare` changing the command before it starts (its
    /// environment).
    pub(crate) fn spawn_with(
        what: &str,
        program: &Path,
        args: &[String],
        dir: Option<&Path>,
        log: Option<&Path>,
        prepare: impl FnOnce(&mut Command),
    ) -> anyhow::Result<Owned> {
        let mut cmd = Command::new(program);
        prepare(&mut cmd);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        match log {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
                cmd.stderr(f);
            }
            None => {
                cmd.stderr(Stdio::inherit());
            }
        }
        let child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!(
                    "{what}: {} not found; bench/run.sh installs what the suite needs",
                    program.display()
                )
            } else {
                anyhow::anyhow!("{what}: cannot start {}: {e}", program.display())
            }
        })?;
        let pid = child
            .id()
            .with_context(|| format!("{what} exited at once"))?;
        Ok(Owned {
            child,
            pid,
            what: what.to_string(),
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The child itself (for its pipes).
    pub(crate) fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Fails when the process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(Some(status)) => anyhow::bail!("{} exited: {status}", self.what),
            _ => Ok(()),
        }
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub(crate) async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // Kill by pid (the handle's own kill), then reap without blocking for long.
        let _ = self.child.start_kill();
        let _ = self.child.try_wait();
    }
}

/// Waits until `port` on 127.0.0.1 accepts connections, up to `limit`.
pub(crate) async fn wait_for_port(port: u16, limit: Duration, what: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("{what} did not listen on 127.0.0.1:{port} within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A free loopback port (free when probed).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .context("cannot find a free loopback port")?
        .port())
}

/// This executable, to start the suite's own child processes.
pub(crate) fn self_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find the delayq-bench executable")
}

/// The variable that names the `delayq` binary (as for the clients' tests).
pub(crate) const DELAYQ_BIN_ENV: &str = "DELAYQ_BIN";

/// The `delayq` binary whose `delayq serve` the suite starts: `DELAYQ_BIN`, else the
/// `delayq` beside this executable (the same target directory and profile; bench/run.sh
/// builds it, and the test command's `cargo test` builds it beside target/debug/delayq-bench).
pub(crate) fn delayq_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(DELAYQ_BIN_ENV) {
        return Ok(PathBuf::from(p));
    }
    let exe = self_exe()?;
    let dir = exe
        .parent()
        .with_context(|| format!("{} has no parent directory", exe.display()))?;
    Ok(dir.join(format!("delayq{}", std::env::consts::EXE_SUFFIX)))
}

/// CPU seconds used by each of a list of processes (or process trees) between two readings.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuMeter {
    start: Vec<(Proc, f64)>,
}

impl CpuMeter {
    /// Reads the CPU time of `pids` now.
    pub(crate) fn start(pids: &[u32]) -> Self {
        let procs: Vec<Proc> = pids.iter().map(|&p| Proc::One(p)).collect();
        Self::of(&procs)
    }

    /// Reads the CPU time of `procs` (processes or process trees) now.
    pub(crate) fn of(procs: &[Proc]) -> Self {
        CpuMeter {
            start: procs.iter().map(|&p| (p, p.cpu_seconds())).collect(),
        }
    }

    /// CPU seconds each one used since the first reading, in the same order.
    pub(crate) fn stop(&self) -> Vec<f64> {
        self.start
            .iter()
            .map(|&(p, s)| (p.cpu_seconds() - s).max(0.0))
            .collect()
    }
}
