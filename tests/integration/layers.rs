//! The module graph docs/architecture.md describes: in no crate does a module import
//! one that imports it back, so each layer can be read (and one day built) without those
//! above it.
//!
//! The graph is read from the sources as text: a file's module imports every module its
//! `use` lines and its `crate::…`/`super::…` paths name (the deepest module of the path that
//! is a file), leaving out comments, test modules, the crate root (which declares every
//! module) and a child module's use of its own parents (it lives inside them, as Rust's
//! privacy has it: `adapters::redis::prefix` may read `adapters::redis`'s helpers).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's modules (`golden::key`, `store`, …) and the files they are.
fn modules(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
                continue;
            }
            if !name.ends_with(".rs") || name == "tests.rs" || name == "main.rs" {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

/// `text` without comments and without a trailing `#[cfg(test)] mod tests { … }`.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.contains('{'))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = match line.find("// ") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The paths a `use` tree names, each with the name it is known by in the file:
/// `a::{self, b as c, d::{e}}` → (`a`, `a`), (`a::b`, `c`), (`a::d::e`, `e`).
fn expand(tree: &str) -> Vec<(String, String)> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, name) = match tree.split_once(" as ") {
            Some((path, name)) => (path.trim(), name.trim()),
            None => (tree, tree.rsplit("::").next().unwrap_or(tree)),
        };
        let path: String = path.chars().filter(|c| !c.is_whitespace()).collect();
        return vec![(path, name.to_owned())];
    };
    let prefix: String = tree[..open]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| {
            let prefix = prefix.clone();
            expand(p).into_iter().map(move |(path, name)| {
                let full = format!("{prefix}{path}");
                match full.strip_suffix("::self") {
                    Some(module) if name == "self" => {
                        let last = module.rsplit("::").next().unwrap_or(module);
                        (module.to_owned(), last.to_owned())
                    }
                    Some(module) => (module.to_owned(), name),
                    None => (full, name),
                }
            })
        })
        .collect()
}

