//! Reading `/proc`: process identity, state, group and environment.
//!
//! A pid alone is not an identity (pids are reused): binky pairs it with the start time
//! (`/proc/PID/stat` field 22). A zombie (state `Z`) is dead even though its pid exists.

use std::fs;

/// The fields of `/proc/PID/stat` binky uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `Z`, …
    pub state: char,
    /// Parent pid.
    pub ppid: u32,
    /// Process group.
    pub pgrp: u32,
    /// Start time in clock ticks since boot.
    pub start_time: u64,
}

/// The fields of a `/proc/PID/stat` text from field 3 (the state) on. The command name
/// (field 2) may hold spaces and parentheses: fields resume after the last `)`.
fn fields_after_name(text: &str) -> Option<Vec<&str>> {
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Parse the text of `/proc/PID/stat`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let f = fields_after_name(text)?;
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start_time: f.get(19)?.parse().ok()?,
    })
}

/// What a process uses, from `/proc/PID/stat`: its process group, CPU time (user and
/// system, in clock ticks) and resident pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Use {
    /// Process group.
    pub pgrp: u32,
    /// `utime + stime`, in clock ticks.
    pub ticks: u64,
    /// Resident set, in pages.
    pub rss_pages: u64,
}

/// Parse the use fields of a `/proc/PID/stat` text (a zombie uses nothing: `None`).
pub fn parse_use(text: &str) -> Option<Use> {
    let f = fields_after_name(text)?;
    if matches!(f.first()?.chars().next()?, 'Z' | 'X' | 'x') {
        return None;
    }
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Use {
        pgrp: n(2)? as u32,
        ticks: n(11)? + n(12)?,
        rss_pages: n(21)?,
    })
}

/// What every live process on the machine uses.
pub fn all_use() -> Vec<Use> {
    pids()
        .into_iter()
        .filter_map(|p| parse_use(&fs::read_to_string(format!("/proc/{p}/stat")).ok()?))
        .collect()
}

/// `/proc/PID/stat`, if the process exists.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Is the process with this pid *and* start time alive (not a zombie)?
pub fn alive(pid: u32, start_time: u64) -> bool {
    matches!(stat(pid), Some(s) if s.start_time == start_time && !matches!(s.state, 'Z' | 'X' | 'x'))
}

/// Every pid on the machine.
pub fn pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live (non-zombie) members of a process group.
pub fn group_members(pgid: u32) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|p| matches!(stat(*p), Some(s) if s.pgrp == pgid && !matches!(s.state, 'Z' | 'X' | 'x')))
        .collect()
}

/// Whether no live process is left in group `pgid`: one `kill(-pgid, 0)` answers when the
/// group is empty (the common case, without reading every process of the machine); only a
/// group that still answers is read in full, since zombies waiting to be reaped answer too.
pub fn group_gone(pgid: u32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid as i32), None) {
        Err(Errno::ESRCH) => true,
        _ => group_members(pgid).is_empty(),
    }
}

/// The value of `key` in a process's initial environment (readable for our own processes).
pub fn environ_var(pid: u32, key: &str) -> Option<String> {
    let data = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    data.split(|b| *b == 0).find_map(|entry| {
        let s = std::str::from_utf8(entry).ok()?;
        s.strip_prefix(&prefix).map(str::to_owned)
    })
}

/// Resident set size of a process, in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The process listening on a TCP port (any address), as `(pid, command name)`, when it
/// is one this user may inspect.
pub fn listener_of(port: u16) -> Option<(u32, String)> {
    let pid = *listeners_of(port).first()?;
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    Some((pid, comm.trim().to_owned()))
}

