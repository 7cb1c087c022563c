//! `binky.toml`: parse and validate every key, with the file, line, key path and the fix
//! in every error.
//!
//! The file is parsed into a spanned tree first, then walked by hand: that is what lets an
//! error say `services.web.cmdd` at line 7 and suggest `cmd`, instead of a serde message
//! without a key path. All errors of a file are reported at once.

mod duration;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use binky_controllers::spec::{
    Agents, Health, Hooks, Limits, Probe, Process, Project, Resource, Restart, Service,
    ServiceKind, Spec, SyncMode, UrlSpec,
};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

pub use duration::parse_duration;

/// The config file's name.
pub const FILE_NAME: &str = "binky.toml";

/// One problem in a `binky.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// Dotted key path (`services.web.cmd`), or empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n  fix: {fix}")?;
        }
        Ok(())
    }
}

/// Every problem found in a file (never empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        if n > 1 {
            writeln!(f, "{n} problems in binky.toml:")?;
        }
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A footgun in a valid config: worth a line, not a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Dotted key path.
    pub key: String,
    /// What and why.
    pub message: String,
}

/// A parsed, validated config.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The spec.
    pub spec: Spec,
    /// Footguns.
    pub warnings: Vec<Warning>,
}

/// The most a `binky.toml` read takes: a config is a small text file, and `binky check
/// /dev/zero` must not read until memory runs out.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Why a config file cannot be read as text.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The OS refused (missing, a directory, no permission).
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// Larger than [`MAX_CONFIG_BYTES`].
    #[error("it is larger than {} KiB, which no binky.toml is; is this the right file?", MAX_CONFIG_BYTES / 1024)]
    TooLarge,
    /// Not UTF-8.
    #[error("it is not UTF-8 text: byte 0x{byte:02x} at line {line}, column {column} does not start a character; save the file as UTF-8")]
    NotUtf8 {
        /// The first bad byte.
        byte: u8,
        /// Its line (1-based).
        line: usize,
        /// Its column in bytes (1-based).
        column: usize,
    },
}

/// Read a config file as text: at most [`MAX_CONFIG_BYTES`], and only valid UTF-8 (a
/// lossy read would run a config other than the one on disk).
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)?;
    text_of(bytes)
}

/// The text of a config held in `bytes` (a file, or `git show` of a committed one), with
/// the same limits as [`read_text`].
pub fn text_of(bytes: Vec<u8>) -> Result<String, ReadError> {
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = &bytes[..at];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let column = at
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        ReadError::NotUtf8 {
            byte: bytes[at],
            line,
            column,
        }
    })
}

/// Read and validate a `binky.toml` file.
pub fn load(path: &Path) -> Result<Loaded, ConfigErrors> {
    let text = read_text(path).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: path.to_owned(),
            position: None,
            key: String::new(),
            message: e.to_string(),
            fix: matches!(e, ReadError::Io(_)).then(|| {
                "run binky in a directory that has a binky.toml (or one of its parents does)".into()
            }),
        }])
    })?;
    parse(&text, path)
}

/// Validate the text of a `binky.toml` (`file` is only used in messages).
pub fn parse(text: &str, file: &Path) -> Result<Loaded, ConfigErrors> {
    let mut cx = Cx {
        file,
        text,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => {
            let pos = e.span().map(|s| cx.position(s.start));
            return Err(ConfigErrors(vec![ConfigError {
                file: file.to_owned(),
                position: pos,
                key: String::new(),
                message: format!("not valid TOML: {}", e.message().trim()),
                fix: Some("fix the syntax at that position".into()),
            }]));
        }
    };
    let spec = cx.root(root.get_ref(), root.span());
    match spec {
        Some(spec) if cx.errors.is_empty() => Ok(Loaded {
            spec,
            warnings: cx.warnings,
        }),
        _ => {
            if cx.errors.is_empty() {
                cx.errors.push(ConfigError {
                    file: file.to_owned(),
                    position: None,
                    key: String::new(),
                    message: "invalid".into(),
                    fix: None,
                });
            }
            cx.errors
                .sort_by_key(|e| e.position.unwrap_or((usize::MAX, 0)));
            Err(ConfigErrors(cx.errors))
        }
    }
}

