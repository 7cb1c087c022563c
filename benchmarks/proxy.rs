//! Proxy benchmark: binky's reverse proxy against nginx (Debian's package) configured as a
//! reverse proxy to the same backends, in one run, over up to three protocols (`--only`):
//!
//! - `http`: HTTP/1.1 with `wrk`, three arms:
//!   1. `direct`: wrk -> backend;
//!   2. `nginx`:  wrk -> nginx reverse proxy (keepalive upstream, HTTP/1.1) -> backend;
//!   3. `binky`:  wrk -> binky's proxy (`Host: web.w.bench.localhost`) -> backend.
//!
//!   Each arm is measured twice per round: a throughput run (`wrk -t2 -c50 -d10s --latency`)
//!   and a single-connection latency run (`wrk -t1 -c1 -d5s --latency`). "Added latency" is the
//!   proxy arm's percentile minus the direct arm's.
//! - `h2`: h2 over TLS with `h2load -t2 -c10 -m5`, two arms: nginx (`listen ... ssl http2`, with
//!   a certificate for the bench host made here with rcgen) and binky's HTTPS port; both proxy
//!   to the same backend over HTTP/1.1.
//! - `ws`: WebSocket echo, three arms (direct, nginx, binky with `Host: ws.w.bench.localhost`):
//!   50 connections from a tokio runtime in this process, each doing the RFC 6455 handshake
//!   and then round trips of a masked 128-byte binary message and its echo, one at a time.
//!
//! The HTTP backend is one nginx instance serving a 1 KiB static file at `/`; the WebSocket
//! backend is this benchmark's own binary, re-executed with `--ws-echo-backend PORT` (one
//! thread). binky starts both as the world's `web` and `ws` services on the ports it
//! allocates, and the other arms use the same processes and ports.
//!
//! Every arm of every protocol is measured once per round, in rotating order. The report gives
//! each figure's min, median and max over the rounds, and the binky / nginx ratios paired per
//! round (both arms of a pair ran minutes apart at most, on the same machine state).
//!
//! Run: `cargo bench --bench proxy [-- --duration N --runs N --only http,h2,ws --json PATH]`.

use std::collections::HashMap;
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

use binky_testkit::args::{exit_on_failure, or_exit, Flags};
use binky_testkit::procs::{loadavg, machine_with, reap_sandbox, with_children, with_cmdline};
use binky_testkit::run::{capture, run_cmd, Run};
use binky_testkit::stats::{median, summary};
use binky_testkit::stop::{check_stop, install_signal_handlers};
use binky_testkit::table::{verdict, Table};
use binky_testkit::Res;

const INSTALL_HINT: &str = "The proxy benchmark needs `nginx` and `wrk`, and `h2load` for its h2 \
    arm (Debian's packages):\n\n\
    sudo apt-get install -y nginx-light wrk nghttp2-client\n\n\
(`nginx` instead of `nginx-light` works too; nginx is looked up on PATH and in /usr/sbin)";

/// The world, service and project names: the proxy routes `web.w.bench.localhost`.
const WORLD: &str = "w";
const HOST: &str = "web.w.bench.localhost";
/// The size of the static file the backend serves at `/`.
const BODY_LEN: usize = 1024;
/// The WebSocket service's host, the size of each message, RFC 6455's GUID, and the first
/// argument that makes this binary the WebSocket echo backend.
const WS_HOST: &str = "ws.w.bench.localhost";
const WS_PAYLOAD: usize = 128;
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const WS_BACKEND_FLAG: &str = "--ws-echo-backend";

/// Targets from the issues: requests/s at least nginx's, CPU per request at most nginx's
/// (binky / nginx), and an added p99 under 1 ms (the first proxy issue's).
const TARGET_RPS_RATIO: f64 = 1.0;
const TARGET_CPU_RATIO: f64 = 1.0;
const TARGET_ADDED_P99_MS: f64 = 1.0;

/// Other processes below this (% of one core) count as a quiet machine.
const QUIET_PCT: f64 = 15.0;
/// A measured run during which other processes used more than this (% of one core) is
/// repeated, while the --quiet-wait budget lasts.
const DISTURBED_PCT: f64 = 25.0;

// ---------------------------------------------------------------------------------------------
// Arguments.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    /// No pinning: the load generators, the proxies and the backends share both cores as the
    /// scheduler likes.
    Shared,
    /// The load generator on CPU 0; the proxies and the backends on CPU 1.
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
    h2_connections: usize,
    h2_streams: usize,
    ws_connections: usize,
    /// The protocols measured, in `SUITES` order.
    only: Vec<Suite>,
    layout: Layout,
    quiet_wait: u64,
    json: Option<PathBuf>,
}

impl Args {
    fn runs(&self, suite: Suite) -> bool {
        self.only.contains(&suite)
    }
}

const USAGE: &str = "usage: cargo bench --bench proxy -- [--only LIST] [--duration N] \
[--latency-duration N] [--warmup N] [--runs N] [--threads N] [--connections N] \
[--h2-connections N] [--h2-streams N] [--ws-connections N] [--layout shared|split] \
[--quiet-wait N] [--json PATH]\n\
\x20 --only LIST           the protocols to measure, comma-separated: http, h2, ws (default: all)\n\
\x20 --duration N          seconds of each throughput run, every protocol (default 10)\n\
\x20 --latency-duration N  seconds of each single-connection HTTP/1.1 latency run (default 5, at\n\
\x20                       most --duration)\n\
\x20 --warmup N            seconds of unrecorded load before every measured run (default 2)\n\
\x20 --runs N              rounds; each round measures every arm once, in rotating order (default 5)\n\
\x20 --threads N           threads of wrk, h2load and the WebSocket client (default 2)\n\
\x20 --connections N       wrk connections for the HTTP/1.1 throughput runs (default 50)\n\
\x20 --h2-connections N    h2load connections (h2load -c, default 10)\n\
\x20 --h2-streams N        concurrent streams per h2 connection (h2load -m, default 5)\n\
\x20 --ws-connections N    WebSocket connections, one message in flight on each (default 50)\n\
\x20 --layout L            shared: no CPU pinning (default); split: load generators on CPU 0,\n\
\x20                       proxies and backends on CPU 1\n\
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
        h2_connections: 10,
        h2_streams: 5,
        ws_connections: 50,
        only: SUITES.to_vec(),
        layout: Layout::Shared,
        quiet_wait: 180,
        json: None,
    };
    let mut latency_set = false;
    a.json = Flags::from_env(USAGE).each(|f, flag| {
        match flag {
            "--only" => {
                let mut want = Vec::new();
                for name in f.list("--only")? {
                    let suite = SUITES.iter().find(|s| s.key() == name).ok_or_else(|| {
                        let known: Vec<&str> = SUITES.iter().map(|s| s.key()).collect();
                        format!("--only: `{name}` is not one of {}", known.join(", "))
                    })?;
                    want.push(*suite);
                }
                if want.is_empty() {
                    return Err("--only needs at least one protocol".into());
                }
                a.only = SUITES
                    .iter()
                    .copied()
                    .filter(|s| want.contains(s))
                    .collect();
            }
            "--duration" => a.duration = f.positive("--duration", false)? as u64,
            "--latency-duration" => {
                a.latency_duration = f.positive("--latency-duration", false)? as u64;
                latency_set = true;
            }
            "--warmup" => a.warmup = f.positive("--warmup", true)? as u64,
            "--runs" => a.runs = f.positive("--runs", false)?,
            "--threads" => a.threads = f.positive("--threads", false)?,
            "--connections" => a.connections = f.positive("--connections", false)?,
            "--h2-connections" => a.h2_connections = f.positive("--h2-connections", false)?,
            "--h2-streams" => a.h2_streams = f.positive("--h2-streams", false)?,
            "--ws-connections" => a.ws_connections = f.positive("--ws-connections", false)?,
            "--layout" => {
                a.layout = match f.value("--layout")?.as_str() {
                    "shared" => Layout::Shared,
                    "split" => Layout::Split,
                    other => return Err(format!("--layout: `{other}` is not shared or split")),
                }
            }
            "--quiet-wait" => a.quiet_wait = f.positive("--quiet-wait", true)? as u64,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if !latency_set {
        a.latency_duration = a.latency_duration.min(a.duration);
    }
    if a.connections < a.threads {
        return Err("--connections must be at least --threads".into());
    }
    Ok(a)
}

/// Seconds the measurements take, without the waits for a quiet machine beyond the two
/// seconds each measurement checks for, and without the set-up.
fn expected_secs(a: &Args) -> u64 {
    let quiet = if a.quiet_wait > 0 { 2 } else { 0 };
    let one = |secs: u64| quiet + a.warmup + secs;
    let round: u64 = a
        .only
        .iter()
        .map(|s| match s {
            Suite::Http => 3 * (one(a.duration) + one(a.latency_duration)),
            Suite::H2 => 2 * one(a.duration),
            Suite::Ws => 3 * one(a.duration),
        })
        .sum();
    round * a.runs as u64
}

// ---------------------------------------------------------------------------------------------
// Running commands.

/// Pin the calling thread (or, between fork and exec, the child) to `cpu`. Allocates nothing.
fn pin_self(cpu: usize) -> std::io::Result<()> {
    // SAFETY: sched_setaffinity on the calling thread is async-signal-safe; a zeroed cpu_set_t
    // is the empty set.
    unsafe {
        let mut set: nix::libc::cpu_set_t = std::mem::zeroed();
        nix::libc::CPU_SET(cpu, &mut set);
        if nix::libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// CPU affinity for a command, applied in the child between fork and exec.
fn pin_command(cmd: &mut Command, cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // SAFETY: the closure only calls sched_setaffinity, which is async-signal-safe, and
        // allocates nothing.
        unsafe {
            cmd.pre_exec(move || pin_self(cpu));
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
        .map(|p| binky_testkit::procs::schedstat_ns(*p))
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

/// Where the reference nginx proxy listens and what it proxies to.
#[derive(Clone, Copy)]
struct NginxPorts {
    /// Plain HTTP/1.1.
    http: u16,
    /// TLS, h2 (or HTTP/1.1) by ALPN.
    tls: u16,
    /// The HTTP backend.
    backend: u16,
    /// The WebSocket backend.
    ws_backend: u16,
}

/// A `location /` that proxies to the keepalive upstream over HTTP/1.1 with the forwarded
/// headers binky sets.
fn nginx_proxy_location() -> &'static str {
    "    location / {\n\
     \x20     proxy_pass http://backend;\n\
     \x20     proxy_http_version 1.1;\n\
     \x20     proxy_set_header Connection \"\";\n\
     \x20     proxy_set_header Host $host;\n\
     \x20     proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
     \x20     proxy_set_header X-Forwarded-Proto $scheme;\n\
     \x20     proxy_set_header X-Forwarded-Host $host;\n\
     \x20   }\n"
}

/// The reference reverse proxy: keepalive upstream over HTTP/1.1, the same forwarded headers
/// binky sets, one worker per core; HTTP/1.1 on `ports.http`, where `Host: WS_HOST` goes to the
/// WebSocket backend (upgrades passed through), and h2 over TLS on `ports.tls` (TLS 1.3
/// allowed: nginx 1.22 leaves it out by default; `prefix/cert.pem` is made by [`bench_cert`]).
fn nginx_proxy_conf(prefix: &Path, ports: NginxPorts) -> String {
    let p = prefix.display();
    let NginxPorts {
        http,
        tls,
        backend,
        ws_backend,
    } = ports;
    let location = nginx_proxy_location();
    format!(
        "{main}http {{\n{common}\
         \x20 upstream backend {{\n\
         \x20   server 127.0.0.1:{backend};\n\
         \x20   keepalive 64;\n\
         \x20   keepalive_requests 1000000;\n\
         \x20   keepalive_timeout 60s;\n\
         \x20 }}\n\
         \x20 upstream ws_backend {{\n\
         \x20   server 127.0.0.1:{ws_backend};\n\
         \x20 }}\n\
         \x20 server {{\n\
         \x20   listen 127.0.0.1:{http} backlog=4096 reuseport;\n\
         {location}\
         \x20 }}\n\
         \x20 server {{\n\
         \x20   listen 127.0.0.1:{http};\n\
         \x20   server_name {WS_HOST};\n\
         \x20   location / {{\n\
         \x20     proxy_pass http://ws_backend;\n\
         \x20     proxy_http_version 1.1;\n\
         \x20     proxy_set_header Upgrade $http_upgrade;\n\
         \x20     proxy_set_header Connection \"upgrade\";\n\
         \x20     proxy_set_header Host $host;\n\
         \x20     proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
         \x20     proxy_set_header X-Forwarded-Proto $scheme;\n\
         \x20     proxy_set_header X-Forwarded-Host $host;\n\
         \x20   }}\n\
         \x20 }}\n\
         \x20 server {{\n\
         \x20   listen 127.0.0.1:{tls} ssl http2 backlog=4096 reuseport;\n\
         \x20   ssl_certificate {p}/cert.pem;\n\
         \x20   ssl_certificate_key {p}/key.pem;\n\
         \x20   ssl_protocols TLSv1.2 TLSv1.3;\n\
         {location}\
         \x20 }}\n\
         }}\n",
        main = nginx_main(prefix, "auto"),
        common = nginx_http_common(prefix),
    )
}

