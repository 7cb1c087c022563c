//! What the admission gate and `binky doctor` measure about this machine.

use std::path::Path;

/// The real machine: its memory and disk, as `binky_platform::machine` reads them.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealMachine;

impl binky_controllers::machine::Machine for RealMachine {
    fn mem_available_percent(&self) -> Option<f64> {
        let (avail, total) = binky_platform::machine::memory()?;
        (total > 0).then(|| avail as f64 * 100.0 / total as f64)
    }

    fn disk_free_gib(&self, path: &Path) -> Option<f64> {
        binky_platform::machine::disk_free_bytes(path).map(|b| b as f64 / (1u64 << 30) as f64)
    }
}
