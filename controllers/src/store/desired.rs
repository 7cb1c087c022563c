//! Desired-state writes: the only writes commands make.
//!
//! Every write bumps the world's `generation`, so a command can wait until each controller
//! has observed (reconciled) at least the generation it wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use rusqlite::{params, OptionalExtension};

use super::owner::Tx;
use super::{add_event, now_ms, owner, read, DesiredState, Store, StoreError, World, WorldId};
use crate::spec::Spec;

/// What `binky up` asks for.
#[derive(Clone, Debug)]
pub struct NewWorld {
    /// Project name (from the spec).
    pub project: String,
    /// The project's main checkout.
    pub repo_root: PathBuf,
    /// World name.
    pub name: String,
    /// Branch (the world name).
    pub branch: String,
    /// Commit to branch from when the branch does not exist.
    pub from_ref: Option<String>,
    /// Where the worktree goes.
    pub worktree_path: PathBuf,
    /// Directory of `binky.toml` relative to the worktree root.
    pub config_rel: String,
    /// The file the spec was read from.
    pub config_path: PathBuf,
    /// The validated spec.
    pub spec: Spec,
    /// The caller's environment.
    pub env: BTreeMap<String, String>,
    /// `--group`.
    pub group: Option<String>,
    /// How long the command waits (`--timeout`): a service without `health` may take as
    /// long to listen on its port.
    pub wait: Option<std::time::Duration>,
    /// An agent asks (a process binky started, and why binky tells: `it runs under binky
    /// mcp`): a world this makes is recorded as the agent's, in the same transaction.
    pub made_by: Option<String>,
}

/// The result of [`Store::put_world`].
#[derive(Clone, Debug)]
pub struct PutOutcome {
    /// The world as written.
    pub world: World,
    /// It did not exist before.
    pub created: bool,
}

fn encode<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Decode {
        what: "a value being written".into(),
        source,
    })
}

