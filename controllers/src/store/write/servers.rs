//! The managed servers' writes (`servers`), which the daemon's `binky` crate makes.

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::{now_ms, ServerState, StoreError};

/// A managed server, as recorded.
#[derive(Clone, Debug)]
pub struct ServerRecord<'a> {
    /// Its key (`postgres`, `postgres/<slice>`).
    pub kind: &'a str,
    /// Its process and that process's start time, while it runs.
    pub proc_: Option<(u32, u64)>,
    /// The port it listens on.
    pub port: u16,
    /// How to reach it as its admin.
    pub admin_url: &'a str,
    /// Where its data lives.
    pub data_dir: &'a str,
    /// Its version.
    pub version: &'a str,
    /// Running, down, stopped, …
    pub state: ServerState,
    /// What happened to it.
    pub message: &'a str,
}

/// Record the server `s`.
pub fn record(tx: &Tx<'_, owner::Servers>, s: &ServerRecord<'_>) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO servers (kind, pid, start_time, port, admin_url, data_dir, version, state, message, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (kind) DO UPDATE SET pid = excluded.pid, start_time = excluded.start_time,
            port = excluded.port, admin_url = excluded.admin_url, data_dir = excluded.data_dir,
            version = excluded.version, state = excluded.state, message = excluded.message,
            updated_at = excluded.updated_at",
        params![
            s.kind,
            s.proc_.map(|p| p.0),
            s.proc_.map(|p| p.1 as i64),
            s.port,
            s.admin_url,
            s.data_dir,
            s.version,
            s.state,
            s.message,
            now_ms()
        ],
    )?;
    Ok(())
}

/// The server `kind` died (`message` saying how): down, its process cleared.
pub fn mark_died(tx: &Tx<'_, owner::Servers>, kind: &str, message: &str) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE servers SET state = ?1, message = ?2, pid = NULL, start_time = NULL,
            updated_at = ?3 WHERE kind = ?4",
        params![ServerState::Down, message, now_ms(), kind],
    )?;
    Ok(())
}

/// Servers left `starting` (their daemon stopped before they ran) are `failed`, saying so:
/// how many.
pub fn fail_interrupted_starts(
    tx: &Tx<'_, owner::Servers>,
    message: &str,
) -> Result<usize, StoreError> {
    Ok(tx.execute(
        "UPDATE servers SET state = ?1, message = ?2, pid = NULL, start_time = NULL,
            updated_at = ?3 WHERE state = ?4",
        params![
            ServerState::Failed,
            message,
            now_ms(),
            ServerState::Starting
        ],
    )?)
}

/// The server `kind` is stopped.
pub fn mark_stopped(tx: &Tx<'_, owner::Servers>, kind: &str) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE servers SET state = ?1, pid = NULL, start_time = NULL, updated_at = ?2 WHERE kind = ?3",
        params![ServerState::Stopped, now_ms(), kind],
    )?;
    Ok(())
}

/// Forget the server `kind`.
pub fn remove(tx: &Tx<'_, owner::Servers>, kind: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM servers WHERE kind = ?1", [kind])?;
    Ok(())
}
