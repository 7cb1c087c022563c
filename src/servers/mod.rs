//! Managed servers: when an adapter service leaves out `admin_url`, binky runs one shared
//! server per kind for the whole machine from the locally installed binaries, under
//! `$BINKY_HOME/servers/<kind>`, on loopback, with a generated admin password.
//!
//! # Guarantees
//! - Started on first need, kept across worlds and daemon restarts (adopted by pid and
//!   start time, like services); `binky servers stop` stops them.
//! - Listens on 127.0.0.1 only; the admin password is generated, kept in the store (mode
//!   0600) and never shown to services.
//! - Without the binaries, the error names the package to install.
//! - A server that dies while the daemon runs is said and started again ([`watch`]).

mod host;
pub mod mariadb;
pub mod postgres;
pub mod redis;
pub mod watch;

use std::path::PathBuf;
use std::time::Duration;

use binky_controllers::store::{self, now_ms, owner, ServerRow, ServerState, Store, StoreError};
use rusqlite::params;

use crate::paths::Home;
use crate::supervisor::procfs;

/// The kinds of server binky can run itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// PostgreSQL.
    Postgres,
    /// Redis (or Valkey).
    Redis,
    /// MariaDB, for the MySQL-family adapters (`mysql`, `mariadb`, `percona`).
    Mysql,
}

impl Kind {
    /// The first signal of a stop: PostgreSQL's backends run in sessions of their own and
    /// SIGTERM waits for every client to leave, so SIGINT (its fast, clean shutdown); else
    /// SIGTERM.
    pub fn stop_signal(self) -> nix::sys::signal::Signal {
        match self {
            Kind::Postgres => nix::sys::signal::Signal::SIGINT,
            _ => nix::sys::signal::Signal::SIGTERM,
        }
    }

    /// The managed server behind an adapter name, if binky runs that kind.
    pub fn for_adapter(adapter: &str) -> Option<Kind> {
        match adapter.split('@').next().unwrap_or(adapter) {
            "postgres" | "postgresql" => Some(Kind::Postgres),
            "redis" | "valkey" => Some(Kind::Redis),
            "mysql" | "mariadb" | "percona" => Some(Kind::Mysql),
            _ => None,
        }
    }

    /// Its name in the store and in paths.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Postgres => "postgres",
            Kind::Redis => "redis",
            Kind::Mysql => "mysql",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "postgres" => Some(Kind::Postgres),
            "redis" => Some(Kind::Redis),
            // The adapters' other names are accepted where a person types a kind.
            "mysql" | "mariadb" | "percona" => Some(Kind::Mysql),
            _ => None,
        }
    }
}

/// Why a managed server could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The binaries are not installed.
    #[error("{what} is not installed: install {package} (e.g. `sudo apt-get install {package}`), or give the service an `admin_url`")]
    Missing {
        /// What was looked for.
        what: String,
        /// The package that has it.
        package: String,
    },
    /// It would not start.
    #[error("the managed {kind} server did not start: {detail} (see {log})")]
    Start {
        /// Which kind.
        kind: &'static str,
        /// What happened.
        detail: String,
        /// Its log.
        log: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Files could not be made.
    #[error("{0}")]
    Io(String),
}

impl ServerError {
    /// Waiting (and retrying) will not help.
    pub fn permanent(&self) -> bool {
        matches!(self, ServerError::Missing { .. })
    }
}

/// What starting a server needs.
#[derive(Clone, Debug)]
pub struct StartCtx {
    /// Its data directory (made by binky, empty on first start).
    pub data_dir: PathBuf,
    /// The port to listen on (127.0.0.1).
    pub port: u16,
    /// The admin password to set (first start) or use.
    pub password: String,
    /// Its log file.
    pub log: PathBuf,
}

/// A server that started.
#[derive(Clone, Debug)]
pub struct Started {
    /// Its pid (the server process itself, leader of its own process group).
    pub pid: u32,
    /// The admin address (credentials included).
    pub admin_url: String,
    /// Its version.
    pub version: String,
}

/// The managed servers of one binky home.
pub struct Servers {
    home: Home,
    store: Store,
    lock: tokio::sync::Mutex<()>,
}

fn free_port() -> Option<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()
        .map(|a| a.port())
}

impl Servers {
    /// The managed servers of `home`.
    pub fn new(home: Home, store: Store) -> Self {
        Servers {
            home,
            store,
            lock: tokio::sync::Mutex::new(()),
        }
    }

