//! Running the `git` binary: the one place binky builds a git command line. The real
//! [`Git`](crate::worktree::Git) of the worktree controller, `git status` for the dirty
//! check, the CLI's checkout discovery and the copy into a new worktree all run git here.
//!
//! # Guarantees
//! - Every run is `git -C DIR ARGS…`: the repository is the one `DIR` is in. `GIT_DIR` and
//!   `GIT_WORK_TREE` are removed from git's environment, so a caller's (a git hook's, a
//!   shell's) never points a run at another repository, and the CLI and the daemon, whose
//!   environments differ, see the same repository.
//! - git never waits for a person: `GIT_TERMINAL_PROMPT=0` (no credential prompt) and
//!   stdin is closed, or carries the input given.
//! - An async run is killed when its future is dropped (a caller's timeout kills git too).

use std::io::Write;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

/// What a finished git run said.
#[derive(Debug)]
pub struct Output {
    /// How it exited.
    pub status: ExitStatus,
    /// Its stdout, as it is.
    pub stdout: Vec<u8>,
    /// Its stderr, trimmed (what a message quotes).
    pub stderr: String,
}

impl Output {
    fn of(out: std::process::Output) -> Output {
        Output {
            status: out.status,
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }
    }

    /// Its stdout as text (lossily: for git's own output, not file contents).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// `git -C dir args…` with the environment of every binky git run.
pub fn command(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::null());
    cmd
}

/// Run git to its end, on this thread. `input`, when given, is written to its stdin.
/// An error is git not running at all; a failing git is an [`Output`] whose status says so.
pub fn run_blocking(dir: &Path, args: &[&str], input: Option<Vec<u8>>) -> std::io::Result<Output> {
    let mut cmd = command(dir, args);
    if input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        // Written beside the read of stdout: a large input and a large output would
        // otherwise each wait for the other.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    Ok(Output::of(child.wait_with_output()?))
}

/// Run git to its end without blocking a worker. The error is git not running at all.
pub async fn run(dir: &Path, args: &[&str]) -> std::io::Result<Output> {
    let mut cmd = tokio::process::Command::from(command(dir, args));
    cmd.kill_on_drop(true);
    Ok(Output::of(cmd.output().await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let out = run_blocking(dir.path(), &["init", "--quiet"], None).unwrap();
        assert!(out.status.success(), "{}", out.stderr);
        dir
    }

    #[test]
    fn a_run_is_in_its_directory_whatever_git_dir_the_caller_has() {
        use std::ffi::OsStr;
        let a = repo();
        let cmd = command(a.path(), &["rev-parse", "--show-toplevel"]);
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("GIT_DIR"), None)), "{envs:?}");
        assert!(
            envs.contains(&(OsStr::new("GIT_WORK_TREE"), None)),
            "{envs:?}"
        );
        assert!(envs.contains(&(OsStr::new("GIT_TERMINAL_PROMPT"), Some(OsStr::new("0")))));
        let top = run_blocking(a.path(), &["rev-parse", "--show-toplevel"], None).unwrap();
        assert_eq!(
            std::fs::canonicalize(top.text().trim()).unwrap(),
            std::fs::canonicalize(a.path()).unwrap()
        );
    }

    #[test]
    fn input_reaches_git_and_a_failure_is_an_output() {
        let dir = repo();
        std::fs::write(dir.path().join(".gitignore"), "ignored/\n").unwrap();
        let out = run_blocking(
            dir.path(),
            &["check-ignore", "--no-index", "-z", "--stdin"],
            Some(b"ignored/\0kept\0".to_vec()),
        )
        .unwrap();
        assert!(out.status.success(), "{}", out.stderr);
        assert_eq!(out.text(), "ignored/\0");
        let out = run_blocking(dir.path(), &["no-such-command"], None).unwrap();
        assert!(!out.status.success());
        assert!(!out.stderr.is_empty());
    }

    #[tokio::test]
    async fn an_async_run_says_what_git_printed() {
        let dir = repo();
        let out = run(dir.path(), &["status", "--porcelain"]).await.unwrap();
        assert!(out.status.success(), "{}", out.stderr);
        assert_eq!(out.text(), "");
    }
}
