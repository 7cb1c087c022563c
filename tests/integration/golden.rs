//! Golden templates end to end: migrate and seed once per key, a server-side copy per world,
//! owned by the world's own role; rebuilds on changed inputs; faults (a failing seed, a
//! session left on the template, a daemon killed mid-build); stale templates dropped.

use std::path::Path;
use std::time::Duration;

use crate::harness::*;
use crate::pg_server::PgServer;

const CONFIG: &str = r#"
[project]
name = "shop"
{range}

[services.db]
adapter = "postgres"
admin_url = "${env.PG_ADMIN}"
migrate = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -f schema.sql"
seed = "sh seed.sh"
clone_from = "golden"

[services.api]
cmd = "SERVE"
url = true
depends_on = ["db"]
env = { DATABASE_URL = "${db.url}" }
"#;

const SCHEMA: &str = "create table notes (id int primary key, body text not null);\n";

/// A seed that logs each run to `log` and inserts 100 rows.
fn seed(log: &Path, extra: &str) -> String {
    format!(
        "set -e\necho run >> '{}'\n{extra}\npsql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c \"insert into notes select g, 'row ' || g from generate_series(1, 100) g\"\n",
        log.display()
    )
}

struct Golden {
    pg: PgServer,
    env: Env,
    log: std::path::PathBuf,
}

impl Golden {
    fn new(extra_seed: &str) -> Golden {
        let pg = PgServer::start();
        let env = Env::new(&CONFIG.replace("SERVE", SERVE));
        let log = env.dir.path().join("seeds.log");
        std::fs::write(env.repo.join("schema.sql"), SCHEMA).unwrap();
        std::fs::write(env.repo.join("seed.sh"), seed(&log, extra_seed)).unwrap();
        env.git(&["add", "-A"]);
        env.git(&["commit", "-qm", "schema and seed"]);
        Golden { pg, env, log }
    }

    fn vars(&self) -> [(&str, &str); 1] {
        [("PG_ADMIN", self.pg.admin_url.as_str())]
    }

    fn up(&self, world: &str) -> std::process::Output {
        self.env.binky_env(&["up", world], &self.vars())
    }

    fn up_ok(&self, world: &str) {
        let out = self.up(world);
        assert!(out.status.success(), "up {world}: {}", stderr(&out));
    }

    fn seeds(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .count()
    }

