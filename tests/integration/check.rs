//! `binky check` through the real binary, and the same errors refused at `binky up`.

use std::time::Duration;

use crate::harness::*;

const GOOD: &str = r#"
[project]
name = "chk"
{range}

[services.db]
adapter = "postgres"
admin_url = "${env.PG_ADMIN}"

[services.api]
cmd = "serve --port ${self.port}"
url = true
depends_on = ["db"]
env = { DATABASE_URL = "${db.url}" }
"#;

#[test]
fn check_passes_a_good_file_and_lists_footguns_with_lines_and_exit_1_on_errors() {
    let env = Env::new(GOOD);
    // Without PG_ADMIN in this environment, check says `up` from here would refuse it.
    let out = env.binky(&["check"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("warning: services.db.admin_url: uses ${env.PG_ADMIN}"),
        "{}",
        stdout(&out)
    );
    let out = env.binky_env(
        &["check"],
        &[("PG_ADMIN", "postgres://admin@127.0.0.1/postgres")],
    );
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains(": ok"), "{}", stdout(&out));
    // Footguns: an inline password in admin_url (a warning, as binky 0.1.2 gave), a token
    // written into env (an error), a cmd that ignores its port.
    let bad = GOOD
        .replace(
            "${env.PG_ADMIN}",
            "postgres://postgres:hunter2@127.0.0.1:5432/postgres",
        )
        .replace(
            "DATABASE_URL = \"${db.url}\"",
            "DATABASE_URL = \"${db.url}\", API_TOKEN = \"hunter3-token\"",
        )
        .replace("serve --port ${self.port}", "serve");
    std::fs::write(env.repo.join("bad.toml"), bad.replace("{range}", "")).unwrap();
    let out = env.binky(&["check", "bad.toml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("bad.toml:8: warning: services.db.admin_url"),
        "{text}"
    );
    assert!(
        text.contains("bad.toml:14: error: services.api.env.API_TOKEN"),
        "{text}"
    );
    assert!(text.contains("warning: services.api.cmd"), "{text}");
    assert!(
        !text.contains("hunter2") && !text.contains("hunter3"),
        "the check printed the password: {text}"
    );
    let out = env.binky(&["check", "bad.toml", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["errors"], 1);
    let mut codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    codes.sort_unstable();
    assert_eq!(
        codes,
        vec!["ignores-port", "inline-credential", "inline-credential"]
    );
    // A warning alone does not fail.
    std::fs::write(
        env.repo.join("warn.toml"),
        GOOD.replace("{range}", "")
            .replace("serve --port ${self.port}", "serve"),
    )
    .unwrap();
    let out = env.binky(&["check", "warn.toml"]);
    assert!(out.status.success(), "{}", stdout(&out));
    // No file at all.
    let out = env.binky(&["check", "nosuch.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nosuch.toml"), "{}", stderr(&out));
}

#[test]
fn up_refuses_what_check_calls_an_error_and_writes_nothing() {
    let env = Env::new(&GOOD.replace(
        "env = { DATABASE_URL = \"${db.url}\" }",
        "env = { DATABASE_URL = \"${db.url}\", STRIPE = \"sk_live_0123456789abcdefXYZ\" }",
    ));
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("services.api.env.STRIPE") && err.contains("Stripe"),
        "{err}"
    );
    assert!(!err.contains("sk_live_0123"), "{err}");
    assert!(!env.worktree("w").exists());
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
}

#[test]
fn a_golden_template_whose_key_would_miss_a_new_migration_is_warned_about_until_one_is_found() {
    let config = r#"
[project]
name = "chk"
{range}

[services.db]
adapter = "postgres"
migrate = "npm run db:migrate"
clone_from = "golden"
"#;
    let env = Env::new(config);
    let out = env.binky(&["check"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("warning: services.db.migrate: the golden template's key covers only the text of migrate and seed"),
        "{text}"
    );
    assert!(
        text.contains("fix: list the files the database is built from: clone_key_files"),
        "{text}"
    );
    // `binky up` says it too (it does not refuse; the migrate then fails here: there is no
    // npm script).
    let out = env.binky(&["up", "w"]);
    assert!(
        stderr(&out).contains("covers only the text of migrate and seed"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "w", "--force"]);
    // Once the repository has migrations in a known layout, nothing to say.
    std::fs::create_dir_all(env.repo.join("db/migrations")).unwrap();
    std::fs::write(
        env.repo.join("db/migrations/001_init.js"),
        "exports.up = () => {};\n",
    )
    .unwrap();
    let out = env.binky(&["check"]);
    assert!(stdout(&out).contains(": ok"), "{}", stdout(&out));
    env.assert_nothing_left(&["w"]);
}

#[test]
fn an_unknown_service_in_agents_expose_is_a_warning_and_the_world_runs() {
    let env = Env::new(&format!(
        r#"
[project]
name = "expose"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true

[services.web]
cmd = "{SERVE}"
url = true

[agents]
expose = ["api", "ghost"]
"#
    ));
    let out = env.binky(&["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("unknown service `ghost` exposes nothing"),
        "{said}"
    );
    env.ok(&["up", "w"]);
    let e = env.env_of("w");
    assert!(e.contains_key("API_URL"), "{e:?}");
    assert!(!e.contains_key("WEB_URL"), "web is not exposed: {e:?}");
    env.ok(&["remove", "w"]);
}

/// What binky 0.1.2 ran but binky refused until now runs, with a warning on the key: a
/// project name with spaces and capitals, `${self.port}` in the env of a service that asks
/// for no port, a health table with two probes, a process key on an adapter service, an
/// inline password in `admin_url`.
#[test]
fn configs_binky_0_1_2_ran_run_here_with_warnings_on_their_keys() {
    let env = Env::new(&format!(
        r#"
[project]
name = "My App"
{{range}}

[services.api]
cmd = "exec python3 server.py $SELF_PORT"
env = {{ SELF_PORT = "${{self.port}}" }}
health = {{ tcp = "${{self.port}}", http = "http://127.0.0.1:${{self.port}}/" }}

[services.web]
cmd = "{SERVE}"
url = "web"
depends_on = ["api"]
env = {{ API = "${{api.url}}" }}

[services.cache]
adapter = "nosuchdb"
admin_url = "postgres://postgres:local-dev-pw@127.0.0.1:1/postgres"
url = true
setup = "true"
"#
    ));
    let out = env.binky(&["check"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let text = stdout(&out);
    for (line, key) in [
        (3, "project.name"),
        (8, "services.api.env.SELF_PORT"),
        (9, "services.api.health"),
        (19, "services.cache.admin_url"),
        (20, "services.cache.url"),
        (21, "services.cache.setup"),
    ] {
        assert!(
            text.contains(&format!("binky.toml:{line}: warning: {key}")),
            "{key} at line {line}:\n{text}"
        );
    }
    assert!(!text.contains("local-dev-pw"), "{text}");
    // It runs: `up` is refused nothing; the world is under the slug of its name.
    let out = env.binky(&["up", "w", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("binky calls the project `my-app`"), "{err}");
    wait_until("api and web to be ready", Duration::from_secs(30), || {
        let s = env.services("w");
        ["api", "web"].iter().all(|n| {
            s.iter()
                .any(|x| x["name"] == *n && x["ready"].as_bool() == Some(true))
        })
    });
    let status = env.status();
    assert_eq!(status["worlds"][0]["project"], "my-app", "{status}");
    // api asked for no port but named `${self.port}`: it has one, and serves on it.
    let api = env.port_of("w", "api");
    let seen = served_env(api);
    assert_eq!(seen["SELF_PORT"], api.to_string());
    // web reaches it at its direct address; web itself through the proxy of `my-app`.
    assert_eq!(
        served_env(env.port_of("w", "web"))["API"],
        format!("http://localhost:{api}")
    );
    let page = env.ok(&["curl", "w", "web", "/"]);
    assert!(
        page.contains(&format!(
            "host: web.w.my-app.localhost:{}",
            env.proxy_port()
        )),
        "{page}"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
