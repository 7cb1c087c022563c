//! Everything a command started, however it left: a process that makes itself the
//! subreaper of its children (`PR_SET_CHILD_SUBREAPER`, Linux 3.4) has every orphan below
//! it re-parented to itself instead of init, so what a command starts stays among its
//! descendants even through `setsid` and a double fork. `binky exec` runs its command so.
//! Windows has no subreaper, but keeps each process's parent pid after the parent ends:
//! descendants are found by it there. Other Unix systems have neither: an orphan there is
//! lost to init.
//!
//! # Guarantees
//! - [`Subtree::end`] kills (SIGKILL) every live descendant, pass after pass, until none is
//!   left: what a process forks before its kill arrives is found by the next pass, and a
//!   killed process's orphans come back to this one.
//! - The daemon of this binky home, when a command started it (`binky up` inside `binky
//!   exec`), is not the command's: it and what runs below it are spared.
//! - Zombies re-parented here are reaped (but the command itself, which its owner waits for).
//!
//! # Caveats
//! - Nothing holds the tree once this process is gone: killed with SIGKILL, it cannot end
//!   what it started, and its orphans go to init. `binky mcp` therefore stops `binky exec`
//!   with SIGTERM, and kills it only when it has not ended in time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use binky_platform::proc;

/// The processes below this one.
#[derive(Debug)]
pub struct Subtree {
    me: u32,
    /// The lock file of the binky home whose daemon is never ended with the others (read
    /// each time: the command may start it).
    daemon_lock: Option<PathBuf>,
}

impl Subtree {
    /// Make this process the subreaper of what it starts from now on; the daemon holding
    /// `daemon_lock`, if one does, is never ended.
    pub fn adopt(daemon_lock: impl Into<Option<PathBuf>>) -> std::io::Result<Subtree> {
        if !proc::become_subreaper()? {
            tracing::debug!("no subreaper on this system; descendants are found by parent");
        }
        Ok(Subtree {
            me: std::process::id(),
            daemon_lock: daemon_lock.into(),
        })
    }

    /// Every live (not zombie) descendant.
    pub fn members(&self) -> Vec<u32> {
        let spare = self.daemon_lock.as_deref().and_then(home_daemon);
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (pid, ppid) in proc::parents() {
            if pid != ppid {
                children.entry(ppid).or_default().push(pid);
            }
        }
        let mut out = Vec::new();
        let mut next = vec![self.me];
        while let Some(p) = next.pop() {
            for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
                if Some(c) == spare || c == self.me {
                    continue;
                }
                out.push(c);
                next.push(c);
            }
        }
        out
    }

    /// Kill every descendant until none is left, or `patience` runs out (false then).
    /// Zombies that are this process's are reaped, but `waited` (the command, whose
    /// owner waits for it).
    pub fn end(&self, waited: Option<u32>, patience: Duration) -> bool {
        let until = Instant::now() + patience;
        loop {
            let left = self.members();
            for p in &left {
                let _ = proc::kill(*p);
            }
            self.reap(waited);
            if left.is_empty() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Reap the zombies that are this process's children, but `waited`.
    pub fn reap(&self, waited: Option<u32>) {
        proc::reap_children(waited);
    }
}

/// The daemon of the binky home at `home` (its pid, from the lock file it holds), when it
/// runs: this binary, as `daemon run`.
pub fn home_daemon(lock: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(lock).ok()?.trim().parse().ok()?;
    let args = binky_platform::process::command_line(pid)?;
    let is_run = args.len() >= 3 && args[1] == "daemon" && args[2] == "run";
    let exe = proc::exe(pid)?;
    let ours = std::env::current_exe().ok()?;
    (is_run && exe == ours).then_some(pid)
}

// What the test starts (setsid, sh) and what it proves (a subreaper) are Linux's.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::Command;

    /// A subreaper test changes this test process for good: it runs in a child process of
    /// its own (the test binary, asked for this test alone).
    #[test]
    fn a_subtree_ends_what_left_by_setsid_and_a_double_fork() {
        if std::env::var_os("BINKY_SUBTREE_CHILD").is_none() {
            let out = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "supervisor::descendants::tests::a_subtree_ends_what_left_by_setsid_and_a_double_fork",
                    "--nocapture",
                ])
                .env("BINKY_SUBTREE_CHILD", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let tree = Subtree::adopt(None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "setsid sleep 600 & echo $! > {d}/a; (setsid sh -c 'sleep 600 & echo $! > {d}/b' &); exit 0",
            d = dir.path().display()
        );
        let status = Command::new("sh").arg("-c").arg(&script).status().unwrap();
        assert!(status.success());
        let read = |f: &str| -> u32 {
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(p) = std::fs::read_to_string(dir.path().join(f))
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                {
                    return p;
                }
                assert!(Instant::now() < until, "{f} never written");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let (a, b) = (read("a"), read("b"));
        let members = tree.members();
        assert!(members.contains(&a) && members.contains(&b), "{members:?}");
        assert!(tree.end(None, Duration::from_secs(5)));
        for p in [a, b] {
            assert!(proc::stat(p).is_none_or(|s| s.ended()), "{p} is alive");
        }
        assert!(tree.members().is_empty());
    }
}
