//! `binky exec` with the caller's own variables, and what `remove` leaves: no logs, no branch
//! whose commits are all on another branch.

use crate::harness::*;

const CONFIG: &str = r#"
[project]
name = "execrm"
{range}

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
env = { MODE = "service", WT = "${worktree.path}/sub", NAME = "${worktree}" }
"#;

#[test]
fn exec_keeps_the_callers_variables_with_the_services_env_on_top() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "w"]);
    let out = env.binky_env(
        &[
            "exec",
            "w",
            "-s",
            "api",
            "--",
            "sh",
            "-c",
            "echo $PASSWORD_FOR_TOOL $MODE $PORT",
        ],
        &[("PASSWORD_FOR_TOOL", "from-caller"), ("MODE", "caller")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let port = env.port_of("w", "api");
    assert_eq!(stdout(&out).trim(), format!("from-caller service {port}"));
    // The world's path, as a token and a variable; `${worktree}` stays its name.
    let served = served_env(port);
    let wt = std::fs::canonicalize(env.worktree("w")).unwrap();
    assert_eq!(served["WT"], format!("{}/sub", wt.display()));
    assert_eq!(served["BINKY_WORKTREE_PATH"], wt.display().to_string());
    assert_eq!(served["NAME"], "w");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn remove_deletes_the_worlds_logs_and_a_branch_whose_commits_are_all_on_main() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "feat/x"]);
    let logs = env.home.join("logs").join("execrm").join("feat").join("x");
    wait_until(
        "the service logged",
        std::time::Duration::from_secs(10),
        || logs.join("api.log").is_file(),
    );
    // A commit in the world, then merged into main: nothing of its own is left on it.
    let wt = env.worktree("feat/x");
    std::fs::write(wt.join("note.txt"), "merged\n").unwrap();
    git_in(&wt, &["add", "note.txt"]);
    git_in(&wt, &["commit", "-qm", "a note"]);
    env.git(&["merge", "-q", "--ff-only", "feat/x"]);
    env.ok(&["remove", "feat/x"]);
    assert!(!logs.exists(), "the world's logs were kept");
    assert!(
        !env.home.join("logs").join("execrm").join("feat").exists(),
        "an empty log directory was kept"
    );
    assert_eq!(
        env.git(&["branch", "--list", "feat/x"]),
        "",
        "the branch was kept"
    );
    env.assert_nothing_left(&["feat/x"]);

    // A commit that is on no other branch keeps the branch.
    env.ok(&["up", "w2"]);
    let wt = env.worktree("w2");
    std::fs::write(wt.join("own.txt"), "mine\n").unwrap();
    git_in(&wt, &["add", "own.txt"]);
    git_in(&wt, &["commit", "-qm", "own work"]);
    env.ok(&["remove", "w2"]);
    assert_eq!(
        env.git(&["branch", "--list", "w2"]),
        "w2",
        "a branch with work of its own went"
    );
}
