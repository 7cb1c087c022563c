//! `binky check`: validate a `binky.toml` and flag its footguns, one finding per line with
//! the file, line, key and fix. Errors are also refused at write time (`binky up`,
//! `binky apply`, the config watcher); warnings are only reported.

use std::path::Path;

use binky_controllers::admission::{self, Verdict};
use binky_controllers::spec::{Probe, Process, Resource, Service, ServiceKind, Spec};

use crate::config::{self, Loaded};
use crate::credentials::{credential_kind, secret_name};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Refused at `binky up`; `binky check` exits 1.
    Error,
    /// Reported only.
    Warning,
}

/// One problem.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// Error or warning.
    pub level: Level,
    /// A stable short name (`inline-credential`, `self-port-without-port`, …).
    pub code: &'static str,
    /// Dotted key (`services.api.env.TOKEN`), empty for the file.
    pub key: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl Finding {
    /// `path:line: level: key: message (fix: …)`.
    pub fn render(&self, path: &Path) -> String {
        let mut s = path.display().to_string();
        if let Some(l) = self.line {
            s.push_str(&format!(":{l}"));
        }
        s.push_str(match self.level {
            Level::Error => ": error",
            Level::Warning => ": warning",
        });
        if !self.key.is_empty() {
            s.push_str(&format!(": {}", self.key));
        }
        s.push_str(&format!(": {}", self.message));
        if !self.fix.is_empty() {
            s.push_str(&format!("\n    fix: {}", self.fix));
        }
        s
    }
}

/// The line of `key` inside `[services.<service>]` (or of the table itself when `key` is
/// empty or not written there).
fn line_of(text: &str, service: &str, key: &str) -> Option<usize> {
    key_line(text, service, key).or_else(|| key_line(text, service, ""))
}

/// The line of `key` inside `[services.<service>]` or its subtables (`[services.api.env]`),
/// or of the table itself when `key` is empty; `None` when it is not written there.
fn key_line(text: &str, service: &str, key: &str) -> Option<usize> {
    let header = format!("[services.{service}]");
    let mut inside = false;
    let mut table_line = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            if inside {
                break;
            }
            if line.replace(' ', "") == header || line.starts_with(&format!("[services.{service}."))
            {
                inside = true;
                table_line = Some(i + 1);
            }
            continue;
        }
        if inside && !key.is_empty() {
            let k = line
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches('"');
            // `KEY = …`, or `KEY` inside an inline table on this line (`env = { KEY = … }`).
            let inline = line.contains('{')
                && line[line.find('{').unwrap_or(0)..]
                    .split([',', '{'])
                    .any(|part| {
                        part.split('=')
                            .next()
                            .unwrap_or("")
                            .trim()
                            .trim_matches('"')
                            == key
                    });
            if k == key || inline {
                return Some(i + 1);
            }
        }
    }
    if key.is_empty() {
        table_line
    } else {
        None
    }
}

/// Every finding for a file's text.
pub fn check(text: &str, path: &Path) -> Vec<Finding> {
    match config::parse(text, path) {
        Err(errors) => errors
            .0
            .into_iter()
            .map(|e| Finding {
                level: Level::Error,
                code: "invalid",
                key: e.key,
                line: e.position.map(|p| p.0),
                message: e.message,
                fix: e.fix.unwrap_or_default(),
            })
            .collect(),
        Ok(loaded) => {
            let mut out: Vec<Finding> = loaded
                .warnings
                .iter()
                .map(|w| Finding {
                    level: Level::Warning,
                    code: "config",
                    key: w.key.clone(),
                    line: w.line,
                    message: w.message.clone(),
                    fix: String::new(),
                })
                .collect();
            if let Verdict::Deny { reason } = admission::check_spec(&loaded.spec, None) {
                out.push(Finding {
                    level: Level::Error,
                    code: "refused",
                    key: String::new(),
                    line: None,
                    message: reason,
                    fix: String::new(),
                });
            }
            let more = check_loaded(text, &loaded);
            // A parser warning that a finding below says better (an inline password,
            // `${self.…}` without a port) is not repeated.
            out.retain(|w| {
                !more
                    .iter()
                    .any(|f| f.key == w.key || f.key.starts_with(&format!("{}.", w.key)))
            });
            out.extend(more);
            out
        }
    }
}

/// The footguns of a parsed config.
pub fn check_loaded(text: &str, loaded: &Loaded) -> Vec<Finding> {
    let spec = &loaded.spec;
    let mut out = Vec::new();
    let registry = crate::adapters::Registry::default();
    for (name, svc) in &spec.services {
        let mut f = Finder {
            text,
            name,
            out: &mut out,
        };
        todo_command(&mut f, svc);
        inline_credentials(&mut f, svc);
        secrets_outside_env(&mut f, svc);
        match &svc.kind {
            ServiceKind::Process(p) => process_findings(&mut f, spec, svc, p),
            ServiceKind::Resource(r) => resource_findings(&mut f, &registry, r),
        }
    }
    out.extend(token_findings(text, loaded));
    out
}

/// Where the findings of one service go, each on the line of its key.
struct Finder<'a> {
    text: &'a str,
    /// The service's name.
    name: &'a str,
    out: &'a mut Vec<Finding>,
}

impl Finder<'_> {
    /// A finding about `key` (`services.<name>.…`).
    fn find(
        &mut self,
        level: Level,
        code: &'static str,
        key: String,
        message: String,
        fix: String,
    ) {
        let (text, name) = (self.text, self.name);
        let last = key.rsplit('.').next().unwrap_or("").to_owned();
        let field = key.split('.').nth(2).unwrap_or("").to_owned();
        // The line of the key itself, else of the field holding it (`options = { … }`),
        // else of the service's table.
        let line = key_line(text, name, &last)
            .or_else(|| key_line(text, name, &field))
            .or_else(|| line_of(text, name, ""));
        self.out.push(Finding {
            level,
            code,
            key,
            line,
            message,
            fix,
        });
    }
}

