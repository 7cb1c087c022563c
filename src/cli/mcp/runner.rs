//! Running the binky binary for a tool call: its own process group, its output captured and
//! bounded, stopped when the call is cancelled or runs out of time: SIGTERM to the binky
//! command, which ends what it started (`binky exec`: everything below it, `setsid` or not),
//! then SIGKILL to what is left of its group.
//!
//! A failed command's kind comes back typed ([`Run::failure`]), through the report line of
//! [`crate::failure::report`]: each run is given a token of its own, and the line is taken
//! off its stderr, so the output shown is what a person would have seen.

use std::future::Future;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::failure::{report, Kind};

/// How one command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited by itself with this code (-1: a signal ended it).
    Exited(i32),
    /// The client cancelled the call: the group was killed.
    Cancelled,
    /// It ran out of time: the group was killed.
    TimedOut,
}

/// One finished command.
#[derive(Debug)]
pub struct Run {
    /// How it ended.
    pub ended: Ended,
    /// What it printed on stdout (the newest `max_bytes` when it printed more).
    pub stdout: String,
    /// What it printed on stderr (likewise).
    pub stderr: String,
    /// Whether either stream was cut to its newest `max_bytes`.
    pub truncated: bool,
    /// How long it ran.
    pub elapsed: Duration,
    /// The kind of its failure, as the command reported it (none when it did not fail, or
    /// failed in a way that has none).
    pub failure: Option<Kind>,
}

impl Run {
    /// Its exit code; -1 when it did not exit by itself.
    pub fn code(&self) -> i32 {
        match self.ended {
            Ended::Exited(c) => c,
            _ => -1,
        }
    }

    /// What it printed, for a message: stderr (progress, errors) then stdout, each line's
    /// `binky: ` prefix dropped.
    pub fn output(&self) -> String {
        let mut s = String::new();
        for part in [&self.stderr, &self.stdout] {
            let part = part.trim_end();
            if part.trim().is_empty() {
                continue;
            }
            if !s.is_empty() {
                s.push('\n');
            }
            let lines: Vec<&str> = part
                .lines()
                .map(|l| l.strip_prefix("binky: ").unwrap_or(l))
                .collect();
            s.push_str(&lines.join("\n"));
        }
        s
    }
}

/// Bounds on one command.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Killed after this long (none: only a cancellation ends it early).
    pub timeout: Option<Duration>,
    /// Bytes kept of each stream (the newest).
    pub max_bytes: usize,
}

impl Limits {
    /// A binky command whose answer is JSON: no timeout of its own, 64 MiB per stream (so a
    /// JSON answer is never cut: `binky status --json` is about 4 KB a world).
    pub const JSON: Limits = Limits {
        timeout: None,
        max_bytes: 64 << 20,
    };
}

/// Room kept on stderr beyond the bytes asked for, so that a report line is read whole
/// however little output the caller keeps (the line is taken off before the output is cut).
const REPORT_ROOM: usize = 16 * 1024;

/// How long the command has to end by itself once stopped (SIGTERM) before its group is
/// killed: `binky exec` ends everything its command started in that time.
const GRACE: Duration = Duration::from_secs(3);

/// Stops the process group when dropped, unless disarmed: a tool call whose future is
/// dropped (the server stopping) leaves nothing running.
struct GroupGuard(Option<u32>);

impl GroupGuard {
    /// SIGKILL to the group.
    fn kill(&mut self) {
        if let Some(pg) = self.0.take() {
            let _ = binky_platform::signal::send_group(pg, "SIGKILL");
        }
    }

    /// The group's leader (the binky command) is asked to stop (SIGTERM), so it ends what
    /// it started, wherever that went; whatever of the group is left once it has (or after
    /// [`GRACE`]) is killed.
    async fn stop(&mut self, child: &mut tokio::process::Child) {
        if let Some(pg) = self.0 {
            let _ = binky_platform::signal::send(pg, "SIGTERM");
            let _ = tokio::time::timeout(GRACE, child.wait()).await;
        }
        self.kill();
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // No waiting for the child here: its state is read from /proc, bounded.
        if let Some(pg) = self.0 {
            let _ = binky_platform::signal::send(pg, "SIGTERM");
            let until = Instant::now() + GRACE;
            let ended = || {
                binky_platform::proc::stat(pg).is_none_or(|s| matches!(s.state, 'Z' | 'X' | 'x'))
            };
            while !ended() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.kill();
    }
}

/// Read `r` to its end, keeping the newest `cap` bytes; (bytes, whether some were dropped).
async fn read_tail(mut r: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut cut = false;
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > cap.saturating_mul(2).max(64 * 1024) {
                    let over = buf.len() - cap;
                    buf.drain(..over);
                    cut = true;
                }
            }
        }
    }
    if buf.len() > cap {
        let over = buf.len() - cap;
        buf.drain(..over);
        cut = true;
    }
    (buf, cut)
}

/// Run `exe ARGS` in `dir` (default: here) in a process group of its own; `cancelled`
/// resolving kills the group (and so does dropping this future).
pub async fn run(
    exe: &Path,
    dir: Option<&Path>,
    args: &[String],
    limits: Limits,
    cancelled: impl Future<Output = ()>,
) -> Result<Run, String> {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    binky_platform::process::in_new_group_async(&mut cmd);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    // Without randomness there is no token, and the failure is read by its exit code and
    // text, as from a binky that reports none.
    let token = binky_controllers::random::hex(16).ok();
    if let Some(token) = &token {
        cmd.env(report::VAR, token);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let mut guard = GroupGuard(child.id());
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    let out = tokio::spawn(read_tail(out, limits.max_bytes));
    let err = tokio::spawn(read_tail(err, limits.max_bytes.saturating_add(REPORT_ROOM)));
    let timeout = async {
        match limits.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    let ended = tokio::select! {
        status = child.wait() => {
            Ended::Exited(status.map(|s| s.code().unwrap_or(-1)).unwrap_or(-1))
        }
        _ = cancelled => Ended::Cancelled,
        _ = timeout => Ended::TimedOut,
    };
    if ended == Ended::Cancelled || ended == Ended::TimedOut {
        guard.stop(&mut child).await;
    }
    // Whatever the command left behind in its group goes with it (an exec'd command's
    // background job; the daemon is in a session of its own).
    guard.kill();
    let _ = child.wait().await;
    // A process outside the group holding the pipes must not hold the answer.
    let grace = Duration::from_secs(1);
    let (stdout, cut_out) = tokio::time::timeout(grace, out)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let (stderr, cut_err) = tokio::time::timeout(grace, err)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut stderr = String::from_utf8_lossy(&stderr).into_owned();
    let failure = match (&token, ended) {
        (Some(token), Ended::Exited(code)) if code != 0 => report::take(&mut stderr, token),
        _ => None,
    };
    let (stderr, cut_room) = newest(stderr, limits.max_bytes);
    Ok(Run {
        ended,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr,
        truncated: cut_out || cut_err || cut_room,
        elapsed: started.elapsed(),
        failure,
    })
}

/// The newest `max` bytes of `s` (from a character's start), and whether any were dropped.
fn newest(s: String, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut from = s.len() - max;
    while !s.is_char_boundary(from) {
        from += 1;
    }
    (s[from..].to_owned(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_keeps_the_tail_on_a_character_boundary() {
        assert_eq!(newest("abc".into(), 5), ("abc".into(), false));
        assert_eq!(newest("abcdef".into(), 2), ("ef".into(), true));
        // `é` is two bytes: cut inside it, the tail starts after it.
        assert_eq!(newest("aéb".into(), 2), ("b".into(), true));
    }
}
