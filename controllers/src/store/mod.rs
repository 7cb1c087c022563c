//! The desired-state store: one SQLite file (WAL) that commands write and controllers read.
//!
//! # Tables and their writers
//! Each table has one writer, declared in [`owner`] and held by SQLite while a write runs:
//! commands write the desired state (`projects`, `worlds`, `settings`, `approvals`, …), the
//! runtime its bookkeeping (`finalizers`, `controller_status`, `conditions`), each controller
//! its observed tables, anyone may append to `events`.
//!
//! # Where the SQL lives
//! Here, and nowhere else: the reads in `read/`, the commands' writes in `desired.rs`, each
//! other owner's statements in [`write`](mod@write) (`write/<owner>.rs`), as functions taking that
//! owner's transaction. Controllers open the transaction and call them.
//!
//! # Guarantees
//! - Every write is one transaction (`BEGIN IMMEDIATE`) of one owner, so a crash never leaves
//!   half a record and no writer touches another's table. Schema changes are versioned migrations (`PRAGMA user_version`) applied in
//!   place when the store opens.
//! - The file and its directory are private to the user (0600/0700): the store holds the
//!   environment `binky up` was run with.
//! - A store call never blocks a worker of the daemon's async runtime: it hands the
//!   worker over first (see `off_worker`), so a slow write elsewhere stalls no other task.
//! - Many processes may open a new store at the same moment (see [`Store::open`]).

mod desired;
mod migrations;
pub mod owner;
mod read;
mod records;
mod states;
pub mod write;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use owner::{Mode, Owner, Refused, Tx};

pub use desired::{NewWorld, PutOutcome};
pub use read::*;
pub use records::{Condition, GoldenInputs, Placement, Planned, Route, Usage};
pub use states::{
    AdmissionState, BootstrapState, GoldenState, ProcState, RouteState, ServerState, SliceState,
    UnknownState, WorktreeState,
};

/// Row id of a world: the key every controller reconciles.
pub type WorldId = i64;

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The SQLite file could not be opened or migrated.
    #[error("cannot open the state store {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// A query failed.
    #[error("state store query failed: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A stored JSON value did not parse (a newer binky wrote it?).
    #[error("state store holds a record this binky cannot read ({what}): {source}")]
    Decode {
        /// Which record.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The store was written by a newer binky.
    #[error("the state store is at schema version {found}, newer than this binky knows ({known}); upgrade binky")]
    TooNew {
        /// Version in the file.
        found: i64,
        /// Newest version this build knows.
        known: i64,
    },
    /// A project name is already used by another repository.
    #[error("project `{name}` is already registered from {existing}; rename [project].name in {requested}/binky.toml or remove the other project's worlds")]
    ProjectNameTaken {
        /// The name.
        name: String,
        /// The repository that has it.
        existing: String,
        /// The repository asking.
        requested: String,
    },
    /// A new world's or project's name differs only by case from one the store has. Host
    /// names ignore case, so the two would share their URLs; on macOS's and Windows' usual
    /// filesystems, which ignore case too, two worlds would also share a worktree folder.
    #[error("{kind} `{asked}` differs only by case from {kind} `{existing}`{whose}: host names (and macOS's and Windows' file names) ignore case, so the two would share URLs{folders}; use `{existing}`, or another name")]
    NameDiffersByCase {
        /// `world` or `project`.
        kind: &'static str,
        /// The name asked for.
        asked: String,
        /// The name the store has.
        existing: String,
        /// Where the existing one comes from (a project's repository), or nothing.
        whose: String,
        /// What else the two would share (a world's worktree folder), or nothing.
        folders: &'static str,
    },
    /// A world is being removed and cannot be changed.
    #[error(
        "world `{0}` is being removed; wait for `binky remove` to finish, then run this again"
    )]
    BeingRemoved(String),
    /// A world declaring shared services is written while its project's shared world is
    /// being removed (its last user went a moment ago).
    #[error("the shared services of project `{0}` are being removed (the last world that used them was removed); run this again once `binky status` no longer lists `{project}/@shared`", project = .0)]
    SharedBeingRemoved(String),
    /// No such world.
    #[error("{0}")]
    NotFound(String),
    /// A write outside its owner's tables (see [`owner`]): a bug in binky.
    #[error("{}", .0.message())]
    NotOwner(Refused),
}