/// A self-signed certificate for `HOST` with an ECDSA P-256 key, as binky issues its leaves:
/// (certificate PEM, key PEM). h2load does not verify certificates.
fn bench_cert() -> Res<(String, String)> {
    let key = rcgen::KeyPair::generate().map_err(|e| format!("key for the nginx proxy: {e}"))?;
    let cert = rcgen::CertificateParams::new(vec![HOST.to_owned()])
        .and_then(|p| p.self_signed(&key))
        .map_err(|e| format!("certificate for the nginx proxy: {e}"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

// ---------------------------------------------------------------------------------------------
// The sandbox: a git repo with binky.toml, BINKY_HOME, the backend and the nginx proxy.

/// Paths that go into a shell command and nginx configs unquoted.
fn plain_path(p: &Path) -> bool {
    p.to_string_lossy()
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/-_.".contains(c))
}

/// What `binky daemon start` and `binky up` gave.
struct Started {
    daemon: u32,
    /// The `web` service's port (the HTTP backend).
    backend: u16,
    /// The `ws` service's port (the WebSocket backend).
    ws_backend: u16,
    /// binky's proxy: plain HTTP/1.1, and TLS.
    http: u16,
    https: u16,
}

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
    /// `ws_exe`: this benchmark's binary, which the `ws` service runs as the WebSocket echo
    /// backend.
    fn new(bin: PathBuf, nginx: PathBuf, ws_exe: &Path) -> Res<Sandbox> {
        let dir = tempfile::Builder::new()
            .prefix("binky-bench-proxy-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let root = fs::canonicalize(dir.path()).map_err(|e| format!("tempdir: {e}"))?;
        if !plain_path(&root) {
            return Err(format!(
                "temp dir {} has characters the configs cannot take; set TMPDIR",
                root.display()
            ));
        }
        if !plain_path(ws_exe) {
            return Err(format!(
                "{} has characters binky.toml's command cannot take",
                ws_exe.display()
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
        // `https = true`: binky's TLS listener issues certificates for this project's hosts.
        // The WebSocket echo backend: this binary, in the foreground as well.
        let ws_cmd = format!("exec {} {WS_BACKEND_FLAG} ${{self.port}}", ws_exe.display());
        let toml = format!(
            "[project]\nname = \"bench\"\nport_range = [23000, 23099]\nhttps = true\n\n\
             [services.web]\ncmd = '{cmd}'\nurl = \"web\"\n\n\
             [services.ws]\ncmd = '{ws_cmd}'\nurl = \"ws\"\n"
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

    /// The ports binky's proxy serves on, from `binky port` (`proxy: http 127.0.0.1:P (asked:
    /// …), https 127.0.0.1:Q (asked: …)`), waiting up to 10 s for both.
    fn served_ports(&self) -> Res<(u16, u16)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self.binky(&["port"], None)?.stdout;
            let grab = |tag: &str| {
                out.split(tag).nth(1).and_then(|s| {
                    s.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                        .parse::<u16>()
                        .ok()
                })
            };
            if let (Some(http), Some(https)) = (grab("http 127.0.0.1:"), grab("https 127.0.0.1:")) {
                return Ok((http, https));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "binky's proxy does not serve both ports: {}",
                    out.trim()
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Set the proxy's ports, start the daemon (on `cpu`, which its services inherit), bring
    /// the world up.
    fn start_binky(&mut self, http: u16, https: u16, cpu: Option<usize>) -> Res<Started> {
        self.binky(
            &[
                "port",
                "--proxy",
                &http.to_string(),
                "--https",
                &https.to_string(),
            ],
            None,
        )?;
        self.daemon_started = true;
        self.binky(&["daemon", "start"], cpu)?;
        let st = self.binky(&["daemon", "status"], None)?;
        let text = format!("{}{}", st.stdout, st.stderr);
        let daemon = binky_testkit::tool::daemon_pid_in(&text)
            .ok_or_else(|| format!("no pid in `binky daemon status`: {text}"))?;
        self.world_up = true;
        self.binky(&["up", WORLD, "-q"], None)?;
        let (served_http, served_https) = self.served_ports()?;
        for (what, asked, served) in [("http", http, served_http), ("https", https, served_https)] {
            if served != asked {
                eprintln!(
                    "note: binky's proxy serves {what} on {served}, not the asked-for {asked}"
                );
            }
        }
        let env = self.binky(&["env", WORLD, "--json"], None)?;
        let v: Value = serde_json::from_str(&env.stdout)
            .map_err(|e| format!("binky env --json: {e}: {}", env.stdout))?;
        let port_of = |key: &str| {
            v["env"][key]
                .as_str()
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or_else(|| format!("no {key} in `binky env`: {}", env.stdout))
        };
        let backend = port_of("WEB_PORT")?;
        let ws_backend = port_of("WS_PORT")?;
        // An https project's URLs are its https ones.
        let url = v["env"]["WEB_URL"].as_str().unwrap_or_default();
        let want = if served_https == 443 {
            format!("https://{HOST}")
        } else {
            format!("https://{HOST}:{served_https}")
        };
        if url.trim_end_matches('/') != want {
            return Err(format!(
                "WEB_URL `{url}` is not {want}, binky's HTTPS URL of {HOST}"
            ));
        }
        Ok(Started {
            daemon,
            backend,
            ws_backend,
            http: served_http,
            https: served_https,
        })
    }

    fn backend_pids(&self) -> Res<Vec<u32>> {
        let path = self.backend_dir.join("nginx.pid");
        let pid = fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .ok_or_else(|| format!("no backend pid in {}", path.display()))?;
        Ok(with_children(pid))
    }

    /// The WebSocket echo backend's process.
    fn ws_backend_pids(&self, port: u16) -> Res<Vec<u32>> {
        let me = std::process::id();
        let port = port.to_string();
        let pids: Vec<u32> = with_cmdline(&[WS_BACKEND_FLAG, &port])
            .into_iter()
            .filter(|p| *p != me)
            .collect();
        if pids.is_empty() {
            return Err(format!(
                "no WebSocket echo backend process ({WS_BACKEND_FLAG} {port})"
            ));
        }
        Ok(pids)
    }

    /// Start the reference nginx proxy in the foreground (its own process group), with a fresh
    /// certificate for its TLS port.
    fn start_nginx_proxy(&mut self, ports: NginxPorts, cpu: Option<usize>) -> Res<u32> {
        let (cert, key) = bench_cert()?;
        for (name, pem) in [("cert.pem", cert), ("key.pem", key)] {
            let path = self.proxy_dir.join(name);
            fs::write(&path, pem).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let conf = self.proxy_dir.join("nginx.conf");
        fs::write(&conf, nginx_proxy_conf(&self.proxy_dir, ports))
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
        let deadline = Instant::now() + Duration::from_secs(10);
        for listen in [ports.http, ports.tls] {
            let addr: SocketAddr = ([127, 0, 0, 1], listen).into();
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
// Runs and their parsing.

/// One measured run (wrk or h2load), parsed, with the CPU of the processes involved.
#[derive(Clone, Debug, Default)]
struct RunResult {
    /// Requests per second.
    rps: f64,
    requests: u64,
    p50_ms: f64,
    p75_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    avg_ms: f64,
    max_ms: f64,
    /// wrk's socket errors line.
    socket_errors: String,
    non_2xx: u64,
    /// h2load: the TLS version, cipher and protocol it negotiated.
    tls: String,
    /// CPU of the proxy under test over the run, in % of one core (None for `direct`).
    proxy_cpu_pct: Option<f64>,
    /// The proxy's CPU time per request, in microseconds.
    proxy_cpu_us_per_req: Option<f64>,
    backend_cpu_pct: f64,
    /// The load generator's CPU (wrk, h2load), in % of one core.
    client_cpu_pct: f64,
    /// CPU used by processes outside the benchmark during the run, in % of one core.
    other_cpu_pct: f64,
    /// Seconds from the start of this measurement (waits and repeats included) to its end.
    quiet_wait_s: f64,
    /// Runs made: more than 1 when other processes disturbed a run and it was repeated.
    attempts: u32,
}

impl RunResult {
    fn json(&self) -> Value {
        json!({
            "rps": self.rps, "requests": self.requests,
            "p50_ms": self.p50_ms, "p75_ms": self.p75_ms, "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms, "avg_ms": self.avg_ms, "max_ms": self.max_ms,
            "socket_errors": self.socket_errors, "non_2xx": self.non_2xx, "tls": self.tls,
            "proxy_cpu_pct_of_one_core": self.proxy_cpu_pct,
            "proxy_cpu_us_per_request": self.proxy_cpu_us_per_req,
            "backend_cpu_pct_of_one_core": self.backend_cpu_pct,
            "client_cpu_pct_of_one_core": self.client_cpu_pct,
            "other_processes_cpu_pct_of_one_core": self.other_cpu_pct,
            "measurement_wall_s": self.quiet_wait_s,
            "attempts": self.attempts,
        })
    }

    /// p50, p75, p90, p99 (nearest rank), mean and max of latencies given in microseconds.
    fn set_latencies_us(&mut self, v: &mut [u32]) {
        if v.is_empty() {
            for f in [
                &mut self.p50_ms,
                &mut self.p75_ms,
                &mut self.p90_ms,
                &mut self.p99_ms,
                &mut self.avg_ms,
                &mut self.max_ms,
            ] {
                *f = f64::NAN;
            }
            return;
        }
        v.sort_unstable();
        let n = v.len();
        let at = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1] as f64 / 1000.0;
        self.p50_ms = at(0.50);
        self.p75_ms = at(0.75);
        self.p90_ms = at(0.90);
        self.p99_ms = at(0.99);
        self.avg_ms = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64 / 1000.0;
        self.max_ms = v[n - 1] as f64 / 1000.0;
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

fn parse_wrk(out: &str) -> Res<RunResult> {
    let mut r = RunResult::default();
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

/// What h2load printed: the rate, the request counts and what it negotiated.
#[derive(Debug, Default, PartialEq)]
struct H2loadOut {
    rps: f64,
    /// `requests:` line: total, started, done, succeeded, failed, errored, timeout.
    counts: HashMap<String, u64>,
    /// `status codes:` line: 2xx, 3xx, 4xx, 5xx.
    statuses: HashMap<String, u64>,
    /// Bytes of response bodies (`traffic: … (N) data`).
    data_bytes: u64,
    tls: String,
    protocol: String,
}

impl H2loadOut {
    fn count(&self, what: &str) -> u64 {
        self.counts.get(what).copied().unwrap_or(0)
    }

    /// Every request that was done succeeded, none failed, errored or timed out, no status
    /// was other than 2xx, over h2. (In a timed run (`-D`), requests still in flight at the end
    /// are `started` but not `done`, and not counted as failed; some of them have their status
    /// counted already.)
    fn check(&self) -> Res<()> {
        let done = self.count("done");
        let status = |s: &str| self.statuses.get(s).copied().unwrap_or(0);
        if self.protocol != "h2" {
            return Err(format!("h2load negotiated `{}`, not h2", self.protocol));
        }
        if done == 0
            || self.count("succeeded") != done
            || status("2xx") < done
            || status("3xx") + status("4xx") + status("5xx") > 0
            || self.count("failed") + self.count("errored") + self.count("timeout") > 0
        {
            return Err(format!(
                "h2load: not every request succeeded with a 2xx: requests {:?}, status codes {:?}",
                self.counts, self.statuses
            ));
        }
        Ok(())
    }
}

/// `N word, N word, …` as a map from word to N.
fn counted(list: &str) -> HashMap<String, u64> {
    list.split(',')
        .filter_map(|part| {
            let mut f = part.split_whitespace();
            let n = f.next()?.parse::<u64>().ok()?;
            Some((f.next()?.to_owned(), n))
        })
        .collect()
}

/// h2load's summary: `finished in 10.00s, 41097.50 req/s, 45.11MB/s`, `requests: …`,
/// `status codes: …`, `traffic: …`, `TLS Protocol: …`, `Cipher: …`, `Application protocol: …`.
fn parse_h2load(out: &str) -> Res<H2loadOut> {
    let mut r = H2loadOut::default();
    let (mut cipher, mut have_rate) = (String::new(), false);
    for line in out.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            r.rps = rest
                .split(", ")
                .find_map(|p| p.strip_suffix(" req/s"))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("bad h2load line `{line}`"))?;
            have_rate = true;
        } else if let Some(rest) = line.strip_prefix("requests:") {
            r.counts = counted(rest);
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            r.statuses = counted(rest);
        } else if let Some(rest) = line.strip_prefix("traffic:") {
            r.data_bytes = rest
                .split(", ")
                .find(|p| p.ends_with(" data"))
                .and_then(|p| p.split('(').nth(1)?.split(')').next()?.parse().ok())
                .unwrap_or(0);
        } else if let Some(v) = line.strip_prefix("TLS Protocol:") {
            r.tls = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("Cipher:") {
            cipher = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("Application protocol:") {
            r.protocol = v.trim().to_owned();
        }
    }
    if !have_rate || r.counts.is_empty() {
        return Err(format!("could not parse h2load's output:\n{out}"));
    }
    if !cipher.is_empty() {
        r.tls = format!("{} {cipher}", r.tls);
    }
    Ok(r)
}

/// The third column of h2load's `--log-file` (request duration in microseconds), every line's
/// status being 200.
fn h2load_log_latencies(log: &str) -> Res<Vec<u32>> {
    let mut v = Vec::with_capacity(log.len() / 24);
    for line in log.lines() {
        let mut f = line.split('\t');
        let (_, status, us) = (f.next(), f.next(), f.next());
        if status != Some("200") {
            return Err(format!(
                "h2load's log has a request that did not get 200: `{line}`"
            ));
        }
        v.push(
            us.and_then(|s| s.trim().parse::<u32>().ok())
                .ok_or_else(|| format!("bad line in h2load's log: `{line}`"))?,
        );
    }
    Ok(v)
}

/// The protocols, each with its own load generator and arms.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Suite {
    /// HTTP/1.1, wrk.
    Http,
    /// h2 over TLS, h2load.
    H2,
    /// WebSocket echo, this process's client.
    Ws,
}

const SUITES: [Suite; 3] = [Suite::Http, Suite::H2, Suite::Ws];

impl Suite {
    fn key(self) -> &'static str {
        match self {
            Suite::Http => "http",
            Suite::H2 => "h2",
            Suite::Ws => "ws",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Suite::Http => "HTTP/1.1 (wrk)",
            Suite::H2 => "h2 over TLS (h2load)",
            Suite::Ws => "WebSocket echo",
        }
    }

    /// What a request is: a WebSocket round trip is a message and its echo.
    fn unit(self) -> &'static str {
        match self {
            Suite::Http | Suite::H2 => "req",
            Suite::Ws => "msg",
        }
    }

    fn arms(self) -> &'static [Arm] {
        match self {
            Suite::Http | Suite::Ws => &[Arm::Direct, Arm::Nginx, Arm::Binky],
            // The backend speaks HTTP/1.1 without TLS: there is no direct h2 arm.
            Suite::H2 => &[Arm::Nginx, Arm::Binky],
        }
    }

    fn modes(self) -> &'static [Mode] {
        match self {
            Suite::Http => &[Mode::Load, Mode::Single],
            Suite::H2 | Suite::Ws => &[Mode::Load],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Arm {
    Direct,
    Nginx,
    Binky,
}

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
            Arm::Direct => "direct (-> backend)",
            Arm::Nginx => "nginx proxy (-> nginx -> backend)",
            Arm::Binky => "binky proxy (-> binky -> backend)",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Mode {
    /// Many connections: throughput, and latency under load.
    Load,
    /// `wrk -t1 -c1`: one request at a time; the latency a request pays.
    Single,
}

// ---------------------------------------------------------------------------------------------
// Measuring.

struct Bench<'a> {
    args: &'a Args,
    wrk: PathBuf,
    h2load: Option<PathBuf>,
    scratch: PathBuf,
    /// The HTTP backend's port, binky's proxy ports and nginx's.
    backend_port: u16,
    binky: Started,
    nginx: NginxPorts,
    /// Processes whose CPU is counted for each proxy, and the backends'.
    nginx_pids: Vec<u32>,
    backend_pids: Vec<u32>,
    ws_backend_pids: Vec<u32>,
    /// Every process of the benchmark (both proxies, the backends, this process): the CPU the
    /// machine spends beyond these (and the load generators) is other people's load.
    own_pids: Vec<u32>,
    /// The CPU the load generators are pinned to (layout split).
    client_cpu: Option<usize>,
    /// The WebSocket client's runtime: `--threads` worker threads.
    rt: Option<tokio::runtime::Runtime>,
}

impl Bench<'_> {
    /// The port an arm's load goes to.
    fn port(&self, suite: Suite, arm: Arm) -> u16 {
        match (suite, arm) {
            (Suite::Http, Arm::Direct) => self.backend_port,
            (Suite::Http, Arm::Nginx) => self.nginx.http,
            (Suite::Http, Arm::Binky) => self.binky.http,
            (Suite::H2, Arm::Nginx) => self.nginx.tls,
            (Suite::H2, Arm::Binky) => self.binky.https,
            (Suite::H2, Arm::Direct) => unreachable!("h2 has no direct arm"),
            (Suite::Ws, Arm::Direct) => self.binky.ws_backend,
            // Routed by `Host: WS_HOST`, on the same port as HTTP/1.1.
            (Suite::Ws, Arm::Nginx) => self.nginx.http,
            (Suite::Ws, Arm::Binky) => self.binky.http,
        }
    }

    fn backend_pids(&self, suite: Suite) -> &[u32] {
        match suite {
            Suite::Http | Suite::H2 => &self.backend_pids,
            Suite::Ws => &self.ws_backend_pids,
        }
    }

    fn proxy_pids(&self, arm: Arm) -> Vec<u32> {
        match arm {
            Arm::Direct => Vec::new(),
            Arm::Nginx => self.nginx_pids.clone(),
            Arm::Binky => vec![self.binky.daemon],
        }
    }

    /// One run of the suite's load generator against `arm` for `secs`, with the CPU of the
    /// proxy, the backend, the load generator and everything else over it.
    fn run(&self, suite: Suite, arm: Arm, mode: Mode, secs: u64) -> Res<RunResult> {
        check_stop()?;
        let port = self.port(suite, arm);
        let proxy_pids = self.proxy_pids(arm);
        let me = [std::process::id()];
        let snapshot = || {
            [
                cpu_ns(&proxy_pids),
                cpu_ns(self.backend_pids(suite)),
                children_cpu_ns(),
                cpu_ns(&me),
                cpu_ns(&self.own_pids),
                system_busy_ns(),
            ]
        };
        let before = snapshot();
        let start = Instant::now();
        let mut r = match suite {
            Suite::Http => self.wrk(arm, port, mode, secs)?,
            Suite::H2 => self.h2load(port, secs)?,
            Suite::Ws => self.ws(port, secs)?,
        };
        let wall_ns = start.elapsed().as_nanos() as f64;
        let after = snapshot();
        let [proxy, backend, children, this, own, busy] =
            std::array::from_fn(|i| after[i].saturating_sub(before[i]));
        if !proxy_pids.is_empty() {
            r.proxy_cpu_pct = Some(proxy as f64 / wall_ns * 100.0);
            r.proxy_cpu_us_per_req = Some(proxy as f64 / 1000.0 / r.requests.max(1) as f64);
        }
        r.backend_cpu_pct = backend as f64 / wall_ns * 100.0;
        // The load generator: wrk or h2load (waited-for children), or this process (the
        // WebSocket client; idle otherwise).
        r.client_cpu_pct = (children + this) as f64 / wall_ns * 100.0;
        // own_pids has this process already.
        r.other_cpu_pct = busy.saturating_sub(own + children) as f64 / wall_ns * 100.0;
        Ok(r)
    }

    fn wrk(&self, arm: Arm, port: u16, mode: Mode, secs: u64) -> Res<RunResult> {
        let (t, c) = match mode {
            Mode::Load => (self.args.threads, self.args.connections),
            Mode::Single => (1, 1),
        };
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
        pin_command(&mut cmd, self.client_cpu);
        let run = run_cmd(cmd, &self.scratch, Duration::from_secs(secs + 60))?;
        if !run.status.success() {
            return Err(format!(
                "wrk exited {}: {}{}",
                run.status, run.stdout, run.stderr
            ));
        }
        let r = parse_wrk(&run.stdout)?;
        if r.non_2xx > 0 {
            return Err(format!(
                "{}: {} non-2xx responses in a wrk run:\n{}",
                arm.key(),
                r.non_2xx,
                run.stdout
            ));
        }
        Ok(r)
    }

    /// h2load's arguments: `-t T -c C -m M` and the address. The URI names the bench host, so
    /// that the TLS SNI and `:authority` are `web.w.bench.localhost` (no port, as wrk's `Host`),
    /// and `--connect-to` sends the connections to 127.0.0.1:`port` (no name resolution).
    fn h2load_cmd(&self, port: u16, t: usize, c: usize, m: usize) -> Command {
        let h2load = self.h2load.as_deref().unwrap_or(Path::new("h2load"));
        let mut cmd = Command::new(h2load);
        cmd.args([
            format!("-t{t}"),
            format!("-c{c}"),
            format!("-m{m}"),
            format!("--connect-to=127.0.0.1:{port}"),
        ]);
        pin_command(&mut cmd, self.client_cpu);
        cmd
    }

    fn h2load_run(&self, cmd: Command, secs: u64) -> Res<H2loadOut> {
        let run = run_cmd(cmd, &self.scratch, Duration::from_secs(secs + 60))?;
        if !run.status.success() {
            return Err(format!(
                "h2load exited {}: {}{}",
                run.status, run.stdout, run.stderr
            ));
        }
        let out = parse_h2load(&run.stdout)?;
        out.check()
            .map_err(|e| format!("{e}\nh2load's output:\n{}", run.stdout))?;
        Ok(out)
    }

    /// A timed h2load run (`-D secs`); latency percentiles from its per-request log.
    fn h2load(&self, port: u16, secs: u64) -> Res<RunResult> {
        let c = self.args.h2_connections;
        let log = self.scratch.join("h2load.log");
        // h2load appends to its log.
        let _ = fs::remove_file(&log);
        let mut cmd = self.h2load_cmd(port, self.args.threads.min(c), c, self.args.h2_streams);
        cmd.arg(format!("-D{secs}"))
            .arg(format!("--log-file={}", log.display()))
            .arg(format!("https://{HOST}/"));
        let out = self.h2load_run(cmd, secs)?;
        let text = fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let _ = fs::remove_file(&log);
        let mut lat = h2load_log_latencies(&text)?;
        let mut r = RunResult {
            rps: out.rps,
            requests: out.count("succeeded"),
            tls: format!("{} {}", out.tls, out.protocol),
            ..RunResult::default()
        };
        r.set_latencies_us(&mut lat);
        Ok(r)
    }

    /// One h2 request through `port`: it must succeed over h2 with the whole file. Returns what
    /// h2load negotiated.
    fn h2_ready(&self, port: u16, what: &str) -> Res<String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            check_stop()?;
            let mut cmd = self.h2load_cmd(port, 1, 1, 1);
            cmd.args(["-n1".to_owned(), format!("https://{HOST}/")]);
            let res = self.h2load_run(cmd, 10).and_then(|out| {
                if out.data_bytes == BODY_LEN as u64 {
                    Ok(format!(
                        "{}, {}: 200, {} bytes",
                        out.tls, out.protocol, out.data_bytes
                    ))
                } else {
                    Err(format!("{} bytes of data, not {BODY_LEN}", out.data_bytes))
                }
            });
            match res {
                Ok(s) => return Ok(s),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("{what} (h2, 127.0.0.1:{port}) is not ready: {e}"))
                }
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn runtime(&self) -> Res<&tokio::runtime::Runtime> {
        self.rt
            .as_ref()
            .ok_or_else(|| "no runtime for the WebSocket client".to_owned())
    }

    /// A WebSocket run: `--ws-connections` connections doing round trips for `secs`.
    fn ws(&self, port: u16, secs: u64) -> Res<RunResult> {
        let (mut all, window) = self.runtime()?.block_on(ws_load(
            port,
            self.args.ws_connections,
            Duration::from_secs(secs),
        ))?;
        let mut r = RunResult {
            rps: all.msgs as f64 / window.as_secs_f64().max(1e-9),
            requests: all.msgs,
            ..RunResult::default()
        };
        r.set_latencies_us(&mut all.rtt_us);
        Ok(r)
    }

    /// One WebSocket connection through `port`, one round trip. Returns the 101's head.
    fn ws_ready(&self, port: u16, what: &str) -> Res<String> {
        let rt = self.runtime()?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            check_stop()?;
            match rt.block_on(ws_conn(port, WS_HOST, 0, Instant::now())) {
                Ok(c) => return Ok(c.head),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!(
                        "{what} (WebSocket, 127.0.0.1:{port}) is not ready: {e}"
                    ))
                }
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
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
    fn measure(&self, suite: Suite, arm: Arm, mode: Mode, secs: u64) -> Res<RunResult> {
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
                self.run(suite, arm, mode, self.args.warmup)?;
            }
            let mut r = self.run(suite, arm, mode, secs)?;
            let spent = start.elapsed().as_secs_f64();
            let disturbed = r.other_cpu_pct > DISTURBED_PCT;
            if disturbed && budget > 0.0 && spent < budget {
                eprintln!(
                    "  {} {} run disturbed: other processes used {:.0} % of a core; repeating",
                    suite.key(),
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

    /// The load generator's settings of a suite and mode, for labels.
    fn settings(&self, suite: Suite, mode: Mode) -> String {
        let a = self.args;
        match (suite, mode) {
            (Suite::Http, Mode::Load) => format!("wrk -t{} -c{}", a.threads, a.connections),
            (Suite::Http, Mode::Single) => "wrk -t1 -c1".into(),
            (Suite::H2, _) => format!(
                "h2load -t{} -c{} -m{}",
                a.threads.min(a.h2_connections),
                a.h2_connections,
                a.h2_streams
            ),
            (Suite::Ws, _) => format!("ws -t{} -c{}", a.threads, a.ws_connections),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// WebSocket (RFC 6455): the echo backend this binary becomes with `--ws-echo-backend PORT`,
// and the ping-pong client.

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(sha1(key + GUID)).
fn ws_accept(key: &str) -> String {
    use sha1::{Digest, Sha1};
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(WS_GUID.as_bytes());
    base64(&h.finalize())
}

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = |i: usize| chunk.get(i).copied().unwrap_or(0) as u32;
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        out.push(ABC[(n >> 18) as usize & 63] as char);
        out.push(ABC[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            ABC[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            ABC[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Where an HTTP head ends (the index of its `\r\n\r\n`).
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// A header's value in an HTTP head (names compared without case).
fn header_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A complete frame at the start of a buffer.
struct Frame {
    /// FIN, RSV and opcode.
    b0: u8,
    /// Bytes before the payload.
    head: usize,
    len: usize,
    mask: Option<[u8; 4]>,
}

/// The frame at the start of `b`, if all of it is there.
fn parse_frame(b: &[u8]) -> Option<Frame> {
    if b.len() < 2 {
        return None;
    }
    let (len, mut head) = match b[1] & 0x7f {
        126 => (u16::from_be_bytes([*b.get(2)?, *b.get(3)?]) as usize, 4),
        127 => (
            u64::from_be_bytes(b.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let mask = if b[1] & 0x80 != 0 {
        let m = b.get(head..head + 4)?;
        head += 4;
        Some([m[0], m[1], m[2], m[3]])
    } else {
        None
    };
    (b.len() >= head.checked_add(len)?).then_some(Frame {
        b0: b[0],
        head,
        len,
        mask,
    })
}

/// A frame from the server: unmasked.
fn push_frame(out: &mut Vec<u8>, b0: u8, payload: &[u8]) {
    out.push(b0);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= 0xffff => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// `--ws-echo-backend PORT`: a WebSocket echo server on 127.0.0.1:PORT, run by binky as the
/// bench world's `ws` service. One thread (a current-thread tokio runtime), as the HTTP
/// backend is one nginx worker. Runs until killed.
fn ws_echo_backend(port: Option<String>) -> ! {
    let res = port
        .as_deref()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| format!("usage: {WS_BACKEND_FLAG} PORT"))
        .and_then(|port| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("runtime: {e}"))?
                .block_on(ws_echo_listen(port))
        });
    if let Err(e) = res {
        eprintln!("WebSocket echo backend: {e}");
    }
    std::process::exit(1)
}

async fn ws_echo_listen(port: u16) -> Res<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("bind 127.0.0.1:{port}: {e}"))?;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let _ = ws_echo_conn(stream).await;
                });
            }
            // Out of descriptors, say: let connections end.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// One connection: the handshake (a request without `Sec-WebSocket-Key`, such as a health
/// probe, gets 426), then every frame echoed as it came (unmasked), a ping answered with a
/// pong, a close with a close, after which the connection ends. Whatever frames one read
/// brings are answered with one write.
async fn ws_echo_conn(mut s: tokio::net::TcpStream) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let end = loop {
        if let Some(i) = head_end(&buf) {
            break i;
        }
        if buf.len() > 16 * 1024 || s.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let Some(key) = header_value(&head, "sec-websocket-key") else {
        s.write_all(
            b"HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\
              Connection: close\r\n\r\n",
        )
        .await?;
        return Ok(());
    };
    let resp = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        ws_accept(key)
    );
    s.write_all(resp.as_bytes()).await?;
    buf.drain(..end + 4);
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    loop {
        let mut pos = 0;
        let mut closing = false;
        while let Some(f) = parse_frame(&buf[pos..]) {
            let payload = &mut buf[pos + f.head..pos + f.head + f.len];
            if let Some(m) = f.mask {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= m[i & 3];
                }
            }
            match f.b0 & 0x0f {
                0x8 => {
                    push_frame(&mut out, 0x88, payload);
                    closing = true;
                }
                0x9 => push_frame(&mut out, 0x8a, payload),
                0xa => {}
                _ => push_frame(&mut out, f.b0, payload),
            }
            pos += f.head + f.len;
            if closing {
                break;
            }
        }
        if !out.is_empty() {
            s.write_all(&out).await?;
            out.clear();
        }
        if closing {
            return Ok(());
        }
        buf.drain(..pos);
        if buf.len() > 64 << 20 {
            return Ok(());
        }
        buf.reserve(16 * 1024);
        if s.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}

/// xorshift64: the client's keys, payloads and masks.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng((seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// What one client connection did.
#[derive(Default)]
struct WsConn {
    /// Round trips completed.
    msgs: u64,
    /// Each round trip's time, in microseconds.
    rtt_us: Vec<u32>,
    /// When the last round trip ended.
    last: Option<Instant>,
    /// The head of the `101` response.
    head: String,
}

/// One client connection to 127.0.0.1:`port` with `Host: host`: the handshake (the accept key
/// checked), then round trips until `deadline` (at least one): a masked binary frame of
/// `WS_PAYLOAD` bytes out, its echo read back and compared byte for byte; then a close.
async fn ws_conn(port: u16, host: &str, seed: u64, deadline: Instant) -> Res<WsConn> {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = format!("127.0.0.1:{port}");
    // Only called on an error: nothing is built per message.
    let io = |what: &str, e: std::io::Error| format!("WebSocket {addr}: {what}: {e}");
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| io("connect", e))?;
    let _ = s.set_nodelay(true);
    let mut rng = Rng::new(seed);
    let raw: Vec<u8> = [rng.next(), rng.next()]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let key = base64(&raw);
    let req = format!(
        "GET /echo HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: binky-bench\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| io("sending the handshake", e))?;
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(i) = head_end(&buf) {
            break i;
        }
        let n = s
            .read_buf(&mut buf)
            .await
            .map_err(|e| io("reading the handshake's answer", e))?;
        if n == 0 || buf.len() > 16 * 1024 {
            return Err(format!(
                "WebSocket {addr}: no answer to the handshake; got: {}",
                String::from_utf8_lossy(&buf)
            ));
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    if !head.starts_with("HTTP/1.1 101") {
        return Err(format!(
            "WebSocket {addr}: the handshake got `{}`, not 101",
            head.lines().next().unwrap_or("")
        ));
    }
    let want = ws_accept(&key);
    if header_value(&head, "sec-websocket-accept") != Some(want.as_str()) {
        return Err(format!(
            "WebSocket {addr}: Sec-WebSocket-Accept is not {want}:\n{head}"
        ));
    }
    if buf.len() > end + 4 {
        return Err(format!(
            "WebSocket {addr}: data came before the first message"
        ));
    }

    const N: usize = WS_PAYLOAD;
    let mut frame = [0u8; 8 + N];
    frame[..4].copy_from_slice(&[0x82, 0x80 | 126, (N >> 8) as u8, N as u8]);
    let echo_head = [0x82, 126, (N >> 8) as u8, N as u8];
    let mut payload = [0u8; N];
    let mut echo = [0u8; 4 + N];
    let mut c = WsConn {
        rtt_us: Vec::with_capacity(1 << 14),
        head,
        ..WsConn::default()
    };
    loop {
        let x = rng.next();
        for (i, p) in payload.iter_mut().enumerate() {
            *p = (x >> ((i & 7) * 8)) as u8 ^ i as u8;
        }
        let mask = (rng.next() as u32).to_le_bytes();
        frame[4..8].copy_from_slice(&mask);
        for (i, (f, p)) in frame[8..].iter_mut().zip(&payload).enumerate() {
            *f = p ^ mask[i & 3];
        }
        let t0 = Instant::now();
        s.write_all(&frame)
            .await
            .map_err(|e| io("sending a message", e))?;
        s.read_exact(&mut echo)
            .await
            .map_err(|e| io("reading an echo", e))?;
        let now = Instant::now();
        if echo[..4] != echo_head || echo[4..] != payload {
            return Err(format!(
                "WebSocket {addr}: the echo of message {} differs from it",
                c.msgs + 1
            ));
        }
        c.rtt_us
            .push(now.duration_since(t0).as_micros().min(u32::MAX as u128) as u32);
        c.msgs += 1;
        c.last = Some(now);
        if binky_testkit::stop::STOP.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if now >= deadline {
            break;
        }
    }
    // A masked close frame with no payload; the server answers with its close and ends.
    let _ = s.write_all(&[0x88, 0x80, 0, 0, 0, 0]).await;
    let mut sink = [0u8; 64];
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Ok(n) = s.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    Ok(c)
}

/// A WebSocket run: `conns` connections at once through 127.0.0.1:`port` for `dur`. Returns
/// the connections' round trips and the time from the start to the last one.
async fn ws_load(port: u16, conns: usize, dur: Duration) -> Res<(WsConn, Duration)> {
    let start = Instant::now();
    let deadline = start + dur;
    let mut handles: Vec<_> = (0..conns)
        .map(|i| tokio::spawn(async move { ws_conn(port, WS_HOST, i as u64, deadline).await }))
        .collect();
    let limit = tokio::time::Instant::from_std(deadline + Duration::from_secs(30));
    let mut all = WsConn::default();
    let mut failed = None;
    for h in handles.iter_mut() {
        let r = match tokio::time::timeout_at(limit, h).await {
            Err(_) => Err(format!(
                "WebSocket {port}: a connection was still busy 30 s after the run's end"
            )),
            Ok(Err(e)) => Err(format!("WebSocket client task: {e}")),
            Ok(Ok(r)) => r,
        };
        match r {
            Ok(c) => {
                all.msgs += c.msgs;
                all.rtt_us.extend_from_slice(&c.rtt_us);
                all.last = all.last.max(c.last);
                if all.head.is_empty() {
                    all.head = c.head;
                }
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failed {
        for h in &handles {
            h.abort();
        }
        return Err(e);
    }
    let window = all.last.map_or(dur, |l| l.duration_since(start));
    Ok((all, window))
}

// ---------------------------------------------------------------------------------------------
// Statistics and reporting.

/// Every run, by protocol, mode and arm, in round order: the i-th run of two arms of the same
/// suite and mode come from the same round.
#[derive(Default)]
struct Results(HashMap<(Suite, Mode, Arm), Vec<RunResult>>);

impl Results {
    fn get(&self, suite: Suite, mode: Mode, arm: Arm) -> &[RunResult] {
        self.0.get(&(suite, mode, arm)).map_or(&[], Vec::as_slice)
    }

    fn all(&self) -> impl Iterator<Item = &RunResult> {
        self.0.values().flatten()
    }
}

/// One figure of a run.
type Fig = fn(&RunResult) -> Option<f64>;

fn col(runs: &[RunResult], f: Fig) -> Vec<f64> {
    runs.iter().filter_map(f).collect()
}

/// binky's figure over nginx's, round by round.
fn paired(binky: &[RunResult], nginx: &[RunResult], f: Fig) -> Vec<f64> {
    binky
        .iter()
        .zip(nginx)
        .filter_map(|(b, n)| Some(f(b)? / f(n)?))
        .collect()
}

fn min_max(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

#[derive(Clone, Copy)]
enum Unit {
    /// Per second, whole.
    Rate,
    /// Milliseconds, shown in µs below 1 ms.
    Ms,
    /// Microseconds, one decimal.
    Us,
    /// Percent of one core.
    Pct,
    Ratio,
}

/// `median (min–max) unit` of the rounds' values (empty when there are none).
fn spread_cell(v: &[f64], unit: Unit) -> String {
    let v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return String::new();
    }
    let mid = median(&v);
    let (lo, hi) = min_max(&v);
    let (scale, places, suffix) = match unit {
        Unit::Rate => (1.0, 0, ""),
        Unit::Ms if mid.abs() < 1.0 => (1000.0, 0, " µs"),
        Unit::Ms => (1.0, 2, " ms"),
        Unit::Us => (1.0, 1, " µs"),
        Unit::Pct => (1.0, 0, " %"),
        Unit::Ratio => (1.0, 3, ""),
    };
    let f = |x: f64| format!("{:.*}", places, x * scale);
    if v.len() == 1 {
        format!("{}{suffix}", f(mid))
    } else {
        format!("{} ({}–{}){suffix}", f(mid), f(lo), f(hi))
    }
}

/// A suite's figures, a row each, a column per arm: `median (min–max)` over the rounds.
fn figures_table(results: &Results, suite: Suite, rows: &[(String, Mode, Unit, Fig)]) -> String {
    let mut header = vec!["median (min–max) over rounds"];
    header.extend(suite.arms().iter().map(|a| a.key()));
    let mut t = Table::new(&header);
    for (label, mode, unit, f) in rows {
        let mut row = vec![label.clone()];
        for arm in suite.arms() {
            row.push(spread_cell(
                &col(results.get(suite, *mode, *arm), *f),
                *unit,
            ));
        }
        t.row_owned(&row);
    }
    t.render()
}

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

/// The programs the benchmark runs.
struct Tools {
    binky: PathBuf,
    nginx: PathBuf,
    wrk: PathBuf,
    h2load: Option<PathBuf>,
}

fn machine(tools: &Tools) -> Value {
    let nginx = tools.nginx.to_string_lossy();
    let wrk = tools.wrk.to_string_lossy();
    let first_line = |s: String| s.lines().next().unwrap_or("").to_owned();
    machine_with(json!({
        "nginx": capture(&nginx, &["-v"]).unwrap_or_default(),
        "wrk": first_line(capture(&wrk, &["--version"])
            .or_else(|| {
                // wrk --version exits 1 but prints its version first.
                Command::new(&*wrk).arg("--version").output().ok().map(|o| {
                    String::from_utf8_lossy(&o.stdout).into_owned()
                })
            })
            .unwrap_or_default()),
        "h2load": tools.h2load.as_ref().map(|h| {
            first_line(capture(&h.to_string_lossy(), &["--version"]).unwrap_or_default())
        }),
        "loadavg_at_start": loadavg(),
    }))
}

// ---------------------------------------------------------------------------------------------

fn main() {
    // Run by binky as the bench world's `ws` service: before anything else, and without the
    // signal handlers (SIGTERM ends it).
    let mut argv = std::env::args().skip(1);
    if argv.next().as_deref() == Some(WS_BACKEND_FLAG) {
        ws_echo_backend(argv.next());
    }
    install_signal_handlers();
    let args = or_exit(parse_args());
    let nginx = find_program("nginx", &["/usr/sbin", "/sbin"]);
    let wrk = find_program("wrk", &[]);
    let h2load = find_program("h2load", &[]);
    let (Some(nginx), Some(wrk)) = (nginx, wrk) else {
        eprintln!("{INSTALL_HINT}");
        std::process::exit(1);
    };
    if args.runs(Suite::H2) && h2load.is_none() {
        eprintln!("{INSTALL_HINT}\n\n(or leave the h2 arm out: --only http,ws)");
        std::process::exit(1);
    }
    if find_program("git", &[]).is_none() {
        eprintln!("the proxy benchmark needs git (sudo apt-get install -y git)");
        std::process::exit(1);
    }
    let tools = Tools {
        binky: PathBuf::from(env!("CARGO_BIN_EXE_binky")),
        nginx,
        wrk,
        h2load,
    };
    exit_on_failure("proxy", bench(&args, &tools));
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

/// `n` different loopback ports nothing listens on right now.
fn free_ports<const N: usize>() -> Res<[u16; N]> {
    let listeners = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free loopback port: {e}"))?;
    let mut ports = [0u16; N];
    for (p, l) in ports.iter_mut().zip(&listeners) {
        *p = l
            .local_addr()
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
    }
    Ok(ports)
}

fn bench(args: &Args, tools: &Tools) -> Res<()> {
    let machine = machine(tools);
    let commit = binky_commit();
    eprintln!("machine: {machine}");
    eprintln!("binky {} at commit {commit}", tools.binky.display());
    let nproc = machine["nproc"].as_u64().unwrap_or(0);
    let (client_cpu, server_cpu) = match args.layout {
        Layout::Shared => (None, None),
        Layout::Split if nproc >= 2 => (Some(0), Some(1)),
        Layout::Split => return Err("--layout split needs at least 2 CPUs".into()),
    };
    let only: Vec<&str> = args.only.iter().map(|s| s.key()).collect();
    eprintln!(
        "measuring {} over {} rounds: about {} min of runs, plus the set-up and any waiting for \
         a quiet machine",
        only.join(", "),
        args.runs,
        expected_secs(args).div_ceil(60)
    );

    let exe = std::env::current_exe().map_err(|e| format!("this benchmark's binary: {e}"))?;
    let mut sb = Sandbox::new(tools.binky.clone(), tools.nginx.clone(), &exe)?;
    let [binky_http, binky_https, nginx_http, nginx_tls] = free_ports::<4>()?;
    let started = sb.start_binky(binky_http, binky_https, server_cpu)?;
    let daemon = started.daemon;
    let nginx_ports = NginxPorts {
        http: nginx_http,
        tls: nginx_tls,
        backend: started.backend,
        ws_backend: started.ws_backend,
    };
    let nginx_master = sb.start_nginx_proxy(nginx_ports, server_cpu)?;
    // Workers are forked once the master has read its config and bound.
    thread::sleep(Duration::from_millis(200));
    let nginx_pids = with_children(nginx_master);
    let mut backend_pids = sb.backend_pids()?;
    let ws_backend_pids = sb.ws_backend_pids(started.ws_backend)?;
    if let Some(cpu) = server_cpu {
        // The daemon and its services inherited CPU 1 from `daemon start`; pin explicitly
        // anyway, threads and workers included.
        for pid in std::iter::once(daemon)
            .chain(backend_pids.iter().copied())
            .chain(ws_backend_pids.iter().copied())
            .chain(nginx_pids.iter().copied())
        {
            pin_process(pid, cpu)?;
        }
    }
    backend_pids = sb.backend_pids()?;
    let affinity = json!({
        "binky_daemon": cpus_allowed(daemon),
        "backend": backend_pids.iter().map(|p| cpus_allowed(*p)).collect::<Vec<_>>(),
        "ws_backend": ws_backend_pids.iter().map(|p| cpus_allowed(*p)).collect::<Vec<_>>(),
        "nginx_proxy": nginx_pids.iter().map(|p| cpus_allowed(*p)).collect::<Vec<_>>(),
        "load_generators": client_cpu.map_or("0-".to_owned() + &(nproc.saturating_sub(1)).to_string(), |c| c.to_string()),
    });
    let daemon_threads = threads_of(daemon).len();
    eprintln!(
        "binky daemon pid {daemon} ({daemon_threads} threads) proxy :{} https :{}; backend nginx \
         :{} pids {backend_pids:?}; WebSocket backend :{} pids {ws_backend_pids:?}; nginx proxy \
         :{} https :{} pids {nginx_pids:?} ({} workers); layout {} (affinity {affinity})",
        started.http,
        started.https,
        started.backend,
        started.ws_backend,
        nginx_ports.http,
        nginx_ports.tls,
        nginx_pids.len().saturating_sub(1),
        args.layout.name()
    );

    let rt = if args.runs(Suite::Ws) {
        // RFC 6455's own example of the accept key.
        if ws_accept("dGhlIHNhbXBsZSBub25jZQ==") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
            return Err("Sec-WebSocket-Accept is computed wrong".into());
        }
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(args.threads)
            .thread_name("ws-client")
            .enable_all();
        if let Some(cpu) = client_cpu {
            b.on_thread_start(move || {
                let _ = pin_self(cpu);
            });
        }
        Some(b.build().map_err(|e| format!("runtime: {e}"))?)
    } else {
        None
    };
    let bench = Bench {
        args,
        wrk: tools.wrk.clone(),
        h2load: tools.h2load.clone(),
        scratch: sb.root.clone(),
        backend_port: started.backend,
        binky: started,
        nginx: nginx_ports,
        nginx_pids: nginx_pids.clone(),
        backend_pids: backend_pids.clone(),
        ws_backend_pids: ws_backend_pids.clone(),
        own_pids: nginx_pids
            .iter()
            .chain(backend_pids.iter())
            .chain(ws_backend_pids.iter())
            .copied()
            .chain([daemon, std::process::id()])
            .collect(),
        client_cpu,
        rt,
    };

    // Every arm of every protocol must answer right before anything is measured.
    let mut responses = serde_json::Map::new();
    for &suite in &args.only {
        let mut m = serde_json::Map::new();
        for &arm in suite.arms() {
            let port = bench.port(suite, arm);
            let r = match suite {
                Suite::Http => wait_ok(port, arm.label())?,
                Suite::H2 => bench.h2_ready(port, arm.label())?,
                Suite::Ws => bench.ws_ready(port, arm.label())?,
            };
            m.insert(arm.key().into(), r.into());
        }
        responses.insert(suite.key().into(), m.into());
    }

    // Rounds: each arm of each protocol and mode once per round, in rotating order, so that
    // drift on the shared machine hits all arms alike.
    let mut results = Results::default();
    for round in 0..args.runs {
        for &suite in &args.only {
            for &mode in suite.modes() {
                let arms = suite.arms();
                let secs = match mode {
                    Mode::Load => args.duration,
                    Mode::Single => args.latency_duration,
                };
                for k in 0..arms.len() {
                    let arm = arms[(k + round) % arms.len()];
                    let r = bench.measure(suite, arm, mode, secs)?;
                    let u = suite.unit();
                    eprintln!(
                        "round {}/{} {:<4} {:<20} {:<6} {:>8} {u}/s  p50 {:>8}  p99 {:>8}{}  \
                         (other processes {:.0} % of a core{})",
                        round + 1,
                        args.runs,
                        suite.key(),
                        bench.settings(suite, mode),
                        arm.key(),
                        fmt_rps(r.rps),
                        fmt_ms(r.p50_ms),
                        fmt_ms(r.p99_ms),
                        r.proxy_cpu_us_per_req
                            .map(|c| format!("  proxy {c:.1} µs CPU/{u}"))
                            .unwrap_or_default(),
                        r.other_cpu_pct,
                        if r.other_cpu_pct > DISTURBED_PCT {
                            ": DISTURBED, kept"
                        } else {
                            ""
                        }
                    );
                    results.0.entry((suite, mode, arm)).or_default().push(r);
                }
            }
        }
    }
    let daemon_threads_end = threads_of(daemon).len();
    let load_at_end = loadavg();
    sb.teardown();

    // ------------------------------------------------------------------ report
    let mut report = serde_json::Map::new();
    println!();
    println!(
        "{} rounds, every arm once per round in rotating order, {} s warm-up before each run; \
         layout {}; figures are median (min–max) over the rounds",
        args.runs,
        args.warmup,
        args.layout.name()
    );
    let (t, c) = (args.threads, args.connections);
    let load_http = bench.settings(Suite::Http, Mode::Load);
    let load_h2 = bench.settings(Suite::H2, Mode::Load);
    if args.runs(Suite::Http) {
        http_report(args, &results, &load_http, &mut report);
    }
    if args.runs(Suite::H2) {
        println!(
            "\n{}: `{load_h2} -D {}` (URI https://{HOST}/, --connect-to 127.0.0.1:PORT)",
            Suite::H2.title(),
            args.duration
        );
        let rows: Vec<(String, Mode, Unit, Fig)> = vec![
            ("req/s".into(), Mode::Load, Unit::Rate, |r| Some(r.rps)),
            ("p50".into(), Mode::Load, Unit::Ms, |r| Some(r.p50_ms)),
            ("p99".into(), Mode::Load, Unit::Ms, |r| Some(r.p99_ms)),
            ("proxy CPU / request".into(), Mode::Load, Unit::Us, |r| {
                r.proxy_cpu_us_per_req
            }),
            (
                "proxy CPU, % of a core".into(),
                Mode::Load,
                Unit::Pct,
                |r| r.proxy_cpu_pct,
            ),
            (
                "backend CPU, % of a core".into(),
                Mode::Load,
                Unit::Pct,
                |r| Some(r.backend_cpu_pct),
            ),
            (
                "h2load CPU, % of a core".into(),
                Mode::Load,
                Unit::Pct,
                |r| Some(r.client_cpu_pct),
            ),
        ];
        print!("{}", figures_table(&results, Suite::H2, &rows));
        let tls: Vec<String> = Suite::H2
            .arms()
            .iter()
            .map(|a| {
                let r = results.get(Suite::H2, Mode::Load, *a);
                format!("{}: {}", a.key(), r.first().map_or("", |r| r.tls.as_str()))
            })
            .collect();
        println!("negotiated: {}", tls.join("; "));
        report.insert("h2".into(), per_arm(&results, Suite::H2, Mode::Load));
    }
    let load_ws = bench.settings(Suite::Ws, Mode::Load);
    if args.runs(Suite::Ws) {
        println!(
            "\n{}: {} connections for {} s, each a round trip at a time: a masked \
             {WS_PAYLOAD}-byte binary message and its echo (checked), Host: {WS_HOST}; client: \
             {} threads in this process",
            Suite::Ws.title(),
            args.ws_connections,
            args.duration,
            args.threads
        );
        let rows: Vec<(String, Mode, Unit, Fig)> = vec![
            (
                "messages/s (round trips)".into(),
                Mode::Load,
                Unit::Rate,
                |r| Some(r.rps),
            ),
            ("round trip p50".into(), Mode::Load, Unit::Ms, |r| {
                Some(r.p50_ms)
            }),
            ("round trip p99".into(), Mode::Load, Unit::Ms, |r| {
                Some(r.p99_ms)
            }),
            ("proxy CPU / message".into(), Mode::Load, Unit::Us, |r| {
                r.proxy_cpu_us_per_req
            }),
            (
                "proxy CPU, % of a core".into(),
                Mode::Load,
                Unit::Pct,
                |r| r.proxy_cpu_pct,
            ),
            (
                "echo backend CPU, % of a core".into(),
                Mode::Load,
                Unit::Pct,
                |r| Some(r.backend_cpu_pct),
            ),
            (
                "client CPU, % of a core".into(),
                Mode::Load,
                Unit::Pct,
                |r| Some(r.client_cpu_pct),
            ),
        ];
        print!("{}", figures_table(&results, Suite::Ws, &rows));
        report.insert("ws".into(), per_arm(&results, Suite::Ws, Mode::Load));
    }

    // Paired: binky's figure over nginx's in the same round.
    let mut pairs: Vec<(&str, String, Vec<f64>)> = Vec::new();
    let pair = |suite: Suite, mode: Mode, f: Fig| {
        paired(
            results.get(suite, mode, Arm::Binky),
            results.get(suite, mode, Arm::Nginx),
            f,
        )
    };
    if args.runs(Suite::Http) {
        pairs.push((
            "http_rps",
            format!("HTTP/1.1 req/s ({load_http})"),
            pair(Suite::Http, Mode::Load, |r| Some(r.rps)),
        ));
        pairs.push((
            "http_cpu_per_request",
            format!("HTTP/1.1 proxy CPU / request ({load_http})"),
            pair(Suite::Http, Mode::Load, |r| r.proxy_cpu_us_per_req),
        ));
        pairs.push((
            "http_single_rps",
            "HTTP/1.1 req/s (wrk -t1 -c1)".into(),
            pair(Suite::Http, Mode::Single, |r| Some(r.rps)),
        ));
    }
    if args.runs(Suite::H2) {
        pairs.push((
            "h2_rps",
            format!("h2 req/s ({load_h2})"),
            pair(Suite::H2, Mode::Load, |r| Some(r.rps)),
        ));
        pairs.push((
            "h2_cpu_per_request",
            format!("h2 proxy CPU / request ({load_h2})"),
            pair(Suite::H2, Mode::Load, |r| r.proxy_cpu_us_per_req),
        ));
    }
    if args.runs(Suite::Ws) {
        pairs.push((
            "ws_messages_per_s",
            format!("WebSocket messages/s ({load_ws})"),
            pair(Suite::Ws, Mode::Load, |r| Some(r.rps)),
        ));
        pairs.push((
            "ws_cpu_per_message",
            format!("WebSocket proxy CPU / message ({load_ws})"),
            pair(Suite::Ws, Mode::Load, |r| r.proxy_cpu_us_per_req),
        ));
    }
    let mut ptbl = Table::new(&[
        "binky / nginx, paired by round",
        "median",
        "min–max",
        "rounds",
    ]);
    let mut pjson = serde_json::Map::new();
    for (key, label, v) in &pairs {
        let (lo, hi) = min_max(v);
        ptbl.row_owned(&[
            label.clone(),
            format!("{:.3}", median(v)),
            format!("{lo:.3}–{hi:.3}"),
            v.iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
        pjson.insert((*key).into(), summary(v));
    }
    println!();
    print!("{}", ptbl.render());
    println!(
        "proxy CPU / request (or message): CPU time of the proxy's processes (binky: the daemon; \
         nginx: master + workers) over the run / requests (round trips) served; % of a core: the \
         same over the run's time."
    );
    println!(
        "binky daemon threads: {daemon_threads} at start, {daemon_threads_end} at end; nginx \
         proxy workers: {}",
        nginx_pids.len().saturating_sub(1)
    );
    let kept_disturbed = results
        .all()
        .filter(|r| r.other_cpu_pct > DISTURBED_PCT)
        .count();
    let others: Vec<f64> = results.all().map(|r| r.other_cpu_pct).collect();
    let repeated: u32 = results.all().map(|r| r.attempts.saturating_sub(1)).sum();
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
        let mut out = serde_json::Map::new();
        out.insert("benchmark".into(), "proxy".into());
        out.insert("machine".into(), machine.clone());
        out.insert("loadavg_at_end".into(), load_at_end.into());
        out.insert(
            "other_processes_cpu_pct_of_one_core".into(),
            summary(&others),
        );
        out.insert("disturbed_runs_repeated".into(), repeated.into());
        out.insert("disturbed_runs_kept".into(), kept_disturbed.into());
        out.insert(
            "settings".into(),
            json!({
                "only": only,
                "runs": args.runs, "duration_s": args.duration,
                "latency_duration_s": args.latency_duration, "warmup_s": args.warmup,
                "threads": t, "connections": c,
                "h2_connections": args.h2_connections, "h2_streams": args.h2_streams,
                "ws_connections": args.ws_connections, "ws_payload_bytes": WS_PAYLOAD,
                "ws_client_threads": args.threads, "ws_host": WS_HOST,
                "h2load": format!("{load_h2} -D{} --connect-to=127.0.0.1:PORT https://{HOST}/", args.duration),
                "layout": args.layout.name(),
                "quiet_wait_s": args.quiet_wait, "quiet_below_pct_of_one_core": QUIET_PCT,
                "affinity": affinity, "host": HOST, "body_bytes": BODY_LEN,
                "binky": tools.binky, "binky_commit": commit, "binky_daemon_threads": daemon_threads,
                "nginx_proxy_workers": nginx_pids.len().saturating_sub(1),
                "nginx_proxy_conf": nginx_proxy_conf(Path::new("PREFIX"), nginx_ports),
                "backend_conf": backend_conf_template(Path::new("PREFIX")),
            }),
        );
        out.insert("responses".into(), responses.into());
        out.insert(
            "targets".into(),
            json!({ "rps_ratio_binky_over_nginx": TARGET_RPS_RATIO,
                    "cpu_per_request_ratio_binky_over_nginx": TARGET_CPU_RATIO,
                    "added_p99_ms_single_connection": TARGET_ADDED_P99_MS }),
        );
        out.extend(report);
        out.insert("paired_binky_over_nginx".into(), pjson.into());
        out.insert("leftover_processes".into(), json!(sb.leftovers));
        binky_testkit::stats::write_json(path, &Value::Object(out))?;
    }
    Ok(())
}

/// A suite and mode's runs for the JSON: each figure's median, min, max and samples per arm,
/// and every run.
fn per_arm(results: &Results, suite: Suite, mode: Mode) -> Value {
    let mut m = serde_json::Map::new();
    for &arm in suite.arms() {
        let v = results.get(suite, mode, arm);
        let s = |f: Fig| summary(&col(v, f));
        let mut a = json!({
            "rps": s(|r| Some(r.rps)),
            "p50_ms": s(|r| Some(r.p50_ms)),
            "p90_ms": s(|r| Some(r.p90_ms)),
            "p99_ms": s(|r| Some(r.p99_ms)),
            "backend_cpu_pct_of_one_core": s(|r| Some(r.backend_cpu_pct)),
            "client_cpu_pct_of_one_core": s(|r| Some(r.client_cpu_pct)),
            "runs": v.iter().map(RunResult::json).collect::<Vec<_>>(),
        });
        if arm != Arm::Direct {
            a["proxy_cpu_us_per_request"] = s(|r| r.proxy_cpu_us_per_req);
            a["proxy_cpu_pct_of_one_core"] = s(|r| r.proxy_cpu_pct);
        }
        m.insert(arm.key().into(), a);
    }
    Value::Object(m)
}

/// HTTP/1.1: the figures, the checks against the issue's targets, and their JSON.
fn http_report(
    args: &Args,
    results: &Results,
    load_settings: &str,
    report: &mut serde_json::Map<String, Value>,
) {
    let s = Suite::Http;
    let med = |mode: Mode, arm: Arm, f: Fig| median(&col(results.get(s, mode, arm), f));
    let by_arm = |mode: Mode, f: Fig| -> [f64; 3] {
        [Arm::Direct, Arm::Nginx, Arm::Binky].map(|a| med(mode, a, f))
    };
    let rps = by_arm(Mode::Load, |r| Some(r.rps));
    let lp50 = by_arm(Mode::Load, |r| Some(r.p50_ms));
    let lp99 = by_arm(Mode::Load, |r| Some(r.p99_ms));
    let srps = by_arm(Mode::Single, |r| Some(r.rps));
    let sp50 = by_arm(Mode::Single, |r| Some(r.p50_ms));
    let sp90 = by_arm(Mode::Single, |r| Some(r.p90_ms));
    let sp99 = by_arm(Mode::Single, |r| Some(r.p99_ms));
    let cpu_req = by_arm(Mode::Load, |r| r.proxy_cpu_us_per_req);
    let cpu_pct = by_arm(Mode::Load, |r| r.proxy_cpu_pct);
    // The least disturbed round of each arm: on a shared machine a p99 is mostly set by
    // stalls outside the benchmark, which this filters out best.
    let sp99_min = [Arm::Direct, Arm::Nginx, Arm::Binky].map(|a| {
        col(results.get(s, Mode::Single, a), |r| Some(r.p99_ms))
            .into_iter()
            .fold(f64::NAN, f64::min)
    });
    let (d, n, b) = (0usize, 1usize, 2usize);
    let ratio_rps = rps[b] / rps[n];
    let added = |v: &[f64; 3], arm: usize| v[arm] - v[d];
    let binky_added_p99 = added(&sp99, b);
    let paired_rps = paired(
        results.get(s, Mode::Load, Arm::Binky),
        results.get(s, Mode::Load, Arm::Nginx),
        |r| Some(r.rps),
    );

    println!(
        "\n{}: throughput runs `{load_settings} -d{}s --latency`, latency runs `wrk -t1 -c1 -d{}s \
         --latency`, Host: {HOST}",
        s.title(),
        args.duration,
        args.latency_duration,
    );
    let c = args.connections;
    let rows: Vec<(String, Mode, Unit, Fig)> = vec![
        (format!("req/s -c{c}"), Mode::Load, Unit::Rate, |r| {
            Some(r.rps)
        }),
        (format!("p50 -c{c}"), Mode::Load, Unit::Ms, |r| {
            Some(r.p50_ms)
        }),
        (format!("p99 -c{c}"), Mode::Load, Unit::Ms, |r| {
            Some(r.p99_ms)
        }),
        (
            format!("proxy CPU / request -c{c}"),
            Mode::Load,
            Unit::Us,
            |r| r.proxy_cpu_us_per_req,
        ),
        (
            format!("proxy CPU, % of a core -c{c}"),
            Mode::Load,
            Unit::Pct,
            |r| r.proxy_cpu_pct,
        ),
        (
            format!("backend CPU, % of a core -c{c}"),
            Mode::Load,
            Unit::Pct,
            |r| Some(r.backend_cpu_pct),
        ),
        (
            format!("wrk CPU, % of a core -c{c}"),
            Mode::Load,
            Unit::Pct,
            |r| Some(r.client_cpu_pct),
        ),
        ("req/s -c1".into(), Mode::Single, Unit::Rate, |r| {
            Some(r.rps)
        }),
        ("p50 -c1".into(), Mode::Single, Unit::Ms, |r| Some(r.p50_ms)),
        ("p90 -c1".into(), Mode::Single, Unit::Ms, |r| Some(r.p90_ms)),
        ("p99 -c1".into(), Mode::Single, Unit::Ms, |r| Some(r.p99_ms)),
        (
            "proxy CPU / request -c1".into(),
            Mode::Single,
            Unit::Us,
            |r| r.proxy_cpu_us_per_req,
        ),
    ];
    print!("{}", figures_table(results, s, &rows));

    let mut verdicts = Table::new(&["check (medians)", "binky", "nginx", "target", "binky meets"]);
    verdicts.row_owned(&[
        format!("requests/s, binky / nginx ({load_settings})"),
        format!("{ratio_rps:.3}"),
        "1".into(),
        format!(">= {TARGET_RPS_RATIO}"),
        verdict(ratio_rps >= TARGET_RPS_RATIO).into(),
    ]);
    verdicts.row_owned(&[
        "  same, paired by round: median (min–max)".into(),
        spread_cell(&paired_rps, Unit::Ratio),
        String::new(),
        String::new(),
        String::new(),
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
    let p50_ok = added(&sp50, b) <= added(&sp50, n);
    verdicts.row_owned(&[
        "added p50 vs direct, one connection (-t1 -c1)".into(),
        fmt_added(added(&sp50, b)),
        fmt_added(added(&sp50, n)),
        "<= nginx's".into(),
        verdict(p50_ok).into(),
    ]);
    for (what, v) in [("p99", &lp99), ("p50", &lp50)] {
        verdicts.row_owned(&[
            format!("added {what} vs direct, under load ({load_settings})"),
            fmt_added(added(v, b)),
            fmt_added(added(v, n)),
            String::new(),
            String::new(),
        ]);
    }
    let cpu_ratio = cpu_req[b] / cpu_req[n];
    verdicts.row_owned(&[
        format!("proxy CPU per request ({load_settings}), ratio {cpu_ratio:.2}"),
        format!("{:.1} µs", cpu_req[b]),
        format!("{:.1} µs", cpu_req[n]),
        format!("ratio <= {TARGET_CPU_RATIO}"),
        verdict(cpu_ratio <= TARGET_CPU_RATIO).into(),
    ]);
    println!();
    print!("{}", verdicts.render());

    let three = |v: &[f64; 3]| json!({ "direct": v[d], "nginx": v[n], "binky": v[b] });
    let two = |v: &[f64; 3]| json!({ "nginx": v[n], "binky": v[b] });
    let added_two = |v: &[f64; 3]| json!({ "nginx": added(v, n), "binky": added(v, b) });
    report.insert("load".into(), per_arm(results, s, Mode::Load));
    report.insert(
        "single_connection".into(),
        per_arm(results, s, Mode::Single),
    );
    report.insert(
        "medians".into(),
        json!({
            "rps": three(&rps),
            "load_p50_ms": three(&lp50),
            "load_p99_ms": three(&lp99),
            "single_rps": three(&srps),
            "single_p50_ms": three(&sp50),
            "single_p99_ms": three(&sp99),
            "single_p90_ms": three(&sp90),
            "single_p99_ms_lowest_round": three(&sp99_min),
            "proxy_cpu_us_per_request": two(&cpu_req),
            "proxy_cpu_pct_of_one_core": two(&cpu_pct),
        }),
    );
    report.insert(
        "ratios".into(),
        json!({
            "rps_binky_over_nginx": ratio_rps,
            "rps_nginx_over_direct": rps[n] / rps[d],
            "rps_binky_over_direct": rps[b] / rps[d],
            "cpu_per_request_binky_over_nginx": cpu_req[b] / cpu_req[n],
        }),
    );
    report.insert(
        "added_latency_ms".into(),
        json!({
            "single_p50": added_two(&sp50),
            "single_p99": added_two(&sp99),
            "single_p99_lowest_round": added_two(&sp99_min),
            "single_p90": added_two(&sp90),
            "load_p50": added_two(&lp50),
            "load_p99": added_two(&lp99),
        }),
    );
    report.insert(
        "meets_targets".into(),
        json!({
            "rps_ratio": ratio_rps >= TARGET_RPS_RATIO,
            "cpu_per_request_ratio": cpu_ratio <= TARGET_CPU_RATIO,
            "added_p50_at_most_nginx": p50_ok,
            "added_p99": binky_added_p99 <= TARGET_ADDED_P99_MS,
        }),
    );
}
