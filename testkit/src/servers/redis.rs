//! A private `redis-server`: `--save "" --appendonly no`, `requirepass` set, on a free
//! loopback port, in a temp dir.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::stop::check_stop;
use crate::Res;

/// What to say when redis-server is not there.
pub const MISSING: &str = "redis-server is not installed: run ./scripts/test, which installs \
                           it (or `apt-get install redis-server`)";

/// `redis-server` (or `valkey-server`) on PATH, the way binky's managed redis finds it.
pub fn redis_binary() -> Option<PathBuf> {
    ["redis-server", "valkey-server"]
        .iter()
        .find_map(|n| crate::run::on_path(n))
}

/// A connection to `url` (which carries its credentials), bounded to 5 s.
pub fn connect(url: &str) -> Res<redis::Connection> {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .map_err(|e| format!("redis connect: {e}"))
}

/// A private redis-server; killed and its directory removed on drop.
pub struct RedisServer {
    /// `redis://default:<password>@127.0.0.1:<port>/0`.
    pub admin_url: String,
    /// Its port.
    pub port: u16,
    /// The `default` user's password.
    pub password: String,
    /// Its directory (log in `redis.log`).
    pub dir: PathBuf,
    /// The program it runs.
    pub bin: PathBuf,
    child: Child,
    _tmp: tempfile::TempDir,
}

impl RedisServer {
    /// Start one and wait until an authenticated PING answers.
    pub fn start() -> Res<RedisServer> {
        RedisServer::start_with(&[])
    }

    /// Start one with `extra` arguments (`["--databases", "3"]`) and wait until an
    /// authenticated PING answers.
    pub fn start_with(extra: &[&str]) -> Res<RedisServer> {
        let bin = redis_binary().ok_or(MISSING)?;
        let tmp = tempfile::Builder::new()
            .prefix("binky-redis-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let password = crate::random_secret();
        // A port taken between the probe and the bind makes redis exit: try another.
        for _ in 0..5 {
            let port = crate::net::free_port();
            let mut child = Command::new(&bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--requirepass", &password])
                .arg("--dir")
                .arg(tmp.path())
                .arg("--logfile")
                .arg(tmp.path().join("redis.log"))
                .args(["--daemonize", "no", "--protected-mode", "yes"])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| format!("spawn redis-server: {e}"))?;
            let admin_url = format!("redis://default:{password}@127.0.0.1:{port}/0");
            if wait_ready(&mut child, &admin_url) {
                return Ok(RedisServer {
                    admin_url,
                    port,
                    password,
                    dir: tmp.path().to_owned(),
                    bin,
                    child,
                    _tmp: tmp,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            check_stop()?;
        }
        Err(format!(
            "redis-server did not start: {}",
            std::fs::read_to_string(tmp.path().join("redis.log")).unwrap_or_default()
        ))
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait (10 s at most) until `url` answers PING, or the child exits.
fn wait_ready(child: &mut Child, url: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && check_stop().is_ok() {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        let pong = redis::Client::open(url)
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
        if pong.is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
