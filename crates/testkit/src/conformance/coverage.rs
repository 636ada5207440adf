//! The check that every conformance case runs on every engine: each case (a top-level
//! `pub async fn` over a [`Harness`](crate::Harness) in this folder) is named in the
//! `conformance_suite!` list of `mod.rs`, every name there is a case, every module of the
//! folder is declared and re-exported, and each engine's test file runs the suite both on
//! plain topics and on partitioned ones. It reads the sources, so a case forgotten in the
//! list (which compiles, and silently never runs) fails `cargo test -p delayq-testkit`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the cases live, from the workspace root.
const FOLDER: &str = "crates/testkit/src/conformance";

/// The engines' test files that must run the suite, from the workspace root.
const ENGINE_FILES: &[&str] = &[
    "crates/sqlite/tests/conformance.rs",
    "crates/postgres/tests/conformance.rs",
    "crates/redis/tests/conformance.rs",
    "crates/redis/tests/cluster_conformance.rs",
];

/// The macro's name as the sources spell an invocation of it.
const INVOCATION: &str = "conformance_suite!(";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// `text` without its `//` comments (doc comments too): what the compiler sees, near enough
/// (no string in these files holds `//`).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `.rs` files of the folder but this one, by module name (the file stem).
fn modules() -> BTreeMap<String, String> {
    let dir = workspace().join(FOLDER);
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && stem != "coverage" {
            out.insert(stem.to_string(), read(&path));
        }
    }
    assert!(
        out.contains_key("mod") && out.len() > 5,
        "found only {:?} in {}",
        out.keys().collect::<Vec<_>>(),
        dir.display()
    );
    out
}

/// The cases of one file: each top-level `pub async fn` whose signature (up to its body)
/// names `Harness`, with the file's module name.
fn cases_of(module: &str, text: &str, out: &mut BTreeMap<String, Vec<String>>) {
    let text = without_comments(text);
    let mut rest = text.as_str();
    while let Some(at) = rest.find("\npub async fn ") {
        rest = &rest[at + "\npub async fn ".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(end);
        let signature = &after[..after.find('{').unwrap_or(after.len())];
        if signature.contains("Harness") {
            out.entry(name.to_string())
                .or_default()
                .push(format!("{FOLDER}/{module}.rs"));
        }
    }
}

/// The names in the `conformance_suite!(@cases $setup; ...)` list of `mod.rs`.
fn listed(mod_rs: &str) -> Vec<String> {
    let text = without_comments(mod_rs);
    let start = "conformance_suite!(@cases $setup;";
    let at = text
        .find(start)
        .unwrap_or_else(|| panic!("no `{start}` in {FOLDER}/mod.rs: the list moved?"));
    let list = &text[at + start.len()..];
    let list = &list[..list.find(')').expect("the list ends")];
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_conformance_case_is_in_the_suite_list() {
    let modules = modules();
    let mut cases = BTreeMap::new();
    for (module, text) in &modules {
        cases_of(module, text, &mut cases);
    }
    let names = listed(&modules["mod"]);
    assert!(
        cases.len() > 40 && names.len() > 40,
        "found {} cases and {} listed names: the parsing is broken",
        cases.len(),
        names.len()
    );
    let mut problems = Vec::new();
    for (case, files) in &cases {
        if !names.contains(case) {
            problems.push(format!(
                "conformance case `{case}` ({}) is run by no engine: add `{case}` to the \
                 conformance_suite! list in {FOLDER}/mod.rs",
                files.join(", ")
            ));
        }
        if files.len() > 1 {
            problems.push(format!(
                "conformance case `{case}` is defined in several files ({}): rename or \
                 remove all but one",
                files.join(", ")
            ));
        }
    }
    let mut seen = Vec::new();
    for name in &names {
        if !cases.contains_key(name) {
            problems.push(format!(
                "`{name}` is in the conformance_suite! list in {FOLDER}/mod.rs but is no \
                 conformance case (no `pub async fn {name}<H: Harness>` in {FOLDER}): remove \
                 it from the list or correct its name"
            ));
        }
        if seen.contains(&name) {
            problems.push(format!(
                "`{name}` is twice in the conformance_suite! list in {FOLDER}/mod.rs: remove \
                 one"
            ));
        }
        seen.push(name);
    }
    let mod_rs = without_comments(&modules["mod"]);
    for module in modules.keys().filter(|m| *m != "mod") {
        for line in [format!("mod {module};"), format!("pub use {module}::*;")] {
            if !mod_rs.lines().any(|l| l.trim() == line) {
                problems.push(format!(
                    "{FOLDER}/{module}.rs is not compiled into the suite: add `{line}` to \
                     {FOLDER}/mod.rs"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

/// The arguments of each `conformance_suite!(...)` invocation in `text`.
fn invocations(text: &str) -> Vec<String> {
    let text = without_comments(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(INVOCATION) {
        rest = &rest[at + INVOCATION.len()..];
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        out.push(rest[..end].trim().to_string());
    }
    out
}

#[test]
fn every_engine_runs_the_suite_plainly_and_partitioned() {
    let mut problems = Vec::new();
    for file in ENGINE_FILES {
        let path = workspace().join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            problems.push(format!(
                "{file} is missing: it must run the conformance suite on its engine (or take \
                 it off ENGINE_FILES in {FOLDER}/coverage.rs if the engine is gone)"
            ));
            continue;
        };
        let (partitioned, plain): (Vec<String>, Vec<String>) = invocations(&text)
            .into_iter()
            .partition(|args| args.contains("Partitioned"));
        if plain.is_empty() {
            problems.push(format!(
                "{file} does not run the conformance suite on plain topics: add \
                 `delayq_testkit::conformance_suite!(setup());` to it"
            ));
        }
        if partitioned.is_empty() {
            problems.push(format!(
                "{file} does not run the conformance suite on partitioned topics: add \
                 `mod partitioned {{ use delayq_testkit::Partitioned; use super::setup; \
                 delayq_testkit::conformance_suite!(async {{ Partitioned::new(setup().await, 8) \
                 }}); }}` to it"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}
