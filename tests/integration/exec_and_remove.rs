//! `binky exec` with the caller's own variables, and what `remove` leaves: no logs, no branch
//! whose commits are all on another branch.

use std::time::Duration;

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

/// `exec -s web` gets exactly what web runs with; `exec` without `-s` and `verify` get the
/// world's commands' one environment: every service's `env_file`, what services declare
/// winning over what binky hands out by name (`API_URL` as web has it, not the proxy URL),
/// `BINKY_WORKTREE_PATH`, and `PWD` where they run — not the caller's.
#[test]
fn exec_and_verify_see_what_the_services_see() {
    let env = Env::new(
        r#"
[project]
name = "oneenv"
{range}

[agents]
verify = ["env > verify-env.txt"]

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true

[services.web]
cmd = "env -0 > web.env0; exec python3 ../server.py ${self.port}"
url = true
workdir = "web"
env_file = [".env.web"]
env = { API_URL = "${api.url}", FROM_FILE_TOO = "${env.SETTINGS_KEY}-x" }
"#,
    );
    std::fs::create_dir_all(env.repo.join("web")).unwrap();
    std::fs::write(
        env.repo.join("web/.env.web"),
        "SETTINGS_KEY=from-env-file
",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "web settings"]);
    env.ok(&["up", "w"]);
    let served = served_env(env.port_of("w", "web"));
    let wt = std::fs::canonicalize(env.worktree("w")).unwrap();
    let api_port = env.port_of("w", "api");
    assert_eq!(served["API_URL"], format!("http://localhost:{api_port}"));
    assert_eq!(served["SETTINGS_KEY"], "from-env-file");
    assert_eq!(served["FROM_FILE_TOO"], "from-env-file-x");

    let parse = |text: &str| -> std::collections::BTreeMap<String, String> {
        text.split('\0')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    // What web's shell had (python3 behind a version manager's shim changes its own).
    let web_env = parse(&std::fs::read_to_string(wt.join("web/web.env0")).unwrap());
    std::fs::remove_file(wt.join("web/web.env0")).unwrap();
    let exec_env = |args: &[&str]| -> std::collections::BTreeMap<String, String> {
        let mut all = vec!["exec", "w"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "env", "-0"]);
        // Run from elsewhere, with a PWD of the caller's.
        let out = std::process::Command::new(binky_bin())
            .args(&all)
            .current_dir(&env.repo)
            .env("BINKY_HOME", &env.home)
            .env("PWD", "/somewhere/else")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        parse(&String::from_utf8_lossy(&out.stdout))
    };
    // With -s: every variable web has (but what its spawn adds: the shell's own and the
    // spawn's token), with the same value.
    let as_web = exec_env(&["-s", "web"]);
    assert!(web_env.contains_key("SETTINGS_KEY"), "{web_env:?}");
    for (k, v) in &web_env {
        if matches!(k.as_str(), "_" | "SHLVL" | "OLDPWD") || k.starts_with("BINKY_SPAWN") {
            continue;
        }
        assert_eq!(as_web.get(k), Some(v), "exec -s web has another {k}");
    }
    // Without -s: the world's.
    let world = exec_env(&[]);
    assert_eq!(world["API_URL"], format!("http://localhost:{api_port}"));
    assert_eq!(world["SETTINGS_KEY"], "from-env-file");
    assert_eq!(world["FROM_FILE_TOO"], "from-env-file-x");
    assert_eq!(world["BINKY_WORKTREE_PATH"], wt.display().to_string());
    assert_eq!(world["PWD"], wt.display().to_string());
    assert!(
        world["WEB_URL"].contains("web.w.oneenv.localhost"),
        "{world:?}"
    );
    // verify: the same environment.
    env.ok(&["verify", "w"]);
    let text = std::fs::read_to_string(wt.join("verify-env.txt")).unwrap();
    for want in [
        format!("API_URL=http://localhost:{api_port}"),
        "SETTINGS_KEY=from-env-file".to_owned(),
        format!("PWD={}", wt.display()),
        format!("BINKY_WORKTREE_PATH={}", wt.display()),
    ] {
        assert!(
            text.lines().any(|l| l == want),
            "verify lacks {want}:\n{text}"
        );
    }
    std::fs::remove_file(wt.join("verify-env.txt")).unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn remove_deletes_the_worlds_logs_and_a_branch_whose_commits_are_all_on_main() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "feat/x"]);
    let logs = env.home.join("logs").join("execrm").join("feat").join("x");
    wait_until("the service logged", Duration::from_secs(10), || {
        logs.join("api.log").is_file()
    });
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

