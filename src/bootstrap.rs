//! A new world's worktree gets, before any `setup`, what a fresh `git worktree add` lacks:
//! the ignored files `.worktreeinclude` lists (`.env`, local certificates; gitignore
//! syntax, the file other worktree tools read) and the dependency directories
//! `[project] copy` names (`node_modules`, `.venv`, build caches), from the main checkout,
//! or, for a `copy` path the main checkout lacks, from the newest other world that has it.
//!
//! Files are cloned copy-on-write (`FICLONE`: btrfs, XFS, bcachefs) where the filesystem
//! can, else copied by several threads at once (`copy_file_range` in the kernel). Never
//! hard links: a package patched in one world must not change in another. Modes,
//! symlinks and modification times are kept (incremental builds compare them).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use binky_controllers::worktree::{Copied, CopyHow};

/// The paths to copy into `worktree`, relative to the repository's top: the ignored,
/// untracked paths of `from` that `.worktreeinclude` (in `from`) or `copy` match, whole
/// directories as one entry.
pub fn wanted(from: &Path, copy: &[String]) -> Result<Vec<String>, String> {
    let literal = |c: &str| !c.contains(['*', '?', '[', '!']);
    // `copy` paths written out are looked at where they are (an untracked parent holding
    // only ignored files would otherwise be listed in their place)…
    let mut candidates: Vec<String> = Vec::new();
    for c in copy.iter().map(|c| c.trim_end_matches('/')) {
        if literal(c) {
            if let Ok(meta) = std::fs::symlink_metadata(from.join(c)) {
                candidates.push(if meta.is_dir() {
                    format!("{c}/")
                } else {
                    c.to_owned()
                });
            }
        }
    }
    // …patterns (`.worktreeinclude`, globs of `copy`) through git: the untracked paths they
    // match, each line an `--exclude` in order, as a `.gitignore` would have it.
    let mut patterns = std::fs::read_to_string(from.join(".worktreeinclude")).unwrap_or_default();
    for c in copy.iter().filter(|c| !literal(c)) {
        patterns.push('\n');
        patterns.push_str(c);
    }
    let lines: Vec<&str> = patterns
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    if !lines.is_empty() {
        let mut args: Vec<String> = [
            "ls-files",
            "--others",
            "--ignored",
            "--directory",
            "--no-empty-directory",
            "-z",
        ]
        .map(String::from)
        .to_vec();
        args.extend(lines.iter().map(|l| format!("--exclude={l}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for m in git_lines(from, &args, None)? {
            if !candidates.contains(&m) {
                candidates.push(m);
            }
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    // Only what git ignores: an untracked file that is not ignored is the user's work.
    let ignored = git_lines(
        from,
        &["check-ignore", "--no-index", "-z", "--stdin"],
        Some(candidates.join("\0")),
    )?;
    Ok(candidates
        .into_iter()
        .filter(|m| ignored.contains(m))
        .map(|m| m.trim_end_matches('/').to_owned())
        .collect())
}

/// A path `[project] copy` names that binky will not copy, why, and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The path as written in `copy`.
    pub path: String,
    /// Why it is not copied.
    pub why: String,
    /// What to do.
    pub fix: String,
}

/// The paths `copy` names outright that exist in `from` (the repository's top; `prefix` is
/// where `binky.toml` is below it, which `copy` is relative to) and that binky will not copy
/// into a new worktree: tracked ones (git checks them out already) and ones git does not
/// ignore (an untracked path git does not ignore is someone's work in progress). Said by
/// `binky check` and `binky up`, never skipped without a word.
pub fn refused(from: &Path, prefix: &Path, copy: &[String]) -> Vec<Refused> {
    let literal = |c: &str| !c.contains(['*', '?', '[', '!']);
    let present: Vec<(String, bool)> = copy
        .iter()
        .map(|c| c.trim_end_matches('/'))
        .filter(|c| literal(c) && !c.is_empty())
        .map(|c| prefix.join(c).to_string_lossy().into_owned())
        .filter_map(|c| {
            let meta = std::fs::symlink_metadata(from.join(&c)).ok()?;
            Some((c, meta.is_dir()))
        })
        .collect();
    if present.is_empty() {
        return Vec::new();
    }
    let shown = |(c, dir): &(String, bool)| if *dir { format!("{c}/") } else { c.clone() };
    let names: Vec<String> = present.iter().map(shown).collect();
    let Ok(ignored) = git_lines(
        from,
        &["check-ignore", "--no-index", "-z", "--stdin"],
        Some(names.join("\0")),
    ) else {
        return Vec::new();
    };
    let mut args = vec!["ls-files", "-z", "--"];
    args.extend(present.iter().map(|(c, _)| c.as_str()));
    let tracked = git_lines(from, &args, None).unwrap_or_default();
    let mut out = Vec::new();
    for ((c, dir), name) in present.iter().zip(&names) {
        if tracked
            .iter()
            .any(|t| t == c || t.starts_with(&format!("{c}/")))
        {
            out.push(Refused {
                path: c.clone(),
                why: format!("`{name}` is tracked by git: every worktree has it from its commit, and binky copies only ignored paths"),
                fix: format!("remove \"{c}\" from [project] copy"),
            });
        } else if !ignored.contains(name) {
            out.push(Refused {
                path: c.clone(),
                why: format!("`{name}` is not ignored by git: binky copies only ignored paths (an untracked path git does not ignore is someone's work in progress), so a new world would not have it"),
                fix: format!(
                    "add `/{c}{}` to .gitignore (and commit it), then `binky up` again",
                    if *dir { "/" } else { "" }
                ),
            });
        }
    }
    out
}

fn git_lines(dir: &Path, args: &[&str], input: Option<String>) -> Result<Vec<String>, String> {
    let out = binky_controllers::git::run_blocking(dir, args, input.map(String::into_bytes))
        .map_err(|e| format!("cannot run git: {e}"))?;
    // `check-ignore` exits 1 when nothing is ignored.
    if !out.status.success() && out.status.code() != Some(1) {
        return Err(format!("git {} failed: {}", args.join(" "), out.stderr));
    }
    Ok(out
        .text()
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Copy `rel` from `from` into `to` (`to/rel` must not exist). What was copied and how.
pub fn copy_path(from: &Path, to: &Path, rel: &str) -> std::io::Result<Copied> {
    let started = Instant::now();
    let (src, done) = (from.join(rel), to.join(rel));
    if let Some(parent) = done.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Made under a temporary name, renamed when whole: a daemon killed mid-copy leaves no
    // half directory that looks finished (and the temporary one makes the next daemon
    // make the worktree again).
    let name = done
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dst = done.with_file_name(format!(".{name}.binky-copy"));
    if std::fs::symlink_metadata(&dst).is_ok() {
        crate::trash::delete_tree(&dst);
        let _ = std::fs::remove_file(&dst);
    }
    let copied = copy_into(&src, &dst, from, to).inspect_err(|_| {
        // Nothing half made stays in the user's worktree.
        crate::trash::delete_tree(&dst);
        let _ = std::fs::remove_file(&dst);
    })?;
    std::fs::rename(&dst, &done)?;
    let (n, bytes, cloned) = copied;
    Ok(Copied {
        path: rel.to_owned(),
        from: from.to_owned(),
        files: n,
        bytes,
        how: if n > 0 && cloned == n {
            CopyHow::Cloned
        } else if cloned > 0 {
            CopyHow::Mixed
        } else {
            CopyHow::Copied
        },
        took: started.elapsed(),
    })
}

/// Copy `src` to `dst` (the temporary name); a virtualenv is made the new worktree's
/// before it takes its place. Files, bytes, files cloned.
fn copy_into(src: &Path, dst: &Path, from: &Path, to: &Path) -> std::io::Result<(u64, u64, u64)> {
    // Directories first (serially: cheap), then the files by several threads.
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
    collect(src, dst, &mut files, &mut dirs)?;
    let bytes = AtomicU64::new(0);
    let cloned = AtomicU64::new(0);
    let can_clone = AtomicBool::new(true);
    let next = AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<std::io::Error>> = std::sync::Mutex::new(None);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get() * 4)
        .unwrap_or(8)
        .clamp(4, 16)
        .min(files.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((src, dst)) = files.get(i) else {
                    return;
                };
                match copy_file(src, dst, &can_clone) {
                    Ok((n, was_cloned)) => {
                        bytes.fetch_add(n, Ordering::Relaxed);
                        if was_cloned {
                            cloned.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                        f.get_or_insert(std::io::Error::new(
                            e.kind(),
                            format!("{}: {e}", src.display()),
                        ));
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    // Directory times last: creating their entries changed them.
    for (src, dst) in dirs.iter().rev() {
        if let Ok(meta) = std::fs::metadata(src) {
            let _ = std::fs::set_permissions(dst, meta.permissions());
            if let (Ok(m), Ok(f)) = (meta.modified(), std::fs::File::open(dst)) {
                let _ = f.set_modified(m);
            }
        }
    }
    // A Python virtualenv names its own place in its scripts and `.pth` files: pointed at
    // the new worktree (before it takes its place: a daemon killed in between leaves no
    // venv of the wrong world), or its `pip` would install into the world it came from.
    if dst.join("pyvenv.cfg").is_file() {
        relocate_venv(dst, from, to);
    }
    Ok((files.len() as u64, bytes.into_inner(), cloned.into_inner()))
}

/// In the virtualenv copied to `venv`, the paths of the checkout it came from (`from`)
/// become the new worktree's (`to`): script shebangs and `activate*` in `bin/`, `.pth`,
/// `.egg-link` and `direct_url.json` files (editable installs) in `lib/…/site-packages`.
fn relocate_venv(venv: &Path, from: &Path, to: &Path) {
    let (old, new) = (format!("{}/", from.display()), format!("{}/", to.display()));
    let mut files: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(venv.join("bin")) {
        files.extend(entries.flatten().map(|e| e.path()));
    }
    let mut stack = vec![venv.join("lib")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() && !p.is_symlink() {
                // Only site-packages' own files and dist-info metadata: not package code.
                if name.starts_with("python")
                    || name == "site-packages"
                    || name.ends_with(".dist-info")
                {
                    stack.push(p);
                }
            } else if name.ends_with(".pth")
                || name.ends_with(".egg-link")
                || name == "direct_url.json"
            {
                files.push(p);
            }
        }
    }
    for f in files {
        let Ok(meta) = std::fs::symlink_metadata(&f) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 1 << 20 {
            continue;
        }
        let Ok(text) = std::fs::read(&f) else {
            continue;
        };
        let from_bytes = from.as_os_str().as_encoded_bytes();
        if !text.windows(from_bytes.len()).any(|w| w == from_bytes) {
            continue;
        }
        let Ok(text) = String::from_utf8(text) else {
            continue;
        };
        let mut text = text.replace(&old, &new);
        // The checkout itself (an editable install of the project at its top).
        for end in ["\n", "\"", "'"] {
            text = text.replace(
                &format!("{}{end}", from.display()),
                &format!("{}{end}", to.display()),
            );
        }
        let _ = std::fs::write(&f, text);
    }
}

/// Walk `src`: directories made at `dst` now (writable while they fill), symlinks made
/// now, files listed.
fn collect(
    src: &Path,
    dst: &Path,
    files: &mut Vec<(PathBuf, PathBuf)>,
    dirs: &mut Vec<(PathBuf, PathBuf)>,
) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(src)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(src)?, dst)?;
    } else if ft.is_dir() {
        std::fs::create_dir(dst)?;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(0o755 | 0o200))?;
        dirs.push((src.to_owned(), dst.to_owned()));
        for e in std::fs::read_dir(src)? {
            let e = e?;
            collect(&e.path(), &dst.join(e.file_name()), files, dirs)?;
        }
    } else if ft.is_file() {
        files.push((src.to_owned(), dst.to_owned()));
    }
    // Sockets, fifos, devices: not the kind of thing a dependency directory needs.
    Ok(())
}

/// Copy one file: a copy-on-write clone while the filesystem takes them, else a copy.
/// Its size, and whether it was cloned.
fn copy_file(src: &Path, dst: &Path, can_clone: &AtomicBool) -> std::io::Result<(u64, bool)> {
    let meta = std::fs::metadata(src)?;
    let mut cloned = false;
    if can_clone.load(Ordering::Relaxed) {
        use std::os::fd::AsRawFd;
        let input = std::fs::File::open(src)?;
        let output = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dst)?;
        // FICLONE = _IOW(0x94, 9, int)
        const FICLONE: nix::libc::c_ulong = 0x4004_9409;
        // SAFETY: both descriptors are open for the call; FICLONE reads only the int.
        let r = unsafe { nix::libc::ioctl(output.as_raw_fd(), FICLONE as _, input.as_raw_fd()) };
        if r == 0 {
            cloned = true;
            output.set_permissions(meta.permissions())?;
        } else {
            // This filesystem cannot (EOPNOTSUPP, EXDEV, EINVAL): copy from now on.
            can_clone.store(false, Ordering::Relaxed);
            drop(output);
            std::fs::remove_file(dst)?;
        }
    }
    if !cloned {
        std::fs::copy(src, dst)?;
    }
    if let (Ok(m), Ok(f)) = (
        meta.modified(),
        std::fs::OpenOptions::new().write(true).open(dst),
    ) {
        let _ = f.set_modified(m);
    }
    Ok((meta.len(), cloned))
}

/// Everything for a new worktree at `worktree` of the repository whose main checkout is
/// `repo`: what the main checkout has, then a `copy` path it lacks from the first of
/// `fallbacks` (other worlds' worktrees, newest first) that has it. Paths already in the
/// worktree are left as they are.
pub fn bootstrap(
    repo: &Path,
    worktree: &Path,
    copy: &[String],
    fallbacks: &[PathBuf],
) -> Result<Vec<Copied>, String> {
    let mut out = Vec::new();
    let from_main = wanted(repo, copy)?;
    for rel in &from_main {
        if std::fs::symlink_metadata(worktree.join(rel)).is_ok() {
            continue;
        }
        out.push(copy_path(repo, worktree, rel).map_err(|e| format!("copying {rel}: {e}"))?);
    }
    let literal = |c: &str| !c.contains(['*', '?', '[', '!']);
    for c in copy.iter().map(|c| c.trim_end_matches('/')) {
        if !literal(c)
            || from_main.iter().any(|m| m == c)
            || std::fs::symlink_metadata(worktree.join(c)).is_ok()
        {
            continue;
        }
        if let Some(fb) = fallbacks
            .iter()
            .find(|fb| fb.as_path() != worktree && fb.join(c).exists())
        {
            out.push(copy_path(fb, worktree, c).map_err(|e| format!("copying {c}: {e}"))?);
        }
    }
    Ok(out)
}
