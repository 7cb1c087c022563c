//! What the dashboard's pages are pushed: every world's view and the home's globals,
//! serialized once per change however many pages watch, and sent to each page as the
//! difference from what it has.
//!
//! # Guarantees
//! - A change of the store (a commit by any connection, in any process: `PRAGMA
//!   data_version`) is seen within [`LOOK_EVERY`]; the dashboard's own writes poke it.
//! - Nothing is built while no page watches.
//! - A page gets the whole state first, then only the worlds that changed (and the ids of
//!   the worlds that went), and the globals when they changed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use binky_controllers::store::{self, Store, StoreError, WorldId};
use bytes::Bytes;
use serde_json::json;
use tokio::sync::{watch, Notify};

use crate::proxy::body::Body;

/// How often the store is looked at for a change while a page watches.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The globals are rebuilt at least this often (the daemon's memory, the servers' state).
const GLOBALS_EVERY: Duration = Duration::from_secs(5);

/// A page that hears nothing for this long gets a comment (and a gone page is noticed).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// One build: each world's JSON, and the globals'.
#[derive(Default)]
pub struct Snapshot {
    /// Each world's JSON.
    pub worlds: BTreeMap<WorldId, Arc<str>>,
    /// The rest: daemon, approvals, golden templates, servers, settings.
    pub globals: Arc<str>,
}

