//! Bringing a file into a world without copying its data: a copy-on-write clone, a hard
//! link, a symbolic link made again; and the identity of a file (which one it is, how many
//! names it has), for telling whether a world's file is still the main checkout's.
//!
//! # What each system gets
//! - Clone: Linux `FICLONE` (btrfs, XFS, bcachefs); Windows block cloning
//!   (`FSCTL_DUPLICATE_EXTENTS_TO_FILE`) on a volume that has it (ReFS, a Dev Drive); macOS
//!   `fclonefileat(2)` on APFS (HFS+, FAT and shares cannot: linked there); other Unix:
//!   none. Where there is none, [`clone_file`] says so and the caller links or copies.
//! - Hard links: `link(2)` on Unix; NTFS and ReFS on Windows (`CreateHardLinkW`, through std).
//!   Both refuse across filesystems (volumes) and past a file's link limit; [`refusal`] tells
//!   those apart from a filesystem that has no links at all.
//! - Symbolic links: Unix makes any. Windows needs Developer Mode or the
//!   `SeCreateSymbolicLinkPrivilege`; without them [`symlink`] answers
//!   [`std::io::ErrorKind::Unsupported`] and the caller copies what the link points to.
//! - Identity: device and inode on Unix; volume serial number and file index on Windows
//!   (`GetFileInformationByHandle`), with the link count from the same call.

use std::io;
use std::path::Path;

/// Makes `dst`, which must not exist, a copy-on-write clone of the regular file `src`: the
/// same bytes, no data copied, none shared (a write to either leaves the other as it was).
/// `Ok(false)` when the filesystem cannot clone (nothing is left at `dst`): link or copy
/// instead. `Err` when `src` cannot be read or `dst` cannot be made. The clone's
/// permissions and times are the caller's to set (macOS' clone comes with the source's
/// mode, a read-only one too: set them by path, not through a handle opened to write).
pub fn clone_file(src: &Path, dst: &Path) -> io::Result<bool> {
    #[cfg(target_os = "macos")]
    {
        macos::clone_file(src, dst)
    }
    #[cfg(not(target_os = "macos"))]
    {
        clone_by_handles(src, dst)
    }
}

/// The clone where the system clones one open file into another (Linux, Windows; the
/// other Unix systems answer "cannot").
#[cfg(not(target_os = "macos"))]
fn clone_by_handles(src: &Path, dst: &Path) -> io::Result<bool> {
    let input = std::fs::File::open(src)?;
    let output = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dst)?;
    let cloned = clone_into(&input, &output);
    drop(output);
    if !cloned {
        std::fs::remove_file(dst)?;
    }
    Ok(cloned)
}

#[cfg(target_os = "linux")]
fn clone_into(input: &std::fs::File, output: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // FICLONE = _IOW(0x94, 9, int)
    const FICLONE: nix::libc::c_ulong = 0x4004_9409;
    // SAFETY: both descriptors are open for the call; FICLONE reads only the int.
    let r = unsafe { nix::libc::ioctl(output.as_raw_fd(), FICLONE as _, input.as_raw_fd()) };
    // Anything else (EOPNOTSUPP, EXDEV, EINVAL) is this filesystem not cloning.
    r == 0
}

#[cfg(all(unix, not(any(target_os = "linux", target_os = "macos"))))]
fn clone_into(_input: &std::fs::File, _output: &std::fs::File) -> bool {
    false
}

#[cfg(windows)]
fn clone_into(input: &std::fs::File, output: &std::fs::File) -> bool {
    windows::duplicate_extents(input, output).unwrap_or(false)
}

/// macOS: `fclonefileat(2)`, APFS' copy-on-write clone of a whole file.
#[cfg(target_os = "macos")]
mod macos {
    use std::ffi::CString;
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use nix::libc;

    use super::darwin;

    // The values `darwin` reads errors by are this system's own.
    const _: () = assert!(
        darwin::EEXIST == libc::EEXIST
            && darwin::EXDEV == libc::EXDEV
            && darwin::EINVAL == libc::EINVAL
            && darwin::ENOTSUP == libc::ENOTSUP
    );

