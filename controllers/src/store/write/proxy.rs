//! The proxy manager's write (`proxy_status`), which the daemon's `binky` crate makes.

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::{now_ms, StoreError};

/// The daemon `pid` serves the proxy on `http` and `https` (none: not served), the notes
/// saying why not on the asked-for ports.
pub fn set_status(
    tx: &Tx<'_, owner::Proxy>,
    pid: u32,
    http: Option<u16>,
    https: Option<u16>,
    http_note: &str,
    https_note: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO proxy_status (id, pid, http_port, https_port, http_note, https_note, updated_at)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, http_port = excluded.http_port,
            https_port = excluded.https_port, http_note = excluded.http_note,
            https_note = excluded.https_note, updated_at = excluded.updated_at",
        params![pid, http, https, http_note, https_note, now_ms()],
    )?;
    Ok(())
}
