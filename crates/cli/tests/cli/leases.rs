//! Deliveries and their leases: `reserve` (exit 6 when no job came), then `touch`, `nack`,
//! `release`, `bury` and `ack` with the lease token, a stale token a conflict; `archive` of a
//! waiting job.

use std::path::Path;
use std::process::Command;

use crate::{BIN, Server, fails, json_of, no_job, ok, reserve_token, stdout};

/// `touch`, `nack`, `release` and `bury` answer for a delivery with its lease token, and a
/// stale token is a conflict (exit 4) for each.
#[test]
fn lease_subcommands_answer_for_a_delivery() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "work", "x", "--id", "w1", "--max-attempts", "5"]));
    let t1 = reserve_token(&s, "work");

    let out = ok(s.run(&["touch", "work", "w1", &t1, "--ttr", "1m"]));
    assert!(
        out.starts_with("touched w1 in work: lease until 20"),
        "{out}"
    );
    let out = ok(s.run(&["touch", "work", "w1", &t1, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["deadline_ms"].as_u64().is_some(), "{out}");

    let out = ok(s.run(&[
        "nack", "work", "w1", &t1, "--delay", "300ms", "--reason", "api down",
    ]));
    assert!(out.starts_with("nacked w1 in work: retry at 20"), "{out}");
    let out = ok(s.run(&["get", "work", "w1"]));
    assert!(out.contains("last_error: api down"), "{out}");
    for stale in [
        vec!["nack", "work", "w1", &t1],
        vec!["touch", "work", "w1", &t1],
        vec!["release", "work", "w1", &t1],
        vec!["bury", "work", "w1", &t1],
        vec!["ack", "work", "w1", &t1],
    ] {
        let (code, err) = fails(s.run(&stale));
        assert_eq!(code, Some(4), "{stale:?}: {err}");
    }

    let t2 = reserve_token(&s, "work");
    let out = ok(s.run(&["release", "work", "w1", &t2]));
    assert_eq!(out.trim(), "released w1 in work: ready again");
    let out = ok(s.run(&["list", "work", "--state", "ready"]));
    assert!(out.starts_with("w1  due "), "{out}");

    let t3 = reserve_token(&s, "work");
    let out = ok(s.run(&["list", "work", "--state", "reserved"]));
    assert!(out.starts_with("w1  lease until "), "{out}");
    let out = ok(s.run(&["bury", "work", "w1", &t3, "--reason", "order unknown"]));
    assert_eq!(out.trim(), "buried w1 in work: dead");
    let out = ok(s.run(&["dead", "list", "work"]));
    assert!(
        out.starts_with("w1  died ") && out.contains("order unknown"),
        "{out}"
    );

    // A job with one attempt left goes dead on nack, and says so.
    ok(s.run(&["push", "work", "y", "--id", "w2", "--max-attempts", "1"]));
    let t = reserve_token(&s, "work");
    let out = ok(s.run(&["nack", "work", "w2", &t, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["outcome"], "dead", "{out}");
    let (code, err) = fails(s.run(&["touch", "work", "w2", &t, "--ttr", "10"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--ttr 10: add a unit"), "{err}");
}

/// `delayq archive` sends a waiting job to dead with its reason; a reserved job is a
/// conflict (exit 4), a missing one not found (exit 3); `kick` brings it back.
// See: issue 15
#[test]
fn archive_sends_a_waiting_job_to_dead_issue_15() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "orders", "x", "--id", "held"]));
    reserve_token(&s, "orders");
    ok(s.run(&["push", "orders", "x", "--id", "o1", "--delay", "1h"]));
    let out = ok(s.run(&["archive", "orders", "o1", "--reason", "customer left"]));
    assert_eq!(out.trim(), "archived o1 in orders: dead");
    let out = ok(s.run(&["dead", "list", "orders"]));
    assert!(
        out.starts_with("o1  died ") && out.contains("customer left"),
        "{out}"
    );
    let (code, err) = fails(s.run(&["archive", "orders", "held"]));
    assert_eq!(code, Some(4), "{err}");
    let (code, err) = fails(s.run(&["archive", "orders", "o1"]));
    assert_eq!(code, Some(4), "{err}");
    let (code, err) = fails(s.run(&["archive", "orders", "missing"]));
    assert_eq!(code, Some(3), "{err}");
    ok(s.run(&["kick", "orders", "o1"]));
    let out = ok(s.run(&["list", "orders", "--state", "ready"]));
    assert!(out.starts_with("o1  due "), "{out}");
}

/// `delayq reserve` exits 6 when no job came, in every output mode, so that docs/cli.md's
/// `token=$(delayq reserve … -q)` stops a `set -e` script instead of carrying on with an
/// empty token; with a job it exits 0. `--help` says so.
// See: issue 36
#[test]
fn reserve_exits_6_when_no_job_came_issue_36() {
    let s = Server::start(&[]);
    assert_eq!(no_job(s.run(&["reserve", "empty"])), "no job due\n");
    let quiet = s.run(&["reserve", "empty", "-q"]);
    assert_eq!(stdout(&quiet), "", "-q prints no token");
    let err = String::from_utf8_lossy(&quiet.stderr).into_owned();
    assert!(err.contains("no job due in empty"), "{err}");
    no_job(quiet);
    let json = s.run(&["reserve", "empty", "--json"]);
    assert!(json.stderr.is_empty(), "{json:?}");
    assert_eq!(json_of(&no_job(json))["jobs"], serde_json::json!([]));

    let script = "token=$(delayq reserve empty --wait 200ms -q)\necho \"reached with [$token]\"\n";
    let bin_dir = Path::new(BIN).parent().unwrap();
    let sh = |script: &str| {
        Command::new("sh")
            .args(["-ec", script])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin_dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("DELAYQ_SERVER", &s.url)
            .env_remove("DELAYQ_TOKEN")
            .output()
            .unwrap()
    };
    let stopped = sh(script);
    assert_eq!(stopped.status.code(), Some(6), "{stopped:?}");
    assert!(!stdout(&stopped).contains("reached"), "{stopped:?}");
    ok(s.run(&["push", "empty", "x", "--id", "e1"]));
    let went_on = ok(sh(script));
    assert!(
        went_on.starts_with("reached with [") && !went_on.contains("[]"),
        "{went_on}"
    );

    let help = ok(Command::new(BIN).arg("--help").output().unwrap());
    assert!(help.contains("6 `reserve` got no job"), "{help}");
}
