//! Tests for `binky.toml` parsing and validation: every key landing in the [`Spec`], every
//! error path (key path, position, message and fix), and the footgun warnings.

use std::collections::BTreeMap;

use binky_controllers::spec::{
    Agents, Health, Hooks, Limits, Probe, Process, Project, Resource, Restart, Stopping, SyncMode,
    UrlSpec,
};

use super::process::PROCESS_KEYS;
use super::resources::RESOURCE_KEYS;
use super::*;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Parse `text` as `binky.toml`, panicking with the rendered errors if it is refused.
fn ok(text: &str) -> Loaded {
    match parse(text, Path::new("binky.toml")) {
        Ok(loaded) => loaded,
        Err(e) => panic!("expected a valid config, got:\n{e}\n--- text ---\n{text}"),
    }
}

/// Parse `text`, expecting it to be refused; returns every error.
fn errors(text: &str) -> Vec<ConfigError> {
    match parse(text, Path::new("binky.toml")) {
        Ok(loaded) => panic!(
            "expected errors, but the config was accepted: {:#?}\n--- text ---\n{text}",
            loaded.spec
        ),
        Err(ConfigErrors(errs)) => {
            assert!(!errs.is_empty(), "ConfigErrors must never be empty");
            errs
        }
    }
}

/// The single error with this key (panics listing all errors if there is not exactly one).
fn error_at<'e>(errs: &'e [ConfigError], key: &str) -> &'e ConfigError {
    let found: Vec<&ConfigError> = errs.iter().filter(|e| e.key == key).collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one error at `{key}`, got: {errs:#?}"
    );
    found[0]
}

/// The only error of `text`, which must be at `key`.
fn sole_error(text: &str, key: &str) -> ConfigError {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected exactly one error, got: {errs:#?}");
    assert_eq!(errs[0].key, key, "{errs:#?}");
    errs[0].clone()
}

/// 1-based (line, column) of the first occurrence of `needle` in `text`.
fn pos_of(text: &str, needle: &str) -> (usize, usize) {
    let idx = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in the test text"));
    let before = &text[..idx];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(idx, |nl| idx - nl - 1) + 1;
    (line, col)
}

/// 1-based line of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    pos_of(text, needle).0
}

/// `[project]` with a valid name, followed by `body`.
fn with_project(body: &str) -> String {
    format!("[project]\nname = \"acme\"\n\n{body}")
}

fn fix(e: &ConfigError) -> &str {
    e.fix
        .as_deref()
        .unwrap_or_else(|| panic!("expected a fix on {e:#?}"))
}

fn process<'s>(spec: &'s Spec, name: &str) -> &'s Process {
    spec.services
        .get(name)
        .unwrap_or_else(|| panic!("no service `{name}`"))
        .process()
        .unwrap_or_else(|| panic!("`{name}` is not a process"))
}

fn resource<'s>(spec: &'s Spec, name: &str) -> &'s Resource {
    spec.services
        .get(name)
        .unwrap_or_else(|| panic!("no service `{name}`"))
        .resource()
        .unwrap_or_else(|| panic!("`{name}` is not a resource"))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn map(items: &[(&str, &str)]) -> BTreeMap<String, String> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// A full config using every key of every table
// ---------------------------------------------------------------------------------------

const FULL: &str = r#"# every key binky.toml knows
[project]
name = "acme"
domain = "acme.test"
port_range = [5000, 5999]
https = true

[defaults]
workdir = "apps"
restart = "always"
limits = { cpu = "1", memory = "512M" }
stop_grace_period = "10s"

[services.web]
cmd = "pnpm dev --port ${self.http}"
setup = "pnpm install"
workdir = "web"
restart = "never"
limits = { cpu = "2", memory = "1G" }
url = { http = "www" }
ports = ["http", "admin"]
health = { http = "http://localhost:${self.http}/health", timeout = "45s" }
depends_on = ["api", "db"]
watch = ["src/**/*.ts", "package.json"]
env = { API_URL = "${api.url}", NODE_ENV = "development" }
env_file = [".env", ".env.local"]
replicas = 2
shared = false
stop_signal = "QUIT"
stop_grace_period = "3s"
stop_after_dependents = true

[services.api]
cmd = "go run ./cmd/server --port ${self.port}"
url = "api"
health = "/healthz"
depends_on = ["db", "store"]
env_file = ".env.api"

[services.worker]
cmd = "bin/worker"
url = true
ports = { metrics = "9100", grpc = 9000 }
health = { tcp = "${self.grpc}", timeout = 10 }
shared = true

[services.cron]
cmd = "bin/cron"
health = { cmd = "test -f /tmp/ready", timeout = "500ms" }

[services.db]
adapter = "postgres"
admin_url = "${env.POSTGRES_ADMIN_URL}"
migrate = "make migrate"
seed = "make seed"
clone_from = "golden"
sync = "cdc"
shared = true
options = { version = "16", extensions = "pgcrypto" }

[services.store]
adapter = "s3"
buckets = ["uploads", "avatars"]
depends_on = ["db"]

[groups]
front = ["web", "api"]
everything = "*"

[agents]
harness = "claude"
expose = ["web", "api"]
verify = ["make test", "make lint"]

[hooks]
post_up = "echo up ${worktree}"
pre_down = "echo down"
"#;

#[test]
fn full_config_is_accepted_with_every_service() {
    let loaded = ok(FULL);
    let names: Vec<&str> = loaded.spec.services.keys().map(String::as_str).collect();
    assert_eq!(names, ["api", "cron", "db", "store", "web", "worker"]);
}

#[test]
fn project_keys_land_in_the_project() {
    let spec = ok(FULL).spec;
    assert_eq!(
        spec.project,
        Project {
            name: "acme".into(),
            domain: Some("acme.test".into()),
            port_range: Some((5000, 5999)),
            https: true,
            copy: Vec::new(),
            copy_modes: Default::default(),
        }
    );
    assert_eq!(spec.project.domain(), "acme.test");
    assert_eq!(spec.project.port_range(), (5000, 5999));
}

#[test]
fn every_process_key_lands_in_the_process() {
    let spec = ok(FULL).spec;
    let web = &spec.services["web"];
    assert_eq!(web.depends_on, strings(&["api", "db"]));
    assert!(!web.shared);
    assert_eq!(
        web.process().unwrap(),
        &Process {
            cmd: "pnpm dev --port ${self.http}".into(),
            setup: Some("pnpm install".into()),
            workdir: "web".into(),
            restart: Restart::Never,
            limits: Some(Limits {
                cpu: Some("2".into()),
                memory: Some("1G".into()),
            }),
            url: Some(UrlSpec::Port {
                label: "http".into(),
                subdomain: "www".into(),
            }),
            ports: Some(strings(&["http", "admin"])),
            health: Some(Health {
                timeout_ms: Some(45_000),
                ..Health::of(Probe::Http("http://localhost:${self.http}/health".into()))
            }),
            watch: strings(&["src/**/*.ts", "package.json"]),
            env: map(&[("API_URL", "${api.url}"), ("NODE_ENV", "development")]),
            env_file: strings(&[".env", ".env.local"]),
            replicas: 2,
            stop: Stopping {
                signal: Some("SIGQUIT".into()),
                grace_ms: Some(3_000),
                after_dependents: true,
            },
        }
    );
}

#[test]
fn stop_keys_in_defaults_reach_every_process_service_that_leaves_them_out() {
    let spec = ok(FULL).spec;
    // `[defaults] stop_grace_period = "10s"`; `cron` sets no stop key.
    assert_eq!(
        process(&spec, "cron").stop,
        Stopping {
            signal: None,
            grace_ms: Some(10_000),
            after_dependents: false,
        }
    );
    assert_eq!(process(&spec, "cron").stop.signal(), "SIGTERM");
    // A service's own keys win.
    assert_eq!(process(&spec, "web").stop.grace_ms, Some(3_000));
    let spec = ok(&with_project(
        "[defaults]\nstop_signal = \"sigint\"\nstop_after_dependents = true\n\n[services.a]\ncmd = \"run\"\n\n[services.b]\ncmd = \"run\"\nstop_signal = \"TERM\"\nstop_after_dependents = false\n",
    ))
    .spec;
    assert_eq!(process(&spec, "a").stop.signal(), "SIGINT");
    assert!(process(&spec, "a").stop.after_dependents);
    assert_eq!(process(&spec, "b").stop.signal(), "SIGTERM");
    assert!(!process(&spec, "b").stop.after_dependents);
}

#[test]
fn a_stop_signal_that_is_no_signal_name_is_an_error_naming_the_form_binky_takes() {
    let text =
        with_project("[services.worker]\ncmd = \"celery worker\"\nstop_signal = \"SIGQUITT\"\n");
    let e = sole_error(&text, "services.worker.stop_signal");
    assert_eq!(e.message, "`SIGQUITT` is not a signal's name");
    assert_eq!(e.position, Some(pos_of(&text, "\"SIGQUITT\"")));
    assert!(
        fix(&e).starts_with(
            "write a signal's name, with or without SIG: stop_signal = \"SIGQUIT\" or \"QUIT\""
        ),
        "{}",
        fix(&e)
    );
    assert!(fix(&e).contains("SIGUSR1"), "{}", fix(&e));
    let e = sole_error(
        &with_project("[services.worker]\ncmd = \"w\"\nstop_signal = 3\n"),
        "services.worker.stop_signal",
    );
    assert!(e.message.contains("signal's number"), "{}", e.message);
    let e = sole_error(
        &with_project("[defaults]\nstop_signal = \"nope\"\n"),
        "defaults.stop_signal",
    );
    assert_eq!(e.message, "`nope` is not a signal's name");
}

