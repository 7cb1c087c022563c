//! "Uncommitted changes" means the user's: what binky brought into a world (a lockfile
//! `[project] copy` names, which git lists as untracked) and what a world's own `setup`
//! created or changed (a `package-lock.json` written by `npm install`, a `.venv` that is
//! not ignored) do not keep `binky remove` from removing the world.
//!
//! When a `setup` finishes, the process controller records a fingerprint of every path
//! `git status` then lists (table `setup_changes`); when a path that is one file is brought,
//! the worktree controller records its fingerprint as it came (`bootstrap_paths`). A path
//! is the user's change when it is listed now and its fingerprint is neither of those: an
//! edit to the lockfile after setup makes the worktree dirty again.
//!
//! A fingerprint is cheap and changes with any edit: size and modification time of a
//! file (nanoseconds), a symlink's target, and for a directory the count, total size and
//! newest modification time of everything under it.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::UNIX_EPOCH;

use crate::store::{self, Store, StoreError, WorktreeRow, WorldId};

/// The paths `git status --porcelain -z` lists (a rename gives its new path), relative to
/// the worktree.
pub fn parse_status_z(out: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    while let Some(entry) = fields.next() {
        if entry.len() < 4 {
            continue;
        }
        let (code, path) = entry.split_at(3);
        paths.push(path.to_owned());
        // A rename or copy is followed by its original path.
        if code.starts_with('R') || code.starts_with('C') {
            fields.next();
        }
    }
    paths
}

/// `git status` of a worktree: the paths with uncommitted changes, untracked included.
/// The one place binky asks git what changed (the worktree controller's `Git::changes`,
/// `binky remove`'s refusal and the record after a setup all come here).
pub async fn changed_paths(worktree: &Path) -> std::io::Result<Vec<String>> {
    let out = crate::git::run(
        worktree,
        &["status", "--porcelain", "-z", "--untracked-files=normal"],
    )
    .await?;
    if !out.status.success() {
        return Err(std::io::Error::other(out.stderr));
    }
    Ok(parse_status_z(&out.text()))
}

/// The user's uncommitted changes in world `world`'s worktree `row`: what `changed` (its
/// `git status`, [`changed_paths`] or a fake's) lists that the world's own `setup` did not
/// leave as it is. The one dirty check: `binky remove` refuses with it before it writes
/// anything, and the worktree controller's cleanup stops with it.
///
/// No worktree nobody's work can be in is looked at (and `changed` is not run): one binky
/// adopted (it is kept, never removed), one binky is still making (a checkout half done
/// shows its files as deleted), one whose directory is gone.
pub async fn users_uncommitted<E: From<StoreError>>(
    store: &Store,
    world: WorldId,
    row: &WorktreeRow,
    changed: impl Future<Output = Result<Vec<String>, E>>,
) -> Result<Vec<String>, E> {
    if row.adopted || row.state == crate::store::WorktreeState::Creating || !row.path.is_dir() {
        return Ok(Vec::new());
    }
    let changed = changed.await?;
    if changed.is_empty() {
        return Ok(changed);
    }
    let (after_setup, brought) = store.read(|c| {
        Ok((
            store::setup_changes(c, world)?,
            store::bootstrap_paths(c, world)?,
        ))
    })?;
    // A path that is one file is fingerprinted as it was brought (a lockfile no setup
    // touched is as it came).
    let as_brought: BTreeMap<String, String> = brought
        .into_iter()
        .filter(|b| !b.fingerprint.is_empty())
        .map(|b| (b.path, b.fingerprint))
        .collect();
    Ok(users_changes(&row.path, &changed, &after_setup)
        .into_iter()
        .filter(|p| {
            as_brought
                .get(p)
                .is_none_or(|f| *f != fingerprint(&row.path, p))
        })
        .collect())
}

/// The fingerprint of `rel` under `worktree` now.
pub fn fingerprint(worktree: &Path, rel: &str) -> String {
    let path = worktree.join(rel.trim_end_matches('/'));
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return "gone".into();
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&path).unwrap_or_default();
        return format!("l:{}", target.display());
    }
    if meta.is_dir() {
        let (mut count, mut size, mut newest) = (0u64, 0u64, mtime_ns(&meta));
        walk(&path, &mut count, &mut size, &mut newest);
        return format!("d:{count}:{size}:{newest}");
    }
    format!("f:{}:{}", meta.len(), mtime_ns(&meta))
}

fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn walk(dir: &Path, count: &mut u64, size: &mut u64, newest: &mut u128) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        *count += 1;
        *size += meta.len();
        *newest = (*newest).max(mtime_ns(&meta));
        if meta.is_dir() {
            walk(&e.path(), count, size, newest);
        }
    }
}

/// Fingerprints of `paths` now.
/// (A directory's fingerprint walks it: on a daemon worker, the walk is moved off it.)
pub fn fingerprints(worktree: &Path, paths: &[String]) -> BTreeMap<String, String> {
    crate::store::off_worker(|| {
        paths
            .iter()
            .map(|p| (p.clone(), fingerprint(worktree, p)))
            .collect()
    })
}

/// Of the `changed` paths, those that are the user's: not as `setup` left them.
pub fn users_changes(
    worktree: &Path,
    changed: &[String],
    after_setup: &BTreeMap<String, String>,
) -> Vec<String> {
    crate::store::off_worker(|| {
        changed
            .iter()
            .filter(|p| {
                after_setup
                    .get(*p)
                    .is_none_or(|f| *f != fingerprint(worktree, p))
            })
            .cloned()
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_paths_are_read_with_renames_and_spaces() {
        let out = "?? package-lock.json\0 M src/a b.rs\0R  new.rs\0old.rs\0?? .venv/\0";
        assert_eq!(
            parse_status_z(out),
            vec!["package-lock.json", "src/a b.rs", "new.rs", ".venv/"]
        );
    }

    #[test]
    fn a_path_as_setup_left_it_is_not_the_users_and_an_edit_after_is() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path();
        std::fs::write(wt.join("package-lock.json"), "{}").unwrap();
        std::fs::create_dir_all(wt.join(".venv/lib")).unwrap();
        std::fs::write(wt.join(".venv/lib/x.py"), "x").unwrap();
        let changed: Vec<String> = vec!["package-lock.json".into(), ".venv/".into()];
        let after = fingerprints(wt, &changed);
        assert!(users_changes(wt, &changed, &after).is_empty());
        // A path setup did not make is the user's.
        let mut now = changed.clone();
        now.push("notes.txt".into());
        assert_eq!(users_changes(wt, &now, &after), vec!["notes.txt"]);
        // An edit of what setup made, a file added under its directory: the user's.
        std::fs::write(wt.join("package-lock.json"), "{\"edited\": true}").unwrap();
        std::fs::write(wt.join(".venv/lib/y.py"), "y").unwrap();
        assert_eq!(
            users_changes(wt, &changed, &after),
            vec!["package-lock.json", ".venv/"]
        );
    }
}
