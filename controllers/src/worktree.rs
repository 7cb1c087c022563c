//! The worktree controller: a git worktree for each world's branch.
//!
//! # Guarantees
//! - A world's branch gets a worktree: an existing worktree of that branch is adopted
//!   (and never deleted by binky); an existing branch is checked out; a missing branch is
//!   created from the world's `from_ref`.
//! - On deletion the worktree goes only after the world's processes have stopped, never
//!   with uncommitted changes unless the world was removed with `--force`. A branch binky
//!   created is deleted when it has no commits of its own and kept (with an event saying
//!   so) when it has.
//! - A project's shared world runs in the repository's main checkout, adopted as it is.
//! - A worktree deleted from outside is reported (`WorktreeMissing`), not silently
//!   recreated; the next `binky up` recreates it.
//! - A world's linked files written in place (see [`crate::inplace`]) are looked for at
//!   each new generation of the world, before its worktree goes, at its resync and when a
//!   world it shares files with found one; each world that holds such a file records it
//!   (`shared_edits`), and a new one is said in an event.
//!
//! # Caveats
//! Git mutations of one repository are serialised: concurrent `git worktree add` calls
//! race on the repository's lock files.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::registry::Kind;
use crate::runtime::{Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::store::{self, owner, write, Store, StoreError, WorktreeRow, World};
use crate::store::{BootstrapState, WorktreeState};

/// The condition this controller reports.
const CONDITION: &str = Kind::Worktree.condition();

/// One entry of `git worktree list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorktreeInfo {
    /// Its directory.
    pub path: PathBuf,
    /// The branch checked out (`None` when detached).
    pub branch: Option<String>,
}

/// A failed git command.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git ran and failed.
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Failed {
        /// The arguments.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// What it said.
        stderr: String,
    },
    /// git could not be run at all.
    #[error("cannot run git (is it installed and on PATH?)")]
    Spawn(#[source] std::io::Error),
}

/// How a path's files reached a new worktree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyHow {
    /// Every file a copy-on-write clone (no data copied, none shared).
    Cloned,
    /// Every file hard-linked (no data copied; a file edited in place is edited for every
    /// worktree that links it).
    Linked,
    /// Copied byte by byte.
    Copied,
    /// Some of these ways.
    Mixed,
}

impl CopyHow {
    /// `cloned`, `linked`, `copied`, `mixed`: the word `binky status` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyHow::Cloned => "cloned",
            CopyHow::Linked => "linked",
            CopyHow::Copied => "copied",
            CopyHow::Mixed => "mixed",
        }
    }

    /// The word read back (`None` for anything else).
    pub fn parse(s: &str) -> Option<CopyHow> {
        [
            CopyHow::Cloned,
            CopyHow::Linked,
            CopyHow::Copied,
            CopyHow::Mixed,
        ]
        .into_iter()
        .find(|h| h.as_str() == s)
    }

    /// How `cloned`, `linked` and copied files (of `files`) add up: linked when some were
    /// linked and none cloned (the others copied: a package manager's bookkeeping), cloned
    /// likewise, mixed when both.
    pub fn of(files: u64, cloned: u64, linked: u64) -> CopyHow {
        match (cloned, linked) {
            (0, 0) => CopyHow::Copied,
            (_, 0) if files > 0 => CopyHow::Cloned,
            (0, _) => CopyHow::Linked,
            _ => CopyHow::Mixed,
        }
    }
}

/// One path brought into a new worktree (for `binky up`'s progress and `binky status`).
#[derive(Clone, Debug)]
pub struct Copied {
    /// Relative to the worktree's top.
    pub path: String,
    /// The checkout it came from.
    pub from: PathBuf,
    /// Files in it.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How.
    pub how: CopyHow,
    /// Files copied byte by byte (the rest were cloned or linked).
    pub copied: u64,
    /// Why it was not linked though its mode allowed it (another filesystem), if so.
    pub note: Option<String>,
    /// How long it took.
    pub took: std::time::Duration,
}

impl Copied {
    /// `linked node_modules (20000 files, 316 MB) from /repo by hard links in 0.4 s`.
    pub fn describe(&self) -> String {
        let (verb, how) = match self.how {
            CopyHow::Cloned => ("cloned", "copy-on-write clone"),
            CopyHow::Linked => ("linked", "hard links"),
            CopyHow::Copied => ("copied", "parallel copy"),
            CopyHow::Mixed => ("brought", "clones and links"),
        };
        let copied = if self.how != CopyHow::Copied && self.copied > 0 {
            format!("; {} copied", self.copied)
        } else {
            String::new()
        };
        let mb = self.bytes as f64 / 1e6;
        let size = if mb >= 1.0 {
            format!("{mb:.0} MB")
        } else {
            format!("{} KB", self.bytes.div_ceil(1000))
        };
        let took = self.took.as_secs_f64();
        format!(
            "{verb} {} ({} file{}, {size}{copied}) from {} by {how} in {}{}",
            self.path,
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.from.display(),
            if took >= 1.0 {
                format!("{took:.1} s")
            } else {
                format!("{} ms", self.took.as_millis())
            },
            self.note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )
    }
}

pub use crate::store::Planned;