impl Store {
    /// Create or update a world to run `spec` (what `binky up` writes).
    pub fn put_world(&self, new: &NewWorld) -> Result<PutOutcome, StoreError> {
        let written = Written {
            spec: encode(&new.spec)?,
            env: encode(&new.env)?,
            wait: wait_ms(new.wait),
            now: now_ms(),
        };
        let (id, created) = self.write(owner::Commands, |tx| {
            let project_id = project_of(tx, new, written.now)?;
            let existing: Option<(i64, Option<i64>)> = tx
                .query_row(
                    "SELECT id, deleted_at FROM worlds WHERE project_id = ?1 AND name = ?2",
                    params![project_id, new.name],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let (id, created) = match existing {
                Some((_, Some(_))) => return Err(StoreError::BeingRemoved(new.name.clone())),
                Some((id, None)) => {
                    rerun_world(tx, id, new, &written)?;
                    add_event(tx, id, "up", "up requested")?;
                    (id, false)
                }
                None => {
                    refuse_a_case_twin(tx, project_id, &new.name)?;
                    let id = insert_world(tx, project_id, new, &written)?;
                    add_event(tx, id, "created", "world created")?;
                    if let Some(by) = &new.made_by {
                        tx.execute(
                            "INSERT INTO agent_worlds (world_id, made_by, made_at) VALUES (?1, ?2, ?3)",
                            params![id, by, written.now],
                        )?;
                    }
                    (id, true)
                }
            };
            sync_shared(tx, project_id, Some(writer(id, new)))?;
            Ok((id, created))
        })?;
        let world = self
            .read(|c| read::world(c, id))?
            .ok_or_else(|| StoreError::NotFound(format!("world {} vanished", new.name)))?;
        Ok(PutOutcome { world, created })
    }

    /// Set a world running or stopped (`binky down`); returns the new generation.
    pub fn set_desired_state(
        &self,
        world: WorldId,
        state: DesiredState,
    ) -> Result<i64, StoreError> {
        self.write(owner::Commands, |tx| {
            refuse_deleted(tx, world)?;
            tx.execute(
                "UPDATE worlds SET desired_state = ?1, generation = generation + 1, updated_at = ?2
                 WHERE id = ?3",
                params![state.as_str(), now_ms(), world],
            )?;
            let kind = match state {
                DesiredState::Running => "up",
                DesiredState::Stopped => "down",
            };
            add_event(tx, world, kind, &format!("{kind} requested"))?;
            generation(tx, world)
        })
    }

    /// Restart a world's processes in place (`binky reload`); returns the new generation.
    /// `wait`: how long the command waits (`--timeout`; none keeps the one recorded), as
    /// long as a service without `health` may take to listen on its port.
    pub fn reload_world(
        &self,
        world: WorldId,
        wait: Option<std::time::Duration>,
    ) -> Result<i64, StoreError> {
        self.write(owner::Commands, |tx| {
            refuse_deleted(tx, world)?;
            let now = now_ms();
            tx.execute(
                "UPDATE worlds SET desired_state = ?4, restart_nonce = restart_nonce + 1,
                    generation = generation + 1, updated_at = ?1, last_used_at = ?1,
                    wait_ms = COALESCE(?3, wait_ms)
                 WHERE id = ?2",
                params![now, world, wait_ms(wait), DesiredState::Running.as_str()],
            )?;
            add_event(tx, world, "reload", "reload requested")?;
            generation(tx, world)
        })
    }

    /// Replace a world's spec (`binky apply`, an edited `binky.toml`) and say what changed;
    /// returns the new generation. A world being removed is refused.
    pub fn set_spec(&self, world: WorldId, spec: &Spec, what: &str) -> Result<i64, StoreError> {
        let text = encode(spec)?;
        self.write(owner::Commands, |tx| {
            refuse_deleted(tx, world)?;
            tx.execute(
                "UPDATE worlds SET spec = ?1, generation = generation + 1, updated_at = ?2 WHERE id = ?3",
                params![text, now_ms(), world],
            )?;
            add_event(tx, world, "config", what)?;
            if let Some(w) = read::world(tx, world)? {
                sync_shared(
                    tx,
                    w.project_id,
                    Some(Writer {
                        id: w.id,
                        name: &w.name,
                        spec,
                        env: &w.env,
                        config_rel: &w.config_rel,
                        // An edit of the file waits for nothing: the recorded wait stays.
                        wait: None,
                    }),
                )?;
            }
            generation(tx, world)
        })
    }

    /// `binky reload NAME --group G`: restart these services of the world (only them), in
    /// one step; returns the new generation.
    /// `wait` as for [`Store::reload_world`].
    pub fn restart_services(
        &self,
        world: WorldId,
        services: &[String],
        why: &str,
        wait: Option<std::time::Duration>,
    ) -> Result<i64, StoreError> {
        self.write(owner::Commands, |tx| {
            refuse_deleted(tx, world)?;
            for service in services {
                tx.execute(
                    "INSERT INTO service_restarts (world_id, service, nonce) VALUES (?1, ?2, 1)
                     ON CONFLICT (world_id, service) DO UPDATE SET nonce = nonce + 1",
                    params![world, service],
                )?;
            }
            let now = now_ms();
            tx.execute(
                "UPDATE worlds SET desired_state = ?4, generation = generation + 1,
                    updated_at = ?1, last_used_at = ?1, wait_ms = COALESCE(?3, wait_ms)
                 WHERE id = ?2",
                params![now, world, wait_ms(wait), DesiredState::Running.as_str()],
            )?;
            add_event(
                tx,
                world,
                "reload",
                &format!("{why}: restarting {}", services.join(", ")),
            )?;
            generation(tx, world)
        })
    }

    /// Restart one service of a world (a file it watches changed); returns the new
    /// generation.
    pub fn restart_service(
        &self,
        world: WorldId,
        service: &str,
        why: &str,
    ) -> Result<i64, StoreError> {
        self.write(owner::Commands, |tx| {
            refuse_deleted(tx, world)?;
            tx.execute(
                "INSERT INTO service_restarts (world_id, service, nonce) VALUES (?1, ?2, 1)
                 ON CONFLICT (world_id, service) DO UPDATE SET nonce = nonce + 1",
                params![world, service],
            )?;
            tx.execute(
                "UPDATE worlds SET generation = generation + 1, updated_at = ?1 WHERE id = ?2",
                params![now_ms(), world],
            )?;
            add_event(tx, world, "watch", &format!("{service}: {why}; restarting"))?;
            generation(tx, world)
        })
    }

    /// Mark a world for deletion (`binky remove`); controllers then tear it down.
    pub fn mark_deleted(&self, world: WorldId, force: bool) -> Result<i64, StoreError> {
        self.write(owner::Commands, |tx| {
            tx.execute(
                "UPDATE worlds SET deleted_at = COALESCE(deleted_at, ?1),
                    force_delete = MAX(force_delete, ?2), generation = generation + 1,
                    updated_at = ?1
                 WHERE id = ?3",
                params![now_ms(), force as i64, world],
            )?;
            add_event(
                tx,
                world,
                "remove",
                if force {
                    "remove requested (--force)"
                } else {
                    "remove requested"
                },
            )?;
            let project: Option<i64> = tx
                .query_row(
                    "SELECT project_id FROM worlds WHERE id = ?1",
                    [world],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(project) = project {
                sync_shared(tx, project, None)?;
            }
            generation(tx, world)
        })
    }
}

/// A world whose spec is being written: what its project's shared world takes from it.
struct Writer<'a> {
    id: WorldId,
    name: &'a str,
    spec: &'a Spec,
    env: &'a BTreeMap<String, String>,
    config_rel: &'a str,
    /// Its command's wait (ms): the shared services it starts may take as long to listen.
    wait: Option<i64>,
}

fn writer(id: WorldId, new: &NewWorld) -> Writer<'_> {
    Writer {
        id,
        name: &new.name,
        spec: &new.spec,
        env: &new.env,
        config_rel: &new.config_rel,
        wait: wait_ms(new.wait),
    }
}