/// Where `code` has `word` followed by `::` as a path's first segment: each such path.
fn paths_from(code: &str, word: &str) -> Vec<String> {
    let anchor = format!("{word}::");
    code.match_indices(&anchor)
        .filter(|(i, _)| {
            !code[..*i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
        .map(|(i, _)| {
            code[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect::<String>()
                .trim_end_matches(':')
                .to_owned()
        })
        .collect()
}

/// The module paths `code` names (`crate::a::b`, `super::c`, `self::d`), with a path
/// through a name a `use` brought in written out whole (`use crate::store::write;` then
/// `write::golden::claim` → `crate::store::write::golden::claim`).
fn named_paths(code: &str) -> Vec<String> {
    let mut used = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub ")
            .or_else(|| t.strip_prefix("pub(crate) "))
            .or_else(|| t.strip_prefix("pub(super) "))
            .unwrap_or(t);
        let Some(tree) = t.strip_prefix("use ") else {
            continue;
        };
        let mut tree = tree.to_owned();
        while !tree.contains(';') {
            match lines.next() {
                Some(more) => tree.push_str(more),
                None => break,
            }
        }
        used.extend(expand(tree.split(';').next().unwrap_or("")));
    }
    let mut out: Vec<String> = used.iter().map(|(path, _)| path.clone()).collect();
    for anchor in ["crate", "super", "self"] {
        out.extend(paths_from(code, anchor));
    }
    for (path, name) in &used {
        if ["crate", "super", "self"].contains(&name.as_str()) {
            continue;
        }
        for through in paths_from(code, name) {
            out.push(format!("{path}{}", &through[name.len()..]));
        }
    }
    out
}

/// The module a path written in module `from` lands in: the deepest one of its prefixes
/// that is a file of the crate.
fn resolve(path: &str, from: &str, known: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    match segs.first().copied() {
        Some("crate") => {
            base.clear();
            segs.remove(0);
        }
        Some("self") => {
            segs.remove(0);
        }
        Some("super") => {
            while segs.first() == Some(&"super") {
                segs.remove(0);
                base.pop();
            }
        }
        _ => return None,
    }
    base.extend(segs);
    (1..=base.len())
        .rev()
        .map(|n| base[..n].join("::"))
        .find(|m| known.contains_key(m))
}

/// Each module's imports of the crate's other modules.
fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let known = modules(root);
    let mut graph = BTreeMap::new();
    for (module, file) in &known {
        if module.is_empty() {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let targets: BTreeSet<String> = named_paths(&code)
            .iter()
            .filter_map(|p| resolve(p, module, &known))
            // A child reading its parent's items is inside it, not above or beside it.
            .filter(|t| t != module && !t.is_empty() && !module.starts_with(&format!("{t}::")))
            .collect();
        graph.insert(module.clone(), targets);
    }
    graph
}

/// The loops of `graph`: each strongly connected set of more than one module.
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for t in graph.get(&m).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (m, r) in &reaches {
        if !r.contains(*m) || out.iter().any(|l| l.contains(*m)) {
            continue;
        }
        let set: BTreeSet<String> = r
            .iter()
            .filter(|t| reaches.get(t).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        out.push(set);
    }
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_module_of_any_crate_imports_one_that_imports_it_back() {
    for root in ["controllers/src", "proxy/src", "src"] {
        let graph = graph(&repo().join(root));
        assert!(graph.len() > 8, "{root}: too few modules read: {graph:?}");
        let found = loops(&graph);
        assert!(
            found.is_empty(),
            "{root}: modules that import each other (in a loop): {found:?}; move what both \
             need into the lower one, or behind a trait the lower one defines"
        );
    }
}

/// `graph` seen from the crate's root: each top-level module (`store`, `view`, `cli`) with
/// the top-level modules its files import, and for each such import the module-level
/// edges that make it (`view` → `daemon` because `view` imports `daemon::protocol`).
fn top_level(graph: &BTreeMap<String, BTreeSet<String>>) -> TopLevel {
    let top = |m: &str| m.split("::").next().unwrap_or(m).to_owned();
    let mut out = TopLevel::new();
    for (module, targets) in graph {
        let from = top(module);
        let entry = out.entry(from.clone()).or_default();
        for t in targets {
            let to = top(t);
            if to != from {
                entry.entry(to).or_default().push(format!("{module} → {t}"));
            }
        }
    }
    out
}

/// Top-level module → (top-level module it imports → the module-level imports that do it).
type TopLevel = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The loops among a crate's top-level modules, each named by its modules and the
/// module-level imports that close it.
fn top_level_loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let top = top_level(graph);
    let plain: BTreeMap<String, BTreeSet<String>> = top
        .iter()
        .map(|(m, to)| (m.clone(), to.keys().cloned().collect()))
        .collect();
    loops(&plain)
        .into_iter()
        .map(|set| {
            let edges: Vec<&String> = set
                .iter()
                .flat_map(|m| {
                    top[m]
                        .iter()
                        .filter(|(to, _)| set.contains(*to))
                        .flat_map(|(_, why)| why)
                })
                .collect();
            let names: Vec<&str> = set.iter().map(String::as_str).collect();
            format!("{} (through {edges:?})", names.join(" ⇄ "))
        })
        .collect()
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back() {
    for root in ["controllers/src", "proxy/src", "src"] {
        let graph = graph(&repo().join(root));
        let found = top_level_loops(&graph);
        assert!(
            found.is_empty(),
            "{root}: top-level modules that import each other (in a loop): {found:?}; move \
             what both need into a module below both (or into the lower one), or behind a \
             trait the lower one defines"
        );
    }
}

#[test]
fn a_loop_of_top_level_modules_is_seen_when_no_module_loops() {
    // The loop binky had: each import reaches another file of the module, so no single
    // module imports one that imports it back, yet `view`, `daemon` and `dashboard` do.
    let edges = [
        ("view", "daemon::protocol"),
        ("daemon", "dashboard"),
        ("dashboard::snapshot", "view"),
        ("daemon::protocol", "person"),
    ];
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges {
        graph
            .entry(from.to_owned())
            .or_default()
            .insert(to.to_owned());
    }
    assert_eq!(loops(&graph), Vec::<BTreeSet<String>>::new());
    assert_eq!(
        top_level_loops(&graph),
        ["daemon ⇄ dashboard ⇄ view (through [\"daemon → dashboard\", \"dashboard::snapshot → view\", \"view → daemon::protocol\"])"]
    );
}

/// The modules of `binky-controllers` that are controllers (each implements `Controller`).
const CONTROLLERS: [&str; 7] = [
    "gate", "worktree", "port", "golden", "slice", "process", "route",
];

/// The controller a module of `binky-controllers` is part of, if any.
fn controller_of(module: &str) -> Option<&'static str> {
    let top = module.split("::").next()?;
    CONTROLLERS.iter().copied().find(|c| *c == top)
}

/// Where one controller's module imports another controller's: (importer, imported).
fn controllers_importing_controllers(
    graph: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<(String, String)> {
    graph
        .iter()
        .filter_map(|(m, targets)| Some((m, controller_of(m)?, targets)))
        .flat_map(|(m, from, targets)| {
            targets
                .iter()
                .filter(move |t| controller_of(t).is_some_and(|to| to != from))
                .map(move |t| (m.clone(), t.clone()))
        })
        .collect()
}

#[test]
fn no_controller_imports_another() {
    let root = repo().join("controllers/src");
    let graph = graph(&root);
    for c in CONTROLLERS {
        let text = std::fs::read_to_string(modules(&root)[c].clone()).unwrap();
        assert!(text.contains("Controller for"), "{c} is a controller");
    }
    let found = controllers_importing_controllers(&graph);
    assert!(
        found.is_empty(),
        "controllers import each other: {found:?}; what two controllers share belongs in a \
         module of its own, and they talk through the store"
    );
    // And it is seen: a worktree module reaching into the golden controller.
    let mut planted = graph.clone();
    planted
        .get_mut("worktree")
        .unwrap()
        .insert("golden".to_owned());
    assert_eq!(
        controllers_importing_controllers(&planted),
        [("worktree".to_owned(), "golden".to_owned())]
    );
}

#[test]
fn a_loop_of_imports_is_seen_whichever_way_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod store;\npub mod golden;\npub mod route;\npub mod paths;\n",
    );
    write(
        "store/mod.rs",
        "pub mod write;\npub use self::write::claim;\nfn helper() {}\n",
    );
    // A grouped `use` from below, a path through a renamed `use` from above: a loop. The
    // child's use of its parent (which re-exports it) is none.
    write(
        "store/write.rs",
        "use crate::{golden::{Inputs, other}, route};\nuse super::helper;\n",
    );
    write(
        "golden.rs",
        "//! crate::route in a comment is no import.\nuse crate::store::write as w;\n\
         fn f() { w::claim(); }\n",
    );
    write("paths.rs", "pub fn p() {}\n");
    // A `super::` path counts; a test module's imports do not.
    write(
        "route.rs",
        "pub struct Route;\nfn g() { super::paths::p(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::store;\n}\n",
    );
    let graph = graph(dir.path());
    assert_eq!(
        graph["store::write"],
        BTreeSet::from(["golden".to_owned(), "route".to_owned()])
    );
    assert_eq!(graph["golden"], BTreeSet::from(["store::write".to_owned()]));
    assert_eq!(graph["route"], BTreeSet::from(["paths".to_owned()]));
    assert_eq!(
        loops(&graph),
        vec![BTreeSet::from([
            "golden".to_owned(),
            "store::write".to_owned()
        ])]
    );
}

/// The longest a production source file may be, in lines (its test module aside): past it,
/// a file holds several concerns, which want a module each.
const MOST_LINES: usize = 900;

/// The lines of `text` before its test module (`#[cfg(test)]` then `mod …`), if any.
fn production_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len())
}

