//! Files and folders only their owner may read: the local CA's key, a server's password file,
//! binky's own state.
//!
//! Unix has permission bits, and binky sets them (0600 files, 0700 folders). Windows has access
//! lists instead; a new file takes its folder's, and binky's home lives in the user's profile,
//! which only the user and the administrators can read, so binky sets nothing more there.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

/// Opens `path` for writing, created or truncated, readable and writable by its owner alone
/// where the system has permission bits (0600 on Unix). On Windows the file takes its
/// folder's access list.
pub fn create_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).truncate(true).write(true);
    with_mode(&mut options, 0o600).open(path)
}

/// Sets the permission bits a file is created with, where the system has them (Unix); on
/// Windows `options` is returned as it was.
pub fn with_mode(options: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = mode;
        options
    }
}

/// Gives `path` the permission bits `mode` where the system has them (Unix); on Windows it
/// does nothing and says so with `Ok(false)`.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        Ok(true)
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(false)
    }
}

/// Makes the folder `dir` reachable by its owner alone (0700 on Unix; see the module's note
/// for Windows).
pub fn restrict_dir(dir: &Path) -> io::Result<bool> {
    set_mode(dir, 0o700)
}

/// Writes the folder `dir`'s entries to disk, so that a rename into it outlives a crash
/// (`fsync` of the folder on Unix). On Windows NTFS journals the rename itself and a folder
/// cannot be opened as a file: nothing to do.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Renames `from` over `to`, replacing it whole. On Unix one `rename(2)`. On Windows a
/// file being replaced, or read, by another thread or program at that moment refuses with
/// "access denied" or a sharing violation for a moment (an antivirus's scan, a second writer's
/// rename of the same file): the rename is tried again for up to two seconds, as npm's
/// `write-file-atomic` does, before the error is returned.
pub fn replace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        // ERROR_ACCESS_DENIED and ERROR_SHARING_VIOLATION: the file is busy, not forbidden.
        const BUSY: [i32; 2] = [5, 32];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut wait = std::time::Duration::from_millis(1);
        loop {
            match std::fs::rename(from, to) {
                Err(e)
                    if e.raw_os_error().is_some_and(|c| BUSY.contains(&c))
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(std::time::Duration::from_millis(50));
                }
                done => return done,
            }
        }
    }
    #[cfg(not(windows))]
    {
        std::fs::rename(from, to)
    }
}

/// The system's hosts file: `/etc/hosts` on Unix; `%SystemRoot%\System32\drivers\etc\hosts`
/// on Windows (`C:\Windows` when `SystemRoot` is not set).
pub fn hosts_file() -> std::path::PathBuf {
    if cfg!(windows) {
        let root = std::env::var_os("SystemRoot")
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| r"C:\Windows".into());
        Path::new(&root).join(r"System32\drivers\etc\hosts")
    } else {
        "/etc/hosts".into()
    }
}

/// Is there a program called `program` in the folder `dir` that can be run: a file with an
/// execute bit on Unix; `program`, or it with `.exe`, `.cmd`, `.bat` or `.com`, on Windows.
pub fn executable_in(dir: &Path, program: &str) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        ["", ".exe", ".cmd", ".bat", ".com"].iter().any(|ext| {
            std::fs::metadata(dir.join(format!("{program}{ext}"))).is_ok_and(|m| m.is_file())
        })
    }
}

/// How many files may be watched for changes at once, where the system has such a limit
/// and says it. Linux: one user's, `fs.inotify.max_user_watches`. macOS and the BSDs: this
/// process's soft limit of open files (`RLIMIT_NOFILE`; kqueue holds one open file a
/// watched file or folder, besides the files the process opens for itself).
// `rlim_t` is u64 on macOS and i64 on FreeBSD: the cast is needed on one of them.
#[allow(clippy::unnecessary_cast)]
pub fn watch_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .ok()?
            .trim()
            .parse()
            .ok()
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let mut limit = nix::libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is ours, the structure the call fills.
        let rc = unsafe { nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut limit) };
        (rc == 0 && limit.rlim_cur != nix::libc::RLIM_INFINITY).then_some(limit.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// How the system tells binky that files changed, for what a person is told when it can
/// take no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watching {
    /// Linux's inotify: a watch a folder, up to `fs.inotify.max_user_watches` a user.
    Inotify,
    /// kqueue (macOS, the BSDs): an open file a watched file and folder, up to the
    /// process's limit of open files.
    Kqueue,
    /// Windows' `ReadDirectoryChangesW`: no count binky can run out of.
    DirectoryChanges,
}

impl Watching {
    /// This system's.
    pub fn current() -> Watching {
        if cfg!(target_os = "linux") {
            Watching::Inotify
        } else if cfg!(windows) {
            Watching::DirectoryChanges
        } else {
            Watching::Kqueue
        }
    }
}