/// What `put_world` writes of a world, encoded, and when.
struct Written {
    spec: String,
    env: String,
    wait: Option<i64>,
    now: i64,
}

/// The id of the project of `new`, made (or moved to `new`'s checkout, when none of its
/// worlds is left) as needed. Another checkout's project of the same name is refused.
/// A new world's name must not differ only by case from another world of its project (one
/// being removed too): see [`StoreError::NameDiffersByCase`].
fn refuse_a_case_twin(
    tx: &Tx<'_, owner::Commands>,
    project_id: i64,
    name: &str,
) -> Result<(), StoreError> {
    let twin: Option<String> = tx
        .query_row(
            "SELECT name FROM worlds WHERE project_id = ?1 AND name = ?2 COLLATE NOCASE",
            params![project_id, name],
            |r| r.get(0),
        )
        .optional()?;
    match twin {
        Some(existing) => Err(StoreError::NameDiffersByCase {
            kind: "world",
            asked: name.to_owned(),
            existing,
            whose: String::new(),
            folders: " and, there, a worktree folder",
        }),
        None => Ok(()),
    }
}

/// How many worlds the project has (those being removed too).
fn worlds_of(tx: &Tx<'_, owner::Commands>, project_id: i64) -> Result<i64, StoreError> {
    Ok(tx.query_row(
        "SELECT COUNT(*) FROM worlds WHERE project_id = ?1",
        [project_id],
        |r| r.get(0),
    )?)
}

