//! macOS: processes as `libproc` and `sysctl` tell them (no `/proc`). Each function here is
//! the system call alone; what its answer means is decided in `darwin.rs`, which is tested
//! on every system.

use std::ffi::{c_int, c_void, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::OnceLock;

use nix::libc;

use super::darwin::{self, BsdInfo, SOCKET_FDINFO_SIZE};
use super::{Stat, Use};

// The layout declared in `darwin.rs` is the one the Apple targets give it.
const _: () = assert!(std::mem::size_of::<darwin::SocketFdInfo>() == SOCKET_FDINFO_SIZE);
const _: () = assert!(darwin::SZOMB == libc::SZOMB && darwin::SRUN == libc::SRUN);
const _: () = assert!(darwin::SSTOP == libc::SSTOP && darwin::SIDL == libc::SIDL);
const _: () = assert!(darwin::SSLEEP == libc::SSLEEP);
const _: () = assert!(darwin::PROX_FDTYPE_SOCKET as c_int == libc::PROX_FDTYPE_SOCKET);

/// `PROC_PIDFDSOCKETINFO` (`<sys/proc_info.h>`): `proc_pidfdinfo` fills a `socket_fdinfo`.
const PROC_PIDFDSOCKETINFO: c_int = 3;

/// The listening sockets of one port, found lazily: the first process seen holding one
/// (the scan of the user's processes stops there), so asking whether the port's holder is
/// a given process does not read every process of the machine.
#[derive(Clone, Debug, Default)]
pub struct Sockets {
    port: u16,
    first: Option<u32>,
}

pub fn sockets_empty(s: &Sockets) -> bool {
    s.first.is_none()
}

fn pid_arg(pid: u32) -> Option<c_int> {
    c_int::try_from(pid).ok().filter(|p| *p > 0)
}

/// `proc_pidinfo(PROC_PIDTBSDINFO)`, for this user's processes (the kernel answers another
/// user's only to root). Its argument 1 asks for a zombie's too (`proc_info.c`: without
/// it, a process that ended but was not waited for is not found, and could not be reaped).
fn bsdinfo(pid: u32) -> Option<BsdInfo> {
    let pid = pid_arg(pid)?;
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as c_int;
    // SAFETY: an all-zero proc_bsdinfo is valid (integers and char arrays); the kernel
    // writes at most `size` bytes into it.
    let info = unsafe {
        let mut info: libc::proc_bsdinfo = std::mem::zeroed();
        let n = libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 1, (&raw mut info).cast(), size);
        (n == size).then_some(info)?
    };
    Some(BsdInfo {
        status: info.pbi_status,
        ppid: info.pbi_ppid,
        pgid: info.pbi_pgid,
        start_sec: info.pbi_start_tvsec,
        start_usec: info.pbi_start_tvusec,
    })
}

/// `proc_pidinfo(PROC_PIDTASKALLINFO)`: a process's BSD and Mach figures in one call (none
/// for a zombie, which has no task left).
fn taskallinfo(pid: u32) -> Option<libc::proc_taskallinfo> {
    let pid = pid_arg(pid)?;
    let size = std::mem::size_of::<libc::proc_taskallinfo>() as c_int;
    // SAFETY: as `bsdinfo`: plain integers, at most `size` bytes written.
    unsafe {
        let mut info: libc::proc_taskallinfo = std::mem::zeroed();
        let n = libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTASKALLINFO,
            0,
            (&raw mut info).cast(),
            size,
        );
        (n == size).then_some(info)
    }
}

/// Pids from one of libproc's list calls (`proc_listallpids`, `proc_listpgrppids`,
/// `proc_listchildpids`): each takes a buffer's size in bytes and returns how many pids it
/// wrote (with no buffer, an estimate); a full buffer may have been cut short, so it grows.
fn list(call: impl Fn(*mut c_void, c_int) -> c_int) -> Vec<u32> {
    let estimate = usize::try_from(call(null_mut(), 0)).unwrap_or(0);
    let mut capacity = estimate + 64;
    for _ in 0..4 {
        let mut buf: Vec<libc::pid_t> = vec![0; capacity];
        let bytes =
            c_int::try_from(capacity * std::mem::size_of::<libc::pid_t>()).unwrap_or(c_int::MAX);
        let Ok(n) = usize::try_from(call(buf.as_mut_ptr().cast(), bytes)) else {
            return Vec::new();
        };
        if n < capacity {
            buf.truncate(n);
            return buf
                .into_iter()
                .filter_map(|p| u32::try_from(p).ok())
                .filter(|p| *p != 0)
                .collect();
        }
        capacity *= 2;
    }
    Vec::new()
}

