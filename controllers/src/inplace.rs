//! Linked files edited in place: what binky finds, and says, when a file a world shares
//! by hard link with the main checkout (or with other worlds) was written where it is.
//!
//! Where the filesystem cannot clone, a world's dependency directories are hard links to
//! the main checkout's files: one file, several names. Replacing such a file (what package
//! managers, compilers and most editors do: write a new file, rename it into place) gives
//! the world its own; writing into it (an editor that saves in place, `echo >>`, a
//! debugging edit of a dependency) changes it for every holder. binky cannot stop that
//! write; it makes sure it does not pass unnoticed.
//!
//! # How it is found
//! A write in place keeps the inode and sets its modification time; making a link sets
//! neither (only the change time). So a world's linked file with more than one link whose
//! modification time is later than the bring-in of its path was written after it was
//! shared. Its holders are the main checkout's and the other worlds' files at the same
//! place with the same (device, inode). Who may have written it: the main checkout (which
//! always held it) and the worlds that held it by then (brought before it changed); one
//! world is named when it is the only one, else all are listed, honestly.
//!
//! # Guarantees
//! - A file linked from somewhere that is no checkout (uv links packages from its cache)
//!   is never reported: a finding needs another checkout holding the same file.
//! - A file written before any world shared it is never reported.
//! - What is reported names the file, the checkouts that hold it, who may have written
//!   it, and the fix (`mode = "copy"` for its path).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::store::{BootstrapRow, BootstrapState, SharedEditRow};

/// The most files recorded for one world (the event says how many there were).
pub const MAX_RECORDED: usize = 50;

/// A linked file of a world found written after a given time (the effect's answer:
/// [`crate::worktree::Git::changed_links`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    /// Relative to the worktree's top.
    pub file: String,
    /// The brought path it is under.
    pub path: String,
    /// Its modification time (ms since the epoch).
    pub changed_at: i64,
    /// The checkouts asked about (the main one, other worlds') that hold the same file.
    pub holders: Vec<PathBuf>,
}

/// A world that may hold the same files: its name, worktree and brought paths.
#[derive(Clone, Debug)]
pub struct World<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its worktree.
    pub worktree: &'a Path,
    /// The paths brought into it.
    pub brought: &'a [BootstrapRow],
}

impl World<'_> {
    /// When `path` was brought into it by link, if it was (`None`: its own, made by its
    /// setup, held from the start).
    fn linked_at(&self, path: &str) -> Option<i64> {
        self.brought
            .iter()
            .find(|b| b.path == path && linked(b))
            .map(|b| b.brought_at)
    }
}

/// Was `b` brought with linked files, and is when known?
pub fn linked(b: &BootstrapRow) -> bool {
    b.state == BootstrapState::Done
        && matches!(b.how.as_deref(), Some("linked") | Some("mixed"))
        && b.brought_at > 0
}

/// The paths of `world` to look at, each with the time its files must have changed after
/// to be worth a second look: the earliest bring-in of that path by any world of
/// `others` (or `world`) — before it, no world shared the file.
pub fn to_look_at(world: &World<'_>, others: &[World<'_>]) -> Vec<(String, i64)> {
    world
        .brought
        .iter()
        .filter(|b| linked(b))
        .map(|b| {
            let first = others
                .iter()
                .filter_map(|o| o.linked_at(&b.path))
                .fold(b.brought_at, i64::min);
            (b.path.clone(), first)
        })
        .collect()
}

/// What `changed` (the files of `world` the effect found) tells: the files written in
/// place while a world shared them, with their holders and who may have written them.
/// `repo` is the main checkout; `now` the time of finding (ms).
pub fn findings(
    world: &World<'_>,
    others: &[World<'_>],
    repo: &Path,
    changed: &[Changed],
    now: i64,
) -> Vec<SharedEditRow> {
    let mut out = Vec::new();
    for c in changed {
        let sharers: Vec<&World<'_>> = std::iter::once(world)
            .chain(
                others
                    .iter()
                    .filter(|o| c.holders.iter().any(|h| h == o.worktree)),
            )
            .collect();
        let main_shares = c.holders.iter().any(|h| h == repo);
        if sharers.len() < 2 && !main_shares {
            // Linked from elsewhere (a tool's cache): no other checkout holds it.
            continue;
        }
        let shared_since = sharers.iter().filter_map(|w| w.linked_at(&c.path)).min();
        if shared_since.is_none_or(|t| c.changed_at <= t) {
            // Written before any world shared it: the worlds got it so.
            continue;
        }
        let names = |ws: &mut dyn Iterator<Item = &&World<'_>>| -> Vec<String> {
            let set: BTreeSet<String> = ws.map(|w| w.name.to_owned()).collect();
            set.into_iter().collect()
        };
        out.push(SharedEditRow {
            file: c.file.clone(),
            path: c.path.clone(),
            changed_at: c.changed_at,
            main_shares,
            sharers: names(&mut sharers.iter()),
            editors: names(
                &mut sharers
                    .iter()
                    .filter(|w| w.linked_at(&c.path).is_none_or(|t| t < c.changed_at)),
            ),
            found_at: now,
        });
    }
    out.sort_by(|a, b| (&a.path, &a.file).cmp(&(&b.path, &b.file)));
    out
}

