//! `binky init` through the real binary, on real compose files copied into temp dirs: the
//! result validates the way `binky up` validates, maps what it should, carries no
//! credential, and nothing is written when it refuses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use binky_controllers::admission::{check_spec, Verdict};

use crate::harness::*;

/// `tests/fixtures/compose/<name>` copied to `<tmp>/<dir_name>`.
fn project(fixture: &str, dir_name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(dir_name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compose")
        .join(fixture);
    copy_dir(&src, &dir);
    (tmp, dir)
}

/// `from` copied into `to`, recursively (a fixture into a test's directory).
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `binky init ARGS…` with a home of its own (which init must not need).
fn init(cwd: &Path, args: &[&str]) -> Output {
    Command::new(binky_bin())
        .arg("init")
        .args(args)
        .current_dir(cwd)
        .env("BINKY_HOME", cwd.join(".binky-home-unused"))
        .output()
        .unwrap()
}

fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn read_toml(dir: &Path) -> (String, toml::Table) {
    let text = std::fs::read_to_string(dir.join("binky.toml")).unwrap();
    let table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (text, table)
}

/// What `binky up` checks that does not depend on installed adapters.
fn parses_and_is_admitted(text: &str, path: &Path) {
    let loaded = binky::config::parse(text, path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(check_spec(&loaded.spec, None), Verdict::Admit, "{text}");
}

fn s<'t>(t: &'t toml::Table, path: &str) -> &'t toml::Value {
    let mut v: Option<&toml::Value> = None;
    for k in path.split('/') {
        v = Some(match v {
            None => &t[k],
            Some(v) => &v[k],
        });
    }
    v.unwrap()
}

fn strings(v: &toml::Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect()
}

