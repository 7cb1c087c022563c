//! Proxy benchmark: binky's reverse proxy against nginx (Debian's package) configured as a
//! reverse proxy to the same backend, measured with `wrk` (Debian's package), in one run.
//!
//! Three arms, same wrk settings, interleaved and repeated (medians reported):
//! 1. `direct`: wrk -> backend.
//! 2. `nginx`:  wrk -> nginx reverse proxy (keepalive upstream, HTTP/1.1) -> backend.
//! 3. `binky`:  wrk -> binky's proxy (`Host: web.w.bench.localhost`) -> backend.
//!
//! The backend is one nginx instance serving a 1 KiB static file at `/`. binky
//! starts it as the world's `web` service on the port it allocates, and the other two arms use
//! that same instance and port.
//!
//! Each arm is measured twice per round: a throughput run (`wrk -t2 -c50 -d10s --latency`) and a
//! single-connection latency run (`wrk -t1 -c1 -d5s --latency`). "Added latency" is the proxy
//! arm's percentile minus the direct arm's.
//!
//! Run: `cargo bench --bench proxy [-- --duration N --runs N --layout shared|split --json PATH]`.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use binky_testkit::args::Flags;
use binky_testkit::procs::{loadavg, machine_with, reap_sandbox, with_children};
use binky_testkit::run::{capture, run_cmd, Run};
use binky_testkit::stats::{median, summary};
use binky_testkit::stop::{check_stop, install_signal_handlers};
use binky_testkit::{net::free_port, table::Table, Res};

const INSTALL_HINT: &str = "The proxy benchmark needs `nginx` and `wrk` (Debian's packages):\n\n\
    sudo apt-get install -y nginx-light wrk\n\n\
(`nginx` instead of `nginx-light` works too; nginx is looked up on PATH and in /usr/sbin)";

/// The world, service and project names: the proxy routes `web.w.bench.localhost`.
const WORLD: &str = "w";
const HOST: &str = "web.w.bench.localhost";
/// The size of the static file the backend serves at `/`.
const BODY_LEN: usize = 1024;

/// Throughput targets from the issue.
const TARGET_RPS_RATIO: f64 = 0.9;
const TARGET_ADDED_P99_MS: f64 = 1.0;

/// Other processes below this (% of one core) count as a quiet machine.
const QUIET_PCT: f64 = 15.0;
/// A measured run during which other processes used more than this (% of one core) is
/// repeated, while the --quiet-wait budget lasts.
const DISTURBED_PCT: f64 = 25.0;

// ---------------------------------------------------------------------------------------------
// Interrupts: a flag, so that Ctrl-C unwinds through the teardown guards.

// ---------------------------------------------------------------------------------------------
// Arguments.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    /// No pinning: wrk, the proxies and the backend share both cores as the scheduler likes.
    Shared,
    /// wrk on CPU 0; the proxies and the backend on CPU 1.
    Split,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Shared => "shared",
            Layout::Split => "split",
        }
    }
}

struct Args {
    duration: u64,
    latency_duration: u64,
    warmup: u64,
    runs: usize,
    threads: usize,
    connections: usize,
    layout: Layout,
    quiet_wait: u64,
    json: Option<PathBuf>,
}

const USAGE: &str = "usage: cargo bench --bench proxy -- [--duration N] [--latency-duration N] \
[--warmup N] [--runs N] [--threads N] [--connections N] [--layout shared|split] \
[--quiet-wait N] [--json PATH]\n\
\x20 --duration N          seconds of each throughput run (default 10)\n\
\x20 --latency-duration N  seconds of each single-connection latency run (default 5, at most --duration)\n\
\x20 --warmup N            seconds of unrecorded wrk load before every measured run (default 2)\n\
\x20 --runs N              rounds; each round measures every arm once, in rotating order (default 5)\n\
\x20 --threads N           wrk threads for the throughput runs (default 2)\n\
\x20 --connections N       wrk connections for the throughput runs (default 50)\n\
\x20 --layout L            shared: no CPU pinning (default); split: wrk on CPU 0, proxies and\n\
\x20                       backend on CPU 1\n\
\x20 --quiet-wait N        per measurement, up to N s (default 180; 0: off) of waiting until other\n\
\x20                       processes use < 15 % of a core and of repeating runs they disturbed\n\
\x20                       (> 25 % of a core)\n\
\x20 --json PATH           also write the results as JSON";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        duration: 10,
        latency_duration: 5,
        warmup: 2,
        runs: 5,
        threads: 2,
        connections: 50,
        layout: Layout::Shared,
        quiet_wait: 180,
        json: None,
    };
    let mut latency_set = false;
    let mut f = Flags::from_env(USAGE);
    while let Some(flag) = f.next_flag() {
        match flag.as_str() {
            "--duration" => a.duration = f.positive("--duration", false)? as u64,
            "--latency-duration" => {
                a.latency_duration = f.positive("--latency-duration", false)? as u64;
                latency_set = true;
            }
            "--warmup" => a.warmup = f.positive("--warmup", true)? as u64,
            "--runs" => a.runs = f.positive("--runs", false)?,
            "--threads" => a.threads = f.positive("--threads", false)?,
            "--connections" => a.connections = f.positive("--connections", false)?,
            "--layout" => {
                a.layout = match f.value("--layout")?.as_str() {
                    "shared" => Layout::Shared,
                    "split" => Layout::Split,
                    other => return Err(format!("--layout: `{other}` is not shared or split")),
                }
            }
            "--quiet-wait" => a.quiet_wait = f.positive("--quiet-wait", true)? as u64,
            "--json" => a.json = Some(PathBuf::from(f.value("--json")?)),
            other => return Err(f.unknown(other)),
        }
    }
    if !latency_set {
        a.latency_duration = a.latency_duration.min(a.duration);
    }
    if a.connections < a.threads {
        return Err("--connections must be at least --threads".into());
    }
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// Running commands with a timeout.

