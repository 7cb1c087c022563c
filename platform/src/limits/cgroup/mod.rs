//! Linux's cgroups as binky uses them: a home directory per hierarchy (`binky-<tag>`, found or
//! made by [`find`]), a directory per group below it (binky's worlds), and a leaf per service
//! or task below that, with its limits written in its files, joined by its process before it
//! runs anything of its own, read for what it uses, and removed with what is left in it.
//!
//! # Guarantees
//! - A process joins its leaf between fork and exec ([`Join`]), so everything it starts is
//!   in it too, even what leaves its process group.
//! - Releasing a leaf ends what is still in it and removes it, then its group's and its
//!   home's directory when they are left empty.
//! - Creating and removing directories is serialised in this process, so a release never
//!   removes a directory a spawn is about to use.
//!
//! # Caveats
//! - cgroup v1 charges a file's page cache to the cgroup that first read it; the memory
//!   shown is the working set (usage less inactive file pages), as `docker stats` shows it.
//! - Every system compiles this module, but only Linux has cgroups: elsewhere [`find`] says
//!   so, and nothing else here is reached.

pub mod detect;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use detect::{find, Mode, Tree};

use super::{Max, Usage};

/// The CPU period quotas are written in (the kernel's default), in microseconds.
const PERIOD_US: u64 = 100_000;

/// The smallest CPU quota the kernel takes, in microseconds a period.
const MIN_QUOTA_US: u64 = 1000;

/// One cgroup (a leaf): a directory per hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Group {
    /// cgroup v2.
    V2 {
        /// The directory.
        path: PathBuf,
    },
    /// cgroup v1.
    V1 {
        /// In the memory hierarchy.
        memory: PathBuf,
        /// In the cpu hierarchy (with cpuacct when they are mounted together).
        cpu: PathBuf,
        /// In a cpuacct hierarchy of its own.
        cpuacct: Option<PathBuf>,
    },
}

/// The directories of a cgroup v1 leaf or home, one per hierarchy: memory, cpu, and
/// cpuacct when it is not the cpu one.
fn v1_dirs<'a>(memory: &'a Path, cpu: &'a Path, cpuacct: Option<&'a Path>) -> Vec<&'a Path> {
    let mut dirs = vec![memory, cpu];
    dirs.extend(cpuacct);
    dirs
}

/// The CPU quota for `cores`, in microseconds a [`PERIOD_US`] (at least the kernel's least).
fn quota_us(cores: f64) -> u64 {
    // `as` saturates: a negative or NaN share becomes 0, then the least quota.
    ((cores * PERIOD_US as f64).round() as u64).max(MIN_QUOTA_US)
}

impl Group {
    /// Its directories, one per hierarchy.
    pub fn dirs(&self) -> Vec<&Path> {
        match self {
            Group::V2 { path } => vec![path],
            Group::V1 {
                memory,
                cpu,
                cpuacct,
            } => v1_dirs(memory, cpu, cpuacct.as_deref()),
        }
    }

    /// Whether it is a cgroup v2 one.
    pub fn is_v2(&self) -> bool {
        matches!(self, Group::V2 { .. })
    }

