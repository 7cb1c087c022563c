//! Every command binky runs for a world — a service's `cmd`, its `setup` and health `cmd`,
//! an adapter's `migrate` and `seed`, a hook, `binky exec` (with and without `-s`) and
//! `binky verify` — gets its environment from one path: the same resolved values.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::harness::*;

/// The variables of an `env -0` dump.
fn dump(path: &Path) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.split('\0')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    )
}

#[test]
fn every_command_of_a_world_sees_the_same_resolved_values() {
    let seen = tempfile::tempdir().unwrap();
    let out = seen.path().display().to_string();
    // `[defaults] env` gives every service (the adapter's migrate and seed too) a secret, an
    // adapter's URL and a plain value; the process service adds one of its own.
    let env = Env::new(&format!(
        r#"
[project]
name = "oneway"
{{range}}

[defaults]
env = {{ TOKEN = "${{secret:api_token}}", CACHE = "${{cache.url}}", SHARED = "from-defaults" }}

[hooks]
post_up = "env -0 > {out}/hook.env"

[agents]
verify = ["env -0 > {out}/verify.env"]

[services.cache]
adapter = "redis"
migrate = "env -0 > {out}/migrate.env"
seed = "env -0 > {out}/seed.env"

[services.api]
cmd = "env -0 > {out}/service.env; exec python3 server.py ${{self.port}}"
setup = "env -0 > {out}/setup.env"
url = true
env = {{ OWN = "api-own" }}
health = {{ cmd = "env -0 > {out}/health.env" }}
"#
    ));
    env.ok(&["settings", "secret_command=printf 'sek-%s' {ref}"]);
    env.ok(&["up", "w"]);
    let at = |name: &str| seen.path().join(format!("{name}.env"));
    wait_until("the post_up hook ran", Duration::from_secs(30), || {
        dump(&at("hook")).is_some_and(|e| e.contains_key("OWN"))
    });
    for (name, args) in [
        ("exec", vec!["exec", "w"]),
        ("exec-api", vec!["exec", "w", "-s", "api"]),
        ("exec-cache", vec!["exec", "w", "-s", "cache"]),
    ] {
        let file = at(name).display().to_string();
        let mut all = args.clone();
        all.extend(["--", "sh", "-c", "env -0 > \"$0\"", file.as_str()]);
        env.ok(&all);
    }
    env.ok(&["verify", "w"]);

    let cache_url = env.env_of("w")["CACHE_URL"]
        .as_str()
        .expect("binky env hands out the cache's URL")
        .to_owned();
    assert!(cache_url.starts_with("redis://"), "{cache_url}");
    let port = env.port_of("w", "api").to_string();
    let process_side = [
        "service", "setup", "health", "hook", "exec", "exec-api", "verify",
    ];
    let slice_side = ["migrate", "seed", "exec-cache"];
    for name in process_side.iter().chain(&slice_side) {
        let vars = dump(&at(name)).unwrap_or_else(|| panic!("{name} wrote no environment"));
        for (k, want) in [
            ("TOKEN", "sek-api_token"),
            ("CACHE", cache_url.as_str()),
            ("SHARED", "from-defaults"),
            ("BINKY_WORKTREE", "w"),
            ("BINKY_PROJECT", "oneway"),
        ] {
            assert_eq!(
                vars.get(k).map(String::as_str),
                Some(want),
                "{name} saw another {k}"
            );
        }
        for (k, v) in &vars {
            assert!(!v.contains("${secret:"), "{name} got {k}={v} unresolved");
        }
        if process_side.contains(name) {
            assert_eq!(vars["OWN"], "api-own", "{name} lacks the service's env");
        } else {
            assert_eq!(vars["DATABASE_URL"], cache_url, "{name}: not the slice's");
        }
    }
    // The service's own commands and `exec -s api`: the service's port.
    for name in ["service", "setup", "health", "exec-api"] {
        let vars = dump(&at(name)).unwrap();
        assert_eq!(vars["PORT"], port, "{name} saw another PORT");
    }
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