/// A command `binky init` could not know: the file is not done.
fn todo_command(f: &mut Finder<'_>, svc: &Service) {
    let name = f.name;
    if let Some(p) = svc
        .process()
        .filter(|p| p.cmd.trim_start().starts_with("TODO"))
    {
        f.find(
            Level::Error,
            "todo",
            format!("services.{name}.cmd"),
            format!("is still a TODO ({}): binky cannot start {name}", p.cmd.trim()),
            format!("write the command that starts {name} on the host (listening on ${{self.port}} if it has a URL); the comment above it in binky.toml says what compose ran"),
        );
    }
}

/// Inline credentials, in any env value and in admin_url.
fn inline_credentials(f: &mut Finder<'_>, svc: &Service) {
    let name = f.name;
    let (env, admin) = match &svc.kind {
        ServiceKind::Process(p) => (&p.env, None),
        ServiceKind::Resource(r) => (&r.env, r.admin_url.as_deref()),
    };
    // A warning, not a refusal: an admin address of a local server
    // (`postgres://postgres:postgres@localhost`) is common and running it is no less safe
    // than refusing a file that is already committed.
    if let Some(kind) = admin.and_then(credential_kind) {
        f.find(
            Level::Warning,
            "inline-credential",
            format!("services.{name}.admin_url"),
            format!("holds {kind}: binky.toml is committed and every worktree carries it"),
            "use a reference: admin_url = \"${env.POSTGRES_ADMIN_URL}\" (or leave admin_url out and let binky run the server)".into(),
        );
    }
    for (k, v) in env {
        let kind = credential_kind(v).or_else(|| {
            (secret_name(k) && !v.is_empty() && !v.contains("${"))
                .then_some("a secret (by its name)")
        });
        if let Some(kind) = kind {
            f.find(
                Level::Error,
                "inline-credential",
                format!("services.{name}.env.{k}"),
                format!("holds {kind} written inline"),
                format!("use a reference: {k} = \"${{env.{k}}}\" and set it in the environment of `binky up`"),
            );
        }
    }
}

/// A `${secret:REF}` in a field other than an env value.
fn secrets_outside_env(f: &mut Finder<'_>, svc: &Service) {
    let name = f.name;
    // `${secret:REF}` is resolved in env values only: anywhere else it would reach the
    // program as its own text (`/bin/sh: Bad substitution`), and a secret on a command
    // line is readable by every user in `ps`.
    let fields = svc
        .token_fields()
        .into_iter()
        .filter(|(field, _)| !field.starts_with("env."));
    for (field, value) in fields {
        if let Some(r) = crate::secrets::references(value).first() {
            let var = crate::secrets::env_name(r)
                .trim_start_matches("BINKY_SECRET_")
                .to_owned();
            f.find(
                Level::Error,
                "secret-outside-env",
                format!("services.{name}.{field}"),
                format!("uses ${{secret:{r}}}, which binky resolves only in env values: here the program would get the text itself, and a secret on a command line is visible to every user in `ps`"),
                format!("put it in env and use the variable: env = {{ {var} = \"${{secret:{r}}}\" }} and ${var} in {field}"),
            );
        }
    }
}

/// A process service: a URL it ignores the port of, dependencies it cannot be waited on.
fn process_findings(f: &mut Finder<'_>, spec: &Spec, svc: &Service, p: &Process) {
    let name = f.name;
    let mut texts: Vec<&str> = vec![&p.cmd];
    texts.extend(p.env.values().map(String::as_str));
    texts.extend(p.setup.as_deref());
    if let Some(h) = &p.health {
        match &h.probe {
            Probe::Http(t) | Probe::Tcp(t) | Probe::Cmd(t) => texts.push(t),
        }
    }
    let uses_port = |t: &str| t.contains("${self.") || t.contains("$PORT") || t.contains("${PORT");
    if p.url.is_some() && !texts.iter().any(|t| uses_port(t)) {
        f.find(
            Level::Warning,
            "ignores-port",
            format!("services.{name}.cmd"),
            "has a url but its cmd and env never mention its port: it will listen where it likes and the proxy will route to a port nobody serves".into(),
            "pass the port: `--port ${self.port}` in cmd (or read $PORT in the program)".into(),
        );
    }
    if let Some(w) = crate::workers::recognise(&p.cmd).filter(|_| p.stop.signal.is_none()) {
        f.find(
            Level::Warning,
            "slow-stop",
            format!("services.{name}.cmd"),
            format!(
                "starts {}, which binky stops with SIGTERM: {}, so `binky down`, `reload` and `remove` wait up to its stop_grace_period (5 s) for it",
                w.what, w.why
            ),
            format!("stop it at once: stop_signal = \"{}\"", w.signal),
        );
    }
    for dep in &svc.depends_on {
        if let Some(d) = spec.services.get(dep).and_then(Service::process) {
            if d.health.is_none() && d.port_labels().is_empty() {
                f.find(
                    Level::Warning,
                    "unwaited-dependency",
                    format!("services.{name}.depends_on"),
                    format!("depends on `{dep}`, which has no health check and no port: binky can only wait until it has stayed up 300 ms, not until it is ready"),
                    format!("give `{dep}` a health check: health = {{ cmd = \"…\" }} (or a port and health = \"/…\")"),
                );
            }
        }
    }
}

