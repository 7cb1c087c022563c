//! `binky hosts --write`: the hosts file's block is kept current by the daemon as worlds
//! come and go, until `binky hosts --remove`.

use std::time::Duration;

use crate::harness::*;

const CONFIG: &str = r#"
[project]
name = "hostsfile"
{range}

[services.web]
cmd = "exec python3 server.py ${self.port}"
url = true
"#;

/// The names `binky hosts` gives for world `w` (its `127.0.0.1 <host>` lines).
fn lines_of(env: &Env, w: &str) -> Vec<String> {
    let lines: Vec<String> = env
        .ok(&["hosts"])
        .lines()
        .filter(|l| l.contains(&format!(".{w}.")) || l.contains(&format!(" {w}.")))
        .map(str::to_owned)
        .collect();
    assert!(!lines.is_empty(), "world {w} has no hostname");
    lines
}

#[test]
fn a_world_made_after_hosts_write_resolves_and_a_removed_one_goes_until_hosts_remove() {
    let env = Env::new(CONFIG);
    let hosts = env.dir.path().join("hosts");
    let theirs = "127.0.0.1 localhost\n::1 ip6-localhost\n";
    std::fs::write(&hosts, theirs).unwrap();
    let file = [("BINKY_HOSTS_FILE", hosts.to_str().unwrap())];
    let read = || std::fs::read_to_string(&hosts).unwrap();

    env.ok(&["up", "a"]);
    let out = env.binky_env(&["hosts", "--write"], &file);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("keeps the block current"),
        "{}",
        stdout(&out)
    );
    let a = lines_of(&env, "a");
    let text = read();
    assert!(
        text.starts_with(theirs),
        "the file's own lines moved: {text}"
    );
    for l in &a {
        assert!(text.lines().any(|x| x == l), "{l} is not in:\n{text}");
    }
    // The setting names the file, and is not set by hand.
    assert!(env
        .ok(&["settings"])
        .contains(&format!("hosts_file = {}", hosts.display())));
    let out = env.binky(&["settings", "hosts_file=/tmp/elsewhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("binky hosts --write"),
        "{}",
        stderr(&out)
    );

    // A world made later (from a shell without BINKY_HOSTS_FILE) comes into the file.
    env.ok(&["up", "b"]);
    let b = lines_of(&env, "b");
    wait_until(
        "b's names are in the hosts file",
        Duration::from_secs(15),
        || {
            let text = read();
            b.iter().all(|l| text.lines().any(|x| x == l))
        },
    );
    // Removed, its names go; a's and the file's own lines stay.
    env.ok(&["remove", "b"]);
    wait_until(
        "b's names left the hosts file",
        Duration::from_secs(15),
        || {
            let text = read();
            !b.iter().any(|l| text.lines().any(|x| x == l))
        },
    );
    let text = read();
    assert!(text.starts_with(theirs), "{text}");
    assert!(a.iter().all(|l| text.lines().any(|x| x == l)), "{text}");
    assert!(
        !env.ok(&["status"]).contains("is behind the routes"),
        "a current file is said to be behind"
    );

    // A hand edit of the block that the daemon has not undone yet: status says so, naming
    // the command that brings it up to date.
    std::fs::write(&hosts, theirs).unwrap();
    let said = env.ok(&["status"]);
    assert!(
        said.contains("is behind the routes") && said.contains("binky hosts --write"),
        "{said}"
    );

    // --remove: the block goes, and the daemon keeps it no more.
    std::fs::write(
        &hosts,
        format!("{theirs}# binky begin\n{}\n# binky end\n", a[0]),
    )
    .unwrap();
    let out = env.binky_env(&["hosts", "--remove"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(), theirs);
    env.ok(&["up", "c"]);
    env.ok(&["remove", "a"]);
    assert_eq!(read(), theirs, "the daemon wrote a file it no longer keeps");
    assert!(!env.ok(&["status"]).contains("is behind the routes"));
    env.ok(&["remove", "c"]);
    env.assert_nothing_left(&["a", "b", "c"]);
}
