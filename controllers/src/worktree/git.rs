//! What the worktree controller asks of git (the [`Git`] trait the daemon implements over
//! the git binary, and tests over a fake), with what it answers.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};

use super::{Copied, Planned};

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
