//! binky's cgroups: `binky-<home tag>/w<world>/<leaf>` under the daemon's own cgroup, one
//! leaf per service (`svc-<name>`) and per task (`task-<name>`: setup, migrate, seed, hooks),
//! so each service's limits hold and what each world uses can be read.
//!
//! # Guarantees
//! - Two binky homes never share a cgroup: the top directory carries the home's tag.
//! - A process joins its leaf before it runs anything of its own (between fork and exec), so
//!   everything it starts is in it too, even what leaves its process group.
//! - A service's leaf is made afresh for each run (its out-of-memory count is that run's);
//!   releasing one ends what is still in it and removes it, then its world's and the home's
//!   directory when they are left empty.
//! - Creating and removing directories is serialised, so a release never removes a
//!   directory a spawn is about to use.
//!
//! # Caveats
//! - cgroup v1 charges a file's page cache to the cgroup that first read it; the memory
//!   shown is the working set (usage less inactive file pages), as `docker stats` shows it.

pub mod detect;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use binky_controllers::limits::ResourceLimits;
use binky_controllers::process::Mechanism;
use binky_controllers::store::WorldId;
use binky_controllers::supervisor::Usage;
use serde::{Deserialize, Serialize};

pub use detect::Tree;

/// The CPU period binky's quotas are written in (the kernel's default), in microseconds.
const PERIOD_US: u64 = 100_000;

