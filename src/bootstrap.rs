//! A new world's worktree gets, before any command that needs them runs, what a fresh `git
//! worktree add` lacks: the ignored files `.worktreeinclude` lists (`.env`, local
//! certificates; gitignore syntax, the file other worktree tools read) and the dependency
//! directories `[project] copy` names (`node_modules`, `.venv`, build caches), from the main
//! checkout, or, for a `copy` path the main checkout lacks, from the newest other world that
//! has it.
//!
//! # How files come over
//! Clone, link, copy — in that order of preference, per path:
//! - every file is cloned copy-on-write (`FICLONE`: btrfs, XFS, bcachefs) where the
//!   filesystem can: no data copied, none shared;
//! - else, for the files inside a `copy` directory (mode `link`, the default), hard-linked,
//!   as pnpm links packages from its store and uv from its cache: no data copied, and a file
//!   edited in place is edited for every worktree that links it (replacing a file — what
//!   package managers, compilers and editors do — gives the world its own);
//! - else copied by several threads (`copy_file_range` in the kernel): another filesystem,
//!   `mode = "copy"`, `.worktreeinclude`'s files, a file `copy` names by itself (a
//!   lockfile, a `.env.local`: tools rewrite such files in place — npm its
//!   `package-lock.json` — which through a link would rewrite the main checkout's), and
//!   the bookkeeping below.
//!
//! Directories are made (never linked), with their modes and times; symlinks are made
//! again; a file's mode and time are kept (incremental builds compare them).
//!
//! # Bookkeeping: what is copied inside a linked directory
//! Only the files package managers and build tools rewrite in place (opened with
//! `O_TRUNC`, not written anew and renamed), found by tracing the tools themselves
//! ([`bookkeeping`]): npm's `node_modules/.package-lock.json`, yarn 1's `.yarn-integrity`,
//! yarn 4's `.yarn-state.yml` and `.package-map.json`, build caches under `node_modules`
//! (`.cache/`, `.vite/`), and uv's `.lock` at a virtualenv's top (a lock file: one inode
//! would make uv in one world wait for uv in another). pnpm's `.modules.yaml` and
//! `.pnpm/lock.yaml` are copied too, as the world's own record of its `node_modules`
//! (pnpm 9 replaces them by rename). Everything else is a package's own files and is
//! linked, hidden names or not: a Django app's `templates/.icons/` is package data. pip
//! and uv remove a file before writing it; npm and yarn write a package's files into a
//! new directory: none of them writes through a link.
//!
//! # Guarantees
//! - The files binky rewrites in a copied virtualenv (its `bin/` scripts, `.pth`,
//!   `direct_url.json`, egg-links, `pyvenv.cfg`) are written as new files and renamed into
//!   place, never through a link: the main checkout's venv is never changed.
//! - A path that is one file is never linked.
//! - A path appears in the worktree only whole (made under a temporary name, renamed).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use binky_controllers::spec::CopyMode;
use binky_controllers::worktree::{Copied, CopyHow, Planned};

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
        // Not `--no-empty-directory`: with it, git does not look into an untracked
        // directory that is not ignored as a whole, and misses the ignored files a pattern
        // names inside it (`conf/*.local` beside a `conf/notes.txt`); empty directories are
        // left out below instead.
        let mut args: Vec<String> = ["ls-files", "--others", "--ignored", "--directory", "-z"]
            .map(String::from)
            .to_vec();
        args.extend(lines.iter().map(|l| format!("--exclude={l}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for m in git_lines(from, &args, None)? {
            let empty_dir = m.ends_with('/')
                && std::fs::read_dir(from.join(&m)).is_ok_and(|mut d| d.next().is_none());
            if !empty_dir && !candidates.contains(&m) {
                candidates.push(m);
            }
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    // Only what git ignores: an untracked file that is not ignored is the user's work — but
    // for a file `copy` names outright (a lockfile the repository does not commit).
    let ignored = git_lines(
        from,
        &["check-ignore", "--no-index", "-z", "--stdin"],
        Some(candidates.join("\0")),
    )?;
    let named_file = |m: &str| {
        !m.ends_with('/')
            && copy
                .iter()
                .any(|c| literal(c) && c.trim_end_matches('/') == m)
            && !tracked(from, m)
    };
    Ok(candidates
        .into_iter()
        .filter(|m| ignored.contains(m) || named_file(m))
        .map(|m| m.trim_end_matches('/').to_owned())
        .collect())
}

/// Does git track `rel` (or anything under it) in `dir`?
fn tracked(dir: &Path, rel: &str) -> bool {
    git_lines(dir, &["ls-files", "-z", "--", rel], None).is_ok_and(|l| !l.is_empty())
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
/// into a new worktree: tracked ones (git checks them out already) and directories git does
/// not ignore (an untracked directory git does not ignore is someone's work in progress; a
/// file named outright is copied). Said by `binky check` and `binky up`, never skipped
/// without a word.
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
        } else if !ignored.contains(name) && *dir {
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

/// Bring `rel` from `from` into `to` (`to/rel` must not exist), by `mode`: what came and how.
pub fn copy_path(from: &Path, to: &Path, rel: &str, mode: CopyMode) -> std::io::Result<Copied> {
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
    let dst = done.with_file_name(format!(
        ".{name}{}",
        binky_controllers::template::BRINGING_SUFFIX
    ));
    if std::fs::symlink_metadata(&dst).is_ok() {
        crate::trash::delete_tree(&dst);
        let _ = std::fs::remove_file(&dst);
    }
    let counts = copy_into(&src, &dst, from, to, mode).inspect_err(|_| {
        // Nothing half made stays in the user's worktree.
        crate::trash::delete_tree(&dst);
        let _ = std::fs::remove_file(&dst);
    })?;
    std::fs::rename(&dst, &done)?;
    Ok(Copied {
        path: rel.to_owned(),
        from: from.to_owned(),
        files: counts.files,
        bytes: counts.bytes,
        how: CopyHow::of(counts.files, counts.cloned, counts.linked),
        copied: counts.files - counts.cloned - counts.linked,
        note: (mode == CopyMode::Link && counts.cross_device).then(|| {
            "copied: the worktree is on another filesystem, where files cannot be linked".to_owned()
        }),
        took: started.elapsed(),
    })
}

/// What [`copy_into`] did.
#[derive(Default)]
struct Counts {
    files: u64,
    bytes: u64,
    cloned: u64,
    linked: u64,
    /// Linking was refused as across filesystems.
    cross_device: bool,
}

/// Bring `src` to `dst` (the temporary name) by `mode`; a virtualenv is made the new
/// worktree's before it takes its place.
fn copy_into(
    src: &Path,
    dst: &Path,
    from: &Path,
    to: &Path,
    mode: CopyMode,
) -> std::io::Result<Counts> {
    // Directories are made as the walk finds them; each file it finds goes to one of
    // several threads through a bounded queue, so what the walk holds at once does not grow
    // with the tree (a 60,000-file `.venv` listed whole held 12 MB of paths, and the
    // daemon's resident memory kept that high-water mark).
    let mut dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
    // A path that is one file (a lockfile, a `.env.local`) is the world's own: the tools
    // that use such a file rewrite it in place (npm its `package-lock.json`).
    let top = if std::fs::symlink_metadata(src)?.is_dir() {
        Place::Package
    } else {
        Place::Own
    };
    let files = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let cloned = AtomicU64::new(0);
    let linked = AtomicU64::new(0);
    let ways = Ways {
        clone: AtomicBool::new(true),
        link: AtomicBool::new(mode == CopyMode::Link),
        cross_device: AtomicBool::new(false),
    };
    let failed: std::sync::Mutex<Option<std::io::Error>> = std::sync::Mutex::new(None);
    // A file failed: the walk stops, the threads take nothing more.
    let stop = AtomicBool::new(false);
    let bring = |(src, dst, own): FileJob| -> bool {
        match bring_file(&src, &dst, &ways, own) {
            Ok((n, way)) => {
                bytes.fetch_add(n, Ordering::Relaxed);
                match way {
                    Way::Cloned => cloned.fetch_add(1, Ordering::Relaxed),
                    Way::Linked => linked.fetch_add(1, Ordering::Relaxed),
                    Way::Copied => 0,
                };
                true
            }
            Err(e) => {
                let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                f.get_or_insert(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", src.display()),
                ));
                stop.store(true, Ordering::Relaxed);
                false
            }
        }
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get() * 4)
        .unwrap_or(8)
        .clamp(4, 16);
    let (tx, rx) = std::sync::mpsc::sync_channel::<FileJob>(QUEUED_FILES);
    let rx = std::sync::Mutex::new(rx);
    let walked = std::thread::scope(|s| {
        let (rx, bring, stop) = (&rx, &bring, &stop);
        // Dropped when the walk returns: the queue's end lets the threads finish.
        let tx = tx;
        for _ in 0..threads {
            s.spawn(move || loop {
                let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                // The walk is over (or failed), or a file failed: this thread is done.
                let Ok(job) = job else { return };
                if stop.load(Ordering::Relaxed) || !bring(job) {
                    return;
                }
            });
        }
        Walk {
            files: &mut |job| {
                if stop.load(Ordering::Relaxed) {
                    return Err(std::io::Error::other("stopped: a file failed"));
                }
                files.fetch_add(1, Ordering::Relaxed);
                tx.send(job)
                    .map_err(|_| std::io::Error::other("stopped: a file failed"))
            },
            dirs: &mut dirs,
            symlink: binky_platform::clone::symlink,
            followed: Vec::new(),
        }
        .collect(src, dst, top)
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    walked?;
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
    Ok(Counts {
        files: files.into_inner(),
        bytes: bytes.into_inner(),
        cloned: cloned.into_inner(),
        linked: linked.into_inner(),
        cross_device: ways.cross_device.into_inner(),
    })
}

/// In the virtualenv copied to `venv`, the paths of the checkout it came from (`from`)
/// become the new worktree's (`to`): script shebangs and `activate*` in `bin/`, `.pth`,
/// `.egg-link` and `direct_url.json` files (editable installs) in `lib/…/site-packages`.
fn relocate_venv(venv: &Path, from: &Path, to: &Path) {
    let (old, new) = (format!("{}/", from.display()), format!("{}/", to.display()));
    let mut files: Vec<PathBuf> = vec![venv.join("pyvenv.cfg")];
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
        // A new file renamed into place: the old one may be a hard link to the checkout's.
        let _ = replace_file(&f, text.as_bytes(), &meta);
    }
}

/// Write `bytes` to a new file beside `path` (with `meta`'s mode) and rename it over `path`:
/// whatever else `path`'s old inode is linked from keeps its content.
fn replace_file(path: &Path, bytes: &[u8], meta: &std::fs::Metadata) -> std::io::Result<()> {
    binky_controllers::whole_file::Whole::new()
        .mode(binky_platform::fs::mode(meta).unwrap_or(0o644))
        .write(path, bytes)
}

/// One file to bring: from, to, and whether it must be the world's own (never linked).
type FileJob = (PathBuf, PathBuf, bool);

/// How many files the walk may list ahead of the threads that bring them.
const QUEUED_FILES: usize = 1024;

/// Where a file is, for whether it may be linked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Package files: linked.
    Package,
    /// A package store's own directory (`node_modules/.pnpm`): its directories are
    /// packages, its files (`lock.yaml`) the package manager's bookkeeping.
    Store,
    /// Bookkeeping, a cache, a store's bookkeeping, a path that is one file: the world's own.
    Own,
}

/// The files package managers write in place in a `node_modules` directory (traced with
/// `strace -e openat,rename`: opened `O_WRONLY|O_TRUNC` where they are, not written anew
/// and renamed): npm 11's hidden lockfile, yarn 1's integrity file, yarn 4's install state
/// and package map; and pnpm's `.modules.yaml` (pnpm 9 replaces it by rename; kept the
/// world's own as the record of its own `node_modules`).
const NODE_MODULES_BOOKKEEPING: &[&str] = &[
    ".package-lock.json",
    ".yarn-integrity",
    ".yarn-state.yml",
    ".package-map.json",
    ".modules.yaml",
];

/// The cache directories build tools keep in `node_modules` and rewrite as they work
/// (`find-cache-dir`'s `.cache/`: babel-loader, terser, webpack; Vite's dependency cache).
const NODE_MODULES_CACHES: &[&str] = &[".cache", ".vite"];

/// Is `name` (a directory when `dir`) in `parent` bookkeeping that a package manager or a
/// build tool rewrites in place, rather than a package's own file? Through a hard link,
/// an in-place write would change the main checkout's and every other world's. Only the
/// names the tools were seen writing so: a hidden name is not enough (packages ship their
/// own: a Django app's `templates/.icons/`).
fn bookkeeping(parent: &Path, name: &std::ffi::OsStr, dir: bool) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    if parent.file_name().is_some_and(|p| p == "node_modules") {
        return if dir {
            NODE_MODULES_CACHES.contains(&name)
        } else {
            NODE_MODULES_BOOKKEEPING.contains(&name)
        };
    }
    // uv's lock file at a virtualenv's top, opened to lock at each `uv sync`: one inode
    // would make uv in one world wait for uv in another.
    !dir && name == ".lock" && parent.join("pyvenv.cfg").is_file()
}

/// Is the hidden directory `name` in `parent` a package store — packages a package manager
/// lays out under a hidden name and only ever replaces, never edits in place — rather than
/// bookkeeping or a cache? pnpm's `node_modules/.pnpm/<name>@<version>/node_modules/<name>/`
/// (where nearly every package of a pnpm project is; `node_modules/<name>` are symlinks
/// into it).
fn package_store(parent: &Path, name: &std::ffi::OsStr) -> bool {
    name == ".pnpm" && parent.file_name().is_some_and(|p| p == "node_modules")
}

/// One walk of a path to bring: where its files go, the directories it made, and how it
/// makes a symbolic link.
struct Walk<'a> {
    /// Takes each file to bring.
    files: &'a mut dyn FnMut(FileJob) -> std::io::Result<()>,
    /// The directories made (source, made), for their modes and times at the end.
    dirs: &'a mut Vec<(PathBuf, PathBuf)>,
    /// Makes a symbolic link (`binky_platform::clone::symlink`; a refusing one in tests).
    symlink: fn(&Path, &Path) -> std::io::Result<()>,
    /// Where the links walked in place of links are (their folders, canonical): a link back
    /// to one of them, or above, would be walked for ever.
    followed: Vec<PathBuf>,
}