/// The git operations the worktree controller needs.
pub trait Git: Send + Sync + 'static {
    /// `git worktree list`.
    fn worktrees(
        &self,
        repo: &Path,
    ) -> impl Future<Output = Result<Vec<WorktreeInfo>, GitError>> + Send;
    /// Does `refs/heads/<branch>` exist?
    fn branch_exists(
        &self,
        repo: &Path,
        branch: &str,
    ) -> impl Future<Output = Result<bool, GitError>> + Send;
    /// The commit a revision names.
    fn rev_parse(
        &self,
        repo: &Path,
        rev: &str,
    ) -> impl Future<Output = Result<String, GitError>> + Send;
    /// `git worktree add [-b branch] path [branch|from]`.
    fn add_worktree(
        &self,
        repo: &Path,
        path: &Path,
        branch: &str,
        create_from: Option<&str>,
    ) -> impl Future<Output = Result<(), GitError>> + Send;
    /// What the new worktree `worktree` is to get of what `.worktreeinclude` and `copy`
    /// name, from the main checkout `repo` (a `copy` path it lacks: from the first of
    /// `fallbacks` that has it), each with its mode (`modes`: `copy`'s, by path).
    fn plan_bootstrap(
        &self,
        repo: &Path,
        worktree: &Path,
        copy: &[String],
        modes: &BTreeMap<String, crate::spec::CopyMode>,
        fallbacks: &[PathBuf],
    ) -> impl Future<Output = Result<Vec<Planned>, String>> + Send;
    /// Bring one planned path into `worktree` (replacing a half-made one a killed daemon
    /// left); what came and how.
    fn bring(
        &self,
        planned: &Planned,
        worktree: &Path,
    ) -> impl Future<Output = Result<Copied, String>> + Send;
    /// The files under `paths` of `worktree` (each with a time, ms since the epoch) that
    /// are hard links (more than one link) modified after that time, each with which of
    /// `checkouts` hold the same file at the same place (see [`crate::inplace`]). Looks at
    /// every file of those paths.
    fn changed_links(
        &self,
        worktree: &Path,
        paths: &[(String, i64)],
        checkouts: &[PathBuf],
    ) -> impl Future<Output = Result<Vec<crate::inplace::Changed>, String>> + Send;
    /// The paths with uncommitted changes, untracked files included.
    fn changes(
        &self,
        worktree: &Path,
    ) -> impl Future<Output = Result<Vec<String>, GitError>> + Send;
    /// `git worktree remove --force path`.
    fn remove_worktree(
        &self,
        repo: &Path,
        path: &Path,
    ) -> impl Future<Output = Result<(), GitError>> + Send;
    /// `git worktree prune`.
    fn prune(&self, repo: &Path) -> impl Future<Output = Result<(), GitError>> + Send;
    /// Commits on `branch` that `base` does not have.
    fn commits_ahead(
        &self,
        repo: &Path,
        base: &str,
        branch: &str,
    ) -> impl Future<Output = Result<u64, GitError>> + Send;
    /// `git branch -D branch`.
    fn delete_branch(
        &self,
        repo: &Path,
        branch: &str,
    ) -> impl Future<Output = Result<(), GitError>> + Send;
}

/// Why the worktree controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The project's repository is gone.
    #[error(
        "the repository {0} no longer exists; `binky remove` the world or restore the repository"
    )]
    RepoMissing(PathBuf),
    /// Something else sits where the worktree should go.
    #[error("{0} exists and is not a worktree of this repository; move it away, then run `binky up` again")]
    PathTaken(PathBuf),
    /// Removal refused: uncommitted changes.
    #[error("worktree {0} has uncommitted changes; commit or stash them, or run `binky remove --force` to discard them")]
    Dirty(PathBuf),
}

impl ReconcileError for WorktreeError {
    fn reason(&self) -> &'static str {
        match self {
            WorktreeError::Git(_) => "GitFailed",
            WorktreeError::Store(_) => "StoreFailed",
            WorktreeError::RepoMissing(_) => "RepoMissing",
            WorktreeError::PathTaken(_) => "PathTaken",
            WorktreeError::Dirty(_) => "WorktreeDirty",
        }
    }

    fn stalled(&self) -> bool {
        matches!(
            self,
            WorktreeError::RepoMissing(_) | WorktreeError::PathTaken(_) | WorktreeError::Dirty(_)
        )
    }
}

/// The worktree controller.
pub struct WorktreeController<G> {
    store: Store,
    git: Arc<G>,
    repo_locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// The generation each world's bootstrap was last planned at (planned again at a new
    /// one: a group may have widened; after a daemon restart, once). Keyed on the world's id
    /// *and* its creation: a world made again under a removed one's name may get its id.
    planned: Mutex<HashMap<(store::WorldId, i64), i64>>,
    /// Nudges a world's controllers when a path it waits for is brought.
    trigger: Option<crate::runtime::Trigger>,
    /// The paths being brought now, by world (each in a task of its own).
    bringing: Arc<Mutex<std::collections::HashSet<(store::WorldId, String)>>>,
    /// When each world's linked files were last looked at for writes in place, at which
    /// generation (keyed as `planned`).
    looked: Mutex<HashMap<(store::WorldId, i64), (i64, std::time::Instant)>>,
    /// Worlds to look at again at their next reconcile: another world found a file they
    /// share written in place, or a world they shared files with went.
    look_again: Mutex<std::collections::HashSet<store::WorldId>>,
}

/// How often a world's linked files are looked at for writes in place when nothing else
/// asks (at the first resync, every 5 minutes, that finds this elapsed). A look is an
/// `lstat` per linked file: about a second for 60,000 files on a 2-core machine
/// (benchmarks/README.md), so twenty such worlds cost about 2 % of a core at this pace.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(14 * 60);