/// One process's cgroup: a directory per hierarchy. Its JSON is what the store records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "v")]
pub enum Leaf {
    /// cgroup v2.
    #[serde(rename = "2")]
    V2 {
        /// The directory.
        path: PathBuf,
    },
    /// cgroup v1.
    #[serde(rename = "1")]
    V1 {
        /// In the memory hierarchy.
        memory: PathBuf,
        /// In the cpu hierarchy (with cpuacct when they are mounted together).
        cpu: PathBuf,
        /// In a cpuacct hierarchy of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
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

impl Leaf {
    /// What the store keeps.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Read back what [`Leaf::encode`] wrote; `None` for anything else.
    pub fn decode(text: &str) -> Option<Leaf> {
        let leaf: Leaf = serde_json::from_str(text).ok()?;
        // Only directories named as binky names them are ever removed or read.
        leaf.dirs().iter().all(|d| is_binky_leaf(d)).then_some(leaf)
    }

    /// Its directories, one per hierarchy.
    pub fn dirs(&self) -> Vec<&Path> {
        match self {
            Leaf::V2 { path } => vec![path],
            Leaf::V1 {
                memory,
                cpu,
                cpuacct,
            } => v1_dirs(memory, cpu, cpuacct.as_deref()),
        }
    }

    /// What enforces limits in it.
    pub fn mechanism(&self) -> Mechanism {
        match self {
            Leaf::V2 { .. } => Mechanism::CgroupV2,
            Leaf::V1 { .. } => Mechanism::CgroupV1,
        }
    }

    fn write_limits(&self, limits: ResourceLimits) -> io::Result<()> {
        let quota = limits
            .cpu_millis
            .map(|m| (u64::from(m) * PERIOD_US / 1000).max(1000));
        match self {
            Leaf::V2 { path } => {
                if let Some(m) = limits.memory {
                    write(&path.join("memory.max"), &m.to_string())?;
                }
                if let Some(q) = quota {
                    write(&path.join("cpu.max"), &format!("{q} {PERIOD_US}"))?;
                }
            }
            Leaf::V1 { memory, cpu, .. } => {
                if let Some(m) = limits.memory {
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
            Leaf::V2 { path } => {
                let cpu = std::fs::read_to_string(path.join("cpu.stat")).ok()?;
                Some(field(&cpu, "usage_usec"))
            }
            Leaf::V1 { cpu, cpuacct, .. } => {
                let acct = cpuacct.as_deref().unwrap_or(cpu);
                read_number(&acct.join("cpuacct.usage")).map(|ns: u64| ns / 1000)
            }
        }
    }

    /// What it holds now; `None` once it is gone.
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Leaf::V2 { path } => {
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
            Leaf::V1 {
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

/// A leaf binky made: `…/binky-<tag>/w<id>/<name>`.
fn is_binky_leaf(dir: &Path) -> bool {
    let world = dir.parent();
    let home = world.and_then(Path::parent);
    let named = |p: Option<&Path>, pred: &dyn Fn(&str) -> bool| {
        p.and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .is_some_and(pred)
    };
    named(Some(dir), &|n| {
        n.starts_with("svc-") || n.starts_with("task-")
    }) && named(world, &|n| {
        n.strip_prefix('w')
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
    }) && named(home, &|n| n.starts_with("binky-"))
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The number after `key` in a `key value` file (`memory.stat`, `cpu.stat`, …); 0 if absent.
fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// The leaf name of a service (`svc-api`) or of a task (`task-api`, `task-hook-post_up`).
pub fn leaf_name(service: &str, task: bool) -> String {
    let safe: String = service
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{}-{safe}", if task { "task" } else { "svc" })
}

/// The pids in a cgroup directory.
fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Remove a directory of binky's; gone already counts as removed.
fn remove(dir: &Path) -> bool {
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// End what is in a leaf directory and remove it (waiting at most `patience`).
fn clear(dir: &Path, patience: Duration) -> bool {
    if !dir.exists() {
        return true;
    }
    let until = Instant::now() + patience;
    loop {
        let left = members(dir);
        for pid in &left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // A cgroup whose last process just died may be busy for a moment longer.
        if left.is_empty() && remove(dir) {
            return true;
        }
        if Instant::now() >= until {
            tracing::info!(dir = %dir.display(), left = left.len(), "cgroup not removed yet");
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The files a process writes `0` to, between fork and exec, to join its leaf.
pub struct Join {
    files: Vec<OwnedFd>,
}

impl Join {
    /// The raw descriptors (valid while this lives).
    pub fn fds(&self) -> Vec<RawFd> {
        self.files.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Called in the child between fork and exec: only async-signal-safe calls.
    pub fn join(fds: &[RawFd]) -> io::Result<()> {
        for fd in fds {
            // SAFETY: write(2) on a descriptor the parent opened is async-signal-safe.
            let n = unsafe { nix::libc::write(*fd, b"0".as_ptr().cast(), 1) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// binky's cgroups of one home.
pub struct Cgroups {
    tree: Tree,
}

/// Serialises creating and removing binky's cgroup directories (in one daemon).
static DIRS: Mutex<()> = Mutex::new(());

impl Cgroups {
    /// binky's cgroups in `tree`.
    pub fn new(tree: Tree) -> Cgroups {
        Cgroups { tree }
    }

    /// What enforces limits here.
    pub fn mechanism(&self) -> Mechanism {
        match self.tree {
            Tree::V2 { .. } => Mechanism::CgroupV2,
            Tree::V1 { .. } => Mechanism::CgroupV1,
        }
    }

    fn homes(&self) -> Vec<&Path> {
        match &self.tree {
            Tree::V2 { home } => vec![home],
            Tree::V1 {
                memory,
                cpu,
                cpuacct,
            } => v1_dirs(memory, cpu, cpuacct.as_deref()),
        }
    }

    /// A directory of binky's that may already be there; v2 hands the controllers down
    /// to its children.
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

    /// The leaf `name` of `world`, made (afresh when `fresh` and nothing is left in it) with
    /// `limits` written, and the files to join it by.
    pub fn prepare(
        &self,
        world: WorldId,
        name: &str,
        limits: ResourceLimits,
        fresh: bool,
    ) -> io::Result<(Leaf, Join)> {
        let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
        let mut dirs = Vec::new();
        for home in self.homes() {
            self.ensure(home)?;
            let world_dir = home.join(format!("w{world}"));
            self.ensure(&world_dir)?;
            let leaf = world_dir.join(name);
            if fresh && leaf.exists() && members(&leaf).is_empty() {
                // Its counters (out-of-memory kills above all) start again with the run.
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
            Tree::V2 { .. } => Leaf::V2 {
                path: dirs.remove(0),
            },
            Tree::V1 { cpuacct, .. } => Leaf::V1 {
                memory: dirs.remove(0),
                cpu: dirs.remove(0),
                cpuacct: cpuacct.as_ref().map(|_| dirs.remove(0)),
            },
        };
        leaf.write_limits(limits)?;
        let mut files = Vec::new();
        for d in leaf.dirs() {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", d.display())))?;
            files.push(OwnedFd::from(f));
        }
        Ok((leaf, Join { files }))
    }

    /// Remove what is left of binky's directories of this home when nothing runs in them.
    pub fn tidy(&self) {
        let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
        for home in self.homes() {
            remove(home);
        }
    }
}

/// End what is left in `leaf` and remove it, then its world's and its home's directories
/// when they are empty. `false`: it is still there (try again later).
pub fn release(leaf: &Leaf) -> bool {
    let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let mut gone = true;
    for dir in leaf.dirs() {
        gone &= clear(dir, Duration::from_millis(200));
        prune_parents(dir);
    }
    gone
}

/// Remove `leaf` if nothing runs in it (a task's: another task may share it), then its
/// world's and home's directories when they are empty.
pub fn release_unused(leaf: &Leaf) {
    let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    for dir in leaf.dirs() {
        if members(dir).is_empty() && remove(dir) {
            prune_parents(dir);
        }
    }
}

/// A leaf's world and home directories go once they are empty.
fn prune_parents(leaf: &Path) {
    if let Some(world) = leaf.parent() {
        if remove(world) {
            if let Some(home) = world.parent() {
                remove(home);
            }
        }
    }
}

/// Remove every leaf of `world` in `homes` (this daemon's) and in the world directories of
/// `recorded` leaves (a previous daemon's), ending what is left in them.
pub fn release_world(world: WorldId, homes: &[&Path], recorded: &[Leaf]) {
    let _dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let mut world_dirs: Vec<PathBuf> = homes.iter().map(|h| h.join(format!("w{world}"))).collect();
    for leaf in recorded {
        for d in leaf.dirs() {
            if let Some(w) = d.parent() {
                world_dirs.push(w.to_owned());
            }
        }
    }
    world_dirs.sort();
    world_dirs.dedup();
    for w in world_dirs {
        let Ok(entries) = std::fs::read_dir(&w) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && is_binky_leaf(&p) {
                clear(&p, Duration::from_millis(200));
            }
        }
        if remove(&w) {
            if let Some(home) = w.parent() {
                remove(home);
            }
        }
    }
}

impl Cgroups {
    /// [`release_world`] with this daemon's homes.
    pub fn release_world(&self, world: WorldId, recorded: &[Leaf]) {
        release_world(world, &self.homes(), recorded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_named_for_services_and_tasks_and_read_back_only_as_binkys() {
        assert_eq!(leaf_name("api", false), "svc-api");
        assert_eq!(leaf_name("api", true), "task-api");
        assert_eq!(leaf_name("hook:post_up", true), "task-hook-post_up");
        let leaf = Leaf::V1 {
            memory: "/sys/fs/cgroup/memory/x/binky-ab/w3/svc-api".into(),
            cpu: "/sys/fs/cgroup/cpu/binky-ab/w3/svc-api".into(),
            cpuacct: None,
        };
        assert_eq!(Leaf::decode(&leaf.encode()), Some(leaf));
        let v2 = Leaf::V2 {
            path: "/sys/fs/cgroup/u/binky-ab/w12/task-db".into(),
        };
        assert_eq!(Leaf::decode(&v2.encode()), Some(v2));
        // A path binky would not have made is never taken for one of its cgroups.
        for foreign in [
            r#"{"v":"2","path":"/sys/fs/cgroup/user.slice"}"#,
            r#"{"v":"2","path":"/sys/fs/cgroup/binky-ab/wx/svc-a"}"#,
            r#"{"v":"2","path":"/sys/fs/cgroup/other/w1/svc-a"}"#,
            "not json",
        ] {
            assert_eq!(Leaf::decode(foreign), None, "{foreign}");
        }
    }

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
        let u = Leaf::V2 { path: d.into() }.usage().unwrap();
        assert_eq!(
            u,
            Usage {
                memory_bytes: 8 << 20,
                cpu_usec: 1500,
                oom_kills: 1,
                throttled: 7
            }
        );
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
        let u = Leaf::V1 {
            memory: m,
            cpu: c,
            cpuacct: None,
        }
        .usage()
        .unwrap();
        assert_eq!(
            u,
            Usage {
                memory_bytes: 3 << 20,
                cpu_usec: 2000,
                oom_kills: 2,
                throttled: 3
            }
        );
        let gone = Leaf::V2 {
            path: d.join("nope"),
        };
        assert_eq!(gone.usage(), None);
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
        let limits = ResourceLimits {
            memory: Some(64 << 20),
            cpu_millis: Some(500),
        };
        let (leaf, join) = cg.prepare(7, "svc-api", limits, false).unwrap();
        assert_eq!(
            leaf,
            Leaf::V2 {
                path: leaf_dir.clone()
            }
        );
        assert_eq!(join.fds().len(), 1);
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
        // them; the real removal is proven on the real hierarchy by the integration tests.
        assert!(!release(&leaf));
        assert!(leaf_dir.exists());
    }
}
