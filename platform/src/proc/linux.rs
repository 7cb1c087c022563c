//! Linux: processes as `/proc` shows them.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use super::{parse_stat, parse_use, Stat, Use};

/// Listening sockets by the link a descriptor reads (`socket:[123]`) → their port.
pub type Sockets = HashMap<String, u16>;

pub fn sockets_empty(s: &Sockets) -> bool {
    s.is_empty()
}

pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

pub fn started(pid: u32) -> Option<(u64, bool)> {
    stat(pid).map(|s| (s.start_time, !s.ended()))
}

pub fn pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

pub fn parents() -> Vec<(u32, u32)> {
    pids()
        .into_iter()
        .filter_map(|p| stat(p).filter(|s| !s.ended()).map(|s| (p, s.ppid)))
        .collect()
}

pub fn group_members(pgid: u32) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|p| matches!(stat(*p), Some(s) if s.pgrp == pgid && !s.ended()))
        .collect()
}

/// One `kill(-pgid, 0)` answers when the group is empty (the common case, without reading
/// every process of the machine); only a group that still answers is read in full, since
/// zombies waiting to be reaped answer too.
pub fn group_gone(pgid: u32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid as i32), None) {
        Err(Errno::ESRCH) => true,
        _ => group_members(pgid).is_empty(),
    }
}

pub fn environ_var(pid: u32, key: &str) -> Option<String> {
    let data = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    data.split(|b| *b == 0).find_map(|entry| {
        let s = std::str::from_utf8(entry).ok()?;
        s.strip_prefix(&prefix).map(str::to_owned)
    })
}

pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn exe(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/exe")).ok()
}

pub fn all_use() -> Vec<Use> {
    pids()
        .into_iter()
        .filter_map(|p| parse_use(&fs::read_to_string(format!("/proc/{p}/stat")).ok()?))
        .collect()
}

pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK).max(1) as u64 }
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE).max(1) as u64 }
}

/// The listening TCP sockets of this machine (`/proc/net/tcp` and `tcp6`).
fn listening_sockets() -> Sockets {
    let mut by_inode = HashMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if let (true, Some(port)) = (*state == "0A", port) {
                by_inode.insert(format!("socket:[{inode}]"), port);
            }
        }
    }
    by_inode
}

/// The ports of the listening sockets (of `sockets`) that process `pid` holds.
fn held_ports(pid: u32, sockets: &Sockets) -> Vec<u16> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = fs::read_link(fd.path()).ok()?;
            sockets.get(target.to_string_lossy().as_ref()).copied()
        })
        .collect()
}

pub fn sockets_on(port: u16) -> Option<Sockets> {
    let mut sockets = listening_sockets();
    sockets.retain(|_, p| *p == port);
    Some(sockets)
}

pub fn one_holds(pids: &[u32], sockets: &Sockets) -> bool {
    pids.iter().any(|pid| !held_ports(*pid, sockets).is_empty())
}

pub fn holders(sockets: &Sockets) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|pid| !held_ports(*pid, sockets).is_empty())
        .collect()
}

pub fn listening_ports(pids: &[u32]) -> Vec<u16> {
    let sockets = listening_sockets();
    if sockets.is_empty() {
        return Vec::new();
    }
    pids.iter().flat_map(|p| held_ports(*p, &sockets)).collect()
}

pub fn saturation(cpu_percent: f64) -> Option<String> {
    match fs::read_to_string("/proc/pressure/cpu") {
        Ok(text) => super::cpu_pressure_saturated(&text, cpu_percent),
        Err(_) => {
            let load = fs::read_to_string("/proc/loadavg").ok()?;
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            super::load_saturated(&load, cpus)
        }
    }
}

pub fn become_subreaper() -> std::io::Result<bool> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)?;
    Ok(true)
}

pub fn reap_children(except: Option<u32>) {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    let me = std::process::id();
    for pid in pids() {
        if Some(pid) == except {
            continue;
        }
        if matches!(stat(pid), Some(s) if s.ppid == me && s.state == 'Z') {
            let _ = waitpid(
                nix::unistd::Pid::from_raw(pid as i32),
                Some(WaitPidFlag::WNOHANG),
            );
        }
    }
}

pub fn kill(pid: u32) -> std::io::Result<()> {
    crate::signal::send(pid, "SIGKILL")
}