/// The listening TCP sockets of this machine (`/proc/net/tcp` and `tcp6`): their inode as a
/// descriptor's link reads it (`socket:[123]`) → their port.
fn listening_sockets() -> std::collections::HashMap<String, u16> {
    let mut by_inode = std::collections::HashMap::new();
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
fn held_ports(pid: u32, sockets: &std::collections::HashMap<String, u16>) -> Vec<u16> {
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

/// The sockets listening on TCP `port` (inode link → port), read once for the questions
/// below; empty when nothing listens there.
pub fn sockets_on(port: u16) -> std::collections::HashMap<String, u16> {
    let mut sockets = listening_sockets();
    sockets.retain(|_, p| *p == port);
    sockets
}

/// Whether one of `pids` holds one of `sockets`: reads only their descriptors.
pub fn one_holds(pids: &[u32], sockets: &std::collections::HashMap<String, u16>) -> bool {
    pids.iter().any(|pid| !held_ports(*pid, sockets).is_empty())
}

/// Every process (this user may inspect) holding one of `sockets`.
pub fn holders(sockets: &std::collections::HashMap<String, u16>) -> Vec<u32> {
    if sockets.is_empty() {
        return Vec::new();
    }
    pids()
        .into_iter()
        .filter(|pid| !held_ports(*pid, sockets).is_empty())
        .collect()
}

/// Every process (this user may inspect) holding a socket that listens on TCP `port` (a
/// forking server's workers share it).
pub fn listeners_of(port: u16) -> Vec<u32> {
    holders(&sockets_on(port))
}

/// The TCP ports the processes `pids` listen on (any address), ascending.
pub fn listening_ports(pids: &[u32]) -> Vec<u16> {
    let sockets = listening_sockets();
    if sockets.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<u16> = pids.iter().flat_map(|p| held_ports(*p, &sockets)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Load per CPU (one minute) at or above which the machine counts as saturated where the
/// kernel gives no pressure figures.
pub const SATURATED_LOAD_PER_CPU: f64 = 2.0;

/// Why the machine is saturated, if it is: tasks waited for a CPU `cpu_percent` of the last
/// 10 s or more (the kernel's PSI, `/proc/pressure/cpu`), else, without PSI, a one-minute
/// load of [`SATURATED_LOAD_PER_CPU`] per CPU.
pub fn saturation(cpu_percent: f64) -> Option<String> {
    match std::fs::read_to_string("/proc/pressure/cpu") {
        Ok(text) => cpu_pressure_saturated(&text, cpu_percent),
        Err(_) => {
            let load = std::fs::read_to_string("/proc/loadavg").ok()?;
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            load_saturated(&load, cpus)
        }
    }
}

fn cpu_pressure_saturated(text: &str, at: f64) -> Option<String> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    let avg10: f64 = some
        .split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()?;
    (avg10 >= at).then(|| format!("tasks waited for a CPU {avg10:.0}% of the last 10 s"))
}

fn load_saturated(loadavg: &str, cpus: usize) -> Option<String> {
    let one: f64 = loadavg.split_whitespace().next()?.parse().ok()?;
    (one >= SATURATED_LOAD_PER_CPU * cpus as f64).then(|| format!("load {one:.1} on {cpus} CPU(s)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_names_with_spaces_and_parens() {
        let text = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 1234);
        assert_eq!(s.start_time, 987654);
        let u = parse_use(text).unwrap();
        assert_eq!(
            u,
            Use {
                pgrp: 1234,
                ticks: 3,
                rss_pages: 100
            }
        );
        assert_eq!(parse_use(&text.replace(") S ", ") Z ")), None);
    }

    #[test]
    fn the_listener_of_a_port_is_found() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (pid, _) = listener_of(port).unwrap();
        assert_eq!(pid, std::process::id());
        drop(l);
        assert!(listener_of(port).is_none());
    }

    #[test]
    fn the_ports_a_process_listens_on_are_found_and_not_those_it_only_connects_to() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("[::1]:0")
            .or_else(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let mut want = vec![
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        ];
        want.sort_unstable();
        // A connection is no listening socket.
        let _client = std::net::TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let found = listening_ports(&[std::process::id()]);
        for p in &want {
            assert!(found.contains(p), "{p} not in {found:?}");
        }
        drop((a, b));
        let found = listening_ports(&[std::process::id()]);
        assert!(!want.iter().any(|p| found.contains(p)), "{found:?}");
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        assert!(alive(me, s.start_time));
        assert!(!alive(me, s.start_time + 1));
        assert!(rss_bytes(me).unwrap() > 0);
    }

    #[test]
    fn a_machine_is_saturated_by_cpu_pressure_or_else_by_load() {
        let psi = |avg10: &str| {
            format!("some avg10={avg10} avg60=30.88 avg300=26.67 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        };
        assert_eq!(cpu_pressure_saturated(&psi("28.45"), 60.0), None);
        let why = cpu_pressure_saturated(&psi("73.10"), 60.0).unwrap();
        assert!(why.contains("73%"), "{why}");
        assert!(cpu_pressure_saturated(&psi("28.45"), 20.0).is_some());
        assert_eq!(cpu_pressure_saturated("garbage", 60.0), None);
        assert_eq!(load_saturated("2.22 2.17 2.93 3/130 9497", 2), None);
        let why = load_saturated("7.50 2.17 2.93 3/130 9497", 2).unwrap();
        assert!(why.contains("load 7.5 on 2 CPU(s)"), "{why}");
    }
}
