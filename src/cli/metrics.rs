//! `binky metrics`: a point-in-time JSON snapshot of the home — a superset of binky 0.1.2's
//! (`worktrees`, `ports_allocated`, `slices`, `admission`), plus the daemon, worlds and
//! services by state (each replica counted), what each world uses (CPU and memory, from its
//! cgroups), limits and out-of-memory kills, projects' shared services, managed servers and
//! golden templates. Read from the store, so it answers with the daemon down too
//! (`daemon.running: false`).

use std::time::Duration;

use super::context::{Ctx, Failure};
use super::exit;
use crate::view;

/// `binky metrics`.
pub async fn run() -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let daemon = crate::daemon::client::ping_within(&ctx.home, Duration::from_millis(500))
        .await
        .ok();
    let out = view::metrics(&ctx.store, daemon.as_ref())?;
    super::print_json(&out);
    Ok(exit::OK)
}
