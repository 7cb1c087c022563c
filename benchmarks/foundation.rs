//! Foundation benchmark: binky (this repo) against binky 0.1.2 (the Python reference), on the
//! same `binky.toml`, in the same run, reporting ratios (binky / 0.1.2).
//!
//! Measured:
//! 1. `binky up` overhead for a 2-service world (web depends_on api): median wall time of
//!    `binky up W` over fresh worlds on a warm daemon, minus the median time the same two
//!    commands take to start directly, one after the other, until each accepts TCP.
//! 2. `binky status` latency (whole command, median) with the load worlds up.
//! 3. daemon RSS (VmRSS of the daemon pid only) and idle CPU (utime+stime ticks over a window)
//!    with the load worlds up.
//!
//! binky 0.1.2 caps running worlds at `max(2, min(RAM_GB // 2, cpu_count))` (admission.py) and
//! nothing (settings.json, env) raises it, so it runs `min(--worlds, cap)` worlds; binky is
//! measured at that same count too (the like-for-like ratio) and at `--worlds`.
//!
//! Run: `cargo bench --bench foundation [-- --worlds N --runs N --json PATH]`.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use binky_testkit::args::{exit_on_failure, or_exit, Flags};
use binky_testkit::procs::{alive, loadavg, machine_tools};
use binky_testkit::run::{capture, Run};
use binky_testkit::stats::{median, ms, ratio, ratio_value, summary};
use binky_testkit::stop::{check_stop, install_signal_handlers};
use binky_testkit::table::{fmt_ms, verdict, Table};
use binky_testkit::tool::{binky012_or_exit, daemon_pid_in, project_toml, Kind};
use binky_testkit::{net::free_port, Res};

const INSTALL_HINT: &str = "binky 0.1.2 (the Python reference) is not installed.\n\
Install it into a venv and point the benchmark at it:\n\n\
    python3 -m venv .venv-ref && .venv-ref/bin/pip install binky==0.1.2\n\
    BINKY012=$PWD/.venv-ref/bin/binky cargo bench --bench foundation\n\n\
(the benchmark also looks for /work/ref/venv/bin/binky and for `binky012` on PATH)";

/// The tiny TCP service both tools run: binds the primary port, accepts and closes forever.
const SERVICE_PY: &str = "import socket as S;s=S.socket();\
s.setsockopt(S.SOL_SOCKET,S.SO_REUSEADDR,1);s.bind(('127.0.0.1',PORT));s.listen(64);\
[c.close() for c,_ in iter(s.accept,None)]";

// ---------------------------------------------------------------------------------------------
// Interrupts: a flag, so that Ctrl-C unwinds through the teardown guards.

/// Sleep in small steps so an interrupt is noticed.
fn sleep_checked(d: Duration) -> Res<()> {
    let until = Instant::now() + d;
    while Instant::now() < until {
        check_stop()?;
        thread::sleep((until - Instant::now()).min(Duration::from_millis(100)));
    }
    check_stop()
}

// ---------------------------------------------------------------------------------------------
// Arguments.

struct Args {
    worlds: usize,
    runs: usize,
    status_runs: usize,
    idle_secs: u64,
    settle_secs: u64,
    json: Option<PathBuf>,
}

const USAGE: &str = "usage: cargo bench --bench foundation -- [--worlds N] [--runs N] \
[--status-runs N] [--idle-secs N] [--settle-secs N] [--json PATH]\n\
  --worlds N       worlds (x 2 services) up for status/RSS/CPU (default 20)\n\
  --runs N         fresh worlds for the `up` median (default 10)\n\
  --status-runs N  `status` runs for its median (default 20)\n\
  --idle-secs N    idle CPU window in seconds (default 30: one period of binky's resync)\n\
  --settle-secs N  wait after the last `up` before the idle window (default 15)\n\
  --json PATH      also write the results as JSON";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        worlds: 20,
        runs: 10,
        status_runs: 20,
        idle_secs: 30,
        settle_secs: 15,
        json: None,
    };
    a.json = Flags::from_env(USAGE).each(|f, flag| {
        match flag {
            "--worlds" => a.worlds = f.positive("--worlds", false)?,
            "--runs" => a.runs = f.positive("--runs", false)?,
            "--status-runs" => a.status_runs = f.positive("--status-runs", false)?,
            "--idle-secs" => a.idle_secs = f.positive("--idle-secs", false)? as u64,
            "--settle-secs" => a.settle_secs = f.positive("--settle-secs", false)? as u64,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// Running commands with a timeout, timing the whole command precisely.

// ---------------------------------------------------------------------------------------------
// /proc helpers.

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime + stime of one process, in clock ticks.
fn cpu_ticks(pid: u32) -> Res<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the `(comm)`, which may contain spaces: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').ok_or("bad /proc stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Ok(num(11).ok_or("bad utime")? + num(12).ok_or("bad stime")?)
}

/// CPU time of all live threads of one process, in nanoseconds (`/proc/PID/task/*/schedstat`):
/// finer than clock ticks, to tell a near-idle daemon from a fully idle one.
fn cpu_ns(pid: u32) -> u64 {
    binky_testkit::procs::schedstat_ns(pid)
}

/// A `VmXXX:` line of /proc/PID/status, in bytes.
fn proc_status_kib(pid: u32, key: &str) -> Res<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| format!("no {key} in /proc/{pid}/status"))
}