    /// [`super::clone_file`] on macOS. From the open source, so what is cloned is the file
    /// that was checked to be one (`clonefile` of a folder clones its whole tree).
    pub(super) fn clone_file(src: &Path, dst: &Path) -> io::Result<bool> {
        let input = std::fs::File::open(src)?;
        if !input.metadata()?.is_file() {
            return Ok(false);
        }
        let target = CString::new(dst.as_os_str().as_bytes())?;
        // SAFETY: the descriptor is open for the call; `target` ends with a NUL and lives
        // through it.
        let rc = unsafe {
            libc::fclonefileat(
                input.as_raw_fd(),
                libc::AT_FDCWD,
                target.as_ptr(),
                // No flags: the source is the open file already (no link to follow or not),
                // and its owner is the user who runs binky.
                0,
            )
        };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match darwin::clone_failed(e.raw_os_error().unwrap_or(0)) {
            darwin::CloneFailed::CannotClone => Ok(false),
            darwin::CloneFailed::Error => Err(e),
        }
    }
}

/// What macOS' `clonefile(2)` family answers, read as plain numbers: compiled and tested on
/// every system, used on macOS.
///
/// APFS (every Mac's startup volume since macOS 10.13) clones; HFS+, FAT and exFAT volumes
/// and network shares answer `ENOTSUP`, and binky links there (then copies).
pub mod darwin {
    /// `EEXIST` of `<sys/errno.h>`: `dst` is there already.
    pub const EEXIST: i32 = 17;
    /// `EXDEV` of `<sys/errno.h>`: `src` and `dst` are on different volumes.
    pub const EXDEV: i32 = 18;
    /// `EINVAL` of `<sys/errno.h>`: a flag this macOS does not know, or a source it will
    /// not clone.
    pub const EINVAL: i32 = 22;
    /// `ENOTSUP` of `<sys/errno.h>`: this volume does not clone (HFS+, FAT, a share).
    pub const ENOTSUP: i32 = 45;

    /// What a failed clone means for the file.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum CloneFailed {
        /// This volume (or this pair of volumes) does not clone: link or copy instead, as
        /// where the system has no clone at all.
        CannotClone,
        /// The error is the caller's: `dst` exists, `src` is gone, no permission, no space.
        Error,
    }

    /// The meaning of `clonefile`'s `errno`. Across volumes (`EXDEV`) is "cannot clone",
    /// not an error: the hard link tried next fails the same way, and the refusal of that
    /// ([`super::refusal`]) turns the rest of the tree to copies.
    pub fn clone_failed(errno: i32) -> CloneFailed {
        match errno {
            ENOTSUP | EXDEV | EINVAL => CloneFailed::CannotClone,
            _ => CloneFailed::Error,
        }
    }
}

/// Why a hard link was refused, for what to do with the next file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The two paths are on different filesystems (volumes): no file of this tree links.
    CrossDevice,
    /// This one file has as many links as its filesystem allows: copy it alone.
    TooManyLinks,
    /// Anything else (a filesystem without links, no permission): copy the rest.
    Other,
}

/// What the error of a refused hard link (`std::fs::hard_link`) means: `EXDEV`/`EMLINK` on
/// Unix, `ERROR_NOT_SAME_DEVICE`/`ERROR_TOO_MANY_LINKS` on Windows.
pub fn refusal(e: &io::Error) -> Refusal {
    #[cfg(unix)]
    let (cross, too_many) = (nix::libc::EXDEV, nix::libc::EMLINK);
    // ERROR_NOT_SAME_DEVICE, ERROR_TOO_MANY_LINKS
    #[cfg(windows)]
    let (cross, too_many) = (
        windows_sys::Win32::Foundation::ERROR_NOT_SAME_DEVICE as i32,
        windows_sys::Win32::Foundation::ERROR_TOO_MANY_LINKS as i32,
    );
    match e.raw_os_error() {
        Some(c) if c == cross => Refusal::CrossDevice,
        Some(c) if c == too_many => Refusal::TooManyLinks,
        _ => Refusal::Other,
    }
}