pub fn stat(pid: u32) -> Option<Stat> {
    bsdinfo(pid).map(darwin::stat)
}

pub fn started(pid: u32) -> Option<(u64, bool)> {
    bsdinfo(pid).map(darwin::started)
}

/// Every pid, newest first (the kernel's own order).
pub fn pids() -> Vec<u32> {
    // SAFETY: the buffer and its size in bytes come from `list`.
    list(|buf, size| unsafe { libc::proc_listallpids(buf, size) })
}

pub fn parents() -> Vec<(u32, u32)> {
    pids()
        .into_iter()
        .filter_map(|p| {
            bsdinfo(p)
                .filter(|i| i.status != darwin::SZOMB)
                .map(|i| (p, i.ppid))
        })
        .collect()
}

pub fn group_members(pgid: u32) -> Vec<u32> {
    let Some(group) = pid_arg(pgid) else {
        return Vec::new();
    };
    // SAFETY: the buffer and its size in bytes come from `list`.
    list(|buf, size| unsafe { libc::proc_listpgrppids(group, buf, size) })
        .into_iter()
        // The list holds zombies too, and a process may have changed group since.
        .filter(|p| matches!(bsdinfo(*p), Some(i) if i.pgid == pgid && i.status != darwin::SZOMB))
        .collect()
}

/// As on Linux: one `kill(-pgid, 0)` answers for an empty group; a group that still
/// answers is listed, since zombies waiting to be reaped answer too.
pub fn group_gone(pgid: u32) -> bool {
    use nix::errno::Errno;
    let Some(group) = pid_arg(pgid) else {
        return true;
    };
    match nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), None) {
        Err(Errno::ESRCH) => true,
        _ => group_members(pgid).is_empty(),
    }
}

/// The `KERN_PROCARGS2` buffer of a process (its arguments and initial environment), for
/// processes of this user.
pub(crate) fn procargs(pid: u32) -> Option<Vec<u8>> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid_arg(pid)?];
    let mut size: libc::size_t = 0;
    // SAFETY: a size query (no buffer), then a read into a buffer of the size given.
    unsafe {
        if libc::sysctl(mib.as_mut_ptr(), 3, null_mut(), &mut size, null_mut(), 0) != 0 {
            return None;
        }
        // A page more, in case the process executes anew between the two calls: a buffer
        // smaller than the arguments gets their end, not their start. But the kernel refuses
        // a buffer larger than `kern.argmax` and `argc`.
        size = (size + 4096)
            .min(arg_max() + std::mem::size_of::<c_int>())
            .max(size);
        let mut buf = vec![0u8; size];
        if libc::sysctl(
            mib.as_mut_ptr(),
            3,
            buf.as_mut_ptr().cast(),
            &mut size,
            null_mut(),
            0,
        ) != 0
        {
            return None;
        }
        buf.truncate(size);
        Some(buf)
    }
}

/// `kern.argmax`, once: the largest arguments and environment a process may have.
fn arg_max() -> usize {
    static ARG_MAX: OnceLock<usize> = OnceLock::new();
    *ARG_MAX.get_or_init(|| {
        let value = crate::sysctl::value::<c_int>(&[libc::CTL_KERN, libc::KERN_ARGMAX]);
        // macOS's own value (`ARG_MAX`, <sys/syslimits.h>) where the kernel does not say.
        value
            .and_then(|v| usize::try_from(v).ok())
            .filter(|v| *v > 0)
            .unwrap_or(1024 * 1024)
    })
}

pub fn environ_var(pid: u32, key: &str) -> Option<String> {
    let buf = procargs(pid)?;
    darwin::env_value(&darwin::parse_procargs2(&buf)?.env, key)
}

