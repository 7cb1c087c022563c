//! Signals, by name: how `stop_signal` is read (the same names on every system, so one
//! `binky.toml` is read alike everywhere) and how a process or its group is sent one.
//!
//! Unix sends them (`kill(2)`, `killpg(2)`). Windows has no signals: sending one there is
//! `Unsupported` for now; its stop will be a Job object's (`CTRL_BREAK_EVENT`, then
//! `TerminateJobObject`).

use std::io;

/// Every signal name `stop_signal` takes: POSIX's and Linux's, in their numbering order.
pub const NAMES: &[&str] = &[
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// `text` (`SIGQUIT`, `QUIT`, `quit`) as the one name of [`NAMES`] it is, if it is one.
pub fn canonical(text: &str) -> Option<&'static str> {
    let upper = text.trim().to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    NAMES.iter().copied().find(|n| *n == name)
}

/// Sends the signal `name` (one of [`NAMES`]) to the process `pid`.
pub fn send(pid: u32, name: &str) -> io::Result<()> {
    #[cfg(unix)]
    {
        let pid = nix::unistd::Pid::from_raw(pid as i32);
        nix::sys::signal::kill(pid, unix_signal(name)?).map_err(io::Error::from)
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, name);
        Err(unsupported())
    }
}

/// Sends the signal `name` to every process of the process group `pgid`.
pub fn send_group(pgid: u32, name: &str) -> io::Result<()> {
    #[cfg(unix)]
    {
        let pgid = nix::unistd::Pid::from_raw(pgid as i32);
        nix::sys::signal::killpg(pgid, unix_signal(name)?).map_err(io::Error::from)
    }
    #[cfg(not(unix))]
    {
        let _ = (pgid, name);
        Err(unsupported())
    }
}

/// Lets a write to a closed pipe end the process again (`SIGPIPE`'s default), as a shell
/// command expects of its output. Rust starts programs with it ignored. Call before any
/// thread starts. Nothing to do on Windows.
pub fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: restoring a default disposition; called before any thread is started.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        );
    }
}

/// Every signal back to its default action (but SIGPIPE, ignored: a daemon's write to a
/// closed socket is an error, not its end), and none blocked: the standard ones and the
/// real-time ones a program may use. For a process that starts clean whatever started it.
/// Call before any thread starts. Nothing to do on Windows.
pub fn reset_all() {
    #[cfg(unix)]
    {
        use nix::libc;
        use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow};
        #[cfg(target_os = "linux")]
        let last = libc::SIGRTMAX();
        #[cfg(not(target_os = "linux"))]
        let last = 31;
        for sig in 1..=last {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let action = if sig == libc::SIGPIPE {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            // SAFETY: a default or ignore disposition, before any thread is started; a signal
            // the C library keeps for itself is refused (EINVAL) and left as it is.
            unsafe {
                libc::signal(sig, action);
            }
        }
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    }
}

#[cfg(unix)]
fn unix_signal(name: &str) -> io::Result<nix::sys::signal::Signal> {
    name.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is no signal of this system"),
        )
    })
}

#[cfg(not(unix))]
fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "signals are not sent on this system yet",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_read_with_or_without_sig_in_any_case_and_a_number_is_not_a_name() {
        for text in ["SIGQUIT", "QUIT", "quit", " sigquit "] {
            assert_eq!(canonical(text), Some("SIGQUIT"), "{text}");
        }
        assert_eq!(canonical("3"), None);
        assert_eq!(canonical("SIGQUITT"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_names_are_linuxs_signals_in_order() {
        let linux: Vec<&str> = nix::sys::signal::Signal::iterator()
            .map(|s| s.as_str())
            .collect();
        assert_eq!(NAMES, linux.as_slice());
    }

    #[cfg(unix)]
    #[test]
    fn a_group_is_sent_its_signal_and_a_gone_one_is_an_error() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        send_group(pgid, "SIGTERM").unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15));
        assert!(send_group(pgid, "SIGTERM").is_err(), "the group is gone");
        assert!(send(pgid, "SIGNOPE").is_err());
    }
}
