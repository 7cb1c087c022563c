//! The daemon's file watcher: each world's `binky.toml` (a saved edit is applied as
//! `binky apply` would) and each service's `watch` globs (a change restarts that service).
//!
//! # Guarantees
//! - Events are batched until they pause for [`QUIET`] (at most [`BATCH`]): an editor's
//!   write-rename-chmod, or a `git checkout` touching fifty files, is one apply and at most
//!   one restart per service.
//! - An edit is turned into desired state through [`crate::apply::apply`], the same code as
//!   `binky apply`; an invalid edit changes nothing and sets `ConfigValid` false.
//! - `.git`, `target` and `node_modules` are never watched.
//! - When the system refuses a watch for want of room (Linux: inotify's
//!   `fs.inotify.max_user_watches`; macOS: kqueue's open files, past the daemon's limit of
//!   them, which it raises at start), the world gets a `FilesWatched` condition that says
//!   which limit and how to raise it, and its files are polled instead (every [`POLL`]).
//! - The watch set follows the store: worlds added, changed or removed are picked up within
//!   [`RESYNC`]; a world seen for the first time is compared with its file at once (a new
//!   world's once the worktree controller has its checkout done, never half-written), so an
//!   edit made while no daemon ran is applied too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use binky_controllers::glob::glob_match;
use binky_controllers::runtime::{self, Condition, Trigger};
use binky_controllers::store::{self, Store, World, WorldId};
use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, Notify};

use crate::apply::{self, Outcome};

/// The longest events are gathered before acting on them.
pub const BATCH: Duration = Duration::from_millis(250);
/// A pause this long ends a batch early.
pub const QUIET: Duration = Duration::from_millis(20);
/// How often the watch set is compared with the store.
pub const RESYNC: Duration = Duration::from_millis(1000);
/// The polling interval of the fallback watcher.
pub const POLL: Duration = Duration::from_secs(1);
/// The condition that reports how files are watched.
pub const CONDITION: &str = binky_controllers::registry::Reporter::Watch.condition();

const NEVER: [&str; 3] = [".git", "target", "node_modules"];

type Events = mpsc::UnboundedSender<notify::Result<notify::Event>>;

/// Is `e` the system's "too many open files" (`EMFILE` for the process, `ENFILE` for the
/// machine: 24 and 23 on Linux and macOS alike)?
fn too_many_open_files(e: &std::io::Error) -> bool {
    cfg!(unix) && matches!(e.raw_os_error(), Some(23 | 24))
}

/// What is watched for one world.
#[derive(Default)]
struct WorldWatch {
    config: PathBuf,
    root: PathBuf,
    globs: BTreeMap<String, Vec<String>>,
    dirs: BTreeSet<PathBuf>,
    polled: bool,
    generation: i64,
}

struct Watchers {
    events: Events,
    inotify: Option<notify::RecommendedWatcher>,
    poll: Option<notify::PollWatcher>,
    worlds: BTreeMap<WorldId, WorldWatch>,
    /// Directories and how many worlds watch each (inotify).
    refs: BTreeMap<PathBuf, usize>,
    /// `BINKY_WATCH_LIMIT`: act as if inotify allowed only this many watches (to exercise
    /// the fallback without lowering the machine's limit).
    limit: Option<usize>,
    /// Worlds whose file was missing at a resync, by generation (nudged once each).
    missing: BTreeMap<WorldId, i64>,
    /// The store's worlds at the last sync (count, sum of generations, highest id): while it
    /// is unchanged and no world waits for its file, a sync has nothing to do.
    seen: Option<(i64, i64, i64)>,
    /// Worlds seen without their `binky.toml` yet (a worktree being made, or deleted).
    pending: BTreeSet<WorldId>,
}

