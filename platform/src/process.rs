//! Processes: the shell that runs a `cmd` string, a child in a group of its own, and what binky
//! reads of another process by its pid (its command line and its name).
//!
//! Linux reads `/proc/<pid>/cmdline` and `/proc/<pid>/comm`; elsewhere these are `None` for
//! now, and what uses them says it cannot tell (who holds a port, whether binky started a
//! process).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// Windows' `CREATE_NEW_PROCESS_GROUP`: the child leads a console process group, which
/// `CTRL_BREAK_EVENT` reaches without reaching binky.
#[cfg(windows)]
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

/// Makes the child `cmd` starts lead a process group of its own, so that it and what it
/// starts are stopped together, and a signal to binky's group does not reach it.
pub fn in_new_group(cmd: &mut std::process::Command) -> &mut std::process::Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0)
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        cmd.creation_flags(CREATE_NEW_PROCESS_GROUP)
    }
}

/// [`in_new_group`], for tokio's commands.
pub fn in_new_group_async(cmd: &mut tokio::process::Command) -> &mut tokio::process::Command {
    #[cfg(unix)]
    {
        cmd.process_group(0)
    }
    #[cfg(windows)]
    {
        cmd.creation_flags(CREATE_NEW_PROCESS_GROUP)
    }
}

/// Windows' `DETACHED_PROCESS`: the child has no console (none of binky's, no window).
#[cfg(windows)]
const DETACHED_PROCESS: u32 = 0x0000_0008;

/// Makes the child `cmd` starts outlive this command and stay out of its terminal's reach
/// (the daemon binky starts on demand). Unix: a session of its own (`setsid`), so no
/// terminal's signals (a closed window's SIGHUP, Ctrl-C) reach it. Windows: no console
/// (`DETACHED_PROCESS`) and a process group of its own (`CREATE_NEW_PROCESS_GROUP`), so no
/// Ctrl-C or Ctrl-Break of the console binky ran in reaches it.
pub fn detached(cmd: &mut std::process::Command) -> &mut std::process::Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            })
        }
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        use windows_sys::Win32::Foundation::{
            SetHandleInformation, HANDLE_FLAG_INHERIT, INVALID_HANDLE_VALUE,
        };
        use windows_sys::Win32::System::Console::{
            GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
        };
        // Windows hands a child every handle marked inheritable, not only the three it is
        // given: this command's own standard handles (a caller's pipes, which it got by
        // inheritance) would stay open in the daemon for as long as it runs, and a caller
        // reading this command's output to its end would wait for ever. They are this
        // command's alone from here on.
        for which in [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE] {
            // SAFETY: GetStdHandle returns this process's handle or null/invalid, checked
            // before use; clearing the flag changes only who inherits it.
            unsafe {
                let handle = GetStdHandle(which);
                if !handle.is_null() && handle != INVALID_HANDLE_VALUE {
                    SetHandleInformation(handle, HANDLE_FLAG_INHERIT, 0);
                }
            }
        }
        cmd.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP)
    }
}

/// Whether a process `pid` exists (a zombie not yet waited for counts: it holds its pid).
/// Unix: `kill(pid, 0)` succeeds, or is refused for want of rights. Windows: it opens, and
/// has no exit code yet. Pid 0 is no process.
pub fn alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    #[cfg(unix)]
    {
        let Ok(raw) = i32::try_from(pid) else {
            return false;
        };
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
            Ok(()) => true,
            Err(e) => e == nix::errno::Errno::EPERM,
        }
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
        use windows_sys::Win32::System::Threading::{
            GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
        };
        // SAFETY: a handle opened here, read once, closed here.
        unsafe {
            let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if handle.is_null() {
                // Gone, or not ours to open: an access error means it exists.
                return std::io::Error::last_os_error().raw_os_error() == Some(5);
            }
            let mut code = 0u32;
            let ok = GetExitCodeProcess(handle, &mut code);
            CloseHandle(handle);
            ok != 0 && code == STILL_ACTIVE as u32
        }
    }
}

