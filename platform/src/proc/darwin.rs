//! macOS's answers about processes, as plain logic: what the kernel's buffers and counters
//! mean (a process's state and start time, CPU time in Mach units, the arguments and
//! environment `KERN_PROCARGS2` gives, the descriptors and sockets `libproc` lists), with no
//! system call. It builds on every system, so its tests run on Linux; `macos.rs` makes the
//! calls and hands their results here. Layouts and numbers are those of macOS's headers,
//! named where they are used.

use super::{Stat, Use};

// `p_stat` values (`<sys/proc.h>`): what `proc_bsdinfo.pbi_status` holds.

/// Being created.
pub const SIDL: u32 = 1;
/// Running or runnable.
pub const SRUN: u32 = 2;
/// Sleeping.
pub const SSLEEP: u32 = 3;
/// Stopped (a signal, a debugger).
pub const SSTOP: u32 = 4;
/// Ended, not yet waited for by its parent.
pub const SZOMB: u32 = 5;

/// What binky reads of `struct proc_bsdinfo` (`<sys/proc_info.h>`, `PROC_PIDTBSDINFO`), as
/// plain integers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BsdInfo {
    /// `pbi_status`: one of [`SIDL`] … [`SZOMB`].
    pub status: u32,
    /// `pbi_ppid`.
    pub ppid: u32,
    /// `pbi_pgid`.
    pub pgid: u32,
    /// `pbi_start_tvsec`: seconds since the epoch.
    pub start_sec: u64,
    /// `pbi_start_tvusec`: the microseconds of that second.
    pub start_usec: u64,
}

/// The state letter Linux would show for a `p_stat` value: `Z` ended, `R` running, `T`
/// stopped, else `S`. macOS reports nearly every live process as `SRUN`; only `Z` matters
/// to binky (a process that has ended).
pub fn state(status: u32) -> char {
    match status {
        SZOMB => 'Z',
        SRUN => 'R',
        SSTOP => 'T',
        _ => 'S',
    }
}

/// A process's start time in microseconds since the epoch: with its pid, the identity that
/// tells it from a later process given the same pid (even one started in the same second).
pub fn start_time(sec: u64, usec: u64) -> u64 {
    sec.saturating_mul(1_000_000).saturating_add(usec)
}

/// The [`Stat`] of a process from its `proc_bsdinfo`.
pub fn stat(info: BsdInfo) -> Stat {
    Stat {
        state: state(info.status),
        ppid: info.ppid,
        pgrp: info.pgid,
        start_time: start_time(info.start_sec, info.start_usec),
    }
}

/// When a process started, and whether it is still alive (not a zombie): what
/// [`super::alive`] compares with a recorded identity.
pub fn started(info: BsdInfo) -> (u64, bool) {
    (
        start_time(info.start_sec, info.start_usec),
        info.status != SZOMB,
    )
}

/// Mach absolute-time units in nanoseconds, by `mach_timebase_info`'s `numer/denom`: 1/1 on
/// Intel Macs (the units are nanoseconds), 125/3 on Apple Silicon (a 24 MHz clock). A
/// timebase of 0 (never given by the system) is taken as 1/1.
pub fn mach_to_nanos(units: u64, numer: u32, denom: u32) -> u64 {
    if numer == 0 || denom == 0 {
        return units;
    }
    let ns = u128::from(units) * u128::from(numer) / u128::from(denom);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// What a process uses, from its `proc_taskinfo` (`PROC_PIDTASKINFO`, or the task half of
/// `PROC_PIDTASKALLINFO`): `pti_total_user` and
/// `pti_total_system` are in Mach absolute-time units (`timebase`: `numer/denom`), turned
/// into clock ticks at `hz` (`sysconf(_SC_CLK_TCK)`, the unit [`Use::ticks`] is in on
/// every Unix); `pti_resident_size` is in bytes, turned into pages of `page` bytes (the
/// unit of [`Use::rss_pages`]), rounded up.
pub fn task_use(
    pgrp: u32,
    total_user: u64,
    total_system: u64,
    resident_bytes: u64,
    timebase: (u32, u32),
    hz: u64,
    page: u64,
) -> Use {
    let ns = mach_to_nanos(
        total_user.saturating_add(total_system),
        timebase.0,
        timebase.1,
    );
    let ticks = u128::from(ns) * u128::from(hz.max(1)) / 1_000_000_000;
    Use {
        pgrp,
        ticks: u64::try_from(ticks).unwrap_or(u64::MAX),
        rss_pages: resident_bytes.div_ceil(page.max(1)),
    }
}

/// What `sysctl({CTL_KERN, KERN_PROCARGS2, pid})` gives of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcArgs<'a> {
    /// The program's path as it was executed.
    pub exec_path: &'a [u8],
    /// Its arguments, `argv[0]` first.
    pub argv: Vec<&'a [u8]>,
    /// Its initial environment, `NAME=value` each. Empty where macOS leaves it out
    /// (`kern_sysctl.c`): a process code signing marks restricted (`CS_RESTRICT`: set-user-id
    /// programs, programs with restricted entitlements) while System Integrity Protection is
    /// on, or one entitled to keep its arguments unread.
    pub env: Vec<&'a [u8]>,
}