impl Watchers {
    fn new(events: Events) -> Self {
        let tx = events.clone();
        let inotify = match notify::recommended_watcher(move |ev| {
            let _ = tx.send(ev);
        }) {
            Ok(w) => Some(w),
            Err(err) => {
                tracing::warn!(%err, "cannot watch files with inotify; polling instead");
                None
            }
        };
        Watchers {
            events,
            inotify,
            poll: None,
            worlds: BTreeMap::new(),
            refs: BTreeMap::new(),
            missing: BTreeMap::new(),
            seen: None,
            pending: BTreeSet::new(),
            limit: std::env::var("BINKY_WATCH_LIMIT")
                .ok()
                .and_then(|v| v.parse().ok()),
        }
    }

    fn poller(&mut self) -> Option<&mut notify::PollWatcher> {
        if self.poll.is_none() {
            let tx = self.events.clone();
            let config = notify::Config::default()
                .with_poll_interval(POLL)
                .with_compare_contents(false);
            match notify::PollWatcher::new(
                move |ev| {
                    let _ = tx.send(ev);
                },
                config,
            ) {
                Ok(w) => self.poll = Some(w),
                Err(err) => tracing::warn!(%err, "cannot poll files either"),
            }
        }
        self.poll.as_mut()
    }

    /// Watch `dir` (not recursively) for a world; false when inotify refused it.
    fn add_dir(&mut self, dir: &Path) -> Result<(), String> {
        if let Some(n) = self.refs.get_mut(dir) {
            *n += 1;
            return Ok(());
        }
        let limited = self.limit.is_some_and(|l| self.refs.len() >= l);
        let Some(w) = self.inotify.as_mut() else {
            return Err("inotify is not available".into());
        };
        let result = if limited {
            Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch))
        } else {
            w.watch(dir, RecursiveMode::NonRecursive)
        };
        match result {
            Ok(()) => {
                self.refs.insert(dir.to_owned(), 1);
                Ok(())
            }
            Err(e) => Err(match &e.kind {
                notify::ErrorKind::MaxFilesWatch => binky_platform::fs::watch_limit_reached(
                    binky_platform::fs::Watching::current(),
                    binky_platform::fs::watch_limit(),
                ),
                // kqueue (macOS) runs out of open files, not of watches: EMFILE, ENFILE.
                notify::ErrorKind::Io(io) if too_many_open_files(io) => {
                    binky_platform::fs::watch_limit_reached(
                        binky_platform::fs::Watching::current(),
                        binky_platform::fs::watch_limit(),
                    )
                }
                _ => e.to_string(),
            }),
        }
    }

    fn remove_dir(&mut self, dir: &Path) {
        if let Some(n) = self.refs.get_mut(dir) {
            *n -= 1;
            if *n == 0 {
                self.refs.remove(dir);
                if let Some(w) = self.inotify.as_mut() {
                    let _ = w.unwatch(dir);
                }
            }
        }
    }

    fn forget(&mut self, id: WorldId) {
        if let Some(ww) = self.worlds.remove(&id) {
            if ww.polled {
                if let Some(p) = self.poll.as_mut() {
                    let _ = p.unwatch(&ww.root);
                    let _ = p.unwatch(&ww.config);
                }
            }
            for d in &ww.dirs {
                self.remove_dir(d);
            }
        }
    }

    /// Watch what `world` needs. Returns an inotify problem, if any.
    fn watch(&mut self, world: &World) -> Option<String> {
        let config = world.config_path.clone();
        let root = config.parent().map(Path::to_path_buf).unwrap_or_default();
        let globs = apply::watch_globs(&world.spec, world.group.as_deref());
        let mut dirs = BTreeSet::new();
        dirs.insert(root.clone());
        if !globs.is_empty() {
            walk_dirs(&root, &mut dirs);
        }
        let mut problem = None;
        let mut added = BTreeSet::new();
        for d in &dirs {
            match self.add_dir(d) {
                Ok(()) => {
                    added.insert(d.clone());
                }
                Err(e) => {
                    problem = Some(e);
                    break;
                }
            }
        }
        let mut ww = WorldWatch {
            config: config.clone(),
            root: root.clone(),
            globs: globs.clone(),
            dirs: added,
            polled: false,
            generation: world.generation,
        };
        if problem.is_some() {
            for d in std::mem::take(&mut ww.dirs) {
                self.remove_dir(&d);
            }
            if let Some(p) = self.poller() {
                let mode = if globs.is_empty() {
                    RecursiveMode::NonRecursive
                } else {
                    RecursiveMode::Recursive
                };
                let _ = p.watch(&root, mode);
                ww.polled = true;
            }
        }
        self.worlds.insert(world.id, ww);
        problem
    }

    /// A directory appeared inside a watched tree: watch it (and what is below it) too.
    fn grew(&mut self, dir: &Path) {
        let owners: Vec<WorldId> = self
            .worlds
            .iter()
            .filter(|(_, w)| !w.polled && !w.globs.is_empty() && dir.starts_with(&w.root))
            .map(|(id, _)| *id)
            .collect();
        for id in owners {
            let mut new = BTreeSet::new();
            new.insert(dir.to_owned());
            walk_dirs(dir, &mut new);
            for d in new {
                if self.worlds[&id].dirs.contains(&d) {
                    continue;
                }
                if self.add_dir(&d).is_ok() {
                    if let Some(w) = self.worlds.get_mut(&id) {
                        w.dirs.insert(d);
                    }
                }
            }
        }
    }
}

