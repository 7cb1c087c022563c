//! What the admission gate and `binky doctor` measure about this machine.

use std::path::Path;

/// The real machine: `/proc/meminfo` and `statvfs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealMachine;

/// `(MemAvailable, MemTotal)` in KiB.
pub fn meminfo() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

/// Bytes free (for unprivileged users) on the filesystem holding `path` (or its nearest
/// existing parent).
pub fn disk_free_bytes(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let st = nix::sys::statvfs::statvfs(existing).ok()?;
    Some(st.blocks_available() as u64 * st.fragment_size() as u64)
}

impl binky_controllers::machine::Machine for RealMachine {
    fn mem_available_percent(&self) -> Option<f64> {
        let (avail, total) = meminfo()?;
        (total > 0).then(|| avail as f64 * 100.0 / total as f64)
    }

    fn disk_free_gib(&self, path: &Path) -> Option<f64> {
        disk_free_bytes(path).map(|b| b as f64 / (1u64 << 30) as f64)
    }
}