/// Makes the symbolic link `link` pointing at `target` (as `std::fs::read_link` gave it:
/// relative to `link`'s folder, or absolute). On Windows a link is made for a file or for a
/// folder, by what `target` is now (a file when it does not exist); where Windows refuses
/// for want of the privilege, the error is `Unsupported` and says how to allow it.
pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, link)
    }
    #[cfg(windows)]
    {
        let resolved = match link.parent() {
            Some(dir) => dir.join(target),
            None => target.to_path_buf(),
        };
        let made = if resolved.is_dir() {
            std::os::windows::fs::symlink_dir(target, link)
        } else {
            std::os::windows::fs::symlink_file(target, link)
        };
        made.map_err(|e| {
            if e.raw_os_error()
                == Some(windows_sys::Win32::Foundation::ERROR_PRIVILEGE_NOT_HELD as i32)
            {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "Windows makes a symbolic link only with Developer Mode on (Settings > \
                     System > For developers) or as an administrator",
                )
            } else {
                e
            }
        })?;
        // Wine says it made the link and makes nothing: a link is trusted once it is seen.
        if std::fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink()) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "this Windows made no symbolic link at {} though it said it did (Wine \
                     does so)",
                    link.display()
                ),
            ))
        }
    }
}

/// Which file a path names, the same for every name (hard link) of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// The filesystem: the device (Unix), the volume's serial number (Windows).
    pub device: u64,
    /// The file on it: the inode (Unix), the file index (Windows).
    pub file: u64,
}

/// A file's identity and how many names it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Which file it is.
    pub id: FileId,
    /// How many hard links (names) it has.
    pub links: u64,
}

/// The identity of what `path` names, not following a symbolic link at its end.
pub fn identity(path: &Path) -> io::Result<Identity> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path)?;
        Ok(Identity {
            id: FileId {
                device: meta.dev(),
                file: meta.ino(),
            },
            links: meta.nlink(),
        })
    }
    #[cfg(windows)]
    {
        windows::identity(path)
    }
}

#[cfg(windows)]
mod windows {
    //! Windows' file calls: block cloning and a file's identity.

    use std::io;
    use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;

    use windows_sys::Win32::Storage::FileSystem::{
        GetFileInformationByHandle, GetVolumeInformationByHandleW, BY_HANDLE_FILE_INFORMATION,
        FILE_ATTRIBUTE_SPARSE_FILE, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    };
    use windows_sys::Win32::System::Ioctl::{
        DUPLICATE_EXTENTS_DATA, FSCTL_DUPLICATE_EXTENTS_TO_FILE, FSCTL_GET_INTEGRITY_INFORMATION,
        FSCTL_GET_INTEGRITY_INFORMATION_BUFFER, FSCTL_SET_INTEGRITY_INFORMATION,
        FSCTL_SET_INTEGRITY_INFORMATION_BUFFER, FSCTL_SET_SPARSE,
    };
    use windows_sys::Win32::System::SystemServices::FILE_SUPPORTS_BLOCK_REFCOUNTING;
    use windows_sys::Win32::System::IO::DeviceIoControl;

