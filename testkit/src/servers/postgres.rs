//! A private PostgreSQL cluster: its own data directory in a temp dir, a free loopback port,
//! scram authentication with a generated superuser password, fast and unsafe settings
//! (`fsync=off` …) unless asked otherwise; run as the `postgres` user when we are root.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::stop::check_stop;
use crate::Res;

/// Field separator in [`psql`] output (ASCII unit separator: never in test data).
const SEP: char = '\u{1f}';

/// What to say when PostgreSQL is not there.
pub const MISSING: &str = "PostgreSQL is not installed (no initdb, postgres and psql under \
                           /usr/lib/postgresql/*/bin or on PATH): run ./scripts/test, which \
                           installs it";

/// The `bin` directory of the newest installed PostgreSQL, if any.
pub fn pg_bin_dir() -> Option<PathBuf> {
    let has_all = |d: &Path| {
        ["initdb", "postgres", "psql"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e
                .file_name()
                .to_string_lossy()
                .split('.')
                .next()?
                .parse()
                .ok()?;
            Some((major, e.path().join("bin")))
        })
        .filter(|(_, d)| has_all(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Some(d);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("initdb"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .filter(|d| has_all(d))
}

/// Run `sql` with `psql` against `url`: the rows (fields as text, NULL as ""), or psql's
/// error output.
pub fn psql(bin_dir: &Path, url: &str, sql: &str) -> Res<Vec<Vec<String>>> {
    let out = Command::new(bin_dir.join("psql"))
        .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-F"])
        .arg(SEP.to_string())
        .args(["-d", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split(SEP).map(str::to_owned).collect())
        .collect())
}

/// How to make the cluster.
pub struct Options {
    /// The installation (`None`: [`pg_bin_dir`]).
    pub bin_dir: Option<PathBuf>,
    /// Where the temp dir goes (`None`: the system's temp dir).
    pub parent: Option<PathBuf>,
    /// The temp dir's name prefix.
    pub prefix: String,
    /// Keep PostgreSQL's durability (`false`: `fsync`, `full_page_writes` and
    /// `synchronous_commit` off).
    pub fsync: bool,
    /// More `-c name=value` settings.
    pub settings: Vec<String>,
    /// Is the server up: given the admin URL (`None`: `SELECT 1` through psql).
    pub ready: Option<fn(&str) -> bool>,
    /// How often readiness is checked.
    pub poll: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bin_dir: None,
            parent: None,
            prefix: "binky-pg-".into(),
            fsync: false,
            settings: Vec::new(),
            ready: None,
            poll: Duration::from_millis(50),
        }
    }
}

/// A private PostgreSQL server; stopped (immediate shutdown) and its files removed on drop.
pub struct PgServer {
    /// `postgres://postgres:<password>@127.0.0.1:<port>/postgres`.
    pub admin_url: String,
    /// Its loopback port.
    pub port: u16,
    /// The superuser's password.
    pub password: String,
    /// The postmaster's pid (also its process group).
    pub pid: u32,
    /// The installation's `bin` directory (`psql`, …).
    pub bin_dir: PathBuf,
    /// The cluster's data directory.
    pub data_dir: PathBuf,
    /// How long initdb took.
    pub initdb_time: Duration,
    /// From spawning the postmaster to its answering (the last attempt).
    pub start_time: Duration,
    child: Child,
    /// Data, socket and logs; removed on drop.
    pub dir: tempfile::TempDir,
}

impl PgServer {
    /// A server with the [`Options::default`] (fast, unsafe, in the temp dir).
    pub fn start() -> Res<PgServer> {
        PgServer::start_with(Options::default())
    }

    /// Start a private server and wait until it takes authenticated connections.
    pub fn start_with(opts: Options) -> Res<PgServer> {
        let bin_dir = match opts.bin_dir {
            Some(d) => d,
            None => pg_bin_dir().ok_or(MISSING)?,
        };
        let user = super::run_as("postgres", "postgresql")?;
        let mut builder = tempfile::Builder::new();
        builder.prefix(&opts.prefix);
        let dir = match &opts.parent {
            Some(p) => builder.tempdir_in(p),
            None => builder.tempdir(),
        }
        .map_err(|e| format!("tempdir: {e}"))?;
        let io = |e: std::io::Error| format!("postgres dir: {e}");
        // The postgres user must be able to pass through to its data directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).map_err(io)?;
        let data = dir.path().join("data");
        std::fs::create_dir(&data).map_err(io)?;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        let password = crate::random_secret();
        let pwfile = dir.path().join("pwfile");
        std::fs::write(&pwfile, format!("{password}\n")).map_err(io)?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).map_err(io)?;
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).map_err(io)?;
        }
        let started = Instant::now();
        let initdb_log = dir.path().join("initdb.log");
        let log = std::fs::File::create(&initdb_log).map_err(io)?;
        let mut initdb = Command::new(bin_dir.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=scram-sha-256", "-E", "UTF8"])
            .args(["--locale=C", "-N"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io)?)
            .stderr(log);
        if let Some((uid, gid)) = user {
            initdb.uid(uid).gid(gid);
        }
        let status = initdb.status().map_err(|e| format!("initdb: {e}"))?;
        let _ = std::fs::remove_file(&pwfile);
        if !status.success() {
            return Err(format!(
                "initdb failed ({status}): {}",
                std::fs::read_to_string(&initdb_log).unwrap_or_default()
            ));
        }
        let initdb_time = started.elapsed();

        let log_path = dir.path().join("postgres.log");
        for _attempt in 0..5 {
            let started = Instant::now();
            let port = crate::net::free_port();
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(io)?;
            let mut cmd = Command::new(bin_dir.join("postgres"));
            cmd.arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
                .arg("-k")
                .arg(&data);
            for s in &opts.settings {
                cmd.args(["-c", s]);
            }
            if !opts.fsync {
                cmd.args(["-c", "fsync=off", "-c", "full_page_writes=off"])
                    .args(["-c", "synchronous_commit=off"]);
            }
            cmd.current_dir("/")
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(io)?)
                .stderr(log)
                .process_group(0);
            if let Some((uid, gid)) = user {
                cmd.uid(uid).gid(gid);
            }
            let mut child = cmd.spawn().map_err(|e| format!("spawn postgres: {e}"))?;
            let admin_url = format!("postgres://postgres:{password}@127.0.0.1:{port}/postgres");
            let until = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
                    if text.contains("could not bind") || text.contains("already in use") {
                        break; // Someone took the port meanwhile: another one.
                    }
                    return Err(format!("postgres exited ({status}):\n{text}"));
                }
                let up = match opts.ready {
                    Some(ready) => ready(&admin_url),
                    None => psql(&bin_dir, &admin_url, "SELECT 1").is_ok(),
                };
                if up {
                    return Ok(PgServer {
                        admin_url,
                        port,
                        password,
                        pid: child.id(),
                        bin_dir,
                        data_dir: data,
                        initdb_time,
                        start_time: started.elapsed(),
                        child,
                        dir,
                    });
                }
                if Instant::now() > until || check_stop().is_err() {
                    let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                    let _ = child.wait();
                    return Err(format!(
                        "postgres not ready after 30 s:\n{}",
                        std::fs::read_to_string(&log_path).unwrap_or_default()
                    ));
                }
                std::thread::sleep(opts.poll);
            }
        }
        Err("no free port for postgres after 5 attempts".into())
    }

    /// Rows of `sql` run at `url` through psql, or psql's error output.
    pub fn try_query(&self, url: &str, sql: &str) -> Res<Vec<Vec<String>>> {
        psql(&self.bin_dir, url, sql)
    }

    /// Stop the server now (immediate shutdown: the postmaster takes its backends with it);
    /// its process group is killed if it takes more than 10 s. Drop does the same.
    pub fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGQUIT);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}