    fn row(&self, kind: Kind) -> Result<Option<ServerRow>, StoreError> {
        Ok(self
            .store
            .read(store::servers)?
            .into_iter()
            .find(|r| r.kind == kind.as_str()))
    }

    fn alive(row: &ServerRow) -> bool {
        match (row.pid, row.start_time) {
            (Some(pid), Some(st)) => procfs::alive(pid, st),
            _ => false,
        }
    }

    /// The admin URL of the managed server of `kind`, starting it when it is not running.
    pub async fn ensure(&self, kind: Kind) -> Result<String, ServerError> {
        let _guard = self.lock.lock().await;
        let existing = self.row(kind)?;
        if let Some(row) = &existing {
            if Self::alive(row) && row.state == ServerState::Running {
                return Ok(row.admin_url.clone());
            }
        }
        let dir = self.home.root().join("servers").join(kind.as_str());
        std::fs::create_dir_all(&dir)
            .map_err(|e| ServerError::Io(format!("{}: {e}", dir.display())))?;
        // A daemon killed between starting the server and recording it left one running
        // that nothing knows: stopped, so it neither leaks nor keeps the port.
        if let Some(pid) = unrecorded_server(kind, &dir.join("data")) {
            tracing::warn!(
                kind = kind.as_str(),
                pid,
                "stopping a managed server no daemon recorded"
            );
            crate::supervisor::stop_group_with(pid, kind.stop_signal(), Duration::from_secs(10))
                .await;
        }
        // Keep the port (and password) a server had: URLs stored in slices stay valid.
        let port = existing
            .as_ref()
            .map(|r| r.port)
            .filter(|p| crate::ports::is_free(*p))
            .or_else(free_port)
            .ok_or_else(|| ServerError::Io("no free port on 127.0.0.1".into()))?;
        let password = existing
            .as_ref()
            .and_then(|r| binky_controllers::url::password_decoded(&r.admin_url))
            .unwrap_or_else(binky_controllers::slice::random_secret);
        let ctx = StartCtx {
            data_dir: dir.join("data"),
            port,
            password,
            log: dir.join("server.log"),
        };
        let started = match kind {
            Kind::Postgres => postgres::start(&ctx).await,
            Kind::Redis => redis::start(&ctx).await,
            Kind::Mysql => mariadb::start(&ctx).await,
        };
        let started = match started {
            Ok(s) => s,
            Err(err) => {
                self.record(
                    kind,
                    None,
                    port,
                    "",
                    &ctx,
                    "",
                    ServerState::Failed,
                    &err.to_string(),
                )?;
                return Err(err);
            }
        };
        let start_time = procfs::stat(started.pid).map(|s| s.start_time);
        self.record(
            kind,
            Some((started.pid, start_time.unwrap_or(0))),
            port,
            &started.admin_url,
            &ctx,
            &started.version,
            ServerState::Running,
            "",
        )?;
        tracing::info!(
            kind = kind.as_str(),
            port,
            pid = started.pid,
            "managed server started"
        );
        Ok(started.admin_url)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        kind: Kind,
        proc_: Option<(u32, u64)>,
        port: u16,
        admin_url: &str,
        ctx: &StartCtx,
        version: &str,
        state: ServerState,
        message: &str,
    ) -> Result<(), StoreError> {
        let admin_url = if admin_url.is_empty() {
            self.row(kind)?.map(|r| r.admin_url).unwrap_or_default()
        } else {
            admin_url.to_owned()
        };
        self.store.write(owner::Servers, |tx| {
            tx.execute(
                "INSERT INTO servers (kind, pid, start_time, port, admin_url, data_dir, version, state, message, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (kind) DO UPDATE SET pid = excluded.pid, start_time = excluded.start_time,
                    port = excluded.port, admin_url = excluded.admin_url, data_dir = excluded.data_dir,
                    version = excluded.version, state = excluded.state, message = excluded.message,
                    updated_at = excluded.updated_at",
                params![
                    kind.as_str(),
                    proc_.map(|p| p.0),
                    proc_.map(|p| p.1 as i64),
                    port,
                    admin_url,
                    ctx.data_dir.to_string_lossy(),
                    version,
                    state,
                    message,
                    now_ms()
                ],
            )?;
            Ok(())
        })
    }

    /// The log file of the server of `kind`.
    pub fn log_of(&self, kind: Kind) -> PathBuf {
        self.home
            .root()
            .join("servers")
            .join(kind.as_str())
            .join("server.log")
    }

