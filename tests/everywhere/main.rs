//! What binky does on every system it builds for, Windows included (CI runs this binary
//! under Wine as well as on Linux): the commands that need neither a git repository nor a
//! Unix call — `version`, every command's `--help`, `check`, `init` — and the daemon
//! started, answering over its local socket (a Unix socket; a named pipe on Windows) and
//! stopped. The integration suite (tests/integration) needs real git, real servers and Unix.
//!
//! Only binky's binary and the standard library here: no shell, no `/proc`, no git.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use binky_testkit::wait::wait_until;

/// binky, with a home of the test's own and nothing of the caller's binky environment.
fn binky(home: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_binky"))
        .args(args)
        .current_dir(dir)
        .env("BINKY_HOME", home)
        .env_remove("BINKY_WORKTREE_ROOT")
        .env_remove("BINKY_WORLD")
        .output()
        .unwrap_or_else(|e| panic!("binky {args:?} did not start: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn version_names_binkys_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = binky(dir.path(), dir.path(), &["version"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        text(&out)
    );
}

/// The commands `binky --help` lists.
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_command_answers_its_help() {
    let dir = tempfile::tempdir().unwrap();
    let out = binky(dir.path(), dir.path(), &["--help"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = commands(&String::from_utf8_lossy(&out.stdout));
    assert!(
        listed.len() >= 30,
        "binky --help lists {} commands: {listed:?}",
        listed.len()
    );
    for command in &listed {
        let out = binky(dir.path(), dir.path(), &[command, "--help"]);
        assert!(
            out.status.success(),
            "binky {command} --help: {}",
            text(&out)
        );
        let usage = format!("Usage: binky {command}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&usage),
            "binky {command} --help: {}",
            text(&out)
        );
    }
}

#[test]
fn check_accepts_a_good_file_and_names_what_is_wrong_in_a_bad_one() {
    let home = tempfile::tempdir().unwrap();
    let good = tempfile::tempdir().unwrap();
    std::fs::write(
        good.path().join("binky.toml"),
        "[project]\nname = \"hello\"\n\n[services.api]\ncmd = \"python3 api.py --port ${self.port}\"\nurl = \"api\"\n",
    )
    .unwrap();
    let out = binky(home.path(), good.path(), &["check", "."]);
    assert!(out.status.success(), "{}", text(&out));

    let bad = tempfile::tempdir().unwrap();
    std::fs::write(
        bad.path().join("binky.toml"),
        "[project]\nname = \"hello\"\n\n[services.api]\ncmd = \"run\"\ndepends_on = [\"nowhere\"]\n",
    )
    .unwrap();
    let out = binky(home.path(), bad.path(), &["check", "."]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("nowhere"), "{}", text(&out));
}

#[test]
fn init_writes_a_file_that_check_accepts() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("docker-compose.yml"),
        "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: example\n  web:\n    build: .\n    command: python3 -m http.server 8000\n    ports: [\"8000:8000\"]\n    depends_on: [db]\n    environment:\n      DATABASE_URL: postgres://postgres:example@db:5432/postgres\n",
    )
    .unwrap();
    let out = binky(home.path(), project.path(), &["init", "."]);
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::read_to_string(project.path().join("binky.toml")).unwrap();
    assert!(written.contains("[services.web]"), "{written}");
    assert!(written.contains("adapter = \"postgres\""), "{written}");
    let out = binky(home.path(), project.path(), &["check", "."]);
    assert!(out.status.success(), "{written}\n{}", text(&out));
}

#[test]
fn the_daemon_starts_answers_over_its_socket_and_stops() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (http, https) = (
        binky_testkit::net::free_port(),
        binky_testkit::net::free_port(),
    );
    let out = binky(
        home.path(),
        dir.path(),
        &[
            "port",
            "--proxy",
            &http.to_string(),
            "--https",
            &https.to_string(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Stopped at the end whatever the asserts say: no daemon outlives the test.
    struct Stop<'a>(&'a Path, &'a Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            binky(self.0, self.1, &["daemon", "stop"]);
        }
    }
    let _stop = Stop(home.path(), dir.path());
    let out = binky(home.path(), dir.path(), &["daemon", "start"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = binky(home.path(), dir.path(), &["daemon", "status"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = binky(home.path(), dir.path(), &["status"]);
    assert!(out.status.success(), "{}", text(&out));
    // The proxy answers on the port set above.
    wait_until("the proxy listens", Duration::from_secs(30), || {
        binky_testkit::net::listening(http)
    });
    let out = binky(home.path(), dir.path(), &["daemon", "stop"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_until("the daemon is gone", Duration::from_secs(30), || {
        binky(home.path(), dir.path(), &["daemon", "status"])
            .status
            .code()
            == Some(1)
    });
    wait_until("the proxy's port is free", Duration::from_secs(30), || {
        !binky_testkit::net::listening(http)
    });
}
