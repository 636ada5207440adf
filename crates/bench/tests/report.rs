//! The `delayq-bench` binary's `report` command (issue 16's side-by-side report, rewritten
//! from a run's results without measuring): what it cannot read is refused with the file's
//! name, and nothing is written. (This test also makes `cargo test` build the binary that
//! the test command's `bench/run.sh --smoke` then runs.)

use std::process::Command;

/// A Markdown file with a side-by-side section: what a refused report must leave as it was.
const MARKDOWN: &str = "# Benchmarks\n\nOur own notes, kept by every report.\n";

#[test]
fn report_refuses_what_is_not_a_results_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let markdown = dir.path().join("BENCHMARKS.md");
    std::fs::write(&markdown, MARKDOWN).unwrap();
    let plots = dir.path().join("plots");
    let report = |results: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_delayq-bench"))
            .arg("report")
            .arg("--results")
            .arg(results)
            .arg("--markdown")
            .arg(&markdown)
            .arg("--plots")
            .arg(&plots)
            .output()
            .unwrap()
    };

    let not_results = dir.path().join("results.json");
    std::fs::write(&not_results, br#"{"systems": "none"}"#).unwrap();
    let missing = dir.path().join("missing.json");
    for (results, says) in [
        (&not_results, "is not a results file of this version"),
        (&missing, "reading"),
    ] {
        let out = report(results);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{results:?} was accepted: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(&results.display().to_string()),
            "{results:?}: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&markdown).unwrap(), MARKDOWN);
        assert!(!plots.exists(), "plots were written for {results:?}");
    }
}
