//! What the controllers observed: worktrees, ports, processes, world runs, slices, golden templates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use super::table::Table;
use crate::store::states::{BootstrapState, GoldenState, ProcState, SliceState, WorktreeState};
use crate::store::{StoreError, WorldId};

/// The observed worktree of a world.
#[derive(Clone, Debug, Serialize)]
pub struct WorktreeRow {
    /// Where it is.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
    /// Commit checked out.
    pub head: Option<String>,
    /// Uncommitted changes when last looked at.
    pub dirty: bool,
    /// It existed before binky: never removed by binky.
    pub adopted: bool,
    /// binky created the branch.
    pub created_branch: bool,
    /// The commit the branch was created at.
    pub base_commit: Option<String>,
    /// `ready`, `missing`, …
    pub state: WorktreeState,
    /// The world generation this row was last decided at.
    pub seen_generation: i64,
}

/// How `worktrees` is read.
pub(crate) const WORKTREES: Table<WorktreeRow> = Table {
    name: "worktrees",
    columns: "path, branch, head, dirty, adopted, created_branch, base_commit, state,
              seen_generation",
    order: "path",
    row: |r| {
        Ok(WorktreeRow {
            path: PathBuf::from(r.get::<_, String>(0)?),
            branch: r.get(1)?,
            head: r.get(2)?,
            dirty: r.get::<_, i64>(3)? != 0,
            adopted: r.get::<_, i64>(4)? != 0,
            created_branch: r.get::<_, i64>(5)? != 0,
            base_commit: r.get(6)?,
            state: r.get(7)?,
            seen_generation: r.get(8)?,
        })
    },
};

/// A world's observed worktree.
pub fn worktree(conn: &Connection, world: WorldId) -> Result<Option<WorktreeRow>, StoreError> {
    Ok(WORKTREES.of_world(conn, world)?.into_iter().next())
}

/// One path a new worktree gets from the main checkout (or another world).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BootstrapRow {
    /// Relative to the worktree's top.
    pub path: String,
    /// The checkout it comes from.
    pub src: PathBuf,
    /// `link` (the default) or `copy`.
    pub mode: crate::spec::CopyMode,
    /// Pending, deferred (brought only if a command that needs it comes to run), done or
    /// failed.
    pub state: BootstrapState,
    /// How its files came (once done).
    pub how: Option<String>,
    /// Files and bytes brought.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// How long it took.
    pub took_ms: u64,
    /// Why it failed, or a note on how it was brought.
    pub message: String,
    /// When its bring-in began (ms since the epoch; 0 before it did): a file linked in
    /// that changed later was edited in place through the link.
    pub brought_at: i64,
    /// The fingerprint (see [`crate::dirty`]) of a path that is one file, as it was
    /// brought: left so, it is not the user's change.
    pub fingerprint: String,
}

impl BootstrapRow {
    /// Does a command whose working directory is `workdir` (relative to the worktree's top,
    /// `""` for the top) need this path? A path `D/X` is needed by commands whose workdir
    /// is `D` or under it; a path at the top by every command.
    pub fn needed_by(&self, workdir: &str) -> bool {
        path_needed_by(&self.path, workdir)
    }
}

/// Does a command whose working directory is `workdir` need the bootstrapped `path` (both
/// relative to the worktree's top)? `D/X` is needed in `D` and under it; a path at the top
/// everywhere.
pub fn path_needed_by(path: &str, workdir: &str) -> bool {
    let parent = match path.trim_matches('/').rsplit_once('/') {
        Some((d, _)) => d,
        None => return true,
    };
    let w = workdir.trim_matches('/');
    w == parent || w.starts_with(&format!("{parent}/"))
}

/// How `bootstrap_paths` is read.
pub(crate) const BOOTSTRAP_PATHS: Table<BootstrapRow> = Table {
    name: "bootstrap_paths",
    columns: "path, src, mode, state, how, files, bytes, took_ms, message, brought_at,
              fingerprint",
    order: "path",
    row: |r| {
        let mode: String = r.get(2)?;
        Ok(BootstrapRow {
            path: r.get(0)?,
            src: PathBuf::from(r.get::<_, String>(1)?),
            mode: if mode == "copy" {
                crate::spec::CopyMode::Copy
            } else {
                crate::spec::CopyMode::Link
            },
            state: r.get(3)?,
            how: r.get(4)?,
            files: r.get::<_, i64>(5)? as u64,
            bytes: r.get::<_, i64>(6)? as u64,
            took_ms: r.get::<_, i64>(7)? as u64,
            message: r.get(8)?,
            brought_at: r.get(9)?,
            fingerprint: r.get(10)?,
        })
    },
};

