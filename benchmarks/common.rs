//! What the benchmarks share (each bench is its own binary and includes this file with
//! `#[path = "common.rs"] mod common;`): running commands with a timeout, small helpers, the
//! statistics the results report (median, p90, the JSON summary of a series, ratios) and the
//! plain-text tables the benches print.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

pub type Res<T> = Result<T, String>;

// Interrupts: a flag, so that Ctrl-C unwinds through the teardown guards.

pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn install_signal_handlers() {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let _ = unsafe { sigaction(sig, &action) };
    }
}

pub fn check_stop() -> Res<()> {
    if STOP.load(Ordering::SeqCst) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Running commands with a timeout, timing the whole command precisely.

pub struct Run {
    pub status: ExitStatus,
    pub elapsed: Duration,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.status.success()
    }
}

/// Run `cmd` to completion (killed after `timeout`). Output goes to files, not pipes, so a
/// daemon that inherits the descriptors cannot hold the command open.
pub fn run_cmd(mut cmd: Command, scratch: &Path, timeout: Duration) -> Res<Run> {
    let out_path = scratch.join("cmd.stdout");
    let err_path = scratch.join("cmd.stderr");
    let out = fs::File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let err = fs::File::create(&err_path).map_err(|e| format!("{}: {e}", err_path.display()))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let desc = format!("{:?}", cmd.get_program());
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

pub fn capture(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && !text.is_empty() {
        Some(text)
    } else {
        let e = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        (!e.is_empty() && out.status.success()).then_some(e)
    }
}

pub fn random_secret() -> Res<String> {
    use std::io::Read;
    let mut buf = [0u8; 18];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

pub fn free_port() -> Res<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

// ---------------------------------------------------------------------------------------------
// Statistics.

pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let s = sorted(v);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// 90th percentile, nearest rank: the `ceil(0.9 n)`-th smallest (the 18th of 20).
pub fn p90(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let s = sorted(v);
    let rank = ((0.9 * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// A series as the JSON results record it: median, min, max, n and the samples (an empty
/// series gives nulls and `n: 0`).
pub fn summary(v: &[f64]) -> Value {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    json!({ "median": median(v), "min": min, "max": max, "n": v.len(), "samples": v })
}

/// [`summary`] with the 90th percentile as well.
pub fn summary_p90(v: &[f64]) -> Value {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    json!({ "median": median(v), "p90": p90(v), "min": min, "max": max, "n": v.len(), "samples": v })
}

/// `a / b` with three decimals, "n/a" when either is missing or `b` is not positive.
pub fn ratio(a: f64, b: f64) -> String {
    ratio_places(a, b, 3)
}

/// [`ratio`] with `places` decimals.
pub fn ratio_places(a: f64, b: f64, places: usize) -> String {
    if b.is_nan() || a.is_nan() || b <= 0.0 {
        "n/a".into()
    } else {
        format!("{:.places$}", a / b)
    }
}

/// `a / b` for the JSON results: null when either is missing or `b` is not positive.
pub fn ratio_value(a: f64, b: f64) -> Value {
    if b.is_nan() || a.is_nan() || b <= 0.0 {
        Value::Null
    } else {
        json!(a / b)
    }
}

// ---------------------------------------------------------------------------------------------
// Plain-text tables: the first row is the header, underlined with dashes; the first column is
// left-aligned, the others right-aligned, two spaces apart.

pub struct Table {
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|s| (*s).to_owned()).collect()],
        }
    }

    pub fn row(&mut self, cells: &[&str]) {
        self.rows
            .push(cells.iter().map(|c| (*c).to_owned()).collect());
    }

    pub fn row_owned(&mut self, cells: &[String]) {
        self.rows.push(cells.to_vec());
    }

    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut w = vec![0usize; cols];
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut s = String::new();
        for (n, r) in self.rows.iter().enumerate() {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    let _ = write!(line, "{c}{}", " ".repeat(pad));
                } else {
                    let _ = write!(line, "  {}{c}", " ".repeat(pad));
                }
            }
            let _ = writeln!(s, "{}", line.trim_end());
            if n == 0 {
                let total: usize = w.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
                let _ = writeln!(s, "{}", "-".repeat(total));
            }
        }
        s
    }
}