#[test]
fn a_stop_grace_period_that_is_no_duration_is_an_error_with_an_example() {
    let e = sole_error(
        &with_project("[services.worker]\ncmd = \"w\"\nstop_grace_period = \"3 parsecs\"\n"),
        "services.worker.stop_grace_period",
    );
    assert!(e.message.contains("3 parsecs"), "{}", e.message);
    assert!(
        fix(&e).starts_with("e.g. stop_grace_period = \"3s\""),
        "{}",
        fix(&e)
    );
    // Seconds as a bare number, as `timeout` takes them.
    let spec = ok(&with_project(
        "[services.w]\ncmd = \"w\"\nstop_grace_period = 2\n",
    ))
    .spec;
    assert_eq!(process(&spec, "w").stop.grace_ms, Some(2_000));
}

#[test]
fn url_true_means_the_service_name_on_its_primary_port() {
    let spec = ok(FULL).spec;
    let worker = process(&spec, "worker");
    assert_eq!(worker.url, Some(UrlSpec::Service));
    assert_eq!(worker.url.as_ref().unwrap().subdomain("worker"), "worker");
    assert!(spec.services["worker"].shared);
}

#[test]
fn url_string_is_a_subdomain_on_the_primary_port() {
    let spec = ok(FULL).spec;
    let api = process(&spec, "api");
    assert_eq!(api.url, Some(UrlSpec::Subdomain("api".into())));
    assert_eq!(api.ports, None);
    assert_eq!(api.port_labels(), vec![String::new()]);
}

#[test]
fn url_table_points_a_subdomain_at_a_port_label() {
    let spec = ok(FULL).spec;
    let url = process(&spec, "web").url.clone().unwrap();
    assert_eq!(url.port_label(), "http");
    assert_eq!(url.subdomain("web"), "www");
}

#[test]
fn url_false_asks_for_no_url() {
    let spec = ok(&with_project("[services.w]\ncmd = \"run\"\nurl = false\n")).spec;
    assert_eq!(process(&spec, "w").url, None);
    assert!(spec.services["w"].port_labels().is_empty());
}

#[test]
fn ports_list_keeps_the_order_written() {
    let spec = ok(FULL).spec;
    // Not alphabetical: "http" was written before "admin".
    assert_eq!(
        spec.services["web"].port_labels(),
        strings(&["http", "admin"])
    );
    assert_eq!(spec.primary_label("web").as_deref(), Some("http"));
}

#[test]
fn ports_table_keeps_the_order_written_and_warns_that_specs_are_unused() {
    let loaded = ok(FULL);
    // Not alphabetical: "metrics" was written before "grpc".
    assert_eq!(
        process(&loaded.spec, "worker").ports,
        Some(strings(&["metrics", "grpc"]))
    );
    assert_eq!(loaded.warnings.len(), 1, "{:#?}", loaded.warnings);
    assert_eq!(loaded.warnings[0].key, "services.worker.ports");
    assert!(
        loaded.warnings[0]
            .message
            .contains("binky allocates every port"),
        "{}",
        loaded.warnings[0].message
    );
}

#[test]
fn health_string_is_an_http_probe_without_timeout() {
    let spec = ok(FULL).spec;
    let health = process(&spec, "api").health.clone().unwrap();
    assert_eq!(
        health,
        Health {
            timeout_ms: None,
            ..Health::of(Probe::Http("/healthz".into()))
        }
    );
    assert_eq!(
        health.timeout(),
        binky_controllers::spec::DEFAULT_HEALTH_TIMEOUT
    );
}

#[test]
fn health_table_takes_a_tcp_probe_and_an_integer_timeout_in_seconds() {
    let spec = ok(FULL).spec;
    assert_eq!(
        process(&spec, "worker").health,
        Some(Health {
            timeout_ms: Some(10_000),
            ..Health::of(Probe::Tcp("${self.grpc}".into()))
        })
    );
}

#[test]
fn health_table_takes_a_cmd_probe_and_a_millisecond_timeout() {
    let spec = ok(FULL).spec;
    assert_eq!(
        process(&spec, "cron").health,
        Some(Health {
            timeout_ms: Some(500),
            ..Health::of(Probe::Cmd("test -f /tmp/ready".into()))
        })
    );
}

#[test]
fn env_file_accepts_a_single_string() {
    let spec = ok(FULL).spec;
    assert_eq!(process(&spec, "api").env_file, strings(&[".env.api"]));
    assert_eq!(spec.services["api"].depends_on, strings(&["db", "store"]));
}

#[test]
fn defaults_workdir_restart_and_limits_are_inherited() {
    let spec = ok(FULL).spec;
    for name in ["api", "worker", "cron"] {
        let p = process(&spec, name);
        assert_eq!(p.workdir, "apps", "{name}");
        assert_eq!(p.restart, Restart::Always, "{name}");
        assert_eq!(
            p.limits,
            Some(Limits {
                cpu: Some("1".into()),
                memory: Some("512M".into()),
            }),
            "{name}"
        );
    }
}

#[test]
fn defaults_env_is_every_services_env_under_its_own_keys() {
    let text = with_project(
        r#"[defaults]
env = { DJANGO_SETTINGS_MODULE = "config.settings.local", DATABASE_URL = "${db.url}", MODE = "shared" }

[services.db]
adapter = "postgres"
migrate = "python manage.py migrate"

[services.web]
cmd = "run ${self.port}"
url = true
env = { MODE = "web" }

[services.worker]
cmd = "work"
"#,
    );
    let spec = ok(&text).spec;
    for name in ["web", "worker"] {
        let env = &process(&spec, name).env;
        assert_eq!(env["DJANGO_SETTINGS_MODULE"], "config.settings.local");
        assert_eq!(env["DATABASE_URL"], "${db.url}");
    }
    assert_eq!(process(&spec, "web").env["MODE"], "web");
    assert_eq!(process(&spec, "worker").env["MODE"], "shared");
    let db = spec.services["db"].resource().unwrap();
    assert_eq!(db.env["DJANGO_SETTINGS_MODULE"], "config.settings.local");
    // A bad value names where it is.
    let e = sole_error(
        &with_project(
            "[defaults]
env = { A = 1 }
[services.w]
cmd = \"x\"\n",
        ),
        "defaults.env.A",
    );
    assert!(e.message.contains("string"), "{}", e.message);
}

#[test]
fn a_service_setting_workdir_restart_and_limits_overrides_the_defaults() {
    let spec = ok(FULL).spec;
    let web = process(&spec, "web");
    assert_eq!(web.workdir, "web");
    assert_eq!(web.restart, Restart::Never);
    assert_eq!(web.limits.as_ref().unwrap().memory.as_deref(), Some("1G"));
}

#[test]
fn omitted_keys_get_their_documented_defaults() {
    let spec = ok(&with_project("[services.w]\ncmd = \"run\"\n")).spec;
    assert_eq!(
        spec.project,
        Project {
            name: "acme".into(),
            domain: None,
            port_range: None,
            https: false,
            copy: Vec::new(),
            copy_modes: Default::default(),
        }
    );
    assert_eq!(spec.project.domain(), "acme.localhost");
    assert_eq!(
        spec.project.port_range(),
        binky_controllers::spec::DEFAULT_PORT_RANGE
    );
    let svc = &spec.services["w"];
    assert!(svc.depends_on.is_empty());
    assert!(!svc.shared);
    assert_eq!(
        svc.process().unwrap(),
        &Process {
            cmd: "run".into(),
            setup: None,
            workdir: ".".into(),
            restart: Restart::OnFailure,
            limits: None,
            url: None,
            ports: None,
            health: None,
            watch: vec![],
            env: BTreeMap::new(),
            env_file: vec![],
            replicas: 1,
            stop: Stopping::default(),
        }
    );
    assert!(spec.groups.is_empty());
    assert_eq!(spec.agents, Agents::default());
    assert_eq!(spec.hooks, Hooks::default());
}

#[test]
fn a_project_without_services_is_valid() {
    let loaded = ok("[project]\nname = \"acme\"\n");
    assert!(loaded.spec.services.is_empty());
    assert!(loaded.warnings.is_empty());
}

#[test]
fn every_resource_key_lands_in_the_resource() {
    let spec = ok(FULL).spec;
    let db = &spec.services["db"];
    assert!(db.shared);
    assert!(db.depends_on.is_empty());
    assert_eq!(
        db.resource().unwrap(),
        &Resource {
            adapter: "postgres".into(),
            admin_url: Some("${env.POSTGRES_ADMIN_URL}".into()),
            migrate: Some("make migrate".into()),
            seed: Some("make seed".into()),
            clone_from: Some("golden".into()),
            clone_key_files: None,
            sync: SyncMode::Cdc,
            buckets: vec![],
            options: map(&[("version", "16"), ("extensions", "pgcrypto")]),
            workdir: "apps".into(),
            env: BTreeMap::new(),
            env_file: vec![],
        }
    );
    assert!(db.port_labels().is_empty());
}

#[test]
fn buckets_and_depends_on_land_on_a_resource() {
    let spec = ok(FULL).spec;
    let store = resource(&spec, "store");
    assert_eq!(store.adapter, "s3");
    assert_eq!(store.buckets, strings(&["uploads", "avatars"]));
    assert_eq!(store.sync, SyncMode::Off);
    assert_eq!(spec.services["store"].depends_on, strings(&["db"]));
}

#[test]
fn every_sync_mode_is_accepted_on_a_shared_resource() {
    for (word, mode) in [
        ("off", SyncMode::Off),
        ("notify", SyncMode::Notify),
        ("cdc", SyncMode::Cdc),
        ("reactive", SyncMode::Reactive),
    ] {
        let text = with_project(&format!(
            "[services.db]\nadapter = \"postgres\"\nshared = true\nsync = \"{word}\"\n"
        ));
        assert_eq!(resource(&ok(&text).spec, "db").sync, mode, "{word}");
    }
}

