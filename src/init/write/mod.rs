//! The one place `binky.toml` is written: [`Writer`] renders the [`Plan`] the findings
//! were merged into, service by service, then the header, the TODOs and the notes
//! (`file.rs`). What it cannot carry becomes a TODO; nothing else decides what a service
//! is.

use std::collections::BTreeMap;

use serde_yaml_ng::Value;

use crate::init::plan::{Kind, Plan, SvcId, Why};
use crate::init::toml_out::{one_line, q, toml_key};
use crate::init::values::{scalar, string_list};
use crate::init::Generated;

mod adapter;
mod addresses;
mod env;
mod file;
mod process;

#[cfg(test)]
pub(in crate::init) use process::compose_duration;

/// One line of `[services.X.env]`.
pub(in crate::init) struct EnvLine {
    /// The variable.
    pub(in crate::init) key: String,
    /// Its value; `None`: only the comment is written.
    pub(in crate::init) value: Option<String>,
    /// A comment above it.
    pub(in crate::init) comment: Option<String>,
}

/// The writer: the plan, and what writing it collects on the way.
pub(in crate::init) struct Writer {
    /// What the findings were merged into (its report keeps collecting TODOs, reasons and
    /// notes while the file is written).
    pub(in crate::init) plan: Plan,
    /// One line per service: what it became.
    pub(in crate::init) mapped: Vec<String>,
    /// Addresses of commented-out services met while writing one value: the tokens they
    /// become once the service is uncommented (see [`Writer::map_addresses`]).
    pub(in crate::init) commented_refs: Vec<String>,
    /// Write addresses of commented-out services as their tokens (the value once they run).
    pub(in crate::init) as_if_running: bool,
    /// While set, a process's `[services.X.env]` is kept here (by service) and a
    /// placeholder written, so that what every process shares becomes `[defaults.env]`.
    pub(in crate::init) defer_env: bool,
    pub(in crate::init) env_blocks: BTreeMap<SvcId, Vec<EnvLine>>,
    /// An adapter service's env for its `migrate` (the settings of the code it runs), by
    /// service, written with the processes' (see `env_blocks`).
    pub(in crate::init) migrate_env: BTreeMap<SvcId, Vec<EnvLine>>,
}

/// Write `plan` as `binky.toml`: the services, then (from a compose file) what its top
/// level holds that binky does not carry, then the header, TODOs and notes.
pub(in crate::init) fn write(plan: Plan) -> Generated {
    let mut w = Writer {
        plan,
        mapped: Vec::new(),
        commented_refs: Vec::new(),
        as_if_running: false,
        defer_env: false,
        env_blocks: BTreeMap::new(),
        migrate_env: BTreeMap::new(),
    };
    let body = w.render_services();
    if let Some(root) = w.plan.compose_root.take() {
        w.top_level(&root);
    }
    w.finish(&body)
}

impl Writer {
    /// Every service of the plan, adapter services first, then the rest in compose order;
    /// what every process shares is written once under `[defaults.env]`.
    pub(in crate::init) fn render_services(&mut self) -> String {
        let mut out = String::new();
        let adapters: Vec<SvcId> = self
            .plan
            .svcs
            .ids()
            .filter(|&i| matches!(self.plan.svcs[i].kind, Kind::Adapter(_)))
            .collect();
        if !adapters.is_empty() {
            out.push_str("# Adapter services: every world gets its own slice (a database, a key prefix, …)\n# of one shared server.\n\n");
        }
        for i in adapters {
            self.render_adapter(i, &mut out);
        }
        for i in self.plan.svcs.ids() {
            match self.plan.svcs[i].kind {
                Kind::Process => {
                    self.defer_env = true;
                    self.render_process(i, &mut out);
                    self.defer_env = false;
                }
                Kind::Unmapped => self.unmapped(i),
                Kind::Replaced(what) => self.replaced(i, what, &mut out),
                Kind::Commented(why) => self.commented(i, why, &mut out),
                Kind::Adapter(_) => {}
            }
        }
        // What every process service sets alike is written once, under [defaults.env].
        let blocks = std::mem::take(&mut self.env_blocks);
        let shared = shared_env(&blocks);
        for (i, lines) in &blocks {
            let name = self.plan.svcs[*i].name.clone();
            let block = env_table(&format!("services.{name}.env"), lines, &shared);
            out = out.replacen(&env_placeholder(*i), &block, 1);
        }
        for (db, lines) in std::mem::take(&mut self.migrate_env) {
            let name = self.plan.svcs[db].name.clone();
            let mut kept: Vec<EnvLine> = lines
                .into_iter()
                .filter(|l| l.value.as_ref() != shared.get(&l.key))
                .collect();
            if let Some(first) = kept.first_mut() {
                first.comment = Some(if shared.is_empty() {
                    "migrate gets DATABASE_URL (this database) and the settings of the code it runs:".to_owned()
                } else {
                    "migrate gets DATABASE_URL (this database), [defaults.env] and the rest of the settings of the code it runs:".to_owned()
                });
            }
            let block = env_table(&format!("services.{name}.env"), &kept, &BTreeMap::new());
            out = out.replacen(&env_placeholder(db), &block, 1);
        }
        if !shared.is_empty() {
            let lines: Vec<EnvLine> = shared
                .iter()
                .map(|(k, v)| EnvLine {
                    key: k.clone(),
                    value: Some(v.clone()),
                    comment: None,
                })
                .collect();
            let keys: Vec<&str> = shared.keys().map(String::as_str).collect();
            self.mapped.push(format!(
                "[defaults.env]: {} (every process service sets them alike)",
                keys.join(", ")
            ));
            let table = env_table("defaults.env", &lines, &BTreeMap::new());
            out = format!(
                "# Every process service below sets these alike: each service's env starts from\n# them (its own keys win), and so does a database's migrate and seed.{table}\n{out}"
            );
        }
        out
    }

