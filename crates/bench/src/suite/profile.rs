//! Where a Redis-based system spends Redis's time during a workload: `INFO commandstats`
//! (commands called inside scripts included), the slow log, and, where `perf` works, the
//! hottest symbols of redis-server.

use std::path::PathBuf;
use std::time::Duration;

use super::procs;
use super::redis_info::{self, CommandStats};
use super::systems::{Kind, System};

/// What a profiled run showed.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Profile {
    pub system: Option<Kind>,
    pub workload: String,
    pub delivered: usize,
    /// `(command, calls, µs)`, most time first.
    pub commands: Vec<(String, u64, u64)>,
    pub slowlog: Vec<String>,
    /// `perf report` lines: share of redis-server's samples, symbol.
    pub perf: Vec<String>,
}

/// A profile being taken.
pub(crate) struct Probe {
    before: CommandStats,
    perf: Option<(procs::Owned, PathBuf)>,
}

impl Probe {
    /// Starts profiling `sys`'s Redis for about `window`.
    pub(crate) async fn start(sys: &dyn System, window: Duration) -> anyhow::Result<Probe> {
        let Some(redis) = sys.redis() else {
            return Ok(Probe {
                before: CommandStats::default(),
                perf: None,
            });
        };
        let _ = redis_info::slowlog(redis).await?;
        let before = redis_info::command_stats(redis).await?;
        let perf = match (redis.pid(), which("perf")) {
            (Some(pid), Some(perf)) => {
                let out = redis.dir().join("perf.data");
                let secs = window.as_secs().max(1).to_string();
                procs::Owned::spawn(
                    "perf",
                    &perf,
                    &[
                        "record".into(),
                        "-q".into(),
                        "-F".into(),
                        "499".into(),
                        "-g".into(),
                        "-p".into(),
                        pid.to_string(),
                        "-o".into(),
                        out.display().to_string(),
                        "--".into(),
                        "sleep".into(),
                        secs,
                    ],
                    None,
                    Some(&redis.dir().join("perf.log")),
                )
                .ok()
                .map(|p| (p, out))
            }
            _ => None,
        };
        Ok(Probe { before, perf })
    }

    /// Collects what the run showed.
    pub(crate) async fn finish(
        self,
        sys: &dyn System,
        workload: &str,
        delivered: usize,
    ) -> anyhow::Result<Profile> {
        let mut p = Profile {
            system: Some(sys.kind()),
            workload: workload.into(),
            delivered,
            ..Profile::default()
        };
        let Some(redis) = sys.redis() else {
            return Ok(p);
        };
        let after = redis_info::command_stats(redis).await?;
        p.commands = after.since(&self.before).by_time();
        p.commands.truncate(8);
        p.slowlog = redis_info::slowlog(redis).await?;
        if let Some((mut perf, data)) = self.perf {
            let _ = tokio::time::timeout(Duration::from_secs(30), perf.child().wait()).await;
            p.perf = perf_report(&data).unwrap_or_default();
        }
        Ok(p)
    }
}

/// The top symbols of a `perf record` file, self time.
fn perf_report(data: &std::path::Path) -> Option<Vec<String>> {
    let out = std::process::Command::new(which("perf")?)
        .args(["report", "--stdio", "--no-children", "-g", "none"])
        .args(["--sort", "symbol", "--percent-limit", "2", "-i"])
        .arg(data)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#') && l.contains('%'))
            .take(10)
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect(),
    )
}

/// A program on the PATH.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}
