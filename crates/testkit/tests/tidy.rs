//! Repository hygiene checked by `cargo test`: every Rust source file opens with a `//!`
//! line saying what it owns, and no test is skipped with the ignore attribute or hidden behind
//! the should_panic attribute (assert the wrong behaviour with a FIXME instead).

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn workspace_files() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(
        files.len() > 10,
        "found only {} Rust files under {}",
        files.len(),
        crates.display()
    );
    files
}

#[test]
fn every_source_file_says_what_it_owns() {
    let missing: Vec<String> = workspace_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading //! line: {missing:#?}"
    );
}

#[test]
fn no_skipped_or_should_panic_tests() {
    let ignore = concat!("#[", "ignore");
    let should_panic = concat!("#[", "should_panic");
    let offenders: Vec<String> = workspace_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            text.contains(ignore) || text.contains(should_panic)
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "skipped or should_panic tests in: {offenders:#?}"
    );
}
