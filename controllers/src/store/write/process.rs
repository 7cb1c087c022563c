//! The process controller's writes: each world's processes (`processes`), its run record
//! (`world_runs`), what its setup changed (`setup_changes`) and what its services use
//! (`process_resources`).

use rusqlite::params;

use crate::limits::ResourceLimits;
use crate::store::owner::{self, Tx};
use crate::store::records::{Placement, Usage};
use crate::store::{now_ms, ProcessRow, StoreError, WorldId};

/// Record `world`'s process `row`.
pub(crate) fn save(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    row: &ProcessRow,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO processes (world_id, service, state, pid, start_time, spawn_token,
                healthy, restarts, failures, last_exit, last_exit_at, started_at, ready_at,
                next_start_at, spec_hash, setup_hash, up_generation, failed_generation,
                message, updated_at, problem, stepped_generation, restart_key)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                ?17, ?18, ?19, ?20, ?21, ?22, ?23
             WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
             ON CONFLICT (world_id, service) DO UPDATE SET state = excluded.state,
                pid = excluded.pid, start_time = excluded.start_time,
                spawn_token = excluded.spawn_token, healthy = excluded.healthy,
                restarts = excluded.restarts, failures = excluded.failures,
                last_exit = excluded.last_exit, last_exit_at = excluded.last_exit_at,
                started_at = excluded.started_at, ready_at = excluded.ready_at,
                next_start_at = excluded.next_start_at, spec_hash = excluded.spec_hash,
                setup_hash = excluded.setup_hash, up_generation = excluded.up_generation,
                failed_generation = excluded.failed_generation, message = excluded.message,
                updated_at = excluded.updated_at, problem = excluded.problem,
                stepped_generation = excluded.stepped_generation,
                restart_key = excluded.restart_key",
        params![
            world,
            row.service,
            row.state,
            row.pid,
            row.start_time.map(|v| v as i64),
            row.spawn_token,
            row.healthy as i64,
            row.restarts,
            row.failures,
            row.last_exit,
            row.last_exit_at,
            row.started_at,
            row.ready_at,
            row.next_start_at,
            row.spec_hash,
            row.setup_hash,
            row.up_generation,
            row.failed_generation,
            row.message,
            now_ms(),
            row.problem,
            row.stepped_generation,
            row.restart_key,
        ],
    )?;
    Ok(())
}

/// Forget every record of `world`'s processes.
pub(crate) fn forget_world(tx: &Tx<'_, owner::Process>, world: WorldId) -> Result<(), StoreError> {
    tx.execute("DELETE FROM processes WHERE world_id = ?1", [world])?;
    tx.execute("DELETE FROM world_runs WHERE world_id = ?1", [world])?;
    tx.execute("DELETE FROM process_resources WHERE world_id = ?1", [world])?;
    Ok(())
}

/// `world`'s processes run under `restart_nonce`.
pub(crate) fn set_restart_nonce(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    restart_nonce: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO world_runs (world_id, restart_nonce, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (world_id) DO UPDATE SET restart_nonce = excluded.restart_nonce,
            updated_at = excluded.updated_at",
        params![world, restart_nonce, now_ms()],
    )?;
    Ok(())
}

/// Forget `world`'s process of `service`.
pub(crate) fn remove(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    service: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM processes WHERE world_id = ?1 AND service = ?2",
        params![world, service],
    )?;
    Ok(())
}

/// `world`'s `post_up` ran for `key` (a world first run under `restart_nonce`).
pub(crate) fn set_post_up_key(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    restart_nonce: i64,
    key: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO world_runs (world_id, restart_nonce, post_up_key, updated_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (world_id) DO UPDATE SET post_up_key = excluded.post_up_key,
            updated_at = excluded.updated_at",
        params![world, restart_nonce, key, now_ms()],
    )?;
    Ok(())
}

/// Setup left `path` of `world`'s worktree changed, as `fingerprint`.
pub(crate) fn set_setup_change(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    path: &str,
    fingerprint: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO setup_changes (world_id, path, fingerprint) VALUES (?1, ?2, ?3)
         ON CONFLICT (world_id, path) DO UPDATE SET fingerprint = excluded.fingerprint",
        params![world, path, fingerprint],
    )?;
    Ok(())
}

/// Where the supervisor put the run of `world`'s `name`, started under `limits`.
pub(crate) fn set_placement(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    name: &str,
    placed: &Placement,
    limits: &ResourceLimits,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO process_resources (world_id, service, cgroup, mechanism, note,
            memory_limit, cpu_limit, cpu_usec, throttled, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, NULL, ?8
         WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, service) DO UPDATE SET cgroup = excluded.cgroup,
            mechanism = excluded.mechanism, note = excluded.note,
            memory_limit = excluded.memory_limit, cpu_limit = excluded.cpu_limit,
            cpu_usec = NULL, throttled = NULL, updated_at = excluded.updated_at",
        params![
            world,
            name,
            placed.cgroup,
            placed.mechanism.as_str(),
            placed.note,
            limits.memory.map(|m| m as i64),
            limits.cpu_millis,
            now_ms()
        ],
    )?;
    Ok(())
}

/// The kernel killed a process of `world`'s `name` for running out of memory.
pub(crate) fn count_oom_kill(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    name: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE process_resources SET oom_kills = oom_kills + 1, updated_at = ?3
         WHERE world_id = ?1 AND service = ?2",
        params![world, name, now_ms()],
    )?;
    Ok(())
}

/// Forget what `world`'s services used (they are stopped).
pub(crate) fn forget_world_usage(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE process_resources SET memory_bytes = NULL, cpu_percent = NULL,
            cpu_usec = NULL, sampled_at = NULL
         WHERE world_id = ?1 AND memory_bytes IS NOT NULL",
        [world],
    )?;
    Ok(())
}

/// The cgroup of `world`'s `name` is removed.
pub(crate) fn forget_cgroup(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    name: &str,
    cgroup: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE process_resources SET cgroup = NULL
         WHERE world_id = ?1 AND service = ?2 AND cgroup = ?3",
        params![world, name, cgroup],
    )?;
    Ok(())
}

/// What `world`'s `service` used, `u` (and `percent` of a core), sampled at `now`.
pub(crate) fn set_usage(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    service: &str,
    u: &Usage,
    percent: Option<f64>,
    now: i64,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO process_resources (world_id, service, memory_bytes, cpu_percent,
            cpu_usec, throttled, sampled_at, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7
         WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, service) DO UPDATE SET
            memory_bytes = excluded.memory_bytes, cpu_percent = excluded.cpu_percent,
            cpu_usec = excluded.cpu_usec, throttled = excluded.throttled,
            sampled_at = excluded.sampled_at",
    )?
    .execute(params![
        world,
        service,
        u.memory_bytes as i64,
        percent,
        u.cpu_usec as i64,
        u.throttled as i64,
        now
    ])?;
    Ok(())
}

/// Forget what `world`'s `service` used (it is stopped).
pub(crate) fn forget_usage(
    tx: &Tx<'_, owner::Process>,
    world: WorldId,
    service: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE process_resources SET memory_bytes = NULL, cpu_percent = NULL,
            cpu_usec = NULL, sampled_at = NULL
         WHERE world_id = ?1 AND service = ?2",
        params![world, service],
    )?;
    Ok(())
}