type Table<'i> = DeTable<'i>;
type Value<'i> = Spanned<DeValue<'i>>;

struct Cx<'a> {
    file: &'a Path,
    text: &'a str,
    errors: Vec<ConfigError>,
    warnings: Vec<Warning>,
}

const ROOT_KEYS: &[&str] = &[
    "project", "defaults", "services", "groups", "agents", "hooks",
];
const PROJECT_KEYS: &[&str] = &["name", "domain", "port_range", "https", "copy"];
const DEFAULTS_KEYS: &[&str] = &["workdir", "restart", "limits"];
const PROCESS_KEYS: &[&str] = &[
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
];
const RESOURCE_KEYS: &[&str] = &[
    "adapter",
    "admin_url",
    "migrate",
    "seed",
    "clone_from",
    "clone_key_files",
    "sync",
    "buckets",
    "options",
];
/// Keys a resource service may have besides its own.
const RESOURCE_SHARED_KEYS: &[&str] = &["depends_on", "shared", "workdir", "env", "env_file"];
const HEALTH_KEYS: &[&str] = &["http", "tcp", "cmd", "timeout"];
const LIMITS_KEYS: &[&str] = &["cpu", "memory"];
const AGENTS_KEYS: &[&str] = &["harness", "expose", "verify"];
const HOOKS_KEYS: &[&str] = &["post_up", "pre_down"];

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Edit distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn suggest<'k>(key: &str, valid: &[&'k str]) -> Option<&'k str> {
    valid
        .iter()
        .map(|v| (distance(key, v), *v))
        .filter(|(d, v)| *d <= 2 && *d < v.len())
        .min()
        .map(|(_, v)| v)
}