#[test]
fn sync_off_does_not_need_shared() {
    let text = with_project("[services.db]\nadapter = \"postgres\"\nsync = \"off\"\n");
    assert_eq!(resource(&ok(&text).spec, "db").sync, SyncMode::Off);
}

#[test]
fn group_list_keeps_its_members_in_order() {
    let spec = ok(FULL).spec;
    assert_eq!(spec.groups["front"], strings(&["web", "api"]));
}

#[test]
fn star_group_expands_to_every_service() {
    let spec = ok(FULL).spec;
    assert_eq!(
        spec.groups["everything"],
        strings(&["api", "cron", "db", "store", "web", "worker"])
    );
    assert_eq!(spec.groups.len(), 2);
}

#[test]
fn agents_and_hooks_land_in_the_spec() {
    let spec = ok(FULL).spec;
    assert_eq!(
        spec.agents,
        Agents {
            harness: Some("claude".into()),
            expose: strings(&["web", "api"]),
            verify: strings(&["make test", "make lint"]),
        }
    );
    assert_eq!(
        spec.hooks,
        Hooks {
            post_up: Some("echo up ${worktree}".into()),
            pre_down: Some("echo down".into()),
        }
    );
}

#[test]
fn full_config_dependencies_give_a_start_order() {
    let spec = ok(FULL).spec;
    let order = spec.start_order().unwrap();
    let at = |n: &str| order.iter().position(|s| s == n).unwrap();
    assert!(at("db") < at("store"));
    assert!(at("store") < at("api"));
    assert!(at("api") < at("web"));
}

#[test]
fn the_design_doc_example_is_valid() {
    let text = r#"
[project]
name = "acme"

[services.web]
cmd = "pnpm dev --port ${self.port}"
url = "web"
depends_on = ["api"]
env = { API_URL = "${api.url}" }

[services.api]
cmd = "go run ./cmd/server"
url = "api"
depends_on = ["db"]
env = { DATABASE_URL = "${db.url}" }

[services.db]
adapter = "postgres"
admin_url = "${env.POSTGRES_ADMIN_URL}"
migrate = "make migrate"
seed = "make seed"
clone_from = "golden"
"#;
    let loaded = ok(text);
    assert!(loaded.warnings.is_empty(), "{:#?}", loaded.warnings);
    assert_eq!(loaded.spec.start_order().unwrap(), ["db", "api", "web"]);
}

#[test]
fn project_name_may_use_letters_digits_dash_underscore_and_dot() {
    let spec = ok("[project]\nname = \"Acme_2-web.dev\"\n").spec;
    assert_eq!(spec.project.name, "Acme_2-web.dev");
}

#[test]
fn service_names_may_use_underscore_and_dash() {
    let spec = ok(&with_project(
        "[services.my_svc-2]\ncmd = \"run\"\n[services.b]\ncmd = \"x\"\ndepends_on = [\"my_svc-2\"]\n",
    ))
    .spec;
    assert!(spec.services.contains_key("my_svc-2"));
}

#[test]
fn underscored_and_hex_integers_are_read_as_numbers() {
    let spec = ok("[project]\nname = \"acme\"\nport_range = [4_000, 0x1388]\n").spec;
    assert_eq!(spec.project.port_range, Some((4000, 5000)));
}

#[test]
fn parse_never_reads_the_named_file() {
    // `file` only labels messages: a path that does not exist must not matter.
    let loaded = parse(
        "[project]\nname = \"acme\"\n",
        Path::new("/nonexistent/binky.toml"),
    );
    assert_eq!(loaded.unwrap().spec.project.name, "acme");
}

// ---------------------------------------------------------------------------------------
// load()
// ---------------------------------------------------------------------------------------

#[test]
fn load_reads_and_validates_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, FULL).unwrap();
    let loaded = load(&path).unwrap();
    assert_eq!(loaded.spec.project.name, "acme");
    assert_eq!(loaded.spec.services.len(), 6);
}

#[test]
fn load_names_the_file_in_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, "[project]\nname = \"acme\"\nbogus = 1\n").unwrap();
    let errs = load(&path).unwrap_err();
    assert_eq!(errs.0.len(), 1);
    assert_eq!(errs.0[0].file, path);
    assert!(
        errs.to_string()
            .starts_with(&format!("{}:3:1: project.bogus:", path.display())),
        "{errs}"
    );
}

#[test]
fn load_of_a_missing_file_says_it_cannot_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let errs = load(&path).unwrap_err();
    assert_eq!(errs.0.len(), 1);
    let e = &errs.0[0];
    assert_eq!(e.file, path);
    assert_eq!(e.position, None);
    assert_eq!(e.key, "");
    assert!(e.message.starts_with("cannot read it:"), "{}", e.message);
    assert!(fix(e).contains("binky.toml"), "{e:?}");
}

// ---------------------------------------------------------------------------------------
// Errors: the file as a whole and [project]
// ---------------------------------------------------------------------------------------

#[test]
fn toml_syntax_error_reports_its_line() {
    let text = "[project]\nname = \"acme\"\ndomain = \"unterminated\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &errs[0];
    assert_eq!(e.key, "");
    assert_eq!(e.file, Path::new("binky.toml"));
    assert_eq!(e.position.map(|p| p.0), Some(3));
    assert!(e.message.starts_with("not valid TOML: "), "{}", e.message);
    assert_eq!(fix(e), "fix the syntax at that position");
}

#[test]
fn toml_duplicate_key_is_a_syntax_error_at_the_second_key() {
    let text = with_project("[services.web]\ncmd = \"a\"\ncmd = \"b\"\n");
    let e = sole_error(&text, "");
    assert!(e.message.contains("duplicate key"), "{}", e.message);
    assert_eq!(e.position, Some((line_of(&text, "cmd = \"b\""), 1)));
}

#[test]
fn unclosed_table_header_is_reported_at_the_header() {
    let e = sole_error("[project\nname = \"acme\"\n", "");
    assert_eq!(e.position.map(|p| p.0), Some(1));
    assert!(e.message.contains("not valid TOML"), "{}", e.message);
}

#[test]
fn missing_project_table_is_reported_with_an_example() {
    let text = "# nothing here\n[services.web]\ncmd = \"run\"\n";
    let e = sole_error(text, "project");
    assert_eq!(e.message, "missing [project] table");
    assert_eq!(e.position, Some((1, 1)));
    assert!(fix(&e).contains("[project]"), "{e:?}");
    assert!(fix(&e).contains("name = \"myapp\""), "{e:?}");
}

#[test]
fn empty_file_is_missing_its_project() {
    let e = sole_error("", "project");
    assert_eq!(e.message, "missing [project] table");
}

#[test]
fn missing_project_name_points_at_the_project_table() {
    let text = "\n\n[project]\ndomain = \"acme.test\"\n";
    let e = sole_error(text, "project.name");
    assert_eq!(e.message, "missing project name");
    assert_eq!(e.position, Some((3, 1)));
    assert_eq!(fix(&e), "add name = \"myapp\" under [project]");
}

#[test]
fn empty_project_name_is_refused() {
    let text = "[project]\nname = \"  \"\n";
    let e = sole_error(text, "project.name");
    assert_eq!(e.message, "must not be empty");
    assert_eq!(e.position, Some(pos_of(text, "\"  \"")));
}

#[test]
fn project_name_that_cannot_be_a_hostname_is_used_as_its_slug() {
    // Existing files carry such names: they run, under a name hostnames and databases take.
    let long = "a".repeat(70);
    let cut = "a".repeat(63);
    for (name, slug) in [
        ("My App", "my-app"),
        ("-acme", "acme"),
        ("acme.", "acme"),
        ("Acme Web/API", "acme-web-api"),
        (long.as_str(), cut.as_str()),
    ] {
        let text = format!("[project]\nname = \"{name}\"\n");
        let loaded = ok(&text);
        assert_eq!(loaded.spec.project.name, slug, "{name}");
        let w = &loaded.warnings[0];
        assert_eq!(w.key, "project.name");
        assert_eq!(w.line, Some(2));
        assert!(
            w.message
                .contains(&format!("binky calls the project `{slug}`")),
            "{}",
            w.message
        );
    }
}

#[test]
fn project_name_with_nothing_usable_is_refused() {
    for bad in ["日本", "--", "..."] {
        let text = format!("[project]\nname = \"{bad}\"\n");
        let e = sole_error(&text, "project.name");
        assert_eq!(
            e.message,
            format!(
                "invalid project name `{bad}`: it becomes part of hostnames and database names"
            )
        );
        assert_eq!(e.position, Some((2, 8)), "{bad}");
        assert!(fix(&e).contains("at most 63 characters"), "{e:?}");
    }
}

#[test]
fn project_name_of_63_characters_is_accepted() {
    let name = "a".repeat(63);
    let spec = ok(&format!("[project]\nname = \"{name}\"\n")).spec;
    assert_eq!(spec.project.name, name);
}

#[test]
fn integer_where_a_string_is_expected_says_to_quote_it() {
    let text = "[project]\nname = 42\n";
    let e = sole_error(text, "project.name");
    assert_eq!(e.message, "expected a string, found an integer");
    assert_eq!(fix(&e), "quote it: \"42\"");
    assert_eq!(e.position, Some(pos_of(text, "42")));
}

#[test]
fn boolean_where_a_string_is_expected_says_to_quote_it() {
    let text = with_project("[services.web]\ncmd = \"run\"\nsetup = true\n");
    let e = sole_error(&text, "services.web.setup");
    assert_eq!(e.message, "expected a string, found a boolean");
    assert_eq!(fix(&e), "quote it: \"true\"");
    assert_eq!(e.position, Some(pos_of(&text, "true")));
}