pub fn rss_bytes(pid: u32) -> Option<u64> {
    taskallinfo(pid).map(|i| i.ptinfo.pti_resident_size)
}

pub fn exe(pid: u32) -> Option<PathBuf> {
    let pid = pid_arg(pid)?;
    let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    // SAFETY: the buffer's length is passed.
    let n = unsafe { libc::proc_pidpath(pid, buf.as_mut_ptr().cast(), buf.len() as u32) };
    let n = usize::try_from(n).ok().filter(|n| *n > 0)?;
    buf.truncate(n);
    Some(OsString::from_vec(buf).into())
}

/// `pid`'s arguments (its `KERN_PROCARGS2` buffer; this user's processes).
pub(crate) fn command_line(pid: u32) -> Option<Vec<String>> {
    darwin::arguments(&procargs(pid)?)
}

/// `pid`'s short name (`proc_name`: the name its program gave itself, or the file's).
pub(crate) fn name(pid: u32) -> Option<String> {
    let pid = pid_arg(pid)?;
    // `proc_name` copies at most `2 * MAXCOMLEN` bytes (the kernel's `p_name`).
    let mut buf = [0u8; 2 * libc::MAXCOMLEN + 1];
    // SAFETY: the buffer's length is passed.
    let n = unsafe { libc::proc_name(pid, buf.as_mut_ptr().cast(), buf.len() as u32) };
    let n = usize::try_from(n).ok()?;
    darwin::c_field(&buf[..n.min(buf.len())]).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// `pid`'s working directory (`proc_pidinfo(PROC_PIDVNODEPATHINFO)`; this user's processes).
pub(crate) fn cwd(pid: u32) -> Option<PathBuf> {
    let pid = pid_arg(pid)?;
    let size = std::mem::size_of::<libc::proc_vnodepathinfo>();
    let mut info = std::mem::MaybeUninit::<libc::proc_vnodepathinfo>::zeroed();
    // SAFETY: the kernel writes at most `size` bytes into `info`, and says how many.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDVNODEPATHINFO,
            0,
            info.as_mut_ptr().cast(),
            c_int::try_from(size).ok()?,
        )
    };
    if usize::try_from(n).ok()? != size {
        return None;
    }
    // SAFETY: zeroed, then filled whole by the kernel (checked above).
    let info = unsafe { info.assume_init() };
    // SAFETY: `vip_path` is `MAXPATHLEN` bytes, declared by libc as 32 × 32 chars.
    let path: &[u8] = unsafe {
        std::slice::from_raw_parts(
            info.pvi_cdir.vip_path.as_ptr().cast::<u8>(),
            std::mem::size_of_val(&info.pvi_cdir.vip_path),
        )
    };
    Some(OsString::from_vec(darwin::c_field(path)?.to_vec()).into())
}

/// `mach_timebase_info`, once: the unit of a task's CPU times. (libc marks its Mach
/// declarations deprecated in favour of another crate; this one call does not warrant it.)
#[allow(deprecated)]
fn timebase() -> (u32, u32) {
    static TIMEBASE: OnceLock<(u32, u32)> = OnceLock::new();
    *TIMEBASE.get_or_init(|| {
        let mut info = libc::mach_timebase_info { numer: 0, denom: 0 };
        // SAFETY: writes the two integers of `info`.
        let ok = unsafe { libc::mach_timebase_info(&mut info) } == 0;
        if ok {
            (info.numer, info.denom)
        } else {
            (1, 1)
        }
    })
}

pub fn all_use() -> Vec<Use> {
    let (timebase, hz, page) = (timebase(), clock_ticks_per_second(), page_size());
    pids()
        .into_iter()
        .filter_map(|p| {
            let i = taskallinfo(p)?;
            (i.pbsd.pbi_status != darwin::SZOMB).then(|| {
                darwin::task_use(
                    i.pbsd.pbi_pgid,
                    i.ptinfo.pti_total_user,
                    i.ptinfo.pti_total_system,
                    i.ptinfo.pti_resident_size,
                    timebase,
                    hz,
                    page,
                )
            })
        })
        .collect()
}

