//! What admission and the golden controller need to know about the machine: free memory and
//! free disk. The daemon implements it; tests hand in fixed numbers.

/// Facts about the machine: what the gate limits by and what the golden controller
/// frees disk for.
pub trait Machine: Send + Sync + 'static {
    /// Percent of memory available (`MemAvailable / MemTotal`).
    fn mem_available_percent(&self) -> Option<f64>;
    /// GiB free on the filesystem holding `path`.
    fn disk_free_gib(&self, path: &std::path::Path) -> Option<f64>;
}