/// `rows` as recorded before, and the new `found`: the same files changed at the same
/// times keep when they were first found. Also says whether anything differs.
pub fn merge(
    before: &[SharedEditRow],
    mut found: Vec<SharedEditRow>,
) -> (Vec<SharedEditRow>, bool) {
    for f in &mut found {
        if let Some(b) = before
            .iter()
            .find(|b| b.file == f.file && b.changed_at == f.changed_at)
        {
            f.found_at = b.found_at;
        }
    }
    let differs = found != before;
    (found, differs)
}

/// The files said in one sentence: of one path (first), with the same holders (the main
/// checkout, the worlds) and writers.
type Group<'a> = (&'a str, bool, &'a [String], &'a [String]);

/// What says `rows`: for each path, a line naming its files, their holders and who may
/// have written them, and a `fix:` line. `copy_path` gives a brought path as `[project] copy` writes it
/// (relative to `binky.toml`); `when` a time (ms) as a person reads it.
pub fn describe(
    rows: &[SharedEditRow],
    copy_path: impl Fn(&str) -> String,
    when: impl Fn(i64) -> String,
) -> Vec<String> {
    // One sentence for the files of one path with the same holders and writers.
    let mut groups: BTreeMap<Group<'_>, Vec<&SharedEditRow>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((
                r.path.as_str(),
                r.main_shares,
                r.sharers.as_slice(),
                r.editors.as_slice(),
            ))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|((path, main, sharers, editors), files)| {
            let latest = files.iter().map(|f| f.changed_at).max().unwrap_or_default();
            let what = match files.len() {
                1 => files[0].file.clone(),
                n => format!(
                    "{} and {} other file{} under {path}",
                    files[0].file,
                    n - 1,
                    if n == 2 { "" } else { "s" }
                ),
            };
            let mut holders: Vec<String> = Vec::new();
            if main {
                holders.push("the main checkout".into());
            }
            match sharers {
                [] => {}
                [one] => holders.push(format!("world {one}")),
                many => holders.push(format!("worlds {}", many.join(", "))),
            }
            let mut who: Vec<String> = editors.to_vec();
            if main {
                who.push("the main checkout".into());
            }
            let who = match who.as_slice() {
                [one] => one.clone(),
                [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
                [] => "a holder".into(),
            };
            let copy = copy_path(path);
            let at = when(latest);
            format!(
                "{what} was changed in place{} through a hard link: {} hold that one file, so it changed for all of them; written in {who}\nfix: give `{copy}` its own files in each world — `copy = [{{ path = \"{copy}\", mode = \"copy\" }}]` in [project] (new worlds get copies) — and reinstall the package where it should not have changed (or replace the file rather than edit it)",
                if at.is_empty() { String::new() } else { format!(" ({at})") },
                join_and(&holders),
            )
        })
        .collect()
}