#[test]
fn init_maps_a_web_api_postgres_redis_stack_into_a_file_binky_up_accepts() {
    let (_tmp, dir) = project("stack", "shop");
    let before = files(&dir);
    let out = init(dir.parent().unwrap(), &["shop"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let (text, t) = read_toml(&dir);

    // compose only builds web: `binky check` and `binky up` refuse the file until its
    // command is written, naming it.
    let check = || {
        std::process::Command::new(crate::harness::binky_bin())
            .arg("check")
            .arg(dir.join("binky.toml"))
            .output()
            .unwrap()
    };
    let refused = check();
    assert!(!refused.status.success(), "{}", stdout(&refused));
    assert!(
        stdout(&refused).contains("error: services.web.cmd: is still a TODO"),
        "{}",
        stdout(&refused)
    );
    let err = binky::apply::validate(&text, &dir.join("binky.toml"), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("services.web.cmd"), "{err}");
    // With the command written, what `binky up` runs on it, built-in adapters included,
    // and `binky check` finds no error in it.
    let done = text.replace(
        "TODO: the command that starts web on the host",
        "npm run dev -- --port ${self.port}",
    );
    std::fs::write(dir.join("binky.toml"), &done).unwrap();
    binky::apply::validate(&done, &dir.join("binky.toml"), None)
        .unwrap_or_else(|e| panic!("{e}\n{done}"));
    let check = check();
    assert!(check.status.success(), "{}", stdout(&check));

    assert_eq!(s(&t, "project/name").as_str(), Some("shop"));
    // binky runs PostgreSQL and Redis itself: no admin_url; the comment says how to use
    // a server of one's own.
    assert_eq!(s(&t, "services/db/adapter").as_str(), Some("postgres"));
    assert!(t["services"]["db"].get("admin_url").is_none(), "{text}");
    assert_eq!(s(&t, "services/cache/adapter").as_str(), Some("redis"));
    assert!(t["services"]["cache"].get("admin_url").is_none(), "{text}");
    assert!(text.contains("# binky runs PostgreSQL for it, from the installed binaries. To use a server you\n# already run instead: admin_url = \"${env.DB_ADMIN_URL}\""), "{text}");

    assert_eq!(
        s(&t, "services/api/cmd").as_str(),
        Some("uvicorn shop.main:app --host 0.0.0.0 --port ${self.port}")
    );
    assert_eq!(s(&t, "services/api/workdir").as_str(), Some("api"));
    assert_eq!(s(&t, "services/api/url").as_bool(), Some(true));
    assert_eq!(strings(s(&t, "services/api/depends_on")), ["db", "cache"]);
    assert_eq!(
        s(&t, "services/api/env/DATABASE_URL").as_str(),
        Some("${db.url}")
    );
    assert_eq!(
        s(&t, "services/api/env/REDIS_URL").as_str(),
        Some("${cache.url}")
    );
    assert_eq!(
        s(&t, "services/api/env/JWT_SECRET").as_str(),
        Some("${env.JWT_SECRET}")
    );
    assert_eq!(s(&t, "services/api/env/LOG_LEVEL").as_str(), Some("info"));

    // compose only builds web: a placeholder that fails until someone writes the command.
    assert_eq!(
        s(&t, "services/web/cmd").as_str(),
        Some("TODO: the command that starts web on the host")
    );
    assert!(text.contains("# TODO: the command that starts web"));
    assert_eq!(s(&t, "services/web/workdir").as_str(), Some("web"));
    assert_eq!(s(&t, "services/web/url").as_bool(), Some(true));
    assert_eq!(strings(s(&t, "services/web/depends_on")), ["api"]);
    assert_eq!(
        s(&t, "services/web/env/API_URL").as_str(),
        Some("${api.url}")
    );

    // Left to decide, at the top and in the summary.
    assert!(
        text.contains("# TODO: named volumes pgdata not carried"),
        "{text}"
    );

    // No credential anywhere: not in the file, not in what was printed.
    let printed = format!("{}{}", stdout(&out), stderr(&out));
    for secret in ["Sh0p-db-Pa55", "jwt-Sh0p-s1gning"] {
        assert!(!text.contains(secret), "{secret} in:\n{text}");
        assert!(!printed.contains(secret), "{secret} in:\n{printed}");
    }

    let summary = stdout(&out);
    assert!(
        summary.contains("wrote shop/binky.toml from docker-compose.yml"),
        "{summary}"
    );
    assert!(
        summary.contains("db: image postgres:16-alpine → adapter postgres"),
        "{summary}"
    );
    assert!(summary.contains("to decide"), "{summary}");
    assert!(summary.contains("binky runs PostgreSQL"), "{summary}");

    // Only binky.toml was added; no daemon, no home.
    let mut expected = before.clone();
    expected.insert("binky.toml".into());
    assert_eq!(files(&dir), expected);
    assert!(!dir.parent().unwrap().join(".binky-home-unused").exists());
}

#[test]
fn init_carries_build_contexts_env_files_and_what_dotenv_says() {
    let (_tmp, dir) = project("monorepo", "Acme Monorepo");
    let stripe = format!("sk_live_{}", "Qw3rTy8Zx".repeat(3));
    std::fs::write(
        dir.join(".env"),
        format!(
            "BACKEND_PORT=9090\nMYSQL_ROOT_PASSWORD=R00t-my-Pw\nMYSQL_PASSWORD=App-my-Pw\nSTRIPE_API_KEY={stripe}\n"
        ),
    )
    .unwrap();
    let out = init(&dir, &[]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let (text, t) = read_toml(&dir);
    let path = dir.join("binky.toml");

    // mysql and rabbitmq are built-in adapters: the file validates as written, init warns
    // of no missing external adapter, and `binky check` accepts it.
    parses_and_is_admitted(&text, &path);
    binky::apply::validate(&text, &path, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(!stdout(&out).contains("binky-adapter-"), "{}", stdout(&out));
    let check = std::process::Command::new(crate::harness::binky_bin())
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", stdout(&check));

    assert_eq!(s(&t, "project/name").as_str(), Some("acme-monorepo"));
    // binky runs MariaDB for the MySQL family; RabbitMQ is a server of one's own.
    assert_eq!(s(&t, "services/mysql/adapter").as_str(), Some("mysql"));
    assert!(t["services"]["mysql"].get("admin_url").is_none(), "{text}");
    assert_eq!(s(&t, "services/broker/adapter").as_str(), Some("rabbitmq"));
    assert_eq!(
        s(&t, "services/broker/admin_url").as_str(),
        Some("${env.BROKER_ADMIN_URL}")
    );

    // The build context is the workdir, env_files are seen from it, .env gave the port.
    assert_eq!(
        s(&t, "services/backend/workdir").as_str(),
        Some("services/backend")
    );
    assert_eq!(
        strings(s(&t, "services/backend/env_file")),
        ["../../.env", "backend.env"]
    );
    assert_eq!(
        s(&t, "services/backend/cmd").as_str(),
        Some("./gradlew bootRun --args=--server.port=${self.port}")
    );
    assert_eq!(s(&t, "services/backend/url").as_bool(), Some(true));
    assert_eq!(
        strings(s(&t, "services/backend/depends_on")),
        ["mysql", "broker"]
    );
    assert_eq!(
        s(&t, "services/backend/env/SPRING_DATASOURCE_URL").as_str(),
        Some("${mysql.url}")
    );
    assert_eq!(
        s(&t, "services/backend/env/AMQP_URL").as_str(),
        Some("${broker.url}")
    );
    assert_eq!(
        s(&t, "services/backend/env/STRIPE_API_KEY").as_str(),
        Some("${env.STRIPE_API_KEY}")
    );

    // A node image with the project mounted: the working_dir inside the mount.
    assert_eq!(s(&t, "services/site/workdir").as_str(), Some("apps/site"));
    assert_eq!(
        s(&t, "services/site/cmd").as_str(),
        Some("npm run dev -- --port ${self.port} --host")
    );
    // Bundled into the page by Vite: the browser reads it, so the proxy URL.
    assert_eq!(
        s(&t, "services/site/env/VITE_API").as_str(),
        Some("${backend.proxy_url}/api")
    );

    let printed = format!("{}{}", stdout(&out), stderr(&out));
    for secret in ["R00t-my-Pw", "App-my-Pw", stripe.as_str()] {
        assert!(!text.contains(secret), "{secret} in:\n{text}");
        assert!(!printed.contains(secret), "{secret} in:\n{printed}");
    }
    assert!(stdout(&out).contains("STRIPE_API_KEY"), "{}", stdout(&out));
}

#[test]
fn init_refuses_to_overwrite_binky_toml_without_force() {
    let (_tmp, dir) = project("stack", "shop");
    let mine = "# my own binky.toml\n[project]\nname = \"mine\"\n";
    std::fs::write(dir.join("binky.toml"), mine).unwrap();

    let out = init(&dir, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("binky.toml already exists"), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("binky.toml")).unwrap(),
        mine
    );

    let out = init(&dir, &["--force"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let (text, t) = read_toml(&dir);
    assert_eq!(s(&t, "project/name").as_str(), Some("shop"));
    // It parses; only its TODO (web's command) keeps `binky up` from running it.
    let err = binky::apply::validate(&text, &dir.join("binky.toml"), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("services.web.cmd: is still a TODO"), "{err}");
    // Written beside and renamed: nothing else is left.
    let left: Vec<String> = files(&dir)
        .into_iter()
        .filter(|f| f.contains("init-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn init_without_a_compose_file_says_what_it_looked_for_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("README.md"), "no compose here\n").unwrap();
    let out = init(tmp.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("no compose file in ."), "{err}");
    for name in [
        "compose.yaml",
        "compose.yml",
        "docker-compose.yaml",
        "docker-compose.yml",
    ] {
        assert!(err.contains(name), "{err}");
    }
    assert!(err.contains("fix:"), "{err}");
    assert!(err.contains("COMPOSE_FILE") && err.contains("-f "), "{err}");
    assert!(!tmp.path().join("binky.toml").exists());

    let out = init(tmp.path(), &["no-such-dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-dir is not a directory"));
}

#[test]
fn init_with_an_unparsable_compose_file_names_it_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for (text, says) in [
        (
            "services:\n  web: [build: .\n",
            "docker-compose.yml is not valid YAML",
        ),
        ("version: '3.8'\n", "it has no `services:`"),
    ] {
        std::fs::write(tmp.path().join("docker-compose.yml"), text).unwrap();
        let out = init(tmp.path(), &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains(says), "{err}");
        assert!(err.contains("fix:"), "{err}");
        assert!(!tmp.path().join("binky.toml").exists());
        assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    }
}

/// `binky init` in a copy of the fixture; its stderr and the written file.
fn init_fixture(
    fixture: &str,
    args: &[&str],
) -> (tempfile::TempDir, PathBuf, String, String, toml::Table) {
    let (tmp, dir) = project(fixture, fixture);
    let out = init(&dir, args);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let said = format!("{}{}", stderr(&out), stdout(&out));
    let (text, t) = read_toml(&dir);
    parses_and_is_admitted(&text, &dir.join("binky.toml"));
    (tmp, dir, said, text, t)
}

/// `binky check` of the file in `dir`: exit status and what it printed.
fn check_in(dir: &Path) -> (bool, String) {
    let out = Command::new(binky_bin())
        .arg("check")
        .arg(dir.join("binky.toml"))
        .current_dir(dir)
        .output()
        .unwrap();
    (out.status.success(), stdout(&out))
}

#[test]
fn init_reads_a_compose_file_with_its_override_and_the_result_runs() {
    let (_tmp, _dir, said, text, t) = init_fixture("override", &[]);
    assert!(said.contains("with its override"), "{said}");
    assert!(
        said.contains("compose.yaml + compose.override.yaml"),
        "{said}"
    );
    // The command and the setting are the override's; the address is the slice's.
    assert_eq!(
        s(&t, "services/api/cmd").as_str(),
        Some("python3 server.py ${self.port}")
    );
    assert_eq!(s(&t, "services/api/env/DEBUG").as_str(), Some("1"));
    assert_eq!(
        s(&t, "services/api/env/DATABASE_URL").as_str(),
        Some("${db.url}")
    );
    // binky runs PostgreSQL itself (no admin_url is written): `binky up` runs the file as
    // it is (the test's port range added).
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    assert!(!text.lines().any(|l| l.starts_with("admin_url")), "{text}");
    let runnable = text.replace("name = \"override\"\n", "name = \"override\"\n{range}\n");
    let env = Env::new(&runnable);
    env.ok(&["up", "w"]);
    let served = served_env(env.port_of("w", "api"));
    assert!(
        served["DATABASE_URL"]
            .as_str()
            .unwrap()
            .starts_with("postgres"),
        "{served}"
    );
    assert_eq!(served["DEBUG"], "1");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn init_leaves_out_a_traefik_front_and_what_depends_on_it_runs_without_it() {
    let (_tmp, dir, said, text, t) = init_fixture("traefik", &[]);
    assert!(
        said.contains("traefik: left out (Traefik, a reverse proxy"),
        "{said}"
    );
    assert!(t["services"].get("traefik").is_none(), "{text}");
    assert!(
        text.contains("# traefik (Traefik, a reverse proxy) is left out"),
        "{text}"
    );
    assert!(
        t["services"]["whoami"].get("depends_on").is_none(),
        "{text}"
    );
    assert!(!text.contains("--api.insecure"), "{text}");
    let (ok, out) = check_in(&dir);
    assert!(ok, "{out}");
}

#[test]
fn init_of_a_django_celery_stack_reads_its_local_file_and_env_files_and_marks_image_paths_todo() {
    let (_tmp, dir, said, text, t) = init_fixture("django-celery", &[]);
    assert!(
        said.contains("reading ./docker-compose.local.yml, the development file"),
        "{said}"
    );
    assert!(said.contains("docker-compose.production.yml"), "{said}");
    // Addresses of compose services in the env_files point at the slices.
    for svc in ["django", "celeryworker"] {
        let env = |k: &str| {
            t["services"][svc]
                .get("env")
                .and_then(|e| e.get(k))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        assert_eq!(env("REDIS_URL").as_deref(), Some("${redis.url}"), "{text}");
        assert_eq!(
            env("POSTGRES_HOST").as_deref(),
            Some("${postgres.host}"),
            "{text}"
        );
        assert_eq!(
            env("POSTGRES_PASSWORD").as_deref(),
            Some("${postgres.password}"),
            "{text}"
        );
        assert!(
            env("DJANGO_ALLOWED_HOSTS")
                .unwrap()
                .ends_with(",.localhost"),
            "{text}"
        );
        assert!(
            env("USE_DOCKER").is_none(),
            "a plain setting stays in its file: {text}"
        );
    }
    assert!(!text.contains("is loaded as it is"), "{text}");
    // `/start` is a path inside the image: a TODO that check refuses, for both.
    assert!(
        text.contains("compose runs /start, a path inside its image"),
        "{text}"
    );
    let (ok, out) = check_in(&dir);
    assert!(!ok, "{out}");
    assert!(
        out.contains("services.django.cmd: is still a TODO"),
        "{out}"
    );
    assert!(
        out.contains("services.celeryworker.cmd: is still a TODO"),
        "{out}"
    );
    // The password of the env file is not copied.
    assert!(!text.contains("debug\""), "{text}");
}

#[test]
fn init_merges_the_files_compose_file_names_in_dotenv_and_says_vite_checks_the_host() {
    let (_tmp, dir, said, text, t) = init_fixture("node-dev", &[]);
    assert!(said.contains("COMPOSE_FILE in .env"), "{said}");
    assert_eq!(
        s(&t, "services/web/cmd").as_str(),
        Some("npm run dev --workspace apps/web -- --port ${self.port} --host 0.0.0.0")
    );
    assert_eq!(
        s(&t, "services/web/env/API_URL").as_str(),
        Some("${api.url}")
    );
    assert_eq!(
        s(&t, "services/api/env/REDIS_URL").as_str(),
        Some("${cache.url}")
    );
    assert!(
        said.contains("Vite (apps/web/vite.config.ts) refuses unknown hosts"),
        "{said}"
    );
    assert!(text.contains("# NOTE: Vite"), "{text}");
    let (ok, out) = check_in(&dir);
    assert!(ok, "{out}");
}

#[test]
fn init_reads_the_file_named_by_f_and_says_rails_checks_the_host() {
    let (_tmp, _dir, said, text, t) = init_fixture("rails-like", &["-f", "compose.dev.yml"]);
    assert!(
        said.contains("wrote ./binky.toml from compose.dev.yml"),
        "{said}"
    );
    assert_eq!(
        s(&t, "services/web/cmd").as_str(),
        Some("bundle exec rails server -p ${self.port} -b 0.0.0.0")
    );
    assert_eq!(
        s(&t, "services/web/env/DATABASE_URL").as_str(),
        Some("${db.url}")
    );
    assert!(!text.contains("password@"), "{text}");
    assert!(
        text.contains("# NOTE: Rails (config/application.rb)"),
        "{text}"
    );
    // The mail catcher runs on the host, with a port of the world's for SMTP and its UI;
    // `mailcatcher` is not installed here, so it is written commented out with how to
    // install it, and the rest runs without it.
    assert!(
        text.contains("# cmd = \"mailcatcher --foreground --ip 127.0.0.1 --smtp-port ${self.smtp} --http-port ${self.port}\""),
        "{text}"
    );
    assert!(t["services"].get("mailcatcher").is_none(), "{text}");
    assert!(text.contains("gem install mailcatcher"), "{text}");
    assert!(said.contains("gem install mailcatcher"), "{said}");
    assert!(!text.contains("TODO: mailcatcher"), "{text}");
    // A file that is not there is named.
    let (_tmp2, dir2) = project("rails-like", "r2");
    let out = init(&dir2, &["-f", "compose.prod.yml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("compose.prod.yml does not exist"),
        "{}",
        stderr(&out)
    );
}