/// The paths a world's worktree gets from elsewhere, by path.
pub fn bootstrap_paths(conn: &Connection, world: WorldId) -> Result<Vec<BootstrapRow>, StoreError> {
    BOOTSTRAP_PATHS.of_world(conn, world)
}

/// The paths a command in `workdir` (relative to the worktree's top) of `world` waits for:
/// needed by it and not brought yet.
pub fn bootstrap_waits(
    conn: &Connection,
    world: WorldId,
    workdir: &str,
) -> Result<Vec<String>, StoreError> {
    waits_among(conn, world, workdir, &[BootstrapState::Pending])
}

/// The paths of `world` in one of `states` that a command in `workdir` needs.
fn waits_among(
    conn: &Connection,
    world: WorldId,
    workdir: &str,
    states: &[BootstrapState],
) -> Result<Vec<String>, StoreError> {
    Ok(bootstrap_paths(conn, world)?
        .into_iter()
        .filter(|b| states.contains(&b.state) && b.needed_by(workdir))
        .map(|b| b.path)
        .collect())
}

/// The paths an adapter's `migrate` or `seed` (or a golden template's build) in `workdir`
/// of `world` waits for: as [`bootstrap_waits`], and the deferred ones it needs too (the
/// worktree controller brings them once such a command is to run).
pub fn bootstrap_waits_to_migrate(
    conn: &Connection,
    world: WorldId,
    workdir: &str,
) -> Result<Vec<String>, StoreError> {
    waits_among(
        conn,
        world,
        workdir,
        &[BootstrapState::Pending, BootstrapState::Deferred],
    )
}

/// A command `binky exec` was asked to run while approvals are on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExecRequest {
    /// Its approval key.
    pub key: String,
    /// The project.
    pub project: String,
    /// The world it was asked in.
    pub world: String,
    /// The command, its arguments quoted as a shell would read them.
    pub command: String,
}

/// Every command `binky exec` was asked to run without an approval, newest first.
pub fn exec_requests(conn: &Connection) -> Result<Vec<ExecRequest>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT key, project, world, command FROM exec_requests ORDER BY requested_at DESC",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(ExecRequest {
            key: r.get(0)?,
            project: r.get(1)?,
            world: r.get(2)?,
            command: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The command patterns a person allowed `binky exec` to run in a project's worlds
/// (`binky approve --exec 'npm test*'`).
pub fn exec_patterns(conn: &Connection, project: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT command FROM approvals WHERE project = ?1 AND key LIKE 'pattern:%'",
    )?;
    let rows = stmt.query_map([project], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The keys of the commands a person approved.
pub fn approved_keys(conn: &Connection) -> Result<BTreeSet<String>, StoreError> {
    super::column(conn, "SELECT key FROM approvals", [])
}

/// One port assignment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortRow {
    /// The port.
    pub port: u16,
    /// Service name.
    pub service: String,
    /// Port label (`""` = primary).
    pub label: String,
}

/// How `ports` is read.
pub(crate) const PORTS: Table<PortRow> = Table {
    name: "ports",
    columns: "port, service, label",
    order: "service, label",
    row: |r| {
        Ok(PortRow {
            port: r.get(0)?,
            service: r.get(1)?,
            label: r.get(2)?,
        })
    },
};

/// A world's port assignments, by service and label.
pub fn ports(conn: &Connection, world: WorldId) -> Result<Vec<PortRow>, StoreError> {
    PORTS.of_world(conn, world)
}

/// A world's ports by (service, label), as the port controller reads them in its write.
pub fn ports_by_key(
    conn: &Connection,
    world: WorldId,
) -> Result<BTreeMap<(String, String), u16>, StoreError> {
    let mut mine: BTreeMap<(String, String), u16> = BTreeMap::new();
    let mut stmt = conn.prepare("SELECT service, label, port FROM ports WHERE world_id = ?1")?;
    let rows = stmt.query_map([world], |r| {
        Ok(((r.get::<_, String>(0)?, r.get::<_, String>(1)?), r.get(2)?))
    })?;
    for row in rows {
        let (k, v) = row?;
        mine.insert(k, v);
    }
    Ok(mine)
}

/// Every port taken, machine-wide, as the port controller reads them in its write.
pub fn ports_taken(conn: &Connection) -> Result<BTreeSet<u16>, StoreError> {
    Ok(all_ports(conn)?.into_iter().collect())
}

