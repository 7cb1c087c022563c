//! git: run it in a directory, make a repository with commits.

use std::path::Path;
use std::process::Command;

/// `git -C dir args…`; its trimmed stdout. Panics with git's stderr when it fails.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Make `dir` a repository on branch `main` with a committer identity of its own.
pub fn init_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git_in(dir, &["init", "-q", "-b", "main"]);
    git_in(dir, &["config", "user.email", "t@example.com"]);
    git_in(dir, &["config", "user.name", "t"]);
}

/// Commit everything in the work tree with `message`.
pub fn commit_all(dir: &Path, message: &str) {
    git_in(dir, &["add", "-A"]);
    git_in(dir, &["commit", "-qm", message]);
}

/// A benchmark's sandbox repository: `git init` in `repo`, add `add` (a path or `.`), and
/// commit it as `bench`, with `HOME` set to the sandbox's `home` (so no user's git config
/// applies); the git commands' output goes to files in `scratch`.
pub fn bench_repo(repo: &Path, add: &str, home: &Path, scratch: &Path) -> crate::Res<()> {
    for args in [
        &["init", "-q"][..],
        &["add", add][..],
        &[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "commit",
            "-qm",
            "bench",
        ][..],
    ] {
        let mut c = Command::new("git");
        c.args(args).current_dir(repo).env("HOME", home);
        let r = crate::run::run_cmd(c, scratch, std::time::Duration::from_secs(30))?;
        if !r.ok() {
            return Err(format!("git {args:?} failed: {}", r.stderr));
        }
    }
    Ok(())
}
