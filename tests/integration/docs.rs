//! The repository's docs stand alone and say what is: a reader can follow every link, and
//! every path and (on the architecture page) every type and function they name exists.

use std::collections::BTreeSet;
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

/// The repository's files (tracked, and new ones not ignored) and the folders holding them,
/// as paths relative to its top.
fn repo_entries(root: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let listed = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files failed");
    let files: BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|f| root.join(f).exists())
        .map(str::to_owned)
        .collect();
    let mut dirs = BTreeSet::new();
    for f in &files {
        let mut p = f.as_str();
        while let Some((parent, _)) = p.rsplit_once('/') {
            dirs.insert(parent.to_owned());
            p = parent;
        }
    }
    (files, dirs)
}

/// The crates' source folders: a file named by itself (`registry.rs`) or by a path inside
/// a crate (`store/records.rs`) is looked for in each.
const CRATE_ROOTS: [&str; 4] = ["src", "controllers/src", "proxy/src", "testkit/src"];

/// The blocks of a markdown text a name is read in: paragraphs, list items, table rows
/// and headings, code blocks left out. A file named alone (`clone.rs`) is looked for in the
/// folders named before it in its block.
fn blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            in_code = !in_code;
            out.push(cur.join("\n"));
            cur.clear();
            continue;
        }
        if in_code {
            continue;
        }
        if t.is_empty()
            || t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with('|')
            || t.starts_with('#')
        {
            out.push(cur.join("\n"));
            cur.clear();
        }
        if !t.is_empty() {
            cur.push(line);
        }
    }
    out.push(cur.join("\n"));
    out.retain(|b| !b.is_empty());
    out
}

/// The `code` spans of a block, in order.
fn spans(block: &str) -> Vec<&str> {
    block
        .lines()
        .flat_map(|line| line.split('`').skip(1).step_by(2))
        .filter(|s| !s.is_empty())
        .collect()
}

/// `src/servers/{postgres,mariadb}.rs` → both paths.
fn expand_braces(p: &str) -> Vec<String> {
    match (p.find('{'), p.find('}')) {
        (Some(open), Some(close)) if open < close => p[open + 1..close]
            .split(',')
            .flat_map(|alt| expand_braces(&format!("{}{alt}{}", &p[..open], &p[close + 1..])))
            .collect(),
        _ => vec![p.to_owned()],
    }
}

/// Is the span a path in the repository the text names? A `.rs` file, or a path whose
/// first part is a top-level folder of the repository (`src/`, `tests/…`, `benchmarks/…`).
/// A project's paths (`manage.py`, `seeds/`) and runtime names (`feat/login`) are not.
fn names_a_repo_path(span: &str, tops: &BTreeSet<String>) -> bool {
    let plain = span
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.{},/-".contains(c));
    if !plain || span.starts_with(['/', '.']) || span.contains("..") {
        return false;
    }
    span.ends_with(".rs")
        || span
            .split_once('/')
            .is_some_and(|(top, _)| tops.contains(top))
}