/// Keeps the C allocator to `arenas` malloc arenas (glibc on Linux: `mallopt(M_ARENA_MAX)`;
/// its default is eight a core, each keeping freed memory). Nothing elsewhere: other
/// allocators size themselves. Call before any thread starts.
pub fn limit_malloc_arenas(arenas: u8) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter, before the threads that use it start.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, i32::from(arenas));
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = arenas;
}

/// [`in_new_group_async`], the child also running at a lower priority when `nice` is above 0
/// (Unix: `setpriority` to `nice` in the child before it runs; Windows: the below-normal
/// priority class, or the idle class from 10 on).
pub fn in_new_group_niced_async(
    cmd: &mut tokio::process::Command,
    nice: i32,
) -> &mut tokio::process::Command {
    #[cfg(unix)]
    {
        cmd.process_group(0);
        let open_files = OPEN_FILES_AT_START.load(std::sync::atomic::Ordering::Relaxed);
        if nice != 0 || open_files != 0 {
            // SAFETY: setpriority, getrlimit and setrlimit are async-signal-safe, and this
            // closure touches nothing else between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    // Lowering one's own priority cannot be refused; an error is ignored.
                    if nice != 0 {
                        nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, nice);
                    }
                    // The service gets the open-file limit the daemon was started with, not
                    // the one it raised for its watcher ([`raise_open_files_limit`]).
                    if open_files != 0 {
                        let mut limit = nix::libc::rlimit {
                            rlim_cur: 0,
                            rlim_max: 0,
                        };
                        if nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut limit) == 0 {
                            limit.rlim_cur = open_files as nix::libc::rlim_t;
                            nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &limit);
                        }
                    }
                    Ok(())
                });
            }
        }
        cmd
    }
    #[cfg(windows)]
    {
        /// `BELOW_NORMAL_PRIORITY_CLASS`, `IDLE_PRIORITY_CLASS`.
        const BELOW_NORMAL: u32 = 0x0000_4000;
        const IDLE: u32 = 0x0000_0040;
        let class = match nice {
            n if n >= 10 => IDLE,
            n if n > 0 => BELOW_NORMAL,
            _ => 0,
        };
        cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | class)
    }
}

/// The soft limit of open files this process had before [`raise_open_files_limit`] raised
/// it (0: not raised), which a service is started with again.
#[cfg(unix)]
static OPEN_FILES_AT_START: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Raises this process's soft limit of open files as far as the system lets it (the
/// daemon, at its start): on macOS and the BSDs, whose file watcher (kqueue) holds an open
/// file for every watched file and folder, and macOS gives a process 256. To the hard
/// limit, capped at `kern.maxfilesperproc` (macOS refuses more, and refuses "unlimited"
/// however high the hard limit says). The services started after
/// ([`in_new_group_niced_async`]) get the limit the process had before. The limits
/// before and after when it raised them; `None` when it did not: on Linux (inotify needs no
/// descriptor a watch, and a raised soft limit would reach every service's `select()`),
/// on Windows (no such limit), or when it is as high as it goes already.
// `rlim_t` is u64 on macOS and i64 on FreeBSD: the casts are needed on one of them.
#[allow(clippy::unnecessary_cast)]
pub fn raise_open_files_limit() -> Option<(u64, u64)> {
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        use nix::libc;
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is ours, the structure the call fills.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return None;
        }
        let (soft, hard) = (limit.rlim_cur as u64, limit.rlim_max as u64);
        let target = darwin::open_files_target(
            soft,
            hard,
            libc::RLIM_INFINITY as u64,
            max_files_per_process(),
        )?;
        limit.rlim_cur = target as libc::rlim_t;
        // SAFETY: as above; only the soft limit changes, to at most the hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return None;
        }
        OPEN_FILES_AT_START.store(soft, std::sync::atomic::Ordering::Relaxed);
        Some((soft, target))
    }
    #[cfg(not(all(unix, not(target_os = "linux"))))]
    {
        None
    }
}

