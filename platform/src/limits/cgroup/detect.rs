//! Which cgroup hierarchy binky can use, found from `/proc/self/cgroup` (where this process
//! is) and `/proc/self/mountinfo` (where the hierarchies are mounted). Linux only: elsewhere
//! [`find`] says the system has no cgroups.
//!
//! In this order: cgroup v2, when the daemon's own cgroup has the memory and cpu
//! controllers and binky may create cgroups below it and hand those controllers down (as
//! root, or in a cgroup systemd delegated to the user); else cgroup v1's memory and cpu
//! hierarchies, when binky may create cgroups in both. Each refusal is kept, so the reason
//! nothing is enforced can name them all.

use std::path::{Path, PathBuf};

/// One mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub point: PathBuf,
    /// Which of its cgroups is mounted there (`/` unless bind-mounted or namespaced).
    pub root: String,
    /// `cgroup2`, or `cgroup` (v1).
    pub v2: bool,
    /// A v1 hierarchy's controllers (`memory`, `cpu`, `cpuacct`, …), among its other
    /// options (`xattr`, …).
    pub controllers: Vec<String>,
}

/// Where this process is in one hierarchy (a line of `/proc/self/cgroup`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// The v1 controllers of the hierarchy; empty for v2 (`0::/path`).
    pub controllers: Vec<String>,
    /// Its cgroup, from the hierarchy's root.
    pub path: String,
}

/// The cgroup mounts of `/proc/self/mountinfo`.
pub fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let f: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            let fstype = *t.first()?;
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let controllers = if v2 {
                Vec::new()
            } else {
                t.get(2)?
                    .split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                    .map(str::to_owned)
                    .collect()
            };
            Some(Mount {
                point: PathBuf::from(unescape(f.get(4)?)),
                root: unescape(f.get(3)?),
                v2,
                controllers,
            })
        })
        .collect()
}

/// mountinfo writes a space as `\040` (and tab, newline, backslash likewise).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let octal = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok());
            if let Some(v) = octal {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The lines of `/proc/self/cgroup`.
pub fn parse_memberships(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(3, ':');
            let _id = f.next()?;
            let controllers = f.next()?;
            let path = f.next()?;
            Some(Membership {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty() && !c.starts_with("name="))
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            })
        })
        .filter(|m| m.path.starts_with('/'))
        .collect()
}

/// What detection looks at.
pub struct Seen<'a> {
    /// `/proc/self/cgroup`.
    pub memberships: &'a [Membership],
    /// The cgroup mounts.
    pub mounts: &'a [Mount],
    /// Only mounts under this directory count (`BINKY_CGROUP_ROOT`).
    pub only_under: Option<&'a Path>,
    /// This process's pid (v2: alone in its cgroup, it may move into a leaf of its own).
    pub pid: u32,
}

/// Where binky's cgroups go: the `binky-<tag>` directory in each hierarchy it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tree {
    /// cgroup v2: one directory.
    V2 {
        /// `<own cgroup>/binky-<tag>`.
        home: PathBuf,
    },
    /// cgroup v1: one directory per hierarchy.
    V1 {
        /// In the memory hierarchy.
        memory: PathBuf,
        /// In the cpu hierarchy.
        cpu: PathBuf,
        /// In the cpuacct hierarchy, when it is not the cpu one (usage only).
        cpuacct: Option<PathBuf>,
    },
}

/// Whether detection may change the machine (the daemon) or only look (`binky check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Create `binky-<tag>` and turn the v2 controllers on for it.
    Create,
    /// Only check that it could.
    Look,
}

/// The directory of the cgroup at `path` (a membership's) in `mount`, when the mount
/// shows it.
pub fn own_dir(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rel = path.strip_prefix(root)?;
    if !rel.is_empty() && !rel.starts_with('/') {
        return None;
    }
    Some(mount.point.join(rel.trim_start_matches('/')))
}

fn under(only: Option<&Path>, m: &Mount) -> bool {
    only.is_none_or(|root| m.point.starts_with(root))
}