/// A world's port numbers, in order.
pub fn port_numbers(conn: &Connection, world: WorldId) -> Result<Vec<u16>, StoreError> {
    super::column(
        conn,
        "SELECT port FROM ports WHERE world_id = ?1 ORDER BY port",
        [world],
    )
}

/// The templates a world waits to be cloned from: referred to by a slice that is not ready
/// (or stopped) yet.
pub fn goldens_waited_for(conn: &Connection) -> Result<BTreeSet<String>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT DISTINCT r.key FROM golden_refs r LEFT JOIN slices s
         ON s.world_id = r.world_id AND s.service = r.service
         WHERE s.state IS NULL OR s.state NOT IN (?1, ?2)",
    )?;
    let waited = stmt
        .query_map(params![SliceState::Ready, SliceState::Stopped], |r| {
            r.get(0)
        })?
        .collect::<Result<BTreeSet<String>, _>>()?;
    Ok(waited)
}

/// The templates `binky golden rm` asked to drop.
pub fn golden_drops(conn: &Connection) -> Result<BTreeSet<String>, StoreError> {
    super::column(conn, "SELECT key FROM golden_drops", [])
}

/// The observed state of one service's process.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    /// Service name.
    pub service: String,
    /// Where it is in its life.
    pub state: ProcState,
    /// Process id (the group leader).
    pub pid: Option<u32>,
    /// Start time of `pid` in clock ticks since boot: with the pid, its identity.
    pub start_time: Option<u64>,
    /// Token in the process's environment, to find it if the daemon died mid-spawn.
    pub spawn_token: Option<String>,
    /// Passed its health check.
    pub healthy: bool,
    /// Restarts since the world came up.
    pub restarts: u32,
    /// Consecutive failed runs.
    pub failures: u32,
    /// How it last exited (`exit 1`, `signal 9`).
    pub last_exit: Option<String>,
    /// When it last exited (ms).
    pub last_exit_at: Option<i64>,
    /// When the current run started (ms).
    pub started_at: Option<i64>,
    /// When it became ready (ms).
    pub ready_at: Option<i64>,
    /// When a restart is due (ms).
    pub next_start_at: Option<i64>,
    /// Hash of the resolved command, env and workdir it runs with.
    pub spec_hash: Option<String>,
    /// Hash of the setup command last run successfully.
    pub setup_hash: Option<String>,
    /// What of its spec the running process was started with (`spec::RestartKey`, encoded).
    pub restart_key: Option<String>,
    /// The world generation its failure counters were last reset at.
    pub up_generation: i64,
    /// The world generation it failed for good at (setup failed), if it did.
    pub failed_generation: Option<i64>,
    /// What it is waiting for, or why it failed.
    pub message: String,
    /// What a person must act on for it, as its world's `ServicesReady` condition would say
    /// it (that condition names only the first service with one), as of `stepped_generation`.
    pub problem: Option<String>,
    /// The world generation at which the process controller last finished a step of it: its
    /// state and `problem` are as of that generation or later (a restart that generation asked
    /// for has been made). With `problem`, what lets a reader judge some services alone.
    pub stepped_generation: i64,
}

impl ProcessRow {
    /// It is ready: running and healthy (the process controller keeps a service restarted
    /// in a loop unhealthy until it has stayed up), or a one-shot that finished.
    pub fn is_ready(&self) -> bool {
        (self.state == ProcState::Running && self.healthy) || self.state == ProcState::Exited
    }
}

/// The worktrees binky made for worlds of the repository `repo_root`, newest world first.
pub fn worktree_paths_of_repo(
    conn: &Connection,
    repo_root: &std::path::Path,
) -> Result<Vec<PathBuf>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT t.path FROM worktrees t JOIN worlds w ON w.id = t.world_id
         JOIN projects p ON p.id = w.project_id
         WHERE p.repo_root = ?1 AND t.state = ?2 AND t.adopted = 0 ORDER BY w.id DESC",
    )?;
    let rows = stmt
        .query_map(
            params![repo_root.to_string_lossy(), WorktreeState::Ready],
            |r| Ok(PathBuf::from(r.get::<_, String>(0)?)),
        )?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// A file linked into a world (a hard link shared with the main checkout or other worlds)