    /// Writes `max` into its files (`memory.max`, `cpu.max`; v1's `memory.limit_in_bytes`,
    /// `cpu.cfs_quota_us`); a limit `max` leaves out is left as it is.
    pub fn write_max(&self, max: Max) -> io::Result<()> {
        let quota = max.cpu_cores.map(quota_us);
        match self {
            Group::V2 { path } => {
                if let Some(m) = max.memory_bytes {
                    write(&path.join("memory.max"), &m.to_string())?;
                }
                if let Some(q) = quota {
                    write(&path.join("cpu.max"), &format!("{q} {PERIOD_US}"))?;
                }
            }
            Group::V1 { memory, cpu, .. } => {
                if let Some(m) = max.memory_bytes {
                    write(&memory.join("memory.limit_in_bytes"), &m.to_string())?;
                }
                if let Some(q) = quota {
                    write(&cpu.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                    write(&cpu.join("cpu.cfs_quota_us"), &q.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// The CPU time used, from one file (`cpu.stat`, or v1's `cpuacct.usage`).
    pub fn cpu_usec(&self) -> Option<u64> {
        match self {
            Group::V2 { path } => {
                let cpu = std::fs::read_to_string(path.join("cpu.stat")).ok()?;
                Some(field(&cpu, "usage_usec"))
            }
            Group::V1 { cpu, cpuacct, .. } => {
                let acct = cpuacct.as_deref().unwrap_or(cpu);
                read_number(&acct.join("cpuacct.usage")).map(|ns: u64| ns / 1000)
            }
        }
    }

    /// What it holds now; `None` once it is gone.
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Group::V2 { path } => {
                let current: u64 = read_number(&path.join("memory.current"))?;
                let stat = std::fs::read_to_string(path.join("memory.stat")).unwrap_or_default();
                let cpu = std::fs::read_to_string(path.join("cpu.stat")).unwrap_or_default();
                let events =
                    std::fs::read_to_string(path.join("memory.events")).unwrap_or_default();
                Some(Usage {
                    memory_bytes: current.saturating_sub(field(&stat, "inactive_file")),
                    cpu_usec: field(&cpu, "usage_usec"),
                    oom_kills: field(&events, "oom_kill"),
                    throttled: field(&cpu, "nr_throttled"),
                })
            }
            Group::V1 {
                memory,
                cpu,
                cpuacct,
            } => {
                let used: u64 = read_number(&memory.join("memory.usage_in_bytes"))?;
                let stat = std::fs::read_to_string(memory.join("memory.stat")).unwrap_or_default();
                let oom =
                    std::fs::read_to_string(memory.join("memory.oom_control")).unwrap_or_default();
                let acct = cpuacct.as_deref().unwrap_or(cpu);
                let ns: u64 = read_number(&acct.join("cpuacct.usage")).unwrap_or(0);
                let cpu_stat = std::fs::read_to_string(cpu.join("cpu.stat")).unwrap_or_default();
                Some(Usage {
                    memory_bytes: used.saturating_sub(field(&stat, "total_inactive_file")),
                    cpu_usec: ns / 1000,
                    oom_kills: field(&oom, "oom_kill"),
                    throttled: field(&cpu_stat, "nr_throttled"),
                })
            }
        }
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The number after `key` in a `key value` file (`memory.stat`, `cpu.stat`, …); 0 if absent.
pub fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// The pids in a cgroup directory.
pub fn members(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        // 0 is no process (a signal to it would reach this process's own group).
        .filter(|pid| *pid > 0)
        .collect()
}

/// Removes a directory; gone already counts as removed.
fn remove(dir: &Path) -> bool {
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// Ends what is in a leaf directory and removes it (waiting at most `patience`).
fn clear(dir: &Path, patience: Duration) -> bool {
    if !dir.exists() {
        return true;
    }
    let until = Instant::now() + patience;
    loop {
        let left = members(dir);
        for pid in &left {
            // Gone meanwhile is what was wanted.
            let _ = crate::signal::send(*pid, "SIGKILL");
        }
        // A cgroup whose last process just died may be busy for a moment longer.
        if left.is_empty() && remove(dir) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A descriptor's number, as Unix's `RawFd` (Windows has none here: no cgroups to join).
pub type Fd = i32;

/// The files a process writes `0` to, between fork and exec, to join its leaf: open while
/// this lives, so it must outlive the spawn.
pub struct Join {
    files: Vec<File>,
}

impl Join {
    /// Makes the child `cmd` starts join the leaf before it runs anything of its own. Where
    /// there are no cgroups (systems other than Linux) there is never a `Join` to apply.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        #[cfg(unix)]
        {
            let fds = self.fds();
            // SAFETY: joining writes to descriptors opened before the fork (write(2) is
            // async-signal-safe) and allocates nothing.
            unsafe {
                cmd.pre_exec(move || Join::join(&fds));
            }
        }
        #[cfg(not(unix))]
        {
            let _ = cmd;
        }
    }

    /// The descriptors to write to (valid while this lives), for a caller that runs
    /// [`Join::join`] between fork and exec itself rather than through [`Join::apply`].
    /// None on Windows.
    pub fn fds(&self) -> Vec<Fd> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            self.files.iter().map(AsRawFd::as_raw_fd).collect()
        }
        #[cfg(not(unix))]
        {
            let _ = &self.files;
            Vec::new()
        }
    }

    /// Joins the leaf by `fds` ([`Join::fds`]): called in the child between fork and exec,
    /// so it makes only async-signal-safe calls. Nothing to do on Windows.
    pub fn join(fds: &[Fd]) -> io::Result<()> {
        #[cfg(unix)]
        for fd in fds {
            // SAFETY: write(2) on a descriptor the parent opened is async-signal-safe.
            let n = unsafe { nix::libc::write(*fd, b"0".as_ptr().cast(), 1) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        #[cfg(not(unix))]
        let _ = fds;
        Ok(())
    }
}

/// Serialises creating and removing cgroup directories (in one process).
static DIRS: Mutex<()> = Mutex::new(());

/// The cgroups below one home ([`Tree`]).
pub struct Cgroups {
    tree: Tree,
}

impl Cgroups {
    /// The cgroups below `tree`'s homes.
    pub fn new(tree: Tree) -> Cgroups {
        Cgroups { tree }
    }

    /// Its homes.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Its home directories, one per hierarchy.
    pub fn homes(&self) -> Vec<&Path> {
        match &self.tree {
            Tree::V2 { home } => vec![home],
            Tree::V1 {
                memory,
                cpu,
                cpuacct,
            } => v1_dirs(memory, cpu, cpuacct.as_deref()),
        }
    }

    /// A directory that may already be there; v2 hands the controllers down to its children.
    fn ensure(&self, dir: &Path) -> io::Result<()> {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create {}: {e}", dir.display()),
                ))
            }
        }
        if matches!(self.tree, Tree::V2 { .. }) {
            detect::enable_controllers(dir).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot turn the memory and cpu controllers on in {}: {e}",
                        dir.display()
                    ),
                )
            })?;
        }
        Ok(())
    }