/// Bring one path, record how it went, and nudge the world's controllers (a command may
/// have been waiting for it).
async fn bring_one<G: Git>(
    store: &Store,
    git: &G,
    trigger: Option<&crate::runtime::Trigger>,
    world: store::WorldId,
    worktree: &Path,
    b: &store::BootstrapRow,
) -> Result<(), StoreError> {
    let planned = Planned {
        path: b.path.clone(),
        from: b.src.clone(),
        mode: b.mode,
    };
    // A linked file changed after this was edited in place through the link.
    let brought_at = crate::store::now_ms();
    let outcome = git.bring(&planned, worktree).await;
    // A path that is one file (a lockfile) as it came: git lists it (untracked), and left
    // so it is not the user's change.
    let fingerprint = match &outcome {
        Ok(_) if worktree.join(&b.path).is_file() => crate::dirty::fingerprint(worktree, &b.path),
        _ => String::new(),
    };
    let (state, how, files, bytes, took, message, event) = match &outcome {
        Ok(c) => (
            BootstrapState::Done,
            Some(c.how.as_str()),
            c.files,
            c.bytes,
            c.took.as_millis() as i64,
            c.note.clone().unwrap_or_default(),
            c.describe(),
        ),
        Err(err) => (
            BootstrapState::Failed,
            None,
            0,
            0,
            0,
            err.clone(),
            format!(
                "could not bring {} ({err}); its setup has to make it",
                b.path
            ),
        ),
    };
    store.write(owner::Worktree, |tx| {
        write::worktree::set_brought(
            tx,
            world,
            &b.path,
            &write::worktree::Brought {
                state,
                how,
                files: files as i64,
                bytes: bytes as i64,
                took_ms: took,
                message: &message,
                brought_at,
                fingerprint: &fingerprint,
            },
        )
    })?;
    store.event(world, "worktree", &event)?;
    if let Some(t) = trigger {
        t.world(world);
    }
    Ok(())
}

/// `[project] copy` relative to the repository's top (it is written relative to the
/// directory of `binky.toml`, as every path in it), with the modes it gives.
fn copy_of(world: &World) -> (Vec<String>, BTreeMap<String, crate::spec::CopyMode>) {
    let rebase = |c: &str| {
        if world.config_rel.is_empty() {
            c.to_owned()
        } else {
            format!("{}/{c}", world.config_rel.trim_end_matches('/'))
        }
    };
    let copy = world.spec.project.copy.iter().map(|c| rebase(c)).collect();
    let modes = world
        .spec
        .project
        .copy_modes
        .iter()
        .map(|(c, m)| (rebase(c), *m))
        .collect();
    (copy, modes)
}

/// Of `plan`, what the world's selection needs, each with the state it is recorded in:
/// everything, pending, unless it runs a `--group`. Then the paths the working directories
/// of the services it runs need (a process's, an adapter's that runs `migrate` or `seed`)
/// are pending; but a database whose golden template is ready (`cloned` says so) is a copy
/// of it and runs no `migrate` or `seed` here: what only its workdir needs is deferred,
/// brought only if the world comes to run them after all (it builds a template, or cloning
/// fails: see [`WorktreeController::wake_deferred`]). What nothing it runs needs is left
/// out; a wider `up` brings it.
fn needed(
    world: &World,
    plan: Vec<Planned>,
    cloned: impl Fn(&str, &crate::spec::Resource) -> bool,
) -> Vec<(Planned, BootstrapState)> {
    if world.group.is_none() {
        return plan
            .into_iter()
            .map(|p| (p, BootstrapState::Pending))
            .collect();
    }
    let mut now: Vec<String> = Vec::new();
    let mut later: Vec<String> = Vec::new();
    for n in world.spec.selected(world.group.as_deref()) {
        if !world.runs(&n) {
            continue;
        }
        let Some(s) = world.spec.services.get(&n) else {
            continue;
        };
        match (s.process(), s.resource()) {
            (Some(p), _) => now.push(crate::env::workdir_rel(world, &p.workdir)),
            (_, Some(r)) if r.migrate.is_some() || r.seed.is_some() => {
                let workdir = crate::env::workdir_rel(world, &r.workdir);
                if r.clone_from.is_some() && cloned(&n, r) {
                    later.push(workdir);
                } else {
                    now.push(workdir);
                }
            }
            _ => {}
        }
    }
    let by = |p: &Planned, dirs: &[String]| dirs.iter().any(|w| store::path_needed_by(&p.path, w));
    plan.into_iter()
        .filter_map(|p| {
            if by(&p, &now) {
                Some((p, BootstrapState::Pending))
            } else if by(&p, &later) {
                Some((p, BootstrapState::Deferred))
            } else {
                None
            }
        })
        .collect()
}

/// The working directories where `world` (as its rows say now) is to run an adapter's
/// `migrate` or `seed` itself, and why: it builds the service's golden template, or makes
/// its slice the slow way (its adapter cannot clone, cloning failed).
fn migrating_now(
    world: &World,
    refs: &BTreeMap<String, String>,
    goldens: &BTreeMap<String, store::GoldenRow>,
    slices: &[store::SliceRow],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for n in world.spec.selected(world.group.as_deref()) {
        if !world.runs(&n) {
            continue;
        }
        let Some(r) = world.spec.services.get(&n).and_then(|s| s.resource()) else {
            continue;
        };
        if r.migrate.is_none() && r.seed.is_none() {
            continue;
        }
        let builds = refs.get(&n).and_then(|k| goldens.get(k)).is_some_and(|g| {
            g.state == store::GoldenState::Building && g.owner_world == Some(world.id)
        });
        let slow = slices.iter().any(|s| {
            s.service == n
                && matches!(
                    s.state,
                    store::SliceState::Provisioned
                        | store::SliceState::Migrating
                        | store::SliceState::Seeding
                )
        });
        if builds || slow {
            let why = if builds {
                format!("{n} builds its golden template in this world")
            } else {
                format!("{n} runs its migrate and seed in this world")
            };
            out.push((crate::env::workdir_rel(world, &r.workdir), why));
        }
    }
    out
}

