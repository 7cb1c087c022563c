//! Records as they are read from the store, and the queries that read them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use super::states::{GoldenState, ProcState, SliceState, WorktreeState};
use super::{StoreError, WorldId};
use crate::spec::Spec;

/// What a world should be doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DesiredState {
    /// Its processes run.
    Running,
    /// Its processes are stopped; files, ports and data are kept.
    Stopped,
}

impl DesiredState {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DesiredState::Running => "running",
            DesiredState::Stopped => "stopped",
        }
    }
}

/// A world's desired record, with its project.
#[derive(Clone, Debug, Serialize)]
pub struct World {
    /// Row id.
    pub id: WorldId,
    /// Project row id.
    pub project_id: i64,
    /// Project name.
    pub project: String,
    /// The project's main checkout.
    pub repo_root: PathBuf,
    /// World name.
    pub name: String,
    /// Git branch of its worktree.
    pub branch: String,
    /// Commit to create the branch from when it does not exist.
    pub from_ref: Option<String>,
    /// Where binky puts the worktree (an adopted one may be elsewhere).
    pub worktree_path: PathBuf,
    /// Directory of `binky.toml` relative to the worktree root (`""` at the root).
    pub config_rel: String,
    /// The `binky.toml` the spec was read from.
    pub config_path: PathBuf,
    /// The validated config.
    pub spec: Spec,
    /// Environment of the command that last wrote the world (base env of its processes).
    #[serde(skip)]
    pub env: BTreeMap<String, String>,
    /// `--group`, if any.
    pub group: Option<String>,
    /// Running or stopped.
    pub desired: DesiredState,
    /// Bumped by every write of desired state.
    pub generation: i64,
    /// Bumped by `binky reload`.
    pub restart_nonce: i64,
    /// Marked for deletion by `binky remove`.
    pub deleted: bool,
    /// `binky remove --force`.
    pub force_delete: bool,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last `up`/`reload` (ms).
    pub last_used_at: i64,
}

const WORLD_COLUMNS: &str = "w.id, w.project_id, p.name, p.repo_root, w.name, w.branch, w.from_ref,
    w.worktree_path, w.config_rel, w.config_path, w.spec, w.env, w.service_group, w.desired_state,
    w.generation, w.restart_nonce, w.deleted_at, w.force_delete, w.created_at, w.last_used_at";

fn world_from_row(row: &Row<'_>) -> rusqlite::Result<(World, String, String)> {
    let spec_json: String = row.get(10)?;
    let env_json: String = row.get(11)?;
    let desired: String = row.get(13)?;
    Ok((
        World {
            id: row.get(0)?,
            project_id: row.get(1)?,
            project: row.get(2)?,
            repo_root: PathBuf::from(row.get::<_, String>(3)?),
            name: row.get(4)?,
            branch: row.get(5)?,
            from_ref: row.get(6)?,
            worktree_path: PathBuf::from(row.get::<_, String>(7)?),
            config_rel: row.get(8)?,
            config_path: PathBuf::from(row.get::<_, String>(9)?),
            spec: placeholder_spec(),
            env: BTreeMap::new(),
            group: row.get(12)?,
            desired: if desired == "stopped" {
                DesiredState::Stopped
            } else {
                DesiredState::Running
            },
            generation: row.get(14)?,
            restart_nonce: row.get(15)?,
            deleted: row.get::<_, Option<i64>>(16)?.is_some(),
            force_delete: row.get::<_, i64>(17)? != 0,
            created_at: row.get(18)?,
            last_used_at: row.get(19)?,
        },
        spec_json,
        env_json,
    ))
}

fn placeholder_spec() -> Spec {
    Spec {
        project: crate::spec::Project {
            name: String::new(),
            domain: None,
            port_range: None,
            https: false,
            copy: Vec::new(),
        },
        services: BTreeMap::new(),
        groups: BTreeMap::new(),
        agents: Default::default(),
        hooks: Default::default(),
        order: Vec::new(),
    }
}

fn decode_world((mut world, spec, env): (World, String, String)) -> Result<World, StoreError> {
    world.spec = serde_json::from_str(&spec).map_err(|source| StoreError::Decode {
        what: format!("spec of world {}", world.name),
        source,
    })?;
    world.env = serde_json::from_str(&env).map_err(|source| StoreError::Decode {
        what: format!("env of world {}", world.name),
        source,
    })?;
    Ok(world)
}

