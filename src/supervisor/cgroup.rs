//! binky's cgroups: `binky-<home tag>/w<world>/<leaf>` under the daemon's own cgroup, one
//! leaf per service (`svc-<name>`) and per task (`task-<name>`: setup, migrate, seed, hooks),
//! so each service's limits hold and what each world uses can be read. The mechanism
//! (directories, limit files, joining, usage) is the platform's
//! ([`binky_platform::limits::cgroup`], Linux); this is binky's side of it: the names, the
//! units, and what the store records of a leaf.
//!
//! # Guarantees
//! - Two binky homes never share a cgroup: the top directory carries the home's tag.
//! - A process joins its leaf before it runs anything of its own (between fork and exec), so
//!   everything it starts is in it too, even what leaves its process group.
//! - A service's leaf is made afresh for each run (its out-of-memory count is that run's);
//!   releasing one ends what is still in it and removes it, then its world's and the home's
//!   directory when they are left empty.
//! - Only directories named as binky names them are read back from the store, read or
//!   removed.

use std::io;
use std::path::{Path, PathBuf};

use binky_controllers::limits::ResourceLimits;
use binky_controllers::process::Mechanism;
use binky_controllers::store::WorldId;
use binky_controllers::supervisor::Usage;
use binky_platform::limits::cgroup as sys;
use binky_platform::limits::Max;
use serde::{Deserialize, Serialize};

pub use sys::{Join, Tree};

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
            } => {
                let mut dirs = vec![memory.as_path(), cpu.as_path()];
                dirs.extend(cpuacct.as_deref());
                dirs
            }
        }
    }

    /// What enforces limits in it.
    pub fn mechanism(&self) -> Mechanism {
        match self {
            Leaf::V2 { .. } => Mechanism::CgroupV2,
            Leaf::V1 { .. } => Mechanism::CgroupV1,
        }
    }

    /// The CPU time used, from one file.
    pub fn cpu_usec(&self) -> Option<u64> {
        self.group().cpu_usec()
    }

    /// What it holds now; `None` once it is gone.
    pub fn usage(&self) -> Option<Usage> {
        self.group().usage()
    }

    /// The platform's cgroup it names.
    fn group(&self) -> sys::Group {
        match self.clone() {
            Leaf::V2 { path } => sys::Group::V2 { path },
            Leaf::V1 {
                memory,
                cpu,
                cpuacct,
            } => sys::Group::V1 {
                memory,
                cpu,
                cpuacct,
            },
        }
    }

    /// The leaf of the platform's cgroup `group`.
    fn of(group: sys::Group) -> Leaf {
        match group {
            sys::Group::V2 { path } => Leaf::V2 { path },
            sys::Group::V1 {
                memory,
                cpu,
                cpuacct,
            } => Leaf::V1 {
                memory,
                cpu,
                cpuacct,
            },
        }
    }
}