/// A resource service: an adapter that is not there, Redis options that break isolation,
/// a `clone_from` its adapter cannot do.
fn resource_findings(f: &mut Finder<'_>, registry: &crate::adapters::Registry, r: &Resource) {
    let name = f.name;
    // An external adapter may be installed after the file is written: the world runs, and
    // this service's slice fails saying what to install until it is there.
    if registry.get(&r.adapter).is_err() {
        let base = crate::adapters::kind::AdapterName::read(&r.adapter).name;
        let near = crate::config::suggest(base, &registry.builtin_names());
        f.find(
            Level::Warning,
            "unknown-adapter",
            format!("services.{name}.adapter"),
            format!("no adapter `{base}`: not built in and no `binky-adapter-{base}` on PATH; `binky up` runs the world, and the slice of `{name}` fails until it is found"),
            match near {
                Some(b) => format!("did you mean adapter = \"{b}\"? Else install binky-adapter-{base} on the PATH of `binky up`"),
                None => format!("install binky-adapter-{base} on the PATH of `binky up`, or use a built-in adapter ({})", registry.builtin_names().join(", ")),
            },
        );
    } else if crate::adapters::AdapterKind::of(&r.adapter)
        == Some(crate::adapters::AdapterKind::Redis)
    {
        for p in crate::adapters::redis::check_options(&r.options, r.admin_url.is_some()) {
            f.find(
                Level::Error,
                "redis-isolation",
                format!("services.{name}.{}", p.key),
                p.message,
                p.fix,
            );
        }
    }
    if r.clone_from.is_some() && crate::adapters::can_clone_statically(&r.adapter) == Some(false) {
        f.find(
            Level::Warning,
            "clone-unsupported",
            format!("services.{name}.clone_from"),
            format!("adapter `{}` cannot clone: every world runs migrate and seed itself (an event `clone_fallback` says so)", r.adapter),
            "remove clone_from".into(),
        );
    }
}

/// What `${SVC.ATTR}` may name for `target`: `None` when anything may (an external
/// adapter: its `resolve` answer says), else the attributes, sorted.
fn attributes_of(
    spec: &binky_controllers::spec::Spec,
    target: &str,
) -> Option<Option<Vec<String>>> {
    let svc = spec.services.get(target)?;
    Some(match &svc.kind {
        ServiceKind::Process(p) => {
            let labels = p.port_labels();
            let mut out: Vec<String> = Vec::new();
            if !labels.is_empty() {
                out.extend(["port", "proxy_url", "url"].map(String::from));
            }
            out.extend(labels.into_iter().filter(|l| !l.is_empty()));
            out.sort();
            out.dedup();
            Some(out)
        }
        ServiceKind::Resource(r) => crate::adapters::tokens::documented(&r.adapter).map(|names| {
            let mut out: Vec<String> = names.into_iter().map(String::from).collect();
            out.extend(["proxy_url", "url"].map(String::from));
            out.sort();
            out
        }),
    })
}

/// What is wrong with the binky token `expr` (inside `${…}`) written in `field` of
/// `service` (`None`: a hook), if anything: (message, fix).
fn token_problem(
    spec: &binky_controllers::spec::Spec,
    service: Option<&str>,
    field: &str,
    expr: &str,
) -> Option<(String, String)> {
    let token = format!("${{{expr}}}");
    let Some((obj, attr)) = expr.split_once('.') else {
        return None; // `${worktree}`
    };
    if obj == "worktree" {
        return (attr != "path").then(|| {
            (
                format!("uses {token}, which is not a token"),
                "the world's tokens are ${worktree} (its name) and ${worktree.path} (its worktree)"
                    .to_owned(),
            )
        });
    }
    let server_setting = binky_controllers::spec::Resource::is_server_setting(field);
    if server_setting {
        return Some((
            format!("uses {token}, but {field} is a setting of the shared server, made before any slice: it sees only ${{env.NAME}} and ${{worktree}}"),
            "put the value in the environment of `binky up` and write ${env.NAME}".to_owned(),
        ));
    }
    let target = match (obj, service) {
        ("self", Some(s)) => s,
        ("self", None) => {
            return Some((
                format!("uses {token}, but a hook belongs to no service"),
                "name the service: ${web.port}".to_owned(),
            ))
        }
        (o, _) => o,
    };
    let Some(attributes) = attributes_of(spec, target) else {
        let near = spec
            .services
            .keys()
            .find(|n| crate::config::edit_distance(n, target) <= 2);
        return Some((
            format!("uses {token}, but there is no service `{target}`: it would reach the program as its own text"),
            match near {
                Some(n) => format!("did you mean ${{{n}.{attr}}}?"),
                None => format!(
                    "name one of the services ({})",
                    spec.services.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            },
        ));
    };
    let attributes = attributes?;
    if attributes.iter().any(|a| a == attr) {
        return None;
    }
    let what = match spec.services[target].resource() {
        Some(r) => format!("the {} adapter gives", r.adapter),
        None => format!("`{target}` has"),
    };
    if attributes.is_empty() {
        return Some((
            format!("uses {token}, but `{target}` has no port: it would reach the program as its own text"),
            format!("give `{target}` a port: url = true (served through the proxy) or ports = [\"{}\"]", if attr == "port" || attr == "url" || attr == "proxy_url" { "http" } else { attr }),
        ));
    }
    let list: Vec<String> = attributes
        .iter()
        .map(|a| format!("${{{obj}.{a}}}"))
        .collect();
    Some((
        format!(
            "uses {token}, which resolves to nothing: {what} {}",
            list.join(", ")
        ),
        format!(
            "use one of them{}",
            if spec.services[target].process().is_some() {
                format!(", or name the port: ports = [\"{attr}\"]")
            } else {
                String::new()
            }
        ),
    ))
}

/// Errors for binky tokens that can never resolve (`${db.nope}`, `${api.port}` of a service
/// without a port, `${nope.url}`): such a token would reach the program as its own text.
pub fn token_findings(text: &str, loaded: &Loaded) -> Vec<Finding> {
    use binky_controllers::tokens::{is_binky_token, token_exprs};
    let spec = &loaded.spec;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let hooks = [
        ("post_up", spec.hooks.post_up.as_deref()),
        ("pre_down", spec.hooks.pre_down.as_deref()),
    ];
    let hook_fields = hooks
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (None, k.to_owned(), v)));
    let service_fields = spec.services.iter().flat_map(|(name, svc)| {
        svc.token_fields()
            .into_iter()
            .map(move |(field, v)| (Some(name.as_str()), field, v))
    });
    for (service, field, value) in service_fields.chain(hook_fields) {
        for expr in token_exprs(value).filter(|e| is_binky_token(e)) {
            let Some((message, fix)) = token_problem(spec, service, &field, expr) else {
                continue;
            };
            let key = match service {
                Some(s) => format!("services.{s}.{field}"),
                None => format!("hooks.{field}"),
            };
            if !seen.insert((key.clone(), expr.to_owned())) {
                continue;
            }
            let last = field.rsplit('.').next().unwrap_or("");
            let line = match service {
                Some(s) => key_line(text, s, last)
                    .or_else(|| key_line(text, s, field.split('.').next().unwrap_or("")))
                    .or_else(|| line_of(text, s, "")),
                None => text
                    .lines()
                    .position(|l| l.trim_start().starts_with(&field))
                    .map(|i| i + 1),
            };
            out.push(Finding {
                level: Level::Error,
                code: "unresolved-token",
                key,
                line,
                message,
                fix,
            });
        }
    }
    out
}