impl Walk<'_> {
    /// Walk `src`: directories made at `dst` now (writable while they fill), symlinks made
    /// now, files listed, each marked the world's own when it is [`bookkeeping`], under a
    /// bookkeeping directory, directly in a package store (pnpm's `.pnpm/lock.yaml`), or
    /// when `place` says so already. A package store (pnpm's `node_modules/.pnpm`) is
    /// packages, linked like them.
    fn collect(&mut self, src: &Path, dst: &Path, place: Place) -> std::io::Result<()> {
        let meta = std::fs::symlink_metadata(src)?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(src)?;
            match (self.symlink)(&target, dst) {
                Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                    return self.instead_of_link(src, &target, dst);
                }
                made => made?,
            }
        } else if ft.is_dir() {
            std::fs::create_dir(dst)?;
            binky_platform::fs::set_mode(dst, 0o755 | 0o200)?;
            self.dirs.push((src.to_owned(), dst.to_owned()));
            for e in std::fs::read_dir(src)? {
                let e = e?;
                let name = e.file_name();
                let dir = e.file_type()?.is_dir();
                let place = match place {
                    Place::Own => Place::Own,
                    _ if bookkeeping(src, &name, dir) => Place::Own,
                    _ if package_store(src, &name) => Place::Store,
                    Place::Store if !dir => Place::Own,
                    _ => Place::Package,
                };
                self.collect(&e.path(), &dst.join(&name), place)?;
            }
        } else if ft.is_file() {
            (self.files)((src.to_owned(), dst.to_owned(), place != Place::Package))?;
        }
        // Sockets, fifos, devices: not the kind of thing a dependency directory needs.
        Ok(())
    }

    /// The system makes no symbolic link (Windows without Developer Mode): the world gets a
    /// copy of what the link `src` points to (`target`), its own, never linked. A link that
    /// points nowhere, or to a folder being walked or above one (it would be walked for
    /// ever), is left out.
    fn instead_of_link(&mut self, src: &Path, target: &Path, dst: &Path) -> std::io::Result<()> {
        let Some(here) = src.parent().and_then(|p| std::fs::canonicalize(p).ok()) else {
            return Ok(());
        };
        let Ok(real) = std::fs::canonicalize(here.join(target)) else {
            return Ok(());
        };
        if here.starts_with(&real) || self.followed.iter().any(|f| f.starts_with(&real)) {
            return Ok(());
        }
        self.followed.push(here);
        let walked = self.collect(&real, dst, Place::Own);
        self.followed.pop();
        walked
    }
}

