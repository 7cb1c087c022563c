//! Nothing stays stuck on a golden template: a build whose commands name other slices waits
//! for them while the world makes them; templates whose builds need each other's slices are
//! refused by `check` and `up`, naming the chain; the key stays put while a dependency
//! directory is brought into the worktree; `golden rm` drops a template in any state and
//! says what it did; a drop on a stopped managed server starts it, and stops it again.

use std::time::Duration;

use crate::harness::*;
use crate::pg_server::PgServer;
use crate::redis_server::RedisServer;

/// `binky golden ls --json`.
fn goldens(env: &Env) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(&env.ok(&["golden", "ls", "--json"]))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// How many of `world`'s events contain `text`.
fn events_with(env: &Env, world: &str, text: &str) -> usize {
    env.ok(&["events", world, "-n", "500"])
        .lines()
        .filter(|l| l.contains(text))
        .count()
}

/// The golden templates `world`'s events say it built (or began to build).
fn built_by(env: &Env, world: &str) -> std::collections::BTreeSet<String> {
    env.ok(&["events", world, "-n", "500"])
        .lines()
        .filter_map(|l| l.split("building golden template ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The issue's world and its kin: `[defaults] env` names the database itself and the cache
/// in every service's env (migrate's too), the database's own env names the cache, and so
/// does its migrate. The template's build waits for the cache's slice while the world makes
/// it, sees its own address for `${db.…}`, and the world comes up and goes at once.
#[test]
fn a_template_build_that_names_other_slices_comes_up_and_its_world_is_removed_without_waiting() {
    let pg = PgServer::start();
    let redis = RedisServer::start();
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().display().to_string();
    let env = Env::new(&format!(
        r#"
[project]
name = "stuck"
{{range}}

[defaults]
env = {{ DB_PORT = "${{db.port}}", REDIS_PORT = "${{cache.port}}" }}

[services.db]
adapter = "postgres"
admin_url = "${{env.PG_ADMIN}}"
migrate = "echo db=${{db.port}} cache=${{cache.port}} env=$DB_PORT/$REDIS_PORT url=$REDIS_URL >> {log_path}"
clone_from = "golden"
clone_key_files = ["binky.toml"]
env = {{ REDIS_URL = "${{cache.url}}" }}

[services.cache]
adapter = "redis"
admin_url = "${{env.REDIS_ADMIN}}"
"#
    ));
    let check = env.binky(&["check"]);
    assert!(check.status.success(), "{}", stdout(&check));
    let vars = [
        ("PG_ADMIN", pg.admin_url.as_str()),
        ("REDIS_ADMIN", redis.admin_url.as_str()),
    ];
    for w in ["a", "b"] {
        let up = env.binky_env(&["up", w, "--timeout", "60s"], &vars);
        assert!(up.status.success(), "up {w}: {}", stderr(&up));
    }
    // Built once, in a; b is a copy.
    let ran = std::fs::read_to_string(log.path()).unwrap();
    let lines: Vec<&str> = ran.lines().collect();
    assert_eq!(lines.len(), 1, "{ran}");
    let (p, r) = (pg.port, redis.port);
    assert!(
        lines[0].starts_with(&format!("db={p} cache={r} env={p}/{r} url=redis://")),
        "{ran}"
    );
    assert_eq!(built_by(&env, "a").len(), 1);
    assert!(built_by(&env, "b").is_empty());
    for w in ["a", "b"] {
        let out = env.binky(&["remove", w, "--timeout", "60s"]);
        assert!(out.status.success(), "remove {w}: {}", stderr(&out));
    }
    env.assert_nothing_left(&["a", "b"]);
}

/// Golden templates whose builds need each other's slices can never be built: through
/// `[defaults] env`, through the services' own env, through migrate and seed. `binky
/// check` says so naming the chain and the fix, and `up` refuses it, writing nothing.
#[test]
fn templates_whose_builds_need_each_others_slices_are_refused_by_check_and_up_naming_the_chain() {
    let head = "[project]\nname = \"cycle\"\n{range}\n";
    let db = |name: &str, more: &str| {
        format!("\n[services.{name}]\nadapter = \"postgres\"\nclone_from = \"golden\"\nclone_key_files = [\"binky.toml\"]\n{more}\n")
    };
    let kin = [
        (
            format!(
                "{head}\n[defaults]\nenv = {{ A_URL = \"${{a.url}}\", B_URL = \"${{b.url}}\" }}\n{}{}",
                db("a", "migrate = \"echo a\""),
                db("b", "migrate = \"echo b\"")
            ),
            "`a` (env B_URL = ${b.url}) → `b` (env A_URL = ${a.url}) → `a`",
            "take B_URL from `a` or A_URL from `b`",
        ),
        (
            format!(
                "{head}{}{}",
                db("a", "migrate = \"echo a\"\nenv = { B = \"${b.url}\" }"),
                db("b", "migrate = \"echo b\"\nenv = { A = \"${a.url}\" }")
            ),
            "`a` (env B = ${b.url}) → `b` (env A = ${a.url}) → `a`",
            "take B from `a` or A from `b`",
        ),
        (
            format!(
                "{head}{}{}",
                db("a", "migrate = \"psql ${b.url} -c 'select 1'\""),
                db("b", "migrate = \"echo b\"\nseed = \"load ${a.url}\"")
            ),
            "`a` (migrate uses ${b.url}) → `b` (seed uses ${a.url}) → `a`",
            "keep the other database's token out of migrate and seed",
        ),
    ];
    let env = Env::new(&kin[0].0);
    for (i, (toml, chain, fix)) in kin.iter().enumerate() {
        env.write_config(toml);
        env.git(&["commit", "-qam", &format!("kin {i}"), "--allow-empty"]);
        let check = env.binky(&["check"]);
        let said = stdout(&check);
        assert_eq!(check.status.code(), Some(1), "{said}");
        assert!(
            said.contains("golden templates that wait for each other for ever")
                && said.contains(chain)
                && said.contains(fix)
                && said.contains("remove clone_from from one of `a`, `b`"),
            "kin {i}: {said}"
        );
        let up = env.binky(&["up", "w"]);
        assert_eq!(up.status.code(), Some(2), "kin {i}: {}", stderr(&up));
        assert!(stderr(&up).contains(chain), "kin {i}: {}", stderr(&up));
        assert!(
            env.status()["worlds"].as_array().unwrap().is_empty(),
            "kin {i}: a refused world was written"
        );
    }
    // Broken one way round, it is no cycle: b's template first, then a's.
    env.write_config(&format!(
        "{head}{}{}",
        db("a", "migrate = \"echo ${b.url}\""),
        db("b", "migrate = \"echo b\"")
    ));
    let check = env.binky(&["check"]);
    assert!(check.status.success(), "{}", stdout(&check));
}

/// The issue's repository, smaller: migrations in `migrations/`, a git-ignored `.venv`
/// whose packages hold `migrations/*.sql` of their own, brought into each worktree
/// (`copy`). A new migration builds exactly one new template: its key does not move while
/// the `.venv` comes in, nothing is left `building`, and `golden ls` says which world uses
/// which template as the events do.
#[test]
fn a_golden_key_stays_put_while_a_dependency_directory_is_brought_into_the_worktree() {
    let pg = PgServer::start();
    let env = Env::new(
        r#"
[project]
name = "venv"
{range}
copy = [".venv"]

[services.db]
adapter = "postgres"
admin_url = "${env.PG_ADMIN}"
migrate = "for f in migrations/*.sql; do psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -f $f; done"
clone_from = "golden"

[services.app]
cmd = "exec sleep 600"
depends_on = ["db"]
"#,
    );
    std::fs::create_dir_all(env.repo.join("migrations")).unwrap();
    std::fs::write(
        env.repo.join("migrations/001.sql"),
        "create table notes (id int primary key);\n",
    )
    .unwrap();
    std::fs::write(env.repo.join(".gitignore"), ".venv/\n").unwrap();
    // Many tiny files, in packages with migrations/ of their own: bringing them takes a
    // while, and the golden controller looks at the worktree meanwhile.
    for p in 0..200 {
        let dir = env.repo.join(format!(
            ".venv/lib/python3.11/site-packages/pkg{p}/migrations"
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for m in 0..100 {
            std::fs::write(
                dir.join(format!("{m:04}_auto.sql")),
                format!("-- {p}/{m}\n"),
            )
            .unwrap();
        }
    }
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "migrations"]);
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let up = env.binky_env(&["up", "a", "--timeout", "60s"], &vars);
    assert!(up.status.success(), "up a: {}", stderr(&up));
    std::fs::write(
        env.repo.join("migrations/002.sql"),
        "create table tags (id int primary key);\n",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "a new migration"]);
    let up = env.binky_env(&["up", "b", "--timeout", "60s"], &vars);
    assert!(up.status.success(), "up b: {}", stderr(&up));
    for w in ["a", "b"] {
        let events = env.ok(&["events", w, "-n", "500"]);
        assert_eq!(
            built_by(&env, w).len(),
            1,
            "{w} did not build exactly one template:\n{events}"
        );
    }
    let listed = goldens(&env);
    assert_eq!(listed.len(), 2, "{listed:#?}");
    for g in &listed {
        assert_eq!(g["state"], "ready", "{listed:#?}");
        // Each template is the one its world's events say it was cloned from.
        let name = g["name"].as_str().unwrap();
        let users: Vec<&str> = g["used_by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u.as_str().unwrap())
            .collect();
        assert_eq!(users.len(), 1, "{listed:#?}");
        let world = users[0].split('/').next().unwrap();
        assert_eq!(
            events_with(&env, world, &format!("from golden template {name}")),
            1,
            "golden ls says {world} uses {name}; its events do not"
        );
    }
    env.ok(&["settings", "golden_keep=0"]);
    env.ok(&["remove", "a"]);
    env.ok(&["remove", "b"]);
    wait_until(
        "the templates go with their worlds",
        Duration::from_secs(20),
        || goldens(&env).is_empty(),
    );
    pg.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}

const SEEDED: &str = r#"
[project]
name = "shop"
{range}

[services.db]
adapter = "postgres"
admin_url = "${env.PG_ADMIN}"
migrate = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c 'create table notes (id int primary key, body text)'"
seed = "sh seed.sh"
clone_from = "golden"
clone_key_files = ["seed.sh"]
"#;

/// `golden rm` drops a template in any state and waits until it is gone: a build a killed
/// daemon left behind (a database half made), right away, and the world that wanted it
/// builds a fresh one; a ready one asked for while a new world comes up at the same time:
/// both finish, and no template is left half built or half dropped.
#[test]
fn golden_rm_drops_a_template_in_any_state_and_an_up_right_after_gets_a_fresh_one() {
    let pg = PgServer::start();
    let env = Env::new(SEEDED);
    let runs = env.dir.path().join("seeds.log");
    let runs_s = runs.display().to_string();
    // The first run of the seed writes a row and hangs; the daemon is killed there.
    std::fs::write(
        env.repo.join("seed.sh"),
        format!(
            "set -e\necho run >> '{runs_s}'\n\
             if [ \"$(wc -l < '{runs_s}')\" -eq 1 ]; then\n\
               psql \"$DATABASE_URL\" -q -c \"insert into notes values (0, 'half')\"\n\
               sleep 300\n\
             fi\n\
             psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c \"insert into notes select g, 'row' from generate_series(1, 100) g\"\n"
        ),
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "a seed"]);
    let seeds = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let mut up = std::process::Command::new(binky_bin())
        .args(["up", "a", "--timeout", "120s"])
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .envs(vars.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the seed runs", Duration::from_secs(60), || seeds() == 1);
    signal(env.daemon_pid().expect("a daemon"), 9);
    for pid in env.our_processes() {
        signal(pid, 9);
    }
    let _ = up.kill();
    let _ = up.wait();
    let left = goldens(&env);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["state"], "building");
    let key = left[0]["key"].as_str().unwrap().to_owned();
    let name = left[0]["name"].as_str().unwrap().to_owned();
    assert!(pg.slice_databases().iter().any(|d| d.starts_with(&name)));
    // Dropped, database and all, though world a still wants it (the new daemon goes on
    // bringing a up, so it builds a fresh one at once).
    let rm = env.binky(&["golden", "rm", &key[..8], "--timeout", "60s"]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    assert!(
        stdout(&rm).contains(&format!("dropped golden template {key} ({name}, building)")),
        "{}",
        stdout(&rm)
    );
    let up = env.binky_env(&["up", "a", "--timeout", "60s"], &vars);
    assert!(up.status.success(), "{}", stderr(&up));
    assert_eq!(seeds(), 2);
    let url = env.env_of("a")["DB_URL"].as_str().unwrap().to_owned();
    assert_eq!(
        pg.query(&url, "select count(*) from notes where body = 'half'"),
        vec![vec!["0".to_owned()]],
        "a was cloned from the half-built template"
    );
    // A ready template dropped while a new world comes up at the same time.
    let key = goldens(&env)[0]["key"].as_str().unwrap().to_owned();
    std::thread::scope(|s| {
        let rm = s.spawn(|| env.binky(&["golden", "rm", &key, "--timeout", "60s"]));
        let b = s.spawn(|| env.binky_env(&["up", "b", "--timeout", "60s"], &vars));
        let (rm, b) = (rm.join().unwrap(), b.join().unwrap());
        assert!(rm.status.success(), "{}", stderr(&rm));
        assert!(
            stdout(&rm).contains("dropped golden template"),
            "{}",
            stdout(&rm)
        );
        assert!(b.status.success(), "{}", stderr(&b));
    });
    let url = env.env_of("b")["DB_URL"].as_str().unwrap().to_owned();
    assert_eq!(
        pg.query(
            &url,
            "select count(*), count(*) filter (where body = 'half') from notes"
        ),
        vec![vec!["100".to_owned(), "0".to_owned()]]
    );
    for g in goldens(&env) {
        assert_eq!(g["state"], "ready", "{g:#}");
    }
    env.ok(&["settings", "golden_keep=0"]);
    env.ok(&["remove", "a"]);
    env.ok(&["remove", "b"]);
    wait_until(
        "the templates go with their worlds",
        Duration::from_secs(20),
        || goldens(&env).is_empty(),
    );
    pg.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}

/// The issue's sequence: `golden rm`, then `binky servers stop` before the drop is done.
/// The drop starts binky's own server again, finishes, and stops it again (the person
/// stopped it); so does the removal of a world while the server is stopped.
#[test]
fn a_drop_that_needs_a_stopped_managed_server_starts_it_finishes_and_stops_it_again() {
    let env = Env::new(
        r#"
[project]
name = "managed"
{range}

[services.db]
adapter = "postgres"
migrate = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c 'create table notes (body text)'"
clone_from = "golden"
clone_key_files = ["binky.toml"]
"#,
    );
    env.ok(&["up", "a"]);
    env.ok(&["remove", "a"]);
    let listed = goldens(&env);
    assert_eq!(listed.len(), 1, "the template is kept after its last world");
    let key = listed[0]["key"].as_str().unwrap().to_owned();
    env.ok(&["golden", "rm", &key, "--no-wait"]);
    let out = env.ok(&["servers", "stop"]);
    assert!(out.contains("postgres"), "{out}");
    wait_until(
        "the drop finishes on the stopped server",
        Duration::from_secs(30),
        || goldens(&env).is_empty(),
    );
    wait_until(
        "the server is stopped again after the drop",
        Duration::from_secs(30),
        || env.our_servers().is_empty(),
    );
    assert!(env.ok(&["servers"]).contains("stopped"));
    // A world removed while the server is stopped: its slice is dropped all the same.
    env.ok(&["up", "b"]);
    env.ok(&["servers", "stop"]);
    let out = env.binky(&["remove", "b", "--timeout", "60s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        "the server is stopped again after the removal",
        Duration::from_secs(30),
        || env.our_servers().is_empty(),
    );
    // b's slice is not on the server (gc looks at running servers: a new world starts it).
    env.ok(&["up", "c"]);
    let gc = env.ok(&["gc"]);
    assert!(!gc.contains("bk_managed_b"), "{gc}");
    env.ok(&["remove", "c"]);
    env.assert_nothing_left(&["a", "b", "c"]);
}