fn words(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn has_both(list: &[String]) -> bool {
    ["memory", "cpu"]
        .iter()
        .all(|c| list.iter().any(|l| l == c))
}

/// Whether this process may create entries in `dir` (as the kernel would decide it).
fn writable(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK)
            .map_err(|e| format!("{}: {}", dir.display(), std::io::Error::from(e)))
    }
    #[cfg(not(unix))]
    {
        // Only Linux has cgroups: detection never reaches this elsewhere.
        Err(format!("{}: not a cgroup on this system", dir.display()))
    }
}

fn make(dir: &Path) -> Result<(), String> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot create {}: {e}", dir.display())),
    }
}

/// Turn the memory and cpu controllers on for the children of `dir` (v2).
pub fn enable_controllers(dir: &Path) -> std::io::Result<()> {
    if has_both(&words(&dir.join("cgroup.subtree_control"))) {
        return Ok(());
    }
    std::fs::write(dir.join("cgroup.subtree_control"), "+memory +cpu")
}

/// The v2 tree under this process's cgroup, or why not.
fn v2(seen: &Seen<'_>, tag: &str, mode: Mode) -> Result<Tree, String> {
    let own = seen
        .memberships
        .iter()
        .find(|m| m.controllers.is_empty())
        .ok_or("this process is in no cgroup v2 hierarchy")?;
    let mount = seen
        .mounts
        .iter()
        .filter(|m| m.v2 && under(seen.only_under, m))
        .find_map(|m| own_dir(m, &own.path).map(|d| (m, d)));
    let Some((mount, dir)) = mount else {
        return Err("no cgroup v2 hierarchy is mounted".to_owned());
    };
    let available = words(&dir.join("cgroup.controllers"));
    if !has_both(&available) {
        return Err(format!(
            "cgroup v2 ({}): the memory and cpu controllers are not available in {} (it has: {})",
            mount.point.display(),
            dir.display(),
            if available.is_empty() {
                "none".to_owned()
            } else {
                available.join(" ")
            }
        ));
    }
    let home = dir.join(format!("binky-{tag}"));
    let fail = |why: String| format!("cgroup v2 ({}): {why}", dir.display());
    if mode == Mode::Look {
        writable(&dir).map_err(fail)?;
        // The controllers can be handed down only by a cgroup without processes of its own
        // (or with this one alone, which would move out of the way).
        let procs = words(&dir.join("cgroup.procs"));
        let handed = has_both(&words(&dir.join("cgroup.subtree_control")));
        let alone = procs.iter().all(|p| *p == seen.pid.to_string());
        if !handed && !alone {
            return Err(fail(
                "other processes share this cgroup, so it cannot hand the memory and cpu controllers down".to_owned(),
            ));
        }
        return Ok(Tree::V2 { home });
    }
    if let Err(e) = enable_controllers(&dir) {
        // A cgroup that holds processes cannot hand controllers down (the kernel's "no
        // internal processes" rule). The daemon alone in a cgroup delegated to it (a
        // systemd unit with Delegate=yes) moves into a leaf of its own and tries again.
        let procs = words(&dir.join("cgroup.procs"));
        let alone = procs.len() == 1 && procs[0] == seen.pid.to_string();
        if !alone {
            return Err(fail(format!(
                "cannot turn the memory and cpu controllers on for its children ({e}); other processes share the daemon's cgroup"
            )));
        }
        let leaf = dir.join(format!("binky-{tag}-daemon"));
        make(&leaf).map_err(fail)?;
        std::fs::write(leaf.join("cgroup.procs"), seen.pid.to_string()).map_err(|e| {
            fail(format!(
                "cannot move the daemon into {}: {e}",
                leaf.display()
            ))
        })?;
        enable_controllers(&dir).map_err(|e| {
            fail(format!(
                "cannot turn the memory and cpu controllers on for its children: {e}"
            ))
        })?;
    }
    make(&home).map_err(fail)?;
    enable_controllers(&home).map_err(|e| {
        fail(format!(
            "cannot turn the memory and cpu controllers on in {}: {e}",
            home.display()
        ))
    })?;
    Ok(Tree::V2 { home })
}