// ---------------------------------------------------------------------------------------------
// Statistics.

// ---------------------------------------------------------------------------------------------
// The two tools.

/// A tool with its repo, and its daemon once started.
struct Tool {
    base: binky_testkit::tool::Tool,
    repo: PathBuf,
    daemon_pid: Option<u32>,
}

binky_testkit::deref_to!(Tool, base: binky_testkit::tool::Tool);

fn binky_toml(python: &str, lo: u16, hi: u16) -> String {
    let py = SERVICE_PY.replace("PORT", "${self.port}");
    let project = project_toml("bench", lo, hi);
    format!(
        r#"{project}[services.api]
cmd = "{python} -c \"{py}\""
ports = ["http"]

[services.web]
cmd = "{python} -c \"{py}\""
ports = ["http"]
depends_on = ["api"]
"#
    )
}

impl Tool {
    fn new(kind: Kind, bin: PathBuf, python: &str) -> Res<Tool> {
        let (prefix, lo, hi) = match kind {
            Kind::Rust => ("binky-bench-rs-", 21000, 21999),
            Kind::Py => ("binky-bench-py-", 22000, 22999),
        };
        let mut base = binky_testkit::tool::Tool::new(kind, bin, prefix, Vec::new())?;
        let repo = base.root.join("repo");
        base.daemon_dir = repo.clone();
        fs::create_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
        fs::write(repo.join("binky.toml"), binky_toml(python, lo, hi))
            .map_err(|e| format!("binky.toml: {e}"))?;
        binky_testkit::git::bench_repo(&repo, "binky.toml", &base.home, &base.root)?;
        Ok(Tool {
            base,
            repo,
            daemon_pid: None,
        })
    }

    fn run_ok(&self, args: &[&str], timeout: Duration) -> Res<Run> {
        self.base.run_ok(&self.repo, args, timeout)
    }

    fn start_daemon(&mut self) -> Res<u32> {
        self.run_ok(&["daemon", "start"], Duration::from_secs(60))?;
        let r = self.run_ok(&["daemon", "status"], Duration::from_secs(30))?;
        let text = format!("{}{}", r.stdout, r.stderr);
        let pid = daemon_pid_in(&text)
            .ok_or_else(|| format!("{}: no pid in `daemon status`: {text}", self.label))?;
        if !alive(pid) {
            return Err(format!("{}: daemon pid {pid} is not alive", self.label));
        }
        self.daemon_pid = Some(pid);
        Ok(pid)
    }

    fn daemon(&self) -> Res<u32> {
        let pid = self.daemon_pid.ok_or("daemon not started")?;
        if alive(pid) {
            Ok(pid)
        } else {
            Err(format!("{}: daemon pid {pid} died", self.label))
        }
    }

    /// `binky up NAME`, timed; the world is ready when it returns 0.
    fn up(&mut self, name: &str) -> Res<Duration> {
        check_stop()?;
        // Recorded before running: a failed or killed `up` may still leave the world behind.
        self.base.live.push((self.repo.clone(), name.to_owned()));
        let args: &[&str] = match self.kind {
            Kind::Rust => &["up", name, "-q"],
            Kind::Py => &["up", name],
        };
        Ok(self.run_ok(args, Duration::from_secs(150))?.elapsed)
    }