#[test]
fn array_where_a_string_is_expected_names_the_type_found() {
    let text = with_project("[services.web]\ncmd = \"run\"\nworkdir = [\"a\"]\n");
    let e = sole_error(&text, "services.web.workdir");
    assert_eq!(e.message, "expected a string, found an array");
    assert_eq!(e.fix, None);
}

#[test]
fn string_where_a_boolean_is_expected_is_refused() {
    let text = "[project]\nname = \"acme\"\nhttps = \"yes\"\n";
    let e = sole_error(text, "project.https");
    assert_eq!(e.message, "expected true or false, found a string");
    assert_eq!(e.position, Some(pos_of(text, "\"yes\"")));
}

#[test]
fn project_that_is_not_a_table_is_refused() {
    let text = "project = \"acme\"\n";
    let e = sole_error(text, "project");
    assert_eq!(e.message, "expected a table, found a string");
    assert_eq!(fix(&e), "write it as [project] with keys under it");
    assert_eq!(e.position, Some((1, 11)));
}

#[test]
fn unknown_top_level_key_suggests_the_closest_table() {
    let text = with_project("[servics.web]\ncmd = \"run\"\n");
    let e = sole_error(&text, "servics");
    assert_eq!(e.message, "unknown key in the top level");
    assert_eq!(e.position, Some(pos_of(&text, "servics")));
    assert!(
        fix(&e).starts_with("did you mean `services`? (valid keys here: project, defaults, services, groups, agents, hooks)"),
        "{e:?}"
    );
}

#[test]
fn unknown_key_without_a_close_match_says_to_remove_it() {
    let text = "frobnicate = 1\n[project]\nname = \"acme\"\n";
    let e = sole_error(text, "frobnicate");
    assert_eq!(e.position, Some((1, 1)));
    assert_eq!(
        fix(&e),
        "remove it; valid keys here: project, defaults, services, groups, agents, hooks"
    );
}

#[test]
fn unknown_key_in_project_names_the_table() {
    let text = "[project]\nname = \"acme\"\ndomian = \"x\"\n";
    let e = sole_error(text, "project.domian");
    assert_eq!(e.message, "unknown key in [project]");
    assert_eq!(e.position, Some((3, 1)));
    assert!(fix(&e).starts_with("did you mean `domain`?"), "{e:?}");
}

#[test]
fn port_range_low_not_below_high_is_refused() {
    for range in ["[5000, 5000]", "[6000, 5000]"] {
        let text = format!("[project]\nname = \"acme\"\nport_range = {range}\n");
        let e = sole_error(&text, "project.port_range");
        assert_eq!(
            e.message,
            "port_range must be [low, high] with 1 <= low < high <= 65535"
        );
        assert_eq!(e.position, Some((3, 14)), "{range}");
        assert_eq!(fix(&e), "e.g. port_range = [4000, 4999]");
    }
}

#[test]
fn port_range_outside_valid_ports_is_refused() {
    for range in ["[0, 100]", "[4000, 65536]", "[-5, 100]"] {
        let text = format!("[project]\nname = \"acme\"\nport_range = {range}\n");
        let e = sole_error(&text, "project.port_range");
        assert!(e.message.contains("1 <= low < high <= 65535"), "{range}");
    }
}

#[test]
fn port_range_of_the_wrong_length_or_type_is_refused() {
    for range in ["[4000]", "[1, 2, 3]", "[]", "4000", "\"4000-4999\""] {
        let text = format!("[project]\nname = \"acme\"\nport_range = {range}\n");
        let e = sole_error(&text, "project.port_range");
        assert_eq!(e.message, "expected [low, high]", "{range}");
        assert_eq!(e.position, Some((3, 14)), "{range}");
        assert_eq!(fix(&e), "e.g. port_range = [4000, 4999]");
    }
}

#[test]
fn port_range_element_that_is_not_an_integer_is_named_by_index() {
    let text = "[project]\nname = \"acme\"\nport_range = [4000, \"4999\"]\n";
    let e = sole_error(text, "project.port_range[1]");
    assert_eq!(e.message, "expected an integer, found a string");
    assert_eq!(e.position, Some(pos_of(text, "\"4999\"")));
}

#[test]
fn port_range_integer_beyond_i64_is_out_of_range() {
    let text = "[project]\nname = \"acme\"\nport_range = [4000, 0xffffffffffffffff]\n";
    let e = sole_error(text, "project.port_range[1]");
    assert_eq!(e.message, "integer out of range");
}

// ---------------------------------------------------------------------------------------
// Errors: [defaults]
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_restart_policy_in_defaults_is_refused() {
    let text = with_project("[defaults]\nrestart = \"sometimes\"\n");
    let e = sole_error(&text, "defaults.restart");
    assert_eq!(e.message, "unknown restart policy `sometimes`");
    assert_eq!(fix(&e), "use one of: on-failure, always, never");
    assert_eq!(e.position, Some(pos_of(&text, "\"sometimes\"")));
}

#[test]
fn unknown_key_in_defaults_and_limits_is_named_with_its_table() {
    let text = with_project("[defaults]\nworkdri = \"x\"\nlimits = { cpus = \"1\" }\n");
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    let e = error_at(&errs, "defaults.workdri");
    assert_eq!(e.message, "unknown key in [defaults]");
    assert!(fix(e).starts_with("did you mean `workdir`?"), "{e:?}");
    let e = error_at(&errs, "defaults.limits.cpus");
    assert_eq!(e.message, "unknown key in [defaults.limits]");
    assert!(fix(e).starts_with("did you mean `cpu`?"), "{e:?}");
    assert_eq!(e.position, Some(pos_of(&text, "cpus")));
}

#[test]
fn limits_that_is_not_a_table_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nlimits = \"2 cpus\"\n");
    let e = sole_error(&text, "services.web.limits");
    assert_eq!(e.message, "expected a table, found a string");
    assert_eq!(
        fix(&e),
        "write it as [services.web.limits] with keys under it"
    );
}

#[test]
fn a_limit_binky_cannot_read_is_an_error_on_its_key_with_how_to_write_it() {
    let text = with_project(
        "[defaults]\nlimits = { memory = \"lots\" }\n\n[services.web]\ncmd = \"run\"\nlimits = { cpu = \"half\", memory = \"512M\" }\n",
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    let e = error_at(&errs, "defaults.limits.memory");
    assert_eq!(e.message, "`lots` is not a size");
    assert!(fix(e).contains("memory = \"512M\""), "{e:?}");
    assert_eq!(e.position, Some(pos_of(&text, "\"lots\"")));
    let e = error_at(&errs, "services.web.limits.cpu");
    assert_eq!(e.message, "`half` is not a number of cores");
    assert!(fix(e).contains("cpu = \"0.5\""), "{e:?}");
}

#[test]
fn limits_read_as_binky_0_1_2_wrote_them_bare_numbers_too() {
    let loaded = ok(&with_project(
        "[services.a]\ncmd = \"run\"\nlimits = { cpu = \"500m\", memory = \"1Gi\" }\n\n[services.b]\ncmd = \"run\"\nlimits = { cpu = 0.5, memory = 536_870_912 }\n",
    ));
    let read = |n: &str| {
        loaded.spec.services[n]
            .process()
            .unwrap()
            .limits
            .as_ref()
            .unwrap()
            .resolve()
            .unwrap()
    };
    assert_eq!(read("a").cpu_millis, Some(500));
    assert_eq!(read("a").memory, Some(1 << 30));
    assert_eq!(read("b").cpu_millis, Some(500));
    assert_eq!(read("b").memory, Some(512 << 20));
}

// ---------------------------------------------------------------------------------------
// Errors: services
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_key_suggests_the_closest_valid_one() {
    let text = with_project("[services.web]\ncmdd = \"pnpm dev\"\n");
    let errs = errors(&text);
    let e = error_at(&errs, "services.web.cmdd");
    assert_eq!(e.message, "unknown key in [services.web]");
    assert_eq!(e.position, Some(pos_of(&text, "cmdd")));
    assert!(
        fix(e).starts_with("did you mean `cmd`? (valid keys here: cmd, setup,"),
        "{e:?}"
    );
    // Without `cmd` the service is also neither a process nor a resource.
    let e = error_at(&errs, "services.web");
    assert_eq!(e.message, "has neither `cmd` nor `adapter`");
    assert_eq!(errs.len(), 2, "{errs:#?}");
}

#[test]
fn unknown_key_in_an_inline_service_table_is_found_too() {
    let text = with_project("[services]\nweb = { cmd = \"run\", helth = \"/\" }\n");
    let e = sole_error(&text, "services.web.helth");
    assert!(fix(&e).starts_with("did you mean `health`?"), "{e:?}");
    assert_eq!(e.position, Some(pos_of(&text, "helth")));
}

#[test]
fn services_that_is_not_a_table_is_refused() {
    let text = "services = [\"web\"]\n[project]\nname = \"acme\"\n";
    let e = sole_error(text, "services");
    assert_eq!(e.position, Some((1, 12)));
    assert_eq!(e.message, "expected a table, found an array");
    assert_eq!(fix(&e), "write it as [services] with keys under it");
}

#[test]
fn a_service_that_is_not_a_table_is_refused() {
    let text = with_project("[services]\nweb = \"pnpm dev\"\n");
    let e = sole_error(&text, "services.web");
    assert_eq!(e.message, "expected a table, found a string");
    assert_eq!(e.position, Some(pos_of(&text, "\"pnpm dev\"")));
}

#[test]
fn invalid_service_name_is_refused() {
    let text = with_project("[services.\"my.svc\"]\ncmd = \"run\"\n");
    let e = sole_error(&text, "services.my.svc");
    assert_eq!(e.message, "invalid service name `my.svc`");
    assert_eq!(e.position, Some(pos_of(&text, "\"my.svc\"")));
    assert!(fix(&e).contains("letters, digits, `_` and `-`"), "{e:?}");
}

#[test]
fn empty_service_name_is_refused() {
    let text = with_project("[services.\"\"]\ncmd = \"run\"\n");
    let e = sole_error(&text, "services.");
    assert_eq!(e.message, "invalid service name ``");
}

#[test]
fn service_with_both_cmd_and_adapter_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nadapter = \"postgres\"\n");
    let e = sole_error(&text, "services.web");
    assert_eq!(e.message, "has both `cmd` and `adapter`");
    assert_eq!(e.position, Some(pos_of(&text, "[services.web]")));
    assert!(fix(&e).contains("exactly one of the two"), "{e:?}");
}

