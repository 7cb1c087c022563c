//! Real git, through the `git` binary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use binky_controllers::git;
use binky_controllers::worktree::{Git, GitError, WorktreeInfo};

/// The `git` command line.
#[derive(Clone, Debug, Default)]
pub struct GitCli {
    /// Where a removed worktree is moved before it is deleted in the background (on the
    /// worktree's filesystem only: a rename, not a copy).
    trash: Option<PathBuf>,
}

impl GitCli {
    /// Removed worktrees are moved into `trash` (when it is on their filesystem) and
    /// deleted in the background, so `binky remove` does not wait for a `node_modules`
    /// to be unlinked file by file.
    pub fn with_trash(trash: PathBuf) -> Self {
        GitCli { trash: Some(trash) }
    }
}

/// Run git for the worktree controller: its stdout, or why not. A git that hangs (a lock,
/// a network remote) is killed after two minutes.
async fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = tokio::time::timeout(Duration::from_secs(120), git::run(dir, args))
        .await
        .map_err(|_| GitError::Failed {
            args: args.join(" "),
            dir: dir.to_owned(),
            stderr: "timed out after 120 s".into(),
        })?
        .map_err(GitError::Spawn)?;
    if out.status.success() {
        Ok(out.text())
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            dir: dir.to_owned(),
            stderr: out.stderr,
        })
    }
}

/// Parse `git worktree list --porcelain`.
pub fn parse_worktree_list(text: &str) -> Vec<WorktreeInfo> {
    let mut out = Vec::new();
    let mut path: Option<PathBuf> = None;
    let mut branch: Option<String> = None;
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Some(p) = path.take() {
                out.push(WorktreeInfo {
                    path: p,
                    branch: branch.take(),
                });
            }
            branch = None;
        } else if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if let Some(b) = line.strip_prefix("branch ") {
            branch = Some(b.strip_prefix("refs/heads/").unwrap_or(b).to_owned());
        }
    }
    out
}

impl Git for GitCli {
    async fn worktrees(&self, repo: &Path) -> Result<Vec<WorktreeInfo>, GitError> {
        Ok(parse_worktree_list(
            &git(repo, &["worktree", "list", "--porcelain"]).await?,
        ))
    }

