//! Managed servers: when an adapter service leaves out `admin_url`, binky runs one shared
//! server per kind for the whole machine from the locally installed binaries, under
//! `$BINKY_HOME/servers/<kind>`, on loopback, with a generated admin password; and, for
//! Redis, a small server of each world's own ([`ServerName`]), under
//! `$BINKY_HOME/servers/redis/worlds/<slice>`, whose password is the slice's secret.
//!
//! # Guarantees
//! - Started on first need, kept across worlds and daemon restarts (adopted by pid and
//!   start time, like services); `binky servers stop` stops them.
//! - A world's own server is stopped (data kept) when its world goes down, started again
//!   with the world, and removed with its files when the world is removed
//!   ([`Servers::stop_world`], [`Servers::remove_world`]: the slice controller's doing).
//! - Listens on 127.0.0.1 only; the admin password is generated, kept in the store (mode
//!   0600) and never shown to services.
//! - Without the binaries, the error names the package to install.
//! - A server that dies while the daemon runs is said and started again ([`watch`]).

mod host;
mod lend;
pub mod mariadb;
pub mod postgres;
pub mod redis;
pub mod watch;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use binky_controllers::store::{self, owner, write, ServerRow, ServerState, Store, StoreError};

pub use self::lend::ForDrop;
use self::lend::Lending;
use crate::paths::Home;
use binky_platform::proc as procfs;

/// The kinds of server binky can run itself. Which adapter gets which, and the names a
/// person may type for one, are the adapters' descriptor's ([`crate::adapters::kind`]);
/// how each runs is this module's.
pub use crate::adapters::kind::ServerKind as Kind;

impl Kind {
    /// The first signal of a stop: PostgreSQL's backends run in sessions of their own and
    /// SIGTERM waits for every client to leave, so SIGINT (its fast, clean shutdown); else
    /// SIGTERM. A name of [`binky_platform::signal::NAMES`].
    pub fn stop_signal(self) -> &'static str {
        match self {
            Kind::Postgres => "SIGINT",
            _ => "SIGTERM",
        }
    }

    /// The managed server behind `adapter` (any of its names, with or without a version),
    /// if binky runs that kind.
    pub fn for_adapter(adapter: &str) -> Option<Kind> {
        crate::adapters::AdapterKind::of(adapter).and_then(crate::adapters::AdapterKind::server)
    }
}

/// Why a managed server could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The binaries are not installed.
    #[error("{what} is not installed: {}, or give the service an `admin_url`", binky_platform::install::how_to_install(.package))]
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

/// Which managed server: the machine's one of a kind, shared by every world, or a world's
/// own, serving one slice alone (binky runs those for Redis: see
/// [`crate::adapters::redis`]). Its key in the `servers` table is `<kind>` or
/// `<kind>/<slice>`; its files are under `servers/<kind>/` or
/// `servers/<kind>/worlds/<slice>/` in the binky home.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerName {
    /// Its kind.
    pub kind: Kind,
    /// The slice it serves alone; `None` for the shared server.
    pub slice: Option<String>,
}

impl ServerName {
    /// The shared server of `kind`.
    pub fn shared(kind: Kind) -> ServerName {
        ServerName { kind, slice: None }
    }

    /// The server of `kind` that serves `slice` alone.
    pub fn of_slice(kind: Kind, slice: &str) -> ServerName {
        ServerName {
            kind,
            slice: Some(slice.to_owned()),
        }
    }

    /// Its key in the `servers` table: `redis`, or `redis/<slice>`.
    pub fn key(&self) -> String {
        match &self.slice {
            None => self.kind.as_str().to_owned(),
            Some(slice) => format!("{}/{slice}", self.kind.as_str()),
        }
    }

    /// Read a key of the `servers` table (see [`ServerName::key`]); a slice name must be
    /// `[a-z0-9_]+`, as binky makes them (it becomes a directory name).
    pub fn parse(key: &str) -> Option<ServerName> {
        let (kind, slice) = match key.split_once('/') {
            None => (key, None),
            Some((kind, slice)) => (kind, Some(slice)),
        };
        // Only the stored names: `mariadb` is a name a person types, not a key.
        let kind = [Kind::Postgres, Kind::Redis, Kind::Mysql]
            .into_iter()
            .find(|k| k.as_str() == kind)?;
        let plain = crate::adapters::is_plain_name;
        match slice {
            None => Some(ServerName::shared(kind)),
            Some(s) if plain(s) => Some(ServerName::of_slice(kind, s)),
            Some(_) => None,
        }
    }

