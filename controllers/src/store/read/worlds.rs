//! The desired records: projects, worlds and the machine's settings.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use crate::spec::Spec;
use crate::store::{StoreError, WorldId};

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
    /// How long the command that last started it waits (`binky up`/`reload --timeout`), in
    /// ms: as long as a service without `health` may take to listen on its port.
    pub wait_ms: Option<u64>,
}

const WORLD_COLUMNS: &str = "w.id, w.project_id, p.name, p.repo_root, w.name, w.branch, w.from_ref,
    w.worktree_path, w.config_rel, w.config_path, w.spec, w.env, w.service_group, w.desired_state,
    w.generation, w.restart_nonce, w.deleted_at, w.force_delete, w.created_at, w.last_used_at,
    w.wait_ms";

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
            wait_ms: row.get::<_, Option<i64>>(20)?.map(|v| v.max(0) as u64),
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
            copy_modes: Default::default(),
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

/// `text` parsed, or a copy of what the same text parsed to before.
fn parsed_once<T: Clone + serde::de::DeserializeOwned>(
    cache: &mut HashMap<String, T>,
    text: String,
    what: impl FnOnce() -> String,
) -> Result<T, StoreError> {
    if let Some(v) = cache.get(&text) {
        return Ok(v.clone());
    }
    let v: T = serde_json::from_str(&text).map_err(|source| StoreError::Decode {
        what: what(),
        source,
    })?;
    cache.insert(text, v.clone());
    Ok(v)
}

/// One world by id.
pub fn world(conn: &Connection, id: WorldId) -> Result<Option<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id WHERE w.id = ?1"
    );
    let raw = conn
        .prepare_cached(&sql)?
        .query_row([id], world_from_row)
        .optional()?;
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

/// One world of project `project_id` by name.
pub fn world_by_project(
    conn: &Connection,
    project_id: i64,
    name: &str,
) -> Result<Option<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id
         WHERE w.project_id = ?1 AND w.name = ?2"
    );
    let raw = conn
        .query_row(&sql, params![project_id, name], world_from_row)
        .optional()?;
    raw.map(decode_world).transpose()
}

/// Every world of project `project_id`, by name.
pub fn worlds_of_project(conn: &Connection, project_id: i64) -> Result<Vec<World>, StoreError> {
    worlds_where(conn, "w.project_id = ?1 ORDER BY w.name", project_id)
}

/// The worlds named `name`, of every project, by project (a command looking one world up
/// by name reads these, not every world).
pub fn worlds_named(conn: &Connection, name: &str) -> Result<Vec<World>, StoreError> {
    worlds_where(conn, "w.name = ?1 ORDER BY p.name", name)
}

/// The worlds `filter` (a `WHERE` clause and its order, of `?1` = `value`) keeps.
fn worlds_where(
    conn: &Connection,
    filter: &str,
    value: impl rusqlite::ToSql,
) -> Result<Vec<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id WHERE {filter}"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([value], world_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(decode_world(row?)?);
    }
    Ok(out)
}

/// The worlds in one glance: how many, the sum of their generations and the highest id.
/// Any world created, changed or removed changes it (the file watcher's cheap look).
pub fn worlds_summary(conn: &Connection) -> Result<(i64, i64, i64), StoreError> {
    Ok(conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(generation), 0), COALESCE(MAX(id), 0) FROM worlds",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?)
}

/// Every world, by project then name.
pub fn worlds(conn: &Connection) -> Result<Vec<World>, StoreError> {
    let sql = format!(
        "SELECT {WORLD_COLUMNS} FROM worlds w JOIN projects p ON p.id = w.project_id
         ORDER BY p.name, w.name"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([], world_from_row)?;
    // Worlds of one project mostly share one spec, and worlds made from one shell one
    // environment: each text is parsed once.
    let mut specs: HashMap<String, Spec> = HashMap::new();
    let mut envs: HashMap<String, BTreeMap<String, String>> = HashMap::new();
    let mut out = Vec::new();
    for row in rows {
        let (mut world, spec, env) = row?;
        world.spec = parsed_once(&mut specs, spec, || format!("spec of world {}", world.name))?;
        world.env = parsed_once(&mut envs, env, || format!("env of world {}", world.name))?;
        out.push(world);
    }
    Ok(out)
}

/// Ids of every world (what a resync visits).
pub fn world_ids(conn: &Connection) -> Result<Vec<WorldId>, StoreError> {
    super::column(conn, "SELECT id FROM worlds ORDER BY id", [])
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
    let mut stmt = conn.prepare_cached("SELECT id, name, repo_root FROM projects ORDER BY name")?;
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

/// Who made world `id`, when an agent did (a process binky started, recorded with the
/// world when `binky up` made it): none for a person's world.
pub fn agent_made(conn: &Connection, id: WorldId) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT made_by FROM agent_worlds WHERE world_id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?)
}