/// `count` files of 4 KiB under `dir/node_modules` (ignored by git).
fn fill_node_modules(dir: &std::path::Path, count: usize) {
    let data = vec![7u8; 4096];
    for i in 0..count {
        let d = dir.join(format!("node_modules/pkg{}/lib", i / 50));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("f{i}.js")), &data).unwrap();
    }
}

#[test]
fn remove_takes_the_worktree_away_at_once_and_deletes_its_files_behind_the_world() {
    let env = Env::new(CONFIG);
    std::fs::write(env.repo.join(".gitignore"), "node_modules/\n").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignore node_modules"]);
    env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    fill_node_modules(&wt, 3000);
    env.ok(&["remove", "w"]);
    // Gone from where it was, and from git, when remove returns.
    assert!(!wt.exists(), "{} still there", wt.display());
    let list = env.git(&["worktree", "list"]);
    assert!(!list.contains("repo.worktrees"), "{list}");
    // Its files go in the background, all of them.
    let trash = env.home.join("trash");
    wait_until(
        "the removed worktree is deleted",
        Duration::from_secs(60),
        || std::fs::read_dir(&trash).is_ok_and(|mut d| d.next().is_none()),
    );
    env.assert_nothing_left(&["w"]);
    // The same name makes a new, clean world.
    env.ok(&["up", "w"]);
    assert!(!env.worktree("w").join("node_modules").exists());
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn what_a_killed_daemon_left_to_delete_is_deleted_by_the_next_one() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "w"]);
    env.ok(&["daemon", "stop"]);
    // As a daemon killed mid-deletion leaves it.
    let left = env.home.join("trash").join("123-456-old");
    fill_node_modules(&left, 500);
    env.ok(&["up", "w"]);
    wait_until("the leftover is deleted", Duration::from_secs(60), || {
        !left.exists()
    });
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

const SETUP_WRITES: &str = r#"
[project]
name = "setupdirty"
{range}

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
setup = "echo '{\"lockfileVersion\": 3}' > package-lock.json && mkdir -p vendor/pkg && echo x > vendor/pkg/a.js && echo '# installed' >> server.py"
"#;