/// A handle on the store; cheap to clone, safe to share between tasks.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Held>>,
    path: PathBuf,
}

/// The connection and the writes its authorizer admits now (see [`owner`]).
struct Held {
    conn: Connection,
    mode: Mode,
    refused: Arc<Mutex<Option<Refused>>>,
}

impl Held {
    /// Make the authorizer admit what `mode` may write; a no-op when it already does.
    fn enter(&mut self, mode: Mode, grants: &'static [owner::Grant]) {
        if self.mode != mode {
            owner::install(&self.conn, mode, grants, self.refused.clone());
            self.mode = mode;
        }
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The write the authorizer refused since [`Held::enter`], if any.
    fn refused(&self) -> Option<Refused> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Run a blocking store call. On a worker of tokio's multi-threaded runtime (the daemon's),
/// the worker is handed over first (`block_in_place`): waiting for the connection's lock,
/// or for SQLite's busy timeout while another process writes, then stalls no other task
/// (the proxy's routing, other worlds' reconciles). Elsewhere (a command's current-thread
/// runtime, a plain thread) the call simply runs.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// How long opening the store keeps retrying a `SQLITE_BUSY` answer.
pub const OPEN_PATIENCE: Duration = Duration::from_secs(15);

/// How long a write keeps asking for the write lock while other writers hold it (each ask
/// waits SQLite's busy timeout first).
pub const WRITE_PATIENCE: Duration = Duration::from_secs(60);

impl StoreError {
    /// SQLite answered "busy" or "locked": another connection holds a lock.
    fn is_busy(&self) -> bool {
        let source = match self {
            StoreError::Open { source, .. } | StoreError::Sql(source) => source,
            _ => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

/// An exclusive `flock` on `<store>.open-lock`, held while one process opens and migrates
/// the store. Best effort: where the lock file cannot be made (a read-only directory), the
/// busy retry in [`Store::open`] still holds.
struct OpenLock(Option<std::fs::File>);

impl OpenLock {
    fn take(db: &Path) -> OpenLock {
        let mut name = db.as_os_str().to_owned();
        name.push(".open-lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(PathBuf::from(name))
            .ok()
            .filter(|f| f.lock().is_ok());
        OpenLock(file)
    }
}

impl Drop for OpenLock {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            let _ = f.unlock();
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Open (creating if needed) the store at `path` and bring its schema up to date.
    ///
    /// Many commands may open a new store at the same moment (fifteen agents typing
    /// `binky up` on a fresh machine). SQLite does not call the busy handler for every lock
    /// the first open takes — the switch to WAL and the first read of a WAL file that
    /// another connection is initialising answer `SQLITE_BUSY` at once — so the open, the
    /// pragmas and the migrations run under an exclusive `flock` on `<path>.open-lock`,
    /// and a busy answer that still gets through is retried for up to [`OPEN_PATIENCE`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let guard = OpenLock::take(path);
        let started = std::time::Instant::now();
        let conn = loop {
            match Self::open_once(path) {
                Ok(conn) => break conn,
                Err(err) if err.is_busy() && started.elapsed() < OPEN_PATIENCE => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(err) => return Err(err),
            }
        };
        drop(guard);
        let _ = binky_platform::fs::set_mode(path, 0o600);
        Ok(Store {
            conn: Arc::new(Mutex::new(Held {
                conn,
                mode: Mode::Open,
                refused: Arc::default(),
            })),
            path: path.to_owned(),
        })
    }

    fn open_once(path: &Path) -> Result<Connection, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        // Every read query stays compiled (`prepare_cached`): `binky status` of 300 worlds
        // runs each some 300 times.
        conn.set_prepared_statement_cache_capacity(128);
        let mut conn = conn;
        migrations::migrate(&mut conn)?;
        Ok(conn)
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        // Callers hold the guard only inside `off_worker`.
        // A panic while holding the lock cannot leave SQLite half-written (transactions
        // roll back on drop), so a poisoned mutex is safe to keep using.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run read-only queries (a write in them is refused) in one read transaction: they see
    /// one snapshot of the store, and SQLite takes its file lock once, not per statement.
    pub fn read<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        off_worker(|| {
            let mut held = self.lock();
            held.enter(Mode::Read, &[]);
            let tx = held.conn.unchecked_transaction()?;
            let out = f(&tx);
            // Nothing to keep: the end of a read only releases its snapshot.
            drop(tx);
            match held.refused() {
                Some(r) => Err(StoreError::NotOwner(r)),
                None => out,
            }
        })
    }

    /// [`Store::read`] for a loop that goes on without this round: a failure is logged as
    /// `failed` (what could not be done) with the error, and is `None`.
    pub fn read_or_warn<R>(
        &self,
        failed: &str,
        f: impl FnOnce(&Connection) -> Result<R, StoreError>,
    ) -> Option<R> {
        self.read(f)
            .inspect_err(|err| tracing::warn!(%err, "{failed}"))
            .ok()
    }

    /// Run `f` in one immediate (write-locking) transaction of `owner`, committed when `f`
    /// succeeds. A statement in it that writes outside `owner`'s tables fails, and so does
    /// the transaction, with [`StoreError::NotOwner`].
    pub fn write<O: Owner, R>(
        &self,
        owner: O,
        f: impl FnOnce(&Tx<'_, O>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.write_with(owner, f)
    }

    /// Like [`Store::write`], for callers with their own error type.
    pub fn write_with<O: Owner, R, E: From<StoreError>>(
        &self,
        owner: O,
        f: impl FnOnce(&Tx<'_, O>) -> Result<R, E>,
    ) -> Result<R, E> {
        let _ = owner;
        off_worker(|| {
            let mut held = self.lock();
            held.enter(Mode::Write(O::NAME), O::GRANTS);
            let refused = held.refused.clone();
            // Hundreds of commands writing at once (300 `binky remove`s) can wait longer
            // than SQLite's busy timeout for the write lock: a lost race waits its turn again,
            // up to WRITE_PATIENCE, rather than failing with "database is locked".
            let started = std::time::Instant::now();
            let mut pause = Duration::from_millis(5);
            let conn = &mut held.conn;
            let tx = loop {
                match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
                    Ok(tx) => break tx,
                    Err(err) => {
                        let err = StoreError::from(err);
                        if !err.is_busy() || started.elapsed() >= WRITE_PATIENCE {
                            return Err(err.into());
                        }
                    }
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            };
            let tx = Tx::<O>::new(tx);
            let out = f(&tx);
            let taken = refused.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(r) = taken {
                // Dropping the transaction rolls it back.
                return Err(StoreError::NotOwner(r).into());
            }
            let out = out?;
            tx.commit().map_err(StoreError::from)?;
            Ok(out)
        })
    }

    /// Test fixtures: write anything (no owner's limits).
    #[cfg(test)]
    pub(crate) fn write_fixture<R>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let mut held = self.lock();
        held.enter(Mode::Anything, &[]);
        let tx = held
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Append an event to the world's history.
    pub fn event(&self, world: WorldId, kind: &str, message: &str) -> Result<(), StoreError> {
        self.write(owner::Log, |tx| add_event(tx, world, kind, message))
    }
}

/// Append an event inside a transaction (the world's project and name are copied so the
/// history outlives the world).
pub fn add_event(
    conn: &Connection,
    world: WorldId,
    kind: &str,
    message: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO events (at, world_id, project, world, kind, message)
         SELECT ?1, w.id, p.name, w.name, ?2, ?3
         FROM worlds w JOIN projects p ON p.id = w.project_id WHERE w.id = ?4",
        rusqlite::params![now_ms(), kind, message, world],
    )?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