/// What the watcher says when `watching` refused one more watch for want of room, `limit`
/// being [`watch_limit`]: which limit it is, and how a person raises it.
pub fn watch_limit_reached(watching: Watching, limit: Option<u64>) -> String {
    let limit = limit.map_or_else(|| "?".to_owned(), |n| n.to_string());
    match watching {
        Watching::Inotify => format!(
            "the inotify watch limit is reached (fs.inotify.max_user_watches = {limit}); raise it with `sudo sysctl fs.inotify.max_user_watches=524288`"
        ),
        Watching::Kqueue => format!(
            "the daemon has as many files open as it may ({limit}; kqueue, which watches files here, holds one open for every watched file and folder, and the daemon raised its limit at start to the hard limit, at most kern.maxfilesperproc): let a process have more with `sudo sysctl kern.maxfiles=524288 kern.maxfilesperproc=262144` and `binky daemon restart`, or narrow the services' `watch` globs"
        ),
        Watching::DirectoryChanges => format!(
            "Windows refused to watch one more folder (limit {limit}); narrow the services' `watch` globs"
        ),
    }
}

/// Is `path` a file (after links) that can be run: an execute bit on Unix; on Windows an
/// `.exe`, `.cmd`, `.bat` or `.com`.
pub fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        path.extension().is_some_and(|e| {
            ["exe", "cmd", "bat", "com"]
                .iter()
                .any(|x| e.eq_ignore_ascii_case(x))
        })
    }
}

/// How many files this user's processes watch right now, where the system says (Linux:
/// the `inotify wd:` lines of `/proc/<pid>/fdinfo/*` of the user's processes).
pub fn watches_in_use() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let uid = nix::unistd::getuid().as_raw();
        let mut used = 0u64;
        for p in std::fs::read_dir("/proc").ok()?.flatten() {
            let Ok(meta) = p.metadata() else { continue };
            if meta.uid() != uid {
                continue;
            }
            let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else {
                continue;
            };
            for fd in fds.flatten() {
                if let Ok(text) = std::fs::read_to_string(fd.path()) {
                    used += text
                        .lines()
                        .filter(|l| l.starts_with("inotify wd:"))
                        .count() as u64;
                }
            }
        }
        Some(used)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// A file's permission bits (the low 12: `0o600`, …) where the system has them, else `None`.
pub fn mode(meta: &Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Some(meta.permissions().mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn running_out_of_watches_names_the_systems_limit_and_its_fix() {
        let linux = super::watch_limit_reached(super::Watching::Inotify, Some(8192));
        assert!(
            linux.contains("fs.inotify.max_user_watches = 8192"),
            "{linux}"
        );
        let mac = super::watch_limit_reached(super::Watching::Kqueue, Some(256));
        for part in [
            "(256;",
            "kqueue",
            "kern.maxfilesperproc",
            "binky daemon restart",
            "`watch` globs",
        ] {
            assert!(mac.contains(part), "{part:?} not in {mac}");
        }
        assert!(!mac.contains("inotify"), "{mac}");
        let unknown = super::watch_limit_reached(super::Watching::Kqueue, None);
        assert!(unknown.contains("(?;"), "{unknown}");
        let expected = if cfg!(target_os = "linux") {
            super::Watching::Inotify
        } else if cfg!(windows) {
            super::Watching::DirectoryChanges
        } else {
            super::Watching::Kqueue
        };
        assert_eq!(super::Watching::current(), expected);
    }

    use super::*;

    #[test]
    fn the_hosts_file_is_where_the_system_keeps_it() {
        let hosts = hosts_file();
        assert!(hosts.is_file(), "{}", hosts.display());
        let text = std::fs::read_to_string(&hosts).unwrap();
        assert!(text.contains("localhost"), "{}: {text}", hosts.display());
    }
    use std::io::Write;

    #[test]
    fn a_private_file_is_its_owners_alone_and_a_second_write_truncates_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        create_private(&path)
            .unwrap()
            .write_all(b"a longer secret")
            .unwrap();
        create_private(&path).unwrap().write_all(b"short").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
        let meta = std::fs::metadata(&path).unwrap();
        if cfg!(unix) {
            assert_eq!(mode(&meta), Some(0o600));
        } else {
            assert_eq!(mode(&meta), None);
        }
    }

    #[test]
    fn a_program_is_found_only_where_it_can_be_run() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!executable_in(dir.path(), "tool"));
        let name = if cfg!(unix) { "tool" } else { "tool.exe" };
        std::fs::write(dir.path().join(name), b"#!/bin/sh\n").unwrap();
        if cfg!(unix) {
            // Not yet executable.
            assert!(!executable_in(dir.path(), "tool"));
            set_mode(&dir.path().join(name), 0o755).unwrap();
        }
        assert!(executable_in(dir.path(), "tool"));
        // A folder of that name is no program.
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(!executable_in(dir.path(), "sub"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_watch_made_here_is_counted_in_use_and_within_the_limit() {
        let fd = nix::sys::inotify::Inotify::init(nix::sys::inotify::InitFlags::empty()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        fd.add_watch(dir.path(), nix::sys::inotify::AddWatchFlags::IN_CREATE)
            .unwrap();
        let during = watches_in_use().unwrap();
        assert!(during >= 1, "our own watch is not counted");
        assert!(watch_limit().is_some_and(|l| l >= during));
    }

    #[test]
    fn a_restricted_folder_is_its_owners_alone_where_modes_exist() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("ca");
        std::fs::create_dir(&sub).unwrap();
        set_mode(&sub, 0o755).unwrap();
        let changed = restrict_dir(&sub).unwrap();
        let got = mode(&std::fs::metadata(&sub).unwrap());
        if cfg!(unix) {
            assert!(changed);
            assert_eq!(got, Some(0o700));
        } else {
            assert!(!changed);
            assert_eq!(got, None);
        }
    }
}