impl<G: Git> WorktreeController<G> {
    /// A controller over `store`, using `git`.
    pub fn new(store: Store, git: G) -> Self {
        WorktreeController {
            store,
            git: Arc::new(git),
            repo_locks: Mutex::new(HashMap::new()),
            planned: Mutex::new(HashMap::new()),
            trigger: None,
            bringing: Arc::default(),
            looked: Mutex::new(HashMap::new()),
            look_again: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Nudge, through `trigger` (the daemon's runtime), a world's controllers as each of
    /// its paths is brought.
    pub fn with_trigger(mut self, trigger: crate::runtime::Trigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    #[cfg(test)]
    pub(crate) fn git_for_tests(&self) -> &G {
        &self.git
    }

    fn repo_lock(&self, repo: &Path) -> Arc<tokio::sync::Mutex<()>> {
        self.repo_locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(repo.to_owned())
            .or_default()
            .clone()
    }

    fn save(&self, world: &World, row: &WorktreeRow) -> Result<(), StoreError> {
        self.store
            .write(owner::Worktree, |tx| Self::save_in(tx, world, row))
    }

    fn save_in(
        tx: &store::owner::Tx<'_, owner::Worktree>,
        world: &World,
        row: &WorktreeRow,
    ) -> Result<(), StoreError> {
        write::worktree::save(tx, world.id, row)
    }

    /// The paths a world's worktree gets (`.worktreeinclude`'s and `[project] copy`'s), from
    /// the main checkout (or another world), each in a task of its own, all at once, while
    /// the world's other work goes on: a command waits only for the paths it needs (see
    /// [`store::BootstrapRow::needed_by`]). A world of a `--group` gets only what its
    /// services need (what only a cloned database's `migrate` would use is deferred until
    /// it runs after all); a later `up` of more brings the rest. `row` is saved (ready) in the
    /// same transaction as the plan when `save_row`, so nothing starts before it knows what
    /// to wait for. A path that cannot be brought is said and does not stop the world: its
    /// `setup` makes what is missing.
    async fn bootstrap(
        &self,
        world: &World,
        row: &WorktreeRow,
        save_row: bool,
    ) -> Result<(), WorktreeError> {
        let fresh = self.plan(world, row).await?;
        // Nothing new to save (every pass of a ready world): no write transaction.
        if save_row || !fresh.is_empty() {
            self.record_plan(world, save_row.then_some(row), &fresh)?;
        }
        self.planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((world.id, world.created_at), world.generation);
        self.wake_deferred(world)?;
        self.bring_pending(world, row)
    }

    /// The paths the worktree `row` gets that are not planned yet: none when this daemon
    /// planned them at this generation already.
    async fn plan(
        &self,
        world: &World,
        row: &WorktreeRow,
    ) -> Result<Vec<(Planned, BootstrapState)>, WorktreeError> {
        let planned_at = self
            .planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(world.id, world.created_at))
            .copied();
        if planned_at == Some(world.generation) {
            return Ok(Vec::new());
        }
        let fallbacks = self
            .store
            .read(|c| store::worktree_paths_of_repo(c, &world.repo_root))?;
        let (copy, modes) = copy_of(world);
        match self
            .git
            .plan_bootstrap(&world.repo_root, &row.path, &copy, &modes, &fallbacks)
            .await
        {
            Ok(plan) => Ok(needed(world, plan, |service, res| {
                // Not known: brought, as if the world ran its migrate.
                crate::template::template_ready(&self.store, world, &row.path, service, res)
                    .unwrap_or(false)
            })),
            Err(err) => {
                self.store.event(
                    world.id,
                    "worktree",
                    &format!("could not list the worktree's ignored files to bring ({err}); its setup has to make them"),
                )?;
                Ok(Vec::new())
            }
        }
    }

    /// Records the `fresh` paths to bring, pending or deferred, with the worktree `row`
    /// (ready) when given, in one transaction; a path recorded deferred that is now pending
    /// (a wider `up`) becomes so.
    fn record_plan(
        &self,
        world: &World,
        row: Option<&WorktreeRow>,
        fresh: &[(Planned, BootstrapState)],
    ) -> Result<(), StoreError> {
        self.store.write(owner::Worktree, |tx| {
            if let Some(row) = row {
                Self::save_in(tx, world, row)?;
            }
            for (p, state) in fresh {
                let message = if *state == BootstrapState::Deferred {
                    "not brought: only the migrate or seed of a database cloned from its ready golden template would use it; brought if they run here after all"
                } else {
                    ""
                };
                write::worktree::plan_path(tx, world.id, p, *state, message)?;
            }
            Ok(())
        })
    }

    /// A deferred path becomes pending (and is brought) once the world is to run a
    /// `migrate` or `seed` whose workdir needs it after all: it builds the golden template
    /// (the one it would clone was not ready, or went), or makes its slice the slow way
    /// (cloning failed). Those commands wait for it meanwhile.
    fn wake_deferred(&self, world: &World) -> Result<(), StoreError> {
        let deferred: Vec<String> = self
            .store
            .read(|c| store::bootstrap_paths(c, world.id))?
            .into_iter()
            .filter(|b| b.state == BootstrapState::Deferred)
            .map(|b| b.path)
            .collect();
        if deferred.is_empty() {
            return Ok(());
        }
        let (refs, goldens, slices) = self.store.read(|c| {
            let refs = store::golden_refs_of(c, world.id)?;
            let mut goldens = BTreeMap::new();
            for key in refs.values() {
                if let Some(g) = store::golden(c, key)? {
                    goldens.insert(key.clone(), g);
                }
            }
            Ok((refs, goldens, store::slices(c, world.id)?))
        })?;
        let now = migrating_now(world, &refs, &goldens, &slices);
        let wake: Vec<(String, &str)> = deferred
            .into_iter()
            .filter_map(|p| {
                now.iter()
                    .find(|(w, _)| store::path_needed_by(&p, w))
                    .map(|(_, why)| (p, why.as_str()))
            })
            .collect();
        if wake.is_empty() {
            return Ok(());
        }
        self.store.write(owner::Worktree, |tx| {
            for (p, _) in &wake {
                write::worktree::wake_deferred(tx, world.id, p)?;
            }
            Ok(())
        })?;
        for (p, why) in &wake {
            self.store
                .event(world.id, "worktree", &format!("bringing {p} now: {why}"))?;
        }
        Ok(())
    }

    /// Brings each pending path in a task of its own, outside this reconcile: `up` waits
    /// for no path that nothing it runs needs, and a command that needs one waits for it
    /// alone.
    fn bring_pending(&self, world: &World, row: &WorktreeRow) -> Result<(), WorktreeError> {
        let pending: Vec<store::BootstrapRow> = self
            .store
            .read(|c| store::bootstrap_paths(c, world.id))?
            .into_iter()
            .filter(|b| b.state == BootstrapState::Pending)
            .collect();
        for b in pending {
            let key = (world.id, b.path.clone());
            if !self
                .bringing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone())
            {
                continue;
            }
            let (store, git, trigger) =
                (self.store.clone(), self.git.clone(), self.trigger.clone());
            let (bringing, worktree) = (self.bringing.clone(), row.path.clone());
            tokio::spawn(async move {
                if let Err(err) =
                    bring_one(&store, &*git, trigger.as_ref(), key.0, &worktree, &b).await
                {
                    tracing::warn!(%err, path = %b.path, "cannot record a brought path");
                }
                bringing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
            });
        }
        Ok(())
    }

    /// Wait until none of `world`'s paths is being brought (before its worktree goes).
    async fn none_bringing(&self, world: store::WorldId) {
        let busy = || {
            self.bringing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|(w, _)| *w == world)
        };
        while busy() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    async fn create(&self, world: &World) -> Result<WorktreeRow, WorktreeError> {
        let repo = &world.repo_root;
        if !repo.is_dir() {
            return Err(WorktreeError::RepoMissing(repo.clone()));
        }
        let lock = self.repo_lock(repo);
        let _guard = lock.lock().await;
        // What a daemon that died mid-way recorded before touching git: whether the branch
        // is binky's (so `remove` deletes it) and where it started.
        let intent = self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|r| r.state == WorktreeState::Creating);
        let mut existing = self.git.worktrees(repo).await?;
        if intent.is_some() {
            self.remove_half_made(world, &mut existing).await?;
        }
        if let Some(wt) = existing
            .iter()
            .find(|w| w.branch.as_deref() == Some(world.branch.as_str()) && w.path.is_dir())
        {
            return self.adopt(world, wt, intent.as_ref()).await;
        }
        let path = &world.worktree_path;
        if path.exists() && !is_empty_dir(path) {
            return Err(WorktreeError::PathTaken(path.clone()));
        }
        let (created_branch, base) = self.add_worktree(world, intent.as_ref()).await?;
        let short: String = base.chars().take(7).collect();
        let msg = if created_branch {
            format!(
                "created worktree {} on new branch {} from {short}",
                path.display(),
                world.branch
            )
        } else {
            format!(
                "created worktree {} on existing branch {}",
                path.display(),
                world.branch
            )
        };
        self.store.event(world.id, "worktree", &msg)?;
        Ok(WorktreeRow {
            path: path.clone(),
            branch: world.branch.clone(),
            head: Some(base.clone()),
            dirty: false,
            adopted: false,
            created_branch,
            base_commit: Some(base),
            state: WorktreeState::Ready,
            seen_generation: world.generation,
        })
    }

    /// A checkout of the world's branch at its path that a killed daemon left half made
    /// (files missing: `git status` shows them deleted) holds nothing of anyone's yet: it
    /// is removed from `existing` and from git, to be made again.
    async fn remove_half_made(
        &self,
        world: &World,
        existing: &mut Vec<WorktreeInfo>,
    ) -> Result<(), WorktreeError> {
        let repo = &world.repo_root;
        let Some(wt) = existing.iter().find(|w| {
            w.branch.as_deref() == Some(world.branch.as_str())
                && same_path(&w.path, &world.worktree_path)
        }) else {
            return Ok(());
        };
        if self.git.changes(&wt.path).await.is_ok_and(|c| c.is_empty()) {
            return Ok(());
        }
        let path = wt.path.clone();
        self.git.remove_worktree(repo, &path).await?;
        self.git.prune(repo).await?;
        self.store.event(
            world.id,
            "worktree",
            &format!(
                "worktree {} was left half made by a daemon that stopped; making it again",
                path.display()
            ),
        )?;
        existing.retain(|w| !same_path(&w.path, &path));
        Ok(())
    }

    /// The existing worktree `wt` of the world's branch: ours if it is where binky puts
    /// worlds (a daemon that died before recording it, whose `intent` says whether the
    /// branch is binky's); otherwise someone made it: adopted, and never deleted.
    async fn adopt(
        &self,
        world: &World,
        wt: &WorktreeInfo,
        intent: Option<&WorktreeRow>,
    ) -> Result<WorktreeRow, WorktreeError> {
        let adopted = !same_path(&wt.path, &world.worktree_path);
        let head = self.git.rev_parse(&wt.path, "HEAD").await.ok();
        let ours = intent.filter(|_| !adopted);
        let row = WorktreeRow {
            path: wt.path.clone(),
            branch: world.branch.clone(),
            head: head.clone(),
            dirty: false,
            adopted,
            created_branch: ours.is_some_and(|i| i.created_branch),
            base_commit: ours.and_then(|i| i.base_commit.clone()).or(head),
            state: WorktreeState::Ready,
            seen_generation: world.generation,
        };
        let msg = if adopted {
            format!(
                "adopted the existing worktree of branch {} at {} (binky will not delete it)",
                world.branch,
                wt.path.display()
            )
        } else {
            format!("found worktree at {}", wt.path.display())
        };
        self.store.event(world.id, "worktree", &msg)?;
        Ok(row)
    }

    /// `git worktree add` of the world's branch at its path: the existing branch, or a new
    /// one from `from_ref`. Returns whether binky created the branch, and its base commit.
    async fn add_worktree(
        &self,
        world: &World,
        intent: Option<&WorktreeRow>,
    ) -> Result<(bool, String), WorktreeError> {
        let repo = &world.repo_root;
        let path = &world.worktree_path;
        // The intent is recorded before git runs: a daemon killed between `git worktree add
        // -b` and the row would otherwise leave a branch binky made that `remove` keeps.
        let record_intent = |created_branch: bool, base: &str| {
            self.save(
                world,
                &WorktreeRow {
                    path: path.clone(),
                    branch: world.branch.clone(),
                    head: None,
                    dirty: false,
                    adopted: false,
                    created_branch,
                    base_commit: Some(base.to_owned()),
                    state: WorktreeState::Creating,
                    seen_generation: world.generation,
                },
            )
        };
        if self.git.branch_exists(repo, &world.branch).await? {
            let base = self.git.rev_parse(repo, &world.branch).await?;
            // A branch this world's own earlier attempt made is still binky's.
            let (created, base) = match intent {
                Some(i) if i.created_branch => {
                    (true, i.base_commit.clone().unwrap_or_else(|| base.clone()))
                }
                _ => (false, base),
            };
            record_intent(created, &base)?;
            self.git
                .add_worktree(repo, path, &world.branch, None)
                .await?;
            return Ok((created, base));
        }
        let from = world.from_ref.clone().unwrap_or_else(|| "HEAD".into());
        // `binky up` resolved it to a commit already; ask git only for anything else.
        let base = if from.len() == 40 && from.bytes().all(|b| b.is_ascii_hexdigit()) {
            from
        } else {
            self.git.rev_parse(repo, &from).await?
        };
        record_intent(true, &base)?;
        self.git
            .add_worktree(repo, path, &world.branch, Some(&base))
            .await?;
        Ok((true, base))
    }

    /// The world's worktree `row` is there: recorded ready, and given what a new
    /// generation needs more (a widened group) or what a daemon that died while bringing
    /// it left.
    async fn keep(
        &self,
        world: &World,
        mut row: WorktreeRow,
    ) -> Result<WorktreeRow, WorktreeError> {
        if row.state != WorktreeState::Ready {
            row.state = WorktreeState::Ready;
            row.seen_generation = world.generation;
            self.save(world, &row)?;
        }
        if !row.adopted && !world.is_shared() {
            self.bootstrap(world, &row, false).await?;
            self.look_for_edits(world, &row, false).await?;
        }
        Ok(row)
    }

    /// Looks for the world's linked files written in place (see [`crate::inplace`]) when
    /// due — `always`, at a new generation (`up`, `down`, `reload`), when another world
    /// asked, else every [`LOOK_EVERY`] — and records what it finds (`binky status` reads
    /// it). A new finding is said in an event, and the worlds sharing the file are looked
    /// at too.
    async fn look_for_edits(
        &self,
        world: &World,
        row: &WorktreeRow,
        always: bool,
    ) -> Result<(), WorktreeError> {
        let key = (world.id, world.created_at);
        let asked = self
            .look_again
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&world.id);
        let due = {
            let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
            let due = always
                || asked
                || looked
                    .get(&key)
                    .is_none_or(|(g, at)| *g != world.generation || at.elapsed() >= LOOK_EVERY);
            if due {
                looked.insert(key, (world.generation, std::time::Instant::now()));
            }
            due
        };
        if !due {
            return Ok(());
        }
        let (own, others, before) = self.store.read(|c| {
            let own = store::bootstrap_paths(c, world.id)?;
            let mut others = Vec::new();
            for (id, name, path) in store::worlds_of_repo(c, &world.repo_root)? {
                if id != world.id {
                    let brought = store::bootstrap_paths(c, id)?;
                    let edits = store::shared_edits(c, id)?;
                    others.push((id, name, path, brought, edits));
                }
            }
            Ok((own, others, store::shared_edits(c, world.id)?))
        })?;
        let me = crate::inplace::World {
            name: &world.name,
            worktree: &row.path,
            brought: &own,
        };
        let theirs: Vec<crate::inplace::World<'_>> = others
            .iter()
            .map(|(_, name, path, brought, _)| crate::inplace::World {
                name,
                worktree: path,
                brought,
            })
            .collect();
        let paths = crate::inplace::to_look_at(&me, &theirs);
        let changed = if paths.is_empty() {
            Vec::new()
        } else {
            let mut checkouts = vec![world.repo_root.clone()];
            checkouts.extend(others.iter().map(|(_, _, path, _, _)| path.clone()));
            let started = std::time::Instant::now();
            match self.git.changed_links(&row.path, &paths, &checkouts).await {
                Ok(changed) => {
                    // What the look costs (benchmarks/bring_in.sh reads it).
                    tracing::debug!(
                        world = %world.name,
                        paths = paths.len(),
                        found = changed.len(),
                        ms = started.elapsed().as_secs_f64() * 1000.0,
                        "looked at the linked files for writes in place"
                    );
                    changed
                }
                Err(err) => {
                    tracing::warn!(%err, world = %world.name, "cannot look at the linked files");
                    return Ok(());
                }
            }
        };
        let mut found =
            crate::inplace::findings(&me, &theirs, &world.repo_root, &changed, store::now_ms());
        let total = found.len();
        found.truncate(crate::inplace::MAX_RECORDED);
        let (rows, differs) = crate::inplace::merge(&before, found);
        if !differs {
            return Ok(());
        }
        self.store.write(owner::Worktree, |tx| {
            write::worktree::set_shared_edits(tx, world.id, &rows)
        })?;
        let new: Vec<store::SharedEditRow> = rows
            .iter()
            .filter(|r| {
                !before
                    .iter()
                    .any(|b| b.file == r.file && b.changed_at == r.changed_at)
            })
            .cloned()
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let copy_path = |p: &str| crate::inplace::copy_path(&world.config_rel, p);
        for line in crate::inplace::describe(&new, copy_path, |_| String::new()) {
            self.store.event(world.id, "shared_edit", &line)?;
        }
        if total > rows.len() {
            self.store.event(
                world.id,
                "shared_edit",
                &format!(
                    "{total} linked files were changed in place; the first {} are recorded",
                    rows.len()
                ),
            )?;
        }
        // The worlds that share these files and have not found them learn of them at their
        // next reconcile, now.
        let sharing: Vec<store::WorldId> = others
            .iter()
            .filter(|(_, name, _, _, edits)| {
                new.iter().any(|r| {
                    r.sharers.contains(name)
                        && !edits
                            .iter()
                            .any(|e| e.file == r.file && e.changed_at == r.changed_at)
                })
            })
            .map(|(id, _, _, _, _)| *id)
            .collect();
        self.look_again_at(&sharing);
        Ok(())
    }