/// One world by id.
pub fn world(conn: &Connection, id: WorldId) -> Result<Option<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id WHERE w.id = ?1"
    );
    let raw = conn.query_row(&sql, [id], world_from_row).optional()?;
    raw.map(decode_world).transpose()
}

/// One world by project and name.
pub fn world_by_name(
    conn: &Connection,
    project: &str,
    name: &str,
) -> Result<Option<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id
         WHERE p.name = ?1 AND w.name = ?2"
    );
    let raw = conn
        .query_row(&sql, params![project, name], world_from_row)
        .optional()?;
    raw.map(decode_world).transpose()
}

/// Every world, by project then name.
pub fn worlds(conn: &Connection) -> Result<Vec<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id
         ORDER BY p.name, w.name"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([], world_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(decode_world(row?)?);
    }
    Ok(out)
}

/// Ids of every world (what a resync visits).
pub fn world_ids(conn: &Connection) -> Result<Vec<WorldId>, StoreError> {
    let mut stmt = conn.prepare("SELECT id FROM worlds ORDER BY id")?;
    let ids = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ids)
}

/// A project row.
#[derive(Clone, Debug, Serialize)]
pub struct ProjectRow {
    /// Row id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Main checkout.
    pub repo_root: PathBuf,
}

/// Every project.
pub fn projects(conn: &Connection) -> Result<Vec<ProjectRow>, StoreError> {
    let mut stmt = conn.prepare("SELECT id, name, repo_root FROM projects ORDER BY name")?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ProjectRow {
                id: r.get(0)?,
                name: r.get(1)?,
                repo_root: PathBuf::from(r.get::<_, String>(2)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CondStatus {
    /// It holds.
    True,
    /// It does not.
    False,
    /// Not known yet.
    Unknown,
}

impl CondStatus {
    /// Stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CondStatus::True => "True",
            CondStatus::False => "False",
            CondStatus::Unknown => "Unknown",
        }
    }

    fn parse(s: &str) -> CondStatus {
        match s {
            "True" => CondStatus::True,
            "False" => CondStatus::False,
            _ => CondStatus::Unknown,
        }
    }
}

/// A condition as stored: what a controller last concluded about a world.
#[derive(Clone, Debug, Serialize)]
pub struct ConditionRow {
    /// E.g. `WorktreeReady`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The controller that reports it.
    pub controller: String,
    /// True/False/Unknown.
    pub status: CondStatus,
    /// A CamelCase reason.
    pub reason: String,
    /// A human sentence, naming the fix where there is one.
    pub message: String,
    /// Waiting will not fix it: a person has to act.
    pub stalled: bool,
    /// The world generation the controller saw.
    pub generation: i64,
    /// When `status` last changed (ms).
    pub last_transition: i64,
}

/// A world's conditions.
pub fn conditions(conn: &Connection, world: WorldId) -> Result<Vec<ConditionRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT type, controller, status, reason, message, stalled, generation, last_transition
         FROM conditions WHERE world_id = ?1 ORDER BY type",
    )?;
    let rows = stmt
        .query_map([world], |r| {
            Ok(ConditionRow {
                type_: r.get(0)?,
                controller: r.get(1)?,
                status: CondStatus::parse(&r.get::<_, String>(2)?),
                reason: r.get(3)?,
                message: r.get(4)?,
                stalled: r.get::<_, i64>(5)? != 0,
                generation: r.get(6)?,
                last_transition: r.get(7)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// `controller → observed_generation` for a world.
pub fn observed_generations(
    conn: &Connection,
    world: WorldId,
) -> Result<BTreeMap<String, i64>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT controller, observed_generation FROM controller_status WHERE world_id = ?1",
    )?;
    let rows = stmt
        .query_map([world], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    Ok(rows)
}

/// Finalizers still held on a world.
pub fn finalizers(conn: &Connection, world: WorldId) -> Result<Vec<String>, StoreError> {
    let mut stmt =
        conn.prepare("SELECT controller FROM finalizers WHERE world_id = ?1 ORDER BY controller")?;
    let rows = stmt
        .query_map([world], |r| r.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

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

/// A world's observed worktree.
pub fn worktree(conn: &Connection, world: WorldId) -> Result<Option<WorktreeRow>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT path, branch, head, dirty, adopted, created_branch, base_commit, state,
                seen_generation
             FROM worktrees WHERE world_id = ?1",
            [world],
            |r| {
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
        )
        .optional()?)
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

/// A world's port assignments, by service and label.
pub fn ports(conn: &Connection, world: WorldId) -> Result<Vec<PortRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT port, service, label FROM ports WHERE world_id = ?1 ORDER BY service, label",
    )?;
    let rows = stmt
        .query_map([world], |r| {
            Ok(PortRow {
                port: r.get(0)?,
                service: r.get(1)?,
                label: r.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
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
    /// The world generation its failure counters were last reset at.
    pub up_generation: i64,
    /// The world generation it failed for good at (setup failed), if it did.
    pub failed_generation: Option<i64>,
    /// What it is waiting for, or why it failed.
    pub message: String,
}

impl ProcessRow {
    /// It is ready: running and healthy, or a one-shot that finished.
    pub fn is_ready(&self) -> bool {
        (self.state == ProcState::Running && self.healthy) || self.state == ProcState::Exited
    }
}

/// The worktrees binky made for worlds of the repository `repo_root`, newest world first.
pub fn worktree_paths_of_repo(
    conn: &Connection,
    repo_root: &std::path::Path,
) -> Result<Vec<PathBuf>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT t.path FROM worktrees t JOIN worlds w ON w.id = t.world_id
         JOIN projects p ON p.id = w.project_id
         WHERE p.repo_root = ?1 AND t.state = 'ready' AND t.adopted = 0 ORDER BY w.id DESC",
    )?;
    let rows = stmt
        .query_map([repo_root.to_string_lossy()], |r| {
            Ok(PathBuf::from(r.get::<_, String>(0)?))
        })?
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
        conn.prepare("SELECT path, fingerprint FROM setup_changes WHERE world_id = ?1")?;
    let rows = stmt
        .query_map([world], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// A world's processes, by service.
pub fn processes(conn: &Connection, world: WorldId) -> Result<Vec<ProcessRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT service, state, pid, start_time, spawn_token, healthy, restarts, failures,
                last_exit, last_exit_at, started_at, ready_at, next_start_at, spec_hash,
                setup_hash, message, up_generation, failed_generation
         FROM processes WHERE world_id = ?1 ORDER BY service",
    )?;
    let rows = stmt
        .query_map([world], process_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Every process row of every world (for the orphan sweep).
pub fn all_processes(conn: &Connection) -> Result<Vec<(WorldId, ProcessRow)>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT service, state, pid, start_time, spawn_token, healthy, restarts, failures,
                last_exit, last_exit_at, started_at, ready_at, next_start_at, spec_hash,
                setup_hash, message, up_generation, failed_generation, world_id
         FROM processes ORDER BY world_id, service",
    )?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(18)?, process_from_row(r)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
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
    })
}

/// One event of a world's history.
#[derive(Clone, Debug, Serialize)]
pub struct EventRow {
    /// Monotonic id.
    pub id: i64,
    /// When (ms).
    pub at: i64,
    /// Project name.
    pub project: String,
    /// World name.
    pub world: String,
    /// A short kind (`worktree_created`, `started`, `exited`, …).
    pub kind: String,
    /// What happened.
    pub message: String,
}

/// Events of a world after `after_id`, oldest first, at most `limit` (the newest ones).
pub fn events(
    conn: &Connection,
    project: &str,
    world: &str,
    after_id: i64,
    limit: usize,
) -> Result<Vec<EventRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT id, at, project, world, kind, message FROM (
            SELECT * FROM events WHERE project = ?1 AND world = ?2 AND id > ?3
            ORDER BY id DESC LIMIT ?4
         ) ORDER BY id",
    )?;
    let rows = stmt
        .query_map(params![project, world, after_id, limit as i64], |r| {
            Ok(EventRow {
                id: r.get(0)?,
                at: r.get(1)?,
                project: r.get(2)?,
                world: r.get(3)?,
                kind: r.get(4)?,
                message: r.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The id of the newest event (0 when there is none).
pub fn last_event_id(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |r| r.get(0))?)
}

/// Every port assigned in the store, machine-wide.
pub fn all_ports(conn: &Connection) -> Result<Vec<u16>, StoreError> {
    let mut stmt = conn.prepare("SELECT port FROM ports ORDER BY port")?;
    let rows = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
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

/// Every machine setting that is set, by key.
pub fn settings(conn: &Connection) -> Result<BTreeMap<String, String>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM settings")?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// A machine setting (`binky port`, …), if set.
pub fn setting(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
            r.get(0)
        })
        .optional()?)
}

/// Default HTTP port of the proxy.
pub const DEFAULT_PROXY_PORT: u16 = 80;
/// Default HTTPS port of the proxy.
pub const DEFAULT_HTTPS_PORT: u16 = 443;

/// Where the proxy listens: what the daemon reports, else what the settings ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProxyView {
    /// HTTP port (none: not serving).
    pub http_port: Option<u16>,
    /// HTTPS port (none: not serving).
    pub https_port: Option<u16>,
}

