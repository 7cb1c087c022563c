//! Merging: the `migrate` of each PostgreSQL or MySQL-family adapter service whose user's
//! code has a migration tool (Alembic's `alembic.ini`, Django's `manage.py`).

use serde_yaml_ng::Value;

use super::{Kind, Migration, Plan, SvcId};
use crate::init::read::alembic::Alembic;
use crate::init::read::django::Django;
use crate::init::secrets::scan_urls;
use crate::init::values::{scalar, string_list, string_list_env_file};

impl Plan {
    /// `migrate` (and `clone_from = "golden"`) for each PostgreSQL or MySQL-family adapter
    /// service that a process whose code has `alembic.ini` or `manage.py` uses.
    pub(in crate::init) fn plan_migrations(&mut self) {
        for db in self.svcs.ids() {
            let Kind::Adapter(adapter) = self.svcs[db].kind else {
                continue;
            };
            if !matches!(adapter, "postgres" | "mysql" | "mariadb" | "percona") {
                continue;
            }
            let raw = self.svcs[db].raw.clone();
            for process in self.svcs.ids() {
                if self.svcs[process].kind != Kind::Process || !self.uses(process, db, &raw) {
                    continue;
                }
                let workdir = self.svcs[process].workdir.clone();
                // Alembic before Django: a directory with both migrates with Alembic.
                let cmd = if self.found.alembic.in_dir(workdir.as_deref()) {
                    Alembic::MIGRATE
                } else if self.found.django.in_dir(workdir.as_deref()) {
                    Django::MIGRATE
                } else {
                    continue;
                };
                // One golden template per process's code: two databases whose builds each
                // run that code's settings (naming both) would wait for each other for
                // ever. The one its DATABASE_URL names migrates (else the first); the
                // other is left to the person.
                let other = self
                    .migrations
                    .iter()
                    .find(|(_, m)| m.owner == process)
                    .map(|(d, _)| *d);
                if let Some(other) = other {
                    let (keep, left) = if self.database_url_names(process, db) {
                        (db, other)
                    } else {
                        (other, db)
                    };
                    let (kept, left) = (self.svcs[keep].name.clone(), self.svcs[left].name.clone());
                    let owner = self.svcs[process].name.clone();
                    self.todo(format!(
                        "{left}: no migrate: {owner}'s code migrates {kept} ({cmd}, with a golden template); if it migrates {left} too, give {left} its own migrate (`python manage.py migrate --database=…`, `alembic -x …`) without clone_from: two golden templates built with settings naming both databases would wait for each other"
                    ));
                    if keep == other {
                        break;
                    }
                    self.migrations.remove(&other);
                }
                let blocked = self.reads_parts(process, db, workdir.as_deref());
                let seed = (cmd == Alembic::MIGRATE)
                    .then(|| Alembic::seed(&self.found.files, workdir.as_deref()))
                    .flatten();
                self.migrations.insert(
                    db,
                    Migration {
                        cmd: cmd.to_owned(),
                        workdir,
                        owner: process,
                        seed,
                        blocked,
                    },
                );
                break;
            }
        }
    }

    /// Does `process`'s `DATABASE_URL` name the database service `db`?
    fn database_url_names(&mut self, process: SvcId, db: SvcId) -> bool {
        self.texts(process).iter().any(|(k, v)| {
            k.as_deref() == Some("DATABASE_URL")
                && scan_urls(v)
                    .iter()
                    .any(|h| self.alias.get(&h.host) == Some(&db))
        })
    }

    /// Does `process` use the database service `db` (compose name `raw`): `depends_on` it,
    /// or name it in its settings?
    fn uses(&mut self, process: SvcId, db: SvcId, raw: &str) -> bool {
        let deps: Vec<String> = match self.svcs[process].def.get("depends_on") {
            Some(Value::Mapping(m)) => m.keys().filter_map(scalar).collect(),
            v => string_list(v),
        };
        if deps.iter().any(|d| d == raw) {
            return true;
        }
        self.texts(process).iter().any(|(_, t)| {
            scan_urls(t)
                .iter()
                .any(|h| self.alias.get(&h.host) == Some(&db))
        })
    }

    /// Why `migrate` cannot reach the database of `process`'s settings, if it cannot:
    /// they read it from parts (`DB_HOST`, `DB_PORT`, …) and none of its Python settings
    /// reads `DATABASE_URL`, which is what `migrate` gets.
    fn reads_parts(&mut self, process: SvcId, db: SvcId, workdir: Option<&str>) -> Option<String> {
        let texts = self.texts(process);
        let mut files: Vec<(String, String)> = Vec::new();
        for f in string_list_env_file(&self.svcs[process].def) {
            if let Some(vars) = self.found.env_files.get(&f) {
                files.extend(vars.iter().cloned());
            }
        }
        let host_key = texts
            .iter()
            .filter_map(|(k, v)| Some((k.clone()?, v.clone())))
            .chain(files)
            .find(|(k, v)| {
                let k = k.to_ascii_uppercase();
                ["HOST", "SERVER", "HOSTNAME"]
                    .iter()
                    .any(|s| k.ends_with(s))
                    && self.alias.get(&v.trim().to_ascii_lowercase()) == Some(&db)
            })
            .map(|(k, _)| k)?;
        let reads_url = self.found.django.database_url_reader(workdir).is_some();
        (!reads_url).then(|| {
            format!("its settings read the database from parts ({host_key}, …); `migrate` gets only DATABASE_URL: have them read DATABASE_URL when it is set, then uncomment")
        })
    }
}