    /// One `DeviceIoControl` with an input and an output buffer.
    fn control<I, O>(
        file: &std::fs::File,
        code: u32,
        input: Option<&I>,
        output: Option<&mut O>,
    ) -> io::Result<()> {
        let mut returned = 0u32;
        let (in_ptr, in_len) = input.map_or((std::ptr::null(), 0), |i| {
            (i as *const I as *const _, size_of::<I>() as u32)
        });
        let (out_ptr, out_len) = output.map_or((std::ptr::null_mut(), 0), |o| {
            (o as *mut O as *mut _, size_of::<O>() as u32)
        });
        // SAFETY: the handle is open for the call; each buffer is valid for its stated size.
        let ok = unsafe {
            DeviceIoControl(
                file.as_raw_handle(),
                code,
                in_ptr,
                in_len,
                out_ptr,
                out_len,
                &mut returned,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Does the volume of `file` clone blocks (ReFS, a Dev Drive)?
    fn clones_blocks(file: &std::fs::File) -> bool {
        let mut flags = 0u32;
        // SAFETY: the handle is open; no name buffers are asked for.
        let ok = unsafe {
            GetVolumeInformationByHandleW(
                file.as_raw_handle(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut flags,
                std::ptr::null_mut(),
                0,
            )
        };
        ok != 0 && flags & FILE_SUPPORTS_BLOCK_REFCOUNTING != 0
    }

    /// Clones all of `input` into the empty `output` by duplicating its extents, as
    /// Microsoft's block cloning documentation has it: the target as sparse as the source,
    /// with the source's integrity setting, its length set first, and the ranges whole
    /// clusters (the last may run past the end of the file), less than 4 GiB each. Whether it
    /// was cloned; `Ok(false)` on a volume without block cloning.
    pub(super) fn duplicate_extents(
        input: &std::fs::File,
        output: &std::fs::File,
    ) -> io::Result<bool> {
        if !clones_blocks(output) {
            return Ok(false);
        }
        let meta = input.metadata()?;
        let len = meta.len();
        if meta.file_attributes() & FILE_ATTRIBUTE_SPARSE_FILE != 0 {
            control::<(), ()>(output, FSCTL_SET_SPARSE, None, None)?;
        }
        let mut integrity = FSCTL_GET_INTEGRITY_INFORMATION_BUFFER::default();
        control::<(), _>(
            input,
            FSCTL_GET_INTEGRITY_INFORMATION,
            None,
            Some(&mut integrity),
        )?;
        let set = FSCTL_SET_INTEGRITY_INFORMATION_BUFFER {
            ChecksumAlgorithm: integrity.ChecksumAlgorithm,
            Reserved: 0,
            Flags: integrity.Flags,
        };
        control::<_, ()>(output, FSCTL_SET_INTEGRITY_INFORMATION, Some(&set), None)?;
        output.set_len(len)?;
        let cluster = u64::from(integrity.ClusterSizeInBytes.max(4096));
        let whole = len.div_ceil(cluster) * cluster;
        // The largest whole number of clusters under 4 GiB.
        let chunk = ((1u64 << 32) - 1) / cluster * cluster;
        let mut offset = 0u64;
        while offset < whole {
            let count = chunk.min(whole - offset);
            let data = DUPLICATE_EXTENTS_DATA {
                FileHandle: input.as_raw_handle(),
                SourceFileOffset: offset as i64,
                TargetFileOffset: offset as i64,
                ByteCount: count as i64,
            };
            if control::<_, ()>(output, FSCTL_DUPLICATE_EXTENTS_TO_FILE, Some(&data), None).is_err()
            {
                return Ok(false);
            }
            offset += count;
        }
        Ok(true)
    }

    /// `GetFileInformationByHandle` of `path` opened for no access (a folder too), not
    /// following a symbolic link at its end.
    pub(super) fn identity(path: &Path) -> io::Result<super::Identity> {
        let file = std::fs::OpenOptions::new()
            .access_mode(0)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
            .open(path)?;
        let mut info = BY_HANDLE_FILE_INFORMATION::default();
        // SAFETY: the handle is open; `info` is the structure the call fills.
        if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(super::Identity {
            id: super::FileId {
                device: u64::from(info.dwVolumeSerialNumber),
                file: (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
            },
            links: u64::from(info.nNumberOfLinks),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_has_the_sources_bytes_and_is_its_own_or_nothing_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&src, b"the package's file").unwrap();
        if clone_file(&src, &dst).unwrap() {
            assert_eq!(std::fs::read(&dst).unwrap(), b"the package's file");
            // Not a link: its own file, and a write to it leaves the source alone.
            assert_ne!(identity(&dst).unwrap().id, identity(&src).unwrap().id);
            std::fs::write(&dst, b"changed").unwrap();
            assert_eq!(std::fs::read(&src).unwrap(), b"the package's file");
        } else {
            assert!(!dst.exists(), "a refused clone leaves nothing behind");
        }
        // A clone never replaces what is there.
        std::fs::write(&dst, b"there").unwrap();
        assert!(clone_file(&src, &dst).is_err());
        assert_eq!(std::fs::read(&dst).unwrap(), b"there");
        // A source that is not there is an error, and makes nothing.
        let gone = dir.path().join("gone");
        assert!(clone_file(&gone, &dir.path().join("c")).is_err());
        assert!(!dir.path().join("c").exists());
    }

    #[test]
    fn macos_clones_or_falls_back_on_a_volume_that_cannot_and_fails_on_the_callers_errors() {
        use darwin::{clone_failed, CloneFailed};
        // HFS+, FAT, a share; across volumes; a flag an older macOS does not know.
        for errno in [darwin::ENOTSUP, darwin::EXDEV, darwin::EINVAL] {
            assert_eq!(clone_failed(errno), CloneFailed::CannotClone, "{errno}");
        }
        // `<sys/errno.h>`: EEXIST 17 (never replace what is there), ENOENT 2, EACCES 13,
        // ENOSPC 28, EDQUOT 69.
        for errno in [darwin::EEXIST, 2, 13, 28, 69] {
            assert_eq!(clone_failed(errno), CloneFailed::Error, "{errno}");
        }
    }

    #[test]
    fn a_hard_link_is_the_same_file_with_one_more_link_and_a_copy_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (src, link, copy) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&src, b"x").unwrap();
        assert_eq!(identity(&src).unwrap().links, 1);
        std::fs::hard_link(&src, &link).unwrap();
        std::fs::copy(&src, &copy).unwrap();
        let (a, b, c) = (
            identity(&src).unwrap(),
            identity(&link).unwrap(),
            identity(&copy).unwrap(),
        );
        assert_eq!(a.id, b.id);
        assert_eq!((a.links, b.links), (2, 2));
        assert_ne!(a.id, c.id);
        assert_eq!(c.links, 1);
        assert!(identity(&dir.path().join("gone")).is_err());
    }

    #[test]
    fn a_refused_link_says_whether_it_was_across_filesystems_or_too_many_links() {
        #[cfg(unix)]
        let (cross, too_many, denied) = (nix::libc::EXDEV, nix::libc::EMLINK, nix::libc::EACCES);
        #[cfg(windows)]
        let (cross, too_many, denied) = (17, 1142, 5);
        assert_eq!(
            refusal(&io::Error::from_raw_os_error(cross)),
            Refusal::CrossDevice
        );
        assert_eq!(
            refusal(&io::Error::from_raw_os_error(too_many)),
            Refusal::TooManyLinks
        );
        assert_eq!(
            refusal(&io::Error::from_raw_os_error(denied)),
            Refusal::Other
        );
        assert_eq!(refusal(&io::Error::other("no code")), Refusal::Other);
        // A real refusal: a link to a file that is not there.
        let dir = tempfile::tempdir().unwrap();
        let e = std::fs::hard_link(dir.path().join("gone"), dir.path().join("b")).unwrap_err();
        assert_eq!(refusal(&e), Refusal::Other);
        // And one across filesystems, where the machine has two (Linux's /dev/shm is tmpfs).
        #[cfg(target_os = "linux")]
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            let src = shm.path().join("a");
            std::fs::write(&src, b"x").unwrap();
            if identity(&src).unwrap().id.device != identity(dir.path()).unwrap().id.device {
                let e = std::fs::hard_link(&src, dir.path().join("a")).unwrap_err();
                assert_eq!(refusal(&e), Refusal::CrossDevice);
            }
        }
    }

    #[test]
    fn a_symlink_points_where_it_was_told_or_windows_says_how_to_allow_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        std::fs::write(dir.path().join("pkg/index.js"), b"js").unwrap();
        let made = [
            (Path::new("pkg"), dir.path().join("to-dir")),
            (Path::new("pkg/index.js"), dir.path().join("to-file")),
        ]
        .map(|(target, link)| (symlink(target, &link), target, link));
        for (result, target, link) in made {
            match result {
                Ok(()) => {
                    assert_eq!(std::fs::read_link(&link).unwrap(), target);
                    // Its identity is the link's own, not its target's.
                    assert_ne!(
                        identity(&link).unwrap().id,
                        identity(&dir.path().join(target)).unwrap().id
                    );
                }
                #[cfg(unix)]
                Err(e) => panic!("Unix makes any symbolic link: {e}"),
                // Without the privilege (the error says how to get it), or under Wine.
                #[cfg(windows)]
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                    assert!(!link.exists(), "{e}");
                }
            }
        }
        // Through the link to a folder, the folder's entries.
        #[cfg(unix)]
        assert!(std::fs::read_dir(dir.path().join("to-dir")).is_ok_and(|mut d| d.next().is_some()));
    }
}
