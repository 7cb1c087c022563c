//! Watching the managed servers while the daemon runs (the shared ones and the worlds' own
//! redis servers alike): a server that dies is said — an event `server_down` on every world
//! with a slice on it, its row marked `down` (the slice controller then holds those worlds'
//! `SlicesReady` at False, reason `ServerDown`) — and started again at once, with backoff
//! while it will not start (one recorded `down` or `failed` when the daemon starts, and used
//! by a world, too); `server_back` says when it is. A server `binky servers stop` stopped is
//! said too (`server_stopped`; the worlds on it fail with `ServerStopped`, naming the `binky
//! up` that starts it again) and left stopped; when anything starts a server again, the
//! worlds on it are nudged, so they are ready again without waiting for a resync.

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

impl Down {
    /// A server found down now, to be started again at once.
    fn now(name: ServerName, admin_url: &str) -> Down {
        let now = Instant::now();
        Down {
            name,
            since: now,
            retry_at: now,
            failures: 0,
            done: false,
            admin_url: admin_url.to_owned(),
        }
    }
}

/// Watch `servers` until `stop` is notified.
pub async fn run(servers: Arc<Servers>, store: Store, trigger: Trigger, stop: Arc<Notify>) {
    // By server key.
    let mut down: HashMap<String, Down> = HashMap::new();
    // Each server's state at the last look, by server key.
    let mut seen: HashMap<String, ServerState> = HashMap::new();
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
            let before = seen.insert(row.kind.clone(), row.state);
            changed(&store, &trigger, &name, &row, before);
            // Recorded down or failed by an earlier daemon (or a start that failed): a
            // world on it needs it, so it is started again like one seen dying.
            let left_down = matches!(row.state, ServerState::Down | ServerState::Failed)
                && before.is_none()
                && !users(&store, &row.admin_url).is_empty();
            if left_down && !down.contains_key(&row.kind) {
                down.insert(row.kind.clone(), Down::now(name, &row.admin_url));
                continue;
            }
            if row.state == ServerState::Running
                && !Servers::alive(&row)
                && !down.contains_key(&row.kind)
                && died(&servers, &store, &trigger, &name, &row).await
            {
                down.insert(row.kind.clone(), Down::now(name, &row.admin_url));
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

/// Say what a change of `row`'s recorded state from `before` means to the worlds on it: a
/// server a person stopped (`binky servers stop`) is told to each of them, and one that
/// runs again (started by a `binky up`, or back after a death) nudges them, so their
/// `SlicesReady` is judged again at once.
fn changed(
    store: &Store,
    trigger: &Trigger,
    name: &ServerName,
    row: &ServerRow,
    before: Option<ServerState>,
) {
    if before.is_none_or(|b| b == row.state) {
        return;
    }
    match row.state {
        // Said only to the worlds that run: a world's own server stops with its world too
        // (`binky down`), which is nothing to tell.
        ServerState::Stopped => {
            let msg = format!(
                "`binky servers stop` stopped the managed {name} server (data kept); the worlds on it are not ready until a `binky up` of one of them starts it again"
            );
            let running = running_users(store, &row.admin_url);
            for world in running {
                if let Err(err) = store.event(world, "server_stopped", &msg) {
                    tracing::warn!(%err, "server watch: cannot write an event");
                }
                trigger.world(world);
            }
        }
        ServerState::Running => {
            for world in users(store, &row.admin_url) {
                trigger.world(world);
            }
        }
        _ => {}
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
        .mark_died(
            name,
            &format!("stopped running{pid}; binky is starting it again"),
        )
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
    users_where(store, admin_url, |_| true)
}

/// The worlds with a slice on the server at `admin_url` that are to run (neither down nor
/// being removed).
fn running_users(store: &Store, admin_url: &str) -> Vec<WorldId> {
    users_where(store, admin_url, |w| {
        !w.deleted && w.desired == store::DesiredState::Running
    })
}

/// The worlds of `keep` with a slice on the server at `admin_url`.
fn users_where(
    store: &Store,
    admin_url: &str,
    keep: impl Fn(&store::World) -> bool,
) -> Vec<WorldId> {
    store
        .read(|c| {
            let mut out = Vec::new();
            for w in store::worlds(c)?.into_iter().filter(|w| keep(w)) {
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
