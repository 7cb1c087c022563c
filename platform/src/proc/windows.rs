//! Windows: processes as the system tells them (no `/proc`).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, HANDLE, STILL_ACTIVE};
use windows_sys::Win32::NetworkManagement::IpHelper::{
    GetExtendedTcpTable, MIB_TCP6ROW_OWNER_PID, MIB_TCPROW_OWNER_PID, TCP_TABLE_OWNER_PID_LISTENER,
};
use windows_sys::Win32::Networking::WinSock::{AF_INET, AF_INET6};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, GetProcessTimes, OpenProcess, QueryFullProcessImageNameW, TerminateProcess,
    PROCESS_NAME_WIN32, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_TERMINATE,
};

use super::{Stat, Use};

/// The pids holding a listening socket of one port.
pub type Sockets = HashSet<u32>;

pub fn sockets_empty(s: &Sockets) -> bool {
    s.is_empty()
}

/// A process handle, closed when dropped.
pub(crate) struct Process(HANDLE);

impl Process {
    /// Opens `pid` with `access`, if it exists and this user may.
    pub(crate) fn open(pid: u32, access: u32) -> Option<Process> {
        // SAFETY: a plain call; a null handle is a failure.
        let h = unsafe { OpenProcess(access, 0, pid) };
        (!h.is_null()).then_some(Process(h))
    }

    pub(crate) fn handle(&self) -> HANDLE {
        self.0
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and open.
        unsafe {
            CloseHandle(self.0);
        }
    }
}

fn filetime(t: FILETIME) -> u64 {
    (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)
}

/// Every process with its parent, from a Toolhelp snapshot.
fn snapshot() -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    // SAFETY: the snapshot handle is checked and closed; the entry's size is set as the
    // calls require.
    unsafe {
        let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
        if snap.is_null() || snap as isize == -1 {
            return out;
        }
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut ok = Process32FirstW(snap, &mut entry);
        while ok != 0 {
            out.push((entry.th32ProcessID, entry.th32ParentProcessID));
            ok = Process32NextW(snap, &mut entry);
        }
        CloseHandle(snap);
    }
    out
}

pub fn stat(pid: u32) -> Option<Stat> {
    let (start_time, running) = started(pid)?;
    let ppid = snapshot()
        .into_iter()
        .find_map(|(p, pp)| (p == pid).then_some(pp))
        .unwrap_or(0);
    Some(Stat {
        state: if running { 'R' } else { 'Z' },
        ppid,
        pgrp: pid,
        start_time,
    })
}

/// When `pid` started and whether it still runs, without a snapshot of every process.
pub fn started(pid: u32) -> Option<(u64, bool)> {
    let p = Process::open(pid, PROCESS_QUERY_LIMITED_INFORMATION)?;
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    let mut code = 0u32;
    // SAFETY: the handle is open; the out-pointers are to locals.
    let ok = unsafe {
        GetProcessTimes(
            p.handle(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        ) != 0
            && GetExitCodeProcess(p.handle(), &mut code) != 0
    };
    if !ok {
        return None;
    }
    // A process that exits with 259 (STILL_ACTIVE) itself is taken for running: its exit
    // time tells it apart.
    let running = code == STILL_ACTIVE as u32 && filetime(exited) == 0;
    Some((filetime(created), running))
}

pub fn pids() -> Vec<u32> {
    snapshot().into_iter().map(|(p, _)| p).collect()
}

pub fn parents() -> Vec<(u32, u32)> {
    snapshot()
}

/// `root` (when it runs) and its descendants by recorded parent: a parent's pid is kept
/// after it ends, so a reused pid could adopt strangers; a child must have started after
/// its parent to count.
pub fn group_members(root: u32) -> Vec<u32> {
    let all = snapshot();
    let started = |pid: u32| started(pid).filter(|(_, running)| *running).map(|(t, _)| t);
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (p, pp) in &all {
        if p != pp {
            children.entry(*pp).or_default().push(*p);
        }
    }
    let mut out = Vec::new();
    let Some(root_start) = started(root) else {
        return out;
    };
    out.push(root);
    let mut next = vec![(root, root_start)];
    while let Some((p, since)) = next.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if let Some(t) = started(c).filter(|t| *t >= since) {
                out.push(c);
                next.push((c, t));
            }
        }
    }
    out
}

pub fn group_gone(pgid: u32) -> bool {
    group_members(pgid).is_empty()
}

pub fn environ_var(_pid: u32, _key: &str) -> Option<String> {
    None
}

