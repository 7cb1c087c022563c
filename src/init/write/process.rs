//! Writing a process service: `[services.X]` with its `cmd`, `workdir`, `url`/`ports`,
//! `health`, stopping, `depends_on`, `env_file` and env.

use std::collections::BTreeMap;

use serde_yaml_ng::Mapping;

use super::{env_placeholder, env_table, Writer, PROCESS_KEYS};
use crate::init::images::{image_only_command, TODO_CMD};
use crate::init::plan::{Probe, SvcId};
use crate::init::toml_out::{dns_label, one_line, q, shell_word, toml_list};
use crate::init::values::{
    command_of, normalise, rebase, scalar, string_list_env_file, Command, Dir,
};

impl Writer {
    /// A process service: `[services.X]` with what compose says of it, step by step; what
    /// it maps goes to `mapped` as one line, what it cannot to the TODOs.
    pub(in crate::init) fn render_process(&mut self, i: SvcId, out: &mut String) {
        let name = self.plan.svcs[i].name.clone();
        let raw = self.plan.svcs[i].raw.clone();
        let def = self.plan.svcs[i].def.clone();
        let mut notes: Vec<String> = Vec::new();
        if raw != name {
            notes.push(format!("renamed from {raw}"));
        }
        let workdir = self.plan.svcs[i].workdir.clone();
        let cmd = self.host_command(i, &def);
        // A mail catcher: its host command, one per world (a few MiB each; one shared by
        // every world once binky has shared services).
        let shared_tool = def.get("x-binky-shared").and_then(scalar);
        if let Some(tool) = &shared_tool {
            out.push_str(&format!(
                "# {tool} catches this world's mail, on the host (binky runs processes, not images).\n"
            ));
        }
        out.push_str(&format!("[services.{name}]\n"));
        let worker = cmd.as_deref().and_then(crate::workers::recognise);
        self.write_cmd(i, cmd, shared_tool, out, &mut notes);
        if let Some(w) = &workdir {
            out.push_str(&format!("workdir = {}\n", q(w)));
            notes.push(format!("workdir {w}"));
        }
        if !def.contains_key("build") {
            if let Some(image) = &self.plan.svcs[i].image {
                notes.push(format!(
                    "runs on the host, not in {}: its tools must be installed",
                    one_line(image)
                ));
            }
        }
        self.write_url_and_ports(i, out, &mut notes);
        self.write_health(i, out, &mut notes);
        self.write_stopping(&name, &def, worker, out, &mut notes);
        self.write_depends_on(i, out, &mut notes);
        self.write_env_file(&name, &def, workdir.as_deref(), out, &mut notes);
        self.write_env(i, out, &mut notes);
        out.push('\n');
        self.other_keys(i, PROCESS_KEYS);
        self.mapped
            .push(format!("{name}: process; {}", notes.join("; ")));
    }

    /// Compose's `command` as a host command line: its variables interpolated, addresses of
    /// compose services and its own container ports as tokens, credentials as `${env.…}`.
    fn host_command(&mut self, i: SvcId, def: &Mapping) -> Option<String> {
        let name = self.plan.svcs[i].name.clone();
        let host_word = |this: &mut Self, w: &str| {
            let w = this.plan.interpolate(w);
            let w = this.map_addresses(i, None, &w);
            let w = this.self_ports(i, &w, true);
            this.plan.redact(&name, &w)
        };
        match command_of(def)? {
            Command::Shell(s) => Some(host_word(self, &s)),
            Command::Words(ws) => {
                let mut words = Vec::new();
                for w in ws {
                    words.push(shell_word(&host_word(self, &w)));
                }
                Some(words.join(" "))
            }
        }
    }