/// The production `.rs` files under `root` (test files and folders aside), with their
/// paths relative to the repository.
fn production_files(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let rel = path.strip_prefix(repo()).unwrap_or(&path);
                out.push((rel.to_string_lossy().into_owned(), path));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_production_file_passes_900_lines() {
    let mut long = Vec::new();
    let mut read = 0;
    for root in ["src", "controllers/src", "proxy/src"] {
        for (rel, path) in production_files(&repo().join(root)) {
            read += 1;
            let n = production_lines(&std::fs::read_to_string(path).unwrap());
            if n > MOST_LINES {
                long.push(format!("{rel}: {n} lines"));
            }
        }
    }
    assert!(read > 100, "too few files read: {read}");
    assert!(
        long.is_empty(),
        "production files over {MOST_LINES} lines: {long:?}; split each into modules along \
         the concerns it holds (one each, importing what it uses)"
    );
}

#[test]
fn a_file_is_measured_without_its_test_module() {
    let code = "fn a() {}\n".repeat(3);
    assert_eq!(production_lines(&code), 3);
    let with_tests = format!("{code}\n#[cfg(test)]\nmod tests {{\n    fn t() {{}}\n}}\n");
    assert_eq!(production_lines(&with_tests), 4);
    // A `#[cfg(test)]` item that is no test module counts.
    let gated = format!("#[cfg(test)]\nfn helper() {{}}\n{code}");
    assert_eq!(production_lines(&gated), 5);
}

/// A file is written whole in one place (`binky_controllers::whole_file`): every other
/// `rename` of the crates' code moves a thing rather than writing a file (a log rotated, a
/// worktree to the trash, a path brought into a worktree, a server's staged data
/// directory, an imported record file), and is named here with why. A new one either
/// moves something too (add it, with its reason) or writes a file: use `whole_file`.
#[test]
fn files_are_written_whole_in_one_place() {
    let allowed: &[(&str, usize, &str)] = &[
        ("controllers/src/whole_file.rs", 1, "the one place"),
        (
            "controllers/src/store/migrations.rs",
            1,
            "mcp-created, imported, set aside",
        ),
        ("src/supervisor/mod.rs", 2, "a service's log rotated"),
        ("src/logging.rs", 1, "the daemon's log rotated"),
        ("src/trash.rs", 1, "a worktree moved to the trash"),
        (
            "src/bootstrap.rs",
            1,
            "a path brought under its temporary name, renamed whole",
        ),
        (
            "src/servers/host.rs",
            1,
            "a server's data directory staged, then put in place",
        ),
    ];
    let root = repo();
    let mut found: Vec<(String, usize)> = Vec::new();
    for krate in ["src", "controllers/src", "proxy/src"] {
        for path in modules(&root.join(krate)).into_values() {
            let code = code_of(&std::fs::read_to_string(&path).unwrap());
            // `binky_platform::fs::replace`: a rename that waits out Windows' busy files.
            let n = code.matches("fs::rename(").count() + code.matches("fs::replace(").count();
            if n > 0 {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.push((rel, n));
            }
        }
    }
    found.sort();
    let mut expected: Vec<(String, usize)> = allowed
        .iter()
        .map(|(f, n, _)| ((*f).to_owned(), *n))
        .collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "a rename outside controllers/src/whole_file.rs: write a file with `whole_file::Whole`, or name the move here"
    );
}
