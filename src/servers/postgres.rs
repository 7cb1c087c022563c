//! The managed postgres server (being written).

use super::{ServerError, StartCtx, Started};

/// Start (initialising on first use) the managed postgres server.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let _ = ctx;
    Err(ServerError::Missing {
        what: "postgres".into(),
        package: "postgres".into(),
    })
}
