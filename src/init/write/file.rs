//! Writing the file: the keys nobody handled (one TODO each), the compose file's top
//! level, the notes on frameworks that check the `Host`, and the header and summary.

use std::collections::BTreeSet;

use serde_yaml_ng::{Mapping, Value};

use super::{Writer, SERVICE_KEYS};
use crate::init::images::TODO_CMD;
use crate::init::plan::TRACKED_DOTENV;
use crate::init::plan::{Kind, SvcId};
use crate::init::read::hosts::HostCheck;
use crate::init::toml_out::q;
use crate::init::values::{scalar, string_list, volumes};
use crate::init::Generated;

impl Writer {
    /// Service keys nobody handled: one TODO each (with advice where there is some).
    pub(in crate::init) fn other_keys(&mut self, i: SvcId, handled: &[&str]) {
        let name = self.plan.svcs[i].name.clone();
        let def = self.plan.svcs[i].def.clone();
        let kind = self.plan.svcs[i].kind;
        let mut generic = Vec::new();
        for key in def.keys().filter_map(scalar) {
            if SERVICE_KEYS.contains(&key.as_str())
                || handled.contains(&key.as_str())
                || key.starts_with("x-")
            {
                continue;
            }
            match key.as_str() {
                "volumes" => {
                    if kind == Kind::Process {
                        let list: Vec<String> = volumes(&def)
                            .into_iter()
                            .map(|(s, d)| if s.is_empty() { d } else { format!("{s}:{d}") })
                            .collect();
                        let list = self.plan.redact(&name, &list.join(", "));
                        self.plan.todo(format!("{name}: volumes {list} not carried: binky runs {name} on the host, in the world's worktree"));
                    }
                }
                "profiles" => {
                    let p = string_list(def.get("profiles")).join(", ");
                    self.plan.todo(format!("{name}: profiles {p}: binky starts every service; put it in a [groups] entry and use `binky up NAME --group G` to start a subset"));
                }
                "deploy" => self.plan.todo(format!("{name}: deploy not carried: binky runs one instance (write deploy.resources.limits as `limits = {{ cpu = \"0.5\", memory = \"512M\" }}`)")),
                "extends" => self.plan.todo(format!("{name}: extends not resolved: copy what it inherits into [services.{name}]")),
                "entrypoint" => self.plan.todo(format!("{name}: entrypoint not carried: if what it does matters on the host, put it in front of cmd")),
                "secrets" | "configs" => self.plan.todo(format!("{name}: {key} not carried: hand them over through the environment of `binky up` or an env_file")),
                "networks" | "network_mode" => {}
                _ => generic.push(key),
            }
        }
        if !generic.is_empty() {
            self.plan.todo(format!(
                "{name}: {} not carried (container settings binky has no equivalent for)",
                generic.join(", ")
            ));
        }
    }

    /// The compose file's top-level keys binky does not carry (named volumes, networks,
    /// secrets, `include`, …): one TODO each.
    pub(in crate::init) fn top_level(&mut self, root: &Mapping) {
        let mut networks = self.plan.uses_networks;
        for (k, v) in root {
            let Some(k) = scalar(k) else { continue };
            if matches!(k.as_str(), "services" | "version" | "name") || k.starts_with("x-") {
                continue;
            }
            let names: Vec<String> = match v {
                Value::Mapping(m) => m.keys().filter_map(scalar).collect(),
                v => string_list(Some(v)),
            };
            match k.as_str() {
                "volumes" => self.plan.todo(format!("named volumes {} not carried: each world keeps its data in its own slice and runs its processes in its worktree", names.join(", "))),
                "networks" => networks = true,
                "secrets" | "configs" => self.plan.todo(format!("{k} {} not carried: hand them over through the environment of `binky up` or an env_file", names.join(", "))),
                "include" => self.plan.todo(format!("include {} not read: run binky init where those services are, or add them by hand", names.join(", "))),
                _ => self.plan.todo(format!("top-level `{k}` not carried")),
            }
        }
        if networks {
            self.plan.todo("networks not carried: a world's services reach each other on localhost, through tokens such as ${api.url}");
        }
    }

