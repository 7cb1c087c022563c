//! Writing an adapter service: `[services.X]` with `adapter`, `admin_url` when binky does
//! not run the server itself, `depends_on`, and the `migrate` the plan found.

use serde_yaml_ng::{Mapping, Value};

use super::{env_placeholder, EnvLine, Writer, ADAPTER_KEYS};
use crate::init::images::{admin_example, managed_server};
use crate::init::plan::{Kind, SvcId};
use crate::init::toml_out::{one_line, q, toml_list};
use crate::init::values::{
    env_entries, is_project_path, rebase, scalar, string_list_env_file, volumes,
};

impl Writer {
    /// An adapter service: `[services.X]` with `adapter` (and `admin_url` when binky does
    /// not run the server itself), `depends_on` and `migrate`; what the container had that
    /// a slice cannot carry becomes a TODO.
    pub(in crate::init) fn render_adapter(&mut self, i: SvcId, out: &mut String) {
        let Kind::Adapter(adapter) = self.plan.svcs[i].kind else {
            return;
        };
        let name = self.plan.svcs[i].name.clone();
        let def = self.plan.svcs[i].def.clone();
        let admin = Admin::of(adapter, &name, &def);
        if admin.server.is_none() {
            self.plan.reason(
                &admin.var,
                format!(
                    "the admin address of {name}'s server, e.g. {}",
                    admin.example
                ),
            );
        }
        out.push_str(&format!("[services.{name}]\n"));
        self.write_adapter_source(i, out);
        admin.write_comment(out);
        out.push_str(&format!("adapter = {}\n", q(adapter)));
        if admin.server.is_none() {
            out.push_str(&format!(
                "admin_url = {}\n",
                q(&format!("${{env.{}}}", admin.var))
            ));
        }
        let (deps, _) = self.depends_on(i);
        if !deps.is_empty() {
            out.push_str(&format!("depends_on = {}\n", toml_list(&deps)));
        }
        let migrated = self.render_migration(i, out);
        if adapter == "postgres" && !migrated {
            out.push_str("# migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f schema.sql\"\n# seed = \"…\"\n# clone_from = \"golden\"   # migrate and seed once; every world is a server-side copy\n");
        }
        out.push('\n');
        self.container_leftovers(&name, adapter, &def);
        self.other_keys(i, ADAPTER_KEYS);
        let line = self.adapter_mapped_line(i, adapter, &admin);
        self.mapped.push(line);
    }

    /// The comment under an adapter's `[services.X]` on where it came from: the image, and
    /// which of the container's settings a slice does not need.
    fn write_adapter_source(&mut self, i: SvcId, out: &mut String) {
        let name = self.plan.svcs[i].name.clone();
        let image = self.plan.svcs[i].image.clone().unwrap_or_default();
        let def = &self.plan.svcs[i].def;
        let mut container_bits: Vec<&str> = Vec::new();
        if !env_entries(def).is_empty() {
            container_bits.push("environment");
        }
        if def.contains_key("ports") || def.contains_key("expose") {
            container_bits.push("ports");
        }
        if def.contains_key("volumes") {
            container_bits.push("volumes");
        }
        if def.contains_key("healthcheck") {
            container_bits.push("healthcheck");
        }
        if let Some(from) = self.plan.svcs[i]
            .cmd_from
            .clone()
            .filter(|_| image.is_empty())
        {
            out.push_str(&format!("# {from}\n"));
        } else {
            out.push_str(&format!(
                "# compose: image {}",
                one_line(&self.plan.redact(&name, &image))
            ));
            if !container_bits.is_empty() {
                out.push_str(&format!(
                    "; not needed with a slice: its {}",
                    container_bits.join(", ")
                ));
            }
            out.push('\n');
        }
    }

    /// What the container had that a slice does not need, and what it might: TODOs for
    /// init scripts, mounted configuration, a custom image and server flags.
    fn container_leftovers(&mut self, name: &str, adapter: &str, def: &Mapping) {
        for (src, dst) in volumes(def) {
            if dst.contains("docker-entrypoint-initdb.d") {
                let src = self.plan.redact(name, &src);
                let hint = if adapter == "postgres" {
                    format!(" (e.g. migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f {src}\")")
                } else {
                    String::new()
                };
                self.plan.todo(format!("{name}: {src} is mounted into {dst}, which the image runs at first start: make it the `migrate` command{hint}"));
            } else if is_project_path(&src) {
                self.plan.todo(format!("{name}: {src} is mounted at {dst} (server configuration?): set it on the shared server; a slice cannot carry it"));
            }
        }
        if def.get("build").is_some_and(|b| !b.is_null()) {
            self.plan.todo(format!("{name}: compose builds a custom {adapter} image: install what it adds (extensions, configuration) on the shared server"));
        }
        if def.contains_key("command") {
            self.plan.todo(format!("{name}: its `command` (server flags) is not carried: set them on the shared server if they matter"));
        }
    }

    /// The adapter service's line in the summary of what was mapped.
    fn adapter_mapped_line(&self, i: SvcId, adapter: &str, admin: &Admin) -> String {
        let svc = &self.plan.svcs[i];
        let (name, raw) = (&svc.name, &svc.raw);
        let image = svc.image.clone().unwrap_or_default();
        let how = if let Some(server) = admin.server {
            format!("binky runs {server}")
        } else {
            format!("admin_url = ${{env.{}}}", admin.var)
        };
        let renamed = if raw != name {
            format!(" (renamed from {raw})")
        } else {
            String::new()
        };
        let source = match &svc.cmd_from {
            Some(from) if image.is_empty() => from.clone(),
            _ => format!("image {}", one_line(&image)),
        };
        format!("{name}{renamed}: {source} → adapter {adapter} ({how})")
    }

