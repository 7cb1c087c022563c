//! The golden controller's writes: the templates (`goldens`), the worlds' references to
//! them (`golden_refs`), and carrying out the drop requests commands make
//! (`golden_drops`).

use rusqlite::params;

use crate::spec::Resource;
use crate::store::owner::{self, Tx};
use crate::store::GoldenInputs;
use crate::store::{now_ms, GoldenState, SliceState, StoreError, WorldId};

/// The template `key` is in `state`, its build said `output` (and took `build_ms`, when
/// given).
pub(crate) fn set_state(
    tx: &Tx<'_, owner::Golden>,
    key: &str,
    state: GoldenState,
    output: &str,
    build_ms: Option<i64>,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE goldens SET state = ?2, output = ?3, build_ms = COALESCE(?4, build_ms), updated_at = ?5 WHERE key = ?1",
        params![key, state, output, build_ms, now_ms()],
    )?;
    Ok(())
}

/// Forget `world`'s reference of `service`.
pub(crate) fn remove_ref(
    tx: &Tx<'_, owner::Golden>,
    world: WorldId,
    service: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM golden_refs WHERE world_id = ?1 AND service = ?2",
        params![world, service],
    )?;
    Ok(())
}

/// The template `key` was last used at `at`.
pub(crate) fn set_used(tx: &Tx<'_, owner::Golden>, key: &str, at: i64) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE goldens SET used_at = ?2 WHERE key = ?1",
        params![key, at],
    )?;
    Ok(())
}

/// `world`'s `service` clones the template `key`; one it referred to before was last used
/// now.
pub(crate) fn refer(
    tx: &Tx<'_, owner::Golden>,
    world: WorldId,
    service: &str,
    key: &str,
) -> Result<(), StoreError> {
    // A reference it had to another template: that one was last used now.
    tx.execute(
        "UPDATE goldens SET used_at = ?3 WHERE key = (SELECT key FROM golden_refs WHERE world_id = ?1 AND service = ?2)",
        params![world, service, now_ms()],
    )?;
    tx.execute(
        "INSERT INTO golden_refs (world_id, service, key) SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, service) DO UPDATE SET key = excluded.key",
        params![world, service, key],
    )?;
    tx.execute(
        "UPDATE goldens SET used_at = ?2 WHERE key = ?1",
        params![key, now_ms()],
    )?;
    Ok(())
}

/// Who builds a template, and for which world.
pub(crate) struct Builder<'a> {
    /// The daemon building it.
    pub builder: &'a str,
    /// The world it builds it for.
    pub world: WorldId,
}

/// Claim the build of the template of `inputs` (`name`, `secret`, of `res`) for `by`,
/// unless a row of it exists already (`input_files`: `inputs.migrations` as JSON). Whether
/// it was claimed.
pub(crate) fn claim(
    tx: &Tx<'_, owner::Golden>,
    by: &Builder<'_>,
    res: &Resource,
    inputs: &GoldenInputs,
    name: &str,
    secret: &str,
    input_files: &str,
) -> Result<bool, StoreError> {
    let n = tx.execute(
        "INSERT OR IGNORE INTO goldens (key, adapter, clone_from, name, secret, state, builder, owner_world, created_at, updated_at, lineage, inputs, used_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?11, ?6, ?7, ?8, ?8, ?9, ?10, ?8)",
        params![inputs.key, res.adapter, res.clone_from, name, secret, by.builder, by.world, now_ms(), inputs.lineage, input_files, GoldenState::Building],
    )?;
    Ok(n == 1)
}

/// Claim the build of the existing template of `inputs` for `by` (`input_files`:
/// `inputs.migrations` as JSON).
pub(crate) fn reclaim(
    tx: &Tx<'_, owner::Golden>,
    by: &Builder<'_>,
    inputs: &GoldenInputs,
    input_files: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE goldens SET state = ?7, builder = ?2, owner_world = ?3, output = '', updated_at = ?4, lineage = ?5, inputs = ?6 WHERE key = ?1",
        params![inputs.key, by.builder, by.world, now_ms(), inputs.lineage, input_files, GoldenState::Building],
    )?;
    Ok(())
}