    /// The leaf `<home>/<group>/<name>`, made (afresh when `fresh` and nothing is left in it,
    /// so its counters — out-of-memory kills above all — start again) with `max` written,
    /// and the files to join it by.
    pub fn prepare(
        &self,
        group: &str,
        name: &str,
        max: Max,
        fresh: bool,
    ) -> io::Result<(Group, Join)> {
        let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
        let mut dirs = Vec::new();
        for home in self.homes() {
            self.ensure(home)?;
            let group_dir = home.join(group);
            self.ensure(&group_dir)?;
            let leaf = group_dir.join(name);
            if fresh && leaf.exists() && members(&leaf).is_empty() {
                remove(&leaf);
            }
            match std::fs::create_dir(&leaf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot create {}: {e}", leaf.display()),
                    ))
                }
            }
            dirs.push(leaf);
        }
        let leaf = match &self.tree {
            Tree::V2 { .. } => Group::V2 {
                path: dirs.remove(0),
            },
            Tree::V1 { cpuacct, .. } => Group::V1 {
                memory: dirs.remove(0),
                cpu: dirs.remove(0),
                cpuacct: cpuacct.as_ref().map(|_| dirs.remove(0)),
            },
        };
        leaf.write_max(max)?;
        let mut files = Vec::new();
        for d in leaf.dirs() {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", d.display())))?;
            files.push(f);
        }
        Ok((leaf, Join { files }))
    }

    /// Removes its home directories when nothing is left in them.
    pub fn tidy(&self) {
        let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
        for home in self.homes() {
            remove(home);
        }
    }
}

/// Ends what is left in `leaf` and removes it, then its group's and its home's directories
/// when they are empty. `false`: it is still there (try again later).
pub fn release(leaf: &Group) -> bool {
    let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let mut gone = true;
    for dir in leaf.dirs() {
        gone &= clear(dir, Duration::from_millis(200));
        prune_parents(dir);
    }
    gone
}