/// How one file came over.
enum Way {
    Cloned,
    Linked,
    Copied,
}

/// What still works for the files of one path: each is given up for the rest once it fails.
struct Ways {
    clone: AtomicBool,
    link: AtomicBool,
    /// Linking failed as across filesystems.
    cross_device: AtomicBool,
}

/// Bring one file: a copy-on-write clone while the filesystem takes them, else a hard link
/// while the mode allows and the filesystem takes them, else a copy. Its size, and how.
fn bring_file(src: &Path, dst: &Path, ways: &Ways, own: bool) -> std::io::Result<(u64, Way)> {
    let meta = std::fs::metadata(src)?;
    if ways.clone.load(Ordering::Relaxed) {
        if binky_platform::clone::clone_file(src, dst)? {
            // macOS' clone has the source's mode already, a read-only one too, which refuses
            // a handle opened to write: its time then through one opened to read (on Unix
            // the owner sets a file's times whatever its mode), and its mode by path.
            if let Ok(m) = meta.modified() {
                let output = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dst)
                    .or_else(|_| std::fs::File::open(dst));
                if let Ok(output) = output {
                    let _ = output.set_modified(m);
                }
            }
            std::fs::set_permissions(dst, meta.permissions())?;
            return Ok((meta.len(), Way::Cloned));
        }
        // This filesystem cannot: not again for this path.
        ways.clone.store(false, Ordering::Relaxed);
    }
    if !own && ways.link.load(Ordering::Relaxed) {
        match std::fs::hard_link(src, dst) {
            // The same inode: its mode and time are the source's already.
            Ok(()) => return Ok((meta.len(), Way::Linked)),
            Err(e) => match binky_platform::clone::refusal(&e) {
                binky_platform::clone::Refusal::CrossDevice => {
                    ways.cross_device.store(true, Ordering::Relaxed);
                    ways.link.store(false, Ordering::Relaxed);
                }
                // One file with too many links is copied alone.
                binky_platform::clone::Refusal::TooManyLinks => {}
                // Refused here (a filesystem without links, no permission): copy the rest.
                binky_platform::clone::Refusal::Other => {
                    ways.link.store(false, Ordering::Relaxed);
                }
            },
        }
    }
    std::fs::copy(src, dst)?;
    if let (Ok(m), Ok(f)) = (
        meta.modified(),
        std::fs::OpenOptions::new().write(true).open(dst),
    ) {
        let _ = f.set_modified(m);
    }
    Ok((meta.len(), Way::Copied))
}