/// The same `sysconf` figures `limits::group_usage` converts [`Use`] with.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK).max(1) as u64 }
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE).max(1) as u64 }
}

/// The TCP ports process `pid` listens on: its descriptors (`PROC_PIDLISTFDS`), then each
/// socket's (`PROC_PIDFDSOCKETINFO`). Empty for a process this user may not inspect.
fn listen_ports(pid: u32) -> Vec<u16> {
    let Some(pid) = pid_arg(pid) else {
        return Vec::new();
    };
    let record = std::mem::size_of::<libc::proc_fdinfo>();
    // SAFETY: a size query (no buffer).
    let estimate = unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, null_mut(), 0) };
    // Nothing (0) for a process this user may not inspect.
    let Some(estimate) = usize::try_from(estimate).ok().filter(|e| *e > 0) else {
        return Vec::new();
    };
    let mut fds = vec![0u8; estimate + 16 * record];
    // SAFETY: the buffer's length is passed; the kernel writes whole records into it.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDLISTFDS,
            0,
            fds.as_mut_ptr().cast(),
            c_int::try_from(fds.len()).unwrap_or(c_int::MAX),
        )
    };
    let Ok(n) = usize::try_from(n) else {
        return Vec::new();
    };
    fds.truncate(n);
    darwin::socket_fds(&fds)
        .into_iter()
        .filter_map(|fd| {
            let mut info = [0u8; SOCKET_FDINFO_SIZE];
            // SAFETY: the buffer is the size passed.
            let n = unsafe {
                libc::proc_pidfdinfo(
                    pid,
                    fd,
                    PROC_PIDFDSOCKETINFO,
                    info.as_mut_ptr().cast(),
                    SOCKET_FDINFO_SIZE as c_int,
                )
            };
            (n == SOCKET_FDINFO_SIZE as c_int)
                .then(|| darwin::tcp_listen_port(&info))
                .flatten()
        })
        .collect()
}

pub fn sockets_on(port: u16) -> Option<Sockets> {
    // Newest first: a service binky just started is among the first read.
    let first = pids()
        .into_iter()
        .find(|p| listen_ports(*p).contains(&port));
    Some(Sockets { port, first })
}

pub fn one_holds(pids: &[u32], sockets: &Sockets) -> bool {
    pids.iter()
        .any(|p| Some(*p) == sockets.first || listen_ports(*p).contains(&sockets.port))
}

pub fn holders(sockets: &Sockets) -> Vec<u32> {
    let found: Vec<(u32, u16)> = pids()
        .into_iter()
        .flat_map(|pid| listen_ports(pid).into_iter().map(move |port| (pid, port)))
        .collect();
    darwin::holders_of(&found, sockets.port)
}

pub fn listening_ports(pids: &[u32]) -> Vec<u16> {
    pids.iter().flat_map(|p| listen_ports(*p)).collect()
}

/// No pressure figures on macOS: the one-minute load (`getloadavg`) per CPU.
pub fn saturation(_cpu_percent: f64) -> Option<String> {
    let mut load = [0f64; 1];
    // SAFETY: one double is asked for, into a one-double buffer.
    if unsafe { libc::getloadavg(load.as_mut_ptr(), 1) } != 1 {
        return None;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    super::load_one_saturated(load[0], cpus)
}

/// This process's ended children (`proc_listchildpids`, then each one's status), but
/// `except`, waited for so they leave no zombie.
pub fn reap_children(except: Option<u32>) {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    let Some(me) = pid_arg(std::process::id()) else {
        return;
    };
    // SAFETY: the buffer and its size in bytes come from `list`.
    let children = list(|buf, size| unsafe { libc::proc_listchildpids(me, buf, size) });
    for pid in children {
        if Some(pid) == except {
            continue;
        }
        if matches!(bsdinfo(pid), Some(i) if i.status == darwin::SZOMB) {
            if let Some(raw) = pid_arg(pid) {
                let _ = waitpid(nix::unistd::Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG));
            }
        }
    }
}

pub fn kill(pid: u32) -> std::io::Result<()> {
    crate::signal::send(pid, "SIGKILL")
}