/// Parses a `KERN_PROCARGS2` buffer, laid out as `kern_sysctl.c` writes it: `argc` (an
/// `int`, native byte order), the executable's path and its NUL, NULs up to the next word,
/// `argc` NUL-ended arguments, then the environment's NUL-ended strings, up to an empty
/// string (padding) or the end. What follows the environment (macOS's own `apple[]`
/// strings, `ptr_munge=` …) may be read as more environment when no padding separates it:
/// harmless to a lookup by a variable's name. `None` for a buffer too short to hold `argc`
/// or a path.
pub fn parse_procargs2(buf: &[u8]) -> Option<ProcArgs<'_>> {
    let argc = i32::from_ne_bytes(buf.get(..4)?.try_into().ok()?);
    let rest = &buf[4..];
    let path_end = rest.iter().position(|b| *b == 0)?;
    let exec_path = &rest[..path_end];
    // The path's NUL and the padding after it.
    let mut at = path_end;
    while rest.get(at) == Some(&0) {
        at += 1;
    }
    // Whole strings only: each ends with its NUL (a string cut by the buffer's end is not
    // one), so the strings are what lies before the last NUL.
    let body = &rest[at..];
    let mut strings = body
        .iter()
        .rposition(|b| *b == 0)
        .map(|last| body[..last].split(|b| *b == 0))
        .into_iter()
        .flatten();
    let mut argv = Vec::new();
    for _ in 0..argc.max(0) {
        match strings.next() {
            Some(arg) => argv.push(arg),
            None => break,
        }
    }
    let env = strings.take_while(|s| !s.is_empty()).collect();
    Some(ProcArgs {
        exec_path,
        argv,
        env,
    })
}

/// The value of `key` in an environment of `NAME=value` strings (the first one, as
/// `getenv` reads it), when it is text.
pub fn env_value(env: &[&[u8]], key: &str) -> Option<String> {
    env.iter().find_map(|entry| {
        let value = entry.strip_prefix(key.as_bytes())?.strip_prefix(b"=")?;
        String::from_utf8(value.to_vec()).ok()
    })
}

