//! Build script: the git commit and the build date, for `delayq --version` and the
//! `delayq_build_info` metric. Runs `git rev-parse` when git and a repository are there
//! (never the network); otherwise both say "unknown". `SOURCE_DATE_EPOCH`, when set, is
//! the build date (reproducible builds).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Rebuild when HEAD moves (a commit, a checkout): its reflog changes each time.
    for file in ["HEAD", "logs/HEAD"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| i64::try_from(d.as_secs()).ok())
        });
    let date = seconds
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .map(|t| t.date().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DELAYQ_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=DELAYQ_BUILD_DATE={date}");
}
