//! `delayq bench`: its phases on the embedded engine and on Redis, nothing left behind, and
//! a PostgreSQL password never printed.

use std::process::Command;

use crate::{BIN, ok, support};

/// `delayq bench` runs its phases on a temporary embedded engine and on a Redis, reports
/// every job delivered and none early, and leaves no job behind.
#[test]
fn bench_measures_an_engine_and_cleans_up() {
    let args = [
        "bench",
        "--jobs",
        "300",
        "--delayed",
        "300",
        "--spread",
        "300ms",
        "--consumers",
        "10",
        "--json",
    ];
    let redis = delayq_testkit::RedisServer::start();
    for engine in [None, Some(redis.url())] {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        if let Some(url) = &engine {
            cmd.args(["--engine", url]);
        }
        let out = ok(cmd.output().unwrap());
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["drain"]["jobs"], 300, "{v}");
        assert_eq!(v["delayed"]["delivered"], 300, "{v}");
        assert_eq!(v["delayed"]["lateness_ms"]["early"], 0, "{v}");
    }
    // Only the purged topic's token counter (kept so that lease tokens never repeat) and
    // its config (which counts its purges) are left on the Redis; the purge took the topic
    // off the registry.
    let keys = ok(Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "--scan"])
        .output()
        .expect("redis-cli comes with redis-server"));
    assert!(
        keys.lines().all(|k| k.starts_with("delayq:{bench.")
            && (k.ends_with("}:seq") || k.ends_with("}:config"))),
        "keys left: {keys}"
    );
    let bad = Command::new(BIN)
        .args(["bench", "--jobs", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
}

/// `delayq bench` against a PostgreSQL URL with a password never prints the password, in
/// its error as in its figures (`serve` masks it too).
// See: issue 36
#[test]
fn bench_never_prints_a_postgres_password_issue_36() {
    let port = support::free_port();
    let url = format!("postgres://app:s3cret-pw@127.0.0.1:{port}/db");
    let o = Command::new(BIN)
        .args(["bench", "--engine", &url, "--jobs", "10", "--delayed", "0"])
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_ne!(o.status.code(), Some(0), "nothing listens there: {out}");
    assert!(
        out.contains("127.0.0.1"),
        "the error names the engine: {out}"
    );
    assert!(!out.contains("s3cret-pw"), "the password shows: {out}");
}
