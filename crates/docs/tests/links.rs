//! The repository's Markdown (README.md, docs/, the root's other pages, the crates' and the
//! clients' READMEs) as a reader follows it: every relative link opens a file, every anchor a
//! heading, and nothing points outside the repository. One test per rule; each failure names
//! the file, the line and the link.

use std::path::{Path, PathBuf};

use delayq_docs::{Problem, Repo};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository's root")
}

fn repo() -> Repo {
    let repo = Repo::load(&repo_root()).expect("the repository's Markdown reads");
    let pages: Vec<&Path> = repo.pages().collect();
    for page in ["README.md", "docs/README.md", "RELIABILITY.md"] {
        assert!(
            pages.contains(&Path::new(page)),
            "{page} is among the pages read: {pages:?}"
        );
    }
    repo
}

fn assert_none(problems: Vec<Problem>, rule: &str) {
    let list: Vec<String> = problems.iter().map(Problem::to_string).collect();
    assert!(
        list.is_empty(),
        "{rule}; these do not:\n{}",
        list.join("\n")
    );
}

#[test]
fn every_relative_link_opens_a_file_of_the_repository() {
    assert_none(
        repo().missing_files(),
        "every relative link must name a file or directory that exists",
    );
}

#[test]
fn every_anchor_names_a_heading_of_the_page_it_leads_to() {
    assert_none(
        repo().missing_anchors(),
        "every #anchor must be the slug of a heading of its page",
    );
}

#[test]
fn no_document_refers_to_a_file_outside_the_repository() {
    assert_none(
        repo().outside_references(),
        "no page may link to, or name, a file outside the repository",
    );
}

#[test]
fn the_docs_index_links_to_every_page_of_docs() {
    let root = repo_root();
    let index = std::fs::read_to_string(root.join("docs/README.md")).unwrap();
    let linked: Vec<String> = delayq_docs::links(&index)
        .into_iter()
        .map(|l| l.dest.split('#').next().unwrap_or_default().to_string())
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "README.md" && !linked.contains(&name) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/README.md must link to every page of docs/; it does not link to {missing:?}"
    );
}

/// The checks themselves, on a small repository of their own: each finds what it is for, with
/// the file and the line.
#[test]
fn each_check_names_the_file_line_and_link_it_finds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Front door\n\n## Quick start\n\n\
         [ok](docs/a.md#usage) [gone](docs/missing.md)\n\
         [here](#quick-start) [nowhere](#quick-stop) [there](docs/a.md#nope)\n\
         [up](../shared/STYLE.md) and PRODUCT.md, but `docs/a.md` and a.md exist\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n\n## Usage\n\n[back](../README.md#front-door)\n",
    )
    .unwrap();
    std::fs::write(root.join("target/skipped.md"), "[x](nowhere.md)\n").unwrap();
    let repo = Repo::load(root).unwrap();

    let show = |p: Vec<Problem>| -> Vec<String> { p.iter().map(Problem::to_string).collect() };
    assert_eq!(
        show(repo.missing_files()),
        ["README.md:5: docs/missing.md: no file docs/missing.md in the repository"]
    );
    assert_eq!(
        show(repo.missing_anchors()),
        [
            "README.md:6: #quick-stop: no heading of README.md has the anchor #quick-stop",
            "README.md:6: docs/a.md#nope: no heading of docs/a.md has the anchor #nope",
        ]
    );
    assert_eq!(
        show(repo.outside_references()),
        [
            "README.md:7: ../shared/STYLE.md: links outside the repository",
            "README.md:7: PRODUCT.md: names a file that is not in the repository",
        ]
    );
}
