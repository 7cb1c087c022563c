//! Merging: the compose services as the plan's services (what each becomes: an adapter
//! service, a process, left out or commented out) and the host names they answer to.

use std::collections::BTreeSet;

use serde_yaml_ng::{Mapping, Value};

use super::{Kind, Plan, Svc, Why};
use crate::init::images::{
    adapter_for_image, mail_catcher, replaced_image, test_only, MailCatcher,
};
use crate::init::values::{command_of, scalar, service_name, string_list, Command};

/// A mail catcher runs on the host, one for every world: its usual command when compose
/// gives none, with its SMTP and web ports exposed so that each world gets its own.
fn run_on_the_host(def: &mut Mapping, mc: &MailCatcher) {
    if command_of(def).is_none() {
        def.insert(Value::from("command"), Value::from(mc.cmd));
        let mut expose = match def.get("expose") {
            Some(Value::Sequence(s)) => s.clone(),
            _ => Vec::new(),
        };
        for port in [1025u16, 8025, 1080] {
            let p = Value::from(port.to_string());
            if mc.cmd.contains(&port.to_string()) && !expose.contains(&p) {
                expose.push(p);
            }
        }
        def.insert(Value::from("expose"), Value::Sequence(expose));
    }
    def.insert(Value::from("x-binky-shared"), Value::from(mc.tool));
}

/// The host names a compose service answers to on its network: its name, `container_name`,
/// `hostname` and its network aliases.
fn compose_aliases(raw: &str, def: &Mapping) -> Vec<String> {
    let mut aliases = vec![raw.to_owned()];
    aliases.extend(def.get("container_name").and_then(scalar));
    aliases.extend(def.get("hostname").and_then(scalar));
    if let Some(Value::Mapping(nets)) = def.get("networks") {
        for (_, n) in nets {
            aliases.extend(string_list(n.get("aliases")));
        }
    }
    aliases
}

impl Plan {
    /// Each compose service, in the file's order, as a service of the plan: its binky name,
    /// its image (interpolated), what it is ([`Kind`]) and the host names it answers to
    /// (its name, `container_name`, `hostname`, network aliases, `links`).
    pub(in crate::init) fn read_services(&mut self, services: &Mapping) {
        let mut taken = BTreeSet::new();
        for (k, v) in services {
            let Some(raw) = scalar(k) else { continue };
            let def = v.as_mapping().cloned().unwrap_or_default();
            let name = service_name(&raw, &taken);
            taken.insert(name.clone());
            let image = def
                .get("image")
                .and_then(scalar)
                .map(|i| self.interpolate(&i));
            // A mail catcher runs on the host, one for every world: its usual command.
            let mut def = def;
            let catcher = image.as_deref().and_then(mail_catcher);
            if let Some(mc) = catcher {
                run_on_the_host(&mut def, mc);
            }
            let kind = self.kind_of(&raw, image.as_deref(), &def, catcher);
            let svc = self.svcs.next_id();
            for a in compose_aliases(&raw, &def) {
                self.alias.entry(a.to_ascii_lowercase()).or_insert(svc);
            }
            if def.contains_key("networks") || def.contains_key("network_mode") {
                self.uses_networks = true;
            }
            self.svcs.push(Svc {
                raw,
                name,
                def,
                kind,
                image,
                workdir: None,
                cmd_from: None,
            });
        }
        // `links: ["db:database"]` names another alias of `db`.
        for svc in self.svcs.ids() {
            for link in string_list(self.svcs[svc].def.get("links")) {
                if let Some((target, alias)) = link.split_once(':') {
                    if let Some(&linked) = self.alias.get(&target.to_ascii_lowercase()) {
                        self.alias
                            .entry(alias.to_ascii_lowercase())
                            .or_insert(linked);
                    }
                }
            }
        }
    }

    /// What binky makes of a compose service: infrastructure it replaces, tests left out,
    /// an adapter service, a mail catcher that is not installed, a process, or nothing.
    fn kind_of(
        &self,
        raw: &str,
        image: Option<&str>,
        def: &Mapping,
        catcher: Option<&'static MailCatcher>,
    ) -> Kind {
        let runs_code = def.get("build").is_some_and(|b| !b.is_null()) || command_of(def).is_some();
        let command_text = match command_of(def) {
            Some(Command::Shell(s)) => Some(s),
            Some(Command::Words(ws)) => Some(ws.join(" ")),
            None => None,
        };
        let tests = test_only(raw, image, command_text.as_deref());
        match (
            image.and_then(replaced_image),
            image.and_then(adapter_for_image),
        ) {
            (Some(what), _) => Kind::Replaced(what),
            (None, _) if tests.is_some() && (runs_code || image.is_some()) => {
                Kind::Commented(Why::TestOnly(tests.unwrap_or_default()))
            }
            (None, Some(a)) => Kind::Adapter(a),
            (None, None) => match catcher {
                Some(mc) if !self.found.installed.contains(mc.program) => {
                    Kind::Commented(Why::NotInstalled(mc))
                }
                _ if runs_code => Kind::Process,
                _ => Kind::Unmapped,
            },
        }
    }

    /// A service that is not in a compose file: `def` in compose's form.
    pub(in crate::init) fn push_svc(
        &mut self,
        name: &str,
        def: Mapping,
        kind: Kind,
        workdir: Option<String>,
        cmd_from: Option<String>,
    ) {
        let taken: BTreeSet<String> = self.svcs.iter().map(|s| s.name.clone()).collect();
        let name = service_name(name, &taken);
        self.alias
            .entry(name.to_ascii_lowercase())
            .or_insert(self.svcs.next_id());
        self.svcs.push(Svc {
            raw: name.clone(),
            name,
            def,
            kind,
            image: None,
            workdir,
            cmd_from,
        });
    }

    /// Services that run once before the others: another waits for them with `condition:
    /// service_completed_successfully`, or they run a migration tool or a prestart script.
    pub(in crate::init) fn find_one_shots(&mut self) {
        let mut awaited: BTreeSet<String> = BTreeSet::new();
        for s in &self.svcs {
            if let Some(Value::Mapping(m)) = s.def.get("depends_on") {
                for (k, v) in m {
                    let done = v.get("condition").and_then(scalar).as_deref()
                        == Some("service_completed_successfully");
                    if let (true, Some(k)) = (done, scalar(k)) {
                        awaited.insert(k);
                    }
                }
            }
        }
        for s in &mut self.svcs {
            if s.kind != Kind::Process {
                continue;
            }
            let cmd = match command_of(&s.def) {
                Some(Command::Shell(c)) => c,
                Some(Command::Words(ws)) => ws.join(" "),
                None => String::new(),
            };
            let migrates = ["alembic upgrade", "manage.py migrate", "prestart"]
                .iter()
                .any(|w| cmd.contains(w));
            if awaited.contains(&s.raw) || migrates {
                s.kind = Kind::Commented(Why::OneShot);
            }
        }
    }
}