    /// `worlds` are looked at for linked files written in place at their next reconcile,
    /// which is asked for now.
    fn look_again_at(&self, worlds: &[store::WorldId]) {
        self.look_again
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(worlds.iter().copied());
        if let Some(t) = &self.trigger {
            for id in worlds {
                t.world(*id);
            }
        }
    }

    /// The world's worktree `row` was deleted outside binky: recorded (once) and said until
    /// a new `binky up` asks for it again.
    fn missing(&self, world: &World, mut row: WorktreeRow) -> Result<Applied, WorktreeError> {
        if row.state == WorktreeState::Ready {
            row.state = WorktreeState::Missing;
            row.seen_generation = world.generation;
            self.save(world, &row)?;
            self.store.event(
                world.id,
                "worktree_missing",
                &format!("worktree {} was deleted outside binky", row.path.display()),
            )?;
        }
        Ok(Applied::await_change(vec![Condition::failed(
            CONDITION,
            "WorktreeMissing",
            format!(
                "worktree {} was deleted outside binky; run `binky up {}` to recreate it or `binky remove {}` to forget the world",
                row.path.display(),
                world.name,
                world.name
            ),
        )]))
    }

    /// Makes (or finds) the world's worktree. It is saved ready with the plan of what it is
    /// to get, then brought, outside the repo's lock: a 300 MB copy must not hold up other
    /// worlds' checkouts, and a command waits only for what it needs. A worktree a killed
    /// daemon found made (not adopted) may not have had its paths either.
    async fn make(&self, world: &World) -> Result<WorktreeRow, WorktreeError> {
        let row = match self.create(world).await {
            Ok(row) => row,
            // A worktree deleted by hand stays registered until pruned.
            Err(WorktreeError::Git(_)) => {
                self.git.prune(&world.repo_root).await?;
                self.create(world).await?
            }
            Err(e) => return Err(e),
        };
        if row.adopted {
            self.save(world, &row)?;
        } else {
            self.bootstrap(world, &row, true).await?;
        }
        Ok(row)
    }