    /// `cmd`: the host command, or a command that fails on purpose and a TODO when compose
    /// gives none that runs outside its image.
    fn write_cmd(
        &mut self,
        i: SvcId,
        cmd: Option<String>,
        shared_tool: Option<String>,
        out: &mut String,
        notes: &mut Vec<String>,
    ) {
        let name = self.plan.svcs[i].name.clone();
        let image_only = cmd.as_deref().and_then(image_only_command);
        match (&cmd, image_only) {
            (Some(c), None) => {
                if let Some(from) = &self.plan.svcs[i].cmd_from {
                    out.push_str(&format!("# cmd: from {from}\n"));
                }
                out.push_str(&format!("cmd = {}\n", q(c)));
                match (&shared_tool, &self.plan.svcs[i].cmd_from) {
                    (Some(tool), _) => notes.push(format!("{tool} on the host, one per world")),
                    (None, Some(from)) => notes.push(format!("cmd from {from}")),
                    (None, None) => notes.push("cmd from command".into()),
                }
            }
            (cmd, why) => {
                let built = match (&why, &self.plan.svcs[i].workdir) {
                    (Some(why), _) => why.clone(),
                    (None, Some(w)) => format!("compose builds its image from ./{w}"),
                    (None, None) => "compose gives no command".to_owned(),
                };
                out.push_str(&format!(
                    "# TODO: the command that starts {name} ({built}; binky runs it on the host)\n"
                ));
                if let Some(c) = cmd {
                    out.push_str(&format!("# compose's command: {}\n", one_line(c)));
                }
                out.push_str(&format!(
                    "cmd = {}\n",
                    q(&format!("{TODO_CMD} {name} on the host"))
                ));
                let listen = if self.plan.layouts[i].slots.is_empty() {
                    String::new()
                } else {
                    " and have it listen on ${self.port} (binky also sets PORT)".to_owned()
                };
                self.plan.todo(format!("{name}: set `cmd` to the command that starts it on the host{listen}; until then it fails on purpose"));
                notes.push("cmd TODO".into());
            }
        }
    }

    /// `url` and `ports`, from the service's port layout.
    fn write_url_and_ports(&self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let name = &self.plan.svcs[i].name;
        let layout = &self.plan.layouts[i];
        let slots = &layout.slots;
        if slots.is_empty() {
            return;
        }
        let sub = dns_label(name);
        if slots.len() == 1 && layout.url {
            if sub == *name {
                out.push_str("url = true\n");
            } else {
                out.push_str(&format!("url = {}\n", q(&sub)));
            }
            notes.push(format!("url (port {})", slots[0].0));
        } else {
            if layout.url {
                out.push_str(&format!("url = {{ http = {} }}\n", q(&sub)));
            }
            let labels: Vec<String> = slots.iter().map(|(_, l)| l.clone()).collect();
            out.push_str(&format!("ports = {}\n", toml_list(&labels)));
            let desc: Vec<String> = slots.iter().map(|(p, l)| format!("{l} = {p}")).collect();
            notes.push(format!(
                "{}ports {}",
                if layout.url { "url, " } else { "" },
                desc.join(", ")
            ));
        }
    }

    /// `health`, from a healthcheck that probes one of its own ports over HTTP; any other
    /// healthcheck is a TODO.
    fn write_health(&mut self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let name = self.plan.svcs[i].name.clone();
        match self.plan.healthcheck(i) {
            Probe::None => {}
            Probe::Http { port, rest } => {
                if let Some(tok) = self.plan.layouts[i].token("self", port) {
                    let rest = self.plan.redact(&name, &rest);
                    out.push_str(&format!(
                        "health = {}\n",
                        q(&format!("http://localhost:{tok}{rest}"))
                    ));
                    notes.push("health from healthcheck".into());
                }
            }
            Probe::Other(text) => {
                let text = self.plan.redact(&name, &text);
                self.plan.todo(format!("{name}: healthcheck `{text}` not translated: add health = {{ cmd = \"…\" }} (or http/tcp) if readiness matters; without it binky waits for the port"));
            }
        }
    }

    /// `restart`, `stop_signal` and `stop_grace_period`: compose's keys are binky's (a
    /// Celery worker stops at once on QUIT; on TERM it waits out the grace period and is
    /// killed). A `worker` binky knows by its command and compose gives no signal for gets
    /// the one it stops on at once.
    fn write_stopping(
        &mut self,
        name: &str,
        def: &Mapping,
        worker: Option<crate::workers::Worker>,
        out: &mut String,
        notes: &mut Vec<String>,
    ) {
        if let Some(r) = def.get("restart").and_then(scalar) {
            if matches!(r.as_str(), "always" | "unless-stopped") {
                out.push_str("restart = \"always\"\n");
            }
        }
        if let Some(raw) = def.get("stop_signal").and_then(scalar) {
            let sig = self.plan.interpolate(&raw);
            match crate::config::parse_signal(&sig) {
                Ok(signal) => {
                    out.push_str(&format!("stop_signal = {}\n", q(&signal)));
                    notes.push(format!("stop_signal {signal}"));
                }
                Err(why) => self.plan.todo(format!(
                    "{name}: stop_signal `{sig}` not carried over ({why}): binky stops it with SIGTERM until `stop_signal` names a signal, e.g. \"SIGQUIT\""
                )),
            }
        } else if let Some(w) = worker {
            out.push_str(&format!(
                "stop_signal = {}  # {}: {}\n",
                q(w.signal),
                w.what,
                w.why
            ));
            notes.push(format!("stop_signal {} ({})", w.signal, w.what));
        }
        if let Some(raw) = def.get("stop_grace_period").and_then(scalar) {
            let text = self.plan.interpolate(&raw);
            match compose_duration(&text) {
                Some(grace) => {
                    out.push_str(&format!("stop_grace_period = {}\n", q(&grace)));
                    notes.push(format!("stop_grace_period {grace}"));
                }
                None => self.plan.todo(format!(
                    "{name}: stop_grace_period `{text}` not carried over (not a duration): binky gives it 5 s until `stop_grace_period` says, e.g. \"10s\""
                )),
            }
        }
    }

