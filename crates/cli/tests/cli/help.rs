//! What the binary says about itself: `--version`, `--help` of every subcommand, the shell
//! completions and the manual pages (checked by bash and groff).

use std::process::{Command, Stdio};

use crate::{BIN, ok};

/// `--version` names the version, the commit and the build date.
#[test]
fn version_names_the_commit_and_build_date_issue_12() {
    // See: issue 12
    let out = ok(Command::new(BIN).arg("--version").output().unwrap());
    let expected = format!("delayq {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(out.starts_with(&expected), "{out}");
    let commit = out[expected.len()..].split(',').next().unwrap();
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{out}"
    );
    let date = out
        .trim_end()
        .rsplit("built ")
        .next()
        .unwrap()
        .trim_end_matches(')');
    assert!(
        date == "unknown" || (date.len() == 10 && date.as_bytes()[4] == b'-'),
        "{out}"
    );
    let serve = ok(Command::new(BIN)
        .args(["serve", "--version"])
        .output()
        .unwrap());
    assert!(serve.contains(&out["delayq ".len()..]), "{serve}");
}

/// Every subcommand, as `--help`, the completions and the manual page must show them.
const SUBCOMMANDS: [&str; 24] = [
    "serve",
    "push",
    "get",
    "list",
    "reschedule",
    "delete",
    "reserve",
    "ack",
    "nack",
    "touch",
    "release",
    "bury",
    "stats",
    "topics",
    "dead",
    "kick",
    "archive",
    "purge",
    "bench",
    "completions",
    "man",
    "topic",
    "destination",
    "health",
];

/// `delayq completions` prints a script for each shell, and bash takes it; `delayq man`
/// prints a page that names every subcommand and that groff reads without a warning, and
/// writes one page per subcommand into a directory.
#[test]
fn completions_and_manual_pages() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap());
        assert!(
            script.contains("reschedule") && script.contains("at-most-once"),
            "{shell}: {script}"
        );
    }
    let bash = ok(Command::new("bash")
        .args([
            "-c",
            &format!("source <({BIN} completions bash) && complete -p delayq"),
        ])
        .output()
        .unwrap());
    assert!(bash.contains("delayq"), "{bash}");

    let page = ok(Command::new(BIN).arg("man").output().unwrap());
    assert!(page.contains(".TH delayq 1"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("delayq\\-{sub}(1)")),
            "the manual page does not list {sub}"
        );
    }
    let mut groff = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut groff.stdin.take().unwrap(), page.as_bytes()).unwrap();
    let checked = groff.wait_with_output().unwrap();
    assert!(
        checked.status.success() && checked.stderr.is_empty(),
        "groff: {}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    ok(Command::new(BIN)
        .args(["man", "--dir"])
        .arg(&out)
        .output()
        .unwrap());
    for name in [
        "delayq.1",
        "delayq-push.1",
        "delayq-nack.1",
        "delayq-dead-list.1",
    ] {
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(text.starts_with(".ie"), "{name}: {text}");
    }
}

#[test]
fn help_is_complete() {
    let top = ok(Command::new(BIN).arg("--help").output().unwrap());
    for sub in SUBCOMMANDS {
        assert!(top.contains(sub), "delayq --help does not list {sub}");
        let help = ok(Command::new(BIN).args([sub, "--help"]).output().unwrap());
        assert!(help.contains("Usage: delayq"), "{sub} --help: {help}");
    }
    let serve = ok(Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap());
    for flag in [
        "--listen",
        "--data-dir",
        "--redis",
        "--sync",
        "--token",
        "--max-body",
        "--max-request-bytes",
        "--max-wait",
        "--request-timeout",
        "--concurrency",
        "--max-long-polls",
        "--tls-cert",
        "--tls-key",
        "--metrics-public",
        "16 characters",
        "--connect-timeout",
        "--redis-connect-timeout",
        "--postgres",
        "sslmode",
        "DELAYQ_POSTGRES_URL",
        "--log-format",
        "--log",
        "--config",
        "DELAYQ_REDIS_URL",
        "DELAYQ_LISTEN",
    ] {
        assert!(
            serve.contains(flag),
            "serve --help does not document {flag}"
        );
    }
    assert!(top.contains("Exit codes"), "{top}");
    // Secrets in the environment never show in the help.
    let with_secrets = ok(Command::new(BIN)
        .args(["serve", "--help"])
        .env("DELAYQ_TOKENS", "a-secret-token-value")
        .env("DELAYQ_REDIS_URL", "redis://app:hunter2@db")
        .env("DELAYQ_POSTGRES_URL", "postgres://app:hunter2@db/app")
        .output()
        .unwrap());
    assert!(
        !with_secrets.contains("a-secret-token-value") && !with_secrets.contains("hunter2"),
        "{with_secrets}"
    );
    ok(Command::new(BIN)
        .args(["dead", "list", "--help"])
        .output()
        .unwrap());
    let topic_set = ok(Command::new(BIN)
        .args(["topic", "set", "--help"])
        .output()
        .unwrap());
    for flag in [
        "--ttr",
        "--max-attempts",
        "--backoff-base",
        "--max-body",
        "--retain-jobs",
        "--retain-for",
        "--unset",
    ] {
        assert!(topic_set.contains(flag), "topic set --help lacks {flag}");
    }
}
