//! A process service (`[services.NAME]` with `cmd`): `cmd`, `setup`, `workdir`, `restart`,
//! `limits`, `url`, `ports`, `health`, `watch`, `env`, `env_file`, `replicas`, and how it
//! stops (`stop_signal`, `stop_grace_period`, `stop_after_dependents`: `stop.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Range, RangeInclusive};

use binky_controllers::spec::{Health, OnUnhealthy, Probe, Process, UrlSpec};
use toml::de::DeValue;

use super::cx::join;
use super::defaults::Defaults;
use super::{parse_duration, Cx, Table, Value};

/// The keys of a process service.
pub(super) const PROCESS_KEYS: &[&str] = &[
    "cmd",
    "setup",
    "workdir",
    "restart",
    "limits",
    "url",
    "ports",
    "health",
    "depends_on",
    "watch",
    "env",
    "env_file",
    "replicas",
    "shared",
    "stop_signal",
    "stop_grace_period",
    "stop_after_dependents",
];
const HEALTH_KEYS: &[&str] = &[
    "http",
    "tcp",
    "cmd",
    "timeout",
    "interval",
    "retries",
    "on_unhealthy",
];

impl Cx<'_> {
    /// A process service (one with `cmd`) at `path`.
    pub(super) fn process(
        &mut self,
        t: &Table<'_>,
        path: &str,
        defaults: &Defaults,
    ) -> Option<Process> {
        let cmd = self.non_empty_string(t, path, "cmd");
        let url = self.url(t, path);
        let ports = self.ports(t, path);
        self.check_url_port(t, path, url.as_ref(), ports.as_deref());
        let health = self.health(t, path);
        let replicas = match Self::get(t, "replicas") {
            Some(v) => self
                .integer_within(
                    v,
                    &join(path, "replicas"),
                    1..=1024,
                    "replicas must be between 1 and 1024",
                    None,
                )
                .map_or(1, |n| n as u32),
            None => 1,
        };
        let env = self.env(t, path, defaults);
        // Check every key before giving up on a missing `cmd`: all errors at once.
        let setup = self.string(t, path, "setup");
        let workdir = self
            .string(t, path, "workdir")
            .unwrap_or_else(|| defaults.workdir.clone());
        let restart = self.restart(t, path).unwrap_or(defaults.restart);
        let limits = self.limits(t, path).or_else(|| defaults.limits.clone());
        let watch = self.strings(t, path, "watch", false).unwrap_or_default();
        let env_file = self.strings(t, path, "env_file", true).unwrap_or_default();
        let stop = self.stopping(t, path, &defaults.stop);
        Some(Process {
            cmd: cmd?,
            setup,
            workdir,
            restart,
            limits,
            url,
            ports,
            health,
            watch,
            env,
            env_file,
            replicas,
            stop,
        })
    }

    /// `url`: `true`, a subdomain, or `{ port_label = "subdomain" }`.
    fn url(&mut self, t: &Table<'_>, path: &str) -> Option<UrlSpec> {
        let v = Self::get(t, "url")?;
        match v.get_ref() {
            DeValue::Boolean(true) => Some(UrlSpec::Service),
            DeValue::Boolean(false) => None,
            DeValue::String(s) => {
                if !dns_label(s) {
                    self.error(
                        v.span(),
                        &join(path, "url"),
                        format!("`{s}` is not a valid hostname label"),
                        Some("use letters, digits and `-`, e.g. url = \"web\"".to_owned()),
                    );
                }
                Some(UrlSpec::Subdomain(s.to_string()))
            }
            DeValue::Table(m) if m.len() == 1 => m.iter().next().and_then(|(k, sub)| {
                let sub_path = join(&join(path, "url"), k.get_ref());
                let sub_span = sub.span();
                let sub = self.string_value(sub, &sub_path)?;
                if !dns_label(&sub) {
                    self.error(
                        sub_span,
                        &sub_path,
                        format!("`{sub}` is not a valid hostname label"),
                        Some(
                            "use letters, digits and `-`, e.g. url = { http = \"web\" }".to_owned(),
                        ),
                    );
                }
                Some(UrlSpec::Port {
                    label: k.get_ref().to_string(),
                    subdomain: sub,
                })
            }),
            _ => self.wrong_type(
                v,
                &join(path, "url"),
                "true, a subdomain string or { port_label = \"subdomain\" }",
                "e.g. url = \"web\"".to_owned(),
            ),
        }
    }

    /// `ports`: the labels of a list, or of a table (whose values are not used), each
    /// checked ([`Cx::check_port_labels`]).
    fn ports(&mut self, t: &Table<'_>, path: &str) -> Option<Vec<String>> {
        let v = Self::get(t, "ports")?;
        let ppath = join(path, "ports");
        let labels: Vec<(String, Range<usize>)> = match v.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| {
                    self.string_value(it, &format!("{ppath}[{i}]"))
                        .map(|s| (s, it.span()))
                })
                .collect(),
            DeValue::Table(m) => {
                let mut out = Vec::new();
                for (k, pv) in m.iter() {
                    match pv.get_ref() {
                        DeValue::String(_) | DeValue::Integer(_) => {}
                        _ => {
                            self.wrong_type::<()>(
                                pv,
                                &join(&ppath, k.get_ref()),
                                "a string or integer",
                                None,
                            );
                        }
                    }
                    out.push((k.get_ref().to_string(), k.span()));
                }
                if !out.is_empty() {
                    self.warn_at(v.span(), &ppath, "port specs in a `ports` table are not used: binky allocates every port (only the labels count)");
                }
                out
            }
            _ => {
                self.wrong_type::<()>(
                    v,
                    &ppath,
                    "a list of port labels",
                    "e.g. ports = [\"http\", \"grpc\"]".to_owned(),
                );
                Vec::new()
            }
        };
        self.check_port_labels(&labels, &ppath);
        Some(labels.into_iter().map(|(l, _)| l).collect())
    }

    /// Every port label is a name that is not a token's (`port`, `url`), and appears once.
    fn check_port_labels(&mut self, labels: &[(String, Range<usize>)], ppath: &str) {
        let mut seen = BTreeSet::new();
        for (l, sp) in labels {
            if l.is_empty()
                || !l
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                || matches!(l.as_str(), "port" | "url")
            {
                self.error(sp.clone(), ppath, format!("invalid port label `{l}`"), Some("use letters, digits, `_` and `-`; `port` and `url` are reserved token names".to_owned()));
            }
            if !seen.insert(l.clone()) {
                self.error(
                    sp.clone(),
                    ppath,
                    format!("port label `{l}` appears twice"),
                    None,
                );
            }
        }
    }

    /// A `url` naming a port label names one of `ports`.
    fn check_url_port(
        &mut self,
        t: &Table<'_>,
        path: &str,
        url: Option<&UrlSpec>,
        ports: Option<&[String]>,
    ) {
        if let Some(UrlSpec::Port { label, .. }) = url {
            if !ports.is_some_and(|p| p.contains(label)) {
                self.key_error(
                    t,
                    path,
                    "url",
                    0..0,
                    format!("url points at port label `{label}`, which is not in `ports`"),
                    Some(format!("add \"{label}\" to ports")),
                );
            }
        }
    }

    /// `health`: a URL, or a table with one probe and how often and how long it runs.
    fn health(&mut self, t: &Table<'_>, path: &str) -> Option<Health> {
        let v = Self::get(t, "health")?;
        let hpath = join(path, "health");
        match v.get_ref() {
            DeValue::String(s) => Some(Health::of(Probe::Http(s.to_string()))),
            DeValue::Table(h) => self.health_table(h, &hpath, v.span()),
            _ => self.wrong_type(v, &hpath, "a URL string or a table", None),
        }
    }

    /// A `health` table (written at `span`).
    fn health_table(&mut self, h: &Table<'_>, hpath: &str, span: Range<usize>) -> Option<Health> {
        self.unknown_keys(h, hpath, HEALTH_KEYS);
        let before = self.errors.len();
        let probes: Vec<Probe> = [
            self.string(h, hpath, "http").map(Probe::Http),
            self.string(h, hpath, "tcp").map(Probe::Tcp),
            self.string(h, hpath, "cmd").map(Probe::Cmd),
        ]
        .into_iter()
        .flatten()
        .collect();
        let timeout_ms = self.health_duration(h, hpath, "timeout");
        let interval_ms = self.health_duration(h, hpath, "interval");
        let retries = Self::get(h, "retries").and_then(|rv| {
            self.integer_within(
                rv,
                &join(hpath, "retries"),
                1..=100,
                "retries must be between 1 and 100",
                Some("e.g. retries = 3 (failed checks in a row that make it unhealthy)".to_owned()),
            )
        });
        let on_unhealthy = self.on_unhealthy(h, hpath, span.clone());
        let probe_keys: Vec<&str> = ["http", "tcp", "cmd"]
            .into_iter()
            .filter(|k| h.get(*k).is_some())
            .collect();
        if probes.len() > 1 {
            // Such a file runs, checking the first of http, tcp, cmd (the probe existing
            // files were written against), and says which.
            self.warn_at(
                span.clone(),
                hpath,
                format!(
                    "has {}: binky checks only `{}` (the first of http, tcp, cmd); keep one",
                    probe_keys.join(" and "),
                    probe_keys[0]
                ),
            );
        }
        if probes.is_empty() && !(probe_keys.len() == 1 && self.errors.len() > before) {
            self.error(span, hpath, "health needs one of http, tcp, cmd", Some("e.g. health = { http = \"http://localhost:${self.port}/health\", timeout = \"30s\" }".to_owned()));
            return None;
        }
        probes.into_iter().next().map(|probe| Health {
            probe,
            timeout_ms,
            interval_ms,
            retries: retries.map(|n| n as u32),
            on_unhealthy,
        })
    }

    /// `health.on_unhealthy`: `restart` (the default) or `keep`.
    fn on_unhealthy(&mut self, h: &Table<'_>, hpath: &str, span: Range<usize>) -> OnUnhealthy {
        match self.string(h, hpath, "on_unhealthy").as_deref() {
            None | Some("restart") => OnUnhealthy::Restart,
            Some("keep") => OnUnhealthy::Keep,
            Some(other) => {
                self.key_error(
                    h,
                    hpath,
                    "on_unhealthy",
                    span,
                    format!("on_unhealthy is `restart` or `keep`, not `{other}`"),
                    Some("on_unhealthy = \"restart\" (the default) stops and starts it again; \"keep\" leaves it running, shown unhealthy".to_owned()),
                );
                OnUnhealthy::Restart
            }
        }
    }

    /// An integer in `range`, else an error (`message`, `fix`) and none.
    fn integer_within(
        &mut self,
        v: &Value<'_>,
        path: &str,
        range: RangeInclusive<i64>,
        message: &str,
        fix: Option<String>,
    ) -> Option<i64> {
        let n = self.integer(v, path)?;
        if range.contains(&n) {
            return Some(n);
        }
        self.error(v.span(), path, message, fix);
        None
    }

    /// `env` over `[defaults] env`, every name checked.
    fn env(&mut self, t: &Table<'_>, path: &str, defaults: &Defaults) -> BTreeMap<String, String> {
        let own = self.string_map(t, path, "env").unwrap_or_default();
        // `[defaults] env` first, the service's own keys over it.
        let mut env = defaults.env.clone();
        env.extend(own);
        for k in env.keys() {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                self.key_error(
                    t,
                    path,
                    "env",
                    0..0,
                    format!("invalid environment variable name `{k}`"),
                    None,
                );
            }
        }
        env
    }
}

impl Cx<'_> {
    /// A duration key of `health` (`"30s"`, `"500ms"` or a number of seconds), in ms.
    fn health_duration(&mut self, h: &Table<'_>, hpath: &str, key: &str) -> Option<u64> {
        let tv = Self::get(h, key)?;
        let text = self.text_or_number(tv, &join(hpath, key));
        match text.as_deref().map(parse_duration) {
            Some(Ok(d)) if key == "interval" && d.is_zero() => {
                self.error(
                    tv.span(),
                    &join(hpath, key),
                    "interval must be more than 0",
                    Some("e.g. interval = \"5s\"".to_owned()),
                );
                None
            }
            Some(Ok(d)) => Some(d.as_millis() as u64),
            Some(Err(e)) => {
                self.error(
                    tv.span(),
                    &join(hpath, key),
                    e,
                    Some(format!("e.g. {key} = \"30s\" (ms, s, m, h)")),
                );
                None
            }
            None => None,
        }
    }
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
