//! The repository's docs stand alone: a reader of the repository can follow every link.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// `a/b/../c` → `a/c`, without touching the file system; `None` when it climbs above the
/// start.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = Vec::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop()?;
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Some(out.iter().collect())
}

/// The relative links of a markdown text: `[x](target)` targets that are no URL or anchor.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split('#').next().unwrap_or("").trim();
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_owned());
        }
    }
    out
}

#[test]
fn every_link_in_the_docs_stays_in_the_repository_and_leads_to_a_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = Command::new("git")
        .args(["ls-files", "*.md"])
        .current_dir(root)
        .output()
        .unwrap();
    let files: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(
        files.iter().any(|f| f == "docs/architecture.md"),
        "{files:?}"
    );
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        if text.contains("../shared/") {
            wrong.push(format!("{f}: names ../shared/, outside the repository"));
        }
        let dir = Path::new(f).parent().unwrap_or(Path::new(""));
        for link in relative_links(&text) {
            match normalize(&dir.join(&link)) {
                None => wrong.push(format!("{f}: `{link}` leads outside the repository")),
                Some(p) if !root.join(&p).exists() => {
                    wrong.push(format!("{f}: `{link}` leads to nothing"))
                }
                Some(_) => {}
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
}

#[test]
fn a_link_out_of_the_repository_is_seen_as_one() {
    assert_eq!(normalize(Path::new("docs/../../shared/x.md")), None);
    assert_eq!(
        normalize(Path::new("docs/./a/../b.md")),
        Some(PathBuf::from("docs/b.md"))
    );
    assert_eq!(
        relative_links("see [x](../a.md#top), [y](https://e.org) and [z](#here)"),
        ["../a.md"]
    );
}