/// The arguments of a `KERN_PROCARGS2` buffer as text (an argument that is not UTF-8 keeps
/// what it can), as `/proc/<pid>/cmdline` gives them on Linux.
pub fn arguments(buf: &[u8]) -> Option<Vec<String>> {
    let args = parse_procargs2(buf)?;
    Some(
        args.argv
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// The text of a fixed-size C string field the kernel filled (`proc_name`'s buffer, a
/// `vnode_info_path`'s `vip_path`): the bytes before the first NUL, `None` when empty.
pub fn c_field(field: &[u8]) -> Option<&[u8]> {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    Some(&field[..end]).filter(|f| !f.is_empty())
}

/// `PROX_FDTYPE_SOCKET` (`<sys/proc_info.h>`): a descriptor that is a socket.
pub const PROX_FDTYPE_SOCKET: u32 = 2;
/// `SOCKINFO_TCP`: `socket_info.soi_kind` of a TCP socket, whose `soi_proto` is a
/// `tcp_sockinfo`.
pub const SOCKINFO_TCP: i32 = 2;
/// `TSI_S_LISTEN`: `tcp_sockinfo.tcpsi_state` of a listening socket.
pub const TSI_S_LISTEN: i32 = 1;

/// The socket descriptors of a `proc_pidinfo(PROC_PIDLISTFDS)` buffer: `struct proc_fdinfo`
/// records (`int32_t proc_fd; uint32_t proc_fdtype;`, 8 bytes each, native byte order): the
/// part of the buffer the kernel filled.
pub fn socket_fds(records: &[u8]) -> Vec<i32> {
    records
        .chunks_exact(8)
        .filter_map(|r| {
            let fd = i32::from_ne_bytes(r[..4].try_into().ok()?);
            let kind = u32::from_ne_bytes(r[4..].try_into().ok()?);
            (kind == PROX_FDTYPE_SOCKET).then_some(fd)
        })
        .collect()
}

/// The socket structures of `<sys/proc_info.h>`, declared whole for their layout (libc
/// does not declare them): binky reads three of their fields, by offset.
#[allow(dead_code)]
pub mod layout {
    /// `struct proc_fileinfo` (`<sys/proc_info.h>`).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct ProcFileInfo {
        pub fi_openflags: u32,
        pub fi_status: u32,
        pub fi_offset: i64,
        pub fi_type: i32,
        pub fi_guardflags: u32,
    }

    /// `struct vinfo_stat` (`<sys/proc_info.h>`).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct VinfoStat {
        pub vst_dev: u32,
        pub vst_mode: u16,
        pub vst_nlink: u16,
        pub vst_ino: u64,
        pub vst_uid: u32,
        pub vst_gid: u32,
        pub vst_times: [i64; 8],
        pub vst_size: i64,
        pub vst_blocks: i64,
        pub vst_blksize: i32,
        pub vst_flags: u32,
        pub vst_gen: u32,
        pub vst_rdev: u32,
        pub vst_qspare: [i64; 2],
    }

    /// `struct sockbuf_info` (`<sys/proc_info.h>`).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct SockbufInfo {
        pub sbi_cc: u32,
        pub sbi_hiwat: u32,
        pub sbi_mbcnt: u32,
        pub sbi_mbmax: u32,
        pub sbi_lowat: u32,
        pub sbi_flags: i16,
        pub sbi_timeo: i16,
    }

    /// `struct in_sockinfo` (`<sys/proc_info.h>`); the addresses' unions as their 16 bytes.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct InSockinfo {
        pub insi_fport: i32,
        /// The local port, in network byte order in the low 16 bits.
        pub insi_lport: i32,
        pub insi_gencnt: u64,
        pub insi_flags: u32,
        pub insi_flow: u32,
        pub insi_vflag: u8,
        pub insi_ip_ttl: u8,
        pub rfu_1: u32,
        pub insi_faddr: [u32; 4],
        pub insi_laddr: [u32; 4],
        pub insi_v4: InV4,
        pub insi_v6: InV6,
    }

    /// `in_sockinfo.insi_v4`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct InV4 {
        pub in4_tos: u8,
    }

    /// `in_sockinfo.insi_v6`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct InV6 {
        pub in6_hlim: u8,
        pub in6_cksum: i32,
        pub in6_ifindex: u16,
        pub in6_hops: i16,
    }

    /// `struct tcp_sockinfo` (`<sys/proc_info.h>`).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct TcpSockinfo {
        pub tcpsi_ini: InSockinfo,
        pub tcpsi_state: i32,
        pub tcpsi_timer: [i32; 4],
        pub tcpsi_mss: i32,
        pub tcpsi_flags: u32,
        pub rfu_1: u32,
        pub tcpsi_tp: u64,
    }

    /// `socket_info.soi_proto`: the TCP member binky reads, and room for the largest one
    /// (`struct un_sockinfo`: two `uint64_t` and two 255-byte addresses, 528 bytes aligned).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub union SoiProto {
        pub pri_tcp: TcpSockinfo,
        pub largest: [u64; 66],
    }

    /// `struct socket_info` (`<sys/proc_info.h>`).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct SocketInfo {
        pub soi_stat: VinfoStat,
        pub soi_so: u64,
        pub soi_pcb: u64,
        pub soi_type: i32,
        pub soi_protocol: i32,
        pub soi_family: i32,
        pub soi_options: i16,
        pub soi_linger: i16,
        pub soi_state: i16,
        pub soi_qlen: i16,
        pub soi_incqlen: i16,
        pub soi_qlimit: i16,
        pub soi_timeo: i16,
        pub soi_error: u16,
        pub soi_oobmark: u32,
        pub soi_rcv: SockbufInfo,
        pub soi_snd: SockbufInfo,
        pub soi_kind: i32,
        pub rfu_1: u32,
        pub soi_proto: SoiProto,
    }

    /// `struct socket_fdinfo` (`<sys/proc_info.h>`): what `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)`
    /// fills, 792 bytes on both Apple targets (libc does not declare it).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct SocketFdInfo {
        pub pfi: ProcFileInfo,
        pub psi: SocketInfo,
    }
}