#[test]
fn what_setup_made_is_not_uncommitted_changes_but_the_users_edits_after_it_are() {
    let env = Env::new(SETUP_WRITES);
    env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    assert!(wt.join("package-lock.json").exists());
    // Setup's files alone: remove goes through without --force.
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);

    env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    // The user edits what setup made, and adds a file of their own.
    std::fs::write(
        wt.join("package-lock.json"),
        "{\"lockfileVersion\": 3, \"mine\": 1}\n",
    )
    .unwrap();
    std::fs::write(wt.join("vendor/pkg/b.js"), "mine").unwrap();
    std::fs::write(wt.join("notes.txt"), "mine").unwrap();
    let out = env.binky(&["remove", "w"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for path in ["package-lock.json", "vendor/", "notes.txt"] {
        assert!(err.contains(path), "{path} not named: {err}");
    }
    // setup's edit of a tracked file, untouched since, is not named.
    assert!(!err.contains("server.py"), "{err}");
    assert!(wt.join("notes.txt").exists(), "nothing is lost");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn exec_of_an_adapter_service_runs_where_and_with_what_its_migrate_runs() {
    let bin =
        crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let env = Env::new(
        r#"
[project]
name = "execdb"
{range}

[services.db]
adapter = "postgres"
workdir = "backend"
env = { MIGRATIONS = "${worktree.path}/backend/migrations" }
migrate = "test -d migrations"
"#,
    );
    std::fs::create_dir_all(env.repo.join("backend/migrations")).unwrap();
    std::fs::write(env.repo.join("backend/migrations/.keep"), "").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "migrations"]);
    // No world yet: says what to do.
    let out = env.binky(&["exec", "w", "-s", "db", "--", "true"]);
    assert!(!out.status.success());
    env.ok(&["up", "w"]);
    let url = env.env_of("w")["DB_URL"].as_str().unwrap().to_owned();
    let psql = bin.join("psql");
    let script = format!(
        "pwd; echo \"$DATABASE_URL\"; echo \"$MIGRATIONS\"; '{}' \"$DATABASE_URL\" -qAt -c 'create table by_hand (id int)' -c 'select count(*) from by_hand'",
        psql.display()
    );
    let out = env.binky(&["exec", "w", "-s", "db", "--", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let wt = env.worktree("w");
    assert_eq!(
        std::path::Path::new(lines[0]).canonicalize().unwrap(),
        wt.join("backend").canonicalize().unwrap()
    );
    assert_eq!(lines[1], url, "DATABASE_URL is the world's slice");
    assert_eq!(lines[2], format!("{}/backend/migrations", wt.display()));
    assert_eq!(lines[3], "0", "the table was made in the slice: {text}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn up_from_an_older_commit_says_uncommitted_only_of_uncommitted_changes() {
    let env = Env::new(CONFIG);
    // A second commit changes binky.toml: the older one has another version.
    env.write_config(&CONFIG.replace("MODE = \"service\"", "MODE = \"newer\""));
    env.git(&["commit", "-qam", "newer mode"]);
    let out = env.binky(&["up", "old", "--from", "HEAD~1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not committed"), "{}", stderr(&out));
    assert_eq!(served_env(env.port_of("old", "api"))["MODE"], "service");
    // An edit not committed is said.
    env.write_config(&CONFIG.replace("MODE = \"service\"", "MODE = \"edited\""));
    let out = env.binky(&["up", "other", "--from", "HEAD~1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("your binky.toml has changes that are not committed"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "old"]);
    env.ok(&["remove", "other"]);
    env.assert_nothing_left(&["old", "other"]);
}

#[test]
fn remove_with_the_home_on_another_filesystem_removes_the_worktree_the_slow_way() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new(CONFIG);
    // A home where a rename from the worktree cannot go (tmpfs vs the disk here).
    let other = tempfile::tempdir_in("/dev/shm").expect("/dev/shm for a home on tmpfs");
    let home = other.path().join("home");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(binky_bin())
            .args(args)
            .current_dir(&env.repo)
            .env("BINKY_HOME", &home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    let (p, s) = (env.proxy_port().to_string(), env.https_port().to_string());
    run(&["port", "--proxy", &p, "--https", &s]);
    run(&["up", "w"]);
    let wt = env.worktree("w");
    let devices = (
        std::fs::metadata(&wt).unwrap().dev(),
        std::fs::metadata(other.path()).unwrap().dev(),
    );
    assert_ne!(
        devices.0, devices.1,
        "this test needs /dev/shm on another filesystem than the temporary directory"
    );
    fill_node_modules(&wt, 200);
    std::fs::write(env.repo.join(".git/info/exclude"), "node_modules/\n").unwrap();
    run(&["remove", "w"]);
    assert!(
        !wt.exists(),
        "{} still there (devices {devices:?})",
        wt.display()
    );
    assert!(!env.git(&["worktree", "list"]).contains("repo.worktrees"));
    // Nothing went through the trash: it is empty or was never made.
    let trash = home.join("trash");
    assert!(std::fs::read_dir(&trash).map_or(true, |mut d| d.next().is_none()));
    run(&["daemon", "stop"]);
}

/// A world made while `binky.toml` is not committed runs the main checkout's file (its new
/// worktree has none). A second `up` runs that same file again, from the main checkout or
/// from inside the world's worktree, and says which file it runs: no worse than the first.
#[test]
fn a_second_up_of_a_world_whose_binky_toml_is_not_committed_runs_the_same_file() {
    let env = Env::new(CONFIG);
    env.git(&["rm", "-q", "--cached", "binky.toml"]);
    env.git(&["commit", "-qm", "binky.toml is not committed"]);
    let out = env.binky(&["up", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not committed"),
        "{}",
        stderr(&out)
    );
    assert!(!env.worktree("w").join("binky.toml").exists());
    let api = env.pid_of("w", "api").unwrap();
    let file = env.repo.join("binky.toml").display().to_string();
    for dir in [env.repo.clone(), env.worktree("w")] {
        let out = env.binky_in(&dir, &["up", "w"]);
        assert!(
            out.status.success(),
            "a second up in {} exits {:?}: {}",
            dir.display(),
            out.status.code(),
            stderr(&out)
        );
        assert!(stderr(&out).contains(&file), "{}", stderr(&out));
        assert_eq!(
            env.pid_of("w", "api"),
            Some(api),
            "the same config restarted api"
        );
    }
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A repository whose `[project] name` changed has had two projects: after the last world
/// of the new name is removed, its history is still read from inside the repository (the
/// first project of the repository's was looked at, and the answer was "no world").
#[test]
fn events_of_the_last_removed_world_are_read_after_the_project_was_renamed() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "old"]);
    env.ok(&["remove", "old"]);
    env.write_config(&CONFIG.replace("name = \"execrm\"", "name = \"execrm2\""));
    env.git(&["commit", "-qam", "renamed"]);
    env.ok(&["up", "w2"]);
    env.ok(&["remove", "w2"]);
    let out = env.binky(&["events", "w2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for what in ["world created", "world removed"] {
        assert!(text.contains(what), "no `{what}` in {text}");
    }
    // The old project's removed world too.
    let text = env.ok(&["events", "old"]);
    assert!(text.contains("world removed"), "{text}");
    env.assert_nothing_left(&["old", "w2"]);
}

/// `binky events NAME` after `remove` shows what happened, the removal included. A new world
/// of the same name (which may get the removed one's store id) shows only its own events,
/// and says that an earlier world of its name was removed.
#[test]
fn events_of_a_removed_world_stay_readable_and_a_new_world_of_its_name_shows_only_its_own() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "w"]);
    env.ok(&["remove", "w"]);
    let out = env.binky(&["events", "w"]);
    assert!(
        out.status.success(),
        "events of a removed world: {:?} {}",
        out.status.code(),
        stderr(&out)
    );
    let text = stdout(&out);
    for what in ["world created", "started api", "world removed"] {
        assert!(text.contains(what), "no `{what}` in {text}");
    }
    assert!(
        stderr(&out).contains("world `w` was removed"),
        "{}",
        stderr(&out)
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["events", "w", "--json"])).unwrap();
    assert!(
        json.as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "removed"),
        "{json}"
    );
    // The name again: a new world, with its own history only.
    env.ok(&["up", "w"]);
    let out = env.binky(&["events", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("world created").count(), 1, "{text}");
    assert!(!text.contains("world removed"), "{text}");
    assert!(
        stderr(&out).contains("1 earlier world named `w` was removed"),
        "{}",
        stderr(&out)
    );
    let status = env.ok(&["status", "w"]);
    assert!(!status.contains("world removed"), "{status}");
    // Removed again: the second world's history, not the first's.
    env.ok(&["remove", "w"]);
    let text = env.ok(&["events", "w"]);
    assert_eq!(text.matches("world created").count(), 1, "{text}");
    assert_eq!(text.matches("world removed").count(), 1, "{text}");
    // A name that never was a world is still refused.
    let out = env.binky(&["events", "never"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no world `never`"),
        "{}",
        stderr(&out)
    );
    env.assert_nothing_left(&["w"]);
}