/// Every directory below `dir` that may be watched.
fn walk_dirs(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if NEVER.iter().any(|n| name == *n) {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let p = e.path();
            out.insert(p.clone());
            walk_dirs(&p, out);
        }
    }
}

fn ignored(rel: &Path) -> bool {
    rel.components()
        .any(|c| NEVER.iter().any(|n| c.as_os_str() == *n))
}

/// Run until `stop` is notified.
pub async fn run(store: Store, trigger: Trigger, stop: Arc<Notify>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut w = Watchers::new(tx);
    let mut resync = tokio::time::interval(RESYNC);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.notified() => break,
            _ = resync.tick() => sync(&mut w, &store, &trigger),
            Some(first) = rx.recv() => {
                // Gather until the events pause for QUIET (an editor's write-rename is one
                // batch), but never longer than BATCH (a checkout storm still gets acted on).
                let mut batch = vec![first];
                let cap = tokio::time::Instant::now() + BATCH;
                loop {
                    let until = (tokio::time::Instant::now() + QUIET).min(cap);
                    match tokio::time::timeout_at(until, rx.recv()).await {
                        Ok(Some(ev)) => batch.push(ev),
                        _ => break,
                    }
                }
                handle(&mut w, &store, &trigger, batch);
            }
        }
    }
}

