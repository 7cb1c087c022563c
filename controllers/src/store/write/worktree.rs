//! The worktree controller's writes: each world's worktree (`worktrees`), the paths
//! brought into it (`bootstrap_paths`) and its linked files found edited in place
//! (`shared_edits`).

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::Planned;
use crate::store::{now_ms, BootstrapState, SharedEditRow, StoreError, WorktreeRow, WorldId};

/// Record `world`'s worktree as `row`.
pub(crate) fn save(
    tx: &Tx<'_, owner::Worktree>,
    world: WorldId,
    row: &WorktreeRow,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO worktrees (world_id, path, branch, head, dirty, adopted,
            created_branch, base_commit, state, seen_generation, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
         WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id) DO UPDATE SET path = excluded.path,
            branch = excluded.branch, head = excluded.head, dirty = excluded.dirty,
            adopted = excluded.adopted, created_branch = excluded.created_branch,
            base_commit = excluded.base_commit, state = excluded.state,
            seen_generation = excluded.seen_generation, updated_at = excluded.updated_at",
        params![
            world,
            row.path.to_string_lossy(),
            row.branch,
            row.head,
            row.dirty as i64,
            row.adopted as i64,
            row.created_branch as i64,
            row.base_commit,
            row.state,
            row.seen_generation,
            now_ms()
        ],
    )?;
    Ok(())
}

/// Forget `world`'s worktree.
pub(crate) fn remove(tx: &Tx<'_, owner::Worktree>, world: WorldId) -> Result<(), StoreError> {
    tx.execute("DELETE FROM worktrees WHERE world_id = ?1", [world])?;
    Ok(())
}

/// Record path `p` to bring into `world`'s worktree as `state` (pending, or deferred with
/// `message` saying why); one planned already keeps its state, except that a deferred one
/// asked for as pending (a wider `up`) becomes pending.
pub(crate) fn plan_path(
    tx: &Tx<'_, owner::Worktree>,
    world: WorldId,
    p: &Planned,
    state: BootstrapState,
    message: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO bootstrap_paths (world_id, path, src, mode, state, message, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, path) DO UPDATE SET state = excluded.state,
            message = excluded.message, updated_at = excluded.updated_at
         WHERE bootstrap_paths.state = ?8 AND excluded.state = ?9",
        params![
            world,
            p.path,
            p.from.to_string_lossy(),
            p.mode.as_str(),
            state,
            message,
            now_ms(),
            BootstrapState::Deferred,
            BootstrapState::Pending
        ],
    )?;
    Ok(())
}

/// A deferred path `path` of `world` becomes pending (to be brought).
pub(crate) fn wake_deferred(
    tx: &Tx<'_, owner::Worktree>,
    world: WorldId,
    path: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE bootstrap_paths SET state = ?3, message = '', updated_at = ?4
         WHERE world_id = ?1 AND path = ?2 AND state = ?5",
        params![
            world,
            path,
            BootstrapState::Pending,
            now_ms(),
            BootstrapState::Deferred
        ],
    )?;
    Ok(())
}

/// How bringing a path went.
pub(crate) struct Brought<'a> {
    /// Done or failed.
    pub state: BootstrapState,
    /// How it was brought (linked, copied, …).
    pub how: Option<&'a str>,
    /// Files brought.
    pub files: i64,
    /// Bytes brought.
    pub bytes: i64,
    /// How long it took (ms).
    pub took_ms: i64,
    /// A note, or why it failed.
    pub message: &'a str,
    /// When the bring-in began (ms since the epoch).
    pub brought_at: i64,
    /// The fingerprint of a path that is one file, as brought (else empty).
    pub fingerprint: &'a str,
}

/// Record how bringing `path` into `world`'s worktree went.
pub(crate) fn set_brought(
    tx: &Tx<'_, owner::Worktree>,
    world: WorldId,
    path: &str,
    b: &Brought<'_>,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE bootstrap_paths SET state = ?3, how = ?4, files = ?5, bytes = ?6,
            took_ms = ?7, message = ?8, updated_at = ?9, brought_at = ?10, fingerprint = ?11
         WHERE world_id = ?1 AND path = ?2",
        params![
            world,
            path,
            b.state,
            b.how,
            b.files,
            b.bytes,
            b.took_ms,
            b.message,
            now_ms(),
            b.brought_at,
            b.fingerprint
        ],
    )?;
    Ok(())
}

/// `world`'s linked files found edited in place are `rows` now (none: none are).
pub(crate) fn set_shared_edits(
    tx: &Tx<'_, owner::Worktree>,
    world: WorldId,
    rows: &[SharedEditRow],
) -> Result<(), StoreError> {
    tx.execute("DELETE FROM shared_edits WHERE world_id = ?1", [world])?;
    for r in rows {
        let names = |n: &[String]| serde_json::to_string(n).unwrap_or_else(|_| "[]".into());
        tx.execute(
            "INSERT INTO shared_edits (world_id, file, path, changed_at, main_shares, sharers,
                editors, found_at)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)",
            params![
                world,
                r.file,
                r.path,
                r.changed_at,
                r.main_shares as i64,
                names(&r.sharers),
                names(&r.editors),
                r.found_at
            ],
        )?;
    }
    Ok(())
}