/// `kern.maxfilesperproc`: the most open files the system lets one process have (macOS,
/// FreeBSD, DragonFly); `None` elsewhere or when it cannot be read.
#[cfg(all(unix, not(target_os = "linux")))]
fn max_files_per_process() -> Option<u64> {
    #[cfg(any(target_os = "macos", target_os = "freebsd", target_os = "dragonfly"))]
    {
        use nix::libc;
        crate::sysctl::value::<libc::c_int>(&[libc::CTL_KERN, libc::KERN_MAXFILESPERPROC])
            .and_then(|v| u64::try_from(v).ok())
            .filter(|v| *v > 0)
    }
    #[cfg(not(any(target_os = "macos", target_os = "freebsd", target_os = "dragonfly")))]
    {
        None
    }
}

/// The decisions of macOS' process calls, on plain numbers: compiled and tested on every
/// system, used on macOS.
pub mod darwin {
    /// The soft limit of open files to set, given the `soft` and `hard` limits
    /// (`getrlimit(RLIMIT_NOFILE)`), the system's `infinity` (`RLIM_INFINITY`:
    /// `0x7fff_ffff_ffff_ffff` in macOS' `<sys/resource.h>`) and `kern.maxfilesperproc`
    /// (`per_process`): the hard limit capped at `per_process`; `None` when that is no
    /// higher than `soft`, or still "unlimited" (no cap known: macOS would refuse it).
    pub fn open_files_target(
        soft: u64,
        hard: u64,
        infinity: u64,
        per_process: Option<u64>,
    ) -> Option<u64> {
        let target = per_process.map_or(hard, |max| hard.min(max));
        (target != infinity && target > soft).then_some(target)
    }
}

/// Runs `f` in the child between fork and exec (Unix), e.g. to join a cgroup through
/// descriptors opened before. `false` where the system starts processes without a fork
/// (Windows): `f` never runs, and the caller does its work after the spawn, if it can.
///
/// # Safety
/// `f` runs in a forked child of a multi-threaded process: it may only make
/// async-signal-safe calls and must not allocate or take locks.
pub unsafe fn before_exec_async<F>(cmd: &mut tokio::process::Command, f: F) -> bool
where
    F: FnMut() -> std::io::Result<()> + Send + Sync + 'static,
{
    #[cfg(unix)]
    {
        // SAFETY: the caller keeps `f` to what may run between fork and exec.
        unsafe {
            cmd.pre_exec(f);
        }
        true
    }
    #[cfg(not(unix))]
    {
        let _ = (cmd, f);
        false
    }
}

/// The signal that ended a process, where the system has signals and one did.
pub fn exit_signal(status: &ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// Closes every descriptor this process inherited above the standard three (Linux: those
/// `/proc/self/fd` lists; macOS: those `/dev/fd` lists; other systems: none yet, and
/// Windows hands a process only the handles it was told to).
pub fn close_inherited() {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        // macOS' `/dev/fd` lists the open descriptors of the process reading it, as Linux's
        // `/proc/self/fd` does.
        let listing = if cfg!(target_os = "linux") {
            "/proc/self/fd"
        } else {
            "/dev/fd"
        };
        let fds: Vec<i32> = std::fs::read_dir(listing)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd > 2)
            .collect();
        for fd in fds {
            // The directory's own descriptor is gone by now (closing it again fails: harmless).
            let _ = nix::unistd::close(fd);
        }
    }
}

/// Narrows the process's file-creation mask to at least `mask` (Unix's umask: bits it
/// already removes stay removed). Windows has no such mask.
pub fn umask_at_least(mask: u32) {
    #[cfg(unix)]
    {
        use nix::sys::stat::{umask, Mode};
        let bits = Mode::from_bits_truncate(mask as nix::libc::mode_t);
        let was = umask(bits);
        umask(was | bits);
    }
    #[cfg(not(unix))]
    let _ = mask;
}