/// Bring the watch set in line with the store.
fn sync(w: &mut Watchers, store: &Store, trigger: &Trigger) {
    // One cheap query a second; the worlds (and their specs) are read only when it changed.
    let seen = store.read(store::worlds_summary).ok();
    if seen.is_some() && seen == w.seen && w.pending.is_empty() {
        return;
    }
    w.seen = seen;
    let Some(worlds) = store.read_or_warn("watcher cannot list worlds", store::worlds) else {
        return;
    };
    // A project's shared world has no file of its own to follow: the worlds that use it
    // write it (their edits go through `apply`).
    let live: BTreeMap<WorldId, &World> = worlds
        .iter()
        .filter(|w| !w.deleted && !w.is_shared())
        .map(|w| (w.id, w))
        .collect();
    let gone: Vec<WorldId> = w
        .worlds
        .keys()
        .filter(|id| !live.contains_key(id))
        .copied()
        .collect();
    for id in gone {
        w.forget(id);
    }
    w.pending.retain(|id| live.contains_key(id));
    for (id, world) in live {
        let known = w.worlds.get(&id);
        let fresh = known.is_none();
        let stale = known.is_some_and(|k| {
            k.generation != world.generation
                && (k.config != world.config_path
                    || k.globs != apply::watch_globs(&world.spec, world.group.as_deref()))
        });
        if !(fresh || stale) {
            if let Some(k) = w.worlds.get_mut(&id) {
                k.generation = world.generation;
            }
            continue;
        }
        // Only once the worktree is there (a new world's file appears with it). A world
        // whose file went away is nudged once, so a deleted worktree is reported now.
        let present = world.config_path.is_file();
        let worktree = store.read(|c| store::worktree(c, id)).ok().flatten();
        // A new world's file exists from the moment `git worktree add` creates it, empty
        // until git writes it: it is read once the worktree controller says the checkout
        // is done (read half-written, it failed that world's `binky up` as invalid).
        if fresh
            && present
            && !worktree
                .as_ref()
                .is_some_and(|r| r.state == store::WorktreeState::Ready)
        {
            w.pending.insert(id);
            continue;
        }
        if !present {
            w.pending.insert(id);
            // A worktree that was ready and is gone: nudge once, so the worktree controller
            // reports it now (a world whose worktree is still being made is left alone).
            let gone = worktree
                .as_ref()
                .is_some_and(|r| r.state == store::WorktreeState::Ready && !r.path.is_dir());
            if gone && w.missing.insert(id, world.generation).is_none() {
                trigger.world(id);
            }
            if !fresh {
                w.forget(id);
            }
            continue;
        }
        w.missing.remove(&id);
        w.pending.remove(&id);
        w.forget(id);
        let problem = w.watch(world);
        let cond = match &problem {
            None => Condition::ok(
                CONDITION,
                "Watching",
                "binky.toml and `watch` files are watched",
            ),
            Some(p) => Condition::waiting(
                CONDITION,
                "Polling",
                format!(
                    "{p}; polling this world's files every {}s instead",
                    POLL.as_secs()
                ),
            ),
        };
        if let Err(err) = runtime::set_condition(store, world, runtime::Reporter::Watch, cond) {
            tracing::warn!(%err, "cannot record FilesWatched");
        }
        if fresh {
            // An edit made while nobody watched.
            config_changed(store, trigger, world);
        }
    }
}

fn config_changed(store: &Store, trigger: &Trigger, world: &World) {
    match apply::apply(store, world, false) {
        Ok(Outcome::Changed { plan, .. }) => {
            tracing::info!(world = %world.name, plan = %plan.summary(), "binky.toml changed; applying");
            trigger.world(world.id);
        }
        Ok(Outcome::Invalid(msg)) => {
            tracing::info!(world = %world.name, %msg, "binky.toml is invalid; keeping the last good config");
        }
        Ok(Outcome::Unchanged) => {}
        Err(err) => tracing::warn!(world = %world.name, %err, "cannot apply binky.toml"),
    }
}