#[test]
fn service_with_neither_cmd_nor_adapter_is_refused() {
    let text = with_project("[services.web]\nurl = true\n");
    let e = sole_error(&text, "services.web");
    assert_eq!(e.message, "has neither `cmd` nor `adapter`");
    assert_eq!(e.position, Some(pos_of(&text, "[services.web]")));
    assert!(fix(&e).contains("cmd = "), "{e:?}");
    assert!(fix(&e).contains("adapter = \"postgres\""), "{e:?}");
}

#[test]
fn empty_cmd_is_refused() {
    let text = with_project("[services.web]\ncmd = \"\"\n");
    let e = sole_error(&text, "services.web.cmd");
    assert_eq!(e.message, "must not be empty");
    assert_eq!(e.position, Some(pos_of(&text, "\"\"")));
}

#[test]
fn empty_adapter_is_refused() {
    let text = with_project("[services.db]\nadapter = \" \"\n");
    let e = sole_error(&text, "services.db.adapter");
    assert_eq!(e.message, "must not be empty");
}

#[test]
fn resource_only_key_on_a_process_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nmigrate = \"make migrate\"\n");
    let e = sole_error(&text, "services.web.migrate");
    assert_eq!(
        e.message,
        "`migrate` is only valid on an adapter (resource) service"
    );
    assert_eq!(e.position, Some(pos_of(&text, "migrate")));
    assert_eq!(fix(&e), "remove it, or make the service an adapter service");
}

#[test]
fn every_resource_only_key_is_refused_on_a_process() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nadmin_url = \"x\"\nmigrate = \"x\"\nseed = \"x\"\nclone_from = \"x\"\nsync = \"off\"\nbuckets = []\noptions = {}\n",
    );
    let errs = errors(&text);
    let mut keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "services.web.admin_url",
            "services.web.buckets",
            "services.web.clone_from",
            "services.web.migrate",
            "services.web.options",
            "services.web.seed",
            "services.web.sync",
        ]
    );
}

#[test]
fn a_process_only_key_on_a_resource_is_a_warning_and_ignored() {
    // Accepted so existing files run; the warning says it does nothing.
    let text = with_project("[services.db]\nadapter = \"postgres\"\nurl = true\n");
    let loaded = ok(&text);
    assert_eq!(loaded.warnings.len(), 1, "{:#?}", loaded.warnings);
    let w = &loaded.warnings[0];
    assert_eq!(w.key, "services.db.url");
    assert_eq!(w.line, Some(pos_of(&text, "url").0));
    assert!(
        w.message
            .starts_with("`url` does nothing on an adapter service"),
        "{}",
        w.message
    );
    assert!(loaded.spec.services["db"].port_labels().is_empty());
}

#[test]
fn every_process_only_key_on_a_resource_is_said() {
    let text = with_project(
        "[services.db]\nadapter = \"postgres\"\nsetup = \"x\"\nrestart = \"always\"\nlimits = {}\nurl = true\nports = []\nhealth = \"/\"\nwatch = []\nreplicas = 1\n",
    );
    let loaded = ok(&text);
    let mut keys: Vec<&str> = loaded.warnings.iter().map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "services.db.health",
            "services.db.limits",
            "services.db.ports",
            "services.db.replicas",
            "services.db.restart",
            "services.db.setup",
            "services.db.url",
            "services.db.watch",
        ]
    );
}

#[test]
fn unknown_restart_policy_on_a_service_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nrestart = \"on_failure\"\n");
    let e = sole_error(&text, "services.web.restart");
    assert_eq!(e.message, "unknown restart policy `on_failure`");
    assert_eq!(fix(&e), "use one of: on-failure, always, never");
    assert_eq!(e.position, Some(pos_of(&text, "\"on_failure\"")));
}

#[test]
fn every_restart_policy_is_accepted() {
    for (word, policy) in [
        ("on-failure", Restart::OnFailure),
        ("always", Restart::Always),
        ("never", Restart::Never),
    ] {
        let text = with_project(&format!(
            "[services.web]\ncmd = \"run\"\nrestart = \"{word}\"\n"
        ));
        assert_eq!(process(&ok(&text).spec, "web").restart, policy, "{word}");
        assert_eq!(policy.as_str(), word);
    }
}

#[test]
fn replicas_zero_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nreplicas = 0\n");
    let e = sole_error(&text, "services.web.replicas");
    assert_eq!(e.message, "replicas must be between 1 and 1024");
    assert_eq!(e.position, Some(pos_of(&text, "0\n")));
}

#[test]
fn negative_replicas_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nreplicas = -3\n");
    let e = sole_error(&text, "services.web.replicas");
    assert_eq!(e.message, "replicas must be between 1 and 1024");
}

#[test]
fn replicas_that_is_not_an_integer_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nreplicas = \"2\"\n");
    let e = sole_error(&text, "services.web.replicas");
    assert_eq!(e.message, "expected an integer, found a string");
}

#[test]
fn shared_that_is_not_a_boolean_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nshared = 1\n");
    let e = sole_error(&text, "services.web.shared");
    assert_eq!(e.message, "expected true or false, found an integer");
}

#[test]
fn list_key_given_a_scalar_says_how_to_write_a_list() {
    let text = with_project("[services.web]\ncmd = \"run\"\nwatch = \"src/**\"\n");
    let e = sole_error(&text, "services.web.watch");
    assert_eq!(e.message, "expected a list of strings, found a string");
    assert_eq!(fix(&e), "write it as watch = [\"…\"]");
    assert_eq!(e.position, Some(pos_of(&text, "\"src/**\"")));
}

#[test]
fn list_item_of_the_wrong_type_is_named_by_index() {
    let text = with_project("[services.web]\ncmd = \"run\"\nenv_file = [\".env\", 3]\n");
    let e = sole_error(&text, "services.web.env_file[1]");
    assert_eq!(e.message, "expected a string, found an integer");
    assert_eq!(fix(&e), "quote it: \"3\"");
}

#[test]
fn env_value_that_is_not_a_string_says_to_quote_it() {
    let text = with_project("[services.web]\ncmd = \"run\"\nenv = { PORT = 8080 }\n");
    let e = sole_error(&text, "services.web.env.PORT");
    assert_eq!(e.message, "expected a string, found an integer");
    assert_eq!(fix(&e), "quote it: \"8080\"");
    assert_eq!(e.position, Some(pos_of(&text, "8080")));
}

#[test]
fn env_variable_name_with_equals_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nenv = { \"A=B\" = \"x\" }\n");
    let e = sole_error(&text, "services.web.env");
    assert_eq!(e.message, "invalid environment variable name `A=B`");
}

#[test]
fn options_values_must_be_strings() {
    let text = with_project("[services.db]\nadapter = \"postgres\"\noptions = { version = 16 }\n");
    let e = sole_error(&text, "services.db.options.version");
    assert_eq!(fix(&e), "quote it: \"16\"");
}

// ---------------------------------------------------------------------------------------
// Errors: url, ports, health
// ---------------------------------------------------------------------------------------

#[test]
fn url_table_pointing_at_a_label_not_in_ports_is_refused() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nports = [\"http\"]\nurl = { grpc = \"api\" }\n",
    );
    let e = sole_error(&text, "services.web.url");
    assert_eq!(
        e.message,
        "url points at port label `grpc`, which is not in `ports`"
    );
    assert_eq!(fix(&e), "add \"grpc\" to ports");
    assert_eq!(e.position, Some(pos_of(&text, "{ grpc")));
}

#[test]
fn url_table_without_ports_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nurl = { http = \"www\" }\n");
    let e = sole_error(&text, "services.web.url");
    assert!(e.message.contains("`http`"), "{}", e.message);
}

#[test]
fn url_table_needs_exactly_one_entry() {
    for url in ["{}", "{ http = \"a\", admin = \"b\" }"] {
        let text = with_project(&format!(
            "[services.web]\ncmd = \"run\"\nports = [\"http\", \"admin\"]\nurl = {url}\n"
        ));
        let e = sole_error(&text, "services.web.url");
        assert!(
            e.message.starts_with("expected true, a subdomain string or { port_label = \"subdomain\" }, found a table"),
            "{url}: {}",
            e.message
        );
        assert_eq!(fix(&e), "e.g. url = \"web\"");
    }
}

#[test]
fn url_of_the_wrong_type_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nurl = 80\n");
    let e = sole_error(&text, "services.web.url");
    assert!(e.message.ends_with("found an integer"), "{}", e.message);
    assert_eq!(e.position, Some(pos_of(&text, "80")));
}

#[test]
fn url_string_that_is_not_a_hostname_label_is_refused() {
    for label in ["my web", "-web", "web-", "", "a.b"] {
        let text = with_project(&format!(
            "[services.web]\ncmd = \"run\"\nurl = \"{label}\"\n"
        ));
        let e = sole_error(&text, "services.web.url");
        assert_eq!(
            e.message,
            format!("`{label}` is not a valid hostname label")
        );
        assert!(fix(&e).contains("url = \"web\""), "{e:?}");
    }
}