/// Warnings for the `[project] copy` paths binky will not copy from the repository whose
/// top is `top`, its `binky.toml` in `prefix` below it (tracked, or not ignored by git): a
/// new world would lack them.
pub fn copy_findings(text: &str, loaded: &Loaded, top: &Path, prefix: &Path) -> Vec<Finding> {
    let line = text
        .lines()
        .position(|l| {
            let l = l.trim_start();
            l.starts_with("copy") && l[4..].trim_start().starts_with('=')
        })
        .map(|i| i + 1);
    crate::bootstrap::refused(top, prefix, &loaded.spec.project.copy)
        .into_iter()
        .map(|r| Finding {
            level: Level::Warning,
            code: "copy-refused",
            key: "project.copy".into(),
            line,
            message: r.why,
            fix: r.fix,
        })
        .collect()
}

/// Warnings for the `${env.…}` references that `env` (the environment `binky check` runs
/// in) leaves without a value: `binky up` from there refuses them.
pub fn env_findings(
    text: &str,
    loaded: &Loaded,
    env: &std::collections::BTreeMap<String, String>,
) -> Vec<Finding> {
    let spec = &loaded.spec;
    let mut out = Vec::new();
    let all: std::collections::BTreeSet<String> = spec.services.keys().cloned().collect();
    for u in unset_env_refs(spec, &all, env) {
        let key = format!("services.{}.{}", u.service, u.field);
        let line = line_of(text, &u.service, u.field.rsplit('.').next().unwrap_or(""));
        out.push(Finding {
            level: Level::Warning,
            code: "env-unset",
            key,
            line,
            message: format!(
                "uses ${{env.{}}}, which is not set here{}: `binky up` from this shell refuses it",
                u.var.name,
                u.var.message.map(|m| format!(" ({m})")).unwrap_or_default()
            ),
            fix: format!(
                "set {} in the environment of `binky up`, or give a default: ${{env.{}:-value}}",
                u.var.name, u.var.name
            ),
        });
    }
    out
}

/// Warnings for the golden templates whose key would miss a new migration: no migration or
/// seed files of a known layout are found under the service's workdir (relative to
/// `config_dir`, the directory of `binky.toml`) and `clone_key_files` is not set.
pub fn golden_findings(text: &str, loaded: &Loaded, config_dir: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    for (name, svc) in &loaded.spec.services {
        let Some(res) = svc.resource().filter(|r| r.clone_from.is_some()) else {
            continue;
        };
        if res.migrate.is_none() && res.seed.is_none() {
            continue;
        }
        let workdir = config_dir.join(&res.workdir);
        let cov = binky_controllers::golden::key_coverage(&workdir, res);
        if !cov.found.is_empty() {
            continue;
        }
        let field = if res.migrate.is_some() {
            "migrate"
        } else {
            "seed"
        };
        out.push(Finding {
            level: Level::Warning,
            code: "golden-key-commands-only",
            key: format!("services.{name}.{field}"),
            line: line_of(text, name, field),
            message: format!(
                "the golden template's key covers only the text of migrate and seed{}: no migration or seed files were found under {} (layouts looked for: Alembic's script_location, migrations/, db/migrate/, prisma/migrations/, seeds/, seeders/, fixtures/, *.sql, schema.rb, schema.prisma, …), so a new migration would not rebuild the template and new worlds would get the old schema",
                if cov.files.is_empty() {
                    String::new()
                } else {
                    format!(" and the files they name ({})", cov.files.join(", "))
                },
                workdir.display()
            ),
            fix: "list the files the database is built from: clone_key_files = [\"db/**\", \"seed/*.json\"]".into(),
        });
    }
    out
}

