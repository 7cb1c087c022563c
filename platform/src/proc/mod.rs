//! Other processes, by pid: knowing one again after a daemon restart (pid and start time),
//! whether it is alive, its parent and group, its memory, the processes of the machine and
//! of a group, which process holds a listening port, and how busy the machine is.
//!
//! Linux reads `/proc` (the parsers are pure and tested on any system). Windows asks the
//! system: the start time from `GetProcessTimes`, alive from `GetExitCodeProcess`, memory
//! from `K32GetProcessMemoryInfo`, parents from a Toolhelp snapshot, port holders from
//! `GetExtendedTcpTable`. macOS asks `libproc` and `sysctl`: a process's state, parent,
//! group and start time from `proc_pidinfo(PROC_PIDTBSDINFO)`, its CPU and memory from
//! `PROC_PIDTASKALLINFO`, the processes of the machine and of a group from
//! `proc_listallpids` and `proc_listpgrppids`, its environment from `KERN_PROCARGS2`, port
//! holders from each process's descriptors (`PROC_PIDLISTFDS`, `proc_pidfdinfo`); what
//! those answers mean is decided in `darwin`, built and tested on every system. What a
//! system cannot tell is `None` or empty, and each function says what binky does then.
//! Other Unix systems (the BSDs) answer "cannot tell" for now.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as sys;
#[cfg(windows)]
pub(crate) mod windows;
#[cfg(windows)]
use windows as sys;
// macOS's logic, built everywhere so that its tests run on every system.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
pub(crate) mod darwin;
#[cfg(target_os = "macos")]
pub(crate) mod macos;
#[cfg(target_os = "macos")]
use macos as sys;
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
mod other;
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
use other as sys;

/// What binky knows of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `Z`, … (Linux); on Windows `R` while it runs and `Z` once it has
    /// exited but is still known (a handle to it is open); on macOS `Z` ended, `R`
    /// running, `T` stopped, else `S` (from `pbi_status`).
    pub state: char,
    /// Parent pid (0 where it is not known).
    pub ppid: u32,
    /// Process group. Windows does not say which console group a process is in: its own
    /// pid there (binky starts each service leading a group of its own).
    pub pgrp: u32,
    /// When it started, in the system's units (Linux: clock ticks since boot; Windows:
    /// 100 ns since 1601; macOS: microseconds since the epoch): with the pid, an identity
    /// that outlives a daemon restart.
    pub start_time: u64,
}

impl Stat {
    /// Whether it has ended (a zombie on Unix, an exited process on Windows).
    pub fn ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// What a process uses: its process group, CPU time (user and system, in clock ticks) and
/// resident pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Use {
    /// Process group.
    pub pgrp: u32,
    /// `utime + stime`, in clock ticks ([`clock_ticks_per_second`]); on macOS the task's
    /// user and system time, from Mach time units.
    pub ticks: u64,
    /// Resident set, in pages ([`page_size`]).
    pub rss_pages: u64,
}

/// The fields of a `/proc/PID/stat` text from field 3 (the state) on. The command name
/// (field 2) may hold spaces and parentheses: fields resume after the last `)`.
fn fields_after_name(text: &str) -> Option<Vec<&str>> {
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Parse the text of Linux's `/proc/PID/stat`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let f = fields_after_name(text)?;
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start_time: f.get(19)?.parse().ok()?,
    })
}

/// Parse the use fields of a Linux `/proc/PID/stat` text (a zombie uses nothing: `None`).
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

/// The listening TCP sockets of one port, read once for several questions (who holds it,
/// does one of these processes). Empty when nothing listens there, or the system does not
/// say.
#[derive(Clone, Debug, Default)]
pub struct Sockets(sys::Sockets);

impl Sockets {
    /// Whether no listening socket was found.
    pub fn is_empty(&self) -> bool {
        sys::sockets_empty(&self.0)
    }
}

/// The process `pid`, if it exists (macOS: and it is this user's, which binky's processes
/// are; the kernel tells another user's only to root).
pub fn stat(pid: u32) -> Option<Stat> {
    sys::stat(pid)
}

/// Is the process with this pid *and* start time alive (not ended)?
pub fn alive(pid: u32, start_time: u64) -> bool {
    matches!(sys::started(pid), Some((t, true)) if t == start_time)
}

/// Every pid on the machine (that this user may see).
pub fn pids() -> Vec<u32> {
    sys::pids()
}

/// Every live process with its parent: `(pid, ppid)` (macOS: this user's processes).
pub fn parents() -> Vec<(u32, u32)> {
    sys::parents()
}

/// Live members of the process group `pgid`. Windows has no query for a console group:
/// there, the leader and its descendants (by their recorded parent).
pub fn group_members(pgid: u32) -> Vec<u32> {
    sys::group_members(pgid)
}

/// Whether no live process is left in group `pgid` (Windows: the leader and its
/// descendants, as [`group_members`]).
pub fn group_gone(pgid: u32) -> bool {
    sys::group_gone(pgid)
}