/// This process's directory in the v1 hierarchy of `controller`.
fn v1_dir(seen: &Seen<'_>, controller: &str) -> Result<PathBuf, String> {
    let own = seen
        .memberships
        .iter()
        .find(|m| m.controllers.iter().any(|c| c == controller))
        .ok_or_else(|| format!("no {controller} hierarchy"))?;
    seen.mounts
        .iter()
        .filter(|m| !m.v2 && under(seen.only_under, m))
        .filter(|m| m.controllers.iter().any(|c| c == controller))
        .find_map(|m| own_dir(m, &own.path))
        .ok_or_else(|| format!("the {controller} hierarchy is not mounted"))
}

/// The v1 tree under this process's memory and cpu cgroups, or why not.
fn v1(seen: &Seen<'_>, tag: &str, mode: Mode) -> Result<Tree, String> {
    let name = format!("binky-{tag}");
    let mut homes = Vec::new();
    for (controller, file) in [
        ("memory", "memory.limit_in_bytes"),
        ("cpu", "cpu.cfs_quota_us"),
    ] {
        let dir = v1_dir(seen, controller).map_err(|e| format!("cgroup v1: {e}"))?;
        if !dir.join(file).exists() {
            return Err(format!(
                "cgroup v1 {controller} ({}): no {file} (the kernel lacks the limit)",
                dir.display()
            ));
        }
        let home = dir.join(&name);
        match mode {
            Mode::Look => writable(&dir),
            Mode::Create => make(&home),
        }
        .map_err(|e| format!("cgroup v1 {controller}: {e}"))?;
        homes.push(home);
    }
    let cpu = homes.pop().unwrap_or_default();
    let memory = homes.pop().unwrap_or_default();
    // CPU time comes from cpuacct: the cpu hierarchy itself when they are mounted together.
    let cpuacct = match v1_dir(seen, "cpuacct") {
        Ok(dir) if dir.join(&name) != cpu => {
            let home = dir.join(&name);
            let ok = match mode {
                Mode::Look => writable(&dir).is_ok(),
                Mode::Create => make(&home).is_ok(),
            };
            ok.then_some(home)
        }
        _ => None,
    };
    Ok(Tree::V1 {
        memory,
        cpu,
        cpuacct,
    })
}

/// Where binky's cgroups go on this machine (`binky-<tag>` in each hierarchy it uses), or
/// why there are none: this process's cgroups, from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, counting only hierarchies mounted under `only_under` when given.
/// On systems other than Linux: why not (there are no cgroups).
pub fn find(tag: &str, only_under: Option<&Path>, mode: Mode) -> Result<Tree, String> {
    #[cfg(target_os = "linux")]
    {
        let memberships =
            parse_memberships(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default());
        let mounts =
            parse_mounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default());
        let seen = Seen {
            memberships: &memberships,
            mounts: &mounts,
            only_under,
            pid: std::process::id(),
        };
        detect(&seen, tag, mode)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tag, only_under, mode);
        Err("cgroups are Linux's: this system has none".to_owned())
    }
}

