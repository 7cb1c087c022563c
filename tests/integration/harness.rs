//! Shared helpers: a temp git repository with a `binky.toml`, an isolated `BINKY_HOME`, the
//! real `binky` binary, and waits on conditions instead of sleeps.

#![allow(dead_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub use binky_testkit::git::git_in;
pub use binky_testkit::net::{bindable, free_port, listening};
pub use binky_testkit::procs::alive;
pub use binky_testkit::wait::wait_until;

/// The binary under test.
pub fn binky_bin() -> &'static str {
    env!("CARGO_BIN_EXE_binky")
}

/// A block of ports held for one test (a lock file per block, so tests running in
/// parallel processes never share a range).
pub struct PortBlock {
    pub low: u16,
    pub high: u16,
    _lock: File,
}

impl PortBlock {
    pub fn take() -> PortBlock {
        let dir = std::env::temp_dir().join("binky-test-ports");
        std::fs::create_dir_all(&dir).unwrap();
        // 10000..32000 stays clear of the kernel's ephemeral range (32768+).
        let mut base = 10000 + (std::process::id() % 440) as u16 * 50;
        for _ in 0..440 {
            let path = dir.join(format!("{base}.lock"));
            let f = File::create(&path).unwrap();
            let rc = unsafe { libc_flock(f.as_raw_fd()) };
            if rc == 0 {
                return PortBlock {
                    low: base,
                    high: base + 49,
                    _lock: f,
                };
            }
            base += 50;
            if base >= 32000 {
                base = 10000;
            }
        }
        panic!("no free port block for the test");
    }
}

unsafe fn libc_flock(fd: i32) -> i32 {
    extern "C" {
        fn flock(fd: i32, op: i32) -> i32;
    }
    const LOCK_EX: i32 = 2;
    const LOCK_NB: i32 = 4;
    flock(fd, LOCK_EX | LOCK_NB)
}

/// One test's world: a repository, a home, a port block.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub ports: PortBlock,
}

/// A tiny HTTP server (in every test repository): answers any request with its
/// environment as JSON. Starts in a few tens of milliseconds.
pub const SERVER_PY: &str = r#"
import hashlib, json, os, socket, sys, time
port = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ["PORT"])
delay = float(os.environ.get("LISTEN_DELAY", "0"))
if delay:
    time.sleep(delay)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(128)
print("listening on", port, flush=True)
while True:
    c, _ = s.accept()
    try:
        req = b""
        while b"\r\n\r\n" not in req:
            chunk = c.recv(65536)
            if not chunk:
                break
            req += chunk
        head, _, rest = req.partition(b"\r\n\r\n")
        parts = head.split(b" ")
        path = parts[1] if len(parts) > 1 else b"/"
        if path == b"/stream":
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            for i in range(3):
                c.sendall(b"6\r\nchunk%d\r\n" % i)
                time.sleep(0.4)
            c.sendall(b"0\r\n\r\n")
            continue
        if path == b"/echo":
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            body = rest
            while len(body) < length:
                chunk = c.recv(1 << 20)
                if not chunk:
                    break
                body += chunk
            out = json.dumps({"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}).encode()
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
            continue
        doc = dict(os.environ)
        doc["_request"] = head.decode("latin-1")
        body = json.dumps(doc).encode()
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    finally:
        c.close()
"#;

/// A directory `scripts/test` installs into its cache (`~/.cache/binky-test/<sub>`, or what
/// the environment variable `var` names), holding every one of `files`; a test that needs
/// it fails, never skips, when it is not there, saying what to run.
pub fn test_cache(var: &str, sub: &str, files: &[&str]) -> PathBuf {
    let dir = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".cache/binky-test")
            .join(sub)
    });
    let missing: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| !dir.join(f).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "{} not in {}: run ./scripts/test (it installs them)",
        missing.join(", "),
        dir.display()
    );
    dir
}

/// The command that runs [`SERVER_PY`] on the service's port.
pub const SERVE: &str = "exec python3 server.py ${self.port}";

impl Env {
    /// A repository holding `binky.toml` (with `{range}` replaced by this test's port range).
    pub fn new(toml: &str) -> Env {
        Env::in_dir(tempfile::tempdir().unwrap(), toml)
    }

    /// As [`Env::new`], with the test's directory (repository, worktrees, home) made in
    /// `base` (a filesystem of the test's choosing).
    pub fn new_in(base: &Path, toml: &str) -> Env {
        Env::in_dir(tempfile::tempdir_in(base).unwrap(), toml)
    }