    /// `depends_on`, with the services it names that are not in binky.toml noted as dropped.
    fn write_depends_on(&mut self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let (deps, dropped) = self.depends_on(i);
        if !deps.is_empty() {
            out.push_str(&format!("depends_on = {}\n", toml_list(&deps)));
            notes.push(format!("depends_on {}", deps.join(", ")));
        }
        if !dropped.is_empty() {
            notes.push(format!(
                "depends_on {} dropped (not in binky.toml)",
                dropped.join(", ")
            ));
        }
    }

    /// `env_file`, relative to the service's workdir; a TODO for files whose addresses of
    /// compose services stay as they are.
    fn write_env_file(
        &mut self,
        name: &str,
        def: &Mapping,
        workdir: Option<&str>,
        out: &mut String,
        notes: &mut Vec<String>,
    ) {
        let env_files: Vec<String> = string_list_env_file(def)
            .iter()
            .map(|f| self.plan.interpolate(f))
            .map(|f| rebase(&f, workdir))
            .collect();
        if env_files.is_empty() {
            return;
        }
        out.push_str(&format!("env_file = {}\n", toml_list(&env_files)));
        notes.push(format!("env_file {}", env_files.join(", ")));
        let others: Vec<&String> = string_list_env_file(def)
            .iter()
            .zip(&env_files)
            // `.env`, and files binky init read (their addresses are rewritten below),
            // need nothing more.
            .filter(|(orig, _)| {
                normalise(orig) != Dir::Below(".env".into())
                    && !self.plan.found.env_files.contains_key(*orig)
            })
            .map(|(_, f)| f)
            .collect();
        if !others.is_empty() {
            let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
            self.plan.todo(format!("{name}: env_file {} is loaded as it is: an address of a compose service in it (such as db:5432) does not resolve on the host; override it in [services.{name}.env] with a token such as ${{db.url}}", list.join(", ")));
        }
    }

    /// `[services.X.env]`, or its placeholder while [`Writer::render_services`] collects what
    /// every process shares.
    fn write_env(&mut self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let lines = self.env_lines(i);
        if lines.is_empty() {
            return;
        }
        let mapped: Vec<String> = lines
            .iter()
            .filter_map(|l| {
                let v = l.value.as_ref()?;
                (v.contains("${") && !v.contains("${self.")).then(|| format!("{} → {v}", l.key))
            })
            .collect();
        if !mapped.is_empty() {
            notes.push(format!("env {}", mapped.join(", ")));
        }
        if self.defer_env {
            out.push_str(&env_placeholder(i));
            self.env_blocks.insert(i, lines);
        } else {
            let name = &self.plan.svcs[i].name;
            out.push_str(&env_table(
                &format!("services.{name}.env"),
                &lines,
                &BTreeMap::new(),
            ));
        }
    }
}

/// A compose duration (Go's form: `10s`, `1m30s`, `500ms`, `1.5h`; a bare number is seconds)
/// in binky's (`90s`, `500ms`); `None` when it is not one.
pub(in crate::init) fn compose_duration(text: &str) -> Option<String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return ms_text(secs * 1000.0);
    }
    let mut ms = 0.0;
    let mut rest = t;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let per_ms = match &rest[..unit_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            _ => return None,
        };
        ms += value * per_ms;
        rest = &rest[unit_end..];
    }
    ms_text(ms)
}

/// Milliseconds as binky writes a duration: whole seconds as `90s`, else `1500ms`.
fn ms_text(ms: f64) -> Option<String> {
    if !ms.is_finite() || ms < 0.0 {
        return None;
    }
    let ms = ms.round() as u64;
    Some(if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    })
}