    /// The directory holding its data directory (`data`) and its log (`server.log`).
    fn dir(&self, home: &Home) -> PathBuf {
        let base = home.root().join("servers").join(self.kind.as_str());
        match &self.slice {
            None => base,
            Some(slice) => base.join(WORLDS_DIR).join(slice),
        }
    }
}

impl std::fmt::Display for ServerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

/// The directory under `servers/<kind>/` that holds the worlds' own servers.
const WORLDS_DIR: &str = "worlds";

/// How long a world's own server may take to save its snapshot and exit when it is stopped
/// with its world, before it is killed.
const WORLD_STOP_GRACE: Duration = Duration::from_secs(20);

/// Who asks for a server to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asker {
    /// A slice needs it: started whatever its row says, on a new port if its own is taken.
    Slice,
    /// The watch, restarting one that died: started only while it is recorded `down` or
    /// `failed` (one stopped meanwhile stays stopped), and only on its own port (the
    /// worlds' processes have its address).
    Watch,
}

/// The managed servers of one binky home.
pub struct Servers {
    home: Home,
    store: Store,
    /// One lock per server (by key): starting, stopping and recording one server never
    /// interleave, and servers start independently of each other.
    locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Shared servers started for drops (by key): how many drops use one now, and whether
    /// it goes back to `stopped` after the last (it was stopped by `binky servers stop`
    /// and no world has asked for it since).
    lent: std::sync::Mutex<HashMap<String, Lending>>,
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
            locks: std::sync::Mutex::new(HashMap::new()),
            lent: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The store the servers are recorded in (readers of the slices need it too).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The lock of the server `name`.
    fn lock_of(&self, name: &ServerName) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(name.key()).or_default().clone()
    }

    /// The row of the server `name`, if it has one.
    pub fn row(&self, name: &ServerName) -> Result<Option<ServerRow>, StoreError> {
        let key = name.key();
        Ok(self
            .store
            .read(store::servers)?
            .into_iter()
            .find(|r| r.kind == key))
    }

    fn alive(row: &ServerRow) -> bool {
        match (row.pid, row.start_time) {
            (Some(pid), Some(st)) => procfs::alive(pid, st),
            _ => false,
        }
    }

    /// Is the server of `row` recorded running, and is its process (pid and start time) alive?
    pub fn runs(row: &ServerRow) -> bool {
        row.state == ServerState::Running && Self::alive(row)
    }

    /// The admin URL of the shared managed server of `kind`, starting it when it is not
    /// running.
    pub async fn ensure(&self, kind: Kind) -> Result<String, ServerError> {
        let name = ServerName::shared(kind);
        self.keep_lent(&name);
        match self.start(&name, None, Asker::Slice).await? {
            Some(url) => Ok(url),
            // Never: a slice's ask always starts it or fails.
            None => Err(ServerError::Io(format!(
                "the managed {name} server did not start"
            ))),
        }
    }

    /// The admin URL of the server of `kind` that serves `slice` alone, its `default` user's
    /// password being `secret` (so the slice's address holds the slice's own secret),
    /// starting it when it is not running. Its data is kept under
    /// `servers/<kind>/worlds/<slice>/` until [`Servers::remove_world`].
    pub async fn ensure_world(
        &self,
        kind: Kind,
        slice: &str,
        secret: &str,
    ) -> Result<String, ServerError> {
        if kind != Kind::Redis {
            return Err(ServerError::Io(format!(
                "binky runs a server of a world's own only for redis, not {}",
                kind.as_str()
            )));
        }
        let name = ServerName::of_slice(kind, slice);
        match self.start(&name, Some(secret), Asker::Slice).await? {
            Some(url) => Ok(url),
            None => Err(ServerError::Io(format!(
                "the managed {name} server did not start"
            ))),
        }
    }

    /// Start the server `name` again after it died, unless it was stopped meanwhile; its
    /// admin URL when it runs (again).
    pub async fn restart(&self, name: &ServerName) -> Result<Option<String>, ServerError> {
        self.start(name, None, Asker::Watch).await
    }

    /// Start `name` when it is not running (see [`Asker`]), with `secret` as its admin
    /// password when given, else the one it had, else a new one.
    async fn start(
        &self,
        name: &ServerName,
        secret: Option<&str>,
        asker: Asker,
    ) -> Result<Option<String>, ServerError> {
        let lock = self.lock_of(name);
        let _guard = lock.lock().await;
        let existing = self.row(name)?;
        if let Some(row) = &existing {
            if Self::alive(row) && row.state == ServerState::Running {
                return Ok(Some(row.admin_url.clone()));
            }
        }
        // The watch starts again what stopped on its own (or did not start again when it
        // last tried), never what a person stopped.
        if asker == Asker::Watch
            && !matches!(
                existing.as_ref().map(|r| r.state),
                Some(ServerState::Down | ServerState::Failed)
            )
        {
            return Ok(None);
        }
        let kind = name.kind;
        let dir = name.dir(&self.home);
        std::fs::create_dir_all(&dir)
            .map_err(|e| ServerError::Io(format!("{}: {e}", dir.display())))?;
        // A daemon killed between starting the server and recording it left one running
        // that nothing knows: stopped, so it neither leaks nor keeps the port.
        if let Some(pid) = unrecorded_server(kind, &dir.join("data")) {
            tracing::warn!(
                server = %name,
                pid,
                "stopping a managed server no daemon recorded"
            );
            crate::supervisor::stop_group_with(
                pid,
                crate::supervisor::signal_named(kind.stop_signal()),
                Duration::from_secs(10),
            )
            .await;
        }
        // Keep the port (and password) a server had: URLs stored in slices stay valid.
        let kept = existing
            .as_ref()
            .map(|r| r.port)
            .filter(|p| crate::ports::is_free(*p));
        let port = match (kept, existing.as_ref()) {
            (Some(port), _) => port,
            // The worlds' processes run with its address (and their slices record it):
            // moving it would cut them off without a word. The watch tries again with
            // backoff, and the worlds say why they wait; `binky up` may move it.
            (None, Some(row)) if asker == Asker::Watch => {
                use binky_controllers::port::PortProbe;
                let holder = crate::ports::BindProbe
                    .holder(row.port)
                    .unwrap_or_else(|| "another process".into());
                let why = format!("its port {} is taken by {holder}", row.port);
                // Still down, and the worlds on it say why it is not back.
                let said = format!(
                    "stopped running, and binky cannot start it again while {why}: it tries again with backoff (stop that process, or run `binky up` of a world on it to move the server to a free port)"
                );
                self.store.write(owner::Servers, |tx| {
                    write::servers::mark_died(tx, &name.key(), &said)
                })?;
                return Err(ServerError::Io(why));
            }
            _ => free_port().ok_or_else(|| ServerError::Io("no free port on 127.0.0.1".into()))?,
        };
        let password = match secret.map(str::to_owned).or_else(|| {
            existing
                .as_ref()
                .and_then(|r| binky_controllers::url::password_decoded(&r.admin_url))
        }) {
            Some(p) => p,
            None => binky_controllers::adapter::random_secret()
                .map_err(|e| ServerError::Io(e.to_string()))?,
        };
        let ctx = StartCtx {
            data_dir: dir.join("data"),
            port,
            password,
            log: dir.join("server.log"),
        };
        // The password goes into the store before the data directory is made with it: a
        // daemon killed between the two would otherwise leave data no recorded password
        // opens, and the next start would make up a new one the server refuses.
        let admin_url = match kind {
            Kind::Postgres => postgres::admin_url(&ctx),
            Kind::Redis => redis::admin_url(&ctx),
            Kind::Mysql => mariadb::admin_url(&ctx),
        };
        self.record(
            name,
            None,
            port,
            &admin_url,
            &ctx,
            "",
            ServerState::Starting,
            "",
        )?;
        let started = match kind {
            Kind::Postgres => postgres::start(&ctx).await,
            Kind::Redis => redis::start(&ctx).await,
            Kind::Mysql => mariadb::start(&ctx).await,
        };
        let started = match started {
            Ok(s) => s,
            Err(err) => {
                self.record(
                    name,
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
            name,
            Some((started.pid, start_time.unwrap_or(0))),
            port,
            &started.admin_url,
            &ctx,
            &started.version,
            ServerState::Running,
            "",
        )?;
        tracing::info!(server = %name, port, pid = started.pid, "managed server started");
        Ok(Some(started.admin_url))
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        name: &ServerName,
        proc_: Option<(u32, u64)>,
        port: u16,
        admin_url: &str,
        ctx: &StartCtx,
        version: &str,
        state: ServerState,
        message: &str,
    ) -> Result<(), StoreError> {
        let admin_url = if admin_url.is_empty() {
            self.row(name)?.map(|r| r.admin_url).unwrap_or_default()
        } else {
            admin_url.to_owned()
        };
        let kind = name.key();
        let data_dir = ctx.data_dir.to_string_lossy();
        self.store.write(owner::Servers, |tx| {
            write::servers::record(
                tx,
                &write::servers::ServerRecord {
                    kind: &kind,
                    proc_,
                    port,
                    admin_url: &admin_url,
                    data_dir: &data_dir,
                    version,
                    state,
                    message,
                },
            )
        })
    }

    /// The log file of the server `name`.
    pub fn log_of(&self, name: &ServerName) -> PathBuf {
        name.dir(&self.home).join("server.log")
    }

    /// At a daemon's start, before anything starts a server: a server left `starting` was
    /// being started by a daemon that stopped first. It is `failed`, saying so, with its
    /// port and password kept, so `binky servers` does not show it starting for ever and
    /// the next world that needs it starts it with them. How many there were.
    pub fn fail_interrupted_starts(&self) -> Result<usize, StoreError> {
        self.store.write(owner::Servers, |tx| {
            write::servers::fail_interrupted_starts(
                tx,
                "the daemon stopped while starting it; the next world that needs it starts it",
            )
        })
    }

    /// Record that the server `name` died (`down`, its pid cleared, `message` saying how),
    /// unless it was stopped or started again meanwhile: whether it was recorded.
    pub async fn mark_died(&self, name: &ServerName, message: &str) -> Result<bool, StoreError> {
        let lock = self.lock_of(name);
        let _guard = lock.lock().await;
        match self.row(name)? {
            Some(row) if row.state == ServerState::Running && !Self::alive(&row) => {}
            _ => return Ok(false),
        }
        self.store.write(owner::Servers, |tx| {
            write::servers::mark_died(tx, &name.key(), message)
        })?;
        Ok(true)
    }

    /// Stop the server of `row` if it runs (`first`, then SIGKILL after `grace`) and record
    /// it `stopped`; whether it was running. The caller holds its lock.
    async fn stop_locked(
        &self,
        row: &ServerRow,
        first: &str,
        grace: Duration,
    ) -> Result<bool, ServerError> {
        let running = Self::alive(row);
        if running {
            if let Some(pid) = row.pid {
                crate::supervisor::stop_group_with(
                    pid,
                    crate::supervisor::signal_named(first),
                    grace,
                )
                .await;
            }
        }
        self.store.write(owner::Servers, |tx| {
            write::servers::mark_stopped(tx, &row.kind)
        })?;
        Ok(running)
    }

    /// Stop the managed servers (all, or those of one kind: the shared one and the worlds'
    /// own); their data is kept. The keys of those that were running.
    pub async fn stop(&self, kind: Option<Kind>) -> Result<Vec<String>, ServerError> {
        let mut stopped = Vec::new();
        for row in self.store.read(store::servers)? {
            let Some(name) = ServerName::parse(&row.kind) else {
                continue;
            };
            if kind.is_some_and(|k| k != name.kind) {
                continue;
            }
            let lock = self.lock_of(&name);
            let _guard = lock.lock().await;
            // Read again under the lock: it may have been started or removed meanwhile.
            let Some(row) = self.row(&name)? else {
                continue;
            };
            let grace = if name.slice.is_some() {
                WORLD_STOP_GRACE
            } else {
                Duration::from_secs(10)
            };
            if self
                .stop_locked(&row, name.kind.stop_signal(), grace)
                .await?
            {
                stopped.push(row.kind.clone());
            }
        }
        Ok(stopped)
    }

    /// Stop the server of `kind` that serves `slice` alone (its world went down), keeping
    /// its data (Redis saves its snapshot on SIGTERM); whether the slice has such a server.
    pub async fn stop_world(&self, kind: Kind, slice: &str) -> Result<bool, ServerError> {
        let name = ServerName::of_slice(kind, slice);
        let lock = self.lock_of(&name);
        let _guard = lock.lock().await;
        let Some(row) = self.row(&name)? else {
            return Ok(false);
        };
        if self
            .stop_locked(&row, kind.stop_signal(), WORLD_STOP_GRACE)
            .await?
        {
            tracing::info!(server = %name, "stopped with its world (data kept)");
        }
        Ok(true)
    }

    /// Remove the server of `kind` that serves `slice` alone (its world was removed): the
    /// process, its files and its row; whether there was anything to remove.
    pub async fn remove_world(&self, kind: Kind, slice: &str) -> Result<bool, ServerError> {
        let name = ServerName::of_slice(kind, slice);
        let lock = self.lock_of(&name);
        let _guard = lock.lock().await;
        let dir = name.dir(&self.home);
        let row = self.row(&name)?;
        if let Some(row) = &row {
            // Its data goes: no snapshot to wait for.
            self.stop_locked(row, "SIGKILL", Duration::ZERO).await?;
        }
        if let Some(pid) = unrecorded_server(kind, &dir.join("data")) {
            crate::supervisor::stop_group_with(
                pid,
                crate::supervisor::signal_named("SIGKILL"),
                Duration::ZERO,
            )
            .await;
        }
        let had_files = dir.exists();
        if had_files {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| ServerError::Io(format!("cannot remove {}: {e}", dir.display())))?;
        }
        if row.is_some() {
            let key = name.key();
            self.store
                .write(owner::Servers, |tx| write::servers::remove(tx, &key))?;
        }
        Ok(row.is_some() || had_files)
    }

    /// The slices of `kind` with a server of their own, recorded or with files in the home
    /// (a store that was lost leaves files without rows): for `binky gc`.
    pub fn world_servers(&self, kind: Kind) -> Result<BTreeSet<String>, StoreError> {
        let mut out: BTreeSet<String> = self
            .store
            .read(store::servers)?
            .iter()
            .filter_map(|r| ServerName::parse(&r.kind))
            .filter(|n| n.kind == kind)
            .filter_map(|n| n.slice)
            .collect();
        let worlds = ServerName::shared(kind).dir(&self.home).join(WORLDS_DIR);
        if let Ok(entries) = std::fs::read_dir(worlds) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if ServerName::parse(&format!("{}/{name}", kind.as_str())).is_some() {
                    out.insert(name);
                }
            }
        }
        Ok(out)
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
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    binky_platform::process::in_new_group(cmd);
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
    // Where the system cannot tell (Windows), the process is not taken for the server.
    let cwd = binky_platform::process::cwd(pid)?;
    (std::fs::canonicalize(data).ok()? == cwd).then_some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_map_to_managed_kinds() {
        assert_eq!(Kind::for_adapter("postgres@16"), Some(Kind::Postgres));
        assert_eq!(Kind::for_adapter("postgresql"), Some(Kind::Postgres));
        assert_eq!(Kind::for_adapter("valkey"), Some(Kind::Redis));
        assert_eq!(Kind::for_adapter("mysql"), Some(Kind::Mysql));
        assert_eq!(Kind::for_adapter("percona@8"), Some(Kind::Mysql));
        assert_eq!(Kind::parse("mariadb").map(Kind::as_str), Some("mysql"));
        assert_eq!(Kind::parse("valkey").map(Kind::as_str), Some("redis"));
        assert_eq!(Kind::for_adapter("mongodb"), None);
    }

    #[test]
    fn a_missing_server_says_how_this_system_installs_it() {
        let err = ServerError::Missing {
            what: "PostgreSQL".into(),
            package: "postgresql".into(),
        }
        .to_string();
        let how = if cfg!(windows) {
            "on Windows, install PostgreSQL with its Windows installer"
        } else {
            "install postgresql (e.g. `sudo apt-get install postgresql`)"
        };
        assert!(err.contains(how), "{err}");
        assert!(err.ends_with("or give the service an `admin_url`"), "{err}");
    }

    #[test]
    fn every_kinds_stop_signal_is_a_signal_name() {
        for kind in [Kind::Postgres, Kind::Mysql, Kind::Redis] {
            assert_eq!(
                binky_platform::signal::canonical(kind.stop_signal()),
                Some(kind.stop_signal())
            );
        }
        assert_eq!(Kind::Postgres.stop_signal(), "SIGINT");
    }
}
