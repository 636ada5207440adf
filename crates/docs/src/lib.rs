//! The repository's Markdown, checked as a reader follows it (issue 38).
//!
//! Layout: [`Repo::load`] reads every Markdown file under a root (skipping `target/`,
//! `node_modules/` and hidden directories); [`links`] and [`mentions`] pull the links and the
//! `*.md` file names out of one page with their line numbers; [`anchors`] computes a page's
//! heading slugs as GitHub does ([`slug`]); and the three checks of [`Repo`] each return the
//! [`Problem`]s of one rule:
//!
//! - [`Repo::missing_files`]: a relative link names a file that does not exist;
//! - [`Repo::missing_anchors`]: a `#fragment` names no heading of its page;
//! - [`Repo::outside_references`]: a link, or a mention of a `.md` file, names something
//!   outside the repository.
//!
//! The tests in `tests/links.rs` run them on this repository, so `cargo test --workspace`
//! (the test command) fails on a broken link.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Directories never searched for Markdown: build output, installed packages, virtual
/// environments and hidden directories (`.git`).
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "dist", "build", "__pycache__"];

/// GitHub's anchor for a heading: lowercase, every character that is not a letter, a digit,
/// a space, `-` or `_` dropped, each space a `-`.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings, in order: a heading whose slug came before gets `-1`,
/// then `-2`, as on GitHub.
pub fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(Tag::Heading { level, .. }) if level <= HeadingLevel::H6 => {
                heading = Some(String::new());
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                out.push(if *n == 0 { base } else { format!("{base}-{n}") });
                *n += 1;
            }
            _ => {}
        }
    }
    out
}

/// A link's target (or a file name mentioned in the text) and the line it is on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The line of the page it is on, counted from 1.
    pub line: usize,
    /// The destination as written: `docs/engines.md#redis`, `#quick-start`, `PRODUCT.md`.
    pub dest: String,
}

/// Every link and image of a page, with its line.
pub fn links(markdown: &str) -> Vec<Link> {
    let lines = LineIndex::new(markdown);
    Parser::new_ext(markdown, options())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => Some(Link {
                line: lines.line(range.start),
                dest: dest_url.into_string(),
            }),
            _ => None,
        })
        .collect()
}

/// Every `*.md` file name written in a page's text, inline code or code blocks (not in its
/// links, which [`links`] reads), with its line. Absolute paths (`/usr/share/doc/…/README.md`,
/// a path on an installed system) and URLs are not mentions of the repository's files.
pub fn mentions(markdown: &str) -> Vec<Link> {
    let lines = LineIndex::new(markdown);
    let mut out = Vec::new();
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        let text = match event {
            Event::Text(t) | Event::Code(t) => t,
            _ => continue,
        };
        // A code block is one text: a word's line is the block's first line plus the lines
        // before the word in it.
        let start = lines.line(range.start);
        let mut offset = 0;
        for word in text.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c))) {
            let at = offset;
            offset += word.len() + 1;
            let name = word.trim_end_matches('.');
            let Some(stem) = name.strip_suffix(".md") else {
                continue;
            };
            let stem_file = stem.rsplit('/').next().unwrap_or(stem);
            if stem_file.is_empty() || name.starts_with('/') {
                continue;
            }
            let line = start + text[..at.min(text.len())].matches('\n').count();
            out.push(Link {
                line,
                dest: name.to_string(),
            });
        }
    }
    out
}

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_FOOTNOTES
}

/// Byte offset to line number.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// One broken link: where it is and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The page, relative to the repository's root.
    pub file: PathBuf,
    /// The line of the page, from 1.
    pub line: usize,
    /// The link or file name as written.
    pub link: String,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.link,
            self.what
        )
    }
}

/// Where a relative destination leads from a page.
enum Target {
    /// A path inside the repository, relative to its root, and the fragment if any.
    Inside(PathBuf, Option<String>),
    /// The page itself, at a fragment (`#quick-start`).
    SamePage(String),
    /// Above the repository's root, or an absolute file system path.
    Outside,
    /// A URL with a scheme (`https:`, `mailto:`): not checked.
    External,
}

/// The Markdown files of a repository, read once.
pub struct Repo {
    root: PathBuf,
    /// Each page's text by its path relative to the root.
    pages: BTreeMap<PathBuf, String>,
}