fn project_of(tx: &Tx<'_, owner::Commands>, new: &NewWorld, now: i64) -> Result<i64, StoreError> {
    let repo = new.repo_root.to_string_lossy().into_owned();
    let project: Option<(i64, String)> = tx
        .query_row(
            "SELECT id, repo_root FROM projects WHERE name = ?1",
            [&new.project],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match project {
        Some((id, root)) if root == repo => id,
        Some((id, root)) => {
            // A project whose worlds are all gone can move to a new checkout.
            if worlds_of(tx, id)? > 0 {
                return Err(StoreError::ProjectNameTaken {
                    name: new.project.clone(),
                    existing: root,
                    requested: repo,
                });
            }
            tx.execute(
                "UPDATE projects SET repo_root = ?1 WHERE id = ?2",
                params![repo, id],
            )?;
            id
        }
        None => {
            let twin: Option<(i64, String, String)> = tx
                .query_row(
                    "SELECT id, name, repo_root FROM projects WHERE name = ?1 COLLATE NOCASE",
                    [&new.project],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            if let Some((id, existing, root)) = twin {
                // One without worlds is renamed, as one is moved to a new checkout above.
                if worlds_of(tx, id)? == 0 {
                    tx.execute(
                        "UPDATE projects SET name = ?1, repo_root = ?2 WHERE id = ?3",
                        params![new.project, repo, id],
                    )?;
                    return Ok(id);
                }
                return Err(StoreError::NameDiffersByCase {
                    kind: "project",
                    asked: new.project.clone(),
                    existing,
                    whose: format!(" (registered from {root})"),
                    folders: "",
                });
            }
            tx.execute(
                "INSERT INTO projects (name, repo_root, created_at) VALUES (?1, ?2, ?3)",
                params![new.project, repo, now],
            )?;
            tx.last_insert_rowid()
        }
    })
}

/// A new generation of the existing world `id`, running `new`'s spec.
fn rerun_world(
    tx: &Tx<'_, owner::Commands>,
    id: WorldId,
    new: &NewWorld,
    w: &Written,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE worlds SET spec = ?1, env = ?2, service_group = ?3,
            config_path = ?4, config_rel = ?5, desired_state = ?9,
            generation = generation + 1, updated_at = ?6, last_used_at = ?6,
            wait_ms = COALESCE(?8, wait_ms)
         WHERE id = ?7",
        params![
            w.spec,
            w.env,
            new.group,
            new.config_path.to_string_lossy(),
            new.config_rel,
            w.now,
            id,
            w.wait,
            DesiredState::Running.as_str()
        ],
    )?;
    Ok(())
}