    fn in_dir(dir: tempfile::TempDir, toml: &str) -> Env {
        let repo = dir.path().join("repo");
        let home = dir.path().join("home");
        let ports = PortBlock::take();
        let env = Env {
            dir,
            repo,
            home,
            ports,
        };
        binky_testkit::git::init_repo(&env.repo);
        env.write_config(toml);
        std::fs::write(env.repo.join("server.py"), SERVER_PY).unwrap();
        binky_testkit::git::commit_all(&env.repo, "init");
        // Every test's daemon serves its proxy on its own ports.
        let (p, s) = (env.proxy_port().to_string(), env.https_port().to_string());
        env.ok(&["port", "--proxy", &p, "--https", &s]);
        // Tests run many at once on a busy machine: a service failing its checks is
        // restarted whatever the CPU pressure (the hold is tested with a fake supervisor).
        env.ok(&["settings", "restart_hold_cpu_percent=0"]);
        env
    }

    /// A second repository `name` in this test's directory, in the same home: project `name`
    /// with one long-running process service `job`, committed. Its path.
    pub fn other_project(&self, name: &str) -> PathBuf {
        let other = self.dir.path().join(name);
        binky_testkit::git::init_repo(&other);
        std::fs::write(
            other.join("binky.toml"),
            format!(
                "[project]\nname = \"{name}\"\n{}\n\n[services.job]\ncmd = \"sleep 600\"\n",
                self.range()
            ),
        )
        .unwrap();
        binky_testkit::git::commit_all(&other, "init");
        other
    }

    /// The port range line for `[project]` (the block's last ten ports are the proxy's).
    pub fn range(&self) -> String {
        format!("port_range = [{}, {}]", self.ports.low, self.ports.low + 39)
    }

    /// The proxy's HTTP port in this test.
    pub fn proxy_port(&self) -> u16 {
        self.ports.low + 44
    }

    /// The proxy's HTTPS port in this test.
    pub fn https_port(&self) -> u16 {
        self.ports.low + 47
    }

    pub fn write_config(&self, toml: &str) {
        std::fs::write(
            self.repo.join("binky.toml"),
            toml.replace("{range}", &self.range()),
        )
        .unwrap();
    }

    pub fn git(&self, args: &[&str]) -> String {
        git_in(&self.repo, args)
    }

    /// Run binky in the repository.
    pub fn binky(&self, args: &[&str]) -> Output {
        self.binky_in(&self.repo, args)
    }