/// The template `key` was migrated (or not), `how`, on the server at `admin_url` (kept when
/// none).
pub(crate) fn set_migrated(
    tx: &Tx<'_, owner::Golden>,
    key: &str,
    migrated: bool,
    how: &str,
    admin_url: Option<&str>,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE goldens SET migrated = ?2, how = ?3, admin_url = COALESCE(?4, admin_url), updated_at = ?5 WHERE key = ?1",
        params![key, migrated, how, admin_url, now_ms()],
    )?;
    Ok(())
}

/// The template `key` grows from the template `base` (none: from nothing).
pub(crate) fn set_base(
    tx: &Tx<'_, owner::Golden>,
    key: &str,
    base: Option<String>,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE goldens SET base = ?2 WHERE key = ?1",
        params![key, base],
    )?;
    Ok(())
}

/// The template `key` grows from nothing.
pub(crate) fn clear_base(tx: &Tx<'_, owner::Golden>, key: &str) -> Result<(), StoreError> {
    tx.execute("UPDATE goldens SET base = NULL WHERE key = ?1", [key])?;
    Ok(())
}

/// Whether the template `key` keeps a migrated stage.
pub(crate) fn set_staged(
    tx: &Tx<'_, owner::Golden>,
    key: &str,
    staged: bool,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE goldens SET staged = ?2 WHERE key = ?1",
        params![key, staged],
    )?;
    Ok(())
}

/// Forget the drop requests of templates that are gone.
pub(crate) fn forget_stale_drops(tx: &Tx<'_, owner::Golden>) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM golden_drops WHERE key NOT IN (SELECT key FROM goldens)",
        [],
    )?;
    Ok(())
}

/// Claim the template `key`, in `state`, for dropping, when nothing copies from it now and
/// (`claim`: `unused`) no world uses it or (`asked`) it is not ready or no world waits to
/// be cloned from it (`resume`: a drop claimed before). Whether it was claimed.
pub(crate) fn claim_drop(
    tx: &Tx<'_, owner::Golden>,
    key: &str,
    state: GoldenState,
    claim: &str,
) -> Result<bool, StoreError> {
    // Nothing copies from it now, and (unless asked) no world uses it; asked, no
    // world waits to be cloned from it.
    let n = tx.execute(
        "UPDATE goldens SET state = ?5, updated_at = ?4
         WHERE key = ?1 AND state = ?2
           AND NOT EXISTS (SELECT 1 FROM goldens b WHERE b.state = ?6 AND b.base = ?1)
           AND CASE ?3
             WHEN 'unused' THEN NOT EXISTS (SELECT 1 FROM golden_refs WHERE key = ?1)
             WHEN 'asked' THEN ?2 <> ?9 OR NOT EXISTS (
               SELECT 1 FROM golden_refs r LEFT JOIN slices s
               ON s.world_id = r.world_id AND s.service = r.service
               WHERE r.key = ?1 AND (s.state IS NULL OR s.state NOT IN (?7, ?8)))
             ELSE 1 END",
        params![
            key,
            state,
            claim,
            now_ms(),
            GoldenState::Dropping,
            GoldenState::Building,
            SliceState::Ready,
            SliceState::Stopped,
            GoldenState::Ready
        ],
    )?;
    Ok(n == 1)
}

/// The template `key`, dropped: its row and any request to drop it go.
pub(crate) fn dropped(tx: &Tx<'_, owner::Golden>, key: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM goldens WHERE key = ?1 AND state = ?2",
        params![key, GoldenState::Dropping],
    )?;
    tx.execute("DELETE FROM golden_drops WHERE key = ?1", [key])?;
    Ok(())
}