#[test]
fn duplicate_port_label_is_reported_at_the_second_one() {
    let text = with_project("[services.web]\ncmd = \"run\"\nports = [\"http\", \"http\"]\n");
    let e = sole_error(&text, "services.web.ports");
    assert_eq!(e.message, "port label `http` appears twice");
    let (line, first_col) = pos_of(&text, "\"http\"");
    assert_eq!(e.position, Some((line, first_col + "\"http\", ".len())));
}

#[test]
fn reserved_port_labels_are_refused() {
    for label in ["port", "url"] {
        let text = with_project(&format!(
            "[services.web]\ncmd = \"run\"\nports = [\"http\", \"{label}\"]\n"
        ));
        let e = sole_error(&text, "services.web.ports");
        assert_eq!(e.message, format!("invalid port label `{label}`"));
        assert!(fix(&e).contains("`port` and `url` are reserved"), "{e:?}");
        assert_eq!(e.position, Some(pos_of(&text, &format!("\"{label}\""))));
    }
}

#[test]
fn port_label_with_invalid_characters_is_refused() {
    for label in ["my port", "", "a.b"] {
        let text = with_project(&format!(
            "[services.web]\ncmd = \"run\"\nports = [\"{label}\"]\n"
        ));
        let e = sole_error(&text, "services.web.ports");
        assert_eq!(e.message, format!("invalid port label `{label}`"));
    }
}

#[test]
fn ports_of_the_wrong_type_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nports = \"http\"\n");
    let e = sole_error(&text, "services.web.ports");
    assert_eq!(e.message, "expected a list of port labels, found a string");
    assert_eq!(fix(&e), "e.g. ports = [\"http\", \"grpc\"]");
}

#[test]
fn ports_table_spec_of_the_wrong_type_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nports = { http = true }\n");
    let e = sole_error(&text, "services.web.ports.http");
    assert_eq!(e.message, "expected a string or integer, found a boolean");
}

#[test]
fn health_with_two_probes_checks_the_first_as_binky_0_1_2_did() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nurl = true\nhealth = { tcp = \"${self.port}\", http = \"/\" }\n",
    );
    let loaded = ok(&text);
    // http, then tcp, then cmd: binky 0.1.2's order, whatever the file's.
    let h = process(&loaded.spec, "web").health.as_ref().unwrap();
    assert_eq!(h.probe, Probe::Http("/".into()));
    assert_eq!(loaded.warnings.len(), 1, "{:#?}", loaded.warnings);
    let w = &loaded.warnings[0];
    assert_eq!(w.key, "services.web.health");
    assert_eq!(w.line, Some(pos_of(&text, "{ tcp").0));
    assert_eq!(
        w.message,
        "has http and tcp: binky checks only `http` (the first of http, tcp, cmd); keep one"
    );
}

#[test]
fn health_as_a_subtable_with_two_probes_points_at_its_header() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\n\n[services.web.health]\ncmd = \"true\"\ntcp = \"1\"\n",
    );
    let loaded = ok(&text);
    let w = &loaded.warnings[0];
    assert!(w.message.starts_with("has tcp and cmd"), "{}", w.message);
    assert_eq!(w.line, Some(pos_of(&text, "[services.web.health]").0));
    let h = process(&loaded.spec, "web").health.as_ref().unwrap();
    assert_eq!(h.probe, Probe::Tcp("1".into()));
}

#[test]
fn health_with_no_probe_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nhealth = { timeout = \"5s\" }\n");
    let e = sole_error(&text, "services.web.health");
    assert_eq!(e.message, "health needs one of http, tcp, cmd");
}

#[test]
fn bad_health_timeout_is_refused_with_an_example() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nhealth = { cmd = \"true\", timeout = \"soon\" }\n",
    );
    let e = sole_error(&text, "services.web.health.timeout");
    assert_eq!(e.message, "`soon` is not a duration");
    assert_eq!(fix(&e), "e.g. timeout = \"30s\" (ms, s, m, h)");
    assert_eq!(e.position, Some(pos_of(&text, "\"soon\"")));
}

#[test]
fn health_timeout_with_an_unknown_unit_is_refused() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nhealth = { cmd = \"true\", timeout = \"3y\" }\n",
    );
    let e = sole_error(&text, "services.web.health.timeout");
    assert_eq!(e.message, "unknown unit `y` in `3y`");
}

#[test]
fn health_timeout_of_the_wrong_type_is_refused() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nhealth = { cmd = \"true\", timeout = true }\n",
    );
    let e = sole_error(&text, "services.web.health.timeout");
    assert_eq!(e.message, "expected a string, found a boolean");
}

#[test]
fn unknown_key_in_health_suggests_the_closest() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\nhealth = { cmd = \"true\", timeuot = \"5s\" }\n",
    );
    let e = sole_error(&text, "services.web.health.timeuot");
    assert_eq!(e.message, "unknown key in [services.web.health]");
    assert!(fix(&e).starts_with("did you mean `timeout`?"), "{e:?}");
}

#[test]
fn health_of_the_wrong_type_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\nhealth = 200\n");
    let e = sole_error(&text, "services.web.health");
    assert_eq!(
        e.message,
        "expected a URL string or a table, found an integer"
    );
}

// ---------------------------------------------------------------------------------------
// Errors: resources
// ---------------------------------------------------------------------------------------

#[test]
fn sync_without_shared_is_refused() {
    let text = with_project("[services.db]\nadapter = \"postgres\"\nsync = \"notify\"\n");
    let e = sole_error(&text, "services.db.sync");
    assert_eq!(e.message, "`sync` requires `shared = true`");
    assert_eq!(fix(&e), "add shared = true, or remove sync");
    assert_eq!(e.position, Some(pos_of(&text, "\"notify\"")));
}

#[test]
fn sync_with_shared_false_is_refused() {
    let text = with_project(
        "[services.db]\nadapter = \"postgres\"\nshared = false\nsync = \"reactive\"\n",
    );
    sole_error(&text, "services.db.sync");
}

#[test]
fn unknown_sync_mode_is_refused() {
    let text =
        with_project("[services.db]\nadapter = \"postgres\"\nshared = true\nsync = \"mirror\"\n");
    let e = sole_error(&text, "services.db.sync");
    assert_eq!(e.message, "unknown sync mode `mirror`");
    assert_eq!(fix(&e), "use one of: off, notify, cdc, reactive");
}

// ---------------------------------------------------------------------------------------
// Errors: cross references
// ---------------------------------------------------------------------------------------

#[test]
fn depends_on_an_unknown_service_is_refused_listing_the_services() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\ndepends_on = [\"api\", \"ghost\"]\n[services.api]\ncmd = \"run\"\n",
    );
    let e = sole_error(&text, "services.web.depends_on");
    assert_eq!(e.message, "unknown service `ghost`");
    assert_eq!(fix(&e), "services: api, web");
    assert_eq!(e.position, Some(pos_of(&text, "\"ghost\"")));
}

#[test]
fn depends_on_itself_is_refused() {
    let text = with_project("[services.web]\ncmd = \"run\"\ndepends_on = [\"web\"]\n");
    let e = sole_error(&text, "services.web.depends_on");
    assert_eq!(e.message, "`web` depends on itself");
    assert_eq!(fix(&e), "remove it from its own depends_on");
    let (line, col) = pos_of(&text, "[\"web\"]");
    assert_eq!(e.position, Some((line, col + 1)));
}

#[test]
fn depends_on_that_is_not_a_list_is_refused() {
    let text = with_project(
        "[services.web]\ncmd = \"run\"\ndepends_on = \"api\"\n[services.api]\ncmd = \"run\"\n",
    );
    let e = sole_error(&text, "services.web.depends_on");
    assert_eq!(e.message, "expected a list of strings, found a string");
    assert_eq!(fix(&e), "write it as depends_on = [\"…\"]");
}

