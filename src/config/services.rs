//! `[services]`: each service's name and kind (process or resource), `depends_on` and
//! `shared`; the checks across services (a `depends_on` naming no service, a cycle); and
//! the footguns a valid config can still hold.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use binky_controllers::spec::{Service, ServiceKind, Spec};

use super::cx::join;
use super::defaults::Defaults;
use super::process::PROCESS_KEYS;
use super::resources::{url_has_password, RESOURCE_KEYS, RESOURCE_SHARED_KEYS};
use super::{Cx, Table};

/// Each `depends_on` entry: (service, the service it names, where).
pub(super) type DepSpans = Vec<(String, String, Range<usize>)>;

impl Cx<'_> {
    /// The `[services]` table of `root`: the valid services by name.
    pub(super) fn services(
        &mut self,
        root: &Table<'_>,
        defaults: &Defaults,
        dep_spans: &mut DepSpans,
    ) -> BTreeMap<String, Service> {
        let mut services = BTreeMap::new();
        if let Some(v) = Self::get(root, "services") {
            if let Some(t) = self.expect_table(v, "services") {
                for (k, sv) in t.iter() {
                    let name = k.get_ref().to_string();
                    let path = format!("services.{name}");
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    {
                        self.error(k.span(), &path, format!("invalid service name `{name}`"), Some("use letters, digits, `_` and `-` (tokens like ${web.port} split on the first `.`)".to_owned()));
                        continue;
                    }
                    let Some(st) = self.expect_table(sv, &path) else {
                        continue;
                    };
                    if let Some(svc) =
                        self.service(st, &path, sv.span(), defaults, dep_spans, &name)
                    {
                        services.insert(name, svc);
                    }
                }
            }
        }

        services
    }

    /// The service `name` at `path`: a process or a resource, exactly one of the two. Its
    /// `depends_on` entries go to `dep_spans` for the cross-reference checks.
    fn service(
        &mut self,
        t: &Table<'_>,
        path: &str,
        span: Range<usize>,
        defaults: &Defaults,
        dep_spans: &mut DepSpans,
        name: &str,
    ) -> Option<Service> {
        let has_cmd = Self::get(t, "cmd").is_some();
        let has_adapter = Self::get(t, "adapter").is_some();
        let all: Vec<&str> = PROCESS_KEYS.iter().chain(RESOURCE_KEYS).copied().collect();
        self.unknown_keys(t, path, &all);
        if has_cmd == has_adapter {
            self.error(span, path, if has_cmd { "has both `cmd` and `adapter`" } else { "has neither `cmd` nor `adapter`" }, Some("a service is either a process (cmd = \"…\") or a resource (adapter = \"postgres\"), exactly one of the two".to_owned()));
            return None;
        }
        for (k, _) in t.iter() {
            let key = k.get_ref().as_ref();
            if has_cmd && RESOURCE_KEYS.contains(&key) {
                self.error(
                    k.span(),
                    &join(path, key),
                    format!("`{key}` is only valid on an adapter (resource) service"),
                    Some("remove it, or make the service an adapter service".to_owned()),
                );
            }
            if has_adapter && PROCESS_KEYS.contains(&key) && !RESOURCE_SHARED_KEYS.contains(&key) {
                // A warning, not a refusal: existing files carry these, so the file runs
                // and says so.
                self.warn_at(
                    k.span(),
                    &join(path, key),
                    format!("`{key}` does nothing on an adapter service (it runs no process, so binky ignores it): remove it"),
                );
            }
        }
        let depends_on: Vec<String> = self
            .string_list(t, path, "depends_on", false)
            .unwrap_or_default()
            .into_iter()
            .map(|(d, sp)| {
                dep_spans.push((name.to_owned(), d.clone(), sp));
                d
            })
            .collect();
        let shared = self.boolean(t, path, "shared").unwrap_or(false);
        let kind = if has_cmd {
            ServiceKind::Process(self.process(t, path, defaults)?)
        } else {
            ServiceKind::Resource(self.resource(t, path, span, shared, defaults)?)
        };
        Some(Service {
            depends_on,
            shared,
            kind,
        })
    }

    /// Every `depends_on` names another service the file declares.
    pub(super) fn depends_on(&mut self, dep_spans: &DepSpans, declared: &BTreeSet<String>) {
        for (svc, dep, span) in dep_spans {
            if dep == svc {
                self.error(
                    span.clone(),
                    &format!("services.{svc}.depends_on"),
                    format!("`{svc}` depends on itself"),
                    Some("remove it from its own depends_on".to_owned()),
                );
            } else if !declared.contains(dep) {
                let known: Vec<&str> = declared.iter().map(String::as_str).collect();
                self.error(
                    span.clone(),
                    &format!("services.{svc}.depends_on"),
                    format!("unknown service `{dep}`"),
                    Some(format!("services: {}", known.join(", "))),
                );
            }
        }
    }

    /// The services start in an order: no `depends_on` cycle (checked on a spec without
    /// other errors).
    pub(super) fn dependency_cycle(&mut self, spec: &Spec, dep_spans: &DepSpans) {
        if self.errors.is_empty() {
            if let Err(cycle) = spec.start_order() {
                let first = &cycle.0[0];
                let second = cycle.0.get(1).unwrap_or(first);
                let span = dep_spans
                    .iter()
                    .find(|(s, d, _)| s == first && d == second)
                    .map(|(_, _, sp)| sp.clone())
                    .unwrap_or(0..0);
                self.error(
                    span,
                    &format!("services.{first}.depends_on"),
                    format!("{cycle}"),
                    Some("remove one of these depends_on entries".to_owned()),
                );
            }
        }
    }

    /// Non-fatal footguns (the rest of `binky check` builds on these); `root` is the file's
    /// table, for the lines of the keys they name.
    pub(super) fn footguns(&mut self, spec: &Spec, root: &Table<'_>) {
        for (name, svc) in &spec.services {
            let path = format!("services.{name}");
            if let Some(p) = svc.process() {
                // No `ports`, no `url`, but `${self.port}` somewhere: it gets the ports its
                // tokens name (unresolved, the text would reach the process as is), and each
                // place says so.
                if p.url.is_none() {
                    for (field, text) in p.token_fields() {
                        let labels = binky_controllers::spec::self_references(text);
                        if labels.is_empty() || p.ports.as_ref().is_some_and(|l| !l.is_empty()) {
                            continue;
                        }
                        let key = join(&path, &field);
                        let span = span_of_field(root, name, &field);
                        if p.ports.is_some() {
                            self.warn_at(span, &key, format!("uses ${{self.…}} but `{name}` says ports = []: it gets no port and the token stays as written; name the port: ports = [\"http\"]"));
                            continue;
                        }
                        let named: Vec<String> = labels
                            .iter()
                            .map(|l| {
                                if l.is_empty() {
                                    "a port".to_owned()
                                } else {
                                    format!("port `{l}`")
                                }
                            })
                            .collect();
                        self.warn_at(span, &key, format!("uses ${{self.…}} but `{name}` declares neither `ports` nor `url`: binky gives it {} of its own (served by no URL); say so with ports = [\"{}\"], or url = true to serve it through the proxy", named.join(" and "), labels.iter().find(|l| !l.is_empty()).map_or("http", String::as_str)));
                    }
                }
            }
            if let Some(r) = svc.resource() {
                if let Some(url) = &r.admin_url {
                    if url_has_password(url) {
                        self.warn(&format!("{path}.admin_url"), "admin_url has an inline password; use ${env.NAME} so the secret is not committed");
                    }
                }
            }
        }
    }
}

/// Where `services.<service>.<field>` is written (`env.NAME` inside its `env` table), for a
/// finding's line; the start of the file when it cannot be found.
fn span_of_field(root: &Table<'_>, service: &str, field: &str) -> Range<usize> {
    fn table<'t, 'i>(v: &'t super::Value<'i>) -> Option<&'t Table<'i>> {
        match v.get_ref() {
            toml::de::DeValue::Table(t) => Some(t),
            _ => None,
        }
    }
    let Some(svc) = Cx::get(root, "services")
        .and_then(table)
        .and_then(|s| Cx::get(s, service))
        .and_then(table)
    else {
        return 0..0;
    };
    let (first, rest) = match field.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (field, None),
    };
    let Some(v) = Cx::get(svc, first) else {
        return 0..0;
    };
    rest.and_then(|r| table(v).and_then(|t| Cx::get(t, r)))
        .map_or_else(|| v.span(), |x| x.span())
}