    /// Record the server of `kind` as `state` (not running: its pid is cleared) with `message`.
    pub fn mark(&self, kind: Kind, state: ServerState, message: &str) -> Result<(), StoreError> {
        self.store.write(owner::Servers, |tx| {
            tx.execute(
                "UPDATE servers SET state = ?1, message = ?2, pid = NULL, start_time = NULL,
                    updated_at = ?3 WHERE kind = ?4",
                params![state, message, now_ms(), kind.as_str()],
            )?;
            Ok(())
        })
    }

    /// Stop the managed servers (all, or one kind); their data is kept.
    pub async fn stop(&self, kind: Option<Kind>) -> Result<Vec<String>, ServerError> {
        let _guard = self.lock.lock().await;
        let mut stopped = Vec::new();
        for row in self.store.read(store::servers)? {
            if kind.is_some_and(|k| k.as_str() != row.kind) {
                continue;
            }
            if Self::alive(&row) {
                if let Some(pid) = row.pid {
                    let first = Kind::parse(&row.kind)
                        .map_or(nix::sys::signal::Signal::SIGTERM, Kind::stop_signal);
                    crate::supervisor::stop_group_with(pid, first, Duration::from_secs(10)).await;
                }
                stopped.push(row.kind.clone());
            }
            self.store.write(owner::Servers, |tx| {
                tx.execute(
                    "UPDATE servers SET state = 'stopped', pid = NULL, start_time = NULL, updated_at = ?1 WHERE kind = ?2",
                    params![now_ms(), row.kind],
                )?;
                Ok(())
            })?;
        }
        Ok(stopped)
    }
}

/// Managed-server data left behind by a binky home that no longer exists.
#[derive(Clone, Debug)]
pub struct OrphanData {
    /// `postgres` or `mysql`.
    pub kind: &'static str,
    /// The directory (`/var/lib/binky/<kind>/<random>`), data and all.
    pub dir: PathBuf,
    /// The binky home that made it (the link its `owner` file names), if it says.
    pub home: Option<PathBuf>,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Data directories of managed servers whose binky home is gone. Only binky run as root
/// keeps data outside its home (under `/var/lib/binky/<kind>/`, see [`postgres`]); the
/// daemon removes such directories itself when it next starts a server of that kind,
/// `binky gc` finds them at any time.
pub fn orphaned_data() -> Vec<OrphanData> {
    let mut out = Vec::new();
    for server in [&postgres::SERVER, &mariadb::SERVER] {
        for dir in server.orphans(std::path::Path::new(server.root_data_base)) {
            let home = std::fs::read(dir.join("owner")).ok().map(|b| {
                // The owner names `<home>/servers/<kind>/data`.
                let link = PathBuf::from(String::from_utf8_lossy(&b).into_owned());
                link.ancestors().nth(3).map(PathBuf::from).unwrap_or(link)
            });
            out.push(OrphanData {
                kind: server.kind,
                bytes: dir_size(&dir),
                dir,
                home,
            });
        }
    }
    out
}

/// The bytes of the files under `dir` (symlinks not followed).
fn dir_size(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Spawn a server process detached: its own process group, output to `log`, surviving the
/// daemon. Returns its pid.
pub fn spawn_detached(
    cmd: &mut std::process::Command,
    log: &std::path::Path,
) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0);
    let mut child = cmd.spawn()?;
    let pid = child.id();
    // Reap it if it exits while this daemon lives; it normally outlives the daemon.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
}

/// The pid of a server of `kind` still running on `data` (its pid file names a live process
/// whose working directory is `data`: PostgreSQL, MariaDB and binky's Redis all run there).
fn unrecorded_server(kind: Kind, data: &std::path::Path) -> Option<u32> {
    let file = match kind {
        Kind::Postgres => "postmaster.pid",
        Kind::Mysql => "mariadbd.pid",
        Kind::Redis => "redis.pid",
    };
    let pid = host::live_pid_in(data, file)?;
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    (std::fs::canonicalize(data).ok()? == cwd).then_some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_map_to_managed_kinds() {
        assert_eq!(Kind::for_adapter("postgres@16"), Some(Kind::Postgres));
        assert_eq!(Kind::for_adapter("valkey"), Some(Kind::Redis));
        assert_eq!(Kind::for_adapter("mysql"), Some(Kind::Mysql));
        assert_eq!(Kind::for_adapter("percona@8"), Some(Kind::Mysql));
        assert_eq!(Kind::parse("mariadb").map(Kind::as_str), Some("mysql"));
        assert_eq!(Kind::for_adapter("mongodb"), None);
    }
}