/// The files under `paths` of `worktree` (each with a time, ms since the epoch) that are
/// hard links — more than one link — modified after that time, each with which of
/// `checkouts` hold the same file (device and inode) at the same place: a write in place
/// through a link keeps the inode and sets the modification time, making a link sets
/// neither. One `lstat` per file under those paths (symlinks are not followed), one per
/// checkout for each file found.
pub fn changed_links(
    worktree: &Path,
    paths: &[(String, i64)],
    checkouts: &[PathBuf],
) -> Vec<binky_controllers::inplace::Changed> {
    let mut found = Vec::new();
    for (path, after) in paths {
        let mut stack = vec![worktree.join(path)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(kind) = e.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(e.path());
                    continue;
                }
                if !kind.is_file() {
                    continue;
                }
                let Ok(meta) = e.metadata() else {
                    continue;
                };
                let Some(changed_at) = modified_ms(&meta) else {
                    continue;
                };
                if changed_at <= *after {
                    continue;
                }
                let Ok(me) = binky_platform::clone::identity(&e.path()) else {
                    continue;
                };
                if me.links < 2 {
                    continue;
                }
                let file = e.path();
                let Ok(rel) = file.strip_prefix(worktree) else {
                    continue;
                };
                let holders = checkouts
                    .iter()
                    .filter(|c| {
                        binky_platform::clone::identity(&c.join(rel)).is_ok_and(|i| i.id == me.id)
                    })
                    .cloned()
                    .collect();
                found.push(binky_controllers::inplace::Changed {
                    file: rel.to_string_lossy().into_owned(),
                    path: path.clone(),
                    changed_at,
                    holders,
                });
            }
        }
    }
    found
}

