//! For agents: `binky exec` with a service's environment, `binky verify`.

use crate::harness::*;

fn config(verify: &str) -> String {
    format!(
        r#"
[project]
name = "agent"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
env = {{ GREETING = "hello ${{worktree}}" }}

[services.web]
cmd = "{SERVE}"
url = true
env = {{ API = "${{api.url}}" }}

[agents]
verify = {verify}
"#
    )
}

#[test]
fn exec_sees_the_environment_the_service_gets_and_the_callers_own() {
    let env = Env::new(&config("[]"));
    env.ok(&["up", "w"]);
    let served = served_env(env.port_of("w", "api"));
    let out = env.ok(&["exec", "w", "--service", "api", "--", "env", "-0"]);
    let mut seen: std::collections::BTreeMap<String, String> = out
        .split('\0')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut want: std::collections::BTreeMap<String, String> = served
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    // What the shell, the pyenv shim in front of python3 and the test server add or
    // rewrite is not binky's: compare everything else, both ways.
    let noise = |k: &str| {
        matches!(
            k,
            "PATH"
                | "PWD"
                | "OLDPWD"
                | "SHLVL"
                | "_"
                | "_request"
                | "LC_CTYPE"
                | "BINKY_SPAWN_TOKEN"
        ) || k.starts_with("PYENV")
            || k.starts_with("_PYENV")
    };
    seen.retain(|k, _| !noise(k));
    want.retain(|k, _| !noise(k));
    // Everything the service gets, with its value...
    for (k, v) in &want {
        assert_eq!(
            seen.get(k),
            Some(v),
            "{k}: exec saw {:?}, the service {v:?}",
            seen.get(k)
        );
    }
    // ...and besides, only the caller's own variables (a terminal's TERM, say), as they are.
    for (k, v) in &seen {
        if !want.contains_key(k) {
            assert_eq!(
                std::env::var(k).ok().as_ref(),
                Some(v),
                "{k}={v} is neither the service's nor the caller's"
            );
        }
    }
    assert_eq!(seen["GREETING"], "hello w");
    // Without a service: every service's URL and what services declare, in the worktree.
    let out = env.ok(&["exec", "w", "--", "sh", "-c", "echo $API_URL $API; pwd"]);
    // `binky env` hands out the proxy URL, a service's `${api.url}` is the direct address.
    let api_url = env.env_of("w")["API_URL"].as_str().unwrap().to_owned();
    assert!(api_url.starts_with("http://api.w."), "{api_url}");
    let direct = format!("http://localhost:{}", env.port_of("w", "api"));
    assert_eq!(
        out,
        format!(
            "{api_url} {direct}\n{}\n",
            env.worktree("w").canonicalize().unwrap().display()
        )
    );
    // The command's exit status is exec's.
    let out = env.binky(&["exec", "w", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    let out = env.binky(&["exec", "w", "--service", "nope", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("services: api, web"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// `binky exec` and `binky verify` follow one rule: the caller's own environment is kept
/// (`FOO=x binky verify`), and what binky sets for the world goes on top of it.
#[test]
fn exec_and_verify_keep_the_callers_environment_with_the_worlds_on_top() {
    let env = Env::new(&config(
        r#"["echo \"verify FOO=$FOO API_PORT=$API_PORT\""]"#,
    ));
    env.ok(&["up", "w"]);
    let port = env.port_of("w", "api");
    let vars = [("FOO", "from-the-caller"), ("API_PORT", "1")];
    let out = env.binky_env(
        &[
            "exec",
            "w",
            "--",
            "sh",
            "-c",
            "echo \"exec FOO=$FOO API_PORT=$API_PORT\"",
        ],
        &vars,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("exec FOO=from-the-caller API_PORT={port}\n")
    );
    let out = env.binky_env(&["verify", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("verify FOO=from-the-caller API_PORT={port}")),
        "{}",
        stdout(&out)
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn verify_runs_each_command_with_the_world_env_and_fails_when_one_fails() {
    let env = Env::new(&config(
        r#"["test -n \"$API_URL\" && echo api at $API_PORT", "echo 'boom: 2 tests failed' >&2; exit 3"]"#,
    ));
    env.ok(&["up", "w"]);
    let out = env.binky(&["verify", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let port = env.port_of("w", "api");
    assert!(text.contains(&format!("api at {port}")), "{text}");
    assert!(
        text.contains("FAIL") && text.contains("exit 3") && text.contains("boom: 2 tests failed"),
        "{text}"
    );
    assert!(text.contains("1 of 2 verify command(s) passed"), "{text}");
    let v: serde_json::Value =
        serde_json::from_slice(&env.binky(&["verify", "w", "--json"]).stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["results"][0]["ok"], true);
    assert_eq!(v["results"][1]["exit"], 3);
    // All passing: exit 0.
    std::fs::write(
        env.worktree("w").join("binky.toml"),
        config(r#"["true", "echo fine"]"#).replace("{range}", &env.range()),
    )
    .unwrap();
    env.ok(&["apply", "w"]);
    let out = env.ok(&["verify", "w"]);
    assert!(out.contains("2 of 2"), "{out}");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn with_approvals_on_verify_runs_only_what_a_person_approved_and_does_not_hold_the_world() {
    let env = Env::new(&config(r#"["touch verified-by-binky"]"#));
    env.ok(&["settings", "approvals=true"]);
    let listed: serde_json::Value = serde_json::from_str(&env.ok(&["approve", "--list", "--json"]))
        .unwrap_or(serde_json::Value::Null);
    // Nothing is listed before a world exists; bring it up held, then approve what `up` runs.
    assert!(listed.as_array().is_none_or(|a| a.is_empty()), "{listed}");
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let list: serde_json::Value =
        serde_json::from_str(&env.ok(&["approve", "--list", "--json"])).unwrap();
    let list = list.as_array().unwrap().clone();
    let verify = list
        .iter()
        .find(|c| c["what"] == "[agents] verify")
        .unwrap_or_else(|| panic!("verify is listed for approval: {list:?}"));
    let verify_key = verify["key"].as_str().unwrap().to_owned();
    for c in list.iter().filter(|c| c["what"] != "[agents] verify") {
        env.ok(&["approve", c["key"].as_str().unwrap(), "--yes"]);
    }
    // The unapproved verify command does not hold the world.
    env.ok(&["up", "w"]);
    let marker = env.worktree("w").join("verified-by-binky");
    let out = env.binky(&["verify", "w"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&verify_key)
            && err.contains("touch verified-by-binky")
            && err.contains("binky approve"),
        "{err}"
    );
    assert!(!marker.exists(), "an unapproved verify command ran");
    env.ok(&["approve", &verify_key, "--yes"]);
    let out = env.ok(&["verify", "w"]);
    assert!(out.contains("1 of 1"), "{out}");
    assert!(marker.exists());
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// The session a process is in (`/proc/PID/stat`'s sixth field).
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

#[test]
fn binky_exec_stopped_ends_everything_its_command_started_even_a_setsid_grandchild() {
    use std::time::Duration;
    let env = Env::new(&config("[]"));
    env.ok(&["up", "w"]);
    let (cmd_file, escapee_file) = (
        env.dir.path().join("cmd.pid"),
        env.dir.path().join("escapee.pid"),
    );
    let script = format!(
        "setsid sh -c 'echo $$ > {e}; exec sleep 300' & echo $$ > {c}; exec sleep 300",
        e = escapee_file.display(),
        c = cmd_file.display()
    );
    let mut exec = std::process::Command::new(binky_bin())
        .args(["exec", "w", "--", "sh", "-c", &script])
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .env_remove("BINKY_WORKTREE_ROOT")
        .spawn()
        .unwrap();
    let pid_in = |f: &std::path::Path| -> u32 {
        wait_until("the script wrote its pids", Duration::from_secs(20), || {
            std::fs::read_to_string(f).is_ok_and(|s| s.trim().parse::<u32>().is_ok())
        });
        std::fs::read_to_string(f).unwrap().trim().parse().unwrap()
    };
    let (cmd, escapee) = (pid_in(&cmd_file), pid_in(&escapee_file));
    wait_until(
        "the grandchild is in a session of its own",
        Duration::from_secs(10),
        || session_of(escapee) == Some(escapee),
    );
    assert!(alive(cmd) && alive(escapee));
    signal(exec.id(), 15);
    let status = exec.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
    wait_until(
        "the command and its setsid grandchild are gone",
        Duration::from_secs(5),
        || !alive(cmd) && !alive(escapee),
    );
    // The world (its daemon, its services) is not the command's: untouched.
    let st = env.status();
    let w = st["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "w");
    assert!(w.is_some_and(|w| w["state"] == "ready"), "{st}");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}
