//! A world's git worktree and branch: made (or found, or adopted) when the world comes up,
//! removed with the branch binky made for it when the world goes.

use std::path::Path;

use super::{Git, WorktreeController, WorktreeError, WorktreeInfo};
use crate::store::{self, WorktreeRow, WorktreeState, World};

impl<G: Git> WorktreeController<G> {
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

    /// Makes (or finds) the world's worktree. It is saved ready with the plan of what it is
    /// to get, then brought, outside the repo's lock: a 300 MB copy must not hold up other
    /// worlds' checkouts, and a command waits only for what it needs. A worktree a killed
    /// daemon found made (not adopted) may not have had its paths either.
    pub(super) async fn make(&self, world: &World) -> Result<WorktreeRow, WorktreeError> {
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
    pub(super) async fn remove_worktree(
        &self,
        world: &World,
        row: &WorktreeRow,
    ) -> Result<(), WorktreeError> {
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
    pub(super) async fn remove_branch(
        &self,
        world: &World,
        row: &WorktreeRow,
    ) -> Result<(), WorktreeError> {
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