    /// The whole file: the header (what it was written from, what to set, the TODOs and
    /// notes), `[project]` and `body`; every credential seen anywhere scrubbed as a last
    /// defence.
    pub(in crate::init) fn finish(mut self, body: &str) -> Generated {
        self.host_hints(body);
        self.plan.report.notes.sort();
        let mut head = String::new();
        let file = if self.plan.file.contains(", ") {
            self.plan.file.clone()
        } else {
            self.plan
                .file
                .rsplit('/')
                .next()
                .unwrap_or(&self.plan.file)
                .to_owned()
        };
        let source = format!(
            "{file}{}",
            if self.plan.found.dotenv.is_empty() {
                ""
            } else {
                " and .env"
            }
        );
        head.push_str(&format!(
            "# binky.toml, written by `binky init` from {source}.\n"
        ));
        let todo_cmds: Vec<String> = self
            .plan
            .svcs
            .iter()
            // A live `cmd` only: a commented-out service's TODO is nothing `binky check`
            // or `binky up` names, so the header does not either.
            .filter(|s| {
                let todo = format!("cmd = {}", q(&format!("{TODO_CMD} {} on the host", s.name)));
                body.lines().any(|l| l == todo)
            })
            .map(|s| s.name.clone())
            .collect();
        if todo_cmds.is_empty() {
            head.push_str("# A starting point, not a conversion: `binky up NAME` runs it as it is; read the\n# TODOs and NOTEs below for what it could not carry.\n");
        } else {
            head.push_str(&format!("# A starting point, not a conversion. Before `binky up NAME`: write the command of {}\n# (its `cmd` is a TODO that `binky check` and `binky up` refuse); read the TODOs below.\n", todo_cmds.join(", ")));
        }
        head.push_str("# No credential was copied: they are ${env.NAME} references, read from the environment\n# of `binky up` (or an env_file).\n");
        if self
            .plan
            .report
            .reasons
            .values()
            .any(|r| r.starts_with(TRACKED_DOTENV))
        {
            head.push_str("# Those the repository's tracked .env sets have its value as their default\n# (${env.NAME:-value}): it is committed for everyone, as compose reads it.\n");
        }
        if !self.plan.report.to_decide.is_empty() {
            head.push_str("#\n# To decide:\n");
            for t in &self.plan.report.to_decide {
                head.push_str(&format!("# TODO: {t}\n"));
            }
        }
        let notes: String = self
            .plan
            .report
            .notes
            .iter()
            .map(|n| format!("# NOTE: {n}\n"))
            .collect();
        let notes = if notes.is_empty() {
            notes
        } else {
            format!("\n{notes}")
        };
        let mut text = head.clone();
        let copy = if self.plan.copy.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self.plan.copy.iter().map(|p| q(p)).collect();
            format!(
                "# Each world gets its own copy of the virtualenv the commands run (git ignores it;\n# binky links its files and points its scripts at the world).\ncopy = [{}]\n",
                list.join(", ")
            )
        };
        let project_part = format!(
            "{notes}\n[project]\nname = {}\n{copy}\n{}",
            q(&self.plan.project),
            body
        );
        text.push_str(&project_part);

        // Every `${env.NAME}` the file reads (comments read nothing).
        let mut names: Vec<String> = Vec::new();
        // Read without a default somewhere: `binky up` needs it set.
        let mut required: BTreeSet<String> = BTreeSet::new();
        for line in body.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let mut rest = line;
            while let Some(i) = rest.find("${env.") {
                let after = &rest[i + 6..];
                let n = after
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                let name = after[..n].to_owned();
                if !name.is_empty() && !names.contains(&name) {
                    names.push(name.clone());
                }
                if !matches!(after.as_bytes().get(n), Some(b':' | b'-')) {
                    required.insert(name);
                }
                rest = &after[n..];
            }
        }
        let to_set: Vec<(String, String)> = names
            .into_iter()
            .map(|n| {
                let why = self
                    .plan
                    .report
                    .reasons
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| "read by the services".to_owned());
                (n, why)
            })
            .collect();
        let list: Vec<&str> = to_set
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| required.contains(*n))
            .collect();
        if !list.is_empty() {
            let set_line = format!("#\n# Set before `binky up`: {}\n", list.join(", "));
            let at = head.len();
            text.insert_str(at, &set_line);
        }

        // The last line of defence: a credential seen anywhere never leaves.
        let secrets = std::mem::take(&mut self.plan.secrets);
        let scrub = |s: &str| {
            let mut s = s.to_owned();
            for (value, name) in &secrets {
                if s.contains(value.as_str()) {
                    s = s.replace(value.as_str(), &format!("${{env.{name}}}"));
                }
            }
            s
        };
        let mut adapters: Vec<String> = Vec::new();
        for s in &self.plan.svcs {
            if let Kind::Adapter(a) = s.kind {
                if !adapters.iter().any(|x| x == a) {
                    adapters.push(a.to_owned());
                }
            }
        }
        let to_decide = self
            .plan
            .report
            .to_decide
            .iter()
            .chain(&self.plan.report.notes);
        Generated {
            source,
            toml: scrub(&text),
            mapped: self.mapped.iter().map(|m| scrub(m)).collect(),
            to_decide: to_decide.map(|m| scrub(m)).collect(),
            to_set: to_set.into_iter().map(|(n, w)| (n, scrub(&w))).collect(),
            adapters,
        }
    }

    /// Frameworks of the project that refuse a request whose `Host` they do not know (the
    /// proxy sends `<service>.<world>.<project>.localhost`): what to change, for each.
    pub(in crate::init) fn host_hints(&mut self, body: &str) {
        let checks = self.plan.found.host_checks.clone();
        for check in checks {
            let hint = match check {
                HostCheck::Django(rel) if !body.contains("ALLOWED_HOSTS") => Some(format!("Django ({rel}) refuses unknown hosts: add \".localhost\" to ALLOWED_HOSTS in the settings it runs with (or read them from an env variable and set it in [services.*.env])")),
                HostCheck::Django(_) => None,
                HostCheck::Rails(rel) => Some(format!("Rails ({rel}) refuses unknown hosts in development: add `config.hosts << \".localhost\"` to config/environments/development.rb")),
                HostCheck::Vite(rel) => Some(format!("Vite ({rel}) refuses unknown hosts: set `server: {{ allowedHosts: [\".localhost\"] }}` in {rel}")),
            };
            if let Some(h) = hint {
                self.plan.note(&h);
            }
        }
    }
}
