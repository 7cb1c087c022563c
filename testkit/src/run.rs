//! Running a command: to completion with a timeout (timed precisely, output captured), or
//! just for what it prints; finding programs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::Res;

/// A finished command.
pub struct Run {
    /// How it exited.
    pub status: ExitStatus,
    /// From spawn to exit.
    pub elapsed: Duration,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Run {
    /// Did it exit 0?
    pub fn ok(&self) -> bool {
        self.status.success()
    }
}

/// Run `cmd` to completion (killed after `timeout`). Output goes to files in `scratch`, not
/// pipes, so a daemon that inherits the descriptors cannot hold the command open.
pub fn run_cmd(mut cmd: Command, scratch: &Path, timeout: Duration) -> Res<Run> {
    let out_path = scratch.join("cmd.stdout");
    let err_path = scratch.join("cmd.stderr");
    let out = fs::File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let err = fs::File::create(&err_path).map_err(|e| format!("{}: {e}", err_path.display()))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let desc = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {desc}: {e}"))?;
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel::<()>();
    let dog = thread::spawn(move || {
        if rx.recv_timeout(timeout) == Err(mpsc::RecvTimeoutError::Timeout) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            true
        } else {
            false
        }
    });
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {desc}: {e}"))?;
    let elapsed = start.elapsed();
    let _ = tx.send(());
    let timed_out = dog.join().unwrap_or(false);
    let stdout = fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    if timed_out {
        return Err(format!(
            "{desc} timed out after {timeout:?}\nstdout: {stdout}\nstderr: {stderr}"
        ));
    }
    Ok(Run {
        status,
        elapsed,
        stdout,
        stderr,
    })
}

/// What `program args` prints (stdout, else stderr: `nginx -v` prints there), trimmed, if it
/// exits 0 and prints something.
pub fn capture(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if text.is_empty() {
        text = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    }
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The last `max` bytes of a file (on a character boundary); empty when unreadable.
pub fn tail(path: &Path, max: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(max);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_owned()
}

/// `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The first of `names` in /usr/sbin, /usr/bin, then on PATH.
pub fn find_program(names: &[&str]) -> Option<PathBuf> {
    let mut dirs = vec![PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    names
        .iter()
        .find_map(|n| dirs.iter().map(|d| d.join(n)).find(|p| p.is_file()))
}

/// A program from `$env`, else `cached` under `$HOME`, else `name` on PATH (how the tests
/// and benchmarks find moto and tansu, which `./scripts/test` installs under
/// `~/.cache/binky-test`).
pub fn find_tool(env: &str, cached: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).map(PathBuf::from) {
        if p.is_file() {
            return Some(p);
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(cached);
        if p.is_file() {
            return Some(p);
        }
    }
    on_path(name)
}

/// The binky 0.1.2 reference the benchmarks compare with: `$BINKY012`, else
/// `/work/ref/venv/bin/binky`, else `binky012` on PATH.
pub fn find_binky012() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BINKY012").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let reference = PathBuf::from("/work/ref/venv/bin/binky");
    if reference.is_file() {
        return Some(reference);
    }
    on_path("binky012")
}
