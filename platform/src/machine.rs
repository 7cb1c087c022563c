//! The machine's memory and disk, for admission's reserve and `binky doctor`.
//!
//! Linux reads `/proc/meminfo` and `statvfs(3)`; other Unix systems get the disk through
//! `statvfs` and no memory figure yet; Windows neither yet. Where a figure is `None`, the
//! reserve it would check is not checked, and `binky doctor` says it cannot tell.

use std::path::Path;

/// `(available, total)` memory in KiB, where the system says.
pub fn memory() -> Option<(u64, u64)> {
    #[cfg(target_os = "linux")]
    {
        meminfo_fields(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// `MemAvailable` and `MemTotal` (KiB) from the text of `/proc/meminfo`.
pub fn meminfo_fields(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

/// Bytes free for unprivileged users on the filesystem holding `path` (or its nearest
/// existing ancestor), where the system says.
pub fn disk_free_bytes(path: &Path) -> Option<u64> {
    let existing = nearest_existing(path)?;
    #[cfg(unix)]
    {
        let st = nix::sys::statvfs::statvfs(existing).ok()?;
        Some(st.blocks_available() as u64 * st.fragment_size() as u64)
    }
    #[cfg(not(unix))]
    {
        let _ = existing;
        None
    }
}

/// `path`, or its nearest ancestor that exists (a folder binky has not made yet is on the
/// filesystem of the folder it will be made in).
pub fn nearest_existing(path: &Path) -> Option<&Path> {
    path.ancestors().find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_gives_available_and_total_and_nothing_when_one_is_missing() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   12000000 kB\n";
        assert_eq!(meminfo_fields(text), Some((12_000_000, 24_000_000)));
        assert_eq!(meminfo_fields("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn the_disk_of_a_path_not_yet_made_is_its_ancestors() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        assert_eq!(nearest_existing(&deep), Some(dir.path()));
        // The free bytes themselves change as other programs write: only that they are read.
        if cfg!(unix) {
            assert!(disk_free_bytes(&deep).is_some_and(|b| b > 0));
        }
    }
}