#[test]
fn dependency_cycle_of_two_is_named() {
    let text = with_project(
        "[services.a]\ncmd = \"run\"\ndepends_on = [\"b\"]\n[services.b]\ncmd = \"run\"\ndepends_on = [\"a\"]\n",
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &errs[0];
    let (first, line) = match e.message.as_str() {
        "dependency cycle: a -> b -> a" => ("a", line_of(&text, "[\"b\"]")),
        "dependency cycle: b -> a -> b" => ("b", line_of(&text, "[\"a\"]")),
        other => panic!("unexpected message: {other}"),
    };
    assert_eq!(e.key, format!("services.{first}.depends_on"));
    assert_eq!(e.position.map(|p| p.0), Some(line));
    assert_eq!(fix(e), "remove one of these depends_on entries");
}

#[test]
fn dependency_cycle_of_three_is_named_end_to_end() {
    let text = with_project(
        "[services.a]\ncmd = \"run\"\ndepends_on = [\"b\"]\n\
         [services.b]\ncmd = \"run\"\ndepends_on = [\"c\"]\n\
         [services.c]\ncmd = \"run\"\ndepends_on = [\"a\"]\n\
         [services.d]\ncmd = \"run\"\n",
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &errs[0];
    let rotations = [
        ("a", "dependency cycle: a -> b -> c -> a"),
        ("b", "dependency cycle: b -> c -> a -> b"),
        ("c", "dependency cycle: c -> a -> b -> c"),
    ];
    let (first, _) = rotations
        .iter()
        .find(|(_, m)| *m == e.message)
        .unwrap_or_else(|| panic!("unexpected message: {}", e.message));
    assert_eq!(e.key, format!("services.{first}.depends_on"));
}

#[test]
fn group_naming_an_unknown_service_is_refused() {
    let text =
        with_project("[services.web]\ncmd = \"run\"\n\n[groups]\nfront = [\"web\", \"ghost\"]\n");
    let e = sole_error(&text, "groups.front");
    assert_eq!(e.message, "unknown service `ghost`");
    assert_eq!(fix(&e), "services: web");
    assert_eq!(e.position, Some(pos_of(&text, "\"ghost\"")));
}

#[test]
fn group_of_the_wrong_type_is_refused() {
    for (value, found) in [("5", "an integer"), ("\"web\"", "a string")] {
        let text = with_project(&format!(
            "[services.web]\ncmd = \"run\"\n\n[groups]\nfront = {value}\n"
        ));
        let e = sole_error(&text, "groups.front");
        assert_eq!(
            e.message,
            format!("expected a list of services or \"*\", found {found}")
        );
        assert_eq!(fix(&e), "front = [\"web\", \"api\"] or front = \"*\"");
        let (line, col) = pos_of(&text, "front =");
        assert_eq!(e.position, Some((line, col + "front = ".len())));
    }
}

#[test]
fn groups_that_is_not_a_table_is_refused() {
    let text = "groups = [\"web\"]\n[project]\nname = \"acme\"\n";
    let e = sole_error(text, "groups");
    assert_eq!(e.position, Some((1, 10)));
    assert_eq!(e.message, "expected a table, found an array");
}

#[test]
fn agents_exposing_an_unknown_service_is_a_warning_as_binky_012_runs_it() {
    let text =
        with_project("[services.web]\ncmd = \"run\"\n\n[agents]\nexpose = [\"web\", \"ghost\"]\n");
    let loaded = ok(&text);
    let w: Vec<_> = loaded
        .warnings
        .iter()
        .filter(|w| w.key == "agents.expose")
        .collect();
    assert_eq!(w.len(), 1, "{:#?}", loaded.warnings);
    assert_eq!(
        w[0].message,
        "unknown service `ghost` exposes nothing; services: web"
    );
    // The known one is still exposed; the unknown one matches nothing.
    assert_eq!(loaded.spec.agents.expose, ["web", "ghost"]);
}

#[test]
fn unknown_key_in_agents_and_hooks_suggests_the_closest() {
    let text = with_project("[agents]\nharnes = \"x\"\n[hooks]\npost_upp = \"x\"\n");
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    let e = error_at(&errs, "agents.harnes");
    assert_eq!(e.message, "unknown key in [agents]");
    assert!(fix(e).starts_with("did you mean `harness`?"), "{e:?}");
    let e = error_at(&errs, "hooks.post_upp");
    assert_eq!(e.message, "unknown key in [hooks]");
    assert!(fix(e).starts_with("did you mean `post_up`?"), "{e:?}");
    assert_eq!(e.position, Some(pos_of(&text, "post_upp")));
}

#[test]
fn hook_that_is_not_a_string_is_refused() {
    let text = with_project("[hooks]\npre_down = [\"a\", \"b\"]\n");
    let e = sole_error(&text, "hooks.pre_down");
    assert_eq!(e.message, "expected a string, found an array");
}

// ---------------------------------------------------------------------------------------
// Several errors at once, and how they render
// ---------------------------------------------------------------------------------------

const MANY_ERRORS: &str = r#"[project]
name = "acme"
colour = "blue"

[services.web]
cmd = "run"
restart = "sometimes"
migrate = "make migrate"

[services.db]
adapter = "postgres"
urll = true

[groups]
front = ["ghost"]
"#;

#[test]
fn every_error_in_a_file_is_reported_at_once() {
    let errs = errors(MANY_ERRORS);
    let mut keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "groups.front",
            "project.colour",
            "services.db.urll",
            "services.web.migrate",
            "services.web.restart",
        ]
    );
    let line = |key: &str| error_at(&errs, key).position.map(|p| p.0);
    assert_eq!(line("project.colour"), Some(3));
    assert_eq!(line("services.web.restart"), Some(7));
    assert_eq!(line("services.web.migrate"), Some(8));
    assert_eq!(line("services.db.urll"), Some(12));
    assert_eq!(line("groups.front"), Some(15));
    for e in &errs {
        assert_eq!(e.file, Path::new("binky.toml"));
    }
}

#[test]
fn several_errors_render_with_a_count_and_one_entry_each() {
    let rendered = ConfigErrors(errors(MANY_ERRORS)).to_string();
    assert!(
        rendered.starts_with("5 problems in binky.toml:\n"),
        "{rendered}"
    );
    assert!(
        rendered.contains(
            "binky.toml:7:11: services.web.restart: unknown restart policy `sometimes`\n  fix: use one of: on-failure, always, never"
        ),
        "{rendered}"
    );
    assert!(
        rendered.contains(
            "binky.toml:15:10: groups.front: unknown service `ghost`\n  fix: services: db, web"
        ),
        "{rendered}"
    );
    assert!(
        rendered.contains(
            "binky.toml:3:1: project.colour: unknown key in [project]\n  fix: remove it;"
        ),
        "{rendered}"
    );
    // One entry per error, each starting on its own line with file:line:col.
    let entries = rendered
        .lines()
        .filter(|l| l.starts_with("binky.toml:"))
        .count();
    assert_eq!(entries, 5, "{rendered}");
}

