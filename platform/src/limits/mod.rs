//! Limits on what a service's processes use (memory, CPU time), and what they used.
//!
//! Each system has its own means, and [`native`] says which this one has:
//! - Linux: cgroups ([`cgroup`]): a directory per service below the daemon's own cgroup, in
//!   the cgroup v2 hierarchy or cgroup v1's memory and cpu ones, with its limits written in
//!   its files and its usage read from them.
//! - Windows: a Job object per service, which the supervisor makes for every service it
//!   starts; its memory and CPU-rate limits are set on that job when the service starts.
//! - Other systems (macOS, the BSDs): nothing the system offers caps a group of processes,
//!   so binky limits them itself ([`Native::Polled`]): it measures each service's resident
//!   memory on its sampling cadence and restarts a service over its limit, and starts a
//!   service whose CPU limit is below the machine's cores at a lower priority (`nice`).
//!   Neither caps: a service may go over its memory limit for up to one sampling interval,
//!   and a niced service still takes any CPU nothing else wants.
//!
//! # `setrlimit`, and why binky sets none of its limits
//! `setrlimit` bounds one process, not a service's group, and none of its resources is
//! what `limits` mean:
//! - `RLIMIT_AS` (address space) is not memory in use: a JIT (V8, the JVM) or a database
//!   reserves far more address space than it touches, and fails at start under it.
//! - `RLIMIT_RSS` is not enforced by macOS, nor by Linux since 2.6; `RLIMIT_DATA` is not
//!   enforced by macOS, and bounds only the heap of `brk`, not the `mmap` most allocators
//!   use.
//! - `RLIMIT_CPU` counts CPU seconds over a process's life and then kills it: a cap on
//!   total work, not on a share of a core.
//! - `RLIMIT_NOFILE` and `RLIMIT_CORE` are not limits a user states in `limits`: a service
//!   starts with the ones the daemon was started with (the daemon raises its own open-file
//!   limit for its watcher and gives a service the old one back:
//!   [`crate::process::in_new_group_niced_async`]).
//!
//! So on these systems binky uses `setpriority` (through
//! [`crate::process::in_new_group_niced_async`], in the child before it runs) and its own
//! polling, and says in `binky check` and `binky status` that neither caps.
//!
//! The types here are plain (bytes, a share of a core, microseconds, paths): the decisions —
//! which limits a service has, what binky calls its directories, what it tells the user —
//! are binky's.

pub mod cgroup;

/// What this system enforces limits with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Native {
    /// cgroups (Linux), when binky may make them: see [`cgroup::find`].
    Cgroups,
    /// A Job object per service (Windows): memory and CPU rate, enforced by the system for
    /// every process the service starts.
    JobObjects,
    /// Nothing this system offers caps a group of processes (macOS and the BSDs): binky
    /// restarts a service over its memory limit, polled, and lowers the priority of one
    /// with a CPU limit (see the module's doc). Also what binky falls back to on Linux
    /// without cgroups or `systemd-run`.
    Polled,
}

/// What this system enforces limits with (see [`Native`]).
pub fn native() -> Native {
    #[cfg(target_os = "linux")]
    {
        Native::Cgroups
    }
    #[cfg(windows)]
    {
        Native::JobObjects
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        // No cgroups, no Job objects; `setrlimit` bounds none of what `limits` mean (see
        // the module's doc).
        Native::Polled
    }
}

/// Limits in plain units; `None`: no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Max {
    /// Memory, in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU time, as a share of one core (`0.5`: half a core, `2.0`: two cores).
    pub cpu_cores: Option<f64>,
}

/// What a group of processes uses, or used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Memory in use now, in bytes (the working set: without inactive file pages).
    pub memory_bytes: u64,
    /// CPU time used so far, in microseconds.
    pub cpu_usec: u64,
    /// Processes the system killed for want of memory.
    pub oom_kills: u64,
    /// Times the CPU limit held the processes back.
    pub throttled: u64,
}

/// What a process group uses, from its members' figures in `/proc/<pid>/stat`, summed:
/// CPU time in clock ticks and resident memory in pages (Unix's units, from `sysconf`).
/// Windows has neither unit (a service's figures there come from its Job object): a tick is
/// taken as 10 ms and a page as 4 KiB.
pub fn group_usage(ticks: u64, pages: u64) -> Usage {
    let (hz, page) = units();
    Usage {
        memory_bytes: pages.saturating_mul(page),
        cpu_usec: ticks.saturating_mul(1_000_000) / hz,
        oom_kills: 0,
        throttled: 0,
    }
}

/// Clock ticks a second, and bytes a page.
fn units() -> (u64, u64) {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions; a failure is -1, taken as the default.
        let get = |name, default: u64| {
            u64::try_from(unsafe { nix::libc::sysconf(name) })
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        (
            get(nix::libc::_SC_CLK_TCK, 100),
            get(nix::libc::_SC_PAGESIZE, 4096),
        )
    }
    #[cfg(not(unix))]
    {
        (100, 4096)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_system_has_its_own_means() {
        let expected = if cfg!(target_os = "linux") {
            Native::Cgroups
        } else if cfg!(windows) {
            Native::JobObjects
        } else {
            Native::Polled
        };
        assert_eq!(native(), expected);
    }

    #[test]
    fn ticks_and_pages_become_microseconds_and_bytes() {
        let (hz, page) = units();
        let u = group_usage(hz * 3, 10);
        assert_eq!(u.cpu_usec, 3_000_000);
        assert_eq!(u.memory_bytes, 10 * page);
        assert_eq!(group_usage(u64::MAX, u64::MAX).memory_bytes, u64::MAX);
    }
}
