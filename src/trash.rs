//! Deleting what binky removed, behind the user's back: a removed worktree is renamed into
//! `$BINKY_HOME/trash` (instant) and deleted here, in the background; a daemon's start
//! deletes what a killed one left.

use std::path::{Path, PathBuf};

/// Delete what `trash` holds, in the background (what a daemon killed mid-way left too).
pub fn empty_trash(trash: &Path) {
    let Ok(entries) = std::fs::read_dir(trash) else {
        return;
    };
    let paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    if !paths.is_empty() {
        std::thread::spawn(move || {
            for p in paths {
                delete_tree(&p);
            }
        });
    }
}

/// Delete a directory tree, making read-only directories writable where that is what
/// stops it (a Go module cache, a package manager's store).
pub fn delete_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    make_writable(path);
    if let Err(err) = std::fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), %err, "cannot delete a removed worktree");
    }
}

fn make_writable(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    // Where the system has modes, a folder its owner cannot enter or write is opened up.
    if let Some(mode) = binky_platform::fs::mode(&meta) {
        if mode & 0o700 != 0o700 {
            let _ = binky_platform::fs::set_mode(path, mode | 0o700);
        }
    }
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            make_writable(&e.path());
        }
    }
}

/// Move `path` into `trash` (a rename: same filesystem only). `None` when it cannot be.
pub fn move_aside(trash: &Path, path: &Path) -> Option<PathBuf> {
    std::fs::create_dir_all(trash).ok()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = path.file_name()?.to_string_lossy();
    let aside = trash.join(format!("{nanos}-{}-{name}", std::process::id()));
    std::fs::rename(path, &aside).ok()?;
    Some(aside)
}