/// that was found edited in place after it was shared: the change is every holder's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SharedEditRow {
    /// The file, relative to the worktree's top.
    pub file: String,
    /// The brought path it is under (`node_modules`).
    pub path: String,
    /// When it was changed (its modification time, ms since the epoch).
    pub changed_at: i64,
    /// The main checkout holds the same file.
    pub main_shares: bool,
    /// The worlds that hold the same file, this one among them.
    pub sharers: Vec<String>,
    /// The worlds that held it when it was changed (the main checkout too when it shares
    /// it): one of them, or the main checkout, changed it.
    pub editors: Vec<String>,
    /// When it was found (ms since the epoch).
    pub found_at: i64,
}

/// How `shared_edits` is read.
pub(crate) const SHARED_EDITS: Table<SharedEditRow> = Table {
    name: "shared_edits",
    columns: "file, path, changed_at, main_shares, sharers, editors, found_at",
    order: "path, file",
    row: |r| {
        let names = |i: usize| -> rusqlite::Result<Vec<String>> {
            let text: String = r.get(i)?;
            serde_json::from_str(&text).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.into())
            })
        };
        Ok(SharedEditRow {
            file: r.get(0)?,
            path: r.get(1)?,
            changed_at: r.get(2)?,
            main_shares: r.get::<_, i64>(3)? != 0,
            sharers: names(4)?,
            editors: names(5)?,
            found_at: r.get(6)?,
        })
    },
};

/// The linked files of `world` found edited in place, by path and file.
pub fn shared_edits(conn: &Connection, world: WorldId) -> Result<Vec<SharedEditRow>, StoreError> {
    SHARED_EDITS.of_world(conn, world)
}

/// The worlds with a worktree of the repository whose main checkout is `repo_root`, that
/// binky made (not adopted) and that is ready: id, name and worktree, newest first.
pub fn worlds_of_repo(
    conn: &Connection,
    repo_root: &std::path::Path,
) -> Result<Vec<(WorldId, String, PathBuf)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT w.id, w.name, t.path FROM worktrees t JOIN worlds w ON w.id = t.world_id
         JOIN projects p ON p.id = w.project_id
         WHERE p.repo_root = ?1 AND t.state = ?2 AND t.adopted = 0 ORDER BY w.id DESC",
    )?;
    let rows = stmt
        .query_map(
            params![repo_root.to_string_lossy(), WorktreeState::Ready],
            |r| Ok((r.get(0)?, r.get(1)?, PathBuf::from(r.get::<_, String>(2)?))),
        )?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// What the world's `setup`s left changed in its worktree: path → fingerprint (see
/// [`crate::dirty`]).
pub fn setup_changes(
    conn: &Connection,
    world: WorldId,
) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT path, fingerprint FROM setup_changes WHERE world_id = ?1")?;
    let rows = stmt
        .query_map([world], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// How `processes` is read.
pub(crate) const PROCESSES: Table<ProcessRow> = Table {
    name: "processes",
    columns: "service, state, pid, start_time, spawn_token, healthy, restarts, failures,
              last_exit, last_exit_at, started_at, ready_at, next_start_at, spec_hash,
              setup_hash, message, up_generation, failed_generation, problem,
              stepped_generation, restart_key",
    order: "service",
    row: process_from_row,
};

/// A world's processes, by service.
pub fn processes(conn: &Connection, world: WorldId) -> Result<Vec<ProcessRow>, StoreError> {
    PROCESSES.of_world(conn, world)
}

/// Every process row of every world (for the orphan sweep).
pub fn all_processes(conn: &Connection) -> Result<Vec<(WorldId, ProcessRow)>, StoreError> {
    PROCESSES.all(conn)
}

fn process_from_row(r: &Row<'_>) -> rusqlite::Result<ProcessRow> {
    Ok(ProcessRow {
        service: r.get(0)?,
        state: r.get(1)?,
        pid: r.get(2)?,
        start_time: r.get::<_, Option<i64>>(3)?.map(|v| v as u64),
        spawn_token: r.get(4)?,
        healthy: r.get::<_, i64>(5)? != 0,
        restarts: r.get(6)?,
        failures: r.get(7)?,
        last_exit: r.get(8)?,
        last_exit_at: r.get(9)?,
        started_at: r.get(10)?,
        ready_at: r.get(11)?,
        next_start_at: r.get(12)?,
        spec_hash: r.get(13)?,
        setup_hash: r.get(14)?,
        message: r.get(15)?,
        up_generation: r.get(16)?,
        failed_generation: r.get(17)?,
        problem: r.get(18)?,
        stepped_generation: r.get(19)?,
        restart_key: r.get(20)?,
    })
}

/// Every port assigned in the store, machine-wide.
pub fn all_ports(conn: &Connection) -> Result<Vec<u16>, StoreError> {
    super::column(conn, "SELECT port FROM ports ORDER BY port", [])
}

/// The process controller's world-level record.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorldRunRow {
    /// The `restart_nonce` the running processes were started under.
    pub restart_nonce: i64,
    /// Key of the last `post_up` run (generation/nonce it ran for).
    pub post_up_key: Option<String>,
}