impl<'a> Cx<'a> {
    fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }

    fn error(
        &mut self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
        fix: impl Into<Option<String>>,
    ) {
        let position = Some(self.position(span.start));
        self.errors.push(ConfigError {
            file: self.file.to_owned(),
            position,
            key: key.to_owned(),
            message: message.into(),
            fix: fix.into(),
        });
    }

    fn warn(&mut self, key: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            key: key.to_owned(),
            message: message.into(),
        });
    }

    /// Report keys of `table` that are not in `valid`.
    fn unknown_keys(&mut self, table: &Table<'_>, path: &str, valid: &[&str]) {
        for (k, _) in table.iter() {
            if !valid.contains(&k.get_ref().as_ref()) {
                let key = k.get_ref().as_ref();
                let fix = match suggest(key, valid) {
                    Some(s) => format!(
                        "did you mean `{s}`? (valid keys here: {})",
                        valid.join(", ")
                    ),
                    None => format!("remove it; valid keys here: {}", valid.join(", ")),
                };
                let table_name = if path.is_empty() {
                    "the top level".to_owned()
                } else {
                    format!("[{path}]")
                };
                self.error(
                    k.span(),
                    &join(path, key),
                    format!("unknown key in {table_name}"),
                    fix,
                );
            }
        }
    }

    fn get<'t, 'i>(table: &'t Table<'i>, key: &str) -> Option<&'t Value<'i>> {
        table.get(key)
    }

    fn expect_table<'t, 'i>(&mut self, v: &'t Value<'i>, path: &str) -> Option<&'t Table<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                self.error(
                    v.span(),
                    path,
                    format!("expected a table, found {}", type_name(other)),
                    Some(format!("write it as [{path}] with keys under it")),
                );
                None
            }
        }
    }

    fn string(&mut self, table: &Table<'_>, path: &str, key: &str) -> Option<String> {
        let v = Self::get(table, key)?;
        self.string_value(v, &join(path, key))
    }

    fn string_value(&mut self, v: &Value<'_>, path: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            other => {
                let fix = match other {
                    DeValue::Integer(_) => Some(format!(
                        "quote it: \"{}\"",
                        self.text.get(v.span()).unwrap_or("").trim()
                    )),
                    DeValue::Boolean(b) => Some(format!("quote it: \"{b}\"")),
                    _ => None,
                };
                self.error(
                    v.span(),
                    path,
                    format!("expected a string, found {}", type_name(other)),
                    fix,
                );
                None
            }
        }
    }

    fn non_empty_string(&mut self, table: &Table<'_>, path: &str, key: &str) -> Option<String> {
        let s = self.string(table, path, key)?;
        if s.trim().is_empty() {
            let span = Self::get(table, key).map(|v| v.span()).unwrap_or(0..0);
            self.error(span, &join(path, key), "must not be empty", None);
            return None;
        }
        Some(s)
    }

    fn boolean(&mut self, table: &Table<'_>, path: &str, key: &str) -> Option<bool> {
        let v = Self::get(table, key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.error(
                    v.span(),
                    &join(path, key),
                    format!("expected true or false, found {}", type_name(other)),
                    None,
                );
                None
            }
        }
    }

    fn integer(&mut self, v: &Value<'_>, path: &str) -> Option<i64> {
        match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.error(v.span(), path, "integer out of range", None);
                    None
                }
            },
            other => {
                self.error(
                    v.span(),
                    path,
                    format!("expected an integer, found {}", type_name(other)),
                    None,
                );
                None
            }
        }
    }

    fn string_list(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
        allow_single: bool,
    ) -> Option<Vec<(String, Range<usize>)>> {
        let v = Self::get(table, key)?;
        let path = join(path, key);
        match v.get_ref() {
            DeValue::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    if let Some(s) = self.string_value(item, &format!("{path}[{i}]")) {
                        out.push((s, item.span()));
                    }
                }
                Some(out)
            }
            DeValue::String(s) if allow_single => Some(vec![(s.to_string(), v.span())]),
            other => {
                self.error(
                    v.span(),
                    &path,
                    format!("expected a list of strings, found {}", type_name(other)),
                    Some(format!("write it as {key} = [\"…\"]")),
                );
                None
            }
        }
    }

    fn string_map(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let v = Self::get(table, key)?;
        let path = join(path, key);
        let t = self.expect_table(v, &path)?;
        let mut out = BTreeMap::new();
        for (k, val) in t.iter() {
            if let Some(s) = self.string_value(val, &join(&path, k.get_ref())) {
                out.insert(k.get_ref().to_string(), s);
            }
        }
        Some(out)
    }

    fn restart(&mut self, table: &Table<'_>, path: &str) -> Option<Restart> {
        let v = Self::get(table, "restart")?;
        let s = self.string_value(v, &join(path, "restart"))?;
        match s.as_str() {
            "on-failure" => Some(Restart::OnFailure),
            "always" => Some(Restart::Always),
            "never" => Some(Restart::Never),
            other => {
                self.error(
                    v.span(),
                    &join(path, "restart"),
                    format!("unknown restart policy `{other}`"),
                    Some("use one of: on-failure, always, never".to_owned()),
                );
                None
            }
        }
    }

    fn limits(&mut self, table: &Table<'_>, path: &str) -> Option<Limits> {
        let v = Self::get(table, "limits")?;
        let path = join(path, "limits");
        let t = self.expect_table(v, &path)?;
        self.unknown_keys(t, &path, LIMITS_KEYS);
        Some(Limits {
            cpu: self.string(t, &path, "cpu"),
            memory: self.string(t, &path, "memory"),
        })
    }

    fn root(&mut self, root: &Table<'_>, span: Range<usize>) -> Option<Spec> {
        self.unknown_keys(root, "", ROOT_KEYS);
        let project = match Self::get(root, "project") {
            Some(v) => self
                .expect_table(v, "project")
                .and_then(|t| self.project(t, v.span())),
            None => {
                self.error(
                    span.start..span.start,
                    "project",
                    "missing [project] table",
                    Some("add:\n  [project]\n  name = \"myapp\"".to_owned()),
                );
                None
            }
        };
        let (d_workdir, d_restart, d_limits) = match Self::get(root, "defaults") {
            Some(v) => match self.expect_table(v, "defaults") {
                Some(t) => {
                    self.unknown_keys(t, "defaults", DEFAULTS_KEYS);
                    (
                        self.string(t, "defaults", "workdir")
                            .unwrap_or_else(|| ".".into()),
                        self.restart(t, "defaults").unwrap_or_default(),
                        self.limits(t, "defaults"),
                    )
                }
                None => (".".into(), Restart::default(), None),
            },
            None => (".".into(), Restart::default(), None),
        };

        let mut services = BTreeMap::new();
        let mut dep_spans: Vec<(String, String, Range<usize>)> = Vec::new();
        // Every service the file declares, valid or not: a reference to one that has its
        // own error is not also an "unknown service".
        // `preserve_order` keeps the file's order: the first URL service is the world's
        // own host.
        let declared_order: Vec<String> = Self::get(root, "services")
            .and_then(|v| match v.get_ref() {
                DeValue::Table(t) => Some(t.iter().map(|(k, _)| k.get_ref().to_string()).collect()),
                _ => None,
            })
            .unwrap_or_default();
        let declared: BTreeSet<String> = Self::get(root, "services")
            .and_then(|v| match v.get_ref() {
                DeValue::Table(t) => Some(t.iter().map(|(k, _)| k.get_ref().to_string()).collect()),
                _ => None,
            })
            .unwrap_or_default();
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
                    if let Some(svc) = self.service(
                        st,
                        &path,
                        sv.span(),
                        &d_workdir,
                        d_restart,
                        &d_limits,
                        &mut dep_spans,
                        &name,
                    ) {
                        services.insert(name, svc);
                    }
                }
            }
        }

        // Cross references: depends_on.
        for (svc, dep, span) in &dep_spans {
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

        let mut groups = BTreeMap::new();
        if let Some(v) = Self::get(root, "groups") {
            if let Some(t) = self.expect_table(v, "groups") {
                for (k, gv) in t.iter() {
                    let path = format!("groups.{}", k.get_ref());
                    match gv.get_ref() {
                        DeValue::String(s) if s == "*" => {
                            groups.insert(
                                k.get_ref().to_string(),
                                services.keys().cloned().collect(),
                            );
                        }
                        DeValue::Array(items) => {
                            let mut members = Vec::new();
                            for (i, item) in items.iter().enumerate() {
                                if let Some(m) = self.string_value(item, &format!("{path}[{i}]")) {
                                    if !declared.contains(&m) {
                                        let known: Vec<&str> =
                                            services.keys().map(String::as_str).collect();
                                        self.error(
                                            item.span(),
                                            &path,
                                            format!("unknown service `{m}`"),
                                            Some(format!("services: {}", known.join(", "))),
                                        );
                                    }
                                    members.push(m);
                                }
                            }
                            groups.insert(k.get_ref().to_string(), members);
                        }
                        other => self.error(
                            gv.span(),
                            &path,
                            format!(
                                "expected a list of services or \"*\", found {}",
                                type_name(other)
                            ),
                            Some(format!(
                                "{} = [\"web\", \"api\"] or {} = \"*\"",
                                k.get_ref(),
                                k.get_ref()
                            )),
                        ),
                    }
                }
            }
        }

        let mut agents = Agents::default();
        if let Some(v) = Self::get(root, "agents") {
            if let Some(t) = self.expect_table(v, "agents") {
                self.unknown_keys(t, "agents", AGENTS_KEYS);
                agents.harness = self.string(t, "agents", "harness");
                for (name, span) in self
                    .string_list(t, "agents", "expose", false)
                    .unwrap_or_default()
                {
                    if !declared.contains(&name) {
                        let known: Vec<&str> = declared.iter().map(String::as_str).collect();
                        self.error(
                            span,
                            "agents.expose",
                            format!("unknown service `{name}`"),
                            Some(format!("services: {}", known.join(", "))),
                        );
                    }
                    agents.expose.push(name);
                }
                agents.verify = self
                    .string_list(t, "agents", "verify", false)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
            }
        }
        let mut hooks = Hooks::default();
        if let Some(v) = Self::get(root, "hooks") {
            if let Some(t) = self.expect_table(v, "hooks") {
                self.unknown_keys(t, "hooks", HOOKS_KEYS);
                hooks.post_up = self.string(t, "hooks", "post_up");
                hooks.pre_down = self.string(t, "hooks", "pre_down");
            }
        }

        let order = declared_order
            .into_iter()
            .filter(|n| services.contains_key(n))
            .collect();
        let spec = Spec {
            project: project?,
            services,
            groups,
            agents,
            hooks,
            order,
        };
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
        self.footguns(&spec);
        Some(spec)
    }

    fn project(&mut self, t: &Table<'_>, span: Range<usize>) -> Option<Project> {
        self.unknown_keys(t, "project", PROJECT_KEYS);
        let name = match Self::get(t, "name") {
            Some(_) => self.non_empty_string(t, "project", "name"),
            None => {
                self.error(
                    span.clone(),
                    "project.name",
                    "missing project name",
                    Some("add name = \"myapp\" under [project]".to_owned()),
                );
                None
            }
        };
        if let Some(n) = &name {
            let ok = n.len() <= 63
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !n.starts_with(['-', '.'])
                && !n.ends_with(['-', '.']);
            if !ok {
                let span = Self::get(t, "name")
                    .map(|v| v.span())
                    .unwrap_or(span.clone());
                self.error(span, "project.name", format!("invalid project name `{n}`: it becomes part of hostnames and database names"), Some("use letters, digits, `-`, `_` or `.`, at most 63 characters, e.g. \"acme\"".to_owned()));
            }
        }
        let domain = self.string(t, "project", "domain");
        if let Some(why) = domain.as_deref().and_then(dns_name_problem) {
            let d = domain.as_deref().unwrap_or("");
            let span = Self::get(t, "domain")
                .map(|v| v.span())
                .unwrap_or(span.clone());
            self.error(
                span,
                "project.domain",
                format!("`{d}` is not a DNS name: {why}"),
                Some("use dot-separated labels of letters, digits and `-` (each 1-63 characters, not starting or ending with `-`), e.g. domain = \"acme.test\"; write an international name in its punycode form (xn--…)".to_owned()),
            );
        }
        let port_range = match Self::get(t, "port_range") {
            Some(v) => match v.get_ref() {
                DeValue::Array(items) if items.len() == 2 => {
                    let lo = self.integer(&items[0], "project.port_range[0]");
                    let hi = self.integer(&items[1], "project.port_range[1]");
                    match (lo, hi) {
                        (Some(lo), Some(hi))
                            if (1..=65535).contains(&lo)
                                && (1..=65535).contains(&hi)
                                && lo < hi =>
                        {
                            Some((lo as u16, hi as u16))
                        }
                        (Some(_), Some(_)) => {
                            self.error(
                                v.span(),
                                "project.port_range",
                                "port_range must be [low, high] with 1 <= low < high <= 65535",
                                Some("e.g. port_range = [4000, 4999]".to_owned()),
                            );
                            None
                        }
                        _ => None,
                    }
                }
                _ => {
                    self.error(
                        v.span(),
                        "project.port_range",
                        "expected [low, high]",
                        Some("e.g. port_range = [4000, 4999]".to_owned()),
                    );
                    None
                }
            },
            None => None,
        };
        let https = self.boolean(t, "project", "https").unwrap_or(false);
        let mut copy = Vec::new();
        for (p, sp) in self
            .string_list(t, "project", "copy", false)
            .unwrap_or_default()
        {
            let parts: Vec<&str> = p.trim_end_matches('/').split('/').collect();
            if p.is_empty()
                || p.starts_with('/')
                || parts
                    .iter()
                    .any(|s| *s == ".." || s.is_empty() && parts.len() > 1)
            {
                self.error(
                    sp,
                    "project.copy",
                    format!("`{p}` is not a path inside the repository"),
                    Some("name paths relative to the directory of binky.toml, e.g. copy = [\"node_modules\", \"web/node_modules\", \".venv\"]".to_owned()),
                );
            } else {
                copy.push(p);
            }
        }
        Some(Project {
            name: name?,
            domain,
            port_range,
            https,
            copy,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn service(
        &mut self,
        t: &Table<'_>,
        path: &str,
        span: Range<usize>,
        d_workdir: &str,
        d_restart: Restart,
        d_limits: &Option<Limits>,
        dep_spans: &mut Vec<(String, String, Range<usize>)>,
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
                self.error(
                    k.span(),
                    &join(path, key),
                    format!("`{key}` is only valid on a process service (one with `cmd`)"),
                    Some("remove it".to_owned()),
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
            ServiceKind::Process(self.process(t, path, d_workdir, d_restart, d_limits)?)
        } else {
            let adapter = self.non_empty_string(t, path, "adapter");
            let sync = match Self::get(t, "sync") {
                Some(v) => match self.string_value(v, &join(path, "sync")).as_deref() {
                    Some("off") => SyncMode::Off,
                    Some("notify") => SyncMode::Notify,
                    Some("cdc") => SyncMode::Cdc,
                    Some("reactive") => SyncMode::Reactive,
                    Some(other) => {
                        self.error(
                            v.span(),
                            &join(path, "sync"),
                            format!("unknown sync mode `{other}`"),
                            Some("use one of: off, notify, cdc, reactive".to_owned()),
                        );
                        SyncMode::Off
                    }
                    None => SyncMode::Off,
                },
                None => SyncMode::Off,
            };
            if sync != SyncMode::Off && !shared {
                let sp = Self::get(t, "sync")
                    .map(|v| v.span())
                    .unwrap_or(span.clone());
                self.error(
                    sp,
                    &join(path, "sync"),
                    "`sync` requires `shared = true`",
                    Some("add shared = true, or remove sync".to_owned()),
                );
            }
            let admin_url = self.string(t, path, "admin_url");
            let migrate = self.string(t, path, "migrate");
            let seed = self.string(t, path, "seed");
            let clone_from = self.string(t, path, "clone_from");
            let clone_key_files: Option<Vec<String>> = self
                .string_list(t, path, "clone_key_files", false)
                .map(|v| v.into_iter().map(|(s, _)| s).collect());
            if clone_key_files.is_some() && clone_from.is_none() {
                let sp = Self::get(t, "clone_key_files")
                    .map(|v| v.span())
                    .unwrap_or(span.clone());
                self.error(
                    sp,
                    &join(path, "clone_key_files"),
                    "`clone_key_files` only matters with `clone_from`",
                    Some("add clone_from = \"golden\", or remove clone_key_files".to_owned()),
                );
            }
            let buckets = self
                .string_list(t, path, "buckets", false)
                .unwrap_or_default()
                .into_iter()
                .map(|(s, _)| s)
                .collect();
            let options = self.string_map(t, path, "options").unwrap_or_default();
            let workdir = self
                .string(t, path, "workdir")
                .unwrap_or_else(|| d_workdir.to_owned());
            let env = self.string_map(t, path, "env").unwrap_or_default();
            let env_file = self
                .string_list(t, path, "env_file", true)
                .unwrap_or_default()
                .into_iter()
                .map(|(s, _)| s)
                .collect();
            ServiceKind::Resource(Resource {
                adapter: adapter?,
                admin_url,
                migrate,
                seed,
                clone_from,
                clone_key_files,
                sync,
                buckets,
                options,
                workdir,
                env,
                env_file,
            })
        };
        Some(Service {
            depends_on,
            shared,
            kind,
        })
    }

    fn process(
        &mut self,
        t: &Table<'_>,
        path: &str,
        d_workdir: &str,
        d_restart: Restart,
        d_limits: &Option<Limits>,
    ) -> Option<Process> {
        let cmd = self.non_empty_string(t, path, "cmd");
        let url = match Self::get(t, "url") {
            None => None,
            Some(v) => match v.get_ref() {
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
                                "use letters, digits and `-`, e.g. url = { http = \"web\" }"
                                    .to_owned(),
                            ),
                        );
                    }
                    Some(UrlSpec::Port {
                        label: k.get_ref().to_string(),
                        subdomain: sub,
                    })
                }),
                other => {
                    self.error(v.span(), &join(path, "url"), format!("expected true, a subdomain string or {{ port_label = \"subdomain\" }}, found {}", type_name(other)), Some("e.g. url = \"web\"".to_owned()));
                    None
                }
            },
        };
        let ports = match Self::get(t, "ports") {
            None => None,
            Some(v) => {
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
                                other => self.error(
                                    pv.span(),
                                    &join(&ppath, k.get_ref()),
                                    format!(
                                        "expected a string or integer, found {}",
                                        type_name(other)
                                    ),
                                    None,
                                ),
                            }
                            out.push((k.get_ref().to_string(), k.span()));
                        }
                        if !out.is_empty() {
                            self.warn(&ppath, "port specs in a `ports` table are not used: binky allocates every port (only the labels count)");
                        }
                        out
                    }
                    other => {
                        self.error(
                            v.span(),
                            &ppath,
                            format!("expected a list of port labels, found {}", type_name(other)),
                            Some("e.g. ports = [\"http\", \"grpc\"]".to_owned()),
                        );
                        Vec::new()
                    }
                };
                let mut seen = BTreeSet::new();
                for (l, sp) in &labels {
                    if l.is_empty()
                        || !l
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        || matches!(l.as_str(), "port" | "url")
                    {
                        self.error(sp.clone(), &ppath, format!("invalid port label `{l}`"), Some("use letters, digits, `_` and `-`; `port` and `url` are reserved token names".to_owned()));
                    }
                    if !seen.insert(l.clone()) {
                        self.error(
                            sp.clone(),
                            &ppath,
                            format!("port label `{l}` appears twice"),
                            None,
                        );
                    }
                }
                Some(labels.into_iter().map(|(l, _)| l).collect::<Vec<_>>())
            }
        };
        if let (Some(UrlSpec::Port { label, .. }), ports) = (&url, &ports) {
            if !ports.as_ref().is_some_and(|p| p.contains(label)) {
                let sp = Self::get(t, "url").map(|v| v.span()).unwrap_or(0..0);
                self.error(
                    sp,
                    &join(path, "url"),
                    format!("url points at port label `{label}`, which is not in `ports`"),
                    Some(format!("add \"{label}\" to ports")),
                );
            }
        }
        let health = match Self::get(t, "health") {
            None => None,
            Some(v) => {
                let hpath = join(path, "health");
                match v.get_ref() {
                    DeValue::String(s) => Some(Health {
                        probe: Probe::Http(s.to_string()),
                        timeout_ms: None,
                    }),
                    DeValue::Table(h) => {
                        self.unknown_keys(h, &hpath, HEALTH_KEYS);
                        let before = self.errors.len();
                        let probes: Vec<Probe> = [
                            self.string(h, &hpath, "http").map(Probe::Http),
                            self.string(h, &hpath, "tcp").map(Probe::Tcp),
                            self.string(h, &hpath, "cmd").map(Probe::Cmd),
                        ]
                        .into_iter()
                        .flatten()
                        .collect();
                        let timeout_ms = match Self::get(h, "timeout") {
                            Some(tv) => {
                                let text = match tv.get_ref() {
                                    DeValue::Integer(i) => Some(i.as_str().to_owned()),
                                    _ => self.string_value(tv, &join(&hpath, "timeout")),
                                };
                                match text.as_deref().map(parse_duration) {
                                    Some(Ok(d)) => Some(d.as_millis() as u64),
                                    Some(Err(e)) => {
                                        self.error(
                                            tv.span(),
                                            &join(&hpath, "timeout"),
                                            e,
                                            Some("e.g. timeout = \"30s\" (ms, s, m, h)".to_owned()),
                                        );
                                        None
                                    }
                                    None => None,
                                }
                            }
                            None => None,
                        };
                        let probe_keys = ["http", "tcp", "cmd"]
                            .iter()
                            .filter(|k| h.get(**k).is_some())
                            .count();
                        if probes.len() != 1 && !(probe_keys == 1 && self.errors.len() > before) {
                            self.error(v.span(), &hpath, format!("health needs exactly one of http, tcp, cmd (found {})", probes.len()), Some("e.g. health = { http = \"http://localhost:${self.port}/health\", timeout = \"30s\" }".to_owned()));
                            None
                        } else {
                            probes
                                .into_iter()
                                .next()
                                .map(|probe| Health { probe, timeout_ms })
                        }
                    }
                    other => {
                        self.error(
                            v.span(),
                            &hpath,
                            format!(
                                "expected a URL string or a table, found {}",
                                type_name(other)
                            ),
                            None,
                        );
                        None
                    }
                }
            }
        };
        let replicas = match Self::get(t, "replicas") {
            Some(v) => match self.integer(v, &join(path, "replicas")) {
                Some(n) if (1..=1024).contains(&n) => n as u32,
                Some(_) => {
                    self.error(
                        v.span(),
                        &join(path, "replicas"),
                        "replicas must be between 1 and 1024",
                        None,
                    );
                    1
                }
                None => 1,
            },
            None => 1,
        };
        let env = self.string_map(t, path, "env").unwrap_or_default();
        for k in env.keys() {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                let sp = Self::get(t, "env").map(|v| v.span()).unwrap_or(0..0);
                self.error(
                    sp,
                    &join(path, "env"),
                    format!("invalid environment variable name `{k}`"),
                    None,
                );
            }
        }
        // Check every key before giving up on a missing `cmd`: all errors at once.
        let setup = self.string(t, path, "setup");
        let workdir = self
            .string(t, path, "workdir")
            .unwrap_or_else(|| d_workdir.to_owned());
        let restart = self.restart(t, path).unwrap_or(d_restart);
        let limits = self.limits(t, path).or_else(|| d_limits.clone());
        let watch = self
            .string_list(t, path, "watch", false)
            .unwrap_or_default()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        let env_file = self
            .string_list(t, path, "env_file", true)
            .unwrap_or_default()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
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
        })
    }

    /// Non-fatal footguns (the rest of `binky check` builds on these).
    fn footguns(&mut self, spec: &Spec) {
        for (name, svc) in &spec.services {
            let path = format!("services.{name}");
            if let Some(p) = svc.process() {
                if p.ports.as_ref().is_none_or(|p| p.is_empty()) && p.url.is_none() {
                    let mut sites: Vec<&str> = vec![p.cmd.as_str()];
                    sites.extend(p.env.values().map(String::as_str));
                    if let Some(h) = &p.health {
                        sites.push(match &h.probe {
                            Probe::Http(s) | Probe::Tcp(s) | Probe::Cmd(s) => s,
                        });
                    }
                    if sites.iter().any(|s| s.contains("${self.")) {
                        self.warn(&path, format!("`{name}` uses ${{self.…}} but declares neither `ports` nor `url`, so it gets no port and the token stays unresolved; add url = true or ports = [\"http\"]"));
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

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Why `name` cannot be a DNS name (binky's URLs are `<service>.<world>.<name>`), if it
/// cannot: empty labels (`..`, a leading or trailing dot), wildcards, ports, spaces, labels
/// over 63 characters or names over 253, and non-ASCII (IDN must be written as punycode:
/// rustls and the browsers want the A-label form).
pub fn dns_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name.len() > 253 {
        return Some(format!(
            "it is {} characters long (at most 253)",
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| !c.is_ascii()) {
        return Some(format!("`{c}` is not ASCII"));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("it has an empty label (`..`, or a dot at the start or end)".into());
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Some(format!(
                "`{}` is not allowed in a label",
                c.escape_default()
            ));
        }
        if label.len() > 63 {
            return Some(format!(
                "the label `{label}` is {} characters long (at most 63)",
                label.len()
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!("the label `{label}` starts or ends with `-`"));
        }
    }
    None
}

fn url_has_password(url: &str) -> bool {
    binky_controllers::url::password(url).is_some_and(|pw| !pw.is_empty() && !pw.contains("${"))
}

#[cfg(test)]
mod tests;