pub fn rss_bytes(pid: u32) -> Option<u64> {
    let p = Process::open(pid, PROCESS_QUERY_LIMITED_INFORMATION)?;
    // SAFETY: the handle is open; the counters' size is passed.
    unsafe {
        let mut c: PROCESS_MEMORY_COUNTERS = std::mem::zeroed();
        let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
        (K32GetProcessMemoryInfo(p.handle(), &mut c, size) != 0).then_some(c.WorkingSetSize as u64)
    }
}

pub fn exe(pid: u32) -> Option<PathBuf> {
    use std::os::windows::ffi::OsStringExt;
    let p = Process::open(pid, PROCESS_QUERY_LIMITED_INFORMATION)?;
    let mut buf = vec![0u16; 32768];
    let mut len = buf.len() as u32;
    // SAFETY: the handle is open; the buffer's length is passed and updated.
    let ok = unsafe {
        QueryFullProcessImageNameW(p.handle(), PROCESS_NAME_WIN32, buf.as_mut_ptr(), &mut len)
    };
    (ok != 0).then(|| std::ffi::OsString::from_wide(&buf[..len as usize]).into())
}

pub fn all_use() -> Vec<Use> {
    Vec::new()
}

pub fn clock_ticks_per_second() -> u64 {
    10_000_000
}

pub fn page_size() -> u64 {
    4096
}

/// The listening TCP sockets of the machine as `(port, owning pid)`, IPv4 and IPv6.
fn listeners() -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    for (family, row) in [
        (AF_INET, std::mem::size_of::<MIB_TCPROW_OWNER_PID>()),
        (AF_INET6, std::mem::size_of::<MIB_TCP6ROW_OWNER_PID>()),
    ] {
        let mut size = 0u32;
        let mut buf: Vec<u32> = Vec::new();
        // The table may grow between the call that sizes it and the one that fills it.
        for _ in 0..4 {
            buf.resize((size as usize).div_ceil(4).max(1), 0);
            size = (buf.len() * 4) as u32;
            // SAFETY: the buffer is `size` bytes, aligned for the table's u32 fields.
            let r = unsafe {
                GetExtendedTcpTable(
                    buf.as_mut_ptr().cast(),
                    &mut size,
                    0,
                    u32::from(family),
                    TCP_TABLE_OWNER_PID_LISTENER,
                    0,
                )
            };
            if r == 0 {
                let n = buf[0] as usize;
                let bytes: &[u8] = {
                    // SAFETY: viewing the filled u32 buffer as its bytes.
                    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), buf.len() * 4) }
                };
                for i in 0..n {
                    let at = 4 + i * row;
                    let Some(r) = bytes.get(at..at + row) else {
                        break;
                    };
                    let word = |k: usize| u32::from_ne_bytes([r[k], r[k + 1], r[k + 2], r[k + 3]]);
                    // IPv4 row: state, local address, local port, …, pid (the sixth u32);
                    // IPv6 row: address (16), scope, local port, …, pid (the last u32).
                    let (port, pid) = if family == AF_INET {
                        (word(8), word(20))
                    } else {
                        (word(20), word(row - 4))
                    };
                    out.push((u16::from_be(port as u16), pid));
                }
                break;
            }
        }
    }
    out
}

/// `None` when a listener's owner is not told (pid 0: Wine gives no owners).
pub fn sockets_on(port: u16) -> Option<Sockets> {
    let owners: Sockets = listeners()
        .into_iter()
        .filter(|(p, _)| *p == port)
        .map(|(_, pid)| pid)
        .collect();
    (!owners.contains(&0)).then_some(owners)
}

pub fn one_holds(pids: &[u32], sockets: &Sockets) -> bool {
    pids.iter().any(|p| sockets.contains(p))
}

pub fn holders(sockets: &Sockets) -> Vec<u32> {
    let mut out: Vec<u32> = sockets.iter().copied().collect();
    out.sort_unstable();
    out
}

pub fn listening_ports(pids: &[u32]) -> Vec<u16> {
    listeners()
        .into_iter()
        .filter(|(_, pid)| *pid != 0 && pids.contains(pid))
        .map(|(port, _)| port)
        .collect()
}

pub fn kill(pid: u32) -> std::io::Result<()> {
    let p = Process::open(pid, PROCESS_TERMINATE).ok_or_else(std::io::Error::last_os_error)?;
    // SAFETY: the handle is open with the right to terminate.
    if unsafe { TerminateProcess(p.handle(), 1) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
