//! Merging: each process service's ports: what it publishes or exposes, what others reach
//! it on, where its health check probes.

use std::collections::BTreeSet;

use serde_yaml_ng::Value;

use super::{Layout, PerService, Plan, Probe, SvcId};
use crate::init::images::{default_port, http_looking, port_label};
use crate::init::secrets::scan_urls;
use crate::init::values::{
    command_of, env_entries, host_ports, normalise, scalar, string_list_env_file, Command, Dir,
};

impl Plan {
    /// Container ports a service publishes or exposes; what cannot be carried is noted.
    pub(in crate::init) fn container_ports(&mut self, i: SvcId) -> Vec<u16> {
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        let def = self.svcs[i].def.clone();
        let mut specs: Vec<Value> = Vec::new();
        if let Some(Value::Sequence(items)) = def.get("ports") {
            specs.extend(items.iter().cloned());
        }
        if let Some(Value::Sequence(items)) = def.get("expose") {
            specs.extend(items.iter().cloned());
        }
        for spec in specs {
            let (text, udp) = match &spec {
                Value::Mapping(m) => (
                    m.get("target").and_then(scalar).unwrap_or_default(),
                    m.get("protocol").and_then(scalar).as_deref() == Some("udp"),
                ),
                v => {
                    let s = self.interpolate(&scalar(v).unwrap_or_default());
                    let (s, proto) = match s.split_once('/') {
                        Some((p, proto)) => (p.to_owned(), proto.to_owned()),
                        None => (s, String::new()),
                    };
                    let container = s.rsplit(':').next().unwrap_or("").to_owned();
                    (container, proto == "udp")
                }
            };
            match text.trim().parse::<u16>() {
                Ok(p) if !udp && p > 0 => {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
                _ => skipped.push(scalar(&spec).unwrap_or(text)),
            }
        }
        if !skipped.is_empty() {
            let svc = self.svcs[i].name.clone();
            self.todo(format!(
                "{svc}: ports {} not carried (port ranges and UDP): add them as `ports` labels if {svc} needs them",
                skipped.join(", ")
            ));
        }
        out
    }

    /// Remember the host ports service `i` publishes (`"5173:5173"`, `"8000:80"`).
    fn publish(&mut self, i: SvcId) {
        let Some(Value::Sequence(items)) = self.svcs[i].def.get("ports").cloned() else {
            return;
        };
        for spec in items {
            let pair = match &spec {
                Value::Mapping(m) => m
                    .get("published")
                    .and_then(scalar)
                    .zip(m.get("target").and_then(scalar)),
                v => {
                    let s = self.interpolate(&scalar(v).unwrap_or_default());
                    let s = s.split('/').next().unwrap_or("").to_owned();
                    let parts: Vec<&str> = s.split(':').collect();
                    (parts.len() >= 2).then(|| {
                        (
                            parts[parts.len() - 2].to_owned(),
                            parts[parts.len() - 1].to_owned(),
                        )
                    })
                }
            };
            if let Some((host, container)) = pair {
                if let (Ok(h), Ok(c)) =
                    (host.trim().parse::<u16>(), container.trim().parse::<u16>())
                {
                    self.published.entry(h).or_insert((i, c));
                }
            }
        }
    }

    /// Service `i`'s compose health check, as far as binky can read it.
    pub(in crate::init) fn healthcheck(&mut self, i: SvcId) -> Probe {
        let Some(Value::Mapping(h)) = self.svcs[i].def.get("healthcheck").cloned() else {
            return Probe::None;
        };
        if h.get("disable").and_then(Value::as_bool) == Some(true) {
            return Probe::None;
        }
        let text = match h.get("test") {
            Some(Value::Sequence(items)) => {
                let words: Vec<String> = items.iter().filter_map(scalar).collect();
                match words.first().map(String::as_str) {
                    Some("NONE") | None => return Probe::None,
                    Some("CMD") | Some("CMD-SHELL") => words[1..].join(" "),
                    _ => words.join(" "),
                }
            }
            Some(v) => match scalar(v) {
                Some(s) => s,
                None => return Probe::None,
            },
            None => return Probe::None,
        };
        let text = self.interpolate(&text);
        let http_client = text
            .split_whitespace()
            .any(|w| matches!(w.rsplit('/').next(), Some("curl" | "wget")));
        if http_client {
            if let Some(hit) = scan_urls(&text).into_iter().find(|h| {
                h.scheme == "http"
                    && matches!(h.host.as_str(), "localhost" | "127.0.0.1" | "0.0.0.0")
            }) {
                return Probe::Http {
                    port: hit.port.unwrap_or(80),
                    rest: hit.rest,
                };
            }
        }
        Probe::Other(text)
    }

    /// The text of a process service that may name other services: its command and
    /// environment (and `.env`, when it loads it).
    pub(in crate::init) fn texts(&mut self, i: SvcId) -> Vec<(Option<String>, String)> {
        let def = self.svcs[i].def.clone();
        let mut out = Vec::new();
        match command_of(&def) {
            Some(Command::Shell(s)) => out.push((None, self.interpolate(&s))),
            Some(Command::Words(ws)) => {
                for w in ws {
                    out.push((None, self.interpolate(&w)));
                }
            }
            None => {}
        }
        for (k, v) in env_entries(&def) {
            if let Some(v) = v {
                out.push((Some(k), self.interpolate(&v)));
            }
        }
        if self.loads_dotenv(i) {
            out.extend(
                self.found
                    .dotenv
                    .iter()
                    .map(|(k, v)| (Some(k.clone()), v.clone())),
            );
        }
        out
    }

    /// Does service `i` load `.env` as an `env_file`?
    pub(in crate::init) fn loads_dotenv(&self, i: SvcId) -> bool {
        string_list_env_file(&self.svcs[i].def)
            .iter()
            .any(|f| normalise(f) == Dir::Below(".env".into()))
    }

    /// Give every process service its ports: what it publishes or exposes, what others
    /// reach it on, and where its health check probes. HTTP ones get the URL.
    pub(in crate::init) fn plan_ports(&mut self) {
        let mut ports: PerService<Vec<(u16, bool)>> =
            PerService(self.svcs.iter().map(|_| Vec::new()).collect());
        fn add(list: &mut Vec<(u16, bool)>, port: u16, http: bool) {
            match list.iter_mut().find(|(p, _)| *p == port) {
                Some(e) => e.1 |= http,
                None => list.push((port, http)),
            }
        }
        for i in self.svcs.ids() {
            if !self.runs(i) {
                continue;
            }
            let declared = self.container_ports(i);
            for &p in &declared {
                add(&mut ports[i], p, http_looking(p));
            }
            // No port declared, but the command names the one it listens on (Flower's
            // `--port=5555`, `uvicorn --port 8000`, `serve -p 3000`): that is its port,
            // and the command gets `${self.port}` in its place (binky's, one per world).
            if declared.is_empty() {
                let cmd = match command_of(&self.svcs[i].def) {
                    Some(Command::Shell(s)) => Some(s),
                    Some(Command::Words(ws)) => Some(ws.join(" ")),
                    None => None,
                };
                if let Some(p) = cmd.as_deref().and_then(listen_port) {
                    add(&mut ports[i], p, true);
                }
            }
            self.publish(i);
        }
        for i in self.svcs.ids() {
            if !self.runs(i) {
                continue;
            }
            if let Probe::Http { port, .. } = self.healthcheck(i) {
                add(&mut ports[i], port, true);
            }
            for (key, text) in self.texts(i) {
                for hit in scan_urls(&text) {
                    let Some(&j) = self.alias.get(&hit.host) else {
                        continue;
                    };
                    if !self.runs(j) {
                        continue;
                    }
                    let http = matches!(hit.scheme.as_str(), "http" | "https" | "ws" | "wss");
                    if let Some(p) = hit.port.or_else(|| default_port(&hit.scheme)) {
                        add(&mut ports[j], p, http || http_looking(p));
                    }
                }
                if key.is_some() {
                    for (host, port) in host_ports(&text) {
                        let Some(&j) = self.alias.get(&host) else {
                            continue;
                        };
                        if let (true, Some(p)) = (self.runs(j), port) {
                            add(&mut ports[j], p, http_looking(p));
                        }
                    }
                }
            }
        }
        self.layouts = ports.map(|mut list| {
            if let Some(h) = list.iter().position(|(_, http)| *http) {
                let first = list.remove(h);
                list.insert(0, first);
            }
            let url = list.first().is_some_and(|(_, http)| *http);
            let mut labels = BTreeSet::new();
            let slots = list
                .iter()
                .enumerate()
                .map(|(k, (p, _))| {
                    let mut label = if k == 0 && url {
                        "http".to_owned()
                    } else {
                        port_label(*p)
                    };
                    if !labels.insert(label.clone()) {
                        label = format!("p{p}");
                        labels.insert(label.clone());
                    }
                    (*p, label)
                })
                .collect();
            Layout { slots, url }
        });
    }
}

/// The port a server command says it listens on: `--port=N`, `--port N`, `-p N`,
/// `--bind[=]HOST:N`, `-b HOST:N`, `runserver [HOST:]N`, `--listen[=]HOST:N`.
pub(in crate::init) fn listen_port(cmd: &str) -> Option<u16> {
    let words: Vec<&str> = cmd
        .split_whitespace()
        .map(|w| w.trim_matches(['"', '\'']))
        .collect();
    let port_of = |v: &str| -> Option<u16> {
        let p = v.rsplit(':').next()?;
        p.parse::<u16>().ok().filter(|p| *p > 0)
    };
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied();
        let found = match *w {
            "--port" | "-p" => next.filter(|v| !v.contains(':')).and_then(port_of),
            "--bind" | "-b" | "--listen" => next.and_then(port_of),
            "runserver" | "runserver_plus" => next.and_then(port_of),
            _ => ["--port=", "--bind=", "--listen="]
                .iter()
                .find_map(|f| w.strip_prefix(f))
                .and_then(port_of),
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::listen_port;

    #[test]
    fn the_port_a_server_command_names_is_found_and_nothing_else_is_one() {
        for (cmd, port) in [
            ("celery -A app flower --port=5555", 5555),
            ("uvicorn app:app --port 8000", 8000),
            ("npx serve -p 3000", 3000),
            ("gunicorn app.wsgi --bind 0.0.0.0:9000", 9000),
            ("gunicorn app.wsgi -b :9001", 9001),
            ("python manage.py runserver 0.0.0.0:8001", 8001),
            ("python manage.py runserver 8002", 8002),
            ("vite --listen=127.0.0.1:5174", 5174),
        ] {
            assert_eq!(listen_port(cmd), Some(port), "{cmd}");
        }
        for cmd in [
            "celery -A app worker -l info",
            "mkdir -p data && serve",
            "docker run -p 5432:5432 postgres",
            "uvicorn app:app --port $PORT",
            "python manage.py runserver",
        ] {
            assert_eq!(listen_port(cmd), None, "{cmd}");
        }
    }
}
