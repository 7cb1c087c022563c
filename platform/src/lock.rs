//! A lock file one process holds at a time (the daemon's: one daemon a home), released by the
//! system when its holder ends however it ends, so a killed daemon never leaves it stale.
//!
//! Unix: `flock(LOCK_EX | LOCK_NB)` on the whole file (std's `File::try_lock`, which is
//! `flock` on Linux and macOS: the same lock every binky daemon before took, so an older
//! daemon and a newer one still exclude each other). Windows: `LockFileEx` on one byte far
//! past the file's end, not on its text: Windows' locks are mandatory, and the holder's pid
//! written in the file must stay readable by other processes (`binky daemon stop` reads it).

use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::Path;

/// A lock held: released when this is dropped (or its process ends).
#[derive(Debug)]
pub struct Held {
    file: File,
}

impl Held {
    /// Replaces the file's text with `text` (the holder's pid), which others may read while
    /// the lock is held.
    pub fn set_text(&mut self, text: &str) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        self.file.flush()
    }
}

/// Takes the lock of the file at `path` (made if missing, its text kept), or `None` at once
/// when another process (or another open of it here) holds it.
pub fn try_exclusive(path: &Path) -> io::Result<Option<Held>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    #[cfg(not(windows))]
    {
        match file.try_lock() {
            Ok(()) => Ok(Some(Held { file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
    #[cfg(windows)]
    {
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Foundation::ERROR_LOCK_VIOLATION;
        use windows_sys::Win32::Storage::FileSystem::{
            LockFileEx, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY,
        };
        use windows_sys::Win32::System::IO::OVERLAPPED;
        // SAFETY: an all-zero OVERLAPPED is its documented initial state.
        let mut at: OVERLAPPED = unsafe { std::mem::zeroed() };
        // Byte 2^62: no lock file's text ever reaches it.
        at.Anonymous.Anonymous.OffsetHigh = 0x4000_0000;
        // SAFETY: the handle is the open file's; `at` lives through this synchronous call
        // (FAIL_IMMEDIATELY on a handle opened without overlapped I/O: it never pends).
        let ok = unsafe {
            LockFileEx(
                file.as_raw_handle(),
                LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
                0,
                1,
                0,
                &mut at,
            )
        };
        if ok != 0 {
            return Ok(Some(Held { file }));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) {
            Ok(None)
        } else {
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_its_text_readable_and_the_lock_free_once_it_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.lock");
        let mut held = try_exclusive(&path).unwrap().expect("a free lock is taken");
        held.set_text("4242").unwrap();
        assert!(try_exclusive(&path).unwrap().is_none(), "held already");
        // What others read while it is held: the holder's text, and only that.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "4242");
        held.set_text("7").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7");
        drop(held);
        let again = try_exclusive(&path).unwrap().expect("free once dropped");
        // Taking it keeps the text (a reader between two daemons still finds a pid).
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7");
        drop(again);
    }

    #[test]
    fn a_lock_file_that_cannot_be_opened_is_an_error_not_a_holder() {
        let dir = tempfile::tempdir().unwrap();
        assert!(try_exclusive(&dir.path().join("missing").join("daemon.lock")).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_lock_is_the_flock_older_daemons_took() {
        use nix::fcntl::{Flock, FlockArg};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.lock");
        let held = try_exclusive(&path).unwrap().unwrap();
        let other = File::open(&path).unwrap();
        let other = match Flock::lock(other, FlockArg::LockExclusiveNonblock) {
            Ok(_) => panic!("an older daemon's flock was granted beside ours"),
            Err((file, errno)) => {
                assert_eq!(errno, nix::errno::Errno::EWOULDBLOCK);
                file
            }
        };
        drop(held);
        let theirs = Flock::lock(other, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| e)
            .expect("free for an older daemon once ours is gone");
        assert!(
            try_exclusive(&path).unwrap().is_none(),
            "and theirs excludes ours"
        );
        drop(theirs);
    }
}