/// The value of `key` in a process's initial environment (Linux: readable for our own
/// processes; macOS: `KERN_PROCARGS2`, for this user's processes, but macOS leaves the
/// environment out for a process code signing marks restricted — set-user-id programs,
/// programs with restricted entitlements — while System Integrity Protection is on: `None`
/// there). Windows: `None` (reading another process's environment is not done): what asks
/// learns a process is binky's by other means, or cannot tell.
pub fn environ_var(pid: u32, key: &str) -> Option<String> {
    sys::environ_var(pid, key)
}

/// Resident set size of a process, in bytes (Windows: its working set; macOS: the task's
/// resident size, for this user's processes).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    sys::rss_bytes(pid)
}

/// The program file a process runs, where the system says.
pub fn exe(pid: u32) -> Option<std::path::PathBuf> {
    sys::exe(pid)
}

/// What every live process on the machine uses (Linux; macOS: this user's processes, their
/// CPU time from Mach time units). Empty elsewhere: Windows measures a service through its
/// Job object (`job`) instead.
pub fn all_use() -> Vec<Use> {
    sys::all_use()
}

/// Clock ticks a second, the unit of [`Use::ticks`].
pub fn clock_ticks_per_second() -> u64 {
    sys::clock_ticks_per_second()
}

/// The size of a memory page, the unit of [`Use::rss_pages`].
pub fn page_size() -> u64 {
    sys::page_size()
}

/// The sockets listening on TCP `port` (any address), or `None` when the system does not
/// tell who holds them (the BSDs for now; Windows under Wine, which gives no owners): what
/// asks then cannot tell whose a port is, and says so or takes the answer it has. macOS
/// sees only the sockets of processes this user may inspect (their descriptors): a port
/// held by another user's process counts as empty there.
pub fn sockets_on(port: u16) -> Option<Sockets> {
    sys::sockets_on(port).map(Sockets)
}

/// Whether one of `pids` holds one of `sockets`.
pub fn one_holds(pids: &[u32], sockets: &Sockets) -> bool {
    sys::one_holds(pids, &sockets.0)
}

/// Every process (this user may inspect) holding one of `sockets`.
pub fn holders(sockets: &Sockets) -> Vec<u32> {
    if sockets.is_empty() {
        return Vec::new();
    }
    sys::holders(&sockets.0)
}

/// Every process (this user may inspect) holding a socket that listens on TCP `port` (a
/// forking server's workers share it).
pub fn listeners_of(port: u16) -> Vec<u32> {
    sockets_on(port).map_or_else(Vec::new, |s| holders(&s))
}

/// The process listening on TCP `port` (any address), as `(pid, program name)`, when it is
/// one this user may inspect (the name is empty where the system does not say it).
pub fn listener_of(port: u16) -> Option<(u32, String)> {
    let pid = *listeners_of(port).first()?;
    Some((pid, crate::process::name(pid).unwrap_or_default()))
}

/// The TCP ports the processes `pids` listen on (any address), ascending.
pub fn listening_ports(pids: &[u32]) -> Vec<u16> {
    let mut out = sys::listening_ports(pids);
    out.sort_unstable();
    out.dedup();
    out
}

/// Load per CPU (one minute) at or above which the machine counts as saturated where the
/// kernel gives no pressure figures.
pub const SATURATED_LOAD_PER_CPU: f64 = 2.0;

/// Why the machine is saturated, if it is (Linux): tasks waited for a CPU `cpu_percent` of
/// the last 10 s or more (the kernel's PSI, `/proc/pressure/cpu`), else, without PSI, a
/// one-minute load of [`SATURATED_LOAD_PER_CPU`] per CPU. macOS has no pressure figures:
/// the one-minute load (`getloadavg`), by the same measure. Elsewhere `None`: admission
/// does not hold starts back for a busy machine.
pub fn saturation(cpu_percent: f64) -> Option<String> {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        sys::saturation(cpu_percent)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = cpu_percent;
        None
    }
}

/// Why the machine is saturated by Linux's CPU pressure text (`/proc/pressure/cpu`), if it is.
pub fn cpu_pressure_saturated(text: &str, at: f64) -> Option<String> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    let avg10: f64 = some
        .split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()?;
    (avg10 >= at).then(|| format!("tasks waited for a CPU {avg10:.0}% of the last 10 s"))
}

/// Why the machine is saturated by a `/proc/loadavg` text on `cpus` CPUs, if it is.
pub fn load_saturated(loadavg: &str, cpus: usize) -> Option<String> {
    let one: f64 = loadavg.split_whitespace().next()?.parse().ok()?;
    load_one_saturated(one, cpus)
}

/// Why the machine is saturated by its one-minute load on `cpus` CPUs, if it is.
pub fn load_one_saturated(one: f64, cpus: usize) -> Option<String> {
    (one >= SATURATED_LOAD_PER_CPU * cpus as f64).then(|| format!("load {one:.1} on {cpus} CPU(s)"))
}

/// Makes this process the one every orphan below it is re-parented to (Linux's
/// `PR_SET_CHILD_SUBREAPER`), so what it starts stays among its descendants even through
/// `setsid` and a double fork. `false` where the system has no such thing (Windows keeps a
/// process's parent pid after the parent ends, so descendants are still found by it; macOS
/// and other Unix: an orphan goes to launchd or init and is lost to its tree, though a
/// service's processes are still found by their process group).
pub fn become_subreaper() -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        sys::become_subreaper()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(false)
    }
}