/// `limits` in the platform's units: bytes, and a share of a core.
pub fn max_of(limits: ResourceLimits) -> Max {
    Max {
        memory_bytes: limits.memory,
        cpu_cores: limits.cpu_millis.map(|m| f64::from(m) / 1000.0),
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

/// The directory of `world` in each home.
fn world_dir(world: WorldId) -> String {
    format!("w{world}")
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

/// binky's cgroups of one home.
pub struct Cgroups {
    inner: sys::Cgroups,
}

impl Cgroups {
    /// binky's cgroups in `tree`.
    pub fn new(tree: Tree) -> Cgroups {
        Cgroups {
            inner: sys::Cgroups::new(tree),
        }
    }

    /// What enforces limits here.
    pub fn mechanism(&self) -> Mechanism {
        match self.inner.tree() {
            Tree::V2 { .. } => Mechanism::CgroupV2,
            Tree::V1 { .. } => Mechanism::CgroupV1,
        }
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
        let (group, join) = self
            .inner
            .prepare(&world_dir(world), name, max_of(limits), fresh)?;
        Ok((Leaf::of(group), join))
    }

    /// Remove what is left of binky's directories of this home when nothing runs in them.
    pub fn tidy(&self) {
        self.inner.tidy();
    }

    /// [`release_world`] with this daemon's homes.
    pub fn release_world(&self, world: WorldId, recorded: &[Leaf]) {
        release_world(world, &self.inner.homes(), recorded);
    }
}

/// End what is left in `leaf` and remove it, then its world's and its home's directories
/// when they are empty. `false`: it is still there (try again later).
pub fn release(leaf: &Leaf) -> bool {
    let gone = sys::release(&leaf.group());
    if !gone {
        tracing::info!(leaf = %leaf.encode(), "cgroup not removed yet");
    }
    gone
}

/// Remove `leaf` if nothing runs in it (a task's: another task may share it), then its
/// world's and home's directories when they are empty.
pub fn release_unused(leaf: &Leaf) {
    sys::release_unused(&leaf.group());
}

/// Remove every leaf of `world` in `homes` (this daemon's) and in the world directories of
/// `recorded` leaves (a previous daemon's), ending what is left in them.
pub fn release_world(world: WorldId, homes: &[&Path], recorded: &[Leaf]) {
    let mut world_dirs: Vec<PathBuf> = homes.iter().map(|h| h.join(world_dir(world))).collect();
    for leaf in recorded {
        for d in leaf.dirs() {
            if let Some(w) = d.parent() {
                world_dirs.push(w.to_owned());
            }
        }
    }
    world_dirs.sort();
    world_dirs.dedup();
    sys::release_groups(&world_dirs, is_binky_leaf);
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
            memory: "/cg/memory/x/binky-ab/w3/svc-api".into(),
            cpu: "/cg/cpu/binky-ab/w3/svc-api".into(),
            cpuacct: None,
        };
        assert_eq!(Leaf::decode(&leaf.encode()), Some(leaf));
        let v2 = Leaf::V2 {
            path: "/cg/u/binky-ab/w12/task-db".into(),
        };
        assert_eq!(Leaf::decode(&v2.encode()), Some(v2));
        // A path binky would not have made is never taken for one of its cgroups.
        for foreign in [
            r#"{"v":"2","path":"/cg/user.slice"}"#,
            r#"{"v":"2","path":"/cg/binky-ab/wx/svc-a"}"#,
            r#"{"v":"2","path":"/cg/other/w1/svc-a"}"#,
            "not json",
        ] {
            assert_eq!(Leaf::decode(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn leaves_the_store_recorded_before_are_still_read() {
        // As earlier daemons wrote them: rows in `process_resources` keep this JSON.
        let v1 = r#"{"v":"1","memory":"/cg/memory/binky-ab/w3/svc-api","cpu":"/cg/cpu/binky-ab/w3/svc-api","cpuacct":"/cg/cpuacct/binky-ab/w3/svc-api"}"#;
        let leaf = Leaf::decode(v1).unwrap();
        assert_eq!(leaf.dirs().len(), 3);
        assert_eq!(leaf.mechanism(), Mechanism::CgroupV1);
        assert_eq!(leaf.encode(), v1, "written back the same");
        let v2 = r#"{"v":"2","path":"/cg/binky-ab/w1/svc-web"}"#;
        assert_eq!(Leaf::decode(v2).map(|l| l.encode()).as_deref(), Some(v2));
    }

    #[test]
    fn limits_become_bytes_and_a_share_of_a_core() {
        let max = max_of(ResourceLimits {
            memory: Some(512 << 20),
            cpu_millis: Some(250),
        });
        assert_eq!(max.memory_bytes, Some(512 << 20));
        assert_eq!(max.cpu_cores, Some(0.25));
        assert_eq!(max_of(ResourceLimits::default()), Max::default());
    }

    #[test]
    fn a_worlds_release_takes_only_binkys_leaves_of_that_world() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("binky-t");
        let cg = Cgroups::new(Tree::V2 { home: home.clone() });
        for leaf in ["w7/svc-api", "w7/task-setup", "w7/not-binkys", "w8/svc-api"] {
            std::fs::create_dir_all(home.join(leaf)).unwrap();
        }
        cg.release_world(7, &[]);
        assert!(!home.join("w7/svc-api").exists());
        assert!(!home.join("w7/task-setup").exists());
        assert!(home.join("w7/not-binkys").exists());
        assert!(home.join("w8/svc-api").exists(), "another world's stays");
        // A previous daemon's leaves are found by the directories the store recorded.
        let old = dir.path().join("old/binky-t");
        std::fs::create_dir_all(old.join("w8/svc-web")).unwrap();
        let recorded = Leaf::V2 {
            path: old.join("w8/svc-web"),
        };
        release_world(8, &[], &[recorded]);
        assert!(
            !old.exists(),
            "the leaf, its world's and its home's directories"
        );
        assert!(home.join("w8/svc-api").exists(), "not this daemon's homes");
    }
}