/// Warnings for shared services (`shared = true`, one instance for every world of the
/// project): a token naming one world's own service, which the shared instance cannot
/// resolve; and, given the definitions the project's worlds share now (`running`, the
/// shared world's spec), a definition in this file that differs: the last world written
/// wins, so the next `binky up` of a world with this file replaces it for every world.
pub fn shared_findings(
    text: &str,
    loaded: &Loaded,
    running: Option<&binky_controllers::spec::Spec>,
) -> Vec<Finding> {
    let spec = &loaded.spec;
    let mut out = Vec::new();
    for (name, svc) in spec.services.iter().filter(|(_, s)| s.shared) {
        for (field, value) in svc.token_fields() {
            let own = binky_controllers::tokens::Tokens::referenced_services(value)
                .into_iter()
                .find(|r| spec.services.get(r).is_some_and(|o| !o.shared));
            if let Some(other) = own {
                out.push(Finding {
                    level: Level::Warning,
                    code: "shared-uses-world-token",
                    key: format!("services.{name}.{field}"),
                    line: line_of(text, name, field.rsplit('.').next().unwrap_or("")),
                    message: format!("{name} is shared (one instance for all the project's worlds), but names `{other}`, of which each world has its own: the shared instance gets the token as text"),
                    fix: format!("make `{other}` shared too, or give {name} what it needs another way"),
                });
            }
        }
        let Some(theirs) = running.and_then(|r| r.services.get(name)) else {
            continue;
        };
        if theirs != svc {
            out.push(Finding {
                level: Level::Warning,
                code: "shared-definition-differs",
                key: format!("services.{name}"),
                line: line_of(text, name, ""),
                message: format!("{name} is shared, and the project's worlds run another definition of it now (written by another world's binky.toml; the last one written wins): `binky up` or an edit of a world with this file replaces it for every world of the project"),
                fix: format!("define {name} the same way on every branch the project's worlds run (commit this file where the others are), or go ahead if this one should replace it"),
            });
        }
    }
    out
}

/// An `${env.NAME}` with no default that `env` does not set, where it is written.
#[derive(Clone, Debug)]
pub struct UnsetRef {
    /// The service.
    pub service: String,
    /// The field (`cmd`, `env.API_KEY`, `admin_url`, …).
    pub field: String,
    /// The variable, and the `?message` written with it.
    pub var: binky_controllers::tokens::UnsetEnv,
}

/// The `${env.…}` references of the `selected` services that `env` leaves without a value.
/// The settings of a service with an `env_file` are left out but for an adapter's
/// `admin_url` and options (the file, read by the daemon in the worktree, may set them; the
/// daemon then refuses to start the service if not).
pub fn unset_env_refs(
    spec: &binky_controllers::spec::Spec,
    selected: &std::collections::BTreeSet<String>,
    env: &std::collections::BTreeMap<String, String>,
) -> Vec<UnsetRef> {
    let t = binky_controllers::tokens::Tokens {
        env: env.clone(),
        ..Default::default()
    };
    let mut out = Vec::new();
    for name in selected {
        let Some(svc) = spec.services.get(name) else {
            continue;
        };
        // What an env_file may set is the daemon's to judge (it reads the file in the
        // worktree); an adapter's server settings see only the environment of `binky up`.
        let has_files = !svc.env_files().is_empty();
        let fields = svc.token_fields().into_iter().filter(|(field, _)| {
            !has_files || binky_controllers::spec::Resource::is_server_setting(field)
        });
        for (field, text) in fields {
            for var in t.unset_env(text) {
                out.push(UnsetRef {
                    service: name.clone(),
                    field: field.clone(),
                    var,
                });
            }
        }
    }
    out
}

/// Services whose `limits` this machine cannot cap (`look`: what enforces them here and,
/// when nothing the system offers caps them, why): one warning each, since `binky up` runs
/// them anyway. Under binky's polling the warning says what binky does instead, for that
/// service's limits (memory restarted over the limit, CPU at a lower priority).
pub fn limits_findings(
    text: &str,
    loaded: &Loaded,
    look: impl FnOnce() -> (binky_controllers::process::Mechanism, String),
) -> Vec<Finding> {
    use binky_controllers::process::Mechanism;
    let limited: Vec<(&String, &binky_controllers::spec::Limits)> = loaded
        .spec
        .services
        .iter()
        .filter_map(|(n, s)| Some((n, s.process()?.limits.as_ref()?)))
        .collect();
    if limited.is_empty() {
        return Vec::new();
    }
    let (mechanism, why) = look();
    if mechanism.caps() {
        return Vec::new();
    }
    // The niceness the `nice` setting gives by default: `binky check` reads no home.
    let world_nice = binky_controllers::settings::default_of("nice")
        .parse()
        .unwrap_or(10);
    limited
        .into_iter()
        .map(|(name, limits)| {
            let (code, message) = match mechanism {
                Mechanism::Polled => {
                    // A value that does not read is an error of its own (`limits`).
                    let read = limits.resolve().unwrap_or_default();
                    let what = crate::supervisor::resources::polled_here(read, world_nice);
                    (
                        "limits-not-capped",
                        format!("not capped on this machine: {what} ({why})"),
                    )
                }
                _ => (
                    "limits-not-enforced",
                    format!("not enforced on this machine: {why}"),
                ),
            };
            Finding {
                level: Level::Warning,
                code,
                key: format!("services.{name}.limits"),
                line: line_of(text, name, "limits"),
                message,
                fix: crate::supervisor::resources::fix().to_owned(),
            }
        })
        .collect()
}

/// Is any finding an error?
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.level == Level::Error)
}