    /// Is service `j` a live `[services.X]` of the file (not left out or commented out)?
    pub(in crate::init) fn in_output(&self, j: SvcId) -> bool {
        !matches!(
            self.plan.svcs[j].kind,
            Kind::Unmapped | Kind::Replaced(_) | Kind::Commented(_)
        )
    }

    /// A service written commented out: what it would be, under why it is not.
    pub(in crate::init) fn commented(&mut self, i: SvcId, why: Why, out: &mut String) {
        let name = self.plan.svcs[i].name.clone();
        let todos = self.plan.report.to_decide.len();
        let mapped = self.mapped.len();
        let mut block = String::new();
        self.render_process(i, &mut block);
        // What it leaves to decide is moot while it is commented out.
        self.plan.report.to_decide.truncate(todos);
        self.mapped.truncate(mapped);
        let (head, line) = match why {
            Why::TestOnly(what) => (
                format!("# {name} runs {what}: not part of a running world, so it is left out. To run\n# the tests against a world: `binky exec NAME -- <the command below>`."),
                format!("{name}: commented out ({what}; run it with binky exec)"),
            ),
            Why::OneShot => (
                format!("# {name} runs once before the others start (migrations, initial data): in binky a\n# database's `migrate` (and `seed`) does that, once per golden template or world."),
                format!("{name}: commented out (runs once before the others: the database's migrate does that)"),
            ),
            Why::NotInstalled(mc) => {
                let install = mc.install;
                self.plan.note(&format!("{} ({}) is not installed, so [services.{name}] is commented out: install it with {install}, then uncomment it (and the SMTP settings that name it)", mc.tool, mc.program));
                (
                    format!("# {name}: {} catches this world's mail, but `{}` is not installed here. Install\n# it with {install},\n# then uncomment this service and the settings below that name it.", mc.tool, mc.program),
                    format!("{name}: commented out ({} is not installed: {install})", mc.program),
                )
            }
        };
        out.push_str(&head);
        out.push('\n');
        for l in block.trim_end().lines() {
            if l.is_empty() {
                out.push_str("#\n");
            } else if l.starts_with('#') {
                out.push_str(&format!("#{l}\n"));
            } else {
                out.push_str(&format!("# {l}\n"));
            }
        }
        out.push('\n');
        self.mapped.push(line);
    }

    /// Infrastructure binky replaces: a comment in the file, no service.
    pub(in crate::init) fn replaced(&mut self, i: SvcId, what: &str, out: &mut String) {
        let raw = self.plan.svcs[i].raw.clone();
        out.push_str(&format!(
            "# {raw} ({what}) is left out: binky's proxy serves every world's services at\n# http://<service>.<world>.{}.localhost (and https with `https = true`); routing\n# labels and rules for it have no use here.\n\n",
            self.plan.project
        ));
        self.mapped.push(format!(
            "{raw}: left out ({what}; binky's proxy serves every world)"
        ));
    }