    /// Run binky in the repository with extra environment variables.
    pub fn binky_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(binky_bin());
        cmd.args(args)
            .current_dir(&self.repo)
            .env("BINKY_HOME", &self.home)
            .envs(vars.iter().copied());
        // The test is the person: approving and settings get a terminal.
        let _terminal = binky_testkit::terminal::for_person(&mut cmd, args);
        let out = cmd.output().unwrap();
        self.settle_removal(args, &out);
        out
    }

    /// Run binky in `dir`. A `binky remove` that succeeded returns once the daemon has
    /// finished the removal (dropped the world's slices, which the command leaves to it), so
    /// a test can look at the servers right after; `raw_remove` does not wait.
    pub fn binky_in(&self, dir: &Path, args: &[&str]) -> Output {
        let out = self.raw_in(dir, args);
        self.settle_removal(args, &out);
        out
    }

    /// Run binky in `dir`, as it returns.
    pub fn raw_in(&self, dir: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(binky_bin());
        cmd.args(args)
            .current_dir(dir)
            .env("BINKY_HOME", &self.home)
            .env_remove("BINKY_WORKTREE_ROOT");
        let _terminal = binky_testkit::terminal::for_person(&mut cmd, args);
        cmd.output().unwrap()
    }

    /// After a `binky remove` that succeeded (and waited): until no world is `removing`.
    fn settle_removal(&self, args: &[&str], out: &Output) {
        if args.first() != Some(&"remove") || args.contains(&"--no-wait") || !out.status.success() {
            return;
        }
        wait_until(
            "the removal's slices dropped",
            Duration::from_secs(60),
            || {
                let status = self.raw_in(&self.repo, &["status", "--json"]);
                let v: serde_json::Value =
                    serde_json::from_slice(&status.stdout).unwrap_or(serde_json::Value::Null);
                !v["worlds"]
                    .as_array()
                    .is_some_and(|ws| ws.iter().any(|w| w["state"] == "removing"))
            },
        );
    }

    /// Run binky and insist on exit 0.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.binky(args);
        assert!(
            out.status.success(),
            "binky {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn worktree(&self, name: &str) -> PathBuf {
        self.dir.path().join("repo.worktrees").join(name)
    }

    /// `binky status --json`.
    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "--json"])).unwrap()
    }

    /// `binky env NAME --json` → the env map.
    pub fn env_of(&self, world: &str) -> serde_json::Map<String, serde_json::Value> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ok(&["env", world, "--json"])).unwrap();
        v["env"].as_object().unwrap().clone()
    }

    pub fn port_of(&self, world: &str, service: &str) -> u16 {
        let key = format!("{}_PORT", service.to_uppercase().replace('-', "_"));
        self.env_of(world)[&key].as_str().unwrap().parse().unwrap()
    }

    /// The world's services from `binky status NAME --json`.
    pub fn services(&self, world: &str) -> Vec<serde_json::Value> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ok(&["status", world, "--json"])).unwrap();
        v["services"].as_array().unwrap().clone()
    }

    pub fn pid_of(&self, world: &str, service: &str) -> Option<u32> {
        self.services(world)
            .iter()
            .find(|s| s["name"] == service)
            .and_then(|s| s["pid"].as_u64())
            .map(|p| p as u32)
    }

    /// Processes started by this home (they carry its spawn token), alive (not zombies).
    pub fn our_processes(&self) -> Vec<u32> {
        let tag = home_tag(&self.home);
        binky_testkit::procs::with_env_prefix(&format!("BINKY_SPAWN_TOKEN={tag}."))
    }

    pub fn daemon_pid(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.home.join("daemon.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        alive(pid).then_some(pid)
    }

    /// Log scrubbers (`binky __scrub`) writing into this test's home, alive.
    pub fn our_scrubbers(&self) -> Vec<u32> {
        let home = self.home.display().to_string();
        binky_testkit::procs::with_cmdline(&["__scrub", &home])
    }

    /// Assert no process, worktree or port of this test is left.
    pub fn assert_nothing_left(&self, worlds: &[&str]) {
        wait_until("no processes left", Duration::from_secs(10), || {
            self.our_processes().is_empty()
        });
        wait_until("no log scrubber left", Duration::from_secs(5), || {
            self.our_scrubbers().is_empty()
        });
        wait_until("no cgroup of the home left", Duration::from_secs(5), || {
            self.home_cgroups().is_empty()
        });
        for w in worlds {
            assert!(!self.worktree(w).exists(), "worktree of {w} left behind");
        }
        // `binky remove` leaves the drop of a world's slices to the daemon: the world is
        // listed (removing) until it is done.
        let mut status = self.status();
        wait_until("no world left", Duration::from_secs(30), || {
            status = self.status();
            status["worlds"].as_array().unwrap().is_empty()
        });
        assert_eq!(
            status["worlds"].as_array().unwrap().len(),
            0,
            "worlds left: {status}"
        );
        let root = self.dir.path().join("repo.worktrees");
        assert!(!root.exists(), "{} left behind", root.display());
    }
}

impl Env {
    /// The data directories of this home's managed servers: `servers/` in the home, and the
    /// copies kept outside it (`/var/lib/binky/<kind>/<random>/data`, linked from the home)
    /// when the tests run as root.
    fn managed_server_dirs(&self) -> Vec<PathBuf> {
        let servers = self.home.join("servers");
        let mut dirs = vec![servers.clone()];
        for kind in ["postgres", "mysql"] {
            if let Ok(data) = std::fs::read_link(servers.join(kind).join("data")) {
                dirs.push(data);
            }
        }
        dirs
    }

    /// Managed servers of this home still running (a server runs in its data directory).
    pub fn our_servers(&self) -> Vec<u32> {
        let dirs = self.managed_server_dirs();
        let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        binky_testkit::procs::with_cwd_in(&dirs)
    }