    async fn branch_exists(&self, repo: &Path, branch: &str) -> Result<bool, GitError> {
        let r = format!("refs/heads/{branch}");
        match git(repo, &["rev-parse", "--verify", "--quiet", &r]).await {
            Ok(_) => Ok(true),
            Err(GitError::Failed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn rev_parse(&self, repo: &Path, rev: &str) -> Result<String, GitError> {
        let r = format!("{rev}^{{commit}}");
        Ok(git(repo, &["rev-parse", "--verify", &r])
            .await?
            .trim()
            .to_owned())
    }

    async fn add_worktree(
        &self,
        repo: &Path,
        path: &Path,
        branch: &str,
        create_from: Option<&str>,
    ) -> Result<(), GitError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(GitError::Spawn)?;
        }
        let p = path.to_string_lossy();
        match create_from {
            Some(from) => {
                git(
                    repo,
                    &["worktree", "add", "--quiet", "-b", branch, &p, from],
                )
                .await?
            }
            None => git(repo, &["worktree", "add", "--quiet", &p, branch]).await?,
        };
        Ok(())
    }

    async fn plan_bootstrap(
        &self,
        repo: &Path,
        worktree: &Path,
        copy: &[String],
        modes: &std::collections::BTreeMap<String, binky_controllers::spec::CopyMode>,
        fallbacks: &[PathBuf],
    ) -> Result<Vec<binky_controllers::worktree::Planned>, String> {
        let (repo, worktree) = (repo.to_owned(), worktree.to_owned());
        let (copy, modes, fallbacks) = (copy.to_vec(), modes.clone(), fallbacks.to_vec());
        tokio::task::spawn_blocking(move || {
            crate::bootstrap::plan(&repo, &worktree, &copy, &modes, &fallbacks)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn bring(
        &self,
        planned: &binky_controllers::worktree::Planned,
        worktree: &Path,
    ) -> Result<binky_controllers::worktree::Copied, String> {
        let (p, worktree) = (planned.clone(), worktree.to_owned());
        tokio::task::spawn_blocking(move || {
            // Renamed into place by a daemon that died before it said so: it is whole.
            if std::fs::symlink_metadata(worktree.join(&p.path)).is_ok() {
                return Ok(binky_controllers::worktree::Copied {
                    path: p.path.clone(),
                    from: p.from.clone(),
                    files: 0,
                    bytes: 0,
                    how: binky_controllers::worktree::CopyHow::Copied,
                    copied: 0,
                    note: Some(
                        "found whole in the worktree: brought before the daemon restarted".into(),
                    ),
                    took: std::time::Duration::ZERO,
                });
            }
            crate::bootstrap::copy_path(&p.from, &worktree, &p.path, p.mode)
                .map_err(|e| format!("bringing {}: {e}", p.path))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn changed_links(
        &self,
        worktree: &Path,
        paths: &[(String, i64)],
        checkouts: &[PathBuf],
    ) -> Result<Vec<binky_controllers::inplace::Changed>, String> {
        let (worktree, paths, checkouts) =
            (worktree.to_owned(), paths.to_vec(), checkouts.to_vec());
        tokio::task::spawn_blocking(move || {
            crate::bootstrap::changed_links(&worktree, &paths, &checkouts)
        })
        .await
        .map_err(|e| e.to_string())
    }

    async fn changes(&self, worktree: &Path) -> Result<Vec<String>, GitError> {
        binky_controllers::dirty::changed_paths(worktree)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::Other => GitError::Failed {
                    args: "status --porcelain -z".into(),
                    dir: worktree.to_owned(),
                    stderr: e.to_string(),
                },
                _ => GitError::Spawn(e),
            })
    }

    async fn remove_worktree(&self, repo: &Path, path: &Path) -> Result<(), GitError> {
        // `git worktree remove` unlinks a 300 MB node_modules file by file (5 s here); a
        // rename takes a millisecond. git then forgets the worktree whose directory is gone,
        // and the files go in the background.
        if let Some(aside) = self
            .trash
            .as_deref()
            .and_then(|t| crate::trash::move_aside(t, path))
        {
            let deleting = aside.clone();
            std::thread::spawn(move || crate::trash::delete_tree(&deleting));
            git(repo, &["worktree", "prune"]).await?;
            return Ok(());
        }
        git(
            repo,
            &["worktree", "remove", "--force", &path.to_string_lossy()],
        )
        .await?;
        Ok(())
    }

    async fn prune(&self, repo: &Path) -> Result<(), GitError> {
        git(repo, &["worktree", "prune"]).await?;
        Ok(())
    }

    async fn commits_ahead(&self, repo: &Path, base: &str, branch: &str) -> Result<u64, GitError> {
        // Commits of its own: on the branch, not on its base, and on no other local branch
        // (a commit already merged into main is not the world's to keep).
        let head = format!("refs/heads/{branch}");
        // `--exclude` before `--branches` takes the name without `refs/heads/`.
        let exclude = format!("--exclude={branch}");
        let out = git(
            repo,
            &[
                "rev-list",
                "--count",
                &head,
                "--not",
                base,
                &exclude,
                "--branches",
            ],
        )
        .await?;
        Ok(out.trim().parse().unwrap_or(0))
    }

    async fn delete_branch(&self, repo: &Path, branch: &str) -> Result<(), GitError> {
        git(repo, &["branch", "-D", branch]).await?;
        Ok(())
    }
}

/// Run git in `dir` and return its trimmed stdout, or its stderr as the error.
pub fn text(dir: &std::path::Path, args: &[&str]) -> Result<String, String> {
    bytes(dir, args).map(|out| String::from_utf8_lossy(&out).trim_end().to_owned())
}

/// Like [`text`], the output as it is (for file contents, which must not be read lossily).
pub fn bytes(dir: &std::path::Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = binky_controllers::git::run_blocking(dir, args, None)
        .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(out.stderr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_worktree_lists_parse() {
        let text = "worktree /r\nHEAD abc\nbranch refs/heads/main\n\nworktree /r.worktrees/x\nHEAD def\ndetached\n\nworktree /r.worktrees/feat/a\nHEAD 123\nbranch refs/heads/feat/a\n";
        let list = parse_worktree_list(text);
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].branch.as_deref(), Some("main"));
        assert_eq!(list[1].branch, None);
        assert_eq!(list[2].path, PathBuf::from("/r.worktrees/feat/a"));
        assert_eq!(list[2].branch.as_deref(), Some("feat/a"));
    }
}