/// A world's run record.
pub fn world_run(conn: &Connection, world: WorldId) -> Result<Option<WorldRunRow>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT restart_nonce, post_up_key FROM world_runs WHERE world_id = ?1",
            [world],
            |r| {
                Ok(WorldRunRow {
                    restart_nonce: r.get(0)?,
                    post_up_key: r.get(1)?,
                })
            },
        )
        .optional()?)
}

/// A world's slice of a shared server, as the slice controller last recorded it.
#[derive(Clone, Debug, Serialize)]
pub struct SliceRow {
    /// The adapter service.
    pub service: String,
    /// Adapter name.
    pub adapter: String,
    /// Slice name on the server.
    pub name: String,
    /// The slice's own password.
    #[serde(skip)]
    pub secret: String,
    /// `provisioning`, `migrating`, `seeding`, `ready`, `failed`.
    pub state: SliceState,
    /// Its address (credentials included).
    #[serde(skip)]
    pub address: Option<String>,
    /// Extra tokens (`prefix`, …).
    pub tokens: BTreeMap<String, String>,
    /// The admin URL it was made on (to tear it down on the same server).
    #[serde(skip)]
    pub admin_url: Option<String>,
    /// Hash of the `migrate` command last run successfully.
    pub migrate_hash: Option<String>,
    /// Hash of the `seed` command last run successfully.
    pub seed_hash: Option<String>,
    /// The world generation it failed for good at.
    pub failed_generation: Option<i64>,
    /// What it waits for, or why it failed.
    pub message: String,
}

/// How `slices` is read.
pub(crate) const SLICES: Table<SliceRow> = Table {
    name: "slices",
    columns: "service, adapter, name, secret, state, address, tokens, admin_url, migrate_hash,
              seed_hash, failed_generation, message",
    order: "service",
    row: |r| {
        let tokens: String = r.get(6)?;
        Ok(SliceRow {
            service: r.get(0)?,
            adapter: r.get(1)?,
            name: r.get(2)?,
            secret: r.get(3)?,
            state: r.get(4)?,
            address: r.get(5)?,
            tokens: serde_json::from_str(&tokens).unwrap_or_default(),
            admin_url: r.get(7)?,
            migrate_hash: r.get(8)?,
            seed_hash: r.get(9)?,
            failed_generation: r.get(10)?,
            message: r.get(11)?,
        })
    },
};

/// A world's slices.
pub fn slices(conn: &Connection, world: WorldId) -> Result<Vec<SliceRow>, StoreError> {
    SLICES.of_world(conn, world)
}

/// A golden template: a slice migrated and seeded once, that worlds are cloned from.
#[derive(Clone, Debug, Serialize)]
pub struct GoldenRow {
    /// The key: a hash of adapter, server, `clone_from`, `migrate`, `seed` and key files.
    pub key: String,
    /// Adapter name.
    pub adapter: String,
    /// `clone_from` of the services that use it.
    pub clone_from: String,
    /// The template's slice name on the server.
    pub name: String,
    /// The template slice's password.
    #[serde(skip)]
    pub secret: String,
    /// The admin URL it lives on.
    #[serde(skip)]
    pub admin_url: Option<String>,
    /// `building`, `ready`, `failed`.
    pub state: GoldenState,
    /// The daemon building it (`pid:start_time`), while `building`.
    pub builder: String,
    /// The world whose worktree ran its migrate and seed.
    pub owner_world: Option<i64>,
    /// The failing command's output tail, when `failed`.
    pub output: String,
    /// How long the build took (ms).
    pub build_ms: Option<i64>,
    /// When it was made (ms).
    pub created_at: i64,
    /// When its state last changed (ms).
    #[serde(skip)]
    pub updated_at: i64,
    /// The service it belongs to (a hash of project, service, adapter, server, `clone_from`,
    /// `migrate` and workdir): a template grows from an earlier one of its lineage.
    #[serde(skip)]
    pub lineage: String,
    /// The migration inputs it was built from: path → hash of the contents.
    #[serde(skip)]
    pub inputs: BTreeMap<String, String>,
    /// Its migrated, unseeded stage is complete and sealed: a later template may grow from
    /// it, and a retry after a failed `seed` runs only the seed.
    pub migrated: bool,
    /// Its migrated stage is a database of its own ([`GoldenRow::stage_name`]), because the
    /// template is seeded; otherwise the template is its own migrated stage.
    #[serde(skip)]
    pub staged: bool,
    /// The key of the template it grew from (`None`: an empty database).
    pub base: Option<String>,
    /// How it was built, in words (`binky golden ls`).
    pub how: String,
    /// When a world last used it (ms): it is kept for `golden_keep` after that once no world
    /// uses it.
    pub used_at: i64,
}

