//! The managed redis server (being written).

use super::{ServerError, StartCtx, Started};

/// Start (initialising on first use) the managed redis server.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let _ = ctx;
    Err(ServerError::Missing {
        what: "redis".into(),
        package: "redis".into(),
    })
}
