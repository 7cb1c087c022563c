//! `${env.NAME}`, with compose's and the shell's defaults: an unset variable never reaches a
//! process as its own text.

use crate::harness::*;

fn config(api_env: &str, extra: &str) -> String {
    format!(
        r#"
[project]
name = "envtok"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
env = {{ {api_env} }}
{extra}
"#
    )
}

#[test]
fn defaults_reach_the_service_as_values_never_as_text() {
    let env = Env::new(&config(
        r#"OPTIONAL_DSN = "${env.OPTIONAL_DSN:-}", MODE = "${env.MODE:-dev}", GIVEN = "${env.GIVEN:-no}""#,
        "",
    ));
    let out = env.binky_env(&["up", "w"], &[("GIVEN", "yes")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served_env(env.port_of("w", "api"));
    assert_eq!(served["OPTIONAL_DSN"], "");
    assert_eq!(served["MODE"], "dev");
    assert_eq!(served["GIVEN"], "yes");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn an_unset_variable_without_a_default_is_refused_naming_it_and_nothing_is_written() {
    for (api_env, var, says) in [
        (
            r#"SOME_DSN = "${env.SOME_DSN}""#,
            "SOME_DSN",
            "SOME_DSN=… binky up",
        ),
        (
            r#"API_KEY = "${env.API_KEY:?ask the team for one}""#,
            "API_KEY",
            "ask the team for one",
        ),
    ] {
        let env = Env::new(&config(api_env, ""));
        // `binky check` names it (a warning: `up` may run in another environment).
        let out = env.binky_env(&["check"], &[]);
        let text = stdout(&out);
        assert!(
            text.contains(&format!("${{env.{var}")) && text.contains("not set here"),
            "{text}"
        );
        let out = env.binky(&["up", "w"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("services.api.env.{var} uses ${{env.{var}"))
                && err.contains(says),
            "{err}"
        );
        assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
        assert!(!env.worktree("w").exists());
        // Set, it runs.
        let out = env.binky_env(&["up", "w"], &[(var, "value-1")]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(served_env(env.port_of("w", "api"))[var], "value-1");
        env.ok(&["remove", "w"]);
        env.assert_nothing_left(&["w"]);
    }
}

#[test]
fn an_admin_url_from_an_unset_variable_says_so() {
    let env = Env::new(
        r#"
[project]
name = "envadmin"
{range}

[services.db]
adapter = "postgres"
admin_url = "${env.DB_ADMIN_URL}"
"#,
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("services.db.admin_url uses ${env.DB_ADMIN_URL}, which is not set"),
        "{err}"
    );
    assert!(!err.contains("not a URL"), "{err}");
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
    // A migrate command reading an unset variable is refused the same way.
    env.write_config(
        "[project]\nname = \"envadmin\"\n{range}\n\n[services.db]\nadapter = \"postgres\"\nmigrate = \"psql -f ${env.SCHEMA_FILE}\"\n",
    );
    env.git(&["commit", "-qam", "migrate from a variable"]);
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("services.db.migrate uses ${env.SCHEMA_FILE}, which is not set"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
}

#[test]
fn a_variable_an_env_file_leaves_unset_stops_the_service_with_its_name() {
    let env = Env::new(&config(
        r#"FROM_FILE = "${env.FROM_FILE}", MISSING = "${env.NOWHERE}""#,
        r#"env_file = [".env.local"]"#,
    ));
    // The env file is committed here so the new worktree has it.
    std::fs::write(env.repo.join(".env.local"), "FROM_FILE=from-the-file\n").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "env file"]);
    let out = env.binky(&["up", "w", "--timeout", "60s"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("${env.NOWHERE}") && err.contains("NOWHERE is not set"),
        "{err}"
    );
    assert!(env.pid_of("w", "api").is_none(), "it started anyway");
    // The file gains it: the next `up` starts the service with both values.
    std::fs::write(
        env.worktree("w").join(".env.local"),
        "FROM_FILE=from-the-file\nNOWHERE=now-here\n",
    )
    .unwrap();
    env.ok(&["up", "w", "--timeout", "60s"]);
    let served = served_env(env.port_of("w", "api"));
    assert_eq!(served["FROM_FILE"], "from-the-file");
    assert_eq!(served["MISSING"], "now-here");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// Settings written by parts (Django's `HOST`/`PORT`/`USER`/`PASSWORD`/`NAME`, a cache's
/// port and database): every part of every slice reaches the process as a value, and the
/// golden build's `migrate` sees its own template's parts (it connects with them).
#[test]
fn adapter_tokens_reach_services_and_golden_builds_as_values_by_parts() {
    let bin =
        crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let psql = bin.join("psql");
    let env = Env::new(&format!(
        r#"
[project]
name = "parts"
{{range}}

[services.db]
adapter = "postgres"
clone_from = "golden"
migrate = "'{psql}' -v ON_ERROR_STOP=1 -qAt \"postgres://${{self.user}}:${{self.password}}@${{self.host}}:${{self.port}}/${{db.name}}\" -c 'create table made_by_parts (x int)'"

[services.cache]
adapter = "redis"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db", "cache"]
env = {{ DB_HOST = "${{db.host}}", DB_PORT = "${{db.port}}", DB_USER = "${{db.user}}", DB_PASSWORD = "${{db.password}}", DB_NAME = "${{db.name}}", DB_DATABASE = "${{db.database}}", DATABASE_URL = "${{db.url}}", CACHE_HOST = "${{cache.host}}", CACHE_PORT = "${{cache.port}}", CACHE_DB = "${{cache.db}}", CACHE_USER = "${{cache.user}}", CACHE_URL = "${{cache.url}}" }}
"#,
        psql = psql.display()
    ));
    env.ok(&["up", "w"]);
    let served = served_env(env.port_of("w", "api"));
    let get = |k: &str| {
        served[k]
            .as_str()
            .unwrap_or_else(|| panic!("{k}: {served}"))
    };
    for (k, v) in served.as_object().unwrap() {
        let v = v.as_str().unwrap_or("");
        assert!(!v.contains("${"), "{k} reached the process as text: {v}");
    }
    // The parts are the URL's, taken apart.
    let url = get("DATABASE_URL");
    let expect = format!(
        "postgresql://{}:{}@{}:{}/{}",
        get("DB_USER"),
        get("DB_PASSWORD"),
        get("DB_HOST"),
        get("DB_PORT"),
        get("DB_NAME")
    );
    assert_eq!(url, expect);
    assert_eq!(get("DB_NAME"), get("DB_DATABASE"));
    assert_eq!(
        get("CACHE_URL"),
        format!(
            "redis://default:{}@{}:{}/{}",
            binky_controllers::url::password_decoded(get("CACHE_URL")).unwrap(),
            get("CACHE_HOST"),
            get("CACHE_PORT"),
            get("CACHE_DB")
        )
    );
    assert_eq!(get("CACHE_USER"), "default");
    // The golden template's migrate connected by parts; the world's copy has its table.
    let rows = crate::pg_server::psql(&bin, url, "select count(*) from made_by_parts").unwrap();
    assert_eq!(rows, vec![vec!["0".to_owned()]]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A token naming an adapter service the world's group does not make can never resolve:
/// the service is held saying so and what does resolve, and never gets the text.
#[test]
fn a_token_of_a_slice_the_group_does_not_make_holds_the_service_naming_it() {
    let env = Env::new(&format!(
        r#"
[project]
name = "grouptok"
{{range}}

[services.cache]
adapter = "redis"

[services.api]
cmd = "{SERVE}"
url = true
env = {{ CACHE_PORT = "${{cache.port}}" }}

[groups]
web = ["api"]
"#
    ));
    let out = env.binky(&["up", "w", "--group", "web"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("env.CACHE_PORT uses ${cache.port}, which resolves to nothing")
            && err.contains("no service `cache` gives tokens"),
        "{err}"
    );
    assert!(env.pid_of("w", "api").is_none(), "started with the text");
    let events = env.ok(&["events", "w"]);
    assert!(events.contains("token_unresolved"), "{events}");
    // `binky exec` never hands the text out either: a command of the whole world goes
    // without the variable and says so; the held service's own environment is refused.
    let out = env.binky(&["exec", "w", "--", "env"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let vars = String::from_utf8_lossy(&out.stdout);
    assert!(!vars.contains("${cache."), "{vars}");
    assert!(!vars.contains("CACHE_PORT="), "{vars}");
    assert!(vars.contains("BINKY_WORKTREE=w"), "{vars}");
    assert!(
        stderr(&out).contains("CACHE_PORT of `api` (${cache.port})"),
        "{}",
        stderr(&out)
    );
    let out = env.binky(&["exec", "w", "-s", "api", "--", "env"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "ran: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = stderr(&out);
    assert!(
        err.contains("`api` of world `w` cannot run here") && err.contains("${cache.port}"),
        "{err}"
    );
    // With the slice made, the same service runs with the value.
    env.ok(&["up", "w"]);
    let out = env.ok(&["exec", "w", "-s", "api", "--", "env"]);
    let port = out
        .lines()
        .find_map(|l| l.strip_prefix("CACHE_PORT="))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(port.parse::<u16>().is_ok(), "{out}");
    let served = served_env(env.port_of("w", "api"));
    assert!(
        served["CACHE_PORT"]
            .as_str()
            .unwrap()
            .parse::<u16>()
            .is_ok(),
        "{served}"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// `${db.nope}`, a name the adapter does not give, is refused by `binky up` (exit 2) naming
/// the token and what the adapter gives, before anything is written: no world, no
/// worktree, no branch, no slice. Written as `${db.port}`, it reaches the process as the
/// slice's port.
#[test]
fn an_adapter_token_that_does_not_exist_is_refused_by_up_naming_it_and_nothing_is_written() {
    let env = Env::new(&config(
        r#"DB_PORT = "${db.port}", DB_NOPE = "${db.nope}""#,
        "depends_on = [\"db\"]\n\n[services.db]\nadapter = \"postgres\"\n",
    ));
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("services.api.env.DB_NOPE") && err.contains("${db.nope}"),
        "{err}"
    );
    assert!(err.contains("${db.port}"), "what the adapter gives: {err}");
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
    assert!(!env.worktree("w").exists());
    let branches = env.git(&["branch", "--list", "w"]);
    assert!(branches.trim().is_empty(), "{branches}");
    let servers = stdout(&env.binky(&["servers"]));
    assert!(servers.starts_with("no managed servers"), "{servers}");
    // The same file with a token the adapter gives runs, and the process has a port.
    env.write_config(&config(
        r#"DB_PORT = "${db.port}""#,
        "depends_on = [\"db\"]\n\n[services.db]\nadapter = \"postgres\"\n",
    ));
    env.git(&["commit", "-qam", "a token postgres gives"]);
    let out = env.binky(&["up", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served_env(env.port_of("w", "api"));
    let port = served["DB_PORT"].as_str().unwrap();
    assert!(port.parse::<u16>().is_ok(), "{port}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
