//! The packaging files under `packaging/` and the `Dockerfile`: the systemd unit passes
//! `systemd-analyze verify` and `systemd-analyze security`; the unit, the example config,
//! the environment file and the Debian package's assets agree on paths and variables; the
//! Dockerfile's port, volume and user agree with its settings. The Debian package itself
//! is built, unpacked and run by `packaging/test-deb.sh` (a release build; `scripts/test.sh`
//! runs it after these tests).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_delayq");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap()
}

/// The values of `key=` in a unit file, in order.
fn unit_values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

fn systemd_analyze(args: &[&str], unit: &Path) -> Output {
    Command::new("systemd-analyze")
        .args(args)
        .arg(unit)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run systemd-analyze ({e}): install it (Debian: apt-get install systemd)")
        })
}

/// The unit with ExecStart pointing at the binary under test: `verify` checks that the
/// command exists, and `--root` would need a whole systemd tree (sysinit.target ...).
/// Nothing is started: both commands only read the file.
#[test]
fn systemd_unit_passes_systemd_analyze() {
    let unit = read("packaging/systemd/delayq.service");
    let exec_start = unit_values(&unit, "ExecStart");
    assert_eq!(
        exec_start,
        ["/usr/bin/delayq serve --config /etc/delayq/delayq.toml"]
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delayq.service");
    std::fs::write(
        &path,
        unit.replace("ExecStart=/usr/bin/delayq", &format!("ExecStart={BIN}")),
    )
    .unwrap();

    // The manual pages it names are checked in the package (packaging/test-deb.sh).
    let verify = systemd_analyze(&["verify", "--man=no"], &path);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        verify.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );

    // The hardening, scored: 0 is the most confined, 10 the least; 2.0 is "OK" and this
    // unit scores 1.2 with systemd 252.
    let security = systemd_analyze(&["security", "--offline=yes", "--threshold=20"], &path);
    let report = String::from_utf8_lossy(&security.stdout);
    assert!(
        security.status.success(),
        "exposure above 2.0:\n{report}{}",
        String::from_utf8_lossy(&security.stderr)
    );
    for setting in [
        "DynamicUser=yes",
        "StateDirectory=delayq",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=\n",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "SystemCallFilter=@system-service",
        "MemoryDenyWriteExecute=yes",
        "LockPersonality=yes",
    ] {
        assert!(unit.contains(setting), "the unit has no {setting:?}");
    }
}

/// The unit, the config it reads, the environment file and the package's assets name the
/// same paths; the config's data directory is the unit's state directory (the only place
/// the service may write).
#[test]
fn unit_config_and_package_agree() {
    let unit = read("packaging/systemd/delayq.service");
    assert_eq!(unit_values(&unit, "StateDirectory"), ["delayq"]);
    assert_eq!(unit_values(&unit, "WorkingDirectory"), ["/var/lib/delayq"]);
    assert_eq!(
        unit_values(&unit, "EnvironmentFile"),
        ["-/etc/default/delayq"]
    );

    let config: toml::Table = read("packaging/delayq.toml").parse().unwrap();
    assert_eq!(config["data_dir"].as_str(), Some("/var/lib/delayq"));
    assert_eq!(config["listen"].as_str(), Some("127.0.0.1:7070"));
    assert!(
        !config.contains_key("tokens"),
        "tokens belong in the environment file (root only), not the world-readable config"
    );

    // Every variable the environment file shows is one `delayq serve` reads.
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let env = read("packaging/default/delayq");
    let shown: Vec<&str> = env
        .lines()
        .filter_map(|l| l.trim_start_matches('#').split_once('='))
        .map(|(name, _)| name)
        .filter(|name| name.starts_with("DELAYQ_"))
        .collect();
    assert!(shown.contains(&"DELAYQ_TOKENS"), "{env}");
    for name in shown {
        assert!(help.contains(name), "serve --help has no {name}");
    }

    let manifest: toml::Table = read("crates/cli/Cargo.toml").parse().unwrap();
    let deb = &manifest["package"]["metadata"]["deb"];
    assert_eq!(deb["name"].as_str(), Some("delayq"));
    let assets: Vec<(&str, &str, &str)> = deb["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_array().unwrap();
            (
                a[0].as_str().unwrap(),
                a[1].as_str().unwrap(),
                a[2].as_str().unwrap(),
            )
        })
        .collect();
    for expected in [
        ("target/release/delayq", "usr/bin/", "755"),
        (
            "../../packaging/delayq.toml",
            "etc/delayq/delayq.toml",
            "644",
        ),
        (
            "../../packaging/default/delayq",
            "etc/default/delayq",
            "600",
        ),
    ] {
        assert!(assets.contains(&expected), "{expected:?} not in {assets:?}");
    }
    assert_eq!(
        deb["systemd-units"]["unit-name"].as_str(),
        Some("delayq"),
        "cargo-deb installs packaging/systemd/delayq.service"
    );
}

/// The image listens where it says it does, on the port it exposes, and keeps its data in
/// its volume, as a non-root user; it checks its health with `delayq health`, has the
/// system's certificate authorities, and builds the dependencies in a layer of their own
/// (issue 36). (Docker cannot run here: hadolint lints the file in scripts/test.sh, and
/// nothing builds it.)
#[test]
fn dockerfile_agrees_with_itself() {
    let file = read("Dockerfile");
    let has = |line: &str| file.lines().any(|l| l.trim() == line);
    assert!(has("ENV DELAYQ_LISTEN=0.0.0.0:7070 \\"), "{file}");
    assert!(has("DELAYQ_DATA_DIR=/var/lib/delayq"), "{file}");
    assert!(has("VOLUME /var/lib/delayq"), "{file}");
    assert!(has("EXPOSE 7070"), "{file}");
    assert!(has("USER 10001:10001"), "{file}");
    assert!(has("CMD [\"serve\"]"), "{file}");
    let stages: Vec<&str> = file.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(
        stages.last().copied(),
        Some("FROM debian:trixie-slim"),
        "the image runs on Debian slim: {stages:?}"
    );
    // The health check is a subcommand the binary has (its --help answers).
    let check = file
        .lines()
        .skip_while(|l| !l.starts_with("HEALTHCHECK "))
        .nth(1)
        .unwrap_or_default()
        .trim();
    assert!(
        check.starts_with("CMD [\"delayq\", \"health\""),
        "HEALTHCHECK runs `delayq health`: {file}"
    );
    let help = Command::new(BIN)
        .args(["health", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success(), "{help:?}");
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("--timeout"),
        "{help:?}"
    );
    let runtime = file
        .rsplit_once("FROM debian:trixie-slim")
        .unwrap_or_default()
        .1;
    assert!(
        runtime.contains("apt-get install -y --no-install-recommends ca-certificates"),
        "the runtime image has the system's certificate authorities: {file}"
    );
    // The dependencies are cooked before the sources are copied in.
    let cook = file.find("cargo chef cook --release --locked -p delayq-cli");
    let sources = cook.and_then(|at| file[at..].find("COPY . .").map(|n| at + n));
    let build = file.find("cargo build --release --locked -p delayq-cli");
    assert!(
        cook.is_some() && sources.is_some() && sources < build,
        "a dependency layer (cargo chef cook), then the sources, then the build: {file}"
    );
    let ignore = read(".dockerignore");
    assert!(ignore.lines().any(|l| l == "target/"), "{ignore}");
}