impl Repo {
    /// Reads every Markdown file under `root`, skipping `target/`, `node_modules/`, other
    /// build output and hidden directories.
    pub fn load(root: &Path) -> std::io::Result<Repo> {
        let mut pages = BTreeMap::new();
        let mut dirs = vec![PathBuf::new()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(root.join(&dir))? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let rel = dir.join(&name);
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    let venv = entry.path().join("pyvenv.cfg").exists();
                    if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) && !venv {
                        dirs.push(rel);
                    }
                } else if name.ends_with(".md") {
                    pages.insert(rel, std::fs::read_to_string(entry.path())?);
                }
            }
        }
        Ok(Repo {
            root: root.to_path_buf(),
            pages,
        })
    }

    /// The pages read, relative to the root.
    pub fn pages(&self) -> impl Iterator<Item = &Path> {
        self.pages.keys().map(PathBuf::as_path)
    }

    /// Relative links (and images) whose file or directory does not exist.
    pub fn missing_files(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        for (page, text) in &self.pages {
            for link in links(text) {
                if let Target::Inside(path, _) = self.target(page, &link.dest)
                    && !self.root.join(&path).exists()
                {
                    out.push(problem(
                        page,
                        &link,
                        format!("no file {} in the repository", path.display()),
                    ));
                }
            }
        }
        out
    }

    /// Links whose `#fragment` names no heading of the page they lead to (the same page, or
    /// another Markdown file of the repository).
    pub fn missing_anchors(&self) -> Vec<Problem> {
        let mut cache: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
        let mut out = Vec::new();
        for (page, text) in &self.pages {
            for link in links(text) {
                let (path, fragment) = match self.target(page, &link.dest) {
                    Target::SamePage(f) => (page.clone(), f),
                    Target::Inside(path, Some(f)) if path.extension() == Some("md".as_ref()) => {
                        (path, f)
                    }
                    _ => continue,
                };
                let known = cache.entry(path.clone()).or_insert_with(|| {
                    let text = match self.pages.get(&path) {
                        Some(t) => t.clone(),
                        None => std::fs::read_to_string(self.root.join(&path)).unwrap_or_default(),
                    };
                    anchors(&text).into_iter().collect()
                });
                if !known.contains(&fragment) {
                    out.push(problem(
                        page,
                        &link,
                        format!(
                            "no heading of {} has the anchor #{fragment}",
                            path.display()
                        ),
                    ));
                }
            }
        }
        out
    }

    /// Links that lead outside the repository (`../shared/…`, an absolute path), and `.md`
    /// file names in the text that name no file of the repository (`PRODUCT.md`): a reader
    /// of the repository cannot open them.
    pub fn outside_references(&self) -> Vec<Problem> {
        let names: BTreeSet<String> = self
            .pages
            .keys()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        let mut out = Vec::new();
        for (page, text) in &self.pages {
            for link in links(text) {
                if let Target::Outside = self.target(page, &link.dest) {
                    out.push(problem(
                        page,
                        &link,
                        "links outside the repository".to_string(),
                    ));
                }
            }
            for mention in mentions(text) {
                let found = match self.target(page, &mention.dest) {
                    Target::Inside(path, _) => {
                        self.root.join(&path).exists()
                            || self.root.join(&mention.dest).exists()
                            || (!mention.dest.contains('/') && names.contains(&mention.dest))
                    }
                    _ => false,
                };
                if !found {
                    out.push(problem(
                        page,
                        &mention,
                        "names a file that is not in the repository".to_string(),
                    ));
                }
            }
        }
        out
    }

    fn target(&self, page: &Path, dest: &str) -> Target {
        let scheme = dest
            .split_once(':')
            .is_some_and(|(s, _)| !s.is_empty() && !s.contains('/') && !s.contains('#'));
        if scheme {
            return if dest.starts_with("file:") {
                Target::Outside
            } else {
                Target::External
            };
        }
        let (path, fragment) = match dest.split_once('#') {
            Some((p, f)) => (p, Some(f.to_string())),
            None => (dest, None),
        };
        let path = path.split('?').next().unwrap_or(path).replace("%20", " ");
        if path.is_empty() {
            return match fragment {
                Some(f) => Target::SamePage(f),
                None => Target::External,
            };
        }
        // On GitHub a path from `/` starts at the repository's root.
        let joined = match path.strip_prefix('/') {
            Some(from_root) => PathBuf::from(from_root),
            None => page.parent().unwrap_or(Path::new("")).join(&path),
        };
        let mut normal = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::Normal(part) => normal.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !normal.pop() {
                        return Target::Outside;
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Target::Outside,
            }
        }
        Target::Inside(normal, fragment)
    }
}

fn problem(page: &Path, link: &Link, what: String) -> Problem {
    Problem {
        file: page.to_path_buf(),
        line: link.line,
        link: link.dest.clone(),
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_the_heading_lowercased_with_a_dash_for_each_space() {
        assert_eq!(slug("Quick start"), "quick-start");
        assert_eq!(slug("Run it on Redis Cluster"), "run-it-on-redis-cluster");
    }

    #[test]
    fn a_slug_drops_punctuation_but_keeps_dashes_and_underscores() {
        assert_eq!(
            slug("Use it from any language: the beanstalkd protocol"),
            "use-it-from-any-language-the-beanstalkd-protocol"
        );
        assert_eq!(
            slug("Clients: Python and TypeScript"),
            "clients-python-and-typescript"
        );
        assert_eq!(
            slug("max_attempts and back-off"),
            "max_attempts-and-back-off"
        );
        assert_eq!(slug("Bury / archive / kick"), "bury--archive--kick");
        assert_eq!(slug("What's `ttr`?"), "whats-ttr");
    }

    #[test]
    fn a_slug_keeps_letters_of_every_script() {
        assert_eq!(slug("Über Zeit"), "über-zeit");
    }

    #[test]
    fn a_heading_with_inline_code_slugs_its_text() {
        assert_eq!(
            anchors("## The `ttr` (lease length)\n"),
            ["the-ttr-lease-length"]
        );
    }

    #[test]
    fn a_repeated_heading_gets_a_numbered_anchor() {
        let page = "# Faults\n\n## Faults\n\ntext\n\n### Faults\n\n## Other\n";
        assert_eq!(anchors(page), ["faults", "faults-1", "faults-2", "other"]);
    }

    #[test]
    fn links_and_mentions_carry_their_line() {
        let page =
            "# T\n\nSee [the API](docs/http-api.md#errors).\n\n```sh\ncat\nPRODUCT.md\n```\n";
        assert_eq!(
            links(page),
            [Link {
                line: 3,
                dest: "docs/http-api.md#errors".into()
            }]
        );
        assert_eq!(
            mentions(page),
            [Link {
                line: 7,
                dest: "PRODUCT.md".into()
            }]
        );
    }
}