/// The new world `new` of project `project_id`, running; its id.
fn insert_world(
    tx: &Tx<'_, owner::Commands>,
    project_id: i64,
    new: &NewWorld,
    w: &Written,
) -> Result<WorldId, StoreError> {
    tx.execute(
        "INSERT INTO worlds (project_id, name, branch, from_ref, worktree_path,
            config_rel, config_path, spec, env, service_group, desired_state,
            generation, created_at, updated_at, last_used_at, wait_ms, id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?14, 1, ?11, ?11, ?11,
            ?12, ?13)",
        params![
            project_id,
            new.name,
            new.branch,
            new.from_ref,
            new.worktree_path.to_string_lossy(),
            new.config_rel,
            new.config_path.to_string_lossy(),
            w.spec,
            w.env,
            new.group,
            w.now,
            w.wait,
            next_world_id(tx)?,
            DesiredState::Running.as_str()
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

/// A command's wait as the `wait_ms` column holds it.
fn wait_ms(wait: Option<std::time::Duration>) -> Option<i64> {
    wait.map(|w| i64::try_from(w.as_millis()).unwrap_or(i64::MAX))
}

/// Bring project `project_id`'s shared world (see [`crate::shared`]) in line with its user
/// worlds, inside the transaction that wrote one of them (`writer`, when a spec was
/// written; none after a removal).
///
/// - A writer that declares shared services makes the shared world (or rewrites it): each
///   shared service as the writer defines it (last writer wins), the services other live
///   worlds still declare as they were; the writer's environment and config directory when
///   that changed a definition (or made the world). Every such write is a new generation,
///   so a failed shared service is tried again.
/// - After a removal, services no live world declares any more leave it; with no live
///   world declaring any, it is marked deleted (its controllers wait until the worlds
///   that used it are gone, then tear it down).
fn sync_shared(
    tx: &Tx<'_, owner::Commands>,
    project_id: i64,
    writer: Option<Writer<'_>>,
) -> Result<(), StoreError> {
    let worlds = read::worlds_of_project(tx, project_id)?;
    let shared = worlds.iter().find(|w| w.is_shared());
    let declares = writer
        .as_ref()
        .is_some_and(|w| !crate::shared::declared(w.spec).is_empty());
    let others: BTreeSet<String> = worlds
        .iter()
        .filter(|w| !w.is_shared() && !w.deleted)
        .filter(|w| writer.as_ref().is_none_or(|me| me.id != w.id))
        .flat_map(|w| crate::shared::declared(&w.spec))
        .collect();
    let project: String = tx.query_row(
        "SELECT name FROM projects WHERE id = ?1",
        [project_id],
        |r| r.get(0),
    )?;
    let shared = match shared {
        None if !declares => return Ok(()),
        Some(s) if s.deleted && declares => return Err(StoreError::SharedBeingRemoved(project)),
        Some(s) if s.deleted => return Ok(()),
        other => other,
    };
    let now = now_ms();
    if let (Some(s), None) = (shared, &writer) {
        if others.is_empty() {
            return retire_shared(tx, s, now);
        }
    }
    let spec = crate::shared::merge(
        shared.map(|s| &s.spec),
        writer.as_ref().map(|w| w.spec),
        &others,
    );
    match (shared, writer.as_ref().filter(|_| declares)) {
        (Some(s), Some(w)) => redefine_shared(tx, s, w, &spec, now),
        (Some(s), None) if s.spec != spec => {
            tx.execute(
                "UPDATE worlds SET spec = ?1, generation = generation + 1, updated_at = ?2
                 WHERE id = ?3",
                params![encode(&spec)?, now, s.id],
            )?;
            add_event(
                tx,
                s.id,
                "config",
                &format!(
                    "shared services still declared by a world: {}",
                    spec.order().join(", ")
                ),
            )
        }
        (None, Some(w)) => create_shared(tx, project_id, w, &spec, now),
        _ => Ok(()),
    }
}

/// No world of the project uses shared services any more: its shared world `s` is marked
/// deleted.
fn retire_shared(tx: &Tx<'_, owner::Commands>, s: &World, now: i64) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE worlds SET deleted_at = COALESCE(deleted_at, ?1),
            generation = generation + 1, updated_at = ?1 WHERE id = ?2",
        params![now, s.id],
    )?;
    add_event(
        tx,
        s.id,
        "remove",
        "no world of the project uses shared services any more: removing them",
    )
}

/// The shared world `s` runs `spec`, as the world `w` being written declares it.
fn redefine_shared(
    tx: &Tx<'_, owner::Commands>,
    s: &World,
    w: &Writer<'_>,
    spec: &Spec,
    now: i64,
) -> Result<(), StoreError> {
    // The environment and directory come with a changed definition only: another
    // world's `binky up` from another shell must not restart what every world uses.
    let (env, rel) = if s.spec != *spec {
        (w.env, w.config_rel)
    } else {
        (&s.env, s.config_rel.as_str())
    };
    tx.execute(
        "UPDATE worlds SET spec = ?1, env = ?2, config_rel = ?3, config_path = ?4,
            desired_state = ?8, generation = generation + 1, updated_at = ?5,
            last_used_at = ?5, wait_ms = COALESCE(?7, wait_ms)
         WHERE id = ?6",
        params![
            encode(spec)?,
            encode(env)?,
            rel,
            config_path(&s.repo_root, rel),
            now,
            s.id,
            w.wait,
            DesiredState::Running.as_str()
        ],
    )?;
    if s.spec != *spec {
        add_event(
            tx,
            s.id,
            "config",
            &format!(
                "shared services as world {} defines them: {}",
                w.name,
                spec.order().join(", ")
            ),
        )?;
    }
    Ok(())
}

/// The project's shared world, made to run `spec` as the world `w` being written declares
/// it, in the project's main checkout.
fn create_shared(
    tx: &Tx<'_, owner::Commands>,
    project_id: i64,
    w: &Writer<'_>,
    spec: &Spec,
    now: i64,
) -> Result<(), StoreError> {
    let repo: String = tx.query_row(
        "SELECT repo_root FROM projects WHERE id = ?1",
        [project_id],
        |r| r.get(0),
    )?;
    let repo = PathBuf::from(repo);
    tx.execute(
        "INSERT INTO worlds (project_id, name, branch, from_ref, worktree_path,
            config_rel, config_path, spec, env, service_group, desired_state,
            generation, created_at, updated_at, last_used_at, wait_ms, id)
         VALUES (?1, ?2, '', NULL, ?3, ?4, ?5, ?6, ?7, NULL, ?11, 1, ?8, ?8, ?8, ?9, ?10)",
        params![
            project_id,
            crate::shared::WORLD,
            repo.to_string_lossy(),
            w.config_rel,
            config_path(&repo, w.config_rel),
            encode(spec)?,
            encode(w.env)?,
            now,
            w.wait,
            next_world_id(tx)?,
            DesiredState::Running.as_str()
        ],
    )?;
    let id = tx.last_insert_rowid();
    add_event(
        tx,
        id,
        "created",
        &format!(
            "shared services of the project, as world {} defines them: {}",
            w.name,
            spec.order().join(", ")
        ),
    )
}