impl GoldenRow {
    /// A failed build that a world used after it failed builds again (a seed may have
    /// failed on something outside the repository): the golden controller retries it for
    /// that world, and the slice controller waits for the retry rather than report the old
    /// failure. `last_used_at` is the world's last `binky up` (ms).
    pub fn retried_for(&self, last_used_at: i64) -> bool {
        self.state == GoldenState::Failed && last_used_at > self.updated_at
    }

    /// The name of its migrated, unseeded stage: a database of its own when the template is
    /// seeded, else the template itself.
    pub fn stage_name(&self) -> String {
        if self.staged {
            stage_name(&self.name)
        } else {
            self.name.clone()
        }
    }

    /// Every database (slice) of it on its server: the template, and its stage if separate.
    pub fn slices(&self) -> Vec<String> {
        let mut out = vec![self.name.clone()];
        if self.staged {
            out.push(stage_name(&self.name));
        }
        out
    }
}

/// The migrated, unseeded stage of the seeded template `name`.
pub fn stage_name(name: &str) -> String {
    format!("{name}_migrated")
}

const GOLDEN_COLUMNS: &str = "key, adapter, clone_from, name, secret, admin_url, state, builder,
    owner_world, output, build_ms, created_at, updated_at, lineage, inputs, migrated, staged,
    base, how, used_at";

fn golden_from_row(r: &Row<'_>) -> rusqlite::Result<GoldenRow> {
    Ok(GoldenRow {
        key: r.get(0)?,
        adapter: r.get(1)?,
        clone_from: r.get(2)?,
        name: r.get(3)?,
        secret: r.get(4)?,
        admin_url: r.get(5)?,
        state: r.get(6)?,
        builder: r.get(7)?,
        owner_world: r.get(8)?,
        output: r.get(9)?,
        build_ms: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        lineage: r.get(13)?,
        inputs: serde_json::from_str(&r.get::<_, String>(14)?).unwrap_or_default(),
        migrated: r.get(15)?,
        staged: r.get(16)?,
        base: r.get(17)?,
        how: r.get(18)?,
        used_at: r.get(19)?,
    })
}

/// Every golden template.
pub fn goldens(conn: &Connection) -> Result<Vec<GoldenRow>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GOLDEN_COLUMNS} FROM goldens ORDER BY created_at"
    ))?;
    let rows = stmt
        .query_map([], golden_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The golden template of one key.
pub fn golden(conn: &Connection, key: &str) -> Result<Option<GoldenRow>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GOLDEN_COLUMNS} FROM goldens WHERE key = ?1"
    ))?;
    Ok(stmt.query_row([key], golden_from_row).optional()?)
}

/// `(world, service) → golden key` for every world that uses a template.
pub fn golden_refs(conn: &Connection) -> Result<Vec<(WorldId, String, String)>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT world_id, service, key FROM golden_refs")?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// `service → golden key` of one world's services that use a template.
pub fn golden_refs_of(
    conn: &Connection,
    world: WorldId,
) -> Result<BTreeMap<String, String>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT service, key FROM golden_refs WHERE world_id = ?1")?;
    let rows = stmt
        .query_map([world], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// The golden key one service of a world uses, if it uses a template.
pub fn golden_ref(
    conn: &Connection,
    world: WorldId,
    service: &str,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT key FROM golden_refs WHERE world_id = ?1 AND service = ?2")?
        .query_row(params![world, service], |r| r.get(0))
        .optional()?)
}

/// Per-service restart counters of a world (a watched file changed), by service.
pub fn service_restarts(
    conn: &Connection,
    world: WorldId,
) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT service, nonce FROM service_restarts WHERE world_id = ?1")?;
    let rows = stmt
        .query_map([world], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}