/// The proxy's observed state, as the daemon last wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProxyStatusRow {
    /// The daemon that wrote it.
    pub pid: u32,
    /// HTTP port it serves on.
    pub http_port: Option<u16>,
    /// HTTPS port it serves on.
    pub https_port: Option<u16>,
    /// Why HTTP is not on the asked-for port (or not served), if so.
    pub http_note: String,
    /// Why HTTPS is not on the asked-for port (or not served), if so.
    pub https_note: String,
    /// When (ms).
    pub updated_at: i64,
}

/// The proxy's observed state.
pub fn proxy_status(conn: &Connection) -> Result<Option<ProxyStatusRow>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT pid, http_port, https_port, http_note, https_note, updated_at FROM proxy_status WHERE id = 1",
            [],
            |r| {
                Ok(ProxyStatusRow {
                    pid: r.get(0)?,
                    http_port: r.get(1)?,
                    https_port: r.get(2)?,
                    http_note: r.get(3)?,
                    https_note: r.get(4)?,
                    updated_at: r.get(5)?,
                })
            },
        )
        .optional()?)
}

/// The ports URLs should carry.
pub fn proxy_view(conn: &Connection) -> Result<ProxyView, StoreError> {
    if let Some(s) = proxy_status(conn)? {
        return Ok(ProxyView {
            http_port: s.http_port,
            https_port: s.https_port,
        });
    }
    let port = |key: &str, default: u16| -> Result<Option<u16>, StoreError> {
        Ok(Some(
            setting(conn, key)?
                .and_then(|v| v.parse().ok())
                .unwrap_or(default),
        ))
    };
    Ok(ProxyView {
        http_port: port("proxy_port", DEFAULT_PROXY_PORT)?,
        https_port: port("https_port", DEFAULT_HTTPS_PORT)?,
    })
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

/// A world's slices.
pub fn slices(conn: &Connection, world: WorldId) -> Result<Vec<SliceRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT service, adapter, name, secret, state, address, tokens, admin_url, migrate_hash,
                seed_hash, failed_generation, message
         FROM slices WHERE world_id = ?1 ORDER BY service",
    )?;
    let rows = stmt
        .query_map([world], |r| {
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
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// A server binky runs itself (a managed PostgreSQL, Redis, …).
#[derive(Clone, Debug, Serialize)]
pub struct ServerRow {
    /// `postgres`, `redis`.
    pub kind: String,
    /// Its pid.
    pub pid: Option<u32>,
    /// Its start time (with the pid, its identity).
    pub start_time: Option<u64>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its admin address (credentials included).
    #[serde(skip)]
    pub admin_url: String,
    /// Its data directory.
    pub data_dir: String,
    /// The server's version.
    pub version: String,
    /// `running`, `stopped`, `failed`.
    pub state: String,
    /// Why it failed, if it did.
    pub message: String,
}

/// Every managed server.
pub fn servers(conn: &Connection) -> Result<Vec<ServerRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT kind, pid, start_time, port, admin_url, data_dir, version, state, message
         FROM servers ORDER BY kind",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ServerRow {
                kind: r.get(0)?,
                pid: r.get(1)?,
                start_time: r.get::<_, Option<i64>>(2)?.map(|v| v as u64),
                port: r.get(3)?,
                admin_url: r.get(4)?,
                data_dir: r.get(5)?,
                version: r.get(6)?,
                state: r.get(7)?,
                message: r.get(8)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
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
}

const GOLDEN_COLUMNS: &str = "key, adapter, clone_from, name, secret, admin_url, state, builder,
    owner_world, output, build_ms, created_at, updated_at";

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
    })
}

/// Every golden template.
pub fn goldens(conn: &Connection) -> Result<Vec<GoldenRow>, StoreError> {
    let mut stmt = conn.prepare(&format!(
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
    let mut stmt = conn.prepare("SELECT world_id, service, key FROM golden_refs")?;
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