/// A brought `path` (relative to the repository's top) as `[project] copy` writes it:
/// relative to the directory of `binky.toml` (`config_rel` below the top).
pub fn copy_path(config_rel: &str, path: &str) -> String {
    let dir = config_rel.trim_matches('/');
    if dir.is_empty() {
        return path.to_owned();
    }
    path.strip_prefix(&format!("{dir}/"))
        .unwrap_or(path)
        .to_owned()
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::CopyMode;

    fn brought(path: &str, how: &str, at: i64) -> BootstrapRow {
        BootstrapRow {
            path: path.into(),
            src: PathBuf::from("/repo"),
            mode: CopyMode::Link,
            state: BootstrapState::Done,
            how: Some(how.into()),
            files: 1,
            bytes: 1,
            took_ms: 0,
            message: String::new(),
            brought_at: at,
            fingerprint: String::new(),
        }
    }

    fn changed(at: i64, holders: &[&str]) -> Changed {
        Changed {
            file: "node_modules/pkg/index.js".into(),
            path: "node_modules".into(),
            changed_at: at,
            holders: holders.iter().map(PathBuf::from).collect(),
        }
    }

    #[test]
    fn a_file_written_after_two_worlds_linked_it_names_its_holders_and_who_may_have_written_it() {
        let (r1, r2, r3) = (
            [brought("node_modules", "linked", 100)],
            [brought("node_modules", "mixed", 200)],
            [brought("node_modules", "linked", 400)],
        );
        let w1 = World {
            name: "w1",
            worktree: Path::new("/wt/w1"),
            brought: &r1,
        };
        let others = [
            World {
                name: "w2",
                worktree: Path::new("/wt/w2"),
                brought: &r2,
            },
            World {
                name: "w3",
                worktree: Path::new("/wt/w3"),
                brought: &r3,
            },
        ];
        assert_eq!(
            to_look_at(&w1, &others),
            vec![("node_modules".to_owned(), 100)]
        );
        // Written at 300: w3 linked it later (it got the change), w1 and w2 held it then.
        let found = findings(
            &w1,
            &others,
            Path::new("/repo"),
            &[changed(300, &["/repo", "/wt/w2", "/wt/w3"])],
            1000,
        );
        assert_eq!(found.len(), 1);
        assert!(found[0].main_shares);
        assert_eq!(found[0].sharers, vec!["w1", "w2", "w3"]);
        assert_eq!(found[0].editors, vec!["w1", "w2"]);
        let said = describe(&found, |p| p.to_owned(), |t| format!("t{t}"));
        assert_eq!(said.len(), 1);
        for part in [
            "node_modules/pkg/index.js was changed in place (t300)",
            "the main checkout and worlds w1, w2, w3 hold that one file",
            "written in w1, w2 or the main checkout",
            "copy = [{ path = \"node_modules\", mode = \"copy\" }]",
        ] {
            assert!(said[0].contains(part), "{part}: {}", said[0]);
        }
        // Seen again: first found when it was first found; nothing to write.
        let again = findings(
            &w1,
            &others,
            Path::new("/repo"),
            &[changed(300, &["/repo", "/wt/w2", "/wt/w3"])],
            2000,
        );
        let (merged, differs) = merge(&found, again);
        assert!(!differs);
        assert_eq!(merged[0].found_at, 1000);
    }

    #[test]
    fn a_file_no_other_checkout_holds_or_written_before_it_was_shared_is_not_reported() {
        let r1 = [brought("node_modules", "linked", 100)];
        let w1 = World {
            name: "w1",
            worktree: Path::new("/wt/w1"),
            brought: &r1,
        };
        let repo = Path::new("/repo");
        // uv links from its cache: more than one link, no checkout holds it.
        assert!(findings(&w1, &[], repo, &[changed(300, &[])], 1000).is_empty());
        // Written before w1 linked it.
        assert!(findings(&w1, &[], repo, &[changed(50, &["/repo"])], 1000).is_empty());
        // Only the main checkout and w1: both may have written it.
        let found = findings(&w1, &[], repo, &[changed(300, &["/repo"])], 1000);
        assert_eq!(found[0].editors, vec!["w1"]);
        let said = describe(&found, |p| p.to_owned(), |t| t.to_string());
        assert!(
            said[0].contains("the main checkout and world w1 hold that one file")
                && said[0].contains("written in w1 or the main checkout"),
            "{}",
            said[0]
        );
        // A world that came from another world's (the main checkout lacks the path): that
        // world made its own, held it from the start, and is the one named with w1.
        let r2: [BootstrapRow; 0] = [];
        let source = [World {
            name: "w0",
            worktree: Path::new("/wt/w0"),
            brought: &r2,
        }];
        let found = findings(&w1, &source, repo, &[changed(300, &["/wt/w0"])], 1000);
        assert!(!found[0].main_shares);
        assert_eq!(found[0].editors, vec!["w0", "w1"]);
        let said = describe(&found, |p| p.to_owned(), |t| t.to_string());
        assert!(said[0].contains("worlds w0, w1 hold"), "{}", said[0]);
        assert!(said[0].contains("written in w0 or w1"), "{}", said[0]);
    }
}