/// The arguments `pid` was started with, its program first, where the system says (Linux:
/// `/proc/<pid>/cmdline`; macOS: `KERN_PROCARGS2`, for this user's processes).
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    #[cfg(target_os = "linux")]
    {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        Some(split_cmdline(&raw))
    }
    #[cfg(target_os = "macos")]
    {
        crate::proc::macos::command_line(pid)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = pid;
        None
    }
}

/// `/proc/<pid>/cmdline`'s arguments: each ends with a NUL (an empty argument is kept).
pub fn split_cmdline(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The short name of `pid`'s program (`postgres`, `node`), where the system says (Linux:
/// `/proc/<pid>/comm`; macOS: `proc_name`).
pub fn name(pid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        Some(comm.trim().to_owned())
    }
    #[cfg(target_os = "macos")]
    {
        crate::proc::macos::name(pid)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = pid;
        None
    }
}

/// The working directory of `pid`, where the system says (Linux: `/proc/<pid>/cwd`; macOS:
/// `proc_pidinfo(PROC_PIDVNODEPATHINFO)`, for this user's processes; elsewhere `None`: binky cannot tell, and what asks treats the process as not the one it
/// looks for).
pub fn cwd(pid: u32) -> Option<std::path::PathBuf> {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
    }
    #[cfg(target_os = "macos")]
    {
        crate::proc::macos::cwd(pid)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = pid;
        None
    }
}

/// What runs a service's `cmd` string (and a health command's, a `secret_command`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shell {
    /// A POSIX shell, run as `<path> -c <cmd>`: `/bin/sh` on Unix; on Windows the `sh.exe`
    /// of Git for Windows (so one `binky.toml` works on both), or the one `BINKY_SHELL` names.
    Posix(PathBuf),
    /// Windows' `cmd.exe`, run as `cmd /C <cmd>`: where no `sh` is found, or
    /// `BINKY_SHELL=cmd`.
    Cmd,
}

/// The setting that chooses the shell on Windows: a path to a shell that takes `-c`, or the
/// word `cmd`. Unix always uses `/bin/sh`.
pub const SHELL_VAR: &str = "BINKY_SHELL";

impl Shell {
    /// The program to run.
    pub fn program(&self) -> &std::ffi::OsStr {
        match self {
            Shell::Posix(path) => path.as_os_str(),
            Shell::Cmd => std::ffi::OsStr::new("cmd"),
        }
    }

    /// The argument that comes before the command string (`-c`, `/C`).
    pub fn flag(&self) -> &'static str {
        match self {
            Shell::Posix(_) => "-c",
            Shell::Cmd => "/C",
        }
    }
}

/// The shell, chosen from the setting's value (`BINKY_SHELL`) and, in order of preference,
/// the candidate `sh` paths that exist: the setting if it is set (`cmd`, in any case, is
/// `cmd.exe`; anything else is the path of a shell taking `-c`), else the first existing
/// candidate, else `cmd.exe`. Pure, so every system's choice is tested on any system.
pub fn choose_shell(setting: Option<&str>, existing: &[PathBuf]) -> Shell {
    match setting.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) if s.eq_ignore_ascii_case("cmd") || s.eq_ignore_ascii_case("cmd.exe") => Shell::Cmd,
        Some(s) => Shell::Posix(PathBuf::from(s)),
        None => existing
            .first()
            .map_or(Shell::Cmd, |p| Shell::Posix(p.clone())),
    }
}

/// Where Git for Windows' `sh.exe` may be, in order: beside the `git.exe` found on `PATH`
/// (`<Git>\cmd\git.exe` and `<Git>\mingw64\bin\git.exe` both mean `<Git>\bin\sh.exe` or
/// `<Git>\usr\bin\sh.exe`), then under the Program Files folders given.
pub fn sh_candidates(git_exe: Option<&Path>, program_files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = git_exe.and_then(Path::parent) {
        for root in [dir.parent(), dir.parent().and_then(Path::parent)]
            .into_iter()
            .flatten()
        {
            out.push(root.join("bin").join("sh.exe"));
            out.push(root.join("usr").join("bin").join("sh.exe"));
        }
    }
    for pf in program_files {
        out.push(pf.join("Git").join("bin").join("sh.exe"));
    }
    out.dedup();
    out
}