#[cfg(test)]
use layout::VinfoStat;
pub use layout::{InSockinfo, SocketFdInfo, SocketInfo, TcpSockinfo};

/// `sizeof(struct socket_fdinfo)` on macOS, the size `proc_pidfdinfo` must fill.
pub const SOCKET_FDINFO_SIZE: usize = 792;

/// Where the fields binky reads sit in a `socket_fdinfo` buffer.
const KIND_AT: usize =
    std::mem::offset_of!(SocketFdInfo, psi) + std::mem::offset_of!(SocketInfo, soi_kind);
const PROTO_AT: usize =
    std::mem::offset_of!(SocketFdInfo, psi) + std::mem::offset_of!(SocketInfo, soi_proto);
const STATE_AT: usize = PROTO_AT + std::mem::offset_of!(TcpSockinfo, tcpsi_state);
const LPORT_AT: usize = PROTO_AT
    + std::mem::offset_of!(TcpSockinfo, tcpsi_ini)
    + std::mem::offset_of!(InSockinfo, insi_lport);

/// The local port of a listening TCP socket, from a `socket_fdinfo` buffer as
/// `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)` fills it (native byte order; the port itself in
/// network byte order): `None` for any other socket (UDP, Unix, a TCP connection) or a
/// buffer too short.
pub fn tcp_listen_port(info: &[u8]) -> Option<u16> {
    let int = |at: usize| -> Option<i32> {
        Some(i32::from_ne_bytes(info.get(at..at + 4)?.try_into().ok()?))
    };
    if int(KIND_AT)? != SOCKINFO_TCP || int(STATE_AT)? != TSI_S_LISTEN {
        return None;
    }
    // `inp_lport` (a network-order u16) stored in an int: its low 16 bits.
    Some(u16::from_be(int(LPORT_AT)? as u16))
}