/// The paths `text` names in backticks that are no file or folder of the repository, each
/// said with `doc`: a path is read from the repository's top, from a crate's source folder,
/// or from a folder named before it in the same block.
fn missing_paths(
    doc: &str,
    text: &str,
    files: &BTreeSet<String>,
    dirs: &BTreeSet<String>,
) -> Vec<String> {
    let tops: BTreeSet<String> = dirs.iter().filter(|d| !d.contains('/')).cloned().collect();
    let is = |p: &str| {
        let p = p.trim_end_matches('/');
        files.contains(p) || dirs.contains(p)
    };
    let mut out = Vec::new();
    for block in blocks(text) {
        let mut context: Vec<String> = Vec::new();
        for span in spans(&block) {
            if !names_a_repo_path(span, &tops) {
                continue;
            }
            for p in expand_braces(span) {
                let bases: Vec<String> = std::iter::once(String::new())
                    .chain(context.iter().map(|c| format!("{c}/")))
                    .chain(CRATE_ROOTS.iter().map(|c| format!("{c}/")))
                    .collect();
                let found: Vec<String> = bases
                    .iter()
                    .map(|b| format!("{b}{p}").trim_end_matches('/').to_owned())
                    .filter(|full| is(full))
                    .collect();
                if found.is_empty() {
                    out.push(format!(
                        "{doc}: `{span}` is no file or folder of the repository"
                    ));
                }
                for full in found {
                    if dirs.contains(&full) {
                        context.push(full);
                    } else if let Some((parent, _)) = full.rsplit_once('/') {
                        context.push(parent.to_owned());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (files, dirs) = repo_entries(root);
    let docs: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with(".md") && !f.starts_with("tests/"))
        .collect();
    assert!(docs.len() > 10, "{docs:?}");
    let mut wrong = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        wrong.extend(missing_paths(doc, &text, &files, &dirs));
    }
    assert_eq!(wrong, Vec::<String>::new());
}

#[test]
fn a_path_the_code_no_longer_has_is_seen() {
    let files: BTreeSet<String> = [
        "controllers/src/supervisor.rs",
        "controllers/src/process/mod.rs",
        "controllers/src/process/spawn.rs",
        "src/servers/postgres.rs",
        "src/servers/mariadb.rs",
    ]
    .map(str::to_owned)
    .into();
    let dirs: BTreeSet<String> = [
        "controllers",
        "controllers/src",
        "controllers/src/process",
        "src",
        "src/servers",
    ]
    .map(str::to_owned)
    .into();
    let text = "- **process** (`controllers/src/process/`): `spawn.rs` the spawn spec, `effects.rs`\n  \
                the `Supervisor` trait.\n\n`supervisor.rs` holds it; `src/servers/{postgres,mysql}.rs` \
                run servers; `feat/login` and `seeds/` are a user's.\n";
    assert_eq!(
        missing_paths("a.md", text, &files, &dirs),
        [
            "a.md: `effects.rs` is no file or folder of the repository",
            "a.md: `src/servers/{postgres,mysql}.rs` is no file or folder of the repository",
        ]
    );
}

/// What the workspace's Rust sources declare, by name.
#[derive(Default)]
struct Declared {
    /// Types, traits and aliases (`struct|enum|trait|type|union NAME`), and names a line
    /// opens with in a declaration's body (enum variants, a macro's declared types).
    types: BTreeSet<String>,
    /// Functions, modules (and files), constants and statics.
    items: BTreeSet<String>,
    /// Words written as a string of their own (`"WorktreeReady"`): condition types and
    /// reasons, which the docs name as the code spells them.
    strings: BTreeSet<String>,
}

impl Declared {
    fn read(sources: &[(String, String)]) -> Declared {
        let mut d = Declared::default();
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        for (path, text) in sources {
            let stem = Path::new(path).file_stem().unwrap_or_default();
            d.items.insert(stem.to_string_lossy().into_owned());
            if let Some(dir) = Path::new(path).parent().and_then(|p| p.file_name()) {
                d.items.insert(dir.to_string_lossy().into_owned());
            }
            let words: Vec<&str> = text.split_whitespace().collect();
            for pair in words.windows(2) {
                let name = ident(pair[1]);
                if name.is_empty() {
                    continue;
                }
                match pair[0] {
                    "struct" | "enum" | "trait" | "type" | "union" => {
                        d.types.insert(name);
                    }
                    "fn" | "mod" | "const" | "static" => {
                        d.items.insert(name);
                    }
                    _ => {}
                }
            }
            for line in text.lines() {
                let t = line.trim_start();
                let name = ident(t);
                let rest = t[name.len()..].trim_start();
                if name.starts_with(|c: char| c.is_ascii_uppercase())
                    && (rest.is_empty() || rest.starts_with(['(', '{', ',']))
                {
                    d.types.insert(name);
                }
            }
            for part in text.split('"').skip(1).step_by(2) {
                if !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric()) {
                    d.strings.insert(part.to_owned());
                }
            }
        }
        d
    }
}

/// Names of other crates (and of the protocols binky speaks) the architecture page names,
/// each with the crate it comes from, which must be a dependency still (`None`: no crate's).
const EXTERNAL: [(&str, Option<&str>); 5] = [
    ("ArcSwap", Some("arc-swap")),
    ("JoinSet", Some("tokio")),
    ("ResolvesServerCert", Some("rustls")),
    ("ClientConfig", Some("rustls")),
    // The HTTP header.
    ("Host", None),
];

/// `WorldView`, `ProcState`: a type's way of writing a name.
fn camel_case(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
        && s.chars().any(|c| c.is_ascii_lowercase())
}

/// The names `text` gives in backticks that the sources do not declare: each CamelCase
/// name (`Supervisor`, `hold::Hold`, `SliceEffects::pause`) is a type, a variant or a
/// condition the code spells so, and a path's last part (`phase::phase`,
/// `Supervisor::placement`, `runtime/backoff.rs` aside) is a function, module or constant.
fn undeclared(text: &str, declared: &Declared, external: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for block in blocks(text) {
        for span in spans(&block) {
            // `daemon::run(config, shutdown)`, `Tx<Owner>`: the path before the arguments.
            let path = span.split(['(', '<']).next().unwrap_or("");
            let segs: Vec<&str> = path.split("::").collect();
            let rusty = segs.iter().all(|s| {
                s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            if !rusty || (segs.len() == 1 && !camel_case(segs[0])) {
                continue;
            }
            let mut after_external = false;
            for (i, seg) in segs.iter().enumerate() {
                if external.contains(seg) {
                    after_external = true;
                    continue;
                }
                if after_external {
                    continue;
                }
                let known = if camel_case(seg) {
                    declared.types.contains(*seg) || declared.strings.contains(*seg)
                } else if i + 1 == segs.len() {
                    declared.items.contains(*seg)
                } else {
                    true
                };
                if !known {
                    out.push(format!("`{span}`: no `{seg}` in the sources"));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every `.rs` file of the repository with its text.
fn rust_sources(root: &Path, files: &BTreeSet<String>) -> Vec<(String, String)> {
    files
        .iter()
        .filter(|f| f.ends_with(".rs"))
        .filter_map(|f| Some((f.clone(), std::fs::read_to_string(root.join(f)).ok()?)))
        .collect()
}

#[test]
fn every_type_and_function_the_architecture_page_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (files, _) = repo_entries(root);
    let declared = Declared::read(&rust_sources(root, &files));
    assert!(declared.types.contains("SliceEffects") && declared.items.contains("phase"));
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    for (name, krate) in EXTERNAL {
        if let Some(k) = krate {
            assert!(
                lock.contains(&format!("name = \"{k}\"")),
                "`{name}` is named as {k}'s, which binky no longer depends on: take it out of \
                 docs/architecture.md and EXTERNAL"
            );
        }
    }
    let external: Vec<&str> = EXTERNAL.iter().map(|(n, _)| *n).collect();
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    assert_eq!(
        undeclared(&text, &declared, &external),
        Vec::<String>::new(),
        "docs/architecture.md names what the code does not have: make the page say what is"
    );
}

#[test]
fn a_name_the_code_no_longer_has_is_seen() {
    let sources = [(
        "controllers/src/phase.rs".to_owned(),
        "pub trait Supervisor {}\npub enum Hold {\n    Queued,\n}\npub fn phase() {}\n\
         const C: &str = \"WorktreeReady\";\n"
            .to_owned(),
    )];
    let declared = Declared::read(&sources);
    let text = "The `Supervisor` trait and `SliceEffects` (`effects.rs`); `hold::Hold` \
                (`Queued`), `phase::phase`, `phase::gone`, `WorktreeReady`, `ArcSwap`, \
                `ArcSwap::load`, `daemon`.";
    assert_eq!(
        undeclared(text, &declared, &["ArcSwap"]),
        [
            "`SliceEffects`: no `SliceEffects` in the sources",
            "`phase::gone`: no `gone` in the sources",
        ]
    );
}
