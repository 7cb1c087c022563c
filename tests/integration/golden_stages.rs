//! Golden templates built in stages and grown, end to end with a real PostgreSQL and a
//! migration tool of the test's own (`migrate.sh`: applies `migrations/NNN.sql` in order, each
//! once, recording it in a table `applied`, and logs every run and every migration it
//! applied): a new migration builds the new template on the one before and runs only that
//! migration; a failed seed keeps the migrated stage; a tool that cannot apply on top falls
//! back to an empty database; and a template outlives its last world until `golden rm`, its
//! age (`golden_keep`) or disk pressure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::*;
use crate::pg_server::PgServer;

const CONFIG: &str = r#"
[project]
name = "grow"
{range}

[services.db]
adapter = "postgres"
ADMIN
migrate = "sh migrate.sh"
seed = "sh seed.sh"
clone_from = "golden"
"#;

/// The migration tool: `migrations/*.sql` in order, each applied once (in a transaction with
/// its row in `applied`); every run and every applied file logged under `log`.
fn migrate_sh(log: &Path) -> String {
    format!(
        r#"set -e
echo run >> '{log}/migrate-runs.log'
psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c "create table if not exists applied (name text primary key)"
for f in $(ls migrations/*.sql | sort); do
  n=$(basename "$f")
  seen=$(psql "$DATABASE_URL" -X -qtA -c "select 1 from applied where name = '$n'")
  if [ -z "$seen" ]; then
    psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -1 -f "$f" -c "insert into applied values ('$n')"
    echo "$n" >> '{log}/applied.log'
  fi
done
"#,
        log = log.display()
    )
}

/// A seed that logs its run, runs `extra`, and inserts `rows` notes.
fn seed_sh(log: &Path, extra: &str, rows: u32) -> String {
    format!(
        "set -e\necho run >> '{}/seed-runs.log'\n{extra}\npsql \"$DATABASE_URL\" -X -q -v ON_ERROR_STOP=1 -c \"insert into notes select g, 'row ' || g from generate_series(1, {rows}) g\"\n",
        log.display()
    )
}

struct Grow {
    pg: Option<PgServer>,
    env: Env,
    log: PathBuf,
}

impl Grow {
    /// A project with migrations 001 and 002 and a seed of 100 rows; on a server of the
    /// test's own, or (`managed`) on binky's.
    fn new(managed: bool, seed_extra: &str) -> Grow {
        let pg = (!managed).then(PgServer::start);
        let admin = if managed {
            ""
        } else {
            "admin_url = \"${env.PG_ADMIN}\""
        };
        let env = Env::new(&CONFIG.replace("ADMIN", admin));
        let log = env.dir.path().join("logs");
        std::fs::create_dir_all(&log).unwrap();
        let g = Grow { pg, env, log };
        g.write("migrate.sh", &migrate_sh(&g.log));
        g.write("seed.sh", &seed_sh(&g.log, seed_extra, 100));
        g.write(
            "migrations/001.sql",
            "create table notes (id int primary key, body text not null);\n",
        );
        g.write(
            "migrations/002.sql",
            "create table tags (id int primary key, name text);\n",
        );
        g.commit("two migrations, a seed");
        g
    }

    fn write(&self, file: &str, text: &str) {
        let p = self.env.repo.join(file);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn commit(&self, msg: &str) {
        self.env.git(&["add", "-A"]);
        self.env.git(&["commit", "-qm", msg]);
    }

    fn up(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["up"];
        all.extend_from_slice(args);
        match &self.pg {
            Some(pg) => self
                .env
                .binky_env(&all, &[("PG_ADMIN", pg.admin_url.as_str())]),
            None => self.env.binky(&all),
        }
    }

    fn up_ok(&self, args: &[&str]) {
        let out = self.up(args);
        assert!(out.status.success(), "up {args:?}: {}", stderr(&out));
    }

    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.log.join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn migrate_runs(&self) -> usize {
        self.lines("migrate-runs.log").len()
    }

    fn seed_runs(&self) -> usize {
        self.lines("seed-runs.log").len()
    }

    fn query(&self, world: &str, sql: &str) -> Vec<Vec<String>> {
        let url = self.env.env_of(world)["DB_URL"]
            .as_str()
            .unwrap()
            .to_owned();
        self.pg
            .as_ref()
            .expect("the test's server")
            .query(&url, sql)
    }

    fn goldens(&self) -> Vec<serde_json::Value> {
        serde_json::from_str::<serde_json::Value>(&self.env.ok(&["golden", "ls", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// The template a world's copy came from (its key), from the world's events.
    fn template_of(&self, world: &str) -> serde_json::Value {
        let events = self.env.ok(&["events", world, "-n", "200"]);
        self.goldens()
            .into_iter()
            .find(|g| {
                events.contains(&format!(
                    "from golden template {}",
                    g["name"].as_str().unwrap()
                ))
            })
            .unwrap_or_else(|| panic!("{world} was not cloned: {events}"))
    }

    /// Template databases (and their migrated stages) on the test's server.
    fn template_dbs(&self) -> Vec<String> {
        self.pg
            .as_ref()
            .unwrap()
            .slice_databases()
            .into_iter()
            .filter(|d| d.starts_with("bk_golden_"))
            .collect()
    }
}

#[test]
fn a_new_golden_migration_on_a_branch_builds_its_template_on_the_previous_one_running_only_that_migration(
) {
    let g = Grow::new(false, "");
    g.up_ok(&["main1"]);
    assert_eq!(g.lines("applied.log"), ["001.sql", "002.sql"]);
    let first = g.template_of("main1");
    assert_eq!(first["how"], "built from an empty database", "{first}");
    assert_eq!(first["base"], serde_json::Value::Null);
    // A branch adds a migration; a world of it gets a template of its own.
    g.env.git(&["checkout", "-q", "-b", "feature"]);
    g.write(
        "migrations/003.sql",
        "alter table notes add column tag text not null default 'new';\n",
    );
    g.commit("a third migration");
    g.env.git(&["checkout", "-q", "main"]);
    g.up_ok(&["feat", "--from", "feature"]);
    // Its build ran migrate once more, and that run applied 003 alone.
    assert_eq!(
        g.lines("applied.log"),
        ["001.sql", "002.sql", "003.sql"],
        "the new template's build applied more than the new migration"
    );
    assert_eq!(g.migrate_runs(), 2);
    assert_eq!(g.seed_runs(), 2);
    let second = g.template_of("feat");
    assert_ne!(second["key"], first["key"]);
    assert_eq!(second["base"], first["key"]);
    let key12 = &first["key"].as_str().unwrap()[..12];
    assert_eq!(
        second["how"].as_str().unwrap(),
        format!("grown from {key12}: migrate ran on a copy of its migrated stage")
    );
    // The seed ran on an unseeded copy: 100 rows, not 200 (nor a duplicate key).
    assert_eq!(
        g.query("feat", "select count(*), count(tag) from notes"),
        vec![vec!["100".to_owned(), "100".to_owned()]]
    );
    assert_eq!(
        g.query("feat", "select name from applied order by 1"),
        vec![
            vec!["001.sql".to_owned()],
            vec!["002.sql".to_owned()],
            vec!["003.sql".to_owned()]
        ]
    );
    // The first world is as it was.
    assert_eq!(
        g.query("main1", "select count(*) from information_schema.columns where table_name = 'notes' and column_name = 'tag'"),
        vec![vec!["0".to_owned()]]
    );
    // `golden ls` says how each was built.
    let ls = g.env.ok(&["golden", "ls"]);
    assert!(ls.contains("built from an empty database"), "{ls}");
    assert!(ls.contains(&format!("grown from {key12}")), "{ls}");
    let events = g.env.ok(&["events", "feat", "-n", "200"]);
    assert!(
        events.contains("on a copy of the migrated stage of")
            && !events.contains("golden_fallback"),
        "{events}"
    );
    // Each template is two databases: the template and its migrated stage.
    assert_eq!(g.template_dbs().len(), 4, "{:?}", g.template_dbs());
    g.env.ok(&["remove", "main1"]);
    g.env.ok(&["remove", "feat"]);
    g.env.assert_nothing_left(&["main1", "feat"]);
}

#[test]
fn a_failed_golden_seed_keeps_the_migrated_stage_and_the_retry_runs_the_seed_alone() {
    // The seed needs something outside the repository (a fixture server, say).
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("fixtures-ready");
    let g = Grow::new(
        false,
        &format!(
            "test -f '{}' || {{ echo 'seed: the fixture server does not answer' >&2; exit 3; }}",
            ready.display()
        ),
    );
    let out = g.up(&["a"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fixture server does not answer"),
        "{}",
        stderr(&out)
    );
    assert_eq!((g.migrate_runs(), g.seed_runs()), (1, 1));
    let ls = g.env.ok(&["golden", "ls"]);
    assert!(
        ls.contains("failed") && ls.contains("its migrated stage is kept"),
        "{ls}"
    );
    // The fixture is back: the next `up` runs the seed alone.
    std::fs::write(&ready, "").unwrap();
    g.up_ok(&["a"]);
    assert_eq!(g.migrate_runs(), 1, "the retry ran migrate again");
    assert_eq!(g.seed_runs(), 2);
    assert_eq!(
        g.query("a", "select count(*) from notes"),
        vec![vec!["100".to_owned()]]
    );
    let t = g.template_of("a");
    assert!(
        t["how"]
            .as_str()
            .unwrap()
            .ends_with("seed run again on its kept migrated stage"),
        "{t}"
    );
    // A fixed seed file is a new template: its migrated stage is the old one's, as it is.
    g.write("seed.sh", &seed_sh(&g.log, "", 50));
    g.commit("seed fewer rows");
    g.up_ok(&["b"]);
    assert_eq!(g.migrate_runs(), 1, "a seed change ran migrate");
    assert_eq!(g.seed_runs(), 3);
    assert_eq!(
        g.query("b", "select count(*) from notes"),
        vec![vec!["50".to_owned()]]
    );
    let tb = g.template_of("b");
    assert!(
        tb["how"]
            .as_str()
            .unwrap()
            .starts_with("copied from the migrated stage of"),
        "{tb}"
    );
    g.env.ok(&["remove", "a"]);
    g.env.ok(&["remove", "b"]);
    g.env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_golden_template_that_cannot_grow_on_the_previous_one_is_built_from_an_empty_database_and_says_why(
) {
    // A tool that applies every file each time (no record of what it applied), and no seed:
    // the template is its own migrated stage.
    let pg = PgServer::start();
    let env = Env::new(
        &CONFIG
            .replace("ADMIN", "admin_url = \"${env.PG_ADMIN}\"")
            .replace(
                "migrate = \"sh migrate.sh\"",
                "migrate = \"sh apply-all.sh\"",
            )
            .replace("seed = \"sh seed.sh\"\n", ""),
    );
    let runs = env.dir.path().join("runs.log");
    std::fs::write(
        env.repo.join("apply-all.sh"),
        format!(
            "set -e\necho run >> '{}'\ncat schema/*.sql | psql \"$DATABASE_URL\" -X -q -v ON_ERROR_STOP=1\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(env.repo.join("schema")).unwrap();
    std::fs::write(
        env.repo.join("schema/001.sql"),
        "create table notes (id int);\n",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "schema"]);
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let up = |w: &str| {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "up {w}: {}", stderr(&out));
    };
    let count = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    up("a");
    assert_eq!(count(), 1);
    std::fs::write(
        env.repo.join("schema/002.sql"),
        "create table tags (id int);\n",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "another table"]);
    up("b");
    // Tried on a copy of a's template (it fails: notes exists), then from an empty database.
    assert_eq!(count(), 3);
    let ls: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(&["golden", "ls", "--json"])).unwrap();
    assert_eq!(ls.len(), 2);
    let first = ls
        .iter()
        .find(|g| g["base"].is_null() && g["how"] == "built from an empty database")
        .expect("a's template");
    let key12 = &first["key"].as_str().unwrap()[..12];
    let second = ls.iter().find(|g| g["key"] != first["key"]).unwrap();
    assert!(
        second["how"].as_str().unwrap().starts_with(&format!(
            "built from an empty database: migrate on a copy of {key12} failed"
        )),
        "{second}"
    );
    assert_eq!(second["base"], serde_json::Value::Null);
    let events = env.ok(&["events", "b", "-n", "200"]);
    assert!(
        events.contains("golden_fallback")
            && events.contains("building it from an empty database instead"),
        "{events}"
    );
    let url = env.env_of("b")["DB_URL"].as_str().unwrap().to_owned();
    assert_eq!(
        pg.query(
            &url,
            "select count(*) from information_schema.tables where table_name in ('notes', 'tags')"
        ),
        vec![vec!["2".to_owned()]]
    );
    // No seed: a template is one database, no stage of its own.
    let dbs: Vec<String> = pg
        .slice_databases()
        .into_iter()
        .filter(|d| d.starts_with("bk_golden_"))
        .collect();
    assert_eq!(dbs.len(), 2, "{dbs:?}");
    env.ok(&["remove", "a"]);
    env.ok(&["remove", "b"]);
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_golden_template_outlives_its_last_world_and_the_next_world_is_cloned_from_it_until_golden_rm()
{
    let g = Grow::new(false, "");
    g.up_ok(&["a"]);
    g.env.ok(&["remove", "a"]);
    // No world left: the template stays, and says until when.
    let ls = g.env.ok(&["golden", "ls"]);
    assert!(
        ls.contains("used by no world")
            && ls.contains("kept until")
            && ls.contains("golden_keep = 7d"),
        "{ls}"
    );
    assert_eq!(g.template_dbs().len(), 2);
    // The next world is a copy: nothing is built again.
    g.up_ok(&["b"]);
    assert_eq!(
        (g.migrate_runs(), g.seed_runs()),
        (1, 1),
        "the template was built again"
    );
    let events = g.env.ok(&["events", "b", "-n", "200"]);
    assert!(
        events.contains("from golden template") && !events.contains("building golden template"),
        "{events}"
    );
    assert_eq!(
        g.query("b", "select count(*) from notes"),
        vec![vec!["100".to_owned()]]
    );
    g.env.ok(&["remove", "b"]);
    // `golden rm` with no world left: the daemon drops it all the same.
    let key = g.goldens()[0]["key"].as_str().unwrap().to_owned();
    g.env.ok(&["golden", "rm", &key[..8]]);
    wait_until(
        "golden rm drops the template",
        Duration::from_secs(20),
        || g.template_dbs().is_empty(),
    );
    assert!(g.goldens().is_empty());
    g.pg.as_ref().unwrap().assert_no_slices();
    g.env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn an_unused_golden_template_goes_once_older_than_golden_keep() {
    let g = Grow::new(false, "");
    let bad = g.env.binky(&["settings", "golden_keep=7"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("golden_keep takes a length of time"),
        "{}",
        stderr(&bad)
    );
    g.up_ok(&["a"]);
    g.env.ok(&["remove", "a"]);
    assert_eq!(g.goldens().len(), 1);
    assert!(!g.goldens()[0]["kept_until"].is_null());
    g.env.ok(&["settings", "golden_keep=1s"]);
    wait_until(
        "the template older than golden_keep goes",
        Duration::from_secs(20),
        || g.template_dbs().is_empty(),
    );
    assert!(g.goldens().is_empty());
    g.pg.as_ref().unwrap().assert_no_slices();
    g.env.assert_nothing_left(&["a"]);
}

#[test]
fn an_unused_golden_template_on_binkys_own_server_goes_under_disk_pressure_and_one_in_use_stays() {
    let g = Grow::new(true, "");
    g.up_ok(&["a"]);
    // b, on one more migration, has a template of its own; then b goes.
    g.write("migrations/003.sql", "create table more (id int);\n");
    g.commit("a third migration");
    g.up_ok(&["b"]);
    let keys: Vec<String> = g
        .goldens()
        .iter()
        .map(|t| t["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys.len(), 2);
    let of_a = g
        .goldens()
        .into_iter()
        .find(|t| t["used_by"].as_array().unwrap().iter().any(|u| u == "a/db"))
        .unwrap()["key"]
        .clone();
    g.env.ok(&["remove", "b"]);
    assert_eq!(g.goldens().len(), 2, "b's template went with b");
    // Less free disk than the reserve: the unused template goes, a's stays.
    g.env.ok(&["settings", "disk_reserve_gib=1000000"]);
    wait_until("the unused template goes", Duration::from_secs(30), || {
        g.goldens().len() == 1
    });
    assert_eq!(g.goldens()[0]["key"], of_a);
    g.env.ok(&["settings", "disk_reserve_gib=0"]);
    g.env.ok(&["remove", "a"]);
    g.env.assert_nothing_left(&["a", "b"]);
}