/// The processes among `listeners` (`(pid, port)` of each listening socket found) that
/// hold `port`, ascending, each once.
pub fn holders_of(listeners: &[(u32, u16)], port: u16) -> Vec<u32> {
    let mut out: Vec<u32> = listeners
        .iter()
        .filter(|(_, p)| *p == port)
        .map(|(pid, _)| *pid)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_command_line_and_a_c_field_are_read_as_the_kernel_wrote_them() {
        // argc 2, the exec path padded to a word, argv, then the environment.
        let mut buf = 2i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/usr/local/bin/binky\0\0\0\0");
        buf.extend_from_slice(b"binky\0exec\0PATH=/usr/bin\0\0");
        assert_eq!(
            arguments(&buf),
            Some(vec!["binky".to_owned(), "exec".to_owned()])
        );
        assert_eq!(arguments(&buf[..3]), None);
        let mut field = [0u8; 32];
        field[..8].copy_from_slice(b"postgres");
        assert_eq!(c_field(&field), Some(&b"postgres"[..]));
        assert_eq!(c_field(&[0u8; 16]), None);
        assert_eq!(c_field(b"no-nul"), Some(&b"no-nul"[..]));
    }
    use super::*;

    #[test]
    fn a_pid_taken_again_by_a_later_process_is_not_the_same_process() {
        let first = BsdInfo {
            status: SRUN,
            ppid: 1,
            pgid: 4242,
            start_sec: 1_765_000_000,
            start_usec: 250_000,
        };
        let s = stat(first);
        assert_eq!(
            s,
            Stat {
                state: 'R',
                ppid: 1,
                pgrp: 4242,
                start_time: 1_765_000_000_250_000
            }
        );
        // What `alive` asks: the recorded start time, and not ended.
        let alive =
            |info: BsdInfo, recorded: u64| matches!(started(info), (t, true) if t == recorded);
        assert!(alive(first, s.start_time));
        // The pid reused within the same second: the microseconds tell them apart.
        let later = BsdInfo {
            start_usec: 250_001,
            ..first
        };
        assert!(!alive(later, s.start_time));
        assert!(!alive(
            BsdInfo {
                start_sec: first.start_sec + 1,
                start_usec: 0,
                ..first
            },
            s.start_time
        ));
        // Ended but not yet waited for: the same process, no longer alive.
        let zombie = BsdInfo {
            status: SZOMB,
            ..first
        };
        assert!(!alive(zombie, s.start_time));
        assert!(stat(zombie).ended());
        assert_eq!(state(SSLEEP), 'S');
        assert_eq!(state(SIDL), 'S');
        assert_eq!(state(SSTOP), 'T');
    }

    #[test]
    fn mach_time_becomes_nanoseconds_by_the_timebase() {
        // Intel: the units are nanoseconds.
        assert_eq!(mach_to_nanos(1_500_000_000, 1, 1), 1_500_000_000);
        // Apple Silicon: 24 MHz, 125/3 ns a unit; one second is 24 million units.
        assert_eq!(mach_to_nanos(24_000_000, 125, 3), 1_000_000_000);
        assert_eq!(mach_to_nanos(3, 125, 3), 125);
        // A year of CPU time does not overflow on the way.
        let year = 24_000_000u64 * 3600 * 24 * 365;
        assert_eq!(mach_to_nanos(year, 125, 3), 1_000_000_000 * 3600 * 24 * 365);
        assert_eq!(mach_to_nanos(7, 0, 0), 7);
    }

    #[test]
    fn task_times_and_resident_bytes_become_ticks_and_pages() {
        // Apple Silicon: 1.5 s of user and 0.5 s of system time in 24 MHz units, 100 ticks a
        // second, 16 KiB pages.
        let u = task_use(
            77,
            36_000_000,
            12_000_000,
            10 * 16384 + 1,
            (125, 3),
            100,
            16384,
        );
        assert_eq!(
            u,
            Use {
                pgrp: 77,
                ticks: 200,
                rss_pages: 11
            }
        );
        // Intel: nanoseconds, 4 KiB pages.
        let u = task_use(77, 1_000_000_000, 0, 8192, (1, 1), 100, 4096);
        assert_eq!((u.ticks, u.rss_pages), (100, 2));
        // What `limits::group_usage` makes of it is the time the task used.
        assert_eq!(u.ticks * 1_000_000 / 100, 1_000_000);
    }

    /// A `KERN_PROCARGS2` buffer as the kernel lays it out on a little-endian Mac.
    fn procargs(
        argc: i32,
        path: &str,
        pad: usize,
        argv: &[&str],
        env: &[&str],
        tail: &[u8],
    ) -> Vec<u8> {
        let mut b = argc.to_le_bytes().to_vec();
        b.extend_from_slice(path.as_bytes());
        b.push(0);
        b.extend(std::iter::repeat_n(0u8, pad));
        for s in argv.iter().chain(env) {
            b.extend_from_slice(s.as_bytes());
            b.push(0);
        }
        b.extend_from_slice(tail);
        b
    }

    #[test]
    fn procargs2_gives_the_path_the_arguments_and_the_environment() {
        let buf = procargs(
            3,
            "/opt/homebrew/bin/node",
            1,
            &["node", "", "server.js"],
            &["PATH=/usr/bin:/bin", "BINKY_SPAWN=ab12.7", "EMPTY="],
            // Padding, then macOS's own strings.
            b"\0\0ptr_munge=\0main_stack=\0",
        );
        let a = parse_procargs2(&buf).unwrap();
        assert_eq!(a.exec_path, b"/opt/homebrew/bin/node");
        // An empty argument counts as one.
        assert_eq!(a.argv, vec![&b"node"[..], b"", b"server.js"]);
        assert_eq!(a.env.len(), 3);
        assert_eq!(env_value(&a.env, "BINKY_SPAWN").as_deref(), Some("ab12.7"));
        assert_eq!(env_value(&a.env, "EMPTY").as_deref(), Some(""));
        // A name is matched whole, not as a prefix of another.
        assert_eq!(env_value(&a.env, "BINKY"), None);
        assert_eq!(env_value(&a.env, "ptr_munge"), None);
    }

    #[test]
    fn procargs2_without_an_environment_or_cut_short_finds_nothing_there() {
        // What macOS gives of a restricted process: the environment left out.
        let buf = procargs(2, "/usr/bin/python3", 3, &["python3", "-V"], &[], b"");
        let a = parse_procargs2(&buf).unwrap();
        assert_eq!(a.argv, vec![&b"python3"[..], b"-V"]);
        assert!(a.env.is_empty());
        assert_eq!(env_value(&a.env, "PATH"), None);
        // Fewer arguments than argc says: what is there, no panic.
        let buf = procargs(5, "/bin/sh", 0, &["sh"], &[], b"");
        assert_eq!(parse_procargs2(&buf).unwrap().argv, vec![&b"sh"[..]]);
        // No argc, or no path's end.
        assert_eq!(parse_procargs2(&[1, 0]), None);
        assert_eq!(parse_procargs2(b"\x01\0\0\0/bin/sh"), None);
        // An env value that is not text is not given.
        let buf = procargs(1, "/bin/x", 0, &["x"], &[], b"K=\xff\0");
        let a = parse_procargs2(&buf).unwrap();
        assert_eq!(env_value(&a.env, "K"), None);
    }

    #[test]
    fn only_socket_descriptors_are_asked_about() {
        // proc_fdinfo records: a file (1), a socket (2), a pipe (6), a socket (2), and a
        // trailing partial record.
        let mut b = Vec::new();
        for (fd, kind) in [(0i32, 1u32), (3, 2), (4, 6), (9, 2)] {
            b.extend_from_slice(&fd.to_le_bytes());
            b.extend_from_slice(&kind.to_le_bytes());
        }
        b.extend_from_slice(&[7, 0, 0]);
        assert_eq!(socket_fds(&b), vec![3, 9]);
        assert_eq!(socket_fds(&[]), Vec::<i32>::new());
    }

    /// The offsets of `<sys/proc_info.h>`'s fields on a 64-bit Mac, counted by hand from the
    /// header: `proc_fileinfo` is 24 bytes, `vinfo_stat` 136, `soi_kind` sits 232 bytes
    /// into `socket_info`, its `soi_proto` at 240; `insi_lport` 4 bytes into it,
    /// `tcpsi_state` 80.
    const HEADER_KIND_AT: usize = 24 + 232;
    const HEADER_LPORT_AT: usize = 24 + 240 + 4;
    const HEADER_STATE_AT: usize = 24 + 240 + 80;

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn the_declared_layout_is_the_headers() {
        assert_eq!(std::mem::size_of::<VinfoStat>(), 136);
        assert_eq!(std::mem::size_of::<InSockinfo>(), 80);
        assert_eq!(std::mem::offset_of!(InSockinfo, insi_v6), 68);
        assert_eq!(std::mem::size_of::<TcpSockinfo>(), 120);
        assert_eq!(std::mem::size_of::<SocketFdInfo>(), SOCKET_FDINFO_SIZE);
        assert_eq!(
            (KIND_AT, LPORT_AT, STATE_AT),
            (HEADER_KIND_AT, HEADER_LPORT_AT, HEADER_STATE_AT)
        );
    }

    /// A `socket_fdinfo` buffer as `proc_pidfdinfo` fills it on a little-endian Mac.
    fn socket_fdinfo(kind: i32, state: i32, port: u16) -> Vec<u8> {
        let mut b = vec![0u8; SOCKET_FDINFO_SIZE];
        let mut put = |at: usize, v: i32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put(HEADER_KIND_AT, kind);
        put(HEADER_STATE_AT, state);
        // `inp_lport` is the port's two bytes in network order, read as a number.
        put(
            HEADER_LPORT_AT,
            i32::from(u16::from_le_bytes(port.to_be_bytes())),
        );
        b
    }

    #[test]
    fn a_listening_tcp_socket_gives_its_port_and_nothing_else_does() {
        assert_eq!(
            tcp_listen_port(&socket_fdinfo(SOCKINFO_TCP, TSI_S_LISTEN, 5432)),
            Some(5432)
        );
        assert_eq!(
            tcp_listen_port(&socket_fdinfo(SOCKINFO_TCP, TSI_S_LISTEN, 65535)),
            Some(65535)
        );
        // An established connection (TSI_S_ESTABLISHED, 4), a UDP socket (SOCKINFO_IN, 1),
        // a Unix socket (SOCKINFO_UN, 3).
        assert_eq!(tcp_listen_port(&socket_fdinfo(SOCKINFO_TCP, 4, 5432)), None);
        assert_eq!(tcp_listen_port(&socket_fdinfo(1, TSI_S_LISTEN, 5432)), None);
        assert_eq!(tcp_listen_port(&socket_fdinfo(3, TSI_S_LISTEN, 5432)), None);
        assert_eq!(tcp_listen_port(&[0u8; 100]), None);
    }

    #[test]
    fn the_holders_of_a_port_are_each_process_listening_there_once() {
        // A forking server's workers share its socket; a process listens on two families.
        let found = [
            (300, 8080),
            (120, 8080),
            (120, 8080),
            (500, 5432),
            (300, 8080),
        ];
        assert_eq!(holders_of(&found, 8080), vec![120, 300]);
        assert_eq!(holders_of(&found, 5432), vec![500]);
        assert_eq!(holders_of(&found, 1), Vec::<u32>::new());
    }
}