    /// Everything of this test still alive: processes with its spawn token, its log
    /// scrubbers, its managed servers, and any process whose environment names its home or
    /// whose working directory is inside its temp dir.
    pub fn leftovers(&self) -> Vec<u32> {
        let mut pids = self.our_processes();
        pids.extend(self.our_scrubbers());
        pids.extend(self.our_servers());
        pids.extend(binky_testkit::procs::sandbox_processes(
            &self.home,
            self.dir.path(),
        ));
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}

/// Where this process's cgroups are, one per mounted hierarchy (the daemons the tests start
/// are in the same ones, and make their home's `binky-<tag>` there).
pub fn own_cgroup_dirs() -> Vec<PathBuf> {
    use binky_platform::limits::cgroup::detect::{own_dir, parse_memberships, parse_mounts};
    let mounts = parse_mounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default());
    let me = parse_memberships(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default());
    let mut dirs = Vec::new();
    for m in &mounts {
        for c in &me {
            let same = if m.v2 {
                c.controllers.is_empty()
            } else {
                c.controllers.iter().any(|x| m.controllers.contains(x))
            };
            if let Some(d) = own_dir(m, &c.path).filter(|_| same) {
                dirs.push(d);
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

impl Env {
    /// This home's cgroup directories (`binky-<tag>`) that exist.
    pub fn home_cgroups(&self) -> Vec<PathBuf> {
        let name = format!("binky-{}", home_tag(&self.home));
        own_cgroup_dirs()
            .into_iter()
            .map(|d| d.join(&name))
            .filter(|d| d.is_dir())
            .collect()
    }

    /// Remove what is left of this home's cgroups once its processes are gone (a test that
    /// ends with worlds up leaves them: binky removes a world's cgroups with the world).
    fn remove_cgroups(&self) -> bool {
        for home in self.home_cgroups() {
            let worlds = std::fs::read_dir(&home).into_iter().flatten().flatten();
            for w in worlds.filter(|e| e.path().is_dir()) {
                let leaves = std::fs::read_dir(w.path()).into_iter().flatten().flatten();
                for leaf in leaves.filter(|e| e.path().is_dir()) {
                    let _ = std::fs::remove_dir(leaf.path());
                }
                let _ = std::fs::remove_dir(w.path());
            }
            let _ = std::fs::remove_dir(&home);
        }
        self.home_cgroups().is_empty()
    }
}

/// Every file under `dir` (relative path → mode and content), symlinks as their target.
pub fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<String, (u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.insert(rel, (0, target.display().to_string().into_bytes()));
            } else if meta.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, (meta.permissions().mode(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// `pid cmdline`, one a line.
fn describe(pids: &[u32]) -> String {
    pids.iter()
        .map(|p| format!("  {p} {}", binky_testkit::procs::cmdline(*p)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A test fails when binky leaves anything running behind it: `servers stop` must stop the
/// managed servers, and once the daemon is stopped and the worlds' processes (those with
/// this home's spawn token) are killed, nothing of the test may be left alive. Whatever is
/// left is killed either way; a test that already fails is not failed twice.
impl Drop for Env {
    fn drop(&mut self) {
        let mut failures = Vec::new();
        // Managed servers (started for adapter services without admin_url) go too.
        let _ = Command::new(binky_bin())
            .args(["servers", "stop"])
            .env("BINKY_HOME", &self.home)
            .output();
        let servers_gone = binky_testkit::wait::wait_for(
            Duration::from_secs(10),
            Duration::from_millis(50),
            || self.our_servers().is_empty(),
        );
        if !servers_gone {
            let left = self.our_servers();
            failures.push(format!(
                "managed servers still running after `binky servers stop`:\n{}",
                describe(&left)
            ));
        }
        let _ = Command::new(binky_bin())
            .args(["daemon", "stop"])
            .env("BINKY_HOME", &self.home)
            .output();
        for pid in self.our_processes() {
            unsafe {
                kill(-(pid as i32), 9);
                kill(pid as i32, 9);
            }
        }
        for pid in self.our_scrubbers() {
            unsafe {
                kill(pid as i32, 9);
            }
        }
        let clean = binky_testkit::wait::wait_for(
            Duration::from_secs(5),
            Duration::from_millis(50),
            || self.leftovers().is_empty(),
        );
        if !clean {
            let left = self.leftovers();
            failures.push(format!(
                "processes left running after the daemon stopped and the worlds' processes \
                 were killed:\n{}",
                describe(&left)
            ));
            for pid in left {
                unsafe {
                    kill(-(pid as i32), 9);
                    kill(pid as i32, 9);
                }
            }
        }
        // Cgroups whose processes were killed above (a test may end with worlds up).
        binky_testkit::wait::wait_for(Duration::from_secs(5), Duration::from_millis(50), || {
            self.remove_cgroups()
        });
        // A managed PostgreSQL or MariaDB run as root keeps its data outside the home
        // (/var/lib/binky/<kind>/<random>/data, linked from the home): remove it too.
        for kind in ["postgres", "mysql"] {
            let link = self.home.join("servers").join(kind).join("data");
            if let Ok(data) = std::fs::read_link(link) {
                if let Some(dir) = data.parent().filter(|d| d.starts_with("/var/lib/binky/")) {
                    let _ = std::fs::remove_dir_all(dir);
                }
            }
        }
        if !failures.is_empty() && !std::thread::panicking() {
            panic!("{}", failures.join("\n"));
        }
    }
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// Send a signal to a pid.
pub fn signal(pid: u32, sig: i32) {
    unsafe {
        kill(pid as i32, sig);
    }
}

/// The identity of the home at `home` (its store's), which its slices' names and marks carry.
pub fn home_id(home: &Path) -> String {
    binky_controllers::store::Store::open(&home.join("state.db"))
        .and_then(|s| s.read(binky_controllers::store::home_id))
        .unwrap_or_else(|e| panic!("the identity of home {}: {e}", home.display()))
}

impl Env {
    /// This test's home's identity.
    pub fn home_id(&self) -> String {
        home_id(&self.home)
    }

    /// The name this home gives the slice of `service` in `world` of `project`.
    pub fn slice_name(&self, project: &str, world: &str, service: &str) -> String {
        binky_controllers::adapter::slice_name(&self.home_id(), project, world, service)
    }
}

/// The home's tag, as binky computes it.
pub fn home_tag(home: &Path) -> String {
    binky::paths::Home::at(home.to_owned()).tag()
}

/// The environment a test server on `port` runs with.
pub fn served_env(port: u16) -> serde_json::Value {
    let text = http_get(port, "/");
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON from :{port}: {e}: {text}"))
}

/// What the test server on `port` answers, or `None` while it is not there (yet) or
/// restarting: for `wait_until` loops, where a server may go between two checks.
pub fn try_served_env(port: u16) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    serde_json::from_str(out.split("\r\n\r\n").nth(1)?).ok()
}

/// GET `path` of `host` through this test's proxy (no DNS: the `Host` header says where);
/// the whole answer, or `None` when the proxy does not answer at all.
pub fn through_proxy(proxy_port: u16, host: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy_port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The status code of an HTTP answer (0 when there is none).
pub fn status_code(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The JSON body of an answer of the test server ([`SERVER_PY`]: its environment).
pub fn body_json(answer: &str) -> Option<serde_json::Value> {
    serde_json::from_str(answer.split("\r\n\r\n").nth(1)?).ok()
}

/// GET a path on a loopback port; the whole answer.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // One write: a request split over several segments could meet a server that has
    // already answered and closed.
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A managed server's files in a temp binky home (`servers/<kind>/`); kills the server and
/// removes its data on drop (also the copy kept outside the home when the tests run as root).
pub struct Managed {
    /// The temp binky home.
    pub home: tempfile::TempDir,
    /// What the server's `start` takes.
    pub ctx: binky::servers::StartCtx,
    /// The server's pid once started.
    pub pid: Option<u32>,
}

impl Managed {
    /// Files for a server of `kind` (`postgres`, `mysql`), not started.
    pub fn new(kind: &str) -> Managed {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        // As `Home::ensure` leaves a binky home.
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let dir = home.path().join("servers").join(kind);
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = binky::servers::StartCtx {
            data_dir: dir.join("data"),
            port: free_port(),
            password: binky_controllers::adapter::random_secret().unwrap(),
            log: dir.join("server.log"),
        };
        Managed {
            home,
            ctx,
            pid: None,
        }
    }

    /// The real data directory (through the symlink, when root).
    pub fn data(&self) -> PathBuf {
        std::fs::canonicalize(&self.ctx.data_dir).unwrap()
    }

    /// binky's own stop (SIGTERM to the group, SIGKILL after the grace); the server must
    /// be gone after it.
    pub fn stop(&mut self, rt: &tokio::runtime::Runtime) {
        if let Some(pid) = self.pid.take() {
            rt.block_on(binky::supervisor::stop_group(pid, Duration::from_secs(10)));
            assert!(!alive(pid), "server {pid} survived the stop");
        }
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let until = Instant::now() + Duration::from_secs(5);
            while alive(pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Ok(target) = std::fs::read_link(&self.ctx.data_dir) {
            if let Some(entry) = target.parent() {
                let _ = std::fs::remove_dir_all(entry);
            }
        }
    }
}

#[test]
fn the_harness_fails_a_test_that_leaves_a_process_running() {
    let env = Env::new("[project]\nname = \"left\"\n{range}\n");
    // Not binky's: no spawn token, so only the sandbox check can find it.
    let mut child = Command::new("sleep")
        .arg("300")
        .current_dir(&env.repo)
        .env_remove("BINKY_SPAWN_TOKEN")
        .spawn()
        .unwrap();
    let pid = child.id();
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(env)));
    let message = dropped
        .expect_err("the harness let a leftover process pass")
        .downcast::<String>()
        .map(|s| *s)
        .unwrap_or_default();
    assert!(message.contains("left running"), "{message}");
    assert!(message.contains(&pid.to_string()), "{message}");
    let _ = child.wait();
    assert!(!alive(pid), "the leftover {pid} was not killed");
}