/// Reaps the ended children of this process (zombies), but `except` (a child its owner
/// waits for); macOS finds them with `proc_listchildpids`. Nothing to do on Windows, which
/// has no zombies; the BSDs: not yet.
pub fn reap_children(except: Option<u32>) {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    sys::reap_children(except);
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let _ = except;
}

/// Ends the process `pid` at once (SIGKILL; Windows: `TerminateProcess`).
pub fn kill(pid: u32) -> std::io::Result<()> {
    sys::kill(pid)
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
        // macOS's `getloadavg` gives the figure itself, measured the same way.
        assert_eq!(load_one_saturated(15.9, 8), None);
        let why = load_one_saturated(16.0, 8).unwrap();
        assert!(why.contains("load 16.0 on 8 CPU(s)"), "{why}");
    }

    /// Runs on every system: this process is seen, with a start time that tells it apart.
    #[cfg(any(target_os = "linux", target_os = "macos", windows))]
    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        assert!(alive(me, s.start_time));
        assert!(!alive(me, s.start_time + 1));
        assert!(rss_bytes(me).unwrap() > 0);
        assert!(pids().contains(&me));
        assert!(exe(me).is_some());
    }

    /// What this process uses is among what every process uses, in the units
    /// `limits::group_usage` converts.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn this_process_is_among_what_every_process_uses() {
        let me = stat(std::process::id()).unwrap();
        let mine: Vec<Use> = all_use()
            .into_iter()
            .filter(|u| u.pgrp == me.pgrp)
            .collect();
        assert!(mine.iter().any(|u| u.rss_pages > 0), "{mine:?}");
        assert!(clock_ticks_per_second() > 0 && page_size() >= 4096);
        // Whether the machine is busy is not this test's to know: only that it is asked.
        let _ = saturation(60.0);
    }

    /// A child in a group of its own, carrying a mark in its environment (as binky's
    /// services carry their spawn token), is found by its pid, its group and its mark, and
    /// is gone once it has ended and been waited for.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn a_child_in_its_own_group_is_seen_with_its_mark_until_it_ends() {
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30").env("BINKY_PROC_TEST_MARK", "mark.1");
        crate::process::in_new_group(&mut cmd);
        // Ended and waited for however the test ends.
        struct Reaped(std::process::Child);
        impl Drop for Reaped {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut child = Reaped(cmd.spawn().unwrap());
        let pid = child.0.id();
        let me = std::process::id();
        // Linux lets the parent go on while the child's `exec` is still setting up its new
        // memory, where its environment is not readable yet.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while environ_var(pid, "BINKY_PROC_TEST_MARK").is_none() {
            assert!(std::time::Instant::now() < end, "the mark is never read");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            environ_var(pid, "BINKY_PROC_TEST_MARK").as_deref(),
            Some("mark.1")
        );
        assert_eq!(environ_var(pid, "BINKY_PROC_TEST_MARK_NOT"), None);
        let s = stat(pid).unwrap();
        assert_eq!((s.ppid, s.pgrp), (me, pid));
        assert!(alive(pid, s.start_time));
        assert_eq!(group_members(pid), vec![pid]);
        assert!(!group_gone(pid));
        assert!(parents().contains(&(pid, me)));
        kill(pid).unwrap();
        child.0.wait().unwrap();
        assert!(group_gone(pid));
        assert!(!alive(pid, s.start_time));
    }

    /// Whether the system lists `port`'s listener without its owner: Linux and macOS
    /// always tell; Windows does, but Wine (where the Windows build's tests run) gives no
    /// owners.
    #[cfg(any(target_os = "linux", target_os = "macos", windows))]
    fn cannot_tell_owners(port: u16) -> bool {
        let unknown = sockets_on(port).is_none();
        assert!(
            !(unknown && cfg!(any(target_os = "linux", target_os = "macos"))),
            "Linux and macOS always tell who holds a port"
        );
        if unknown {
            eprintln!("this system lists port {port}'s listener without its owner");
        }
        unknown
    }

    #[cfg(any(target_os = "linux", target_os = "macos", windows))]
    #[test]
    fn the_listener_of_a_port_is_found() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if cannot_tell_owners(port) {
            assert_eq!(listener_of(port), None);
            return;
        }
        let (pid, _) = listener_of(port).unwrap();
        assert_eq!(pid, std::process::id());
        assert!(one_holds(&[pid], &sockets_on(port).unwrap()));
        drop(l);
        assert!(listener_of(port).is_none());
        assert!(sockets_on(port).unwrap().is_empty());
    }

    #[cfg(any(target_os = "linux", target_os = "macos", windows))]
    #[test]
    fn the_ports_a_process_listens_on_are_found_and_not_those_it_only_connects_to() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("[::1]:0")
            .or_else(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let want = [
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        ];
        if cannot_tell_owners(want[0]) {
            assert_eq!(listening_ports(&[std::process::id()]), Vec::<u16>::new());
            return;
        }
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
}