/// The builder and its subscribers.
pub struct Snapshots {
    rx: watch::Receiver<Arc<Snapshot>>,
    watching: Arc<AtomicUsize>,
    poked: Arc<AtomicBool>,
    stop: Arc<Notify>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Counts a watching page while it lives.
struct Watching(Arc<AtomicUsize>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn world_json(w: &store::World, view: crate::view::WorldView) -> String {
    json!({
        "id": w.id,
        "project": w.project,
        "name": w.name,
        "branch": w.branch,
        "repo_root": w.repo_root,
        "config_path": w.config_path,
        "created_at": w.created_at,
        "shared": w.is_shared(),
        "deleted": w.deleted,
        "view": view,
    })
    .to_string()
}

fn globals_json(store: &Store, started: i64) -> Result<String, StoreError> {
    // Off, nothing waits for a person: the page says so and offers nothing to approve.
    let approvals_on = crate::requests::approvals_on(store)?;
    let approvals = if approvals_on {
        crate::requests::approvals(store)?
    } else {
        Vec::new()
    };
    let goldens: Vec<serde_json::Value> = crate::view::goldens_with_users(store)?
        .iter()
        .map(|(g, users)| json!({"template": g, "used_by": users}))
        .collect();
    let servers = store.read(store::servers)?;
    let proxy = store.read(store::proxy_status)?;
    let settings = store.read(store::settings)?;
    let pid = std::process::id();
    Ok(json!({
        "daemon": {
            "pid": pid,
            "version": env!("CARGO_PKG_VERSION"),
            "started_at": started,
            "rss_bytes": binky_platform::proc::rss_bytes(pid),
        },
        "proxy": proxy.map(|p| json!({"http_port": p.http_port, "https_port": p.https_port})),
        "settings": settings,
        "approvals_on": approvals_on,
        "approvals": approvals,
        "goldens": goldens,
        "servers": servers,
    })
    .to_string())
}

fn build(
    store: &Store,
    started: i64,
    last: &Snapshot,
    globals: bool,
) -> Result<Snapshot, StoreError> {
    let mut worlds = BTreeMap::new();
    let all = store.read(store::worlds)?;
    let views = crate::view::worlds(store, &all)?;
    for (w, view) in all.iter().zip(views) {
        let text = world_json(w, view);
        // The same text keeps the same allocation: pages compare cheaply.
        let kept = last.worlds.get(&w.id).filter(|t| ***t == *text).cloned();
        worlds.insert(w.id, kept.unwrap_or_else(|| Arc::from(text)));
    }
    let globals = if globals || last.globals.is_empty() {
        let text = globals_json(store, started)?;
        if *last.globals == *text {
            last.globals.clone()
        } else {
            Arc::from(text)
        }
    } else {
        last.globals.clone()
    };
    Ok(Snapshot { worlds, globals })
}

fn data_version(store: &Store) -> Option<i64> {
    store.read(store::data_version).ok()
}

impl Snapshots {
    /// Start the builder on `runtime`, reading `store`.
    pub fn start(store: Store, runtime: &tokio::runtime::Handle) -> Snapshots {
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let watching = Arc::new(AtomicUsize::new(0));
        let poked = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(Notify::new());
        let task = runtime.spawn(run(
            store,
            tx,
            watching.clone(),
            poked.clone(),
            stop.clone(),
        ));
        Snapshots {
            rx,
            watching,
            poked,
            stop,
            task: Mutex::new(Some(task)),
        }
    }

    /// Build again soon (the dashboard wrote something itself).
    pub fn poke(&self) {
        self.poked.store(true, Ordering::Relaxed);
    }

    /// Stop building.
    pub fn stop(&self) {
        self.stop.notify_one();
        if let Some(t) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.abort();
        }
    }

    /// `GET /api/stream`: the state, then its changes, as server-sent events, for as long as
    /// the session of `lease` lives.
    pub fn stream(&self, mut lease: super::session::Lease) -> hyper::Response<Body> {
        let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(8);
        let mut rx = self.rx.clone();
        self.watching.fetch_add(1, Ordering::Relaxed);
        self.poked.store(true, Ordering::Relaxed);
        let watching = Watching(self.watching.clone());
        tokio::spawn(async move {
            let _watching = watching;
            let mut sent: BTreeMap<WorldId, Arc<str>> = BTreeMap::new();
            let mut sent_globals: Option<Arc<str>> = None;
            loop {
                let snap = rx.borrow_and_update().clone();
                if !snap.globals.is_empty() {
                    if let Some(msg) = diff(&snap, &mut sent, &mut sent_globals) {
                        if tx.send_data(Bytes::from(msg)).await.is_err() {
                            return;
                        }
                    }
                }
                tokio::select! {
                    () = lease.ended() => return,
                    changed = rx.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(HEARTBEAT) => {
                        if tx.send_data(Bytes::from_static(b": still here\n\n")).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        super::sse(body)
    }
}

/// The event that brings a page from `sent` to `snap`; `None` when nothing changed.
fn diff(
    snap: &Snapshot,
    sent: &mut BTreeMap<WorldId, Arc<str>>,
    sent_globals: &mut Option<Arc<str>>,
) -> Option<String> {
    let first = sent_globals.is_none();
    let mut worlds = String::new();
    for (id, text) in &snap.worlds {
        if sent
            .get(id)
            .is_some_and(|t| Arc::ptr_eq(t, text) || **t == **text)
        {
            continue;
        }
        if !worlds.is_empty() {
            worlds.push(',');
        }
        worlds.push_str(&format!("\"{id}\":{text}"));
        sent.insert(*id, text.clone());
    }
    let gone: Vec<WorldId> = sent
        .keys()
        .filter(|id| !snap.worlds.contains_key(id))
        .copied()
        .collect();
    for id in &gone {
        sent.remove(id);
    }
    let globals_changed = sent_globals.as_ref().is_none_or(|g| **g != *snap.globals);
    if worlds.is_empty() && gone.is_empty() && !globals_changed {
        return None;
    }
    let globals = if globals_changed {
        *sent_globals = Some(snap.globals.clone());
        snap.globals.to_string()
    } else {
        "null".to_owned()
    };
    let gone: Vec<String> = gone.iter().map(|i| i.to_string()).collect();
    Some(format!(
        "event: update\ndata: {{\"full\":{first},\"worlds\":{{{worlds}}},\"gone\":[{}],\"globals\":{globals}}}\n\n",
        gone.join(",")
    ))
}

async fn run(
    store: Store,
    tx: watch::Sender<Arc<Snapshot>>,
    watching: Arc<AtomicUsize>,
    poked: Arc<AtomicBool>,
    stop: Arc<Notify>,
) {
    let started = store::now_ms();
    let mut seen: Option<i64> = None;
    let mut globals_at = Instant::now();
    loop {
        tokio::select! {
            _ = stop.notified() => return,
            _ = tokio::time::sleep(LOOK_EVERY) => {}
        }
        if watching.load(Ordering::Relaxed) == 0 {
            // Looked at again in full when the next page comes.
            seen = None;
            continue;
        }
        let version = data_version(&store);
        let globals = globals_at.elapsed() >= GLOBALS_EVERY;
        let poke = poked.swap(false, Ordering::Relaxed);
        if version == seen && seen.is_some() && !globals && !poke {
            continue;
        }
        let last = tx.borrow().clone();
        match build(&store, started, &last, globals || poke || seen.is_none()) {
            Ok(snap) => {
                seen = version;
                if globals {
                    globals_at = Instant::now();
                }
                let same = snap.globals == last.globals
                    && snap.worlds.len() == last.worlds.len()
                    && snap
                        .worlds
                        .iter()
                        .all(|(id, t)| last.worlds.get(id).is_some_and(|l| Arc::ptr_eq(l, t)));
                if !same {
                    let _ = tx.send(Arc::new(snap));
                }
            }
            Err(err) => tracing::warn!(%err, "dashboard: cannot read the store"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(worlds: &[(WorldId, &str)], globals: &str) -> Snapshot {
        Snapshot {
            worlds: worlds.iter().map(|(i, t)| (*i, Arc::from(*t))).collect(),
            globals: Arc::from(globals),
        }
    }

    #[test]
    fn a_page_gets_everything_first_then_only_what_changed() {
        let (mut sent, mut globals) = (BTreeMap::new(), None);
        let first = diff(
            &snap(&[(1, "{\"a\":1}"), (2, "{\"b\":1}")], "{}"),
            &mut sent,
            &mut globals,
        )
        .unwrap();
        assert!(first.contains("\"full\":true"), "{first}");
        assert!(
            first.contains("\"1\":{\"a\":1}") && first.contains("\"2\":{\"b\":1}"),
            "{first}"
        );
        assert!(first.contains("\"globals\":{}"), "{first}");
        // Nothing changed: nothing is sent.
        assert!(diff(
            &snap(&[(1, "{\"a\":1}"), (2, "{\"b\":1}")], "{}"),
            &mut sent,
            &mut globals
        )
        .is_none());
        // One world changed, one went: that world, and the gone id; no globals.
        let next = diff(&snap(&[(1, "{\"a\":2}")], "{}"), &mut sent, &mut globals).unwrap();
        assert!(next.contains("\"full\":false"), "{next}");
        assert!(next.contains("\"worlds\":{\"1\":{\"a\":2}}"), "{next}");
        assert!(next.contains("\"gone\":[2]"), "{next}");
        assert!(next.contains("\"globals\":null"), "{next}");
    }
}