/// The shell of this machine: `/bin/sh` on Unix; on Windows [`choose_shell`] from
/// `BINKY_SHELL` and the [`sh_candidates`] that exist (found once, then kept).
pub fn shell() -> Shell {
    #[cfg(unix)]
    {
        Shell::Posix(PathBuf::from("/bin/sh"))
    }
    #[cfg(windows)]
    {
        static FOUND: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
        let existing = FOUND.get_or_init(|| {
            let git = std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join("git.exe"))
                    .find(|g| g.is_file())
            });
            let program_files: Vec<PathBuf> = ["ProgramW6432", "ProgramFiles"]
                .iter()
                .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
                .collect();
            sh_candidates(git.as_deref(), &program_files)
                .into_iter()
                .filter(|p| p.is_file())
                .collect()
        });
        choose_shell(std::env::var(SHELL_VAR).ok().as_deref(), existing)
    }
}

/// A command that runs `cmd` in [`shell`] (`/bin/sh -c cmd`; on Windows `sh.exe -c cmd` or
/// `cmd /C cmd`, the string handed to `cmd.exe` as it is, since it quotes by its own rules).
pub fn shell_command(cmd: &str) -> tokio::process::Command {
    tokio::process::Command::from(shell_command_std(cmd))
}

/// [`shell_command`], as a std command.
pub fn shell_command_std(cmd: &str) -> std::process::Command {
    let shell = shell();
    let mut c = std::process::Command::new(shell.program());
    c.arg(shell.flag());
    #[cfg(windows)]
    if shell == Shell::Cmd {
        use std::os::windows::process::CommandExt;
        c.raw_arg(cmd);
        return c;
    }
    c.arg(cmd);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_is_the_setting_else_the_first_sh_found_else_cmd() {
        let git_sh = PathBuf::from(r"C:\Program Files\Git\bin\sh.exe");
        let found = [git_sh.clone(), PathBuf::from(r"D:\x\sh.exe")];
        assert_eq!(choose_shell(None, &found), Shell::Posix(git_sh.clone()));
        assert_eq!(choose_shell(Some(""), &found), Shell::Posix(git_sh));
        assert_eq!(choose_shell(None, &[]), Shell::Cmd);
        for word in ["cmd", "CMD", " cmd.exe "] {
            assert_eq!(choose_shell(Some(word), &found), Shell::Cmd, "{word}");
        }
        assert_eq!(
            choose_shell(Some(r"C:\msys64\usr\bin\bash.exe"), &[]),
            Shell::Posix(PathBuf::from(r"C:\msys64\usr\bin\bash.exe"))
        );
        assert_eq!(Shell::Cmd.flag(), "/C");
        assert_eq!(Shell::Posix(PathBuf::from("/bin/sh")).flag(), "-c");
    }

    #[test]
    fn git_for_windows_sh_is_looked_for_beside_git_then_in_program_files() {
        let pf = PathBuf::from("PF");
        let git = Path::new("G").join("cmd").join("git.exe");
        let c = sh_candidates(Some(&git), std::slice::from_ref(&pf));
        assert_eq!(c[0], Path::new("G").join("bin").join("sh.exe"));
        assert_eq!(c[1], Path::new("G").join("usr").join("bin").join("sh.exe"));
        assert_eq!(c.last(), Some(&pf.join("Git").join("bin").join("sh.exe")));
        // git.exe of mingw64\bin: two folders up.
        let deep = Path::new("G").join("mingw64").join("bin").join("git.exe");
        assert!(
            sh_candidates(Some(&deep), &[]).contains(&Path::new("G").join("bin").join("sh.exe"))
        );
        assert_eq!(sh_candidates(None, &[]), Vec::<PathBuf>::new());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_cmd_string_runs_in_the_shell_with_its_syntax() {
        let out = shell_command("a=x; echo \"$a\" | tr x y")
            .output()
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "y\n");
        let out = shell_command_std("exit 3").status().unwrap();
        assert_eq!(out.code(), Some(3));
    }

    #[test]
    fn macos_raises_the_open_file_limit_to_the_hard_one_capped_at_kern_maxfilesperproc() {
        use darwin::open_files_target;
        const INFINITY: u64 = 0x7fff_ffff_ffff_ffff;
        // macOS' defaults: 256, unlimited; kern.maxfilesperproc 61440 on a 16 GiB Mac.
        assert_eq!(
            open_files_target(256, INFINITY, INFINITY, Some(61440)),
            Some(61440)
        );
        // A hard limit below the cap (`ulimit -Hn 10240` in the shell that started it).
        assert_eq!(
            open_files_target(256, 10240, INFINITY, Some(61440)),
            Some(10240)
        );
        // Unlimited and no cap known: setrlimit would refuse, so nothing is asked.
        assert_eq!(open_files_target(256, INFINITY, INFINITY, None), None);
        // As high as it goes already, or higher: left alone.
        assert_eq!(
            open_files_target(61440, INFINITY, INFINITY, Some(61440)),
            None
        );
        assert_eq!(
            open_files_target(100_000, INFINITY, INFINITY, Some(61440)),
            None
        );
        // Linux's figures (RLIM_INFINITY is u64::MAX there), were it asked.
        assert_eq!(
            open_files_target(1024, 524_288, u64::MAX, None),
            Some(524_288)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_leaves_the_open_file_limit_alone_as_inotify_needs_no_descriptors() {
        assert_eq!(raise_open_files_limit(), None);
        assert_eq!(
            OPEN_FILES_AT_START.load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }

    #[test]
    fn a_command_line_splits_at_nuls_and_drops_the_trailing_one() {
        assert_eq!(split_cmdline(b"binky\0mcp\0--x\0"), ["binky", "mcp", "--x"]);
        assert_eq!(split_cmdline(b"sh\0-c\0\0x\0"), ["sh", "-c", "", "x"]);
        assert!(split_cmdline(b"").is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_child_in_a_group_of_its_own_is_stopped_with_its_group_and_says_by_what() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 30 & wait"]);
        let mut child = in_new_group(&mut cmd).spawn().unwrap();
        let pgid = child.id();
        // The shell leads its own group: the group's id is its pid, not binky's.
        assert_ne!(pgid, nix::unistd::getpgrp().as_raw() as u32);
        crate::signal::send_group(pgid, "SIGKILL").unwrap();
        let status = child.wait().unwrap();
        assert_eq!(exit_signal(&status), Some(9));
        assert_eq!(
            exit_signal(&std::process::Command::new("true").status().unwrap()),
            None
        );
    }

    #[test]
    fn this_process_is_alive_and_an_ended_child_is_not_once_waited_for() {
        assert!(alive(std::process::id()));
        assert!(!alive(0));
        let exe = std::env::current_exe().unwrap();
        let mut child = std::process::Command::new(exe)
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[cfg(unix)]
    #[test]
    fn a_detached_child_leads_a_session_of_its_own() {
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30");
        let mut child = detached(&mut cmd).spawn().unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let sid = nix::unistd::getsid(Some(pid));
        let ours = nix::unistd::getsid(None).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(sid, Ok(pid), "its session is its own");
        assert_ne!(ours, pid);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_seen_by_its_pid() {
        let me = std::process::id();
        let args = command_line(me).expect("our own command line");
        assert!(!args.is_empty());
        assert!(name(me).is_some_and(|n| !n.is_empty()));
        assert_eq!(cwd(me), std::env::current_dir().ok());
    }
}