/// When `meta`'s file was last modified, in ms since the epoch (before it: negative).
fn modified_ms(meta: &std::fs::Metadata) -> Option<i64> {
    let at = meta.modified().ok()?;
    Some(match at.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).ok()?,
        Err(before) => -i64::try_from(before.duration().as_millis()).ok()?,
    })
}

/// What a new worktree at `worktree` of the repository whose main checkout is `repo` is to
/// get: what the main checkout has (`.worktreeinclude`'s and `copy`'s), then a literal
/// `copy` path it lacks from the first of `fallbacks` (other worlds' worktrees, newest
/// first) that has it; each with its mode (`modes` for `copy`'s, by path; `.worktreeinclude`
/// files are copied: a world edits its own `.env`). Paths already in the worktree are left
/// out.
pub fn plan(
    repo: &Path,
    worktree: &Path,
    copy: &[String],
    modes: &std::collections::BTreeMap<String, CopyMode>,
    fallbacks: &[PathBuf],
) -> Result<Vec<Planned>, String> {
    let literal = |c: &str| !c.contains(['*', '?', '[', '!']);
    let mode_of = |rel: &str| -> CopyMode {
        copy.iter()
            .map(|c| c.trim_end_matches('/'))
            .find(|c| {
                if literal(c) {
                    *c == rel
                } else {
                    binky_controllers::glob::glob_match(c, rel)
                }
            })
            .map(|c| {
                modes
                    .iter()
                    .find(|(k, _)| k.trim_end_matches('/') == c)
                    .map_or(CopyMode::Link, |(_, m)| *m)
            })
            // Not `copy`'s: `.worktreeinclude`'s.
            .unwrap_or(CopyMode::Copy)
    };
    let mut out = Vec::new();
    let from_main = wanted(repo, copy)?;
    for rel in &from_main {
        if std::fs::symlink_metadata(worktree.join(rel)).is_ok() {
            continue;
        }
        out.push(Planned {
            path: rel.clone(),
            from: repo.to_owned(),
            mode: mode_of(rel),
        });
    }
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
            out.push(Planned {
                path: c.to_owned(),
                from: fb.clone(),
                mode: mode_of(c),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Which file `p` is, after links.
    fn inode(p: &Path) -> binky_platform::clone::FileId {
        binky_platform::clone::identity(&std::fs::canonicalize(p).unwrap())
            .unwrap()
            .id
    }

    /// Inside a linked directory only what package managers and build tools rewrite in
    /// place is the world's own; a package's own hidden files are linked like the rest.
    #[test]
    fn only_bookkeeping_is_copied_inside_a_linked_directory_and_packages_hidden_files_are_linked() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("main"), dir.path().join("world"));
        let nm = from.join("node_modules");
        let own = [
            "node_modules/.package-lock.json",
            "node_modules/.yarn-integrity",
            "node_modules/.yarn-state.yml",
            "node_modules/.package-map.json",
            "node_modules/.modules.yaml",
            "node_modules/.cache/babel-loader/a.json",
            "node_modules/.vite/deps/_metadata.json",
            "node_modules/.pnpm/lock.yaml",
        ];
        let linked = [
            "node_modules/pkg/index.js",
            "node_modules/pkg/.npmignore",
            "node_modules/pkg/.github/workflow.yml",
            "node_modules/pkg/dist/.cache/data.json",
            "node_modules/.pnpm/left-pad@1.3.0/node_modules/left-pad/index.js",
        ];
        for f in own.iter().chain(&linked) {
            write(&from.join(f), f);
        }
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        binky_platform::clone::symlink(Path::new("../pkg/index.js"), &nm.join(".bin/pkg")).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        let came = copy_path(&from, &to, "node_modules", CopyMode::Link).unwrap();
        if came.how == CopyHow::Cloned {
            // A copy-on-write filesystem shares nothing: nothing to tell apart.
            return;
        }
        for f in own {
            assert_ne!(inode(&from.join(f)), inode(&to.join(f)), "{f} is linked");
            assert_eq!(std::fs::read(to.join(f)).unwrap(), f.as_bytes());
        }
        for f in linked {
            assert_eq!(
                inode(&from.join(f)),
                inode(&to.join(f)),
                "{f} is not linked"
            );
        }
        assert_eq!(
            std::fs::read_link(to.join("node_modules/.bin/pkg")).unwrap(),
            PathBuf::from("../pkg/index.js")
        );
        assert_eq!(came.copied, own.len() as u64);
    }

    /// A virtualenv's packages are linked, their hidden data too (a Django app's 30,000
    /// icons under `templates/.icons/`); uv's lock file at its top is the world's own.
    #[test]
    fn a_venvs_package_data_under_hidden_names_is_linked_and_uvs_lock_is_the_worlds_own() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("main"), dir.path().join("world"));
        let venv = from.join(".venv");
        write(&venv.join("pyvenv.cfg"), "home = /usr/bin\n");
        write(&venv.join(".lock"), "");
        write(&venv.join(".gitignore"), "*\n");
        let icon = "lib/python3.11/site-packages/app/templates/.icons/a.svg";
        write(&venv.join(icon), "<svg/>");
        let lock_in_a_package = "lib/python3.11/site-packages/app/.lock";
        write(&venv.join(lock_in_a_package), "data");
        std::fs::create_dir_all(&to).unwrap();
        let came = copy_path(&from, &to, ".venv", CopyMode::Link).unwrap();
        if came.how == CopyHow::Cloned {
            return;
        }
        let world = to.join(".venv");
        assert_ne!(inode(&venv.join(".lock")), inode(&world.join(".lock")));
        for f in [icon, lock_in_a_package, ".gitignore"] {
            assert_eq!(inode(&venv.join(f)), inode(&world.join(f)), "{f}");
        }
    }

    /// A linked file written in place after its bring-in is found, with the checkouts that
    /// hold it; one replaced (a new file renamed into place) is not, nor one written before.
    #[test]
    fn a_linked_file_written_in_place_is_found_with_its_holders_and_a_replaced_one_is_not() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("main"), dir.path().join("world"));
        // Installed an hour ago.
        let installed = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for f in ["a.js", "b.js", "c.js"] {
            let path = from.join("node_modules/pkg").join(f);
            write(&path, "1;\n");
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(installed).unwrap();
        }
        std::fs::create_dir_all(&to).unwrap();
        // Brought a minute ago (the kernel's file times lag the clock by up to a tick).
        let began = binky_controllers::store::now_ms() - 60_000;
        let came = copy_path(&from, &to, "node_modules", CopyMode::Link).unwrap();
        if came.how != CopyHow::Linked {
            // Cloned: nothing is shared, nothing to find.
            return;
        }
        // Written before: not after the bring-in.
        assert!(changed_links(
            &to,
            &[("node_modules".into(), began)],
            std::slice::from_ref(&from)
        )
        .is_empty());
        let pkg = to.join("node_modules/pkg");
        std::fs::OpenOptions::new()
            .append(true)
            .open(pkg.join("a.js"))
            .unwrap()
            .write_all(b"2;\n")
            .unwrap();
        std::fs::write(pkg.join(".b.js.new"), "replaced\n").unwrap();
        std::fs::rename(pkg.join(".b.js.new"), pkg.join("b.js")).unwrap();
        // Another checkout with its own file at that place, itself linked from elsewhere (as
        // many links as the shared one): not a holder, the file is not the same.
        let other = dir.path().join("other");
        write(&other.join("node_modules/pkg/a.js"), "1;\n2;\n");
        std::fs::hard_link(
            other.join("node_modules/pkg/a.js"),
            other.join("node_modules/pkg/a-again.js"),
        )
        .unwrap();
        let found = changed_links(
            &to,
            &[("node_modules".into(), began)],
            &[from.clone(), dir.path().join("elsewhere"), other],
        );
        assert_eq!(found.len(), 1, "{found:?}");
        // A path in the system's own separators (`node_modules\pkg\a.js` on Windows).
        assert_eq!(
            Path::new(&found[0].file),
            Path::new("node_modules/pkg/a.js")
        );
        assert_eq!(found[0].path, "node_modules");
        assert_eq!(found[0].holders, vec![from.clone()]);
        assert_eq!(
            std::fs::read_to_string(from.join("node_modules/pkg/a.js")).unwrap(),
            "1;\n2;\n",
            "what a link shares"
        );
    }

    /// Where the system makes no symbolic link (Windows without Developer Mode), a link
    /// comes over as a copy of what it points to, the world's own; one that points nowhere,
    /// or back above itself, or round through another, is left out rather than walked for
    /// ever.
    #[cfg(unix)]
    #[test]
    fn where_no_symlink_can_be_made_the_world_gets_a_copy_of_what_it_points_to_and_no_loop() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (
            dir.path().join("main/node_modules"),
            dir.path().join("world"),
        );
        write(&from.join(".pnpm/pkg@1/node_modules/pkg/index.js"), "js");
        write(&from.join("a/x"), "x");
        write(&from.join("b/y"), "y");
        let link = |target: &str, at: &str| {
            binky_platform::clone::symlink(Path::new(target), &from.join(at)).unwrap()
        };
        link(".pnpm/pkg@1/node_modules/pkg", "pkg");
        link(".pnpm/pkg@1/node_modules/pkg/index.js", "main.js");
        link("..", "up");
        link("nowhere", "dangling");
        link("../b", "a/to-b");
        link("../a", "b/to-a");
        let mut jobs = Vec::new();
        let mut dirs = Vec::new();
        Walk {
            files: &mut |job| {
                jobs.push(job);
                Ok(())
            },
            dirs: &mut dirs,
            symlink: |_, _| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "no symbolic links here",
                ))
            },
            followed: Vec::new(),
        }
        .collect(&from, &to, Place::Package)
        .unwrap();
        let mut got: Vec<(String, bool)> = jobs
            .iter()
            .map(|(_, d, own)| (d.strip_prefix(&to).unwrap().display().to_string(), *own))
            .collect();
        got.sort();
        let want = [
            (".pnpm/pkg@1/node_modules/pkg/index.js", false),
            ("a/to-b/y", true),
            ("a/x", false),
            ("b/to-a/x", true),
            ("b/y", false),
            ("main.js", true),
            ("pkg/index.js", true),
        ]
        .map(|(d, own)| (d.to_owned(), own));
        assert_eq!(got, want);
        // What a link came over as reads as its target does.
        let (src, _, _) = jobs
            .iter()
            .find(|(_, d, _)| d.ends_with("main.js"))
            .unwrap();
        assert_eq!(std::fs::read_to_string(src).unwrap(), "js");
        assert!(!to.join("up").exists() && !to.join("dangling").exists());
    }

    /// A path that is one file (a lockfile named in `copy`) is never linked: npm rewrites
    /// `package-lock.json` in place.
    #[test]
    fn a_path_that_is_one_file_is_copied_never_linked() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("main"), dir.path().join("world"));
        write(
            &from.join("package-lock.json"),
            "{\"lockfileVersion\": 2}\n",
        );
        std::fs::create_dir_all(&to).unwrap();
        let came = copy_path(&from, &to, "package-lock.json", CopyMode::Link).unwrap();
        assert_ne!(came.how, CopyHow::Linked);
        assert_ne!(
            inode(&from.join("package-lock.json")),
            inode(&to.join("package-lock.json"))
        );
        assert_eq!(
            binky_platform::clone::identity(&from.join("package-lock.json"))
                .unwrap()
                .links,
            1
        );
    }

    /// A tree of more files than the walk may list ahead of the threads comes over whole,
    /// each file once, with its bytes.
    #[test]
    fn a_tree_larger_than_the_queue_comes_over_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("main"), dir.path().join("world"));
        let n = QUEUED_FILES * 3 + 7;
        for i in 0..n {
            write(
                &from.join(format!(".venv/lib/p{}/f{i}.py", i % 40)),
                &format!("x = {i}\n"),
            );
        }
        std::fs::create_dir_all(&to).unwrap();
        let came = copy_path(&from, &to, ".venv", CopyMode::Link).unwrap();
        assert_eq!(came.files, n as u64);
        for i in (0..n).step_by(97) {
            let rel = format!(".venv/lib/p{}/f{i}.py", i % 40);
            assert_eq!(
                std::fs::read_to_string(to.join(&rel)).unwrap(),
                format!("x = {i}\n")
            );
        }
        assert!(!to.join("..venv.binky-copy").exists());
    }
}