/// The tree binky's cgroups go in (v2 first, then v1), or every reason there is none.
pub fn detect(seen: &Seen<'_>, tag: &str, mode: Mode) -> Result<Tree, String> {
    let v2 = match v2(seen, tag, mode) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let v1 = match v1(seen, tag, mode) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    Err(format!("{v2}; {v1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's kind: v1 memory (in a sub-cgroup), cpu and cpuacct apart, v2 without
    /// controllers.
    const DEBIAN_V1: &str = "\
30 25 0:26 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const DEBIAN_SELF: &str = "9:name=systemd:/\n4:memory:/api/6ff\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    #[test]
    fn mounts_and_memberships_are_read() {
        let mounts = parse_mounts(DEBIAN_V1);
        assert_eq!(mounts.len(), 5);
        assert_eq!(mounts[0].point, Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(mounts[0].controllers, ["cpu"]);
        // Other options (`xattr`) ride along; only controllers a membership names matter.
        assert_eq!(mounts[3].controllers, ["xattr"], "name=systemd");
        assert!(mounts[4].v2);
        let me = parse_memberships(DEBIAN_SELF);
        assert_eq!(me.len(), 5);
        assert_eq!(me[0].controllers, Vec::<String>::new());
        assert_eq!(me[1].controllers, ["memory"]);
        assert_eq!(me[1].path, "/api/6ff");
        let co = parse_mounts(
            "40 30 0:40 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
        );
        assert_eq!(co[0].controllers, ["cpu", "cpuacct"]);
        let spaced = parse_mounts("1 1 0:1 / /a\\040b rw - cgroup2 cgroup2 rw\n");
        assert_eq!(spaced[0].point, Path::new("/a b"));
    }

    #[test]
    fn own_cgroup_is_found_below_the_mounts_root() {
        let m = Mount {
            point: "/sys/fs/cgroup".into(),
            root: "/".into(),
            v2: true,
            controllers: vec![],
        };
        assert_eq!(
            own_dir(&m, "/user.slice/x.scope"),
            Some(PathBuf::from("/sys/fs/cgroup/user.slice/x.scope"))
        );
        assert_eq!(own_dir(&m, "/"), Some(PathBuf::from("/sys/fs/cgroup")));
        let bound = Mount {
            root: "/docker/abc".into(),
            ..m
        };
        assert_eq!(
            own_dir(&bound, "/docker/abc/sub"),
            Some(PathBuf::from("/sys/fs/cgroup/sub"))
        );
        assert_eq!(own_dir(&bound, "/other"), None);
        assert_eq!(own_dir(&bound, "/docker/abcdef"), None);
    }

    /// A fake cgroup filesystem: directories and interface files in a temp dir (Unix's
    /// paths and access checks: cgroups are only ever Linux's).
    #[cfg(unix)]
    struct Fake {
        dir: tempfile::TempDir,
    }

    #[cfg(unix)]
    impl Fake {
        fn new() -> Fake {
            Fake {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn file(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            p
        }
        fn mountinfo(&self, lines: &[(&str, &str, &str)]) -> Vec<Mount> {
            let text: String = lines
                .iter()
                .map(|(point, fstype, opts)| {
                    format!(
                        "1 1 0:1 / {} rw - {fstype} {fstype} {opts}\n",
                        self.dir.path().join(point).display()
                    )
                })
                .collect();
            parse_mounts(&text)
        }
    }

    #[cfg(unix)]
    fn seen<'a>(me: &'a [Membership], mounts: &'a [Mount]) -> Seen<'a> {
        Seen {
            memberships: me,
            mounts,
            only_under: None,
            pid: 4242,
        }
    }

    #[cfg(unix)]
    #[test]
    fn v2_with_memory_and_cpu_is_chosen_and_hands_them_down() {
        let fs = Fake::new();
        fs.file("v2/svc/cgroup.controllers", "cpuset cpu io memory pids\n");
        fs.file("v2/svc/cgroup.subtree_control", "");
        fs.file("v2/svc/cgroup.procs", "1\n2\n");
        let mounts = fs.mountinfo(&[("v2", "cgroup2", "rw")]);
        let me = parse_memberships("0::/svc\n");
        let tree = detect(&seen(&me, &mounts), "t1", Mode::Create).unwrap();
        let home = fs.dir.path().join("v2/svc/binky-t1");
        assert_eq!(tree, Tree::V2 { home: home.clone() });
        assert!(home.is_dir());
        let handed = std::fs::read_to_string(fs.dir.path().join("v2/svc/cgroup.subtree_control"));
        assert_eq!(handed.unwrap(), "+memory +cpu");
        assert_eq!(
            std::fs::read_to_string(home.join("cgroup.subtree_control")).unwrap(),
            "+memory +cpu"
        );
        // Looking at a cgroup that holds other processes and hands nothing down: not usable.
        let fs = Fake::new();
        fs.file("v2/s/cgroup.controllers", "cpu memory\n");
        fs.file("v2/s/cgroup.subtree_control", "");
        fs.file("v2/s/cgroup.procs", "1\n4242\n");
        let mounts = fs.mountinfo(&[("v2", "cgroup2", "rw")]);
        let me = parse_memberships("0::/s\n");
        let why = v2(&seen(&me, &mounts), "t1", Mode::Look).unwrap_err();
        assert!(why.contains("other processes share this cgroup"), "{why}");
        fs.file("v2/s/cgroup.procs", "4242\n");
        assert!(v2(&seen(&me, &mounts), "t1", Mode::Look).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn v2_without_controllers_falls_to_v1_memory_and_cpu() {
        let fs = Fake::new();
        fs.file("unified/cgroup.controllers", "hugetlb\n");
        fs.file(
            "memory/api/6ff/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        fs.file("cpu/cpu.cfs_quota_us", "-1\n");
        fs.file("cpuacct/cpuacct.usage", "0\n");
        let mounts = fs.mountinfo(&[
            ("cpu", "cgroup", "rw,cpu"),
            ("cpuacct", "cgroup", "rw,cpuacct"),
            ("memory", "cgroup", "rw,memory"),
            ("unified", "cgroup2", "rw"),
        ]);
        let me = parse_memberships(DEBIAN_SELF);
        let tree = detect(&seen(&me, &mounts), "t1", Mode::Create).unwrap();
        let root = fs.dir.path();
        assert_eq!(
            tree,
            Tree::V1 {
                memory: root.join("memory/api/6ff/binky-t1"),
                cpu: root.join("cpu/binky-t1"),
                cpuacct: Some(root.join("cpuacct/binky-t1")),
            }
        );
        assert!(root.join("memory/api/6ff/binky-t1").is_dir());
        // Looking only creates nothing.
        let fs2 = Fake::new();
        fs2.file("memory/api/6ff/memory.limit_in_bytes", "1\n");
        fs2.file("cpu/cpu.cfs_quota_us", "-1\n");
        let mounts2 = fs2.mountinfo(&[
            ("cpu", "cgroup", "rw,cpu"),
            ("memory", "cgroup", "rw,memory"),
        ]);
        assert!(matches!(
            detect(&seen(&me, &mounts2), "t1", Mode::Look),
            Ok(Tree::V1 { cpuacct: None, .. })
        ));
        assert!(!fs2.dir.path().join("cpu/binky-t1").exists());
    }

    #[cfg(unix)]
    #[test]
    fn cpu_and_cpuacct_mounted_together_are_one_directory() {
        let fs = Fake::new();
        fs.file("memory/memory.limit_in_bytes", "1\n");
        fs.file("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        let mounts = fs.mountinfo(&[
            ("memory", "cgroup", "rw,memory"),
            ("cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
        ]);
        let me = parse_memberships("5:memory:/\n3:cpu,cpuacct:/\n");
        let tree = detect(&seen(&me, &mounts), "t", Mode::Create).unwrap();
        assert!(matches!(tree, Tree::V1 { cpuacct: None, .. }), "{tree:?}");
    }

    #[cfg(unix)]
    #[test]
    fn nothing_usable_names_every_reason() {
        let fs = Fake::new();
        fs.file("unified/cgroup.controllers", "hugetlb\n");
        fs.file("memory/memory.limit_in_bytes", "1\n");
        let mounts = fs.mountinfo(&[
            ("memory", "cgroup", "rw,memory"),
            ("unified", "cgroup2", "rw"),
        ]);
        let me = parse_memberships("4:memory:/\n0::/\n");
        let why = detect(&seen(&me, &mounts), "t", Mode::Create).unwrap_err();
        assert!(
            why.contains("the memory and cpu controllers are not available"),
            "{why}"
        );
        assert!(why.contains("(it has: hugetlb)"), "{why}");
        assert!(why.contains("cgroup v1: no cpu hierarchy"), "{why}");
        // Only mounts under `only_under` count.
        let elsewhere = tempfile::tempdir().unwrap();
        let s = Seen {
            only_under: Some(elsewhere.path()),
            ..seen(&me, &mounts)
        };
        let why = detect(&s, "t", Mode::Create).unwrap_err();
        assert!(why.contains("no cgroup v2 hierarchy is mounted"), "{why}");
        assert!(why.contains("not mounted"), "{why}");
    }

    #[test]
    fn this_machines_cgroups_are_read_and_only_those_under_a_root_count() {
        let elsewhere = tempfile::tempdir().unwrap();
        let why = find("t", Some(elsewhere.path()), Mode::Look).unwrap_err();
        if cfg!(target_os = "linux") {
            // The real files were read: this process is in a cgroup, none mounted there.
            assert!(why.contains("no cgroup v2 hierarchy is mounted"), "{why}");
        } else {
            assert!(why.contains("cgroups are Linux's"), "{why}");
        }
    }
}