/// CPU affinity for a command, applied in the child between fork and exec.
fn pin_command(cmd: &mut Command, cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // SAFETY: sched_setaffinity on the calling (child) process is async-signal-safe; the
        // closure allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: nix::libc::cpu_set_t = std::mem::zeroed();
                nix::libc::CPU_SET(cpu, &mut set);
                if nix::libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// `name` on PATH, else in the given extra directories (nginx lives in /usr/sbin, which is not
/// on every user's PATH).
fn find_program(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

// ---------------------------------------------------------------------------------------------
// /proc helpers.

/// CPU time of all threads of the given processes, in nanoseconds (`/proc/PID/task/*/schedstat`).
fn cpu_ns(pids: &[u32]) -> u64 {
    pids.iter()
        .map(|pid| {
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                return 0;
            };
            tasks
                .flatten()
                .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

fn threads_of(pid: u32) -> Vec<u32> {
    fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Pin every thread of `pid` to `cpu`.
fn pin_process(pid: u32, cpu: usize) -> Res<()> {
    for tid in threads_of(pid) {
        // SAFETY: a zeroed cpu_set_t is the empty set; sched_setaffinity only reads it.
        let rc = unsafe {
            let mut set: nix::libc::cpu_set_t = std::mem::zeroed();
            nix::libc::CPU_SET(cpu, &mut set);
            nix::libc::sched_setaffinity(tid as nix::libc::pid_t, std::mem::size_of_val(&set), &set)
        };
        if rc != 0 {
            return Err(format!(
                "cannot pin thread {tid} of pid {pid} to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn cpus_allowed(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

/// CPU time of the waited-for children of this process (wrk), in nanoseconds.
fn children_cpu_ns() -> u64 {
    // SAFETY: getrusage only writes the struct it is given.
    let ru = unsafe {
        let mut ru: nix::libc::rusage = std::mem::zeroed();
        nix::libc::getrusage(nix::libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let tv = |t: nix::libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Busy CPU time of the whole machine (all CPUs), in nanoseconds, from /proc/stat.
fn system_busy_ns() -> u64 {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0;
    };
    let f: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = [0usize, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|i| f.get(*i))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let tck = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1) as u64;
    busy * (1_000_000_000 / tck)
}

/// One `GET /` with `Host: HOST` on a fresh connection: the status line and the whole response.
fn http_get(port: u16) -> Res<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: binky-bench\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write to 127.0.0.1:{port}: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .map_err(|e| format!("read from 127.0.0.1:{port}: {e}"))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The backend's static file: `BODY_LEN` bytes of text.
fn body() -> String {
    let line = "binky proxy benchmark: the backend's static file, 1 KiB.\n";
    line.repeat(BODY_LEN / line.len() + 1)[..BODY_LEN].to_owned()
}

/// Wait until `port` answers `GET /` with 200 and the backend's file. Returns the response's
/// head (the body is checked, not kept).
fn wait_ok(port: u16, what: &str) -> Res<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let want = format!("\r\n\r\n{}", body());
    let mut last = String::new();
    while Instant::now() < deadline {
        check_stop()?;
        match http_get(port) {
            Ok(r) if r.starts_with("HTTP/1.1 200") && r.ends_with(&want) => {
                let head = &r[..r.len() - want.len()];
                return Ok(format!("{head}\r\n\r\n[the {BODY_LEN}-byte file]"));
            }
            Ok(r) => last = r.lines().next().unwrap_or("").to_owned(),
            Err(e) => last = e,
        }
        thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{what} (127.0.0.1:{port}) did not answer 200 with the {BODY_LEN}-byte file within 15 s; \
         last: {last}"
    ))
}

// ---------------------------------------------------------------------------------------------
// nginx configurations.

/// Everything nginx would otherwise put under root-owned paths, inside `prefix`.
fn nginx_main(prefix: &Path, workers: &str) -> String {
    let p = prefix.display();
    format!(
        "worker_processes {workers};\n\
         pid {p}/nginx.pid;\n\
         error_log stderr warn;\n\
         events {{ worker_connections 4096; }}\n"
    )
}

fn nginx_http_common(prefix: &Path) -> String {
    let p = prefix.display();
    format!(
        "  access_log off;\n\
         \x20 client_body_temp_path {p}/tmp_body;\n\
         \x20 proxy_temp_path {p}/tmp_proxy;\n\
         \x20 fastcgi_temp_path {p}/tmp_fastcgi;\n\
         \x20 uwsgi_temp_path {p}/tmp_uwsgi;\n\
         \x20 scgi_temp_path {p}/tmp_scgi;\n\
         \x20 keepalive_timeout 75s;\n\
         \x20 keepalive_requests 1000000;\n"
    )
}

/// The backend: one worker serving a static file of `BODY_LEN` bytes at `/` (`index.html` in
/// `prefix/www`), its descriptor cached. `@PORT@` is filled in by the service's command with the
/// port binky allocated.
fn backend_conf_template(prefix: &Path) -> String {
    format!(
        "{main}http {{\n{common}\
         \x20 open_file_cache max=64 inactive=600s;\n\
         \x20 open_file_cache_valid 600s;\n\
         \x20 server {{\n\
         \x20   listen 127.0.0.1:@PORT@ backlog=4096;\n\
         \x20   root {www};\n\
         \x20   location / {{ default_type text/html; index index.html; }}\n\
         \x20 }}\n\
         }}\n",
        main = nginx_main(prefix, "1"),
        common = nginx_http_common(prefix),
        www = prefix.join("www").display(),
    )
}

/// The reference reverse proxy: keepalive upstream over HTTP/1.1, the same forwarded headers
/// binky sets, one worker per core.
fn nginx_proxy_conf(prefix: &Path, listen: u16, backend: u16) -> String {
    format!(
        "{main}http {{\n{common}\
         \x20 upstream backend {{\n\
         \x20   server 127.0.0.1:{backend};\n\
         \x20   keepalive 64;\n\
         \x20   keepalive_requests 1000000;\n\
         \x20   keepalive_timeout 60s;\n\
         \x20 }}\n\
         \x20 server {{\n\
         \x20   listen 127.0.0.1:{listen} backlog=4096 reuseport;\n\
         \x20   location / {{\n\
         \x20     proxy_pass http://backend;\n\
         \x20     proxy_http_version 1.1;\n\
         \x20     proxy_set_header Connection \"\";\n\
         \x20     proxy_set_header Host $host;\n\
         \x20     proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
         \x20     proxy_set_header X-Forwarded-Proto $scheme;\n\
         \x20     proxy_set_header X-Forwarded-Host $host;\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n",
        main = nginx_main(prefix, "auto"),
        common = nginx_http_common(prefix),
    )
}

// ---------------------------------------------------------------------------------------------
// The sandbox: a git repo with binky.toml, BINKY_HOME, the backend and the nginx proxy.

struct Sandbox {
    bin: PathBuf,
    nginx: PathBuf,
    root: PathBuf,
    repo: PathBuf,
    home: PathBuf,
    binky_home: PathBuf,
    backend_dir: PathBuf,
    proxy_dir: PathBuf,
    world_up: bool,
    daemon_started: bool,
    nginx_proxy: Option<Child>,
    leftovers: Vec<String>,
    torn_down: bool,
    _dir: tempfile::TempDir,
}

impl Sandbox {
    fn new(bin: PathBuf, nginx: PathBuf) -> Res<Sandbox> {
        let dir = tempfile::Builder::new()
            .prefix("binky-bench-proxy-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let root = fs::canonicalize(dir.path()).map_err(|e| format!("tempdir: {e}"))?;
        // The paths go into a shell command and nginx configs unquoted.
        if !root
            .to_string_lossy()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/-_.".contains(c))
        {
            return Err(format!(
                "temp dir {} has characters the configs cannot take; set TMPDIR",
                root.display()
            ));
        }
        let sb = Sandbox {
            bin,
            nginx,
            repo: root.join("repo"),
            home: root.join("home"),
            binky_home: root.join("home/.binky"),
            backend_dir: root.join("backend"),
            proxy_dir: root.join("nginx-proxy"),
            root,
            world_up: false,
            daemon_started: false,
            nginx_proxy: None,
            leftovers: Vec::new(),
            torn_down: false,
            _dir: dir,
        };
        let www = sb.backend_dir.join("www");
        for d in [&sb.repo, &sb.binky_home, &www, &sb.proxy_dir] {
            fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let index = www.join("index.html");
        fs::write(&index, body()).map_err(|e| format!("{}: {e}", index.display()))?;
        let template = sb.backend_dir.join("nginx.conf.in");
        fs::write(&template, backend_conf_template(&sb.backend_dir))
            .map_err(|e| format!("{}: {e}", template.display()))?;
        let conf = sb.backend_dir.join("nginx.conf");
        // binky runs `sh -c CMD`; the command fills in the allocated port and execs nginx in
        // the foreground, so binky supervises the nginx master itself.
        let cmd = format!(
            "sed \"s/@PORT@/${{self.port}}/\" {t} > {c} && exec {n} -p {p} -c {c} -e stderr -g \"daemon off;\"",
            t = template.display(),
            c = conf.display(),
            n = sb.nginx.display(),
            p = sb.backend_dir.display(),
        );
        let toml = format!(
            "[project]\nname = \"bench\"\nport_range = [23000, 23099]\n\n\
             [services.web]\ncmd = '{cmd}'\nurl = \"web\"\n"
        );
        fs::write(sb.repo.join("binky.toml"), toml).map_err(|e| format!("binky.toml: {e}"))?;
        binky_testkit::git::bench_repo(&sb.repo, "binky.toml", &sb.home, &sb.root)?;
        Ok(sb)
    }

    fn binky(&self, args: &[&str], cpu: Option<usize>) -> Res<Run> {
        if !self.torn_down {
            check_stop()?;
        }
        let mut c = Command::new(&self.bin);
        c.args(args)
            .current_dir(&self.repo)
            .env("HOME", &self.home)
            .env("BINKY_HOME", &self.binky_home)
            .env_remove("BINKY_LOG")
            .env_remove("RUST_LOG");
        pin_command(&mut c, cpu);
        let r = run_cmd(c, &self.root, Duration::from_secs(60))?;
        if r.status.success() {
            Ok(r)
        } else {
            Err(format!(
                "`binky {}` exited {}\nstdout: {}\nstderr: {}",
                args.join(" "),
                r.status,
                r.stdout.trim(),
                r.stderr.trim()
            ))
        }
    }

    /// Set the proxy port, start the daemon (on `cpu`, which its services inherit), bring the
    /// world up. Returns (daemon pid, backend port, binky proxy port).
    fn start_binky(&mut self, proxy_port: u16, cpu: Option<usize>) -> Res<(u32, u16, u16)> {
        self.binky(
            &["port", "--proxy", &proxy_port.to_string(), "--https", "0"],
            None,
        )?;
        self.daemon_started = true;
        self.binky(&["daemon", "start"], cpu)?;
        let st = self.binky(&["daemon", "status"], None)?;
        let text = format!("{}{}", st.stdout, st.stderr);
        let pid = text
            .split("pid ")
            .nth(1)
            .and_then(|s| {
                s.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse::<u32>()
                    .ok()
            })
            .ok_or_else(|| format!("no pid in `binky daemon status`: {text}"))?;
        self.world_up = true;
        self.binky(&["up", WORLD, "-q"], None)?;
        let env = self.binky(&["env", WORLD, "--json"], None)?;
        let v: Value = serde_json::from_str(&env.stdout)
            .map_err(|e| format!("binky env --json: {e}: {}", env.stdout))?;
        let backend = v["env"]["WEB_PORT"]
            .as_str()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| format!("no WEB_PORT in `binky env`: {}", env.stdout))?;
        let url = v["env"]["WEB_URL"].as_str().unwrap_or_default();
        let served = url
            .strip_prefix(&format!("http://{HOST}"))
            .map(|rest| rest.trim_start_matches(':').trim_end_matches('/'))
            .map(|p| {
                if p.is_empty() {
                    Ok(80)
                } else {
                    p.parse::<u16>()
                }
            })
            .and_then(Result::ok)
            .ok_or_else(|| format!("WEB_URL `{url}` is not the proxy URL of {HOST}"))?;
        if served != proxy_port {
            eprintln!("note: binky's proxy serves on {served}, not the asked-for {proxy_port}");
        }
        Ok((pid, backend, served))
    }

    fn backend_pids(&self) -> Res<Vec<u32>> {
        let path = self.backend_dir.join("nginx.pid");
        let pid = fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .ok_or_else(|| format!("no backend pid in {}", path.display()))?;
        Ok(with_children(pid))
    }

    /// Start the reference nginx proxy in the foreground (its own process group).
    fn start_nginx_proxy(&mut self, listen: u16, backend: u16, cpu: Option<usize>) -> Res<u32> {
        let conf = self.proxy_dir.join("nginx.conf");
        fs::write(&conf, nginx_proxy_conf(&self.proxy_dir, listen, backend))
            .map_err(|e| format!("{}: {e}", conf.display()))?;
        let log = self.proxy_dir.join("stderr.log");
        let log_file = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut c = Command::new(&self.nginx);
        c.arg("-p")
            .arg(&self.proxy_dir)
            .arg("-c")
            .arg(&conf)
            .args(["-e", "stderr", "-g", "daemon off;"])
            .current_dir(&self.proxy_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .process_group(0);
        pin_command(&mut c, cpu);
        let child = c
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.nginx.display()))?;
        let pid = child.id();
        self.nginx_proxy = Some(child);
        let addr: SocketAddr = ([127, 0, 0, 1], listen).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err() {
            if let Some(st) = self
                .nginx_proxy
                .as_mut()
                .and_then(|k| k.try_wait().ok().flatten())
            {
                return Err(format!(
                    "nginx (proxy) exited {st}: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "nginx (proxy) did not listen on {listen} within 10 s"
                ));
            }
            check_stop()?;
            thread::sleep(Duration::from_millis(10));
        }
        Ok(pid)
    }

    /// Remove the world, stop the daemon and the nginx proxy, kill whatever of the sandbox is
    /// still alive.
    fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        if let Some(mut child) = self.nginx_proxy.take() {
            let pg = Pid::from_raw(child.id() as i32);
            let _ = killpg(pg, Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                thread::sleep(Duration::from_millis(20));
            }
            let _ = killpg(pg, Signal::SIGKILL);
            let _ = child.wait();
        }
        if self.world_up {
            if let Err(e) = self.binky(&["remove", WORLD, "--force"], None) {
                eprintln!("teardown: {e}");
            }
        }
        if self.daemon_started {
            if let Err(e) = self.binky(&["daemon", "stop"], None) {
                eprintln!("teardown: {e}");
            }
        }
        // Give exiting processes a moment before calling them leftovers.
        let left = reap_sandbox(&self.binky_home, &self.root, Duration::from_secs(5));
        self.leftovers.extend(left.iter().cloned());
        if !left.is_empty() {
            eprintln!(
                "teardown: {} process(es) still running after remove + daemon stop; killed:\n  {}",
                left.len(),
                self.leftovers.join("\n  ")
            );
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.teardown();
    }
}

// ---------------------------------------------------------------------------------------------
// wrk.

/// One wrk run, parsed.
#[derive(Clone, Debug, Default)]
struct WrkResult {
    rps: f64,
    requests: u64,
    p50_ms: f64,
    p75_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    avg_ms: f64,
    max_ms: f64,
    socket_errors: String,
    non_2xx: u64,
    /// CPU of the proxy under test over the run, in % of one core (None for `direct`).
    proxy_cpu_pct: Option<f64>,
    /// The proxy's CPU time per request, in microseconds.
    proxy_cpu_us_per_req: Option<f64>,
    backend_cpu_pct: f64,
    wrk_cpu_pct: f64,
    /// CPU used by processes outside the benchmark during the run, in % of one core.
    other_cpu_pct: f64,
    /// Seconds from the start of this measurement (waits and repeats included) to its end.
    quiet_wait_s: f64,
    /// Runs made: more than 1 when other processes disturbed a run and it was repeated.
    attempts: u32,
}

impl WrkResult {
    fn json(&self) -> Value {
        json!({
            "rps": self.rps, "requests": self.requests,
            "p50_ms": self.p50_ms, "p75_ms": self.p75_ms, "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms, "avg_ms": self.avg_ms, "max_ms": self.max_ms,
            "socket_errors": self.socket_errors, "non_2xx": self.non_2xx,
            "proxy_cpu_pct_of_one_core": self.proxy_cpu_pct,
            "proxy_cpu_us_per_request": self.proxy_cpu_us_per_req,
            "backend_cpu_pct_of_one_core": self.backend_cpu_pct,
            "wrk_cpu_pct_of_one_core": self.wrk_cpu_pct,
            "other_processes_cpu_pct_of_one_core": self.other_cpu_pct,
            "measurement_wall_s": self.quiet_wait_s,
            "attempts": self.attempts,
        })
    }
}

/// wrk's time format: `315.00us`, `3.84ms`, `1.02s`, `1.00m`, `1.00h`; in milliseconds.
fn wrk_time_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => v / 1000.0,
        "ms" => v,
        "s" => v * 1000.0,
        "m" => v * 60_000.0,
        "h" => v * 3_600_000.0,
        _ => return None,
    })
}

fn parse_wrk(out: &str) -> Res<WrkResult> {
    let mut r = WrkResult::default();
    let mut have = (false, false, false);
    for line in out.lines().map(str::trim) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["Latency", avg, _stdev, max, ..] => {
                r.avg_ms = wrk_time_ms(avg).unwrap_or(f64::NAN);
                r.max_ms = wrk_time_ms(max).unwrap_or(f64::NAN);
            }
            [pct, t] if pct.ends_with('%') => {
                let v = wrk_time_ms(t).ok_or_else(|| format!("bad wrk percentile `{line}`"))?;
                match *pct {
                    "50%" => {
                        r.p50_ms = v;
                        have.0 = true;
                    }
                    "75%" => r.p75_ms = v,
                    "90%" => r.p90_ms = v,
                    "99%" => {
                        r.p99_ms = v;
                        have.1 = true;
                    }
                    _ => {}
                }
            }
            [n, "requests", "in", ..] => r.requests = n.parse().unwrap_or(0),
            ["Requests/sec:", v] => {
                r.rps = v.parse().map_err(|_| format!("bad wrk line `{line}`"))?;
                have.2 = true;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => r.non_2xx = n.parse().unwrap_or(0),
            _ if line.starts_with("Socket errors:") => {
                r.socket_errors = line["Socket errors:".len()..].trim().to_owned();
            }
            _ => {}
        }
    }
    if have != (true, true, true) {
        return Err(format!("could not parse wrk's output:\n{out}"));
    }
    Ok(r)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Direct,
    Nginx,
    Binky,
}

const ARMS: [Arm; 3] = [Arm::Direct, Arm::Nginx, Arm::Binky];

impl Arm {
    fn key(self) -> &'static str {
        match self {
            Arm::Direct => "direct",
            Arm::Nginx => "nginx",
            Arm::Binky => "binky",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Arm::Direct => "direct (wrk -> backend)",
            Arm::Nginx => "nginx proxy (wrk -> nginx -> backend)",
            Arm::Binky => "binky proxy (wrk -> binky -> backend)",
        }
    }
}

#[derive(Clone, Copy)]
enum Mode {
    /// `-t{threads} -c{connections}`: throughput, and latency under load.
    Load,
    /// `-t1 -c1`: one request at a time; the latency a request pays.
    Single,
}

struct Bench<'a> {
    args: &'a Args,
    wrk: PathBuf,
    scratch: PathBuf,
    ports: [u16; 3],
    /// Processes whose CPU is counted for each arm's proxy, and the backend's.
    proxy_pids: [Vec<u32>; 3],
    backend_pids: Vec<u32>,
    /// Every process of the benchmark (both proxies, the backend, this process): the CPU the
    /// machine spends beyond these (and wrk) is other people's load.
    own_pids: Vec<u32>,
    wrk_cpu: Option<usize>,
}

impl Bench<'_> {
    fn wrk(&self, arm: Arm, mode: Mode, secs: u64) -> Res<WrkResult> {
        check_stop()?;
        let (t, c) = match mode {
            Mode::Load => (self.args.threads, self.args.connections),
            Mode::Single => (1, 1),
        };
        let port = self.ports[arm as usize];
        let mut cmd = Command::new(&self.wrk);
        cmd.args([
            format!("-t{t}"),
            format!("-c{c}"),
            format!("-d{secs}s"),
            "--latency".into(),
            "-H".into(),
            format!("Host: {HOST}"),
            format!("http://127.0.0.1:{port}/"),
        ]);
        pin_command(&mut cmd, self.wrk_cpu);
        let proxy_pids = &self.proxy_pids[arm as usize];
        let (p0, b0, w0, o0, s0) = (
            cpu_ns(proxy_pids),
            cpu_ns(&self.backend_pids),
            children_cpu_ns(),
            cpu_ns(&self.own_pids),
            system_busy_ns(),
        );
        let start = Instant::now();
        let run = run_cmd(cmd, &self.scratch, Duration::from_secs(secs + 60))?;
        let wall_ns = start.elapsed().as_nanos() as f64;
        let (p1, b1, w1, o1, s1) = (
            cpu_ns(proxy_pids),
            cpu_ns(&self.backend_pids),
            children_cpu_ns(),
            cpu_ns(&self.own_pids),
            system_busy_ns(),
        );
        if !run.status.success() {
            return Err(format!(
                "wrk exited {}: {}{}",
                run.status, run.stdout, run.stderr
            ));
        }
        let mut r = parse_wrk(&run.stdout)?;
        if r.non_2xx > 0 {
            return Err(format!(
                "{}: {} non-2xx responses in a wrk run:\n{}",
                arm.key(),
                r.non_2xx,
                run.stdout
            ));
        }
        if !proxy_pids.is_empty() {
            let ns = p1.saturating_sub(p0) as f64;
            r.proxy_cpu_pct = Some(ns / wall_ns * 100.0);
            r.proxy_cpu_us_per_req = Some(ns / 1000.0 / r.requests.max(1) as f64);
        }
        r.backend_cpu_pct = b1.saturating_sub(b0) as f64 / wall_ns * 100.0;
        r.wrk_cpu_pct = w1.saturating_sub(w0) as f64 / wall_ns * 100.0;
        let ours = o1.saturating_sub(o0) + w1.saturating_sub(w0);
        r.other_cpu_pct = s1.saturating_sub(s0).saturating_sub(ours) as f64 / wall_ns * 100.0;
        Ok(r)
    }

    /// CPU used by other processes over about one second, in % of one core.
    fn other_load(&self) -> f64 {
        let (o0, s0) = (cpu_ns(&self.own_pids), system_busy_ns());
        let t0 = Instant::now();
        thread::sleep(Duration::from_millis(1000));
        let wall = t0.elapsed().as_nanos() as f64;
        let busy = system_busy_ns().saturating_sub(s0);
        let ours = cpu_ns(&self.own_pids).saturating_sub(o0);
        busy.saturating_sub(ours) as f64 / wall * 100.0
    }

    /// Wait until the rest of the machine has used less than `QUIET_PCT` % of one core for
    /// two seconds in a row (the cores are shared with other people's builds), giving up after
    /// `budget` seconds. Returns the seconds waited.
    fn wait_quiet(&self, budget: f64) -> Res<f64> {
        let start = Instant::now();
        let (mut quiet, mut said) = (0, false);
        loop {
            check_stop()?;
            let other = self.other_load();
            quiet = if other < QUIET_PCT { quiet + 1 } else { 0 };
            let waited = start.elapsed().as_secs_f64();
            if quiet >= 2 {
                return Ok(waited);
            }
            if waited >= budget {
                eprintln!(
                    "  other processes still use {other:.0} % of a core after {waited:.0} s; \
                     measuring anyway"
                );
                return Ok(waited);
            }
            if !said && quiet == 0 {
                eprintln!("  waiting for other processes to calm down ({other:.0} % of a core)");
                said = true;
            }
        }
    }

    /// A quiet machine, unrecorded load with the same settings, then the measured run; a run
    /// that other processes disturbed (more than `DISTURBED_PCT` % of a core) is repeated
    /// while the --quiet-wait budget lasts.
    fn measure(&self, arm: Arm, mode: Mode, secs: u64) -> Res<WrkResult> {
        let start = Instant::now();
        let budget = self.args.quiet_wait as f64;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let left = budget - start.elapsed().as_secs_f64();
            if budget > 0.0 {
                self.wait_quiet(left.max(0.0))?;
            }
            if self.args.warmup > 0 {
                self.wrk(arm, mode, self.args.warmup)?;
            }
            let mut r = self.wrk(arm, mode, secs)?;
            let spent = start.elapsed().as_secs_f64();
            let disturbed = r.other_cpu_pct > DISTURBED_PCT;
            if disturbed && budget > 0.0 && spent < budget {
                eprintln!(
                    "  {} run disturbed: other processes used {:.0} % of a core; repeating",
                    arm.key(),
                    r.other_cpu_pct
                );
                continue;
            }
            r.attempts = attempts;
            r.quiet_wait_s = spent;
            return Ok(r);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and reporting.

fn fmt_ms(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.abs() < 1.0 {
        format!("{:.0} µs", v * 1000.0)
    } else {
        format!("{v:.2} ms")
    }
}

fn fmt_added(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.abs() < 1.0 {
        format!("{:+.0} µs", v * 1000.0)
    } else {
        format!("{v:+.2} ms")
    }
}

fn fmt_rps(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else {
        format!("{v:.0}")
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

fn machine(nginx: &Path, wrk: &Path) -> Value {
    let nginx = nginx.to_string_lossy();
    let wrk = wrk.to_string_lossy();
    machine_with(json!({
        "nginx": capture(&nginx, &["-v"]).unwrap_or_default(),
        "wrk": capture(&wrk, &["--version"])
            .or_else(|| {
                // wrk --version exits 1 but prints its version first.
                Command::new(&*wrk).arg("--version").output().ok().map(|o| {
                    String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").to_owned()
                })
            })
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or("")
            .to_owned(),
        "loadavg_at_start": loadavg(),
    }))
}

// ---------------------------------------------------------------------------------------------

fn main() {
    install_signal_handlers();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let nginx = find_program("nginx", &["/usr/sbin", "/sbin"]);
    let wrk = find_program("wrk", &[]);
    let (Some(nginx), Some(wrk)) = (nginx, wrk) else {
        eprintln!("{INSTALL_HINT}");
        std::process::exit(1);
    };
    if find_program("git", &[]).is_none() {
        eprintln!("the proxy benchmark needs git (sudo apt-get install -y git)");
        std::process::exit(1);
    }
    if let Err(e) = bench(
        &args,
        PathBuf::from(env!("CARGO_BIN_EXE_binky")),
        nginx,
        wrk,
    ) {
        eprintln!("proxy benchmark failed: {e}");
        std::process::exit(1);
    }
}

/// The commit binky was built from, `+dirty` when src/ or controllers/ have local changes.
fn binky_commit() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let head = capture("git", &["-C", dir, "rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let dirty = Command::new("git")
        .args([
            "-C",
            dir,
            "status",
            "--porcelain",
            "--",
            "src",
            "controllers",
        ])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if dirty {
        format!("{head}+dirty")
    } else {
        head
    }
}

fn bench(args: &Args, binky: PathBuf, nginx: PathBuf, wrk: PathBuf) -> Res<()> {
    let machine = machine(&nginx, &wrk);
    let commit = binky_commit();
    eprintln!("machine: {machine}");
    eprintln!("binky {} at commit {commit}", binky.display());
    let nproc = machine["nproc"].as_u64().unwrap_or(0);
    let (wrk_cpu, server_cpu) = match args.layout {
        Layout::Shared => (None, None),
        Layout::Split if nproc >= 2 => (Some(0), Some(1)),
        Layout::Split => return Err("--layout split needs at least 2 CPUs".into()),
    };

    let mut sb = Sandbox::new(binky.clone(), nginx.clone())?;
    let (daemon, backend_port, binky_port) = sb.start_binky(free_port(), server_cpu)?;
    let mut backend_pids = sb.backend_pids()?;
    let nginx_port = free_port();
    let nginx_master = sb.start_nginx_proxy(nginx_port, backend_port, server_cpu)?;
    // Workers are forked once the master has read its config and bound.
    thread::sleep(Duration::from_millis(200));
    let nginx_pids = with_children(nginx_master);
    if let Some(cpu) = server_cpu {
        // The daemon and its services inherited CPU 1 from `daemon start`; pin explicitly
        // anyway, threads and workers included.
        for pid in std::iter::once(daemon)
            .chain(backend_pids.iter().copied())
            .chain(nginx_pids.iter().copied())
        {
            pin_process(pid, cpu)?;
        }
    }
    let ports = [backend_port, nginx_port, binky_port];
    let mut responses = Vec::new();
    for arm in ARMS {
        let r = wait_ok(ports[arm as usize], arm.label())?;
        responses.push(r);
    }
    backend_pids = sb.backend_pids()?;
    let affinity = json!({
        "binky_daemon": cpus_allowed(daemon),
        "backend": backend_pids.iter().map(|p| cpus_allowed(*p)).collect::<Vec<_>>(),
        "nginx_proxy": nginx_pids.iter().map(|p| cpus_allowed(*p)).collect::<Vec<_>>(),
        "wrk": wrk_cpu.map_or("0-".to_owned() + &(nproc.saturating_sub(1)).to_string(), |c| c.to_string()),
    });
    let daemon_threads = threads_of(daemon).len();
    eprintln!(
        "binky daemon pid {daemon} ({daemon_threads} threads) proxy :{binky_port}; backend nginx \
         :{backend_port} pids {backend_pids:?}; nginx proxy :{nginx_port} pids {nginx_pids:?} \
         ({} workers); layout {} (affinity {affinity})",
        nginx_pids.len().saturating_sub(1),
        args.layout.name()
    );

    let bench = Bench {
        args,
        wrk,
        scratch: sb.root.clone(),
        ports,
        proxy_pids: [Vec::new(), nginx_pids.clone(), vec![daemon]],
        backend_pids: backend_pids.clone(),
        own_pids: nginx_pids
            .iter()
            .chain(backend_pids.iter())
            .copied()
            .chain([daemon, std::process::id()])
            .collect(),
        wrk_cpu,
    };

    // Rounds: each arm once per round for each mode, in rotating order, so that drift on the
    // shared machine hits all three alike.
    let mut load: [Vec<WrkResult>; 3] = Default::default();
    let mut single: [Vec<WrkResult>; 3] = Default::default();
    for round in 0..args.runs {
        for (mode, secs, out) in [
            (Mode::Load, args.duration, &mut load),
            (Mode::Single, args.latency_duration, &mut single),
        ] {
            for k in 0..3 {
                let arm = ARMS[(k + round) % 3];
                let r = bench.measure(arm, mode, secs)?;
                let name = match mode {
                    Mode::Load => format!("-t{} -c{}", args.threads, args.connections),
                    Mode::Single => "-t1 -c1".to_owned(),
                };
                eprintln!(
                    "round {}/{} {name} {:<6} {:>8} req/s  p50 {:>8}  p99 {:>8}{}  (other \
                     processes {:.0} % of a core{})",
                    round + 1,
                    args.runs,
                    arm.key(),
                    fmt_rps(r.rps),
                    fmt_ms(r.p50_ms),
                    fmt_ms(r.p99_ms),
                    r.proxy_cpu_us_per_req
                        .map(|c| format!("  proxy {c:.1} µs CPU/req"))
                        .unwrap_or_default(),
                    r.other_cpu_pct,
                    if r.other_cpu_pct > DISTURBED_PCT {
                        ": DISTURBED, kept"
                    } else {
                        ""
                    }
                );
                out[arm as usize].push(r);
            }
        }
    }
    let daemon_threads_end = threads_of(daemon).len();
    let load_at_end = loadavg();
    sb.teardown();

    // ------------------------------------------------------------------ report
    let med = |v: &[WrkResult], f: fn(&WrkResult) -> f64| -> f64 {
        median(&v.iter().map(f).collect::<Vec<_>>())
    };
    let med_opt = |v: &[WrkResult], f: fn(&WrkResult) -> Option<f64>| -> f64 {
        median(&v.iter().filter_map(f).collect::<Vec<_>>())
    };
    let rps: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&load[*a as usize], |r| r.rps))
        .collect();
    let lp50: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&load[*a as usize], |r| r.p50_ms))
        .collect();
    let lp99: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&load[*a as usize], |r| r.p99_ms))
        .collect();
    let sp50: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&single[*a as usize], |r| r.p50_ms))
        .collect();
    let sp99: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&single[*a as usize], |r| r.p99_ms))
        .collect();
    let sp90: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&single[*a as usize], |r| r.p90_ms))
        .collect();
    // The least disturbed round of each arm: on a shared machine a p99 is mostly set by
    // stalls outside the benchmark, which this filters out best.
    let sp99_min: Vec<f64> = ARMS
        .iter()
        .map(|a| {
            single[*a as usize]
                .iter()
                .map(|r| r.p99_ms)
                .fold(f64::NAN, f64::min)
        })
        .collect();
    let srps: Vec<f64> = ARMS
        .iter()
        .map(|a| med(&single[*a as usize], |r| r.rps))
        .collect();
    let cpu_req: Vec<f64> = ARMS
        .iter()
        .map(|a| med_opt(&load[*a as usize], |r| r.proxy_cpu_us_per_req))
        .collect();
    let cpu_pct: Vec<f64> = ARMS
        .iter()
        .map(|a| med_opt(&load[*a as usize], |r| r.proxy_cpu_pct))
        .collect();
    let (d, n, b) = (0usize, 1usize, 2usize);
    let ratio_rps = rps[b] / rps[n];
    let added = |v: &[f64], arm: usize| v[arm] - v[d];
    let binky_added_p99 = added(&sp99, b);

    let (t, c) = (args.threads, args.connections);
    let mut tbl = Table::new(&[
        "arm",
        &format!("req/s -c{c}"),
        &format!("p50 -c{c}"),
        &format!("p99 -c{c}"),
        "proxy CPU/req",
        "req/s -c1",
        "p50 -c1",
        "p99 -c1",
        "added p50 -c1",
        "added p99 -c1",
    ]);
    for arm in ARMS {
        let i = arm as usize;
        let proxied = arm != Arm::Direct;
        tbl.row_owned(&[
            arm.label().to_owned(),
            fmt_rps(rps[i]),
            fmt_ms(lp50[i]),
            fmt_ms(lp99[i]),
            if proxied {
                format!("{:.1} µs ({:.0} %)", cpu_req[i], cpu_pct[i])
            } else {
                String::new()
            },
            fmt_rps(srps[i]),
            fmt_ms(sp50[i]),
            fmt_ms(sp99[i]),
            if proxied {
                fmt_added(added(&sp50, i))
            } else {
                String::new()
            },
            if proxied {
                fmt_added(added(&sp99, i))
            } else {
                String::new()
            },
        ]);
    }
    let mut verdicts = Table::new(&["check", "binky", "nginx", "target", "binky meets"]);
    verdicts.row_owned(&[
        format!("requests/s, binky / nginx (-t{t} -c{c})"),
        format!("{ratio_rps:.3}"),
        "1".into(),
        format!(">= {TARGET_RPS_RATIO}"),
        verdict(ratio_rps >= TARGET_RPS_RATIO).into(),
    ]);
    verdicts.row_owned(&[
        "added p99 vs direct, one connection (-t1 -c1)".into(),
        fmt_added(binky_added_p99),
        fmt_added(added(&sp99, n)),
        format!("<= {TARGET_ADDED_P99_MS} ms"),
        verdict(binky_added_p99 <= TARGET_ADDED_P99_MS).into(),
    ]);
    verdicts.row_owned(&[
        "  same, lowest p99 of each arm's rounds".into(),
        fmt_added(added(&sp99_min, b)),
        fmt_added(added(&sp99_min, n)),
        String::new(),
        String::new(),
    ]);
    verdicts.row_owned(&[
        "added p90 vs direct, one connection (-t1 -c1)".into(),
        fmt_added(added(&sp90, b)),
        fmt_added(added(&sp90, n)),
        String::new(),
        String::new(),
    ]);
    verdicts.row_owned(&[
        "added p50 vs direct, one connection (-t1 -c1)".into(),
        fmt_added(added(&sp50, b)),
        fmt_added(added(&sp50, n)),
        String::new(),
        String::new(),
    ]);
    verdicts.row_owned(&[
        format!("added p99 vs direct, under load (-t{t} -c{c})"),
        fmt_added(added(&lp99, b)),
        fmt_added(added(&lp99, n)),
        String::new(),
        String::new(),
    ]);
    verdicts.row_owned(&[
        format!("added p50 vs direct, under load (-t{t} -c{c})"),
        fmt_added(added(&lp50, b)),
        fmt_added(added(&lp50, n)),
        String::new(),
        String::new(),
    ]);
    verdicts.row_owned(&[
        format!("proxy CPU per request (-t{t} -c{c})"),
        format!("{:.1} µs", cpu_req[b]),
        format!("{:.1} µs", cpu_req[n]),
        String::new(),
        format!("ratio {:.2}", cpu_req[b] / cpu_req[n]),
    ]);

    println!();
    println!(
        "medians of {} rounds; throughput runs `wrk -t{t} -c{c} -d{}s --latency`, latency runs \
         `wrk -t1 -c1 -d{}s --latency`, {} s warm-up before each; layout {}",
        args.runs,
        args.duration,
        args.latency_duration,
        args.warmup,
        args.layout.name()
    );
    println!("{}", tbl.render());
    println!("{}", verdicts.render());
    println!(
        "proxy CPU/req: CPU time of the proxy's processes (binky: the daemon; nginx: master + \
         workers) over the run / requests served, and in brackets its CPU use in % of one core."
    );
    println!(
        "binky daemon threads: {daemon_threads} at start, {daemon_threads_end} at end; nginx \
         proxy workers: {}",
        nginx_pids.len().saturating_sub(1)
    );
    let kept_disturbed = load
        .iter()
        .chain(single.iter())
        .flatten()
        .filter(|r| r.other_cpu_pct > DISTURBED_PCT)
        .count();
    let others: Vec<f64> = load
        .iter()
        .chain(single.iter())
        .flatten()
        .map(|r| r.other_cpu_pct)
        .collect();
    let repeated: u32 = load
        .iter()
        .chain(single.iter())
        .flatten()
        .map(|r| r.attempts.saturating_sub(1))
        .sum();
    println!(
        "other processes during the measured runs: median {:.1} %, max {:.1} % of one core \
         ({repeated} disturbed run(s) repeated, {kept_disturbed} kept because --quiet-wait ran \
         out); load average at start {}, at end {load_at_end}",
        median(&others),
        others.iter().copied().fold(0.0, f64::max),
        machine["loadavg_at_start"].as_str().unwrap_or("")
    );
    if !sb.leftovers.is_empty() {
        println!(
            "{} process(es) still alive after teardown (killed)",
            sb.leftovers.len()
        );
    }

    if let Some(path) = &args.json {
        let per_arm = |runs: &[Vec<WrkResult>; 3]| -> Value {
            let mut m = serde_json::Map::new();
            for arm in ARMS {
                let v = &runs[arm as usize];
                let col = |f: fn(&WrkResult) -> f64| v.iter().map(f).collect::<Vec<_>>();
                m.insert(
                    arm.key().into(),
                    json!({
                        "rps": summary(&col(|r| r.rps)),
                        "p50_ms": summary(&col(|r| r.p50_ms)),
                        "p90_ms": summary(&col(|r| r.p90_ms)),
                        "p99_ms": summary(&col(|r| r.p99_ms)),
                        "runs": v.iter().map(WrkResult::json).collect::<Vec<_>>(),
                    }),
                );
            }
            Value::Object(m)
        };
        let report = json!({
            "benchmark": "proxy",
            "machine": machine,
            "loadavg_at_end": load_at_end,
            "other_processes_cpu_pct_of_one_core": summary(&others),
            "disturbed_runs_repeated": repeated,
            "disturbed_runs_kept": kept_disturbed,
            "settings": {
                "runs": args.runs, "duration_s": args.duration,
                "latency_duration_s": args.latency_duration, "warmup_s": args.warmup,
                "threads": t, "connections": c, "layout": args.layout.name(),
                "quiet_wait_s": args.quiet_wait, "quiet_below_pct_of_one_core": QUIET_PCT,
                "affinity": affinity, "host": HOST,
                "binky": binky, "binky_commit": commit, "binky_daemon_threads": daemon_threads,
                "nginx_proxy_workers": nginx_pids.len().saturating_sub(1),
                "nginx_proxy_conf": nginx_proxy_conf(Path::new("PREFIX"), nginx_port, backend_port),
                "backend_conf": backend_conf_template(Path::new("PREFIX")),
            },
            "responses": {
                "direct": responses[d], "nginx": responses[n], "binky": responses[b],
            },
            "targets": { "rps_ratio_binky_over_nginx": TARGET_RPS_RATIO,
                         "added_p99_ms_single_connection": TARGET_ADDED_P99_MS },
            "load": per_arm(&load),
            "single_connection": per_arm(&single),
            "medians": {
                "rps": { "direct": rps[d], "nginx": rps[n], "binky": rps[b] },
                "load_p50_ms": { "direct": lp50[d], "nginx": lp50[n], "binky": lp50[b] },
                "load_p99_ms": { "direct": lp99[d], "nginx": lp99[n], "binky": lp99[b] },
                "single_rps": { "direct": srps[d], "nginx": srps[n], "binky": srps[b] },
                "single_p50_ms": { "direct": sp50[d], "nginx": sp50[n], "binky": sp50[b] },
                "single_p99_ms": { "direct": sp99[d], "nginx": sp99[n], "binky": sp99[b] },
                "single_p90_ms": { "direct": sp90[d], "nginx": sp90[n], "binky": sp90[b] },
                "single_p99_ms_lowest_round": {
                    "direct": sp99_min[d], "nginx": sp99_min[n], "binky": sp99_min[b]
                },
                "proxy_cpu_us_per_request": { "nginx": cpu_req[n], "binky": cpu_req[b] },
                "proxy_cpu_pct_of_one_core": { "nginx": cpu_pct[n], "binky": cpu_pct[b] },
            },
            "ratios": {
                "rps_binky_over_nginx": ratio_rps,
                "rps_nginx_over_direct": rps[n] / rps[d],
                "rps_binky_over_direct": rps[b] / rps[d],
                "cpu_per_request_binky_over_nginx": cpu_req[b] / cpu_req[n],
            },
            "added_latency_ms": {
                "single_p50": { "nginx": added(&sp50, n), "binky": added(&sp50, b) },
                "single_p99": { "nginx": added(&sp99, n), "binky": added(&sp99, b) },
                "single_p99_lowest_round": {
                    "nginx": added(&sp99_min, n), "binky": added(&sp99_min, b)
                },
                "single_p90": { "nginx": added(&sp90, n), "binky": added(&sp90, b) },
                "load_p50": { "nginx": added(&lp50, n), "binky": added(&lp50, b) },
                "load_p99": { "nginx": added(&lp99, n), "binky": added(&lp99, b) },
            },
            "meets_targets": {
                "rps_ratio": ratio_rps >= TARGET_RPS_RATIO,
                "added_p99": binky_added_p99 <= TARGET_ADDED_P99_MS,
            },
            "leftover_processes": sb.leftovers,
        });
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