    /// Removes the world's worktree `row` (refusing one with uncommitted work of the user's
    /// unless forced), with the directories binky made for it; one deleted from outside is
    /// pruned.
    async fn remove_worktree(&self, world: &World, row: &WorktreeRow) -> Result<(), WorktreeError> {
        let repo = &world.repo_root;
        if !row.path.is_dir() {
            self.git.prune(repo).await?;
            // Deleted from outside: the directories binky made for it go too.
            remove_empty_parents(&row.path, &world.name);
            return Ok(());
        }
        if !world.force_delete {
            let changes = async { Ok::<_, WorktreeError>(self.git.changes(&row.path).await?) };
            if !crate::dirty::users_uncommitted(&self.store, world.id, row, changes)
                .await?
                .is_empty()
            {
                return Err(WorktreeError::Dirty(row.path.clone()));
            }
        }
        let started = std::time::Instant::now();
        self.git.remove_worktree(repo, &row.path).await?;
        remove_empty_parents(&row.path, &world.name);
        self.store.event(
            world.id,
            "worktree",
            &format!(
                "removed worktree {} in {}",
                row.path.display(),
                crate::took::took(started.elapsed())
            ),
        )?;
        Ok(())
    }

    /// The branch binky created for the world goes with it when it has no commits of its
    /// own; kept (and said so) when it has.
    async fn remove_branch(&self, world: &World, row: &WorktreeRow) -> Result<(), WorktreeError> {
        let repo = &world.repo_root;
        let base = row.base_commit.clone().unwrap_or_else(|| "HEAD".into());
        let started = std::time::Instant::now();
        let ahead = self.git.commits_ahead(repo, &base, &row.branch).await?;
        if ahead == 0 {
            self.git.delete_branch(repo, &row.branch).await?;
            self.store.event(
                world.id,
                "branch",
                &format!(
                    "deleted branch {} (no commits of its own) in {}",
                    row.branch,
                    crate::took::took(started.elapsed())
                ),
            )?;
        } else {
            self.store.event(
                world.id,
                "branch",
                &format!(
                    "kept branch {}: it has {ahead} commit(s) of its own",
                    row.branch
                ),
            )?;
        }
        Ok(())
    }