/// The errors of a parsed spec, for the write-time gate.
pub fn errors(text: &str, loaded: &Loaded) -> Vec<Finding> {
    check_loaded(text, loaded)
        .into_iter()
        .filter(|f| f.level == Level::Error)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<(&'static str, Level, Option<usize>)> {
        check(text, Path::new("binky.toml"))
            .into_iter()
            .map(|f| (f.code, f.level, f.line))
            .collect()
    }

    const HEAD: &str = "[project]\nname = \"p\"\n";

    /// (key, line, message) of each `unresolved-token` finding.
    fn unresolved(text: &str) -> Vec<(String, Option<usize>, String, String)> {
        check(text, Path::new("binky.toml"))
            .into_iter()
            .filter(|f| f.code == "unresolved-token")
            .inspect(|f| assert_eq!(f.level, Level::Error))
            .map(|f| (f.key, f.line, f.message, f.fix))
            .collect()
    }

    #[test]
    fn every_documented_token_of_every_adapter_passes_and_any_other_is_an_error() {
        let registry = crate::adapters::Registry::default();
        for adapter in registry.builtin_names() {
            let names = crate::adapters::tokens::documented(adapter).unwrap();
            let mut env: Vec<String> = names
                .iter()
                .chain(&["url", "proxy_url"])
                .map(|t| format!("T_{} = \"${{db.{t}}}\"", t.to_uppercase()))
                .collect();
            let migrate = format!("migrate = \"run ${{self.port}} ${{self.{}}}\"", names[0]);
            let text = format!(
                "{HEAD}\n[services.db]\nadapter = \"{adapter}\"\n{migrate}\n\n[services.web]\ncmd = \"serve ${{self.port}}\"\nurl = true\nenv = {{ {} }}\n",
                env.join(", ")
            );
            assert!(
                unresolved(&text).is_empty(),
                "{adapter}: {:?}",
                unresolved(&text)
            );
            env.push("BAD = \"${db.tablespace}\"".into());
            let text = format!(
                "{HEAD}\n[services.db]\nadapter = \"{adapter}\"\n\n[services.web]\ncmd = \"serve ${{self.port}}\"\nurl = true\nenv = {{ {} }}\n",
                env.join(", ")
            );
            let f = unresolved(&text);
            assert_eq!(f.len(), 1, "{adapter}: {f:?}");
            assert_eq!(f[0].0, "services.web.env.BAD");
            for t in &names {
                assert!(f[0].2.contains(&format!("${{db.{t}}}")), "{adapter}: {f:?}");
            }
        }
    }

    #[test]
    fn a_token_that_can_never_resolve_is_an_error_naming_it_and_the_fix() {
        let text = format!(
            "{HEAD}\n[hooks]\npost_up = \"curl ${{self.port}}\"\n\n[services.db]\nadapter = \"postgres\"\nadmin_url = \"postgres://${{cache.host}}/x\"\n\n[services.cache]\nadapter = \"mycache\"\n\n[services.api]\ncmd = \"serve --port ${{self.port}} --grpc ${{self.grpc}}\"\nports = [\"http\", \"grpc\"]\nenv = {{ DB = \"${{db.host}}:${{db.port}}\", C = \"${{cache.anything}}\", HOME_DIR = \"${{HOME}}\", D = \"${{PORT:-8000}}\" }}\n\n[services.worker]\ncmd = \"work ${{api.metrics}} ${{apii.url}} ${{worktree.root}}\"\nsetup = \"echo ${{job.port}}\"\nenv = {{ W = \"${{worker2.url}}\" }}\n\n[services.job]\ncmd = \"run\"\n"
        );
        let f = unresolved(&text);
        let keys: Vec<&str> = f.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "services.db.admin_url",
                "services.worker.cmd",
                "services.worker.cmd",
                "services.worker.cmd",
                "services.worker.setup",
                "services.worker.env.W",
                "hooks.post_up",
            ],
            "{f:#?}"
        );
        assert!(f[0].2.contains("sees only ${env.NAME}"), "{f:?}");
        assert_eq!(f[0].1, Some(9));
        assert!(
            f[1].2.contains("${api.metrics}") && f[1].2.contains("${api.grpc}"),
            "{f:?}"
        );
        assert!(f[1].3.contains("ports = [\"metrics\"]"), "{f:?}");
        assert!(
            f[2].2.contains("no service `apii`") && f[2].3.contains("${api.url}"),
            "{f:?}"
        );
        assert!(f[3].3.contains("${worktree.path}"), "{f:?}");
        assert!(f[4].2.contains("`job` has no port"), "{f:?}");
        assert_eq!(f[4].1, Some(21));
        assert!(f[5].3.contains("${worker.url}"), "{f:?}");
        assert_eq!(f[6].1, Some(5));
    }

    #[test]
    fn self_port_without_a_port_is_a_warning_on_the_key_that_says_it() {
        // It runs: binky gives the service the port it names, and says so.
        let bad = format!("{HEAD}\n[services.w]\ncmd = \"run --port ${{self.port}}\"\n");
        assert_eq!(codes(&bad), vec![("config", Level::Warning, Some(5))]);
        let bad = format!(
            "{HEAD}\n[services.w]\ncmd = \"run\"\nenv = {{ A = \"1\", P = \"${{self.port}}\" }}\n"
        );
        let f = check(&bad, Path::new("binky.toml"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].key, "services.w.env.P");
        assert_eq!(f[0].line, Some(6));
        let good = format!(
            "{HEAD}\n[services.w]\ncmd = \"run --port ${{self.port}}\"\nports = [\"http\"]\n"
        );
        assert!(codes(&good).is_empty(), "{:?}", codes(&good));
    }

    #[test]
    fn inline_credentials_in_admin_url_and_env() {
        let bad = format!(
            "{HEAD}\n[services.db]\nadapter = \"postgres\"\nadmin_url = \"postgres://postgres:hunter2@localhost/postgres\"\n\n[services.api]\ncmd = \"x\"\nenv = {{ API_TOKEN = \"abc123\", GH = \"ghp_0123456789abcdefghijABCDEFGHIJ012345\" }}\n"
        );
        let c = codes(&bad);
        assert_eq!(
            c.iter().filter(|x| x.0 == "inline-credential").count(),
            3,
            "{c:?}"
        );
        // admin_url: a warning (a local server's admin address is common); env: an error.
        assert!(
            c.contains(&("inline-credential", Level::Warning, Some(6))),
            "{c:?}"
        );
        assert_eq!(
            c.iter()
                .filter(|x| x.0 == "inline-credential" && x.1 == Level::Error)
                .count(),
            2,
            "{c:?}"
        );
        let good = format!(
            "{HEAD}\n[services.db]\nadapter = \"postgres\"\nadmin_url = \"${{env.PG_ADMIN}}\"\n\n[services.api]\ncmd = \"x\"\nenv = {{ API_TOKEN = \"${{env.API_TOKEN}}\", DB = \"${{db.url}}\" }}\n"
        );
        assert!(codes(&good).is_empty(), "{:?}", codes(&good));
    }

    #[test]
    fn a_worker_stopped_with_sigterm_is_told_the_signal_that_stops_it_at_once() {
        let cfg = "[project]\nname = \"p\"\n[services.worker]\ncmd = \"celery -A app worker\"\n[services.rq]\ncmd = \"python manage.py rqworker\"\nstop_signal = \"SIGINT\"\n[services.jobs]\ncmd = \"rq worker\"\n";
        let found = check(cfg, Path::new("binky.toml"));
        let slow: Vec<&Finding> = found.iter().filter(|f| f.code == "slow-stop").collect();
        assert_eq!(slow.len(), 2, "{found:?}");
        let worker = slow
            .iter()
            .find(|f| f.key == "services.worker.cmd")
            .unwrap();
        assert_eq!(worker.level, Level::Warning);
        assert_eq!(worker.line, Some(4));
        assert!(
            worker.fix.contains("stop_signal = \"SIGQUIT\""),
            "{worker:?}"
        );
        let jobs = slow.iter().find(|f| f.key == "services.jobs.cmd").unwrap();
        assert!(jobs.fix.contains("stop_signal = \"SIGKILL\""), "{jobs:?}");
        // A stop_signal the user chose is theirs.
        assert!(!slow.iter().any(|f| f.key == "services.rq.cmd"));
    }

    #[test]
    fn a_dependency_that_cannot_be_waited_on() {
        let bad = format!("{HEAD}\n[services.q]\ncmd = \"queue\"\n\n[services.w]\ncmd = \"worker\"\ndepends_on = [\"q\"]\n");
        assert_eq!(
            codes(&bad),
            vec![("unwaited-dependency", Level::Warning, Some(9))]
        );
        let good = format!("{HEAD}\n[services.q]\ncmd = \"queue\"\nhealth = {{ cmd = \"queue --ping\" }}\n\n[services.w]\ncmd = \"worker\"\ndepends_on = [\"q\"]\n");
        assert!(codes(&good).is_empty(), "{:?}", codes(&good));
    }

    #[test]
    fn a_url_service_whose_cmd_ignores_its_port() {
        let bad = format!("{HEAD}\n[services.web]\ncmd = \"npm run dev\"\nurl = true\n");
        assert_eq!(codes(&bad), vec![("ignores-port", Level::Warning, Some(5))]);
        for good in [
            format!("{HEAD}\n[services.web]\ncmd = \"npm run dev -- --port $PORT\"\nurl = true\n"),
            format!("{HEAD}\n[services.web]\ncmd = \"npm run dev\"\nurl = true\nenv = {{ PORT = \"${{self.port}}\" }}\n"),
        ] {
            assert!(codes(&good).is_empty(), "{:?}", codes(&good));
        }
    }

    #[test]
    fn shared_services_naming_one_worlds_service_or_defined_unlike_the_running_one_are_said() {
        let text = "[project]\nname = \"p\"\n\n[services.api]\ncmd = \"api --port ${self.port}\"\nurl = true\n\n[services.mail]\ncmd = \"mailpit --api ${api.port} --port ${self.port}\"\nurl = true\nshared = true\n";
        let loaded = config::parse(text, Path::new("binky.toml")).unwrap();
        let f = shared_findings(text, &loaded, None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "shared-uses-world-token");
        assert_eq!(f[0].key, "services.mail.cmd");
        assert_eq!(f[0].line, Some(9));
        // The same definition runs: nothing to say; another one: said, on the table.
        assert_eq!(shared_findings(text, &loaded, Some(&loaded.spec)).len(), 1);
        let other = config::parse(&text.replace("mailpit", "mailhog"), Path::new("binky.toml"))
            .unwrap()
            .spec;
        let f = shared_findings(text, &loaded, Some(&other));
        assert_eq!(f[1].code, "shared-definition-differs");
        assert_eq!(f[1].line, Some(8));
    }

    #[test]
    fn unknown_adapters_are_a_warning_with_the_fix() {
        // An external adapter may be installed after the file is written.
        let bad = format!("{HEAD}\n[services.db]\nadapter = \"nosuchdb-xyz\"\n");
        assert_eq!(
            codes(&bad),
            vec![("unknown-adapter", Level::Warning, Some(5))]
        );
        let f = check(&bad, Path::new("binky.toml"));
        assert!(
            f[0].fix
                .starts_with("install binky-adapter-nosuchdb-xyz on the PATH"),
            "{f:?}"
        );
        // A near miss of a built-in name says which.
        let typo = format!("{HEAD}\n[services.db]\nadapter = \"postgress\"\n");
        let f = check(&typo, Path::new("binky.toml"));
        assert!(
            f[0].fix.starts_with("did you mean adapter = \"postgres\"?"),
            "{f:?}"
        );
        let good = format!("{HEAD}\n[services.db]\nadapter = \"valkey\"\n");
        assert!(codes(&good).is_empty());
    }

    #[test]
    fn limits_this_machine_cannot_enforce_are_a_warning_on_each_service() {
        use binky_controllers::process::Mechanism;
        let text = format!(
            "{HEAD}\n[services.api]\ncmd = \"run\"\nlimits = {{ memory = \"64M\" }}\n\n[services.web]\ncmd = \"run\"\n"
        );
        let loaded = config::parse(&text, Path::new("binky.toml")).unwrap();
        let none = limits_findings(&text, &loaded, || (Mechanism::None, "no cgroup".into()));
        assert_eq!(none.len(), 1, "{none:?}");
        let f = &none[0];
        assert_eq!(
            (f.code, f.level, f.key.as_str(), f.line),
            (
                "limits-not-enforced",
                Level::Warning,
                "services.api.limits",
                Some(6)
            )
        );
        assert_eq!(f.message, "not enforced on this machine: no cgroup");
        assert!(f.fix.contains("remove `limits`"), "{}", f.fix);
        if cfg!(target_os = "linux") {
            assert!(f.fix.contains("as root"), "{}", f.fix);
        }
        let enforced = limits_findings(&text, &loaded, || (Mechanism::CgroupV1, String::new()));
        assert!(enforced.is_empty());
        // binky's polling (macOS, the BSDs, Linux without cgroups or systemd-run): what it
        // does, and that it does not cap.
        let polled = limits_findings(&text, &loaded, || {
            (Mechanism::Polled, "this system has neither".into())
        });
        assert_eq!(polled.len(), 1, "{polled:?}");
        let f = &polled[0];
        assert_eq!(
            (f.code, f.level, f.key.as_str(), f.line),
            (
                "limits-not-capped",
                Level::Warning,
                "services.api.limits",
                Some(6)
            )
        );
        assert_eq!(
            f.message,
            "not capped on this machine: memory: restarted over the limit (polled every 5 s), not capped (this system has neither)"
        );
        // Without limits, the machine is not even looked at.
        let plain = format!("{HEAD}\n[services.web]\ncmd = \"run\"\n");
        let loaded = config::parse(&plain, Path::new("binky.toml")).unwrap();
        assert!(limits_findings(&plain, &loaded, || unreachable!()).is_empty());
    }

    #[test]
    fn clone_from_on_an_adapter_that_cannot_clone() {
        let bad = format!("{HEAD}\n[services.c]\nadapter = \"redis\"\nclone_from = \"golden\"\n");
        assert_eq!(
            codes(&bad),
            vec![("clone-unsupported", Level::Warning, Some(6))]
        );
        let good =
            format!("{HEAD}\n[services.c]\nadapter = \"postgres\"\nclone_from = \"golden\"\n");
        assert!(codes(&good).is_empty());
    }

    #[test]
    fn a_redis_isolation_binky_cannot_give_is_an_error_on_its_options_line() {
        let unknown = format!(
            "{HEAD}\n[services.c]\nadapter = \"redis\"\noptions = {{ isolation = \"cluster\" }}\n"
        );
        assert_eq!(
            codes(&unknown),
            vec![("redis-isolation", Level::Error, Some(6))]
        );
        let server_on_admin = format!(
            "{HEAD}\n[services.c]\nadapter = \"valkey\"\nadmin_url = \"${{env.R}}\"\noptions = {{ isolation = \"server\" }}\n"
        );
        assert_eq!(
            codes(&server_on_admin),
            vec![("redis-isolation", Level::Error, Some(7))]
        );
        for good in ["server", "database", "prefix"] {
            let text = format!(
                "{HEAD}\n[services.c]\nadapter = \"redis\"\noptions = {{ isolation = \"{good}\" }}\n"
            );
            assert!(codes(&text).is_empty(), "{good}: {:?}", codes(&text));
        }
    }

    #[test]
    fn invalid_files_are_errors_with_their_line() {
        let c = codes(&format!("{HEAD}\n[services.w]\ncmd = \"x\"\nbogus = 1\n"));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].1, Level::Error);
        assert_eq!(c[0].2, Some(6));
    }

    #[test]
    fn an_env_reference_the_environment_leaves_unset_is_a_warning_naming_it() {
        let text = format!("{HEAD}\n[services.api]\ncmd = \"x\"\nenv = {{ DSN = \"${{env.DSN}}\", OPT = \"${{env.OPT:-}}\", K = \"${{env.K:?ask}}\" }}\n");
        let loaded = config::parse(&text, Path::new("binky.toml")).unwrap();
        let env: std::collections::BTreeMap<String, String> =
            [("K".to_owned(), "v".to_owned())].into_iter().collect();
        let f = env_findings(&text, &loaded, &env);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "env-unset");
        assert_eq!(f[0].key, "services.api.env.DSN");
        assert!(f[0].message.contains("${env.DSN}"), "{}", f[0].message);
        assert!(env_findings(
            &text,
            &loaded,
            &[
                ("DSN".to_owned(), "x".to_owned()),
                ("K".to_owned(), "v".to_owned())
            ]
            .into_iter()
            .collect()
        )
        .is_empty());
    }
}
