//! Signals, by name: how `stop_signal` is read (the same names on every system, so one
//! `binky.toml` is read alike everywhere) and how a process or its group is sent one.
//!
//! Unix sends them (`kill(2)`, `killpg(2)`). Windows has no signals: sending one there is
//! `Unsupported`; a service's stop there is its Job object's ([`crate::job`]:
//! `CTRL_BREAK_EVENT`, then `TerminateJobObject`).

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

/// The number of the signal `name` (one of [`NAMES`]): this system's where it has signals,
/// else Linux's (the numbering an exit code `128 + N` is read in everywhere).
pub fn number(name: &str) -> Option<i32> {
    #[cfg(unix)]
    {
        unix_signal(name).ok().map(|s| s as i32)
    }
    #[cfg(not(unix))]
    {
        NAMES
            .iter()
            .position(|n| *n == name)
            .and_then(|i| i32::try_from(i + 1).ok())
    }
}

/// What a command waiting on something hears from the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Asked to stop: SIGTERM; Windows: Ctrl-Break (what binky's supervisor sends a
    /// process group to stop it).
    Terminate,
    /// Its terminal went: SIGHUP; Windows: its console window was closed.
    Hangup,
    /// Interrupted at the terminal, or by `kill -INT`: SIGINT; Windows: Ctrl-C.
    Interrupt,
    /// SIGQUIT (Ctrl-\); never on Windows.
    Quit,
    /// A child ended: SIGCHLD; never on Windows.
    ChildEnded,
}

impl Heard {
    /// Its signal's name, as [`NAMES`] spells it (Windows' console events by the signal
    /// they stand for).
    pub fn name(self) -> &'static str {
        match self {
            Heard::Terminate => "SIGTERM",
            Heard::Hangup => "SIGHUP",
            Heard::Interrupt => "SIGINT",
            Heard::Quit => "SIGQUIT",
            Heard::ChildEnded => "SIGCHLD",
        }
    }
}

/// Listens for what [`Heard`] names, from when it is made: instead of ending the process
/// (their default), each arrives at [`Watch::next`].
pub struct Watch {
    #[cfg(unix)]
    streams: Vec<(Heard, tokio::signal::unix::Signal)>,
    #[cfg(windows)]
    streams: Vec<(Heard, WindowsEvent)>,
}

#[cfg(windows)]
enum WindowsEvent {
    C(tokio::signal::windows::CtrlC),
    Break(tokio::signal::windows::CtrlBreak),
    Close(tokio::signal::windows::CtrlClose),
}

impl Watch {
    /// Starts listening for each of `what`; one the system never sends (SIGQUIT and SIGCHLD
    /// on Windows) is simply never heard. Call within a tokio runtime.
    pub fn new(what: &[Heard]) -> std::io::Result<Watch> {
        let mut streams = Vec::new();
        for heard in what {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{signal, SignalKind};
                let kind = match heard {
                    Heard::Terminate => SignalKind::terminate(),
                    Heard::Hangup => SignalKind::hangup(),
                    Heard::Interrupt => SignalKind::interrupt(),
                    Heard::Quit => SignalKind::quit(),
                    Heard::ChildEnded => SignalKind::child(),
                };
                streams.push((*heard, signal(kind)?));
            }
            #[cfg(windows)]
            {
                use tokio::signal::windows as w;
                let event = match heard {
                    Heard::Terminate => WindowsEvent::Break(w::ctrl_break()?),
                    Heard::Hangup => WindowsEvent::Close(w::ctrl_close()?),
                    Heard::Interrupt => WindowsEvent::C(w::ctrl_c()?),
                    Heard::Quit | Heard::ChildEnded => continue,
                };
                streams.push((*heard, event));
            }
        }
        Ok(Watch { streams })
    }

    /// The next thing heard (waits forever if nothing listened for comes). Cancel safe.
    pub async fn next(&mut self) -> Heard {
        std::future::poll_fn(|cx| {
            for (heard, stream) in &mut self.streams {
                #[cfg(unix)]
                let polled = stream.poll_recv(cx);
                #[cfg(windows)]
                let polled = match stream {
                    WindowsEvent::C(s) => s.poll_recv(cx),
                    WindowsEvent::Break(s) => s.poll_recv(cx),
                    WindowsEvent::Close(s) => s.poll_recv(cx),
                };
                // `None` is a stream whose runtime is gone: nothing more comes from it.
                if let std::task::Poll::Ready(Some(())) = polled {
                    return std::task::Poll::Ready(*heard);
                }
            }
            std::task::Poll::Pending
        })
        .await
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

    #[test]
    fn the_numbers_an_exit_code_is_read_in() {
        assert_eq!(number("SIGHUP"), Some(1));
        assert_eq!(number("SIGINT"), Some(2));
        assert_eq!(number("SIGKILL"), Some(9));
        assert_eq!(number("SIGTERM"), Some(15));
        assert_eq!(number("SIGNOPE"), None);
        for heard in [
            Heard::Terminate,
            Heard::Hangup,
            Heard::Interrupt,
            Heard::Quit,
        ] {
            assert!(number(heard.name()).is_some(), "{heard:?}");
        }
    }

    #[tokio::test]
    async fn a_watch_of_everything_is_made_on_every_system_and_hears_nothing_unsent() {
        let mut watch = Watch::new(&[
            Heard::Terminate,
            Heard::Hangup,
            Heard::Interrupt,
            Heard::Quit,
        ])
        .unwrap();
        use std::future::Future;
        let mut next = std::pin::pin!(watch.next());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(next.as_mut().poll(&mut cx).is_pending());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_signal_listened_for_is_heard_not_obeyed() {
        let mut watch = Watch::new(&[Heard::Terminate, Heard::Hangup]).unwrap();
        // Without the watch, SIGHUP would end this test's process.
        send(std::process::id(), "SIGHUP").unwrap();
        assert_eq!(watch.next().await, Heard::Hangup);
        let mut children = Watch::new(&[Heard::ChildEnded]).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        assert_eq!(children.next().await, Heard::ChildEnded);
        child.wait().unwrap();
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