fn handle(
    w: &mut Watchers,
    store: &Store,
    trigger: &Trigger,
    batch: Vec<notify::Result<notify::Event>>,
) {
    let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
    for ev in batch {
        match ev {
            Ok(ev) => {
                if matches!(ev.kind, notify::EventKind::Access(_)) {
                    continue;
                }
                if matches!(ev.kind, notify::EventKind::Create(_)) {
                    for p in &ev.paths {
                        if p.is_dir() {
                            w.grew(p);
                        }
                    }
                }
                paths.extend(ev.paths);
            }
            Err(err) => tracing::debug!(%err, "watch error"),
        }
    }
    let mut configs: BTreeSet<WorldId> = BTreeSet::new();
    let mut restarts: BTreeMap<(WorldId, String), String> = BTreeMap::new();
    for (id, ww) in &w.worlds {
        // The worktree itself went (deleted from outside): the worktree controller reports
        // it now rather than at the next resync; its files are not applied.
        if !ww.root.is_dir() && paths.iter().any(|p| p.starts_with(&ww.root)) {
            trigger.world(*id);
            continue;
        }
        for p in &paths {
            if *p == ww.config {
                configs.insert(*id);
                continue;
            }
            let Ok(rel) = p.strip_prefix(&ww.root) else {
                continue;
            };
            if ignored(rel) {
                continue;
            }
            let rel_s = rel.to_string_lossy();
            for (svc, globs) in &ww.globs {
                if globs.iter().any(|g| glob_match(g, &rel_s)) {
                    restarts
                        .entry((*id, svc.clone()))
                        .or_insert_with(|| format!("{rel_s} changed"));
                }
            }
        }
    }
    if configs.is_empty() && restarts.is_empty() {
        return;
    }
    let Some(worlds) = store.read_or_warn("watcher cannot read worlds", store::worlds) else {
        return;
    };
    for id in configs {
        if let Some(world) = worlds.iter().find(|x| x.id == id && !x.deleted) {
            config_changed(store, trigger, world);
        }
    }
    for ((id, svc), why) in restarts {
        match store.restart_service(id, &svc, &why) {
            Ok(_) => trigger.world(id),
            Err(err) => tracing::warn!(%err, service = %svc, "cannot restart for a watched file"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn running_out_of_open_files_is_told_apart_from_other_errors() {
        // EMFILE: one process past its limit (what kqueue's open gives the daemon).
        let e = std::io::Error::from_raw_os_error(24);
        assert!(too_many_open_files(&e), "{e}");
        assert!(too_many_open_files(&std::io::Error::from_raw_os_error(23)));
        assert!(!too_many_open_files(&std::io::Error::from_raw_os_error(2)));
        assert!(!too_many_open_files(&std::io::Error::other("no code")));
    }

    #[test]
    fn build_and_dependency_dirs_are_never_watched() {
        assert!(ignored(Path::new("node_modules/x/index.js")));
        assert!(ignored(Path::new("a/target/debug/x")));
        assert!(ignored(Path::new(".git/index")));
        assert!(!ignored(Path::new("src/targets.rs")));
        let dir = tempfile::tempdir().unwrap();
        for d in ["src/a", "node_modules/m", ".git/objects", "target/debug"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let mut out = BTreeSet::new();
        walk_dirs(dir.path(), &mut out);
        let rel: Vec<&Path> = out
            .iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap())
            .collect();
        assert_eq!(rel, vec![Path::new("src"), Path::new("src/a")]);
    }

    #[tokio::test]
    async fn a_new_worlds_file_is_read_only_once_its_checkout_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        let config = wt.join("binky.toml");
        let text = "[project]\nname = \"acme\"\n\n[services.web]\ncmd = \"sleep 100\"\n";
        let spec = crate::config::parse(text, &config).unwrap().spec;
        let put = store
            .put_world(&store::NewWorld {
                project: "acme".into(),
                repo_root: dir.path().join("repo"),
                name: "w".into(),
                branch: "w".into(),
                from_ref: None,
                worktree_path: wt.clone(),
                config_rel: String::new(),
                config_path: config.clone(),
                spec,
                env: BTreeMap::new(),
                group: None,
                wait: None,
                made_by: None,
            })
            .unwrap();
        let id = put.world.id;
        let config_cond = || {
            store
                .read(|c| store::conditions(c, id))
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == apply::CONDITION)
        };
        // `git worktree add` has created the file and not written it yet.
        std::fs::write(&config, "").unwrap();
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut w = Watchers::new(tx);
        let trigger = Trigger::default();
        sync(&mut w, &store, &trigger);
        assert!(
            config_cond().is_none(),
            "the half-written file was read: {:?}",
            config_cond()
        );
        assert!(w.pending.contains(&id) && !w.worlds.contains_key(&id));
        // Written, but the worktree controller has not said the checkout is done (its
        // bootstrap may still be writing): still not read. (Read once it has: every
        // `binky up` test whose edit is applied by the watcher.)
        std::fs::write(&config, text).unwrap();
        sync(&mut w, &store, &trigger);
        assert!(config_cond().is_none() && w.pending.contains(&id));
    }
}
