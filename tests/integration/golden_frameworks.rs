//! The golden template is never stale with real migration tools whose `migrate` command
//! names no migration file (Alembic's `upgrade head`, Django's `manage.py migrate`, yoyo's
//! `apply` reading its sources from `yoyo.ini`): a committed new migration makes the next
//! world's template anew, and that world has the new table.

use std::path::PathBuf;

use crate::harness::*;
use crate::pg_server::PgServer;

/// The venv `scripts/test` makes with the migration tools (alembic, Django, yoyo).
fn tools() -> PathBuf {
    test_cache(
        "BINKY_TEST_FRAMEWORKS",
        "frameworks",
        &["bin/alembic", "bin/yoyo"],
    )
    .join("bin")
}

fn config(migrate: &str, workdir: &str) -> String {
    format!(
        r#"
[project]
name = "fw"
{{range}}

[services.db]
adapter = "postgres"
admin_url = "${{env.PG_ADMIN}}"
migrate = "{migrate}"
clone_from = "golden"
workdir = "{workdir}"
"#
    )
}

struct Project {
    pg: PgServer,
    env: Env,
    path: String,
}

impl Project {
    fn new(migrate: &str, workdir: &str, files: &[(&str, &str)]) -> Project {
        let bin = tools();
        let pg = PgServer::start();
        let env = Env::new(&config(migrate, workdir));
        for (f, text) in files {
            let p = env.repo.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        env.git(&["add", "-A"]);
        env.git(&["commit", "-qm", "first migration"]);
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Project { pg, env, path }
    }

    fn up(&self, world: &str) -> String {
        let out = self.env.binky_env(
            &["up", world],
            &[("PG_ADMIN", &self.pg.admin_url), ("PATH", &self.path)],
        );
        assert!(out.status.success(), "up {world}: {}", stderr(&out));
        stderr(&out)
    }

    fn commit(&self, file: &str, text: &str) {
        let p = self.env.repo.join(file);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self.env.git(&["add", "-A"]);
        self.env.git(&["commit", "-qm", "a new migration"]);
    }

    fn has_table(&self, world: &str, table: &str) -> bool {
        let url = self.env.env_of(world)["DB_URL"]
            .as_str()
            .unwrap()
            .to_owned();
        let rows = self.pg.query(
            &url,
            &format!("select count(*) from information_schema.tables where table_name = '{table}'"),
        );
        rows == vec![vec!["1".to_owned()]]
    }

    /// The first world, a committed migration, a second world with the new table.
    fn prove(&self, file: &str, text: &str, old: &str, new: &str) {
        let first = self.up("w1");
        assert!(!first.contains("golden-key"), "{first}");
        assert!(!first.contains("covers only"), "{first}");
        assert!(self.has_table("w1", old) && !self.has_table("w1", new));
        self.commit(file, text);
        self.up("w2");
        assert!(
            self.has_table("w2", old) && self.has_table("w2", new),
            "w2 was made from the template of before the new migration"
        );
        let keys: Vec<serde_json::Value> =
            serde_json::from_str(&self.env.ok(&["golden", "ls", "--json"])).unwrap();
        assert_eq!(
            keys.len(),
            2,
            "one template per set of migrations: {keys:?}"
        );
        // The second grew from the first: the tool applied only the new migration on a
        // copy of the first one's.
        let first = keys.iter().find(|k| k["base"].is_null()).expect("w1's");
        let second = keys.iter().find(|k| k["key"] != first["key"]).unwrap();
        assert_eq!(second["base"], first["key"], "{keys:?}");
        assert!(
            second["how"].as_str().unwrap().starts_with("grown from "),
            "{keys:?}"
        );
        // The first world is left as it was.
        assert!(!self.has_table("w1", new));
        self.env.ok(&["remove", "w1", "--force"]);
        self.env.ok(&["remove", "w2", "--force"]);
        self.env.assert_nothing_left(&["w1", "w2"]);
    }
}

const ALEMBIC_ENV: &str = r#"import os
from alembic import context
from sqlalchemy import create_engine

url = os.environ["DATABASE_URL"].replace("postgres://", "postgresql+psycopg2://", 1)
with create_engine(url).connect() as conn:
    context.configure(connection=conn, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()
"#;

fn alembic_revision(rev: &str, down: &str, table: &str) -> String {
    format!(
        "import sqlalchemy as sa\nfrom alembic import op\n\nrevision = \"{rev}\"\ndown_revision = {down}\nbranch_labels = None\ndepends_on = None\n\n\ndef upgrade():\n    op.create_table(\"{table}\", sa.Column(\"id\", sa.Integer, primary_key=True))\n\n\ndef downgrade():\n    op.drop_table(\"{table}\")\n"
    )
}

#[test]
fn alembic_upgrade_head_a_new_revision_rebuilds_the_template() {
    let first = alembic_revision("0001", "None", "accounts");
    let p = Project::new(
        "alembic upgrade head",
        "backend",
        &[
            (
                "backend/alembic.ini",
                "[alembic]\nscript_location = %(here)s/db/schema_changes\n",
            ),
            ("backend/db/schema_changes/env.py", ALEMBIC_ENV),
            (
                "backend/db/schema_changes/versions/0001_accounts.py",
                &first,
            ),
            ("backend/app.py", "print('api')\n"),
        ],
    );
    p.prove(
        "backend/db/schema_changes/versions/0002_invoices.py",
        &alembic_revision("0002", "\"0001\"", "invoices"),
        "accounts",
        "invoices",
    );
}

const DJANGO_SETTINGS: &str = r#"import os
from urllib.parse import unquote, urlparse

u = urlparse(os.environ["DATABASE_URL"])
SECRET_KEY = "test"
INSTALLED_APPS = ["notes"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": u.path.lstrip("/"),
        "USER": unquote(u.username),
        "PASSWORD": unquote(u.password),
        "HOST": u.hostname,
        "PORT": u.port,
    }
}
"#;

const MANAGE_PY: &str = r#"import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_conf.settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"#;

fn django_migration(name: &str, deps: &str, model: &str) -> String {
    format!(
        "from django.db import migrations, models\n\n\nclass Migration(migrations.Migration):\n    dependencies = [{deps}]\n    operations = [\n        migrations.CreateModel(\n            name=\"{model}\",\n            fields=[(\"id\", models.BigAutoField(primary_key=True)), (\"title\", models.TextField())],\n        ),\n    ]\n# {name}\n"
    )
}

#[test]
fn django_manage_py_migrate_a_new_migration_rebuilds_the_template() {
    let first = django_migration("0001", "", "Note");
    p_django(&first);
}

fn p_django(first: &str) {
    let p = Project::new(
        "python manage.py migrate --noinput",
        ".",
        &[
            ("manage.py", MANAGE_PY),
            ("site_conf/__init__.py", ""),
            ("site_conf/settings.py", DJANGO_SETTINGS),
            ("notes/__init__.py", ""),
            ("notes/models.py", "from django.db import models\n"),
            ("notes/migrations/__init__.py", ""),
            ("notes/migrations/0001_initial.py", first),
        ],
    );
    p.prove(
        "notes/migrations/0002_tag.py",
        &django_migration("0002", "(\"notes\", \"0001_initial\")", "Tag"),
        "notes_note",
        "notes_tag",
    );
}

#[test]
fn yoyo_apply_with_sources_in_its_ini_a_new_sql_file_rebuilds_the_template() {
    let p = Project::new(
        "yoyo apply --batch --database \\\"$DATABASE_URL\\\"",
        ".",
        &[
            ("yoyo.ini", "[DEFAULT]\nsources = db/changes\n"),
            (
                "db/changes/0001.create-users.sql",
                "create table users (id int primary key);\n",
            ),
            ("README.md", "plain SQL changes applied by yoyo\n"),
        ],
    );
    p.prove(
        "db/changes/0002.create-orders.sql",
        "create table orders (id int primary key);\n",
        "users",
        "orders",
    );
}
