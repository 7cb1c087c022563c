//! What the daemon's own parts wrote: the proxy's ports and the managed servers.

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::worlds::setting;
use crate::store::states::ServerState;
use crate::store::StoreError;

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
    /// Where it is.
    pub state: ServerState,
    /// Why it failed, if it did.
    pub message: String,
}

/// Every managed server.
pub fn servers(conn: &Connection) -> Result<Vec<ServerRow>, StoreError> {
    let mut stmt = conn.prepare_cached(
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