/// Where the shared world's `binky.toml` is: in the main checkout, where the writer's is
/// in its worktree.
fn config_path(repo: &std::path::Path, config_rel: &str) -> String {
    let dir = if config_rel.is_empty() {
        repo.to_owned()
    } else {
        repo.join(config_rel)
    };
    dir.join("binky.toml").to_string_lossy().into_owned()
}

impl Store {
    /// Set a machine setting (`binky port`, …).
    pub fn set_setting(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.write(owner::Commands, |tx| {
            tx.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                params![key, value, now_ms()],
            )?;
            Ok(())
        })
    }

    /// A person approves running `command` (its approval `key`) in `project`'s worlds
    /// (`binky approve`).
    pub fn approve(&self, key: &str, project: &str, command: &str) -> Result<(), StoreError> {
        self.write(owner::Commands, |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO approvals (key, project, command, approved_at) VALUES (?1, ?2, ?3, ?4)",
                params![key, project, command, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Record that `binky exec` was asked to run `command` (approval key `key`) in world
    /// `world` of `project` while no person has approved it.
    pub fn request_exec(
        &self,
        key: &str,
        project: &str,
        world: &str,
        command: &str,
    ) -> Result<(), StoreError> {
        self.write(owner::Commands, |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO exec_requests (key, project, world, command, requested_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key, project, world, command, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Take an approval back (`binky approve --revoke`); false when there was none.
    pub fn revoke_approval(&self, key: &str) -> Result<bool, StoreError> {
        self.write(owner::Commands, |tx| {
            Ok(tx.execute("DELETE FROM approvals WHERE key = ?1", [key])? > 0)
        })
    }

    /// Ask the golden controller to drop the template `key` (`binky golden rm`).
    pub fn request_golden_drop(&self, key: &str) -> Result<(), StoreError> {
        self.write(owner::Commands, |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO golden_drops (key, requested_at) VALUES (?1, ?2)",
                params![key, now_ms()],
            )?;
            Ok(())
        })
    }
}

fn refuse_deleted(tx: &rusqlite::Transaction<'_>, world: WorldId) -> Result<(), StoreError> {
    let row: Option<(String, Option<i64>)> = tx
        .query_row(
            "SELECT name, deleted_at FROM worlds WHERE id = ?1",
            [world],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    match row {
        None => Err(StoreError::NotFound(format!("no world with id {world}"))),
        Some((name, Some(_))) => Err(StoreError::BeingRemoved(name)),
        Some(_) => Ok(()),
    }
}

fn generation(tx: &rusqlite::Transaction<'_>, world: WorldId) -> Result<i64, StoreError> {
    Ok(tx.query_row(
        "SELECT generation FROM worlds WHERE id = ?1",
        [world],
        |r| r.get(0),
    )?)
}

/// The id of a world about to be made, taken: never one a world (or its events) had before.
fn next_world_id(tx: &rusqlite::Connection) -> Result<WorldId, StoreError> {
    let id: WorldId = tx.query_row("SELECT next FROM world_ids", [], |r| r.get(0))?;
    tx.execute("UPDATE world_ids SET next = next + 1", [])?;
    Ok(id)
}
