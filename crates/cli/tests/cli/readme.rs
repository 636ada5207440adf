//! The README's runnable command blocks, run as written against a fresh server: each block
//! marked `<!-- NAME: start -->` … `<!-- NAME: end -->` is pasted into bash with the quick
//! start's address, `localhost:7070`, replaced by the test server's (issue 38).

use std::process::Command;
use std::time::Duration;

use crate::{Server, exits_within, stdout};

const README: &str = include_str!("../../../../README.md");

/// The `sh` block between the README's markers `<!-- {name}: start -->` and `end`.
fn marked_block(name: &str) -> &'static str {
    README
        .split_once(&format!("<!-- {name}: start -->"))
        .and_then(|(_, rest)| rest.split_once(&format!("<!-- {name}: end -->")))
        .and_then(|(block, _)| block.split_once("```sh\n"))
        .and_then(|(_, code)| code.split_once("```"))
        .map(|(code, _)| code)
        .unwrap_or_else(|| {
            panic!("README.md has a sh block between <!-- {name}: start --> and end")
        })
}

/// The README's quick start with curl, pasted into bash against a fresh server, runs top to
/// bottom: the push answers with the job's id, the long-poll reserve hands the job out once
/// it is due, the ack with the token it came with answers 204, and the metrics count the
/// delivery's lateness.
#[test]
fn the_readme_quick_start_with_curl_runs_as_written() {
    let block = marked_block("curl-example");
    assert!(
        block.contains("localhost:7070") && block.contains("/ack"),
        "{block}"
    );
    let s = Server::start(&[]);
    let address = s.url.trim_start_matches("http://");
    let script = s._dir.path().join("quick-start.sh");
    std::fs::write(&script, block.replace("localhost:7070", address)).unwrap();

    let out = exits_within(
        Command::new("bash")
            .arg("-euo")
            .arg("pipefail")
            .arg("-x")
            .arg(&script),
        Duration::from_secs(60),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "the README's quick start stopped ({:?}):\n{text}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains(r#""id":"order-42""#) && lines[0].contains(r#""created":true"#),
        "the push answers with the job's id: {text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(r#"{"jobs":[{"job":{"#)
            && l.contains(r#""id":"order-42""#)
            && l.contains(r#""token":"#)),
        "the reserve hands out order-42 with a token: {text}"
    );
    assert!(
        lines.contains(&"204"),
        "the ack answers 204 No Content: {text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("delayq_lateness_seconds_count{") && l.ends_with(" 1")),
        "the metrics count one delivery: {text}"
    );
    let get = s.run(&["get", "orders", "order-42"]);
    assert_eq!(get.status.code(), Some(3), "order-42 was acked: {get:?}");
}
