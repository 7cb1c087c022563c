//! What the admission gate and `binky doctor` measure about this machine.

use std::path::Path;

/// The real machine: its memory and disk, as `binky_platform::machine` reads them.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealMachine;

/// `(MemAvailable, MemTotal)` in KiB, where the system says.
pub fn meminfo() -> Option<(u64, u64)> {
    binky_platform::machine::memory()
}

/// Bytes free (for unprivileged users) on the filesystem holding `path` (or its nearest
/// existing ancestor), where the system says.
pub fn disk_free_bytes(path: &Path) -> Option<u64> {
    binky_platform::machine::disk_free_bytes(path)
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