    fn db_url(&self, world: &str) -> String {
        self.env.env_of(world)["DB_URL"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn templates(&self) -> Vec<String> {
        self.pg
            .slice_databases()
            .into_iter()
            .filter(|d| d.starts_with("bk_golden_") && !d.ends_with("_migrated"))
            .collect()
    }

    /// Every template database, migrated stages too.
    fn template_dbs(&self) -> Vec<String> {
        self.pg
            .slice_databases()
            .into_iter()
            .filter(|d| d.starts_with("bk_golden_"))
            .collect()
    }

    fn events(&self, world: &str) -> String {
        self.env.ok(&["events", world, "-n", "200"])
    }

    fn goldens(&self) -> Vec<serde_json::Value> {
        serde_json::from_str::<serde_json::Value>(&self.env.ok(&["golden", "ls", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

/// Tables, sequences and indexes in `public` that the connected role does not own.
const NOT_MINE: &str = "select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace \
     where n.nspname = 'public' and c.relowner <> (select oid from pg_roles where rolname = current_user)";

#[test]
fn two_worlds_wait_for_one_build_and_each_gets_a_copy_it_owns_reads_writes_and_migrates() {
    let g = Golden::new("");
    // Two worlds at once: one builds the template, the other waits for it.
    std::thread::scope(|s| {
        let a = s.spawn(|| g.up("a"));
        let b = s.spawn(|| g.up("b"));
        for out in [a.join().unwrap(), b.join().unwrap()] {
            assert!(out.status.success(), "{}", stderr(&out));
        }
    });
    assert_eq!(g.seeds(), 1, "the seed ran more than once");
    assert_eq!(g.templates().len(), 1, "{:?}", g.pg.slice_databases());
    for w in ["a", "b"] {
        let events = g.events(w);
        assert!(
            events.contains(&format!(
                "from golden template bk_golden_{}_golden_",
                g.env.home_id()
            )),
            "{w} was not cloned: {events}"
        );
        assert!(!events.contains("clone_fallback"), "{events}");
    }
    let (a, b) = (g.db_url("a"), g.db_url("b"));
    assert_ne!(a, b);
    for url in [&a, &b] {
        assert_eq!(
            g.pg.query(url, "select count(*) from notes"),
            vec![vec!["100".to_owned()]]
        );
        // The template was vacuumed and analysed before it was sealed: the copy starts
        // with its statistics (a table never analysed has reltuples = -1).
        assert_eq!(
            g.pg.query(
                url,
                "select reltuples from pg_class where relname = 'notes'"
            ),
            vec![vec!["100".to_owned()]]
        );
        // The world's role owns its database and everything in it.
        assert_eq!(
            g.pg.query(url, NOT_MINE),
            vec![vec!["0".to_owned()]],
            "objects in the clone belong to another role"
        );
        assert_eq!(
            g.pg.query(
                url,
                "select pg_get_userbyid(datdba) = current_user from pg_database where datname = current_database()"
            ),
            vec![vec!["t".to_owned()]]
        );
    }
    // a reads, writes and migrates its copy; b sees none of it.
    g.pg.query(&a, "insert into notes values (101, 'only in a')");
    g.pg.query(&a, "update notes set body = 'changed' where id = 1");
    g.pg.query(&a, "alter table notes add column tag text");
    g.pg.query(&a, "create index notes_body on notes (body)");
    g.pg.query(&a, "create table extra (x int)");
    g.pg.query(&a, "drop table extra");
    g.pg.query(&a, "delete from notes where id = 2");
    assert_eq!(
        g.pg.query(&a, "select count(*), count(tag) from notes"),
        vec![vec!["100".to_owned(), "0".to_owned()]]
    );
    assert_eq!(
        g.pg.query(&b, "select count(*), min(body) from notes where id <= 2"),
        vec![vec!["2".to_owned(), "row 1".to_owned()]]
    );
    // The service got its clone's address.
    assert_eq!(
        served_env(g.env.port_of("a", "api"))["DATABASE_URL"],
        a.as_str()
    );
    // A third world is cloned too: still one seed.
    g.up_ok("c");
    assert_eq!(g.seeds(), 1);
    let ls = g.env.ok(&["golden", "ls"]);
    assert!(
        ls.contains("ready") && ls.contains("a/db") && ls.contains("c/db"),
        "{ls}"
    );
    // The template outlives every world (golden_keep), until `golden rm`.
    for w in ["a", "b", "c"] {
        g.env.ok(&["remove", w]);
    }
    assert_eq!(g.templates().len(), 1);
    let key = g.goldens()[0]["key"].as_str().unwrap().to_owned();
    g.env.ok(&["golden", "rm", &key]);
    wait_until(
        "the template no world needs is dropped",
        Duration::from_secs(20),
        || g.template_dbs().is_empty(),
    );
    g.pg.assert_no_slices();
    assert!(g.goldens().is_empty());
    g.env.assert_nothing_left(&["a", "b", "c"]);
}

#[test]
fn a_changed_migration_file_builds_a_new_template_and_with_golden_keep_0_the_old_one_goes_with_its_last_world(
) {
    let g = Golden::new("");
    g.env.ok(&["settings", "golden_keep=0"]);
    g.up_ok("a");
    assert_eq!(g.seeds(), 1);
    // A migration changes on main; a world made from it gets a new template.
    std::fs::write(
        g.env.repo.join("schema.sql"),
        format!("{SCHEMA}alter table notes add column tag text default 'new';\n"),
    )
    .unwrap();
    g.env.git(&["commit", "-qam", "a new column"]);
    g.up_ok("b");
    assert_eq!(g.seeds(), 2, "a changed migration did not rebuild");
    assert_eq!(g.templates().len(), 2);
    assert_eq!(
        g.pg.query(&g.db_url("b"), "select count(tag) from notes"),
        vec![vec!["100".to_owned()]]
    );
    assert!(g
        .pg
        .try_query(&g.db_url("a"), "select tag from notes")
        .is_err());
    let keys: Vec<String> = g
        .goldens()
        .iter()
        .map(|v| v["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys.len(), 2);
    // a goes: its template goes too, b's stays.
    g.env.ok(&["remove", "a"]);
    wait_until("a's template is dropped", Duration::from_secs(20), || {
        g.template_dbs().len() == 2 && g.goldens().len() == 1
    });
    assert_eq!(g.goldens().len(), 1);
    // `golden rm` drops a template on request; the next world builds it again.
    let key = g.goldens()[0]["key"].as_str().unwrap().to_owned();
    let out = g.env.ok(&["golden", "rm", &key]);
    assert!(out.contains(&key), "{out}");
    wait_until(
        "golden rm drops the template",
        Duration::from_secs(20),
        || g.template_dbs().is_empty(),
    );
    let out = g.env.binky(&["golden", "rm", "nosuchkey"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("golden ls"), "{}", stderr(&out));
    g.up_ok("c");
    assert_eq!(g.seeds(), 3);
    assert_eq!(
        g.pg.query(&g.db_url("c"), "select count(tag) from notes"),
        vec![vec!["100".to_owned()]]
    );
    // b kept its own data through all of it.
    assert_eq!(
        g.pg.query(&g.db_url("b"), "select count(*) from notes"),
        vec![vec!["100".to_owned()]]
    );
    for w in ["b", "c"] {
        g.env.ok(&["remove", w]);
    }
    wait_until("templates dropped", Duration::from_secs(20), || {
        g.template_dbs().is_empty()
    });
    g.pg.assert_no_slices();
    g.env.assert_nothing_left(&["a", "b", "c"]);
}

#[test]
fn a_failing_seed_fails_the_template_with_its_output_clones_nothing_and_a_fix_rebuilds() {
    let g = Golden::new("echo 'seed exploded: no such fixture' >&2\nexit 3");
    let out = g.up("a");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("seed exploded"), "{err}");
    let status = g.env.ok(&["status", "a"]);
    assert!(
        status.contains("seed exploded") && status.contains("GoldenFailed"),
        "{status}"
    );
    let ls = g.env.ok(&["golden", "ls"]);
    assert!(
        ls.contains("failed") && ls.contains("seed exploded"),
        "{ls}"
    );
    // No world database was cloned from the failed template.
    let worlds: Vec<String> =
        g.pg.slice_databases()
            .into_iter()
            .filter(|d| !d.starts_with("bk_golden_"))
            .collect();
    assert!(worlds.is_empty(), "a world was cloned: {worlds:?}");
    assert!(g.env.pid_of("a", "api").is_none());
    // The next `up` tries the build again (a seed may fail on something outside the
    // repository) and reports the same failure.
    let out = g.up("b");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("seed exploded"), "{}", stderr(&out));
    assert_eq!(g.seeds(), 2);
    // The agent fixes the seed in its worktree: the template is built again.
    std::fs::write(g.env.worktree("a").join("seed.sh"), seed(&g.log, "")).unwrap();
    g.up_ok("a");
    assert_eq!(g.seeds(), 3);
    assert_eq!(
        g.pg.query(&g.db_url("a"), "select count(*) from notes"),
        vec![vec!["100".to_owned()]]
    );
    // The fix is not committed: remove says so and loses nothing until forced.
    g.env.ok(&["settings", "golden_keep=0"]);
    g.env.ok(&["remove", "a", "--force"]);
    g.env.ok(&["remove", "b"]);
    wait_until("templates dropped", Duration::from_secs(20), || {
        g.template_dbs().is_empty()
    });
    g.pg.assert_no_slices();
    g.env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_session_left_open_on_the_template_does_not_stop_a_clone() {
    let g = Golden::new("");
    g.up_ok("a");
    let template = g.templates().pop().unwrap();
    // Someone opens the template and keeps a session there.
    g.pg.admin(&format!("alter database {template} allow_connections true"));
    let url = format!("{}/{template}", g.pg.admin_url.rsplit_once('/').unwrap().0);
    let bin = crate::pg_server::pg_bin_dir().unwrap().join("psql");
    let mut session = std::process::Command::new(bin)
        .args(["-X", "-q", "-d", url.as_str(), "-c", "select pg_sleep(120)"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the session is open", Duration::from_secs(10), || {
        if let Ok(Some(status)) = session.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(session.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the session ended ({status}): {err}");
        }
        g.pg.admin(&format!(
            "select count(*) from pg_stat_activity where datname = '{template}'"
        ))[0][0]
            != "0"
    });
    g.up_ok("b");
    let events = g.events("b");
    assert!(
        events.contains("from golden template") && !events.contains("clone_fallback"),
        "{events}"
    );
    assert_eq!(g.seeds(), 1);
    assert_eq!(
        g.pg.query(&g.db_url("b"), "select count(*) from notes"),
        vec![vec!["100".to_owned()]]
    );
    let _ = session.kill();
    let _ = session.wait();
    g.env.ok(&["settings", "golden_keep=0"]);
    for w in ["a", "b"] {
        g.env.ok(&["remove", w]);
    }
    wait_until("templates dropped", Duration::from_secs(20), || {
        g.template_dbs().is_empty()
    });
    g.pg.assert_no_slices();
    g.env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_daemon_killed_mid_build_leaves_a_half_built_template_that_the_next_daemon_rebuilds() {
    // The first build writes a marker row and hangs; the daemon is killed there.
    let g = Golden::new("");
    let log = g.log.display().to_string();
    std::fs::write(
        g.env.repo.join("seed.sh"),
        format!(
            "set -e\necho run >> '{log}'\n\
             if [ \"$(wc -l < '{log}')\" -eq 1 ]; then\n\
               psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c \"insert into notes values (0, 'half')\"\n\
               sleep 300\n\
             fi\n\
             psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c \"insert into notes select g, 'row ' || g from generate_series(1, 100) g\"\n"
        ),
    )
    .unwrap();
    g.env.git(&["commit", "-qam", "a slow seed"]);
    let vars = g.vars();
    let mut up = std::process::Command::new(binky_bin())
        .args(["up", "a", "--timeout", "120s"])
        .current_dir(&g.env.repo)
        .env("BINKY_HOME", &g.env.home)
        .envs(vars.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the seed runs", Duration::from_secs(60), || g.seeds() == 1);
    let daemon = g.env.daemon_pid().expect("a daemon");
    signal(daemon, 9);
    // The seed the dead daemon started is killed too (as a crash of the machine would).
    for pid in g.env.our_processes() {
        signal(pid, 9);
    }
    let _ = up.kill();
    let _ = up.wait();
    assert_eq!(
        g.templates().len(),
        1,
        "no half-built template to test with"
    );
    assert!(g.goldens()[0]["state"] == "building");
    // The next daemon drops the half-built template and builds it again.
    g.up_ok("a");
    assert_eq!(g.seeds(), 2);
    let a = g.db_url("a");
    assert_eq!(
        g.pg.query(
            &a,
            "select count(*), count(*) filter (where body = 'half') from notes"
        ),
        vec![vec!["100".to_owned(), "0".to_owned()]],
        "the world was cloned from the half-built template"
    );
    assert!(g.events("a").contains("building golden template"));
    g.env.ok(&["settings", "golden_keep=0"]);
    g.env.ok(&["remove", "a"]);
    wait_until("templates dropped", Duration::from_secs(20), || {
        g.template_dbs().is_empty()
    });
    g.pg.assert_no_slices();
    g.env.assert_nothing_left(&["a"]);
}

#[test]
fn a_service_whose_adapter_cannot_clone_falls_back_to_migrate_and_seed_and_says_why() {
    let server = crate::redis_server::RedisServer::start();
    let env = Env::new(&format!(
        r#"
[project]
name = "cachey"
{{range}}

[services.cache]
adapter = "redis"
admin_url = "${{env.REDIS_ADMIN}}"
clone_from = "golden"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["cache"]
env = {{ REDIS_URL = "${{cache.url}}" }}
"#
    ));
    let out = env.binky_env(&["up", "a"], &[("REDIS_ADMIN", server.admin_url.as_str())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events = env.ok(&["events", "a", "-n", "200"]);
    assert!(
        events.contains("clone_fallback") && events.contains("cannot clone"),
        "{events}"
    );
    assert!(served_env(env.port_of("a", "api"))["REDIS_URL"]
        .as_str()
        .unwrap()
        .starts_with("redis://"));
    env.ok(&["remove", "a"]);
    env.assert_nothing_left(&["a"]);
}

/// A data-only group world whose database is cloned from the ready golden template runs no
/// `migrate`, so it gets nothing of the directory only the db's `migrate` runs in: the main
/// checkout's `backend/.venv` is not brought (`deferred` in `binky status`). A data-only
/// world whose template is not ready (a migration changed) builds it, and gets the venv
/// before its `migrate` runs (which needs it).
#[test]
fn a_data_only_world_cloning_a_ready_template_gets_nothing_of_its_migrates_directory() {
    let pg = PgServer::start();
    let env = Env::new(&format!(
        r#"
[project]
name = "shop"
{{range}}
copy = ["backend/.venv"]

[services.db]
adapter = "postgres"
admin_url = "${{env.PG_ADMIN}}"
workdir = "backend"
migrate = "test -f .venv/ok && psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -f schema.sql"
clone_from = "golden"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
env = {{ DATABASE_URL = "${{db.url}}" }}

[groups]
data = ["db"]
"#
    ));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    std::fs::create_dir_all(env.repo.join("backend")).unwrap();
    std::fs::write(env.repo.join("backend/schema.sql"), SCHEMA).unwrap();
    std::fs::write(env.repo.join(".gitignore"), "backend/.venv/\n").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "schema"]);
    std::fs::create_dir_all(env.repo.join("backend/.venv")).unwrap();
    std::fs::write(env.repo.join("backend/.venv/ok"), "installed\n").unwrap();
    let up = |args: &[&str]| {
        let out = env.binky_env(args, &vars);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    // The whole world builds the template (its migrate uses the venv).
    up(&["up", "w"]);
    assert!(env.worktree("w").join("backend/.venv/ok").is_file());
    // A data-only world clones it: no venv.
    up(&["up", "d", "--group", "data"]);
    assert!(
        !env.worktree("d").join("backend/.venv").exists(),
        "a world that runs nothing in backend/ got its venv: {}",
        env.ok(&["events", "d", "-n", "200"])
    );
    let status = env.ok(&["status", "d"]);
    assert!(
        status.contains("backend/.venv") && status.contains("deferred"),
        "{status}"
    );
    assert!(env
        .ok(&["events", "d", "-n", "200"])
        .contains("cloned postgres slice"));
    // A changed migration: the next data-only world builds a new template, venv first.
    std::fs::write(
        env.repo.join("backend/schema.sql"),
        format!("{SCHEMA}create table tags (id int primary key);\n"),
    )
    .unwrap();
    env.git(&["commit", "-qam", "a new table"]);
    up(&["up", "e", "--group", "data"]);
    assert!(env.worktree("e").join("backend/.venv/ok").is_file());
    for w in ["w", "d", "e"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["w", "d", "e"]);
}