    /// An adapter service's `migrate`, `clone_from`, `workdir` and the settings its
    /// migration tool reads (the owner's `env_file` and plain `env`), when
    /// [`Writer::plan_migrations`] found them; whether it wrote any.
    pub(in crate::init) fn render_migration(&mut self, db: SvcId, out: &mut String) -> bool {
        let Some(m) = self.plan.migrations.get(&db).cloned() else {
            return false;
        };
        let name = self.plan.svcs[db].name.clone();
        let owner = self.plan.svcs[m.owner].name.clone();
        // `alembic upgrade`, also when it runs from a venv (`.venv/bin/alembic upgrade`).
        let tool = m
            .cmd
            .split_whitespace()
            .take(2)
            .map(|w| w.rsplit('/').next().unwrap_or(w))
            .collect::<Vec<_>>()
            .join(" ");
        // Settings by parts reach `migrate` when the owner's env gives them as this
        // service's tokens: a golden build resolves `${db.host}` to its template's.
        let lines = self.env_lines(m.owner);
        let parts_given = lines
            .iter()
            .filter_map(|l| l.value.as_deref())
            .any(|v| v.contains(&format!("${{{name}.host}}")));
        if let Some(why) = m.blocked.as_ref().filter(|_| !parts_given) {
            out.push_str(&format!(
                "# {owner}'s code migrates with {tool}, but {why}:\n"
            ));
            if let Some(w) = &m.workdir {
                out.push_str(&format!("# workdir = {}\n", q(w)));
            }
            out.push_str(&format!("# migrate = {}\n", q(&m.cmd)));
            if let Some((seed, _)) = &m.seed {
                out.push_str(&format!("# seed = {}\n", q(seed)));
            }
            out.push_str("# clone_from = \"golden\"\n");
            self.plan.todo(format!(
                "{name}: migrate = {} is commented out: {owner}'s {why}",
                q(&m.cmd)
            ));
            return true;
        }
        out.push_str(&format!("# {owner}'s code migrates with {tool}: it runs once, in a golden template every\n# world's database is copied from (again when a migration changes).\n"));
        if let Some(w) = &m.workdir {
            out.push_str(&format!("workdir = {}\n", q(w)));
        }
        out.push_str(&format!("migrate = {}\n", q(&m.cmd)));
        if let Some((seed, from)) = &m.seed {
            out.push_str(&format!("# seed: from {from}\nseed = {}\n", q(seed)));
        }
        out.push_str("clone_from = \"golden\"\n");
        self.mapped.push(format!(
            "{name}: migrate = {} in {}, clone_from golden",
            m.cmd,
            m.workdir.as_deref().unwrap_or(".")
        ));
        // The settings the tool loads, as the owner has them: env_file, and env values
        // that name no other service (their slices may not exist yet when it runs).
        let def = self.plan.svcs[m.owner].def.clone();
        let files: Vec<String> = string_list_env_file(&def)
            .iter()
            .map(|f| self.plan.interpolate(f))
            .map(|f| rebase(&f, m.workdir.as_deref()))
            .collect();
        if !files.is_empty() {
            out.push_str(&format!("env_file = {}\n", toml_list(&files)));
        }
        // All of them: in a golden build, this service's tokens are its template's, and
        // `migrate` waits for the other slices its env names.
        // (Not what names the owner itself: `${self.port}` would be this service's here.)
        let kept: Vec<(String, String)> = lines
            .into_iter()
            .filter_map(|l| Some((l.key, l.value?)))
            .filter(|(_, v)| !v.contains("${self."))
            .collect();
        // Written once what every process shares is known: what [defaults.env] gives
        // `migrate` too is not repeated (see `Writer::render_services`).
        if !kept.is_empty() {
            out.push_str(&env_placeholder(db));
            let lines = kept
                .into_iter()
                .map(|(key, v)| EnvLine {
                    key,
                    value: Some(v),
                    comment: None,
                })
                .collect();
            self.migrate_env.insert(db, lines);
        }
        true
    }
}

/// How binky reaches an adapter's server: the one it runs itself, or `${env.X_ADMIN_URL}`.
struct Admin {
    /// `X_ADMIN_URL`.
    var: String,
    /// An admin address for the comment, at the port compose publishes when it does.
    example: String,
    /// The server binky runs itself for this adapter, when it does.
    server: Option<&'static str>,
}

impl Admin {
    /// How binky reaches adapter service `name`'s server (compose definition `def`).
    fn of(adapter: &str, name: &str, def: &Mapping) -> Admin {
        let host_port = def.get("ports").and_then(|p| match p {
            Value::Sequence(items) => items.iter().find_map(|s| {
                let s = scalar(s)?;
                let parts: Vec<&str> = s.split(':').collect();
                (parts.len() >= 2)
                    .then(|| parts[parts.len() - 2].parse().ok())
                    .flatten()
            }),
            _ => None,
        });
        Admin {
            var: format!("{}_ADMIN_URL", name.to_ascii_uppercase().replace('-', "_")),
            example: admin_example(adapter, host_port),
            server: managed_server(adapter),
        }
    }

    /// The comment on who runs the server, and how to point binky at another.
    fn write_comment(&self, out: &mut String) {
        let Admin { var, example, .. } = self;
        if let Some(server) = self.server {
            out.push_str(&format!("# binky runs {server} for it, from the installed binaries. To use a server you\n# already run instead: admin_url = \"${{env.{var}}}\" (e.g. {example}).\n"));
        } else {
            out.push_str(&format!("# {var}: the shared server's admin address, e.g. {example}.\n# binky runs only PostgreSQL, Redis and MariaDB itself when admin_url is left out.\n"));
        }
    }
}