    /// The world's condition: its worktree is ready for the world's commands already (each
    /// waits for the paths it needs); the world as a whole — what `binky up` waits for —
    /// once every path is brought, so a shell in the worktree finds them.
    fn report(&self, world: &World, row: &WorktreeRow) -> Result<Applied, WorktreeError> {
        let pending: Vec<String> = self
            .store
            .read(|c| store::bootstrap_paths(c, world.id))?
            .into_iter()
            .filter(|b| b.state == BootstrapState::Pending)
            .map(|b| b.path)
            .collect();
        if !pending.is_empty() {
            return Ok(Applied {
                // Each path's task nudges the world when it is done; looked at again anyway.
                action: crate::runtime::Action::Requeue(std::time::Duration::from_secs(1)),
                conditions: vec![Condition::waiting(
                    CONDITION,
                    "Bringing",
                    format!(
                        "{} (branch {}): bringing {} into it",
                        row.path.display(),
                        row.branch,
                        pending.join(", ")
                    ),
                )],
            });
        }
        Ok(Applied::await_change(vec![Condition::ok(
            CONDITION,
            if row.adopted { "Adopted" } else { "Ready" },
            format!("{} (branch {})", row.path.display(), row.branch),
        )]))
    }
}

impl<G: Git> WorktreeController<G> {
    /// A project's shared world (see [`crate::shared`]) runs in the repository's main
    /// checkout, whatever it has checked out: adopted, never made or removed by binky.
    fn adopt_main_checkout(&self, world: &World) -> Result<Applied, WorktreeError> {
        let repo = &world.repo_root;
        if !repo.is_dir() {
            return Err(WorktreeError::RepoMissing(repo.clone()));
        }
        let row = self.store.read(|c| store::worktree(c, world.id))?;
        if row
            .as_ref()
            .is_none_or(|r| r.state != WorktreeState::Ready || &r.path != repo)
        {
            self.save(
                world,
                &WorktreeRow {
                    path: repo.clone(),
                    branch: String::new(),
                    head: None,
                    dirty: false,
                    adopted: true,
                    created_branch: false,
                    base_commit: None,
                    state: WorktreeState::Ready,
                    seen_generation: world.generation,
                },
            )?;
        }
        Ok(Applied::await_change(vec![Condition::ok(
            CONDITION,
            "Adopted",
            format!("{} (the main checkout)", repo.display()),
        )]))
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    canon(a) == canon(b)
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
}

impl<G: Git> Controller for WorktreeController<G> {
    type Error = WorktreeError;