#[test]
fn a_single_error_renders_as_file_line_col_key_message_and_fix() {
    let text = with_project("[services.web]\ncmdd = \"run\"\ncmd = \"run\"\n");
    let errs = ConfigErrors(errors(&text));
    assert_eq!(errs.0.len(), 1);
    let (line, col) = pos_of(&text, "cmdd");
    assert_eq!(
        errs.to_string(),
        format!(
            "binky.toml:{line}:{col}: services.web.cmdd: unknown key in [services.web]\n  fix: did you mean `cmd`? (valid keys here: {})",
            PROCESS_KEYS
                .iter()
                .chain(RESOURCE_KEYS)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
}

#[test]
fn an_error_without_position_key_or_fix_renders_only_what_it_has() {
    let e = ConfigError {
        file: PathBuf::from("/x/binky.toml"),
        position: None,
        key: String::new(),
        message: "invalid".into(),
        fix: None,
    };
    assert_eq!(e.to_string(), "/x/binky.toml: invalid");
    assert_eq!(ConfigErrors(vec![e]).to_string(), "/x/binky.toml: invalid");
}

#[test]
fn a_syntax_error_renders_without_a_key() {
    let errs = ConfigErrors(errors("[project]\nname = = \"acme\"\n"));
    let rendered = errs.to_string();
    assert!(rendered.starts_with("binky.toml:2:"), "{rendered}");
    assert!(rendered.contains(": not valid TOML: "), "{rendered}");
    assert!(
        rendered.ends_with("\n  fix: fix the syntax at that position"),
        "{rendered}"
    );
}

// ---------------------------------------------------------------------------------------
// Warnings
// ---------------------------------------------------------------------------------------

#[test]
fn self_port_without_ports_or_url_gets_a_port_and_warns() {
    let loaded = ok(&with_project(
        "[services.worker]\ncmd = \"run --port ${self.port}\"\n",
    ));
    assert_eq!(loaded.warnings.len(), 1, "{:#?}", loaded.warnings);
    let w = &loaded.warnings[0];
    assert_eq!(w.key, "services.worker.cmd");
    assert_eq!(w.line, Some(5));
    assert!(
        w.message.starts_with(
            "uses ${self.…} but `worker` declares neither `ports` nor `url`: binky gives it a port of its own"
        ),
        "{}",
        w.message
    );
    assert!(w.message.contains("url = true"), "{}", w.message);
    assert_eq!(process(&loaded.spec, "worker").port_labels(), vec![""]);
}

#[test]
fn self_token_in_env_or_health_without_a_port_is_reported_where_it_is() {
    for (extra, key) in [
        (
            "env = { PORT = \"${self.port}\" }",
            "services.worker.env.PORT",
        ),
        (
            "health = { tcp = \"${self.grpc}\" }",
            "services.worker.health",
        ),
        (
            "[services.worker.env]\nA = \"1\"\nPORT = \"${self.port}\"",
            "services.worker.env.PORT",
        ),
    ] {
        let text = with_project(&format!("[services.worker]\ncmd = \"run\"\n{extra}\n"));
        let loaded = ok(&text);
        assert_eq!(loaded.warnings.len(), 1, "{extra}: {:#?}", loaded.warnings);
        let w = &loaded.warnings[0];
        assert_eq!(w.key, key);
        // The line of the key itself, not of `cmd`.
        let at = if extra.starts_with("[services") {
            "PORT"
        } else {
            extra
        };
        assert_eq!(w.line, Some(pos_of(&text, at).0), "{extra}");
    }
}

#[test]
fn self_port_with_a_url_or_ports_does_not_warn() {
    for extra in ["url = true", "ports = [\"http\"]"] {
        let loaded = ok(&with_project(&format!(
            "[services.web]\ncmd = \"run --port ${{self.port}}\"\n{extra}\n"
        )));
        assert!(
            loaded.warnings.is_empty(),
            "{extra}: {:#?}",
            loaded.warnings
        );
    }
}

#[test]
fn a_worker_without_self_tokens_does_not_warn() {
    let loaded = ok(&with_project(
        "[services.worker]\ncmd = \"run --db ${db.url}\"\n",
    ));
    assert!(loaded.warnings.is_empty(), "{:#?}", loaded.warnings);
}

#[test]
fn inline_password_in_admin_url_warns() {
    let loaded = ok(&with_project(
        "[services.db]\nadapter = \"postgres\"\nadmin_url = \"postgres://admin:hunter2@localhost:5432/postgres\"\n",
    ));
    assert_eq!(loaded.warnings.len(), 1, "{:#?}", loaded.warnings);
    let w = &loaded.warnings[0];
    assert_eq!(w.key, "services.db.admin_url");
    assert!(w.message.contains("inline password"), "{}", w.message);
    assert!(w.message.contains("${env.NAME}"), "{}", w.message);
}

#[test]
fn env_token_admin_url_does_not_warn() {
    let loaded = ok(&with_project(
        "[services.db]\nadapter = \"postgres\"\nadmin_url = \"${env.POSTGRES_ADMIN_URL}\"\n",
    ));
    assert!(loaded.warnings.is_empty(), "{:#?}", loaded.warnings);
}

#[test]
fn admin_url_whose_credentials_are_env_tokens_does_not_warn() {
    let loaded = ok(&with_project(
        "[services.db]\nadapter = \"postgres\"\nadmin_url = \"postgres://${env.PGUSER}:${env.PGPASSWORD}@localhost:5432/postgres\"\n",
    ));
    assert!(loaded.warnings.is_empty(), "{:#?}", loaded.warnings);
}

#[test]
fn admin_url_with_a_user_but_no_password_does_not_warn() {
    for url in [
        "postgres://admin@localhost:5432/postgres",
        "postgres://admin:@localhost/postgres",
        "postgres://localhost/postgres?user=a:b",
    ] {
        let loaded = ok(&with_project(&format!(
            "[services.db]\nadapter = \"postgres\"\nadmin_url = \"{url}\"\n"
        )));
        assert!(loaded.warnings.is_empty(), "{url}: {:#?}", loaded.warnings);
    }
}

#[test]
fn warnings_are_not_returned_when_the_file_has_errors() {
    // The footgun is there, but an error wins: the result is Err with only the error.
    let text = with_project("[services.worker]\ncmd = \"run ${self.port}\"\nrestart = \"x\"\n");
    sole_error(&text, "services.worker.restart");
}

// ---------------------------------------------------------------------------------------
// Regressions: bugs found in review, each kept as a test.
// ---------------------------------------------------------------------------------------

#[test]
fn a_service_with_its_own_error_is_not_also_an_unknown_service() {
    let text = with_project(
        "[services.web]\ncmd = \"\"\n\n[services.api]\ncmd = \"y\"\ndepends_on = [\"web\"]\n\n[groups]\ng = [\"web\"]\n\n[agents]\nexpose = [\"web\"]\n",
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].key, "services.web.cmd");
}

#[test]
fn every_error_of_a_service_is_reported_not_just_the_first() {
    let text = with_project("[services.web]\ncmd = \"\"\nrestart = \"sometimes\"\nurl = { http = 5 }\nports = [\"port\"]\n");
    let errs = errors(&text);
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    for k in [
        "services.web.cmd",
        "services.web.restart",
        "services.web.url.http",
        "services.web.ports",
    ] {
        assert!(keys.contains(&k), "{k} missing: {keys:?}");
    }
}

#[test]
fn a_resources_workdir_env_and_env_file_are_checked_and_kept() {
    let errs = errors(&with_project(
        "[services.db]\nadapter = \"pg\"\nworkdir = 5\nenv = 3\nenv_file = true\n",
    ));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    let spec = ok(&with_project("[services.db]\nadapter = \"pg\"\nworkdir = \"db\"\nenv = { A = \"1\" }\nenv_file = \".env\"\n")).spec;
    let r = resource(&spec, "db");
    assert_eq!(r.workdir, "db");
    assert_eq!(r.env, map(&[("A", "1")]));
    assert_eq!(r.env_file, strings(&[".env"]));
}

#[test]
fn an_inline_password_next_to_a_token_still_warns() {
    let loaded = ok(&with_project("[services.db]\nadapter = \"pg\"\nadmin_url = \"postgres://admin:hunter2@${env.PGHOST}/x\"\n"));
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    let clean = ok(&with_project(
        "[services.db]\nadapter = \"pg\"\nadmin_url = \"postgres://${env.U}:${env.P}@h/x\"\n",
    ));
    assert!(clean.warnings.is_empty(), "{:?}", clean.warnings);
}

#[test]
fn a_url_tables_subdomain_must_be_a_hostname_label() {
    let e = sole_error(
        &with_project(
            "[services.web]\ncmd = \"x\"\nports = [\"http\"]\nurl = { http = \"not a label\" }\n",
        ),
        "services.web.url.http",
    );
    assert!(
        e.message.contains("not a valid hostname label"),
        "{}",
        e.message
    );
}

#[test]
fn empty_ports_with_a_self_token_warns() {
    let loaded = ok(&with_project(
        "[services.web]\ncmd = \"serve ${self.port}\"\nports = []\n",
    ));
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    let w = &loaded.warnings[0];
    assert_eq!(w.key, "services.web.cmd");
    assert_eq!(w.line, Some(5));
    assert!(w.message.contains("ports = []"), "{}", w.message);
    // `ports = []` says "no ports": the token is not given one.
    assert!(process(&loaded.spec, "web").port_labels().is_empty());
}

#[test]
fn a_cycle_error_points_at_an_entry_of_the_cycle() {
    let text = with_project("[services.a]\ncmd = \"x\"\ndepends_on = [\"c\",\n\"b\"]\n\n[services.b]\ncmd = \"x\"\ndepends_on = [\"a\"]\n\n[services.c]\ncmd = \"x\"\n");
    let e = sole_error(&text, "services.a.depends_on");
    assert_eq!(e.position, Some(pos_of(&text, "\"b\"]")), "{e}");
}

#[test]
fn columns_count_characters_not_bytes() {
    let text = with_project("[services]\nweb = { cmd = \"éé\", cmdd = \"x\" }\n");
    let e = sole_error(&text, "services.web.cmdd");
    let line = line_of(&text, "cmdd");
    assert_eq!(e.position, Some((line, 21)));
}

#[test]
fn the_quote_it_fix_keeps_the_number_as_written() {
    let e = sole_error(
        &with_project("[services.web]\ncmd = 0x1F\n"),
        "services.web.cmd",
    );
    assert_eq!(fix(&e), "quote it: \"0x1F\"");
}

#[test]
fn a_mistyped_only_probe_is_one_error() {
    let errs = errors(&with_project(
        "[services.web]\ncmd = \"x\"\nhealth = { tcp = 5 }\n",
    ));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].key, "services.web.health.tcp");
}

#[test]
fn errors_are_listed_in_file_order() {
    let errs = errors(&with_project(
        "[services.web]\ncmd = \"x\"\nrestart = \"sometimes\"\nreplicas = 0\n",
    ));
    let lines: Vec<usize> = errs.iter().map(|e| e.position.unwrap().0).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

#[test]
fn project_copy_takes_paths_inside_the_repository_only() {
    let loaded = ok(
        "[project]\nname = \"a\"\ncopy = [\"node_modules\", \"web/node_modules/\", \".venv\"]\n",
    );
    assert_eq!(
        loaded.spec.project.copy,
        vec!["node_modules", "web/node_modules/", ".venv"]
    );
    for bad in ["../elsewhere", "/abs/path", "a/../../b", ""] {
        let e = sole_error(
            &format!("[project]\nname = \"a\"\ncopy = [\"{bad}\"]\n"),
            "project.copy",
        );
        assert!(
            e.to_string().contains("not a path inside the repository"),
            "{e}"
        );
    }
}

#[test]
fn health_takes_an_interval_retries_and_what_to_do_when_unhealthy() {
    let text = r#"
[project]
name = "p"

[services.api]
cmd = "api --port ${self.port}"
url = true
health = { http = "/health", interval = "2s", retries = 5, on_unhealthy = "keep" }

[services.web]
cmd = "web --port ${self.port}"
url = true
health = "/"
"#;
    let spec = ok(text).spec;
    let h = process(&spec, "api").health.clone().unwrap();
    assert_eq!(h.interval(), std::time::Duration::from_secs(2));
    assert_eq!(h.retries(), 5);
    assert_eq!(h.on_unhealthy, binky_controllers::spec::OnUnhealthy::Keep);
    let d = process(&spec, "web").health.clone().unwrap();
    assert_eq!(
        d.interval(),
        binky_controllers::spec::DEFAULT_HEALTH_INTERVAL
    );
    assert_eq!(d.retries(), binky_controllers::spec::DEFAULT_HEALTH_RETRIES);
    assert_eq!(
        d.on_unhealthy,
        binky_controllers::spec::OnUnhealthy::Restart
    );
}

#[test]
fn a_bad_interval_retries_or_on_unhealthy_is_reported_on_its_key() {
    for (bad, key, says) in [
        (
            "interval = \"0s\"",
            "services.api.health.interval",
            "more than 0",
        ),
        (
            "retries = 0",
            "services.api.health.retries",
            "between 1 and 100",
        ),
        (
            "on_unhealthy = \"panic\"",
            "services.api.health.on_unhealthy",
            "`restart` or `keep`",
        ),
    ] {
        let text = format!(
            "[project]\nname = \"p\"\n\n[services.api]\ncmd = \"api --port ${{self.port}}\"\nurl = true\nhealth = {{ http = \"/health\", {bad} }}\n"
        );
        let errs = errors(&text);
        assert!(
            error_at(&errs, key).message.contains(says),
            "{bad}: {errs:#?}"
        );
    }
}

#[test]
fn an_adapter_is_stored_by_its_canonical_name_whichever_name_was_written() {
    for (written, stored) in [
        ("postgresql", "postgres"),
        ("postgres", "postgres"),
        ("postgresql@15", "postgres@15"),
        ("valkey@8", "redis@8"),
        ("mariadb", "mysql"),
        ("my-adapter", "my-adapter"),
    ] {
        let spec = ok(&with_project(&format!(
            "[services.db]\nadapter = \"{written}\"\n"
        )))
        .spec;
        assert_eq!(
            resource(&spec, "db").adapter,
            stored,
            "adapter = {written:?}"
        );
    }
}