    /// `binky remove NAME --force`, timed.
    fn remove(&mut self, name: &str) -> Res<Duration> {
        let r = self.run_ok(&["remove", name, "--force"], Duration::from_secs(60))?;
        self.base.live.retain(|(_, w)| w != name);
        Ok(r.elapsed)
    }

    fn status(&self) -> Res<Run> {
        self.run_ok(&["status"], Duration::from_secs(30))
    }

    /// How many worlds the tool reports with all their services running.
    fn running_worlds(&self) -> Res<usize> {
        match self.kind {
            Kind::Rust => {
                let r = self.run_ok(&["status", "--json"], Duration::from_secs(30))?;
                let v: Value = serde_json::from_str(&r.stdout)
                    .map_err(|e| format!("binky status --json: {e}"))?;
                Ok(v["worlds"]
                    .as_array()
                    .map(|ws| {
                        ws.iter()
                            .filter(|w| {
                                w["services"].as_array().is_some_and(|ss| {
                                    !ss.is_empty() && ss.iter().all(|s| s["state"] == "running")
                                })
                            })
                            .count()
                    })
                    .unwrap_or(0))
            }
            Kind::Py => {
                // `[unhealthy]` also means "processes alive" in 0.1.2 (its health flag can lag).
                let r = self.status()?;
                Ok(r.stdout
                    .lines()
                    .filter(|l| l.contains("[running") || l.contains("[unhealthy"))
                    .count())
            }
        }
    }

    /// binky 0.1.2's admission capacity, from `binky metrics`.
    fn py_capacity(&self) -> Res<usize> {
        let r = self.run_ok(&["metrics"], Duration::from_secs(30))?;
        let v: Value =
            serde_json::from_str(&r.stdout).map_err(|e| format!("binky metrics: {e}"))?;
        v["admission"]["capacity"]
            .as_u64()
            .map(|c| c as usize)
            .ok_or_else(|| format!("no admission.capacity in `binky metrics`: {}", r.stdout))
    }
}

// ---------------------------------------------------------------------------------------------
// The services' own start time, without binky.

/// Kills the process groups of directly started services, even on error.
struct Direct(Vec<Child>);

impl Drop for Direct {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
            let _ = c.wait();
        }
    }
}

