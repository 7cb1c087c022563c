//! Writing a file whole: the one way binky replaces a file a reader may be reading (a
//! `binky.toml`, `/etc/hosts`, an MCP client's config, a server's password file, a
//! virtualenv's script, a CA bundle).
//!
//! # Guarantees
//! - A reader sees the old file or the new one, never half of one: the bytes go to a
//!   temporary file beside it, renamed over it when whole.
//! - The temporary name is this writer's alone (the process id and a counter, made with
//!   `create_new`): two writers of one file at once never write into each other's.
//! - A failed write leaves no temporary file behind and the old file as it was.
//! - [`Whole::durable`]: the file's bytes and its directory entry are on disk when the call
//!   returns (for state: a crash right after loses nothing said to be written).
//! - [`Whole::no_clobber`]: a file that appeared meanwhile is not replaced (a hard link of
//!   the temporary file fails when the name exists: no check-then-write race).
//! - A replaced file's old inode is left as it was: another name linked to it (a hard-linked
//!   dependency file) keeps its content.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How a file is written whole; [`Whole::write`] writes it.
#[derive(Clone, Debug, Default)]
pub struct Whole {
    mode: Option<u32>,
    durable: bool,
    no_clobber: bool,
}

impl Whole {
    /// A plain file, its mode the process's default.
    pub fn new() -> Whole {
        Whole::default()
    }

    /// Made with these permission bits (`0o600` for a secret; a Unix mode, ignored elsewhere).
    pub fn mode(mut self, mode: u32) -> Whole {
        self.mode = Some(mode);
        self
    }

    /// On disk, bytes and name, when the write returns.
    pub fn durable(mut self) -> Whole {
        self.durable = true;
        self
    }

    /// Never replace a file that is there: the write fails with `AlreadyExists`.
    pub fn no_clobber(mut self) -> Whole {
        self.no_clobber = true;
        self
    }

    /// Write `bytes` to `path` whole (its directory made when missing).
    pub fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = temporary(path);
        let written = self.fill(&tmp, bytes).and_then(|()| {
            if self.no_clobber {
                std::fs::hard_link(&tmp, path)?;
                std::fs::remove_file(&tmp)
            } else {
                binky_platform::fs::replace(&tmp, path)
            }
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return written;
        }
        if self.durable {
            sync_dir(path)?;
        }
        Ok(())
    }

    fn fill(&self, tmp: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        if let Some(mode) = self.mode {
            binky_platform::fs::with_mode(&mut opts, mode);
        }
        let mut f = opts.open(tmp)?;
        f.write_all(bytes)?;
        if let Some(mode) = self.mode {
            // The process's umask narrowed what `open` made: the mode asked for, exactly.
            binky_platform::fs::set_mode(tmp, mode)?;
        }
        if self.durable {
            f.sync_all()?;
        }
        Ok(())
    }
}

/// A name beside `path` that no other writer uses: `.<name>.<pid>.<n>.binky-tmp`.
fn temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.binky-tmp", std::process::id()))
}

/// The directory entry of `path` on disk (a rename is durable once its directory is).
fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    binky_platform::fs::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/binky.toml");
        Whole::new().durable().write(&path, b"one").unwrap();
        Whole::new().write(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["binky.toml"]);
    }

    #[test]
    fn two_writers_never_share_a_temporary_name() {
        let path = Path::new("/x/hosts");
        assert_ne!(temporary(path), temporary(path));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::thread::scope(|s| {
            for i in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        Whole::new()
                            .write(path, format!("{i}").repeat(1000).as_bytes())
                            .unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), 1000);
        assert!(
            text.chars().all(|c| c == text.chars().next().unwrap()),
            "a mix"
        );
    }

    #[test]
    fn no_clobber_leaves_a_file_that_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("binky.toml");
        Whole::new().no_clobber().write(&path, b"first").unwrap();
        let err = Whole::new()
            .no_clobber()
            .write(&path, b"second")
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_secret_gets_its_mode_and_a_linked_old_file_keeps_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (path, other) = (dir.path().join("pw"), dir.path().join("pw-link"));
        std::fs::write(&path, "old").unwrap();
        std::fs::hard_link(&path, &other).unwrap();
        Whole::new().mode(0o600).write(&path, b"new").unwrap();
        let mode = binky_platform::fs::mode(&std::fs::metadata(&path).unwrap());
        assert_eq!(mode, cfg!(unix).then_some(0o600));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "old");
    }
}
