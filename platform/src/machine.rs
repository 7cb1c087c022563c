//! The machine's memory and disk, for admission's reserve and `binky doctor`.
//!
//! Linux reads `/proc/meminfo` and `statvfs(3)`. macOS reads `hw.memsize` and the kernel's
//! page counters (`host_statistics64`), and `statvfs` for the disk; the memory it counts as
//! available is decided by [`darwin_memory`], a pure function tested on every system. Other
//! Unix systems get the disk through `statvfs` and no memory figure yet; Windows neither
//! yet. Where a figure is `None`, the reserve it would check is not checked, and `binky
//! doctor` says it cannot tell.

use std::path::Path;

/// `(available, total)` memory in KiB, where the system says (Linux, macOS).
pub fn memory() -> Option<(u64, u64)> {
    #[cfg(target_os = "linux")]
    {
        meminfo_fields(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }
    #[cfg(target_os = "macos")]
    {
        macos::memory()
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        None
    }
}

/// The page counters of macOS's `host_statistics64(HOST_VM_INFO64)` (`struct
/// vm_statistics64`, `<mach/vm_statistics.h>`) that tell what memory is available.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DarwinPages {
    /// `free_count`: free pages, the speculative ones included (`host.c` adds them).
    pub free: u64,
    /// `speculative_count`: pages read ahead from files, not yet used.
    pub speculative: u64,
    /// `external_page_count`: file-backed pages (the file cache, speculative pages
    /// included), which the kernel drops before it compresses a program's memory.
    pub external: u64,
    /// `purgeable_count`: memory programs marked as discardable (caches they can rebuild).
    pub purgeable: u64,
}

/// `(available, total)` memory in KiB on macOS, from `hw.memsize` (`total_bytes`) and the
/// page counters in pages of `page_size` bytes. Available is what the kernel gives to a
/// new program without compressing or swapping anyone's memory: the free pages, the file
/// cache and the purgeable pages (Activity Monitor's "Cached Files" plus what is free; the
/// counterpart of Linux's `MemAvailable`). Not the inactive pages: among them is programs'
/// memory, which only compression or swap would free, and a Mac counting it would start
/// worlds into memory pressure. Speculative pages are counted once: both `free_count` and
/// `external_page_count` hold them. Never more than the total.
pub fn darwin_memory(total_bytes: u64, pages: DarwinPages, page_size: u64) -> (u64, u64) {
    let free_pages = pages.free.saturating_sub(pages.speculative);
    let available = free_pages
        .saturating_add(pages.external)
        .saturating_add(pages.purgeable)
        .saturating_mul(page_size);
    (available.min(total_bytes) / 1024, total_bytes / 1024)
}

/// macOS's memory figures, from the kernel (the arithmetic is [`darwin_memory`]'s).
#[cfg(target_os = "macos")]
mod macos {
    use std::sync::OnceLock;

    use nix::libc;

    extern "C" {
        /// `<mach/mach_host.h>`: the size of the pages the host's counters count (libc
        /// does not declare it).
        fn host_page_size(host: libc::host_t, out: *mut libc::vm_size_t) -> libc::kern_return_t;
    }

    /// The counters' revision 1 (`HOST_VM_INFO64_REV1_COUNT`, in `integer_t`s: up to
    /// `total_uncompressed_pages_in_compressor`): every macOS since 10.9 fills it, and
    /// libc's newer, larger count makes older kernels log a warning.
    const REV1_COUNT: libc::mach_msg_type_number_t =
        (std::mem::offset_of!(libc::vm_statistics64, swapped_count)
            / std::mem::size_of::<libc::integer_t>()) as libc::mach_msg_type_number_t;
    const _: () = assert!(REV1_COUNT == 38);

    /// The host port, asked for once: each `mach_host_self` adds a reference to it.
    fn host() -> libc::host_t {
        static HOST: OnceLock<libc::host_t> = OnceLock::new();
        // SAFETY: no arguments. libc marks the Mach calls deprecated in favour of another
        // crate; these few do not warrant it.
        #[allow(deprecated)]
        *HOST.get_or_init(|| unsafe { libc::mach_host_self() })
    }

    pub(super) fn memory() -> Option<(u64, u64)> {
        let total = crate::sysctl::value::<u64>(&[libc::CTL_HW, libc::HW_MEMSIZE])?;
        let mut page: libc::vm_size_t = 0;
        // SAFETY: writes one integer.
        if unsafe { host_page_size(host(), &mut page) } != libc::KERN_SUCCESS || page == 0 {
            return None;
        }
        let mut count = REV1_COUNT;
        // SAFETY: an all-zero vm_statistics64 is valid (integers); the kernel writes at
        // most `count` integers, fewer than the structure holds.
        let stats = unsafe {
            let mut stats: libc::vm_statistics64 = std::mem::zeroed();
            let kr = libc::host_statistics64(
                host(),
                libc::HOST_VM_INFO64,
                (&raw mut stats).cast(),
                &mut count,
            );
            (kr == libc::KERN_SUCCESS && count >= REV1_COUNT).then_some(stats)?
        };
        let pages = super::DarwinPages {
            free: u64::from(stats.free_count),
            speculative: u64::from(stats.speculative_count),
            external: u64::from(stats.external_page_count),
            purgeable: u64::from(stats.purgeable_count),
        };
        Some(super::darwin_memory(total, pages, page as u64))
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
    fn macos_counts_free_file_cache_and_purgeable_pages_as_available() {
        // A 16 GiB Apple Silicon Mac (16 KiB pages) as `vm_stat` shows one at work:
        // 10,000 pages free of which 2,000 speculative, 300,000 file-backed (the
        // speculative ones among them), 5,000 purgeable; its programs' inactive pages
        // are not counted.
        let pages = DarwinPages {
            free: 10_000,
            speculative: 2_000,
            external: 300_000,
            purgeable: 5_000,
        };
        let total = 16u64 << 30;
        let (available, total_kib) = darwin_memory(total, pages, 16384);
        assert_eq!(total_kib, 16 * 1024 * 1024);
        assert_eq!(available, (8_000 + 300_000 + 5_000) * 16);
        // Intel's 4 KiB pages.
        assert_eq!(
            darwin_memory(total, pages, 4096).0,
            (8_000 + 300_000 + 5_000) * 4
        );
        // Never more than there is, whatever the counters say.
        let wild = DarwinPages {
            free: u64::MAX,
            ..pages
        };
        assert_eq!(darwin_memory(total, wild, 16384).0, total_kib);
        // Counters read in a moment when speculative outnumbers free: no underflow.
        let odd = DarwinPages {
            free: 1,
            speculative: 5,
            ..Default::default()
        };
        assert_eq!(darwin_memory(total, odd, 16384), (0, total_kib));
    }

    /// This machine's own figures are read (the figures change as programs run: only that
    /// they are there and consistent).
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn this_machines_memory_is_read() {
        let (available, total) = memory().unwrap();
        assert!(
            total > 0 && available <= total,
            "{available} of {total} KiB"
        );
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