    fn kind(&self) -> Kind {
        Kind::Worktree
    }

    async fn apply(&self, world: &World) -> Result<Applied, WorktreeError> {
        if world.is_shared() {
            return self.adopt_main_checkout(world);
        }
        let row = self.store.read(|c| store::worktree(c, world.id))?;
        let row = match row {
            Some(row) if row.path.is_dir() && row.state != WorktreeState::Creating => {
                self.keep(world, row).await?
            }
            // Deleted from outside: say so until a new `binky up` asks for it again. (A
            // `creating` row is an interrupted creation: it is made again below.)
            Some(row)
                if row.state != WorktreeState::Creating
                    && (row.state == WorktreeState::Ready
                        || row.seen_generation == world.generation) =>
            {
                return self.missing(world, row);
            }
            _ => self.make(world).await?,
        };
        self.report(world, &row)
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, WorktreeError> {
        // A path being brought finishes before its worktree goes.
        self.none_bringing(world.id).await;
        self.planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(world.id, world.created_at));
        self.looked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(world.id, world.created_at));
        let Some(row) = self.store.read(|c| store::worktree(c, world.id))? else {
            return Ok(Cleanup::Done);
        };
        // The main checkout a project's shared services ran in is the user's.
        if world.is_shared() {
            self.store
                .write(owner::Worktree, |tx| write::worktree::remove(tx, world.id))?;
            return Ok(Cleanup::Done);
        }
        let repo = &world.repo_root;
        if row.adopted {
            self.store.event(
                world.id,
                "worktree",
                &format!(
                    "kept worktree {} (it existed before binky)",
                    row.path.display()
                ),
            )?;
        } else if repo.is_dir() {
            // What it shares and changed in place is said before it goes; the worlds it
            // shared files with are looked at again without it.
            if row.path.is_dir() {
                self.look_for_edits(world, &row, true).await?;
                self.looked
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&(world.id, world.created_at));
            }
            let sharing: Vec<store::WorldId> = self.store.read(|c| {
                let mut ids = Vec::new();
                for (id, _, _) in store::worlds_of_repo(c, repo)? {
                    if id != world.id && !store::shared_edits(c, id)?.is_empty() {
                        ids.push(id);
                    }
                }
                Ok(ids)
            })?;
            let lock = self.repo_lock(repo);
            let _guard = lock.lock().await;
            self.remove_worktree(world, &row).await?;
            self.look_again_at(&sharing);
            if row.created_branch && self.git.branch_exists(repo, &row.branch).await? {
                self.remove_branch(world, &row).await?;
            }
        }
        self.store
            .write(owner::Worktree, |tx| write::worktree::remove(tx, world.id))?;
        Ok(Cleanup::Done)
    }
}

/// `feat/login` lives at `<root>/feat/login`: drop the `feat` directory once it is empty.
fn remove_empty_parents(path: &Path, world: &str) {
    let depth = world.matches('/').count();
    let mut dir = path.parent();
    for _ in 0..depth {
        match dir {
            Some(d) if std::fs::remove_dir(d).is_ok() => dir = d.parent(),
            _ => return,
        }
    }
    // The default root (`<repo>.worktrees`) goes too once its last world has.
    if let Some(d) = dir {
        if d.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(".worktrees"))
        {
            let _ = std::fs::remove_dir(d);
        }
    }
}
