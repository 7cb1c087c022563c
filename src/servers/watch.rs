//! Watching the managed servers while the daemon runs (the shared ones and the worlds' own
//! redis servers alike): a server that dies is said — an
//! event `server_down` on every world with a slice on it, its row marked `down` (the slice
//! controller then holds those worlds' `SlicesReady` at False, reason `ServerDown`) — and
//! started again at once, with backoff while it will not start; `server_back` says when it
//! is. Before this, a killed PostgreSQL left every world ready/True with no event until a
//! drift check restarted it 30 s later.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use binky_controllers::runtime::{doubling_delay, Trigger};
use binky_controllers::store::{self, ServerRow, ServerState, Store, WorldId};
use tokio::sync::Notify;

use super::{ServerName, Servers};

/// How often the servers are looked at.
const EVERY: Duration = Duration::from_secs(1);
/// The longest wait between two starts of a server that will not start.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// A server seen dead, not back yet.
struct Down {
    name: ServerName,
    since: Instant,
    retry_at: Instant,
    /// Starts that failed in a row.
    failures: u32,
    /// Back, or no longer to be started: forgotten after this round.
    done: bool,
    admin_url: String,
}

/// Watch `servers` until `stop` is notified.
pub async fn run(servers: Arc<Servers>, store: Store, trigger: Trigger, stop: Arc<Notify>) {
    // By server key.
    let mut down: HashMap<String, Down> = HashMap::new();
    loop {
        tokio::select! {
            _ = stop.notified() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
        let Some(rows) =
            store.read_or_warn("server watch: cannot read the servers", store::servers)
        else {
            continue;
        };
        for row in rows {
            let Some(name) = ServerName::parse(&row.kind) else {
                continue;
            };
            if row.state == ServerState::Running
                && !Servers::alive(&row)
                && !down.contains_key(&row.kind)
                && died(&servers, &store, &trigger, &name, &row).await
            {
                let now = Instant::now();
                down.insert(
                    row.kind.clone(),
                    Down {
                        name,
                        since: now,
                        retry_at: now,
                        failures: 0,
                        done: false,
                        admin_url: row.admin_url.clone(),
                    },
                );
            }
        }
        for d in down.values_mut() {
            if Instant::now() < d.retry_at {
                continue;
            }
            match servers.restart(&d.name).await {
                Ok(Some(_)) => {
                    let pid = servers
                        .row(&d.name)
                        .ok()
                        .flatten()
                        .and_then(|r| r.pid)
                        .map(|p| format!(" (pid {p})"))
                        .unwrap_or_default();
                    let msg = format!(
                        "the managed {} server is back{pid} after {:.1}s",
                        d.name,
                        d.since.elapsed().as_secs_f64()
                    );
                    tell(&store, &trigger, &d.admin_url, "server_back", &msg);
                    tracing::info!(server = %d.name, "managed server back");
                    d.done = true;
                }
                // Stopped (its world went down, `binky servers stop`) or removed meanwhile.
                Ok(None) => d.done = true,
                Err(err) => {
                    tracing::warn!(server = %d.name, %err, "managed server does not start again");
                    d.failures += 1;
                    d.retry_at = Instant::now() + doubling_delay(2 * EVERY, d.failures, MAX_RETRY);
                }
            }
        }
        down.retain(|_, d| !d.done);
    }
}

/// Record that `row`'s server died, and tell the worlds that use it; false when it was
/// stopped or started again meanwhile (nothing to say).
async fn died(
    servers: &Servers,
    store: &Store,
    trigger: &Trigger,
    name: &ServerName,
    row: &ServerRow,
) -> bool {
    let pid = row.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
    match servers
        .mark_died(name, &format!("stopped running{pid}"))
        .await
    {
        Ok(true) => {}
        Ok(false) => return false,
        Err(err) => {
            tracing::warn!(%err, "server watch: cannot record the death");
            return false;
        }
    }
    let msg = format!(
        "the managed {name} server{pid} stopped running; binky is starting it again (its log: {})",
        servers.log_of(name).display()
    );
    tracing::warn!(server = %name, "managed server died");
    tell(store, trigger, &row.admin_url, "server_down", &msg);
    true
}

/// An event on every world with a slice on the server at `admin_url`, and a nudge.
fn tell(store: &Store, trigger: &Trigger, admin_url: &str, kind: &str, msg: &str) {
    for world in users(store, admin_url) {
        if let Err(err) = store.event(world, kind, msg) {
            tracing::warn!(%err, "server watch: cannot write an event");
        }
        trigger.world(world);
    }
}

/// The worlds with a slice on the server at `admin_url`.
fn users(store: &Store, admin_url: &str) -> Vec<WorldId> {
    store
        .read(|c| {
            let mut out = Vec::new();
            for w in store::worlds(c)? {
                if store::slices(c, w.id)?
                    .iter()
                    .any(|s| s.admin_url.as_deref() == Some(admin_url))
                {
                    out.push(w.id);
                }
            }
            Ok(out)
        })
        .unwrap_or_default()
}