    /// `depends_on` (list or map form), only services that are in the file.
    pub(in crate::init) fn depends_on(&mut self, i: SvcId) -> (Vec<String>, Vec<String>) {
        let names: Vec<String> = match self.plan.svcs[i].def.get("depends_on") {
            Some(Value::Mapping(m)) => m.keys().filter_map(scalar).collect(),
            v => string_list(v),
        };
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for d in names {
            match self.plan.svcs.find(|s| s.raw == d) {
                Some(j) if self.in_output(j) && j != i => {
                    let n = self.plan.svcs[j].name.clone();
                    if !kept.contains(&n) {
                        kept.push(n);
                    }
                }
                _ => dropped.push(d),
            }
        }
        (kept, dropped)
    }

    /// A service binky cannot run: a TODO and a line of `mapped`.
    pub(in crate::init) fn unmapped(&mut self, i: SvcId) {
        let svc = &self.plan.svcs[i];
        let what = match &svc.image {
            Some(image) => format!("runs image {image}, which binky has no adapter for"),
            None => "has no image, build or command".to_owned(),
        };
        let line = format!(
            "{}: {what}, and compose gives no command to run on the host: run it yourself, or add [services.{}] with a cmd",
            svc.raw, svc.name
        );
        let raw = svc.raw.clone();
        let line = self.plan.redact(&raw, &line);
        self.plan.todo(line);
        self.mapped
            .push(format!("{raw}: not mapped (see the TODOs)"));
    }
}

/// Where [`Writer::render_process`] leaves the env table of service `i` while
/// [`Writer::render_services`] finds what every process shares.
pub(in crate::init) fn env_placeholder(i: SvcId) -> String {
    format!("\u{1}env of service {}\u{1}", i.0)
}

/// `[table]` with `lines`, less the entries `skip` has with the same value (nothing at all
/// when no line is left).
fn env_table(table: &str, lines: &[EnvLine], skip: &BTreeMap<String, String>) -> String {
    let kept: Vec<&EnvLine> = lines
        .iter()
        .filter(|l| l.value.is_none() || l.value.as_ref() != skip.get(&l.key))
        .collect();
    if kept.is_empty() {
        return String::new();
    }
    let mut out = format!("\n[{table}]\n");
    for l in kept {
        if let Some(c) = &l.comment {
            out.push_str(&format!("# {}\n", one_line(c)));
        }
        if let Some(v) = &l.value {
            out.push_str(&format!("{} = {}\n", toml_key(&l.key), q(v)));
        }
    }
    out
}

/// The env entries every one of two or more process services sets to the same value, with
/// no comment of their own and no `${self.…}` (which means each service's own).
fn shared_env(blocks: &BTreeMap<SvcId, Vec<EnvLine>>) -> BTreeMap<String, String> {
    if blocks.len() < 2 {
        return BTreeMap::new();
    }
    let plain = |lines: &Vec<EnvLine>| -> BTreeMap<String, String> {
        lines
            .iter()
            .filter(|l| l.comment.is_none())
            .filter_map(|l| Some((l.key.clone(), l.value.clone()?)))
            .filter(|(_, v)| !v.contains("${self."))
            .collect()
    };
    let mut all = blocks.values().map(plain);
    let mut shared = all.next().unwrap_or_default();
    for other in all {
        shared.retain(|k, v| other.get(k) == Some(v));
    }
    shared
}

/// Compose service keys that both renderings map, or that mean nothing on the host.
pub(in crate::init) const SERVICE_KEYS: &[&str] = &[
    "build",
    "command",
    "container_name",
    "depends_on",
    "env_file",
    "environment",
    "expose",
    "healthcheck",
    "hostname",
    "image",
    "labels",
    "links",
    "logging",
    "platform",
    "ports",
    "pull_policy",
    "restart",
    "stop_grace_period",
    "stop_signal",
];

/// Beside [`SERVICE_KEYS`], the keys [`Writer::render_process`] maps or that mean nothing on
/// the host.
pub(in crate::init) const PROCESS_KEYS: &[&str] = &["init", "stdin_open", "tty", "working_dir"];

/// Beside [`SERVICE_KEYS`], the keys of an adapter service that a slice makes moot (or
/// that [`Writer::render_adapter`] reports itself).
pub(in crate::init) const ADAPTER_KEYS: &[&str] = &["volumes"];
