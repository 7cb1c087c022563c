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

mod bring;
mod checkout;
mod edits;
mod git;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::registry::Kind;
use crate::runtime::{Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::store::{self, owner, write, BootstrapState, Store, StoreError, World};
use crate::store::{WorktreeRow, WorktreeState};

pub use self::bring::{Copied, CopyHow};
pub use self::git::{Git, GitError, WorktreeInfo};
pub use crate::store::Planned;

/// The condition this controller reports.
const CONDITION: &str = Kind::Worktree.condition();

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