/// Start api, wait until it accepts TCP, then web, the way both tools do with depends_on;
/// returns the time from the first spawn to web accepting.
fn direct_start(python: &str) -> Res<Duration> {
    let ports = [free_port(), free_port()];
    let mut kids = Direct(Vec::new());
    let start = Instant::now();
    for port in ports {
        let script = SERVICE_PY.replace("PORT", &port.to_string());
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(format!("{python} -c \"{script}\""))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        kids.0
            .push(c.spawn().map_err(|e| format!("spawn service: {e}"))?);
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                break;
            }
            if let Some(st) = kids.0.last_mut().and_then(|k| k.try_wait().ok().flatten()) {
                return Err(format!("the service exited before listening: {st}"));
            }
            if Instant::now() > deadline {
                return Err(format!("the service did not listen on {port} within 10 s"));
            }
            check_stop()?;
            thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(start.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Load measurements.

/// One daemon over one idle window.
#[derive(Clone, Copy)]
struct Idle {
    /// utime + stime ticks over the window, as % of one core (10 ms resolution).
    cpu_pct: f64,
    /// The same from per-thread schedstat (ns resolution).
    cpu_pct_fine: f64,
    rss_bytes: u64,
    hwm_bytes: u64,
    threads: usize,
}

struct Load {
    worlds: usize,
    running: usize,
    status_ms: Vec<f64>,
    idle: Idle,
    up_ms: Vec<f64>,
}

impl Load {
    fn json(&self) -> Value {
        json!({
            "worlds": self.worlds,
            "worlds_running": self.running,
            "services_running": self.running * 2,
            "status_ms": summary(&self.status_ms),
            "daemon_rss_bytes": self.idle.rss_bytes,
            "daemon_rss_mib": self.idle.rss_bytes as f64 / 1048576.0,
            "daemon_vmhwm_bytes": self.idle.hwm_bytes,
            "daemon_threads": self.idle.threads,
            "daemon_idle_cpu_pct_of_one_core": self.idle.cpu_pct,
            "daemon_idle_cpu_pct_of_one_core_schedstat": self.idle.cpu_pct_fine,
            "up_ms_while_loading": summary(&self.up_ms),
        })
    }
}

/// Bring `tool` up to `target` load worlds (`s00`, `s01`, …), timing each `up`.
fn load_to(tool: &mut Tool, have: &mut usize, target: usize, ups: &mut Vec<f64>) -> Res<()> {
    while *have < target {
        let name = format!("s{:02}", *have);
        ups.push(ms(tool.up(&name)?));
        *have += 1;
    }
    Ok(())
}

fn measure_status(tools: &[&Tool], runs: usize) -> Res<Vec<Vec<f64>>> {
    let mut out = vec![Vec::new(); tools.len()];
    for i in 0..runs {
        // Alternate the order so neither tool always runs right after the other.
        for k in 0..tools.len() {
            let j = if i % 2 == 0 { k } else { tools.len() - 1 - k };
            out[j].push(ms(tools[j].status()?.elapsed));
        }
    }
    Ok(out)
}

/// Idle CPU (% of one core) of each daemon over the same window; RSS at its end.
fn measure_idle(tools: &[&Tool], settle: u64, secs: u64) -> Res<Vec<Idle>> {
    // Let the ups settle first: one-off work after a start (binky marks a service stable 10 s
    // after it started, 0.1.2 runs its first health checks) is not idle cost.
    sleep_checked(Duration::from_secs(settle))?;
    let pids: Vec<u32> = tools.iter().map(|t| t.daemon()).collect::<Res<_>>()?;
    let before: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect::<Res<_>>()?;
    let before_ns: Vec<u64> = pids.iter().map(|p| cpu_ns(*p)).collect();
    let t0 = Instant::now();
    sleep_checked(Duration::from_secs(secs))?;
    let after: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect::<Res<_>>()?;
    let after_ns: Vec<u64> = pids.iter().map(|p| cpu_ns(*p)).collect();
    let wall = t0.elapsed().as_secs_f64();
    let tck = clk_tck();
    let mut out = Vec::new();
    for (i, pid) in pids.iter().enumerate() {
        let threads = fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.count())
            .unwrap_or(0);
        out.push(Idle {
            cpu_pct: after[i].saturating_sub(before[i]) as f64 / tck / wall * 100.0,
            cpu_pct_fine: after_ns[i].saturating_sub(before_ns[i]) as f64 / 1e9 / wall * 100.0,
            rss_bytes: proc_status_kib(*pid, "VmRSS:")?,
            hwm_bytes: proc_status_kib(*pid, "VmHWM:").unwrap_or(0),
            threads,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reporting.

fn fmt_mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1048576.0)
}

/// Tick-based % of one core, then the schedstat-based figure in brackets.
fn fmt_cpu(i: &Idle) -> String {
    format!("{:.2} % [{:.3}]", i.cpu_pct, i.cpu_pct_fine)
}

// ---------------------------------------------------------------------------------------------

fn machine(python: &str) -> Value {
    machine_tools(python, json!({ "python_path": python }))
}

fn main() {
    install_signal_handlers();
    let args = or_exit(parse_args());
    let ref_bin = binky012_or_exit(INSTALL_HINT, |_| true);
    exit_on_failure(
        "foundation",
        bench(&args, PathBuf::from(env!("CARGO_BIN_EXE_binky")), ref_bin),
    );
}

fn bench(args: &Args, rs_bin: PathBuf, py_bin: PathBuf) -> Res<()> {
    // The real interpreter, not a pyenv shim: its start time must be the same everywhere.
    let python = capture("python3", &["-c", "import sys; print(sys.executable)"])
        .ok_or("python3 is needed for the benchmark's services")?;
    let machine = machine(&python);
    eprintln!("machine: {machine}");

    let mut rs = Tool::new(Kind::Rust, rs_bin, &python)?;
    let mut py = Tool::new(Kind::Py, py_bin, &python)?;
    let versions = binky_testkit::tool::versions(&rs.base, &py.base);

    // Warm daemons, one warm-up world each, and a warm-up direct start.
    let rs_pid = rs.start_daemon()?;
    let py_pid = py.start_daemon()?;
    eprintln!("daemons: binky pid {rs_pid}, binky 0.1.2 pid {py_pid}");
    for t in [&mut rs, &mut py] {
        let d = t.up("warm")?;
        eprintln!("warm-up world on {}: up {:.0} ms", t.label, ms(d));
        t.remove("warm")?;
    }
    direct_start(&python)?;

    // 1. up overhead, interleaved so drift hits both tools and the direct start alike.
    let (mut direct, mut up_rs, mut up_py) = (Vec::new(), Vec::new(), Vec::new());
    let (mut rm_rs, mut rm_py) = (Vec::new(), Vec::new());
    for i in 0..args.runs {
        let name = format!("u{i:02}");
        direct.push(ms(direct_start(&python)?));
        let order: [&mut Tool; 2] = if i % 2 == 0 {
            [&mut rs, &mut py]
        } else {
            [&mut py, &mut rs]
        };
        for t in order {
            let d = ms(t.up(&name)?);
            let rm = ms(t.remove(&name)?);
            match t.kind {
                Kind::Rust => {
                    up_rs.push(d);
                    rm_rs.push(rm);
                }
                Kind::Py => {
                    up_py.push(d);
                    rm_py.push(rm);
                }
            }
        }
        eprintln!(
            "up run {}/{}: direct {:.0} ms, binky {:.0} ms, 0.1.2 {:.0} ms",
            i + 1,
            args.runs,
            direct.last().copied().unwrap_or(f64::NAN),
            up_rs.last().copied().unwrap_or(f64::NAN),
            up_py.last().copied().unwrap_or(f64::NAN)
        );
    }
    let start_med = median(&direct);
    let over_rs = median(&up_rs) - start_med;
    let over_py = median(&up_py) - start_med;
    // Each up ran right next to its own direct start: the median of those paired differences
    // is steadier on a noisy machine than the difference of the two medians.
    let paired =
        |ups: &[f64]| -> Vec<f64> { ups.iter().zip(&direct).map(|(u, d)| u - d).collect() };
    let (pair_rs, pair_py) = (paired(&up_rs), paired(&up_py));

    // 2 + 3. Load: both tools at 0.1.2's cap (like for like), then binky alone at --worlds.
    let cap = py.py_capacity()?;
    let equal = args.worlds.min(cap);
    eprintln!(
        "binky 0.1.2 admission capacity: {cap} running worlds (not configurable); \
         like-for-like load = {equal} worlds"
    );
    let (mut have_rs, mut have_py) = (0usize, 0usize);
    let (mut ups_rs, mut ups_py) = (Vec::new(), Vec::new());
    load_to(&mut rs, &mut have_rs, equal, &mut ups_rs)?;
    load_to(&mut py, &mut have_py, equal, &mut ups_py)?;
    let running_rs = rs.running_worlds()?;
    let running_py = py.running_worlds()?;
    let st = measure_status(&[&rs, &py], args.status_runs)?;
    let idle = measure_idle(&[&rs, &py], args.settle_secs, args.idle_secs)?;
    let eq_rs = Load {
        worlds: equal,
        running: running_rs,
        status_ms: st[0].clone(),
        idle: idle[0],
        up_ms: ups_rs.clone(),
    };
    let eq_py = Load {
        worlds: equal,
        running: running_py,
        status_ms: st[1].clone(),
        idle: idle[1],
        up_ms: ups_py,
    };
    eprintln!(
        "load {equal}: status binky {:.1} ms / 0.1.2 {:.1} ms; RSS {} / {}; idle CPU {} / {}",
        median(&eq_rs.status_ms),
        median(&eq_py.status_ms),
        fmt_mib(eq_rs.idle.rss_bytes),
        fmt_mib(eq_py.idle.rss_bytes),
        fmt_cpu(&eq_rs.idle),
        fmt_cpu(&eq_py.idle)
    );

    let full_rs = if args.worlds > equal {
        load_to(&mut rs, &mut have_rs, args.worlds, &mut ups_rs)?;
        let running = rs.running_worlds()?;
        let st = measure_status(&[&rs], args.status_runs)?;
        let idle = measure_idle(&[&rs], args.settle_secs, args.idle_secs)?;
        Some(Load {
            worlds: args.worlds,
            running,
            status_ms: st[0].clone(),
            idle: idle[0],
            up_ms: ups_rs,
        })
    } else {
        None
    };
    let full = full_rs.as_ref().unwrap_or(&eq_rs);
    let daemon_binary_rs = rs.bin.clone();

    // Teardown before reporting, so leftovers are part of the report.
    rs.base.teardown();
    py.base.teardown();

    // ------------------------------------------------------------------ report
    let n = args.worlds;
    let mut t = Table::new(&[
        "metric",
        "binky",
        "binky 0.1.2",
        "ratio",
        "target",
        "binky meets",
    ]);
    // Two times, binky's and 0.1.2's, with their ratio, a target and whether binky meets it.
    let ms_row = |t: &mut Table, label: &str, a: f64, b: f64, target: &str, meets: &str| {
        t.row(&[label, &fmt_ms(a), &fmt_ms(b), &ratio(a, b), target, meets]);
    };
    let r = args.runs;
    ms_row(
        &mut t,
        &format!("up wall time, 2-service world (median of {r})"),
        median(&up_rs),
        median(&up_py),
        "",
        "",
    );
    t.row(&[
        &format!("  services' own start, direct (median of {r})"),
        &fmt_ms(start_med),
        &fmt_ms(start_med),
        "",
        "",
        "",
    ]);
    ms_row(
        &mut t,
        "  up overhead, median of paired (up_i - start_i)",
        median(&pair_rs),
        median(&pair_py),
        "",
        "",
    );
    ms_row(
        &mut t,
        "up overhead (median wall - median own start)",
        over_rs,
        over_py,
        "<= 100 ms",
        verdict(over_rs <= 100.0),
    );
    let sr = args.status_runs;
    let eq_label = |what: &str| format!("{what}, {equal} worlds x 2 svc");
    ms_row(
        &mut t,
        &eq_label(&format!("status latency (median of {sr})")),
        median(&eq_rs.status_ms),
        median(&eq_py.status_ms),
        "<= 20 ms",
        verdict(median(&eq_rs.status_ms) <= 20.0),
    );
    t.row(&[
        &eq_label("daemon RSS"),
        &fmt_mib(eq_rs.idle.rss_bytes),
        &fmt_mib(eq_py.idle.rss_bytes),
        &ratio(eq_rs.idle.rss_bytes as f64, eq_py.idle.rss_bytes as f64),
        "<= 20 MiB",
        verdict(eq_rs.idle.rss_bytes <= 20 * 1048576),
    ]);
    t.row(&[
        &eq_label(&format!("daemon idle CPU ({} s)", args.idle_secs)),
        &fmt_cpu(&eq_rs.idle),
        &fmt_cpu(&eq_py.idle),
        &ratio(eq_rs.idle.cpu_pct_fine, eq_py.idle.cpu_pct_fine),
        "<= 1 % core",
        verdict(eq_rs.idle.cpu_pct <= 1.0),
    ]);
    if let Some(f) = &full_rs {
        let capped = format!("({equal}w cap) ");
        let full_label = |what: &str| format!("{what}, {n} worlds x 2 svc");
        t.row(&[
            &full_label(&format!("status latency (median of {sr})")),
            &fmt_ms(median(&f.status_ms)),
            &format!("{capped}{}", fmt_ms(median(&eq_py.status_ms))),
            &format!("{}*", ratio(median(&f.status_ms), median(&eq_py.status_ms))),
            "<= 20 ms",
            verdict(median(&f.status_ms) <= 20.0),
        ]);
        t.row(&[
            &full_label("daemon RSS"),
            &fmt_mib(f.idle.rss_bytes),
            &format!("{capped}{}", fmt_mib(eq_py.idle.rss_bytes)),
            &format!(
                "{}*",
                ratio(f.idle.rss_bytes as f64, eq_py.idle.rss_bytes as f64)
            ),
            "<= 20 MiB",
            verdict(f.idle.rss_bytes <= 20 * 1048576),
        ]);
        t.row(&[
            &full_label(&format!("daemon idle CPU ({} s)", args.idle_secs)),
            &fmt_cpu(&f.idle),
            &format!("{capped}{}", fmt_cpu(&eq_py.idle)),
            &format!("{}*", ratio(f.idle.cpu_pct_fine, eq_py.idle.cpu_pct_fine)),
            "<= 1 % core",
            verdict(f.idle.cpu_pct <= 1.0),
        ]);
    }
    println!();
    println!("{}", t.render());
    if full_rs.is_some() {
        println!(
            "* binky 0.1.2 cannot run more than {cap} worlds at once on this machine \
             (max(2, min(RAM_GB // 2, cpu_count)); no setting or env var raises it), so its \
             figure is at {equal} worlds while binky's is at {n}."
        );
    }
    println!(
        "idle CPU: /proc/PID/stat utime+stime ticks over the window as % of one core \
         [in brackets: the same from /proc/PID/task/*/schedstat, ns resolution; ratios use it]"
    );
    println!(
        "daemon threads: binky {} ({} worlds), binky 0.1.2 {} ({equal} worlds)",
        full.idle.threads, full.worlds, eq_py.idle.threads
    );
    println!(
        "worlds running when measured: binky {}/{} (and {}/{equal}), binky 0.1.2 {}/{equal}",
        full.running, full.worlds, eq_rs.running, eq_py.running
    );
    println!(
        "binky `up` while loading worlds 1..{}: median {} (max {})",
        full.worlds,
        fmt_ms(median(&full.up_ms)),
        fmt_ms(full.up_ms.iter().copied().fold(f64::NAN, f64::max))
    );
    let lo_hi = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{} .. {}", fmt_ms(lo), fmt_ms(hi))
    };
    println!(
        "up wall range: binky {}, 0.1.2 {}; direct start range {}",
        lo_hi(&up_rs),
        lo_hi(&up_py),
        lo_hi(&direct)
    );
    println!("load average at the end: {}", loadavg());
    println!(
        "remove --force (median): binky {}, 0.1.2 {}",
        fmt_ms(median(&rm_rs)),
        fmt_ms(median(&rm_py))
    );
    for tool in [&rs, &py] {
        if !tool.leftovers.is_empty() {
            println!(
                "{}: {} process(es) still alive after remove --force + daemon stop (killed)",
                tool.label,
                tool.leftovers.len()
            );
        }
    }

    if let Some(path) = &args.json {
        let targets = json!({
            "up_overhead_ms": 100, "status_ms": 20, "daemon_rss_mib": 20, "idle_cpu_pct": 1
        });
        let report = json!({
            "settings": {
                "worlds": n, "runs": args.runs, "status_runs": args.status_runs,
                "idle_secs": args.idle_secs, "settle_secs": args.settle_secs,
                "services_per_world": 2,
                "service": format!("{python} -c \"{}\"", SERVICE_PY),
                "binky012_proxy_port": 0,
            },
            "targets": targets,
            "binky": {
                "version": versions.0, "binary": daemon_binary_rs,
                "up_wall_ms": summary(&up_rs),
                "up_overhead_ms": over_rs,
                "remove_ms": summary(&rm_rs),
                "up_overhead_paired_ms": summary(&pair_rs),
                "load_equal": eq_rs.json(),
                "load_full": full_rs.as_ref().map(Load::json),
                "leftover_processes": rs.leftovers,
            },
            "binky012": {
                "version": versions.1, "binary": py.bin,
                "admission_capacity": cap,
                "up_wall_ms": summary(&up_py),
                "up_overhead_ms": over_py,
                "remove_ms": summary(&rm_py),
                "up_overhead_paired_ms": summary(&pair_py),
                "load_equal": eq_py.json(),
                "leftover_processes": py.leftovers,
            },
            "direct_start_ms": summary(&direct),
            "ratios_binky_over_012": {
                "up_wall": ratio_value(median(&up_rs), median(&up_py)),
                "up_overhead": ratio_value(over_rs, over_py),
                "up_overhead_paired": ratio_value(median(&pair_rs), median(&pair_py)),
                "status_equal_load": ratio_value(median(&eq_rs.status_ms), median(&eq_py.status_ms)),
                "rss_equal_load": ratio_value(eq_rs.idle.rss_bytes as f64, eq_py.idle.rss_bytes as f64),
                "idle_cpu_equal_load_schedstat": ratio_value(eq_rs.idle.cpu_pct_fine, eq_py.idle.cpu_pct_fine),
                "status_full_vs_012_at_cap": full_rs.as_ref().map(|f| ratio_value(median(&f.status_ms), median(&eq_py.status_ms))),
                "rss_full_vs_012_at_cap": full_rs.as_ref().map(|f| ratio_value(f.idle.rss_bytes as f64, eq_py.idle.rss_bytes as f64)),
                "idle_cpu_full_vs_012_at_cap_schedstat": full_rs.as_ref().map(|f| ratio_value(f.idle.cpu_pct_fine, eq_py.idle.cpu_pct_fine)),
            },
            "meets_targets": {
                "up_overhead": over_rs <= 100.0,
                "status": median(&full.status_ms) <= 20.0,
                "daemon_rss": full.idle.rss_bytes <= 20 * 1048576,
                "idle_cpu": full.idle.cpu_pct <= 1.0,
            },
        });
        binky_testkit::stats::write_results(path, "foundation", &machine, report)?;
    }
    Ok(())
}