/// Removes `leaf` if nothing runs in it (another process may share it), then its group's and
/// home's directories when they are empty.
pub fn release_unused(leaf: &Group) {
    let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    for dir in leaf.dirs() {
        if members(dir).is_empty() && remove(dir) {
            prune_parents(dir);
        }
    }
}

/// A leaf's group and home directories go once they are empty.
fn prune_parents(leaf: &Path) {
    if let Some(group) = leaf.parent() {
        if remove(group) {
            if let Some(home) = group.parent() {
                remove(home);
            }
        }
    }
}

/// Ends what is in every leaf of the group directories `groups` that `is_leaf` accepts and
/// removes it, then each group directory and its home when they are left empty.
pub fn release_groups(groups: &[PathBuf], is_leaf: impl Fn(&Path) -> bool) {
    let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    for g in groups {
        let Ok(entries) = std::fs::read_dir(g) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && is_leaf(&p) {
                clear(&p, Duration::from_millis(200));
            }
        }
        if remove(g) {
            if let Some(home) = g.parent() {
                remove(home);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes each `(name, text)` into `dir`: a cgroup's interface files as a test fakes them.
    fn interface_files(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    #[test]
    fn usage_is_read_from_v1_and_v2_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        interface_files(
            d,
            &[
                ("memory.current", "10485760\n"),
                (
                    "memory.stat",
                    "anon 100\ninactive_file 2097152\nactive_file 5\n",
                ),
                (
                    "cpu.stat",
                    "usage_usec 1500\nuser_usec 1000\nnr_throttled 7\n",
                ),
                ("memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"),
            ],
        );
        let v2 = Group::V2 { path: d.into() };
        assert_eq!(
            v2.usage().unwrap(),
            Usage {
                memory_bytes: 8 << 20,
                cpu_usec: 1500,
                oom_kills: 1,
                throttled: 7
            }
        );
        assert_eq!(v2.cpu_usec(), Some(1500));
        let v1 = tempfile::tempdir().unwrap();
        let m = v1.path().join("m");
        let c = v1.path().join("c");
        interface_files(
            &m,
            &[
                ("memory.usage_in_bytes", "4194304\n"),
                ("memory.stat", "cache 1\ntotal_inactive_file 1048576\n"),
                (
                    "memory.oom_control",
                    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
                ),
            ],
        );
        interface_files(
            &c,
            &[
                ("cpuacct.usage", "2000000\n"),
                ("cpu.stat", "nr_periods 5\nnr_throttled 3\n"),
            ],
        );
        let v1 = Group::V1 {
            memory: m,
            cpu: c,
            cpuacct: None,
        };
        assert_eq!(
            v1.usage().unwrap(),
            Usage {
                memory_bytes: 3 << 20,
                cpu_usec: 2000,
                oom_kills: 2,
                throttled: 3
            }
        );
        assert_eq!(v1.cpu_usec(), Some(2000));
        let gone = Group::V2 {
            path: d.join("nope"),
        };
        assert_eq!(gone.usage(), None);
        assert_eq!(gone.cpu_usec(), None);
    }

    #[test]
    fn cpu_shares_become_quotas_of_at_least_a_millisecond() {
        assert_eq!(quota_us(0.5), 50_000);
        assert_eq!(quota_us(2.0), 200_000);
        // 0.001 of a core would be 100 µs: the kernel takes no less than 1 ms a period.
        assert_eq!(quota_us(0.001), MIN_QUOTA_US);
        assert_eq!(quota_us(-1.0), MIN_QUOTA_US);
        assert_eq!(quota_us(f64::NAN), MIN_QUOTA_US);
    }

    #[test]
    fn v1_limits_go_in_the_memory_and_cpu_hierarchies() {
        let dir = tempfile::tempdir().unwrap();
        let (m, c) = (dir.path().join("m"), dir.path().join("c"));
        std::fs::create_dir_all(&m).unwrap();
        std::fs::create_dir_all(&c).unwrap();
        let g = Group::V1 {
            memory: m.clone(),
            cpu: c.clone(),
            cpuacct: None,
        };
        g.write_max(Max {
            memory_bytes: Some(1 << 30),
            cpu_cores: Some(1.5),
        })
        .unwrap();
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(m.join("memory.limit_in_bytes")), "1073741824");
        assert_eq!(read(c.join("cpu.cfs_period_us")), "100000");
        assert_eq!(read(c.join("cpu.cfs_quota_us")), "150000");
        // No limit of a kind: its file is not written.
        let only_cpu = Group::V2 { path: m.clone() };
        only_cpu
            .write_max(Max {
                memory_bytes: None,
                cpu_cores: Some(0.25),
            })
            .unwrap();
        assert!(!m.join("memory.max").exists());
        assert_eq!(read(m.join("cpu.max")), "25000 100000");
    }

    #[test]
    fn a_leaf_is_prepared_with_its_limits_and_released_with_its_parents() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("v2/binky-t");
        std::fs::create_dir_all(&home).unwrap();
        let cg = Cgroups::new(Tree::V2 { home: home.clone() });
        // A plain directory stands in for cgroupfs: the interface file is made by hand.
        let leaf_dir = home.join("w7/svc-api");
        std::fs::create_dir_all(&leaf_dir).unwrap();
        std::fs::write(leaf_dir.join("cgroup.procs"), "").unwrap();
        let max = Max {
            memory_bytes: Some(64 << 20),
            cpu_cores: Some(0.5),
        };
        let (leaf, join) = cg.prepare("w7", "svc-api", max, false).unwrap();
        assert_eq!(
            leaf,
            Group::V2 {
                path: leaf_dir.clone()
            }
        );
        assert_eq!(join.files.len(), 1);
        assert_eq!(
            std::fs::read_to_string(leaf_dir.join("memory.max")).unwrap(),
            "67108864"
        );
        assert_eq!(
            std::fs::read_to_string(leaf_dir.join("cpu.max")).unwrap(),
            "50000 100000"
        );
        assert_eq!(
            std::fs::read_to_string(home.join("w7/cgroup.subtree_control")).unwrap(),
            "+memory +cpu"
        );
        drop(join);
        // Plain directories hold files, so only the walk is checked here: the files keep
        // them; the real removal is proven on the real hierarchy by binky's integration
        // tests.
        assert!(!release(&leaf));
        assert!(leaf_dir.exists());
    }

    #[test]
    fn members_are_the_pids_listed_and_never_zero() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "12\n0\nx\n 7 \n").unwrap();
        assert_eq!(members(dir.path()), [12, 7]);
        assert!(members(&dir.path().join("gone")).is_empty());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_child_joins_before_it_runs_anything() {
        // A plain file stands in for `cgroup.procs`: the child writes `0` to it before exec.
        let dir = tempfile::tempdir().unwrap();
        let procs = dir.path().join("cgroup.procs");
        std::fs::write(&procs, "").unwrap();
        let join = Join {
            files: vec![std::fs::OpenOptions::new()
                .write(true)
                .open(&procs)
                .unwrap()],
        };
        let mut cmd = tokio::process::Command::new("true");
        join.apply(&mut cmd);
        let status = cmd.status().await.unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read_to_string(&procs).unwrap(), "0");
    }

    #[test]
    fn release_groups_ends_only_the_leaves_it_is_told_are_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let group = dir.path().join("binky-t/w3");
        std::fs::create_dir_all(group.join("svc-a")).unwrap();
        std::fs::create_dir_all(group.join("other")).unwrap();
        release_groups(std::slice::from_ref(&group), |p| {
            p.file_name().is_some_and(|n| n == "svc-a")
        });
        // Empty directories go; one not accepted as a leaf stays, and so does its group.
        assert!(!group.join("svc-a").exists());
        assert!(group.join("other").exists());
        release_groups(std::slice::from_ref(&group), |_| true);
        assert!(!group.exists());
        assert!(
            !dir.path().join("binky-t").exists(),
            "its empty home goes too"
        );
    }
}
