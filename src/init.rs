//! `binky init`: a starting `binky.toml` from a project's docker-compose file and `.env`.
//!
//! [`generate`] is pure: the compose text, the `.env` text and the directory's name go in;
//! the `binky.toml` text and notes for people come out. `binky init` (`src/cli/init.rs`)
//! finds and reads the files and writes the result.
//!
//! # Guarantees
//! - The text is a valid `binky.toml`: every service is a process with a `cmd` (a loudly
//!   failing placeholder when compose gives none) or an adapter service, and `depends_on`
//!   names only services in the file.
//! - No credential is copied. A value that looks like one (its key says PASSWORD, SECRET,
//!   TOKEN, KEY, …; a password inside a URL; a well-known token shape; a value `.env` or
//!   compose holds under such a key) becomes an `${env.NAME}` reference. `.env` is read to
//!   understand `${VAR}` interpolation (a port, an address), never to copy a secret.
//! - Nothing is dropped silently: what has no binky equivalent (volumes, networks,
//!   profiles, deploy, extends, a health check that cannot be translated, …) is a `# TODO:`
//!   line at the top of the file and a line of [`Generated::to_decide`].
//!
//! # Caveats
//! - A bootstrap, not a converter: compose describes containers, binky runs processes on
//!   the host. A service compose only *builds* has no command binky could know; it gets a
//!   placeholder that fails until someone writes the real one.
//! - Addresses are recognised where they are written literally (`postgres://…@db:5432/app`,
//!   `redis://cache:6379`, `http://api:8000`, `api:8000`); an address assembled by the
//!   application from parts is recognised only for PostgreSQL's `*_HOST`/`*_PORT`/… family.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_yaml_ng::{Mapping, Value};

/// The compose file names `binky init` looks for, in the order `docker compose` prefers them.
pub const COMPOSE_FILES: [&str; 4] = [
    "compose.yaml",
    "compose.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
];

/// Why nothing could be generated.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The compose file is not YAML.
    #[error("{file} is not valid YAML: {detail}\n  fix: correct the file (`docker compose config` points at the problem), then run `binky init` again")]
    Yaml {
        /// The compose file.
        file: String,
        /// The parser's message (with line and column).
        detail: String,
    },
    /// YAML, but not a compose file with services.
    #[error("{file} is not a compose file binky can read: {why}\n  fix: binky init needs a `services:` mapping with at least one service; run it where the project's compose file is (`binky init DIR`), or write binky.toml by hand (docs/config.md)")]
    NotCompose {
        /// The compose file.
        file: String,
        /// What is missing.
        why: String,
    },
}

/// What [`generate`] made, and what people should know about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Generated {
    /// The `binky.toml` text.
    pub toml: String,
    /// One line per compose service: what it became.
    pub mapped: Vec<String>,
    /// What has no binky equivalent yet (also the `# TODO:` lines at the top of the file).
    pub to_decide: Vec<String>,
    /// Every `${env.NAME}` the file reads, with what it is: to be set in the environment
    /// of `binky up` (or an `env_file`).
    pub to_set: Vec<(String, String)>,
    /// The adapters the file names, each once.
    pub adapters: Vec<String>,
}

/// Build a `binky.toml` from `compose` (the text of `compose_file`) and the text of the
/// project's `.env`, for the project in the directory named `dir_name`.
pub fn generate(
    compose: &str,
    compose_file: &str,
    dotenv: Option<&str>,
    dir_name: &str,
) -> Result<Generated, InitError> {
    generate_with_files(compose, compose_file, dotenv, dir_name, &BTreeMap::new())
}

/// [`generate`], with the texts of the `env_file`s the services name (path as written in
/// the compose file → text): their addresses of compose services become binky's.
pub fn generate_with_files(
    compose: &str,
    compose_file: &str,
    dotenv: Option<&str>,
    dir_name: &str,
    env_files: &BTreeMap<String, String>,
) -> Result<Generated, InitError> {
    let yaml_error = |e: serde_yaml_ng::Error| InitError::Yaml {
        file: compose_file.to_owned(),
        detail: e.to_string(),
    };
    let not_compose = |why: &str| InitError::NotCompose {
        file: compose_file.to_owned(),
        why: why.to_owned(),
    };
    let mut doc: Value = serde_yaml_ng::from_str(compose).map_err(yaml_error)?;
    // `<<: *defaults` merge keys are common in compose files (`x-common: &common`).
    doc.apply_merge().map_err(yaml_error)?;
    let root = match &doc {
        Value::Mapping(m) => m,
        Value::Null => return Err(not_compose("it is empty")),
        _ => return Err(not_compose("its top level is not a mapping")),
    };
    let services = match root.get("services") {
        Some(Value::Mapping(m)) if !m.is_empty() => m,
        Some(Value::Mapping(_)) | Some(Value::Null) => {
            return Err(not_compose("its `services:` has no service"))
        }
        Some(_) => return Err(not_compose("its `services:` is not a mapping")),
        None => return Err(not_compose("it has no `services:`")),
    };
    let mut init = Init::new(compose_file, dotenv, &project_name(dir_name));
    init.env_files = env_files.clone();
    init.read_services(services);
    init.learn_secrets();
    init.plan_ports();
    let body = init.render_services();
    init.top_level(root);
    Ok(init.finish(&body))
}

/// Compose files read together (`-f a -f b`, `COMPOSE_FILE=a:b`, a file and its
/// override), merged as `docker compose` merges them: mappings key by key, the later file
/// winning; `ports`, `expose`, `volumes`, `env_file`, `depends_on` (list form), `dns` and
/// `extra_hosts` lists concatenated; `environment` and `labels` merged by name (list or
/// mapping form); any other list (`command`, `entrypoint`, a health check's `test`)
/// replaced. `files` are `(name, text)`; the result is one compose text.
pub fn merge_compose(files: &[(String, String)]) -> Result<String, InitError> {
    let mut merged: Option<Value> = None;
    for (name, text) in files {
        let yaml_error = |e: serde_yaml_ng::Error| InitError::Yaml {
            file: name.clone(),
            detail: e.to_string(),
        };
        let mut doc: Value = serde_yaml_ng::from_str(text).map_err(yaml_error)?;
        doc.apply_merge().map_err(yaml_error)?;
        merged = Some(match merged {
            None => doc,
            Some(base) => merge_value(base, doc, ""),
        });
    }
    serde_yaml_ng::to_string(&merged.unwrap_or(Value::Null)).map_err(|e| InitError::Yaml {
        file: files
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        detail: e.to_string(),
    })
}

/// `KEY=value` list items (compose's list form of `environment` and `labels`) as a mapping.
fn as_named_mapping(v: Value) -> Value {
    match v {
        Value::Sequence(items) => {
            let mut m = Mapping::new();
            for item in items {
                if let Some(s) = scalar(&item) {
                    match s.split_once('=') {
                        Some((k, v)) => m.insert(Value::from(k), Value::from(v)),
                        None => m.insert(Value::from(s.as_str()), Value::Null),
                    };
                }
            }
            Value::Mapping(m)
        }
        v => v,
    }
}

fn merge_value(base: Value, over: Value, key: &str) -> Value {
    const CONCAT: &[&str] = &[
        "ports",
        "expose",
        "volumes",
        "env_file",
        "depends_on",
        "dns",
        "extra_hosts",
        "secrets",
        "configs",
    ];
    let (base, over) = if matches!(key, "environment" | "labels") {
        (as_named_mapping(base), as_named_mapping(over))
    } else {
        (base, over)
    };
    match (base, over) {
        (Value::Mapping(mut b), Value::Mapping(o)) => {
            for (k, v) in o {
                let name = scalar(&k).unwrap_or_default();
                let merged = match b.remove(&k) {
                    Some(old) => merge_value(old, v, &name),
                    None => v,
                };
                b.insert(k, merged);
            }
            Value::Mapping(b)
        }
        (Value::Sequence(mut b), Value::Sequence(o)) if CONCAT.contains(&key) => {
            for v in o {
                if !b.contains(&v) {
                    b.push(v);
                }
            }
            Value::Sequence(b)
        }
        (_, over) => over,
    }
}

/// `[project] name` for a directory: lower-case letters, digits and `-` (it becomes part of
/// hostnames), at most 63 characters; `app` when nothing is left.
pub fn project_name(dir_name: &str) -> String {
    let mut s = String::new();
    for c in dir_name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let mut s = s.trim_matches('-').to_owned();
    s.truncate(63);
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        "app".to_owned()
    } else {
        s.to_owned()
    }
}

/// Image name fragments → the adapter binky 0.1.2 registers for them. The first fragment
/// the image's name contains wins, so the more specific come first.
const IMAGE_ADAPTERS: &[(&str, &str)] = &[
    ("pgvector", "postgres"),
    ("postgis", "postgres"),
    ("timescale", "postgres"),
    ("postgres", "postgres"),
    ("mariadb", "mariadb"),
    ("percona", "percona"),
    ("mysql", "mysql"),
    ("mongo", "mongodb"),
    ("valkey", "valkey"),
    ("keydb", "redis"),
    ("redis", "redis"),
    ("clickhouse", "clickhouse"),
    ("minio", "minio"),
    ("rabbitmq", "rabbitmq"),
    ("redpanda", "redpanda"),
    ("kafka", "kafka"),
    ("qdrant", "qdrant"),
    ("opensearch", "opensearch"),
    ("elasticsearch", "elasticsearch"),
];

/// Words in an image's name that make it a tool *around* a server (`redis-commander`,
/// `kafka-ui`, `postgres-exporter`, `opensearch-dashboards`), not the server.
const NOT_A_SERVER: &[&str] = &[
    "admin",
    "adminer",
    "backup",
    "cli",
    "client",
    "commander",
    "connect",
    "console",
    "dashboards",
    "exporter",
    "express",
    "init",
    "insight",
    "kafdrop",
    "manager",
    "mc",
    "migrate",
    "proxy",
    "registry",
    "rest",
    "setup",
    "ui",
    "zookeeper",
];

/// The adapter for a compose `image`, if it is a database or broker binky can slice.
pub fn adapter_for_image(image: &str) -> Option<&'static str> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    let base = last.split(':').next().unwrap_or(last).to_ascii_lowercase();
    let tool_word = ["admin", "commander", "dashboard", "exporter", "insight"];
    if base
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| NOT_A_SERVER.contains(&w))
        || tool_word.iter().any(|w| base.contains(w))
    {
        return None;
    }
    IMAGE_ADAPTERS
        .iter()
        .find(|(needle, _)| base.contains(needle))
        .map(|(_, adapter)| *adapter)
}

/// The server binky runs itself for `adapter` when `admin_url` is left out, if any.
fn managed_server(adapter: &str) -> Option<&'static str> {
    crate::servers::Kind::for_adapter(adapter).map(|kind| match kind {
        crate::servers::Kind::Postgres => "PostgreSQL",
        crate::servers::Kind::Redis => "Redis",
        crate::servers::Kind::Mysql => "MariaDB",
    })
}

/// An example admin address for each adapter, for the notes (never a real credential).
fn admin_example(adapter: &str, host_port: Option<u16>) -> String {
    let (url, port) = match adapter {
        "postgres" => ("postgres://postgres:…@127.0.0.1:{}/postgres", 5432),
        "mysql" | "mariadb" | "percona" => ("mysql://root:…@127.0.0.1:{}", 3306),
        "redis" | "valkey" => ("redis://127.0.0.1:{}", 6379),
        "mongodb" => ("mongodb://root:…@127.0.0.1:{}", 27017),
        "minio" => ("http://…:…@127.0.0.1:{}", 9000),
        "rabbitmq" => ("http://guest:…@127.0.0.1:{}", 15672),
        "kafka" | "redpanda" => ("kafka://127.0.0.1:{}", 9092),
        "qdrant" => ("http://127.0.0.1:{}", 6333),
        "clickhouse" => ("http://default:…@127.0.0.1:{}", 8123),
        _ => ("http://127.0.0.1:{}", 9200),
    };
    url.replace("{}", &host_port.unwrap_or(port).to_string())
}

/// Ports that are HTTP more often than not in a development stack.
fn http_looking(port: u16) -> bool {
    matches!(
        port,
        80 | 81
            | 1313
            | 3000..=3010
            | 4000
            | 4173
            | 4200
            | 4321
            | 5000
            | 5001
            | 5173
            | 5174
            | 6006
            | 7000
            | 8000..=8099
            | 8888
            | 9080
    )
}

/// The label of a non-primary port.
fn port_label(port: u16) -> String {
    match port {
        50051 => "grpc".into(),
        9229 => "inspect".into(),
        5005 | 5678 => "debug".into(),
        24678 => "hmr".into(),
        35729 => "livereload".into(),
        _ => format!("p{port}"),
    }
}

/// The port a URL scheme means when none is written.
fn default_port(scheme: &str) -> Option<u16> {
    Some(match scheme {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        "redis" => 6379,
        "mongodb" => 27017,
        "amqp" => 5672,
        _ => return None,
    })
}

// ------------------------------------------------------------------------------------
// Credentials
// ------------------------------------------------------------------------------------

/// Does an environment name hold a secret (`*PASSWORD*`, `*SECRET*`, `*TOKEN*`, `*KEY*`,
/// …)? Erring towards yes only costs an `${env.NAME}` reference.
fn secret_name(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    if matches!(k.as_str(), "PWD" | "OLDPWD") {
        return false;
    }
    [
        "PASSWORD",
        "PASSWD",
        "SECRET",
        "TOKEN",
        "KEY",
        "CREDENTIAL",
        "PRIVATE",
        "SALT",
    ]
    .iter()
    .any(|w| k.contains(w))
        || k.ends_with("PASS")
        || k.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| matches!(w, "PASS" | "PWD" | "DSN"))
}

/// The byte range of the first password inside a `scheme://user:password@host` in `text`
/// that is not itself a `${…}` reference.
fn url_password(text: &str) -> Option<(usize, usize)> {
    scan_urls(text)
        .into_iter()
        .filter_map(|h| h.password)
        .find(|&(a, b)| b > a && !text[a..b].starts_with("${"))
}

/// A word shaped like a well-known token (cloud keys, GitHub/GitLab/Slack/Stripe tokens,
/// `sk-…` API keys, JWTs): [`crate::credentials::token_kind`], quotes and brackets trimmed.
fn token_shaped(word: &str) -> bool {
    let w = word.trim_matches(|c: char| matches!(c, '"' | '\'' | '(' | ')' | '[' | ']'));
    crate::credentials::token_kind(w).is_some()
}

/// A long random-looking value (a generated key): 32+ characters of base64 with upper
/// case, lower case and digits, or of hex.
fn random_looking(v: &str) -> bool {
    let v = v.trim();
    if v.len() < 32 || v.starts_with('/') || v.contains("${") {
        return false;
    }
    if !v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-'))
    {
        return false;
    }
    let has = |f: fn(&char) -> bool| v.chars().any(|c| f(&c));
    let hex = v.chars().all(|c| c.is_ascii_hexdigit());
    hex || (has(char::is_ascii_uppercase)
        && has(char::is_ascii_lowercase)
        && has(char::is_ascii_digit))
}

/// Does `v` look like a credential by its shape alone?
fn looks_secret(v: &str) -> bool {
    url_password(v).is_some()
        || v.contains("-----BEGIN")
        || v.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '='))
            .any(token_shaped)
        || random_looking(v)
}

/// Values too short or too common to hunt for in free text (a password `postgres` is a
/// default, not a secret; scrubbing it would break `adapter = "postgres"`).
fn worth_hunting(v: &str) -> bool {
    const COMMON: &[&str] = &[
        "admin",
        "changeme",
        "default",
        "development",
        "example",
        "guest",
        "localhost",
        "minio",
        "minioadmin",
        "mysql",
        "password",
        "postgres",
        "redis",
        "secret",
        "testing",
    ];
    let lower = v.to_ascii_lowercase();
    // Nor a word the file itself is made of (`RABBITMQ_DEFAULT_PASS: rabbitmq`).
    let structural = IMAGE_ADAPTERS
        .iter()
        .any(|(needle, adapter)| lower == *needle || lower == *adapter);
    v.chars().count() >= 6 && !v.contains("${") && !structural && !COMMON.contains(&lower.as_str())
}

/// Text without its `${…}` references: what is written literally.
fn literal_part(v: &str) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => rest = &rest[i + j + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

// ------------------------------------------------------------------------------------
// URLs in text
// ------------------------------------------------------------------------------------

/// A `scheme://[user[:password]@]host[:port][rest]` found in text.
#[derive(Clone, Debug, PartialEq, Eq)]
struct UrlHit {
    /// Byte range of the whole URL.
    start: usize,
    end: usize,
    scheme: String,
    /// Byte range of the password, when there is one.
    password: Option<(usize, usize)>,
    /// Lower-case.
    host: String,
    port: Option<u16>,
    /// Path, query and fragment.
    rest: String,
}

/// Byte offset of the first char of `s` matching `f`, outside `${…}`.
fn find_outside_refs(s: &str, f: impl Fn(char) -> bool) -> Option<usize> {
    let mut depth = 0usize;
    let mut prev = ' ';
    for (i, c) in s.char_indices() {
        if c == '{' && prev == '$' {
            depth += 1;
        } else if c == '}' && depth > 0 {
            depth -= 1;
        } else if depth == 0 && f(c) {
            return Some(i);
        }
        prev = c;
    }
    None
}

/// Every URL written in `text`.
fn scan_urls(text: &str) -> Vec<UrlHit> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let sep = from + i;
        from = sep + 3;
        let mut start = sep;
        while start > 0 && (b[start - 1].is_ascii_alphanumeric() || b"+.-".contains(&b[start - 1]))
        {
            start -= 1;
        }
        while start < sep && !b[start].is_ascii_alphabetic() {
            start += 1;
        }
        if start == sep {
            continue;
        }
        let body_start = sep + 3;
        let body_len = find_outside_refs(&text[body_start..], |c| {
            c.is_whitespace() || "\"',;)]}<>|`".contains(c)
        })
        .unwrap_or(text.len() - body_start);
        let end = body_start + body_len;
        let body = &text[body_start..end];
        let auth_len =
            find_outside_refs(body, |c| matches!(c, '/' | '?' | '#')).unwrap_or(body.len());
        let authority = &body[..auth_len];
        let (password, hostport) = match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                let pw = find_outside_refs(userinfo, |c| c == ':')
                    .map(|c| (body_start + c + 1, body_start + at));
                (pw, &authority[at + 1..])
            }
            None => (None, authority),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            match v6.split_once(']') {
                Some((h, p)) => (h, p.strip_prefix(':')),
                None => (v6, None),
            }
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        out.push(UrlHit {
            start,
            end,
            scheme: text[start..sep].to_ascii_lowercase(),
            password,
            host: host.to_ascii_lowercase(),
            port: port.and_then(|p| p.parse().ok()),
            rest: body[auth_len..].to_owned(),
        });
        from = end.max(from);
    }
    out
}

// ------------------------------------------------------------------------------------
// YAML helpers
// ------------------------------------------------------------------------------------

/// A scalar as text (`8000`, `true`, `"x"`); `None` for null and collections.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(t) => scalar(&t.value),
        _ => None,
    }
}

/// A string or a list of scalars, as a list.
fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Sequence(items)) => items.iter().filter_map(scalar).collect(),
        Some(v) => scalar(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// `environment:` in its mapping or its `KEY=value` list form; `None` = passed through
/// from the environment compose runs in.
fn env_entries(def: &Mapping) -> Vec<(String, Option<String>)> {
    match def.get("environment") {
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((scalar(k)?, scalar(v))))
            .collect(),
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(scalar)
            .map(|s| match s.split_once('=') {
                Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                None => (s, None),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A compose `command:`.
enum Command {
    /// The string form (compose splits it like a shell; binky hands it to `sh -c`).
    Shell(String),
    /// The list form: one argument each.
    Words(Vec<String>),
}

fn command_of(def: &Mapping) -> Option<Command> {
    match def.get("command")? {
        Value::Sequence(items) => {
            let words: Vec<String> = items.iter().filter_map(scalar).collect();
            (!words.is_empty()).then_some(Command::Words(words))
        }
        v => scalar(v)
            .filter(|s| !s.trim().is_empty())
            .map(|s| Command::Shell(s.trim().to_owned())),
    }
}

/// `(source, target)` of each volume; `source` is empty for an anonymous volume.
fn volumes(def: &Mapping) -> Vec<(String, String)> {
    let Some(Value::Sequence(items)) = def.get("volumes") else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|v| match v {
            Value::Mapping(m) => Some((
                m.get("source").and_then(scalar).unwrap_or_default(),
                m.get("target").and_then(scalar)?,
            )),
            v => {
                let s = scalar(v)?;
                let mut parts = s.splitn(3, ':');
                let first = parts.next()?.to_owned();
                match parts.next() {
                    Some(target) => Some((first, target.to_owned())),
                    None => Some((String::new(), first)),
                }
            }
        })
        .collect()
}

/// Is a volume source a path of the project (a bind mount), not a named volume?
fn is_project_path(source: &str) -> bool {
    !source.is_empty()
        && !source.starts_with(['/', '~', '$'])
        && (source.starts_with('.') || source.contains('/'))
}

/// Where a relative path leads, from the project directory.
#[derive(Debug, PartialEq, Eq)]
enum Dir {
    /// The project directory itself.
    Here,
    /// A directory below it (`web`, `services/api`).
    Below(String),
    /// Outside it (`../shared`).
    Outside,
}

fn normalise(path: &str) -> Dir {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Dir::Outside;
                }
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        Dir::Here
    } else {
        Dir::Below(parts.join("/"))
    }
}

/// `path` (relative to the project directory) as seen from `workdir` (also relative to it).
fn rebase(path: &str, workdir: Option<&str>) -> String {
    if path.starts_with('/') {
        return path.to_owned();
    }
    let p = match normalise(path) {
        Dir::Below(p) => p,
        Dir::Here => ".".to_owned(),
        Dir::Outside => return path.to_owned(),
    };
    let Some(w) = workdir else { return p };
    let wp: Vec<&str> = w.split('/').collect();
    let pp: Vec<&str> = p.split('/').collect();
    let common = wp.iter().zip(&pp).take_while(|(a, b)| a == b).count();
    let mut out: Vec<&str> = vec![".."; wp.len() - common];
    out.extend(&pp[common..]);
    out.join("/")
}

// ------------------------------------------------------------------------------------
// TOML writing
// ------------------------------------------------------------------------------------

/// A TOML basic string.
fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare when it can be.
fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        q(k)
    }
}

fn toml_list(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| q(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// One comment line's worth of text.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A shell word, quoted only when it must be (`${svc.port}` references are fine bare:
/// binky replaces them before the shell sees the command).
fn shell_word(w: &str) -> String {
    let plain = literal_part(w);
    if !w.is_empty()
        && plain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c))
    {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn dns_label(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    out = out.trim_matches('-').to_owned();
    out.truncate(63);
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "app".into()
    } else {
        out.into()
    }
}

// ------------------------------------------------------------------------------------
// The generator
// ------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A database or broker: binky slices a shared server.
    Adapter(&'static str),
    /// Code compose builds or a command it runs: a binky process.
    Process,
    /// An image binky has no adapter for and no command to run.
    Unmapped,
    /// Infrastructure binky replaces (a reverse proxy: binky's proxy serves every world):
    /// left out, with what replaces it.
    Replaced(&'static str),
}

/// Images of infrastructure binky replaces, and what replaces them.
const REPLACED_IMAGES: &[(&str, &str)] = &[
    ("traefik", "Traefik, a reverse proxy"),
    ("nginx-proxy", "nginx-proxy, a reverse proxy"),
    ("caddy-docker-proxy", "Caddy, a reverse proxy"),
    ("caddy", "Caddy, a reverse proxy"),
    ("haproxy", "HAProxy, a reverse proxy"),
    ("envoy", "Envoy, a reverse proxy"),
];

/// What binky replaces an image with, if it is infrastructure binky replaces.
fn replaced_image(image: &str) -> Option<&'static str> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let path = no_digest
        .split(':')
        .next()
        .unwrap_or(no_digest)
        .to_ascii_lowercase();
    let last = path.rsplit('/').next().unwrap_or(&path);
    REPLACED_IMAGES
        .iter()
        .find(|(needle, _)| {
            last == *needle
                || last.starts_with(&format!("{needle}-"))
                || path.ends_with(&format!("/{needle}"))
        })
        .map(|(_, what)| *what)
}

/// Why a compose `command` cannot be a host command, if it cannot: flags handed to the
/// image's entrypoint (`--api.insecure=true`), or a path inside the image (`/start`).
fn image_only_command(cmd: &str) -> Option<String> {
    let first = cmd.split_whitespace().next()?;
    if first.starts_with('-') {
        return Some(format!(
            "compose hands `{}` to its image's entrypoint as flags",
            one_line(cmd)
        ));
    }
    let host_dirs = [
        "/bin/", "/usr/", "/sbin/", "/opt/", "/tmp/", "/home/", "/root/",
    ];
    if first.starts_with('/') && !host_dirs.iter().any(|d| first.starts_with(d)) {
        return Some(format!("compose runs {first}, a path inside its image"));
    }
    None
}

/// The `cmd` binky init writes where it cannot know the command: it fails if run, and
/// `binky check` (and `binky up`) refuse it, naming the service.
pub const TODO_CMD: &str = "TODO: the command that starts";

struct Svc {
    /// The compose name.
    raw: String,
    /// The binky name.
    name: String,
    def: Mapping,
    kind: Kind,
    image: Option<String>,
}

/// A process service's ports: the first is the primary.
#[derive(Default)]
struct Layout {
    /// `(container port, label)`.
    slots: Vec<(u16, String)>,
    /// The primary port serves the service's URL.
    url: bool,
}

impl Layout {
    fn token(&self, svc: &str, port: u16) -> Option<String> {
        let i = self.slots.iter().position(|(p, _)| *p == port)?;
        Some(if i == 0 {
            format!("${{{svc}.port}}")
        } else {
            format!("${{{svc}.{}}}", self.slots[i].1)
        })
    }
}

/// A compose health check, as far as binky can read it.
enum Probe {
    None,
    /// `curl http://localhost:PORT/rest`.
    Http {
        port: u16,
        rest: String,
    },
    /// Anything else: the command.
    Other(String),
}

/// One line of `[services.X.env]`.
struct EnvLine {
    key: String,
    value: Option<String>,
    comment: Option<String>,
}

struct Init {
    file: String,
    /// `[project] name`.
    project: String,
    dotenv: Vec<(String, String)>,
    vars: BTreeMap<String, String>,
    /// `(value, env name)`: credentials seen in compose or `.env`, longest first.
    secrets: Vec<(String, String)>,
    svcs: Vec<Svc>,
    /// Host names compose services answer to (lower-case) → index.
    alias: HashMap<String, usize>,
    layouts: Vec<Layout>,
    /// Why each `${env.NAME}` is there.
    reasons: BTreeMap<String, String>,
    to_decide: Vec<String>,
    mapped: Vec<String>,
    /// Some service sets `networks` or `network_mode`.
    uses_networks: bool,
    /// The texts of the `env_file`s services name (path as written → text), other than
    /// `.env`, to point their addresses of compose services at binky's.
    env_files: BTreeMap<String, String>,
}

impl Init {
    fn new(file: &str, dotenv: Option<&str>, project: &str) -> Init {
        let dotenv = dotenv
            .map(binky_controllers::env::parse_dotenv)
            .unwrap_or_default();
        Init {
            file: file.to_owned(),
            project: project.to_owned(),
            vars: dotenv.iter().cloned().collect(),
            dotenv,
            secrets: Vec::new(),
            svcs: Vec::new(),
            alias: HashMap::new(),
            layouts: Vec::new(),
            reasons: BTreeMap::new(),
            to_decide: Vec::new(),
            mapped: Vec::new(),
            uses_networks: false,
            env_files: BTreeMap::new(),
        }
    }

    fn todo(&mut self, s: impl AsRef<str>) {
        let line = one_line(s.as_ref());
        if !self.to_decide.contains(&line) {
            self.to_decide.push(line);
        }
    }

    fn reason(&mut self, name: &str, why: impl Into<String>) {
        self.reasons
            .entry(name.to_owned())
            .or_insert_with(|| why.into());
    }

    // --- reading ------------------------------------------------------------------

    fn read_services(&mut self, services: &Mapping) {
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
            let runs_code =
                def.get("build").is_some_and(|b| !b.is_null()) || command_of(&def).is_some();
            let kind = match (
                image.as_deref().and_then(replaced_image),
                image.as_deref().and_then(adapter_for_image),
            ) {
                (Some(what), _) => Kind::Replaced(what),
                (None, Some(a)) => Kind::Adapter(a),
                (None, None) if runs_code => Kind::Process,
                (None, None) => Kind::Unmapped,
            };
            let i = self.svcs.len();
            let mut aliases = vec![raw.clone()];
            aliases.extend(def.get("container_name").and_then(scalar));
            aliases.extend(def.get("hostname").and_then(scalar));
            if let Some(Value::Mapping(nets)) = def.get("networks") {
                for (_, n) in nets {
                    aliases.extend(string_list(n.get("aliases")));
                }
            }
            for a in aliases {
                self.alias.entry(a.to_ascii_lowercase()).or_insert(i);
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
            });
        }
        // `links: ["db:database"]` names another alias of `db`.
        for i in 0..self.svcs.len() {
            for link in string_list(self.svcs[i].def.get("links")) {
                if let Some((target, alias)) = link.split_once(':') {
                    if let Some(&j) = self.alias.get(&target.to_ascii_lowercase()) {
                        self.alias.entry(alias.to_ascii_lowercase()).or_insert(j);
                    }
                }
            }
        }
    }

    /// Remember every credential compose and `.env` hold, so that no text copied into the
    /// file (a command, a health check) can carry one.
    fn learn_secrets(&mut self) {
        let mut found: Vec<(String, String)> = Vec::new();
        let mut learn = |name: &str, value: &str| {
            if worth_hunting(value) {
                found.push((value.to_owned(), name.to_owned()));
            }
            if let Some((a, b)) = url_password(value) {
                if worth_hunting(&value[a..b]) {
                    found.push((value[a..b].to_owned(), format!("{name}_PASSWORD")));
                }
            }
        };
        for (k, v) in &self.dotenv {
            if secret_name(k) || looks_secret(v) {
                learn(k, v);
            }
        }
        for svc in &self.svcs {
            for (k, v) in env_entries(&svc.def) {
                if let Some(v) = v {
                    if !v.contains('$') && (secret_name(&k) || looks_secret(&v)) {
                        learn(&k, &v);
                    }
                }
            }
        }
        // Not a value that is also a name the file needs (a password `shop` in project
        // `shop`, service `shop`): hunting it would break the file, and it guards nothing.
        let names: BTreeSet<String> = self
            .svcs
            .iter()
            .flat_map(|s| [s.name.to_ascii_lowercase(), s.raw.to_ascii_lowercase()])
            .chain([self.project.clone()])
            .collect();
        found.retain(|(v, _)| !names.contains(&v.to_ascii_lowercase()));
        found.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.cmp(b)));
        found.dedup_by(|a, b| a.0 == b.0);
        self.secrets = found;
    }

    // --- compose interpolation ----------------------------------------------------

    /// Compose's `${VAR}`, `${VAR:-default}`, `$VAR` and `$$`, understood through `.env`:
    /// a known, harmless value is written as it is; a credential, or a variable `.env` does
    /// not set, becomes `${env.VAR}`.
    fn interpolate(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            if let Some(a) = after.strip_prefix('$') {
                out.push('$');
                rest = a;
            } else if let Some(inner) = after.strip_prefix('{') {
                match matching_brace(inner) {
                    Some(end) => {
                        let expanded = self.expand(&inner[..end]);
                        out.push_str(&expanded);
                        rest = &inner[end + 1..];
                    }
                    None => {
                        out.push('$');
                        rest = after;
                    }
                }
            } else {
                let n = after
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                if n > 0 && !after.as_bytes()[0].is_ascii_digit() {
                    let name = &after[..n];
                    let value = self.vars.get(name).cloned();
                    out.push_str(&self.var_value(name, value));
                    rest = &after[n..];
                } else {
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn expand(&mut self, inner: &str) -> String {
        let n = inner
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let (name, op) = inner.split_at(n);
        if name.is_empty() {
            return format!("${{{inner}}}");
        }
        let set = self.vars.get(name).cloned();
        // An optional credential (`${SENTRY_DSN:-}`): not copied, and optional it stays.
        let default_op = op
            .strip_prefix(":-")
            .map(|d| (":-", d))
            .or_else(|| op.strip_prefix('-').map(|d| ("-", d)));
        if let Some((sep, d)) = default_op {
            let secretish = secret_name(name) || set.as_deref().is_some_and(looks_secret);
            // Only an empty default is kept: a default under a credential's name is one.
            if secretish {
                let d = self.interpolate(d);
                if d.is_empty() {
                    self.reason(
                        name,
                        "optional (compose gives a default): set it in the environment of `binky up` to use it",
                    );
                    return format!("${{env.{name}{sep}{d}}}");
                }
            }
        }
        let value = if let Some(d) = op.strip_prefix(":-") {
            match set {
                Some(v) if !v.is_empty() => Some(v),
                _ => Some(self.interpolate(d)),
            }
        } else if let Some(d) = op.strip_prefix('-') {
            match set {
                Some(v) => Some(v),
                None => Some(self.interpolate(d)),
            }
        } else if let Some(alt) = op.strip_prefix(":+") {
            return match set {
                Some(v) if !v.is_empty() => self.interpolate(alt),
                _ => String::new(),
            };
        } else if let Some(alt) = op.strip_prefix('+') {
            return match set {
                Some(_) => self.interpolate(alt),
                None => String::new(),
            };
        } else {
            set
        };
        self.var_value(name, value)
    }

    fn var_value(&mut self, name: &str, value: Option<String>) -> String {
        let secret = secret_name(name)
            || value.as_deref().is_some_and(|v| {
                v.contains("-----BEGIN")
                    || random_looking(v)
                    || v.split_whitespace().any(token_shaped)
            });
        match value {
            Some(v) if !secret => v,
            _ => {
                if secret {
                    let why = if self.vars.contains_key(name) {
                        "a credential: not copied into binky.toml (.env has it)"
                    } else {
                        "a credential: not copied into binky.toml"
                    };
                    self.reason(name, why);
                } else {
                    self.reason(
                        name,
                        "compose reads it from the environment; .env does not set it",
                    );
                }
                format!("${{env.{name}}}")
            }
        }
    }

    /// Replace every credential in free text (a command, a health check, a note) with an
    /// `${env.…}` reference.
    fn redact(&mut self, owner: &str, text: &str) -> String {
        let mut out = text.to_owned();
        let secrets = self.secrets.clone();
        for (value, name) in &secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("${{env.{name}}}"));
                self.reason(name, "a credential: not copied into binky.toml");
            }
        }
        let base = owner.to_ascii_uppercase().replace('-', "_");
        while let Some((a, b)) = url_password(&out) {
            let name = format!("{base}_PASSWORD");
            out.replace_range(a..b, &format!("${{env.{name}}}"));
            self.reason(
                &name,
                format!("a password compose wrote into {owner}'s settings"),
            );
        }
        let words: Vec<String> = out
            .split(|c: char| c.is_whitespace() || "\"',;=".contains(c))
            .filter(|w| token_shaped(w))
            .map(str::to_owned)
            .collect();
        for w in words {
            let name = format!("{base}_TOKEN");
            out = out.replace(&w, &format!("${{env.{name}}}"));
            self.reason(
                &name,
                format!("a token compose wrote into {owner}'s settings"),
            );
        }
        // `--password X`, `--api-key=X`, `DB_PASSWORD=X cmd`: the value goes.
        let spans: Vec<(usize, usize)> = out
            .char_indices()
            .filter(|&(i, c)| {
                !c.is_whitespace() && (i == 0 || out[..i].ends_with(char::is_whitespace))
            })
            .map(|(i, _)| {
                let len = out[i..].find(char::is_whitespace).unwrap_or(out.len() - i);
                (i, i + len)
            })
            .collect();
        let mut edits: Vec<(usize, usize, String)> = Vec::new();
        for (n, &(a, b)) in spans.iter().enumerate() {
            let word = out[a..b].trim_matches(|c| c == '"' || c == '\'');
            // The word without its quotes, in `out`.
            let a = a + out[a..b].find(word).unwrap_or(0);
            let b = a + word.len();
            let flag = word.strip_prefix("--").or_else(|| {
                word.strip_prefix('-')
                    .filter(|w| w.len() > 1 && !w.starts_with('-'))
            });
            let (name, inline) = match word.split_once('=') {
                Some((k, v)) => (k.trim_start_matches('-'), Some(v)),
                None => (flag.unwrap_or(""), None),
            };
            let is_assignment = flag.is_none()
                && inline.is_some()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let upper = name.to_ascii_uppercase().replace('-', "_");
            // `--no-password` takes no value; `--password-file PATH` names a file.
            if name.is_empty()
                || !secret_name(&upper)
                || upper.starts_with("NO_")
                || upper.ends_with("_FILE")
            {
                continue;
            }
            if flag.is_none() && !is_assignment {
                continue;
            }
            let var = if is_assignment {
                upper
            } else {
                format!("{base}_{upper}")
            };
            let target = match inline {
                Some(v) if !v.is_empty() && !v.starts_with("${") => {
                    let start = a + out[a..b].find('=').map_or(0, |e| e + 1);
                    Some((start, b))
                }
                Some(_) => None,
                None => spans.get(n + 1).and_then(|&(c, d)| {
                    let next = out[c..d].trim_matches(|q| q == '"' || q == '\'');
                    if next.is_empty() || next.starts_with('-') || next.starts_with("${") {
                        return None;
                    }
                    let c = c + out[c..d].find(next).unwrap_or(0);
                    Some((c, c + next.len()))
                }),
            };
            if let Some((c, d)) = target.filter(|&(c, _)| edits.last().is_none_or(|e| e.1 <= c)) {
                edits.push((c, d, format!("${{env.{var}}}")));
                self.reason(
                    &var,
                    format!("a credential compose wrote into {owner}'s settings"),
                );
            }
        }
        for (c, d, r) in edits.into_iter().rev() {
            out.replace_range(c..d, &r);
        }
        out
    }

    // --- ports --------------------------------------------------------------------

    /// Container ports a service publishes or exposes; what cannot be carried is noted.
    fn container_ports(&mut self, i: usize) -> Vec<u16> {
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

    fn healthcheck(&mut self, i: usize) -> Probe {
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
    fn texts(&mut self, i: usize) -> Vec<(Option<String>, String)> {
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
                self.dotenv
                    .iter()
                    .map(|(k, v)| (Some(k.clone()), v.clone())),
            );
        }
        out
    }

    fn loads_dotenv(&self, i: usize) -> bool {
        string_list_env_file(&self.svcs[i].def)
            .iter()
            .any(|f| normalise(f) == Dir::Below(".env".into()))
    }

    /// Give every process service its ports: what it publishes or exposes, what others
    /// reach it on, and where its health check probes. HTTP ones get the URL.
    fn plan_ports(&mut self) {
        let n = self.svcs.len();
        let mut ports: Vec<Vec<(u16, bool)>> = vec![Vec::new(); n];
        fn add(list: &mut Vec<(u16, bool)>, port: u16, http: bool) {
            match list.iter_mut().find(|(p, _)| *p == port) {
                Some(e) => e.1 |= http,
                None => list.push((port, http)),
            }
        }
        for (i, list) in ports.iter_mut().enumerate() {
            if self.svcs[i].kind != Kind::Process {
                continue;
            }
            for p in self.container_ports(i) {
                add(list, p, http_looking(p));
            }
        }
        for i in 0..n {
            if self.svcs[i].kind != Kind::Process {
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
                    if self.svcs[j].kind != Kind::Process {
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
                        if let (Kind::Process, Some(p)) = (self.svcs[j].kind, port) {
                            add(&mut ports[j], p, http_looking(p));
                        }
                    }
                }
            }
        }
        self.layouts = ports
            .into_iter()
            .map(|mut list| {
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
            })
            .collect();
    }

    // --- addresses ----------------------------------------------------------------

    /// Addresses of compose services written in `text` (owned by service `owner`, under
    /// env `key`) as binky tokens.
    fn map_addresses(&mut self, owner: usize, key: Option<&str>, text: &str) -> String {
        let who = match key {
            Some(k) => format!("{}: env {k}", self.svcs[owner].name),
            None => format!("{}: cmd", self.svcs[owner].name),
        };
        let mut out = String::new();
        let mut last = 0;
        for hit in scan_urls(text) {
            let Some(&j) = self.alias.get(&hit.host) else {
                continue;
            };
            let target = self.svcs[j].name.clone();
            let replacement = match self.svcs[j].kind {
                Kind::Adapter(_) => {
                    if hit.start != 0 || hit.end != text.len() {
                        self.todo(format!("{who}: the address of {target} inside it is now ${{{target}.url}} (the slice's own URL, with its own user): check the form around it"));
                    }
                    Some(format!("${{{target}.url}}"))
                }
                Kind::Process if hit.password.is_none() => Some(self.process_address(j, &hit)),
                Kind::Process => None,
                Kind::Unmapped | Kind::Replaced(_) => {
                    self.todo(format!(
                        "{who} points at {}, which is not in binky.toml",
                        self.svcs[j].raw
                    ));
                    None
                }
            };
            if let Some(r) = replacement {
                out.push_str(&text[last..hit.start]);
                out.push_str(&r);
                last = hit.end;
            }
        }
        out.push_str(&text[last..]);
        if last > 0 {
            return out;
        }
        let Some(key) = key else { return out };
        // `api:8000`, `kafka:9092,kafka2:9092`, or a bare `db` under a *_HOST key.
        let items = host_ports(text);
        let hostish = {
            let k = key.to_ascii_uppercase();
            k.contains("HOST") || k.contains("SERVER") || k.contains("ADDR")
        };
        if items.is_empty()
            || !items
                .iter()
                .all(|(h, p)| self.alias.contains_key(h) && (p.is_some() || hostish))
        {
            return out;
        }
        let mut mapped = Vec::new();
        for (host, port) in items {
            let j = self.alias[&host];
            let target = self.svcs[j].name.clone();
            let item = match (self.svcs[j].kind, port) {
                (Kind::Process, Some(p)) => {
                    let tok = self.layouts[j]
                        .token(&target, p)
                        .unwrap_or_else(|| format!("${{{target}.port}}"));
                    format!("localhost:{tok}")
                }
                (Kind::Process, None) => "localhost".to_owned(),
                (Kind::Adapter("postgres"), Some(_)) => {
                    format!("${{{target}.host}}:${{{target}.port}}")
                }
                (Kind::Adapter("postgres"), None) => format!("${{{target}.host}}"),
                (Kind::Adapter(_), _) => {
                    self.todo(format!("{who} = {} names compose's {target}: binky gives its slice as one address with its own user, ${{{target}.url}}; have the app read that", q(text.trim())));
                    return text.to_owned();
                }
                (Kind::Unmapped | Kind::Replaced(_), _) => {
                    self.todo(format!(
                        "{who} points at {}, which is not in binky.toml",
                        self.svcs[j].raw
                    ));
                    return text.to_owned();
                }
            };
            mapped.push(item);
        }
        mapped.join(",")
    }

    /// `http://api:8000/v1` → `${api.url}/v1`; other ports and schemes →
    /// `scheme://localhost:${api.LABEL}…`.
    fn process_address(&self, j: usize, hit: &UrlHit) -> String {
        let name = &self.svcs[j].name;
        let layout = &self.layouts[j];
        let port = hit.port.or_else(|| default_port(&hit.scheme));
        let index = port.and_then(|p| layout.slots.iter().position(|(q, _)| *q == p));
        match (index, port) {
            (Some(0), _) if layout.url && matches!(hit.scheme.as_str(), "http" | "https") => {
                format!("${{{name}.url}}{}", hit.rest)
            }
            (Some(_), Some(p)) => format!(
                "{}://localhost:{}{}",
                hit.scheme,
                layout.token(name, p).unwrap_or_default(),
                hit.rest
            ),
            _ => format!("{}://localhost:${{{name}.port}}{}", hit.scheme, hit.rest),
        }
    }

    /// `8000` → `${self.port}` in `text`, for each container port of service `i`. In env
    /// values (`anywhere` false) only after a `:` (`localhost:8000`), unless the key is a
    /// port's.
    fn self_ports(&self, i: usize, text: &str, anywhere: bool) -> String {
        let layout = &self.layouts[i];
        if layout.slots.is_empty() {
            return text.to_owned();
        }
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut k = 0;
        while k < b.len() {
            if b[k] == b'$' && b.get(k + 1) == Some(&b'{') {
                let end = text[k..].find('}').map_or(b.len(), |e| k + e + 1);
                out.push_str(&text[k..end]);
                k = end;
                continue;
            }
            if b[k].is_ascii_digit() {
                let end = k + b[k..].iter().take_while(|c| c.is_ascii_digit()).count();
                let prev = if k > 0 { b[k - 1] } else { b' ' };
                let next = b.get(end).copied().unwrap_or(b' ');
                let dotted = prev == b'.'
                    || (next == b'.' && b.get(end + 1).is_some_and(u8::is_ascii_digit));
                let word = prev.is_ascii_alphabetic()
                    || prev == b'_'
                    || next.is_ascii_alphabetic()
                    || next == b'_';
                let context = anywhere || prev == b':';
                let token = text[k..end]
                    .parse::<u16>()
                    .ok()
                    .filter(|_| !dotted && !word && context)
                    .and_then(|p| layout.token("self", p));
                match token {
                    Some(t) => out.push_str(&t),
                    None => out.push_str(&text[k..end]),
                }
                k = end;
                continue;
            }
            let ch = text[k..].chars().next().unwrap_or(' ');
            out.push(ch);
            k += ch.len_utf8();
        }
        out
    }

    // --- rendering ----------------------------------------------------------------

    fn render_services(&mut self) -> String {
        let mut out = String::new();
        let adapters: Vec<usize> = (0..self.svcs.len())
            .filter(|&i| matches!(self.svcs[i].kind, Kind::Adapter(_)))
            .collect();
        if !adapters.is_empty() {
            out.push_str("# Adapter services: every world gets its own slice (a database, a key prefix, …)\n# of one shared server.\n\n");
        }
        for i in adapters {
            self.render_adapter(i, &mut out);
        }
        for i in 0..self.svcs.len() {
            match self.svcs[i].kind {
                Kind::Process => self.render_process(i, &mut out),
                Kind::Unmapped => self.unmapped(i),
                Kind::Replaced(what) => self.replaced(i, what, &mut out),
                Kind::Adapter(_) => {}
            }
        }
        out
    }

    fn in_output(&self, j: usize) -> bool {
        !matches!(self.svcs[j].kind, Kind::Unmapped | Kind::Replaced(_))
    }

    /// Infrastructure binky replaces: a comment in the file, no service.
    fn replaced(&mut self, i: usize, what: &str, out: &mut String) {
        let raw = self.svcs[i].raw.clone();
        out.push_str(&format!(
            "# {raw} ({what}) is left out: binky's proxy serves every world's services at\n# http://<service>.<world>.{}.localhost (and https with `https = true`); routing\n# labels and rules for it have no use here.\n\n",
            self.project
        ));
        self.mapped.push(format!(
            "{raw}: left out ({what}; binky's proxy serves every world)"
        ));
    }

    /// `depends_on` (list or map form), only services that are in the file.
    fn depends_on(&mut self, i: usize) -> (Vec<String>, Vec<String>) {
        let names: Vec<String> = match self.svcs[i].def.get("depends_on") {
            Some(Value::Mapping(m)) => m.keys().filter_map(scalar).collect(),
            v => string_list(v),
        };
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for d in names {
            match self.svcs.iter().position(|s| s.raw == d) {
                Some(j) if self.in_output(j) && j != i => {
                    let n = self.svcs[j].name.clone();
                    if !kept.contains(&n) {
                        kept.push(n);
                    }
                }
                _ => dropped.push(d),
            }
        }
        (kept, dropped)
    }

    fn render_adapter(&mut self, i: usize, out: &mut String) {
        let Kind::Adapter(adapter) = self.svcs[i].kind else {
            return;
        };
        let name = self.svcs[i].name.clone();
        let image = self.svcs[i].image.clone().unwrap_or_default();
        let def = self.svcs[i].def.clone();
        let var = format!("{}_ADMIN_URL", name.to_ascii_uppercase().replace('-', "_"));
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
        let example = admin_example(adapter, host_port);
        let runs_itself = managed_server(adapter);
        let why = if let Some(server) = runs_itself {
            format!("the admin address of {name}'s server, e.g. {example} (or delete admin_url and binky runs {server} itself)")
        } else {
            format!("the admin address of {name}'s server, e.g. {example}")
        };
        self.reason(&var, why);

        let mut container_bits: Vec<&str> = Vec::new();
        if !env_entries(&def).is_empty() {
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
        out.push_str(&format!("[services.{name}]\n"));
        out.push_str(&format!(
            "# compose: image {}",
            one_line(&self.redact(&name, &image))
        ));
        if !container_bits.is_empty() {
            out.push_str(&format!(
                "; not needed with a slice: its {}",
                container_bits.join(", ")
            ));
        }
        out.push('\n');
        if let Some(server) = runs_itself {
            out.push_str(&format!("# binky can also run {server} itself: leave admin_url out and it starts one from the\n# installed binaries.\n"));
        } else {
            out.push_str(&format!("# {var}: the shared server's admin address, e.g. {example}.\n# binky runs only PostgreSQL, Redis and MariaDB itself when admin_url is left out.\n"));
        }
        out.push_str(&format!("adapter = {}\n", q(adapter)));
        out.push_str(&format!("admin_url = {}\n", q(&format!("${{env.{var}}}"))));
        let (deps, _) = self.depends_on(i);
        if !deps.is_empty() {
            out.push_str(&format!("depends_on = {}\n", toml_list(&deps)));
        }
        if adapter == "postgres" {
            out.push_str("# migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f schema.sql\"\n# seed = \"…\"\n# clone_from = \"golden\"   # migrate and seed once; every world is a server-side copy\n");
        }
        out.push('\n');

        // What the container had that a slice does not need, and what it might.
        let raw = self.svcs[i].raw.clone();
        for (src, dst) in volumes(&def) {
            if dst.contains("docker-entrypoint-initdb.d") {
                let src = self.redact(&name, &src);
                let hint = if adapter == "postgres" {
                    format!(" (e.g. migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f {src}\")")
                } else {
                    String::new()
                };
                self.todo(format!("{name}: {src} is mounted into {dst}, which the image runs at first start: make it the `migrate` command{hint}"));
            } else if is_project_path(&src) {
                self.todo(format!("{name}: {src} is mounted at {dst} (server configuration?): set it on the shared server; a slice cannot carry it"));
            }
        }
        if def.get("build").is_some_and(|b| !b.is_null()) {
            self.todo(format!("{name}: compose builds a custom {adapter} image: install what it adds (extensions, configuration) on the shared server"));
        }
        if def.contains_key("command") {
            self.todo(format!("{name}: its `command` (server flags) is not carried: set them on the shared server if they matter"));
        }
        self.other_keys(i, ADAPTER_KEYS);
        let admin = if let Some(server) = runs_itself {
            format!("admin_url = ${{env.{var}}}, or none and binky runs {server}")
        } else {
            format!("admin_url = ${{env.{var}}}")
        };
        let renamed = if raw != name {
            format!(" (renamed from {raw})")
        } else {
            String::new()
        };
        self.mapped.push(format!(
            "{name}{renamed}: image {} → adapter {adapter} ({admin})",
            one_line(&image)
        ));
    }

    fn unmapped(&mut self, i: usize) {
        let svc = &self.svcs[i];
        let what = match &svc.image {
            Some(image) => format!("runs image {image}, which binky has no adapter for"),
            None => "has no image, build or command".to_owned(),
        };
        let line = format!(
            "{}: {what}, and compose gives no command to run on the host: run it yourself, or add [services.{}] with a cmd",
            svc.raw, svc.name
        );
        let raw = svc.raw.clone();
        let line = self.redact(&raw, &line);
        self.todo(line);
        self.mapped
            .push(format!("{raw}: not mapped (see the TODOs)"));
    }

    fn workdir(&mut self, i: usize) -> Option<String> {
        let def = self.svcs[i].def.clone();
        let name = self.svcs[i].name.clone();
        let working_dir = def
            .get("working_dir")
            .and_then(scalar)
            .map(|w| self.interpolate(&w));
        let mut chosen: Option<(String, Dir)> = None;
        if let Some(w) = &working_dir {
            if !w.starts_with('/') {
                chosen = Some((w.clone(), normalise(w)));
            } else {
                // `working_dir: /app` with `./web:/app` mounted: the code is in ./web.
                for (src, dst) in volumes(&def) {
                    let dst = dst.trim_end_matches('/');
                    if let Some(rest) = w.strip_prefix(dst) {
                        if (rest.is_empty() || rest.starts_with('/')) && is_project_path(&src) {
                            let path = format!("{src}{rest}");
                            chosen = Some((path.clone(), normalise(&path)));
                            break;
                        }
                    }
                }
            }
        }
        if chosen.is_none() {
            let context = match def.get("build") {
                Some(Value::Mapping(m)) => Some(
                    m.get("context")
                        .and_then(scalar)
                        .unwrap_or_else(|| ".".into()),
                ),
                Some(v) => scalar(v),
                None => None,
            }
            .map(|c| self.interpolate(&c));
            if let Some(c) = context {
                if !c.contains("://") && !c.starts_with("git@") && !c.starts_with('/') {
                    chosen = Some((c.clone(), normalise(&c)));
                }
            }
        }
        match chosen {
            Some((_, Dir::Below(d))) => Some(d),
            Some((path, Dir::Outside)) => {
                self.todo(format!("{name}: its code is in {path}, outside this directory: set `workdir` (relative to binky.toml) if it should run there"));
                None
            }
            Some((_, Dir::Here)) => None,
            None => {
                if let Some(w) = working_dir {
                    self.todo(format!("{name}: working_dir {w} is a path inside the container: set `workdir` (relative to binky.toml) if {name} runs elsewhere than here"));
                }
                None
            }
        }
    }

    fn render_process(&mut self, i: usize, out: &mut String) {
        let name = self.svcs[i].name.clone();
        let raw = self.svcs[i].raw.clone();
        let def = self.svcs[i].def.clone();
        let mut notes: Vec<String> = Vec::new();
        if raw != name {
            notes.push(format!("renamed from {raw}"));
        }
        let workdir = self.workdir(i);

        // cmd
        let cmd = match command_of(&def) {
            Some(Command::Shell(s)) => {
                let s = self.interpolate(&s);
                let s = self.map_addresses(i, None, &s);
                let s = self.self_ports(i, &s, true);
                Some(self.redact(&name, &s))
            }
            Some(Command::Words(ws)) => {
                let mut words = Vec::new();
                for w in ws {
                    let w = self.interpolate(&w);
                    let w = self.map_addresses(i, None, &w);
                    let w = self.self_ports(i, &w, true);
                    let w = self.redact(&name, &w);
                    words.push(shell_word(&w));
                }
                Some(words.join(" "))
            }
            None => None,
        };
        out.push_str(&format!("[services.{name}]\n"));
        let image_only = cmd.as_deref().and_then(image_only_command);
        match (&cmd, image_only) {
            (Some(c), None) => {
                out.push_str(&format!("cmd = {}\n", q(c)));
                notes.push("cmd from command".into());
            }
            (cmd, why) => {
                let built = match (&why, &workdir) {
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
                let listen = if self.layouts[i].slots.is_empty() {
                    String::new()
                } else {
                    " and have it listen on ${self.port} (binky also sets PORT)".to_owned()
                };
                self.todo(format!("{name}: set `cmd` to the command that starts it on the host{listen}; until then it fails on purpose"));
                notes.push("cmd TODO".into());
            }
        }
        if let Some(w) = &workdir {
            out.push_str(&format!("workdir = {}\n", q(w)));
            notes.push(format!("workdir {w}"));
        }
        if !def.contains_key("build") {
            if let Some(image) = &self.svcs[i].image {
                notes.push(format!(
                    "runs on the host, not in {}: its tools must be installed",
                    one_line(image)
                ));
            }
        }

        // url and ports
        let layout = &self.layouts[i];
        let slots = layout.slots.clone();
        if !slots.is_empty() {
            let sub = dns_label(&name);
            if slots.len() == 1 && layout.url {
                if sub == name {
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

        // health
        match self.healthcheck(i) {
            Probe::None => {}
            Probe::Http { port, rest } => {
                if let Some(tok) = self.layouts[i].token("self", port) {
                    let rest = self.redact(&name, &rest);
                    out.push_str(&format!(
                        "health = {}\n",
                        q(&format!("http://localhost:{tok}{rest}"))
                    ));
                    notes.push("health from healthcheck".into());
                }
            }
            Probe::Other(text) => {
                let text = self.redact(&name, &text);
                self.todo(format!("{name}: healthcheck `{text}` not translated: add health = {{ cmd = \"…\" }} (or http/tcp) if readiness matters; without it binky waits for the port"));
            }
        }

        // restart
        if let Some(r) = def.get("restart").and_then(scalar) {
            if matches!(r.as_str(), "always" | "unless-stopped") {
                out.push_str("restart = \"always\"\n");
            }
        }

        // depends_on
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

        // env_file
        let env_files: Vec<String> = string_list_env_file(&def)
            .iter()
            .map(|f| self.interpolate(f))
            .map(|f| rebase(&f, workdir.as_deref()))
            .collect();
        if !env_files.is_empty() {
            out.push_str(&format!("env_file = {}\n", toml_list(&env_files)));
            notes.push(format!("env_file {}", env_files.join(", ")));
            let others: Vec<&String> = string_list_env_file(&def)
                .iter()
                .zip(&env_files)
                // `.env`, and files binky init read (their addresses are rewritten below),
                // need nothing more.
                .filter(|(orig, _)| {
                    normalise(orig) != Dir::Below(".env".into())
                        && !self.env_files.contains_key(*orig)
                })
                .map(|(_, f)| f)
                .collect();
            if !others.is_empty() {
                let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
                self.todo(format!("{name}: env_file {} is loaded as it is: an address of a compose service in it (such as db:5432) does not resolve on the host; override it in [services.{name}.env] with a token such as ${{db.url}}", list.join(", ")));
            }
        }

        // env
        let lines = self.env_lines(i);
        if !lines.is_empty() {
            out.push_str(&format!("\n[services.{name}.env]\n"));
            let mut mapped = Vec::new();
            for l in &lines {
                if let Some(c) = &l.comment {
                    out.push_str(&format!("# {}\n", one_line(c)));
                }
                if let Some(v) = &l.value {
                    out.push_str(&format!("{} = {}\n", toml_key(&l.key), q(v)));
                    if v.contains("${") && !v.contains("${self.") {
                        mapped.push(format!("{} → {v}", l.key));
                    }
                }
            }
            if !mapped.is_empty() {
                notes.push(format!("env {}", mapped.join(", ")));
            }
        }
        out.push('\n');
        self.other_keys(i, PROCESS_KEYS);
        self.mapped
            .push(format!("{name}: process; {}", notes.join("; ")));
    }

    fn env_lines(&mut self, i: usize) -> Vec<EnvLine> {
        let def = self.svcs[i].def.clone();
        let entries = env_entries(&def);
        // PostgreSQL's address in parts: `DB_HOST: db` makes DB_PORT, DB_USER, DB_PASSWORD
        // and DB_NAME the slice's too.
        let mut families: Vec<(String, String)> = Vec::new();
        for (k, v) in &entries {
            let Some(v) = v else { continue };
            let upper = k.to_ascii_uppercase();
            let Some(prefix) = upper.strip_suffix("HOST") else {
                continue;
            };
            if prefix.trim_end_matches('_').is_empty() {
                continue;
            }
            let v = self.interpolate(v);
            if let Some(&j) = self.alias.get(&v.trim().to_ascii_lowercase()) {
                if self.svcs[j].kind == Kind::Adapter("postgres") {
                    families.push((
                        prefix.trim_end_matches('_').to_owned(),
                        self.svcs[j].name.clone(),
                    ));
                }
            }
        }
        let mut lines = Vec::new();
        let keys: BTreeSet<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        for (k, raw) in entries {
            let Some(raw) = raw else {
                lines.push(EnvLine {
                    key: k.clone(),
                    value: None,
                    comment: Some(format!("{k}: inherited from the environment of `binky up`")),
                });
                continue;
            };
            if let Some(v) = family_member(&k, &families) {
                lines.push(EnvLine {
                    key: k,
                    value: Some(v),
                    comment: None,
                });
                continue;
            }
            let v = self.interpolate(&raw);
            let v = self.map_addresses(i, Some(&k), &v);
            let secret = (secret_name(&k) && !literal_part(&v).trim().is_empty())
                || looks_secret(&v)
                || self.secrets.iter().any(|(s, _)| v.contains(s.as_str()));
            if secret {
                let var = single_reference(&raw).unwrap_or_else(|| k.clone());
                let from_dotenv = if self.vars.contains_key(&var) {
                    " (.env has it)"
                } else {
                    ""
                };
                self.reason(
                    &var,
                    format!("a credential: not copied into binky.toml{from_dotenv}"),
                );
                lines.push(EnvLine {
                    value: Some(format!("${{env.{var}}}")),
                    comment: Some(format!("{k} looked like a credential: not copied; set {var} in the environment of `binky up` (or an env_file)")),
                    key: k,
                });
                continue;
            }
            // `JWT_SECRET: ${JWT_SECRET}` is a reference already: say what to set.
            let comment = env_reference(&v)
                .filter(|_| secret_name(&k))
                .map(|var| {
                    format!(
                        "{k} is a credential: set {var} in the environment of `binky up` (or an env_file){}",
                        if self.vars.contains_key(var) { "; .env has it" } else { "" }
                    )
                });
            let anywhere = k.to_ascii_uppercase().contains("PORT");
            let v = self.self_ports(i, &v, anywhere);
            if let Some(line) = allowed_hosts(&k, &v, "compose") {
                lines.push(line);
                continue;
            }
            lines.push(EnvLine {
                key: k,
                value: Some(v),
                comment,
            });
        }
        // compose hands `.env` (or another env_file) to the service: its addresses of
        // compose services are pointed at binky's (`REDIS_URL=redis://redis:6379/0`), the rest
        // binky loads from the file as it is.
        let mut from_files: Vec<(String, String, String)> = Vec::new();
        if self.loads_dotenv(i) {
            for (k, v) in self.dotenv.clone() {
                from_files.push((".env".into(), k, v));
            }
        }
        for f in string_list_env_file(&def) {
            if normalise(&f) == Dir::Below(".env".into()) {
                continue;
            }
            if let Some(text) = self.env_files.get(&f) {
                for (k, v) in binky_controllers::env::parse_dotenv(text) {
                    from_files.push((f.clone(), k, v));
                }
            }
        }
        // PostgreSQL's address in parts in a file (`POSTGRES_HOST=postgres`).
        let mut file_families: Vec<(String, String)> = Vec::new();
        for (_, k, v) in &from_files {
            let upper = k.to_ascii_uppercase();
            if let Some(prefix) = upper.strip_suffix("HOST") {
                let prefix = prefix.trim_end_matches('_');
                if let Some(&j) = self.alias.get(&v.trim().to_ascii_lowercase()) {
                    if !prefix.is_empty() && self.svcs[j].kind == Kind::Adapter("postgres") {
                        file_families.push((prefix.to_owned(), self.svcs[j].name.clone()));
                    }
                }
            }
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (file, k, val) in from_files {
            if keys.contains(&k) || !seen.insert(k.clone()) {
                continue;
            }
            if let Some(v) = family_member(&k, &file_families) {
                lines.push(EnvLine {
                    comment: Some(format!(
                        "{k}: {file} points at a compose service; this overrides it"
                    )),
                    key: k,
                    value: Some(v),
                });
                continue;
            }
            if let Some(line) = allowed_hosts(&k, &val, &file) {
                lines.push(line);
                continue;
            }
            let v = self.map_addresses(i, Some(&k), &val);
            if v != val
                && !looks_secret(&v)
                && !self.secrets.iter().any(|(s, _)| v.contains(s.as_str()))
            {
                lines.push(EnvLine {
                    comment: Some(format!(
                        "{k}: {file} points at a compose service; this overrides it"
                    )),
                    key: k,
                    value: Some(v),
                });
            }
        }
        lines
    }

    /// Service keys nobody handled: one TODO each (with advice where there is some).
    fn other_keys(&mut self, i: usize, handled: &[&str]) {
        let name = self.svcs[i].name.clone();
        let def = self.svcs[i].def.clone();
        let kind = self.svcs[i].kind;
        let mut generic = Vec::new();
        for key in def.keys().filter_map(scalar) {
            if handled.contains(&key.as_str()) || key.starts_with("x-") {
                continue;
            }
            match key.as_str() {
                "volumes" => {
                    if kind == Kind::Process {
                        let list: Vec<String> = volumes(&def)
                            .into_iter()
                            .map(|(s, d)| if s.is_empty() { d } else { format!("{s}:{d}") })
                            .collect();
                        let list = self.redact(&name, &list.join(", "));
                        self.todo(format!("{name}: volumes {list} not carried: binky runs {name} on the host, in the world's worktree"));
                    }
                }
                "profiles" => {
                    let p = string_list(def.get("profiles")).join(", ");
                    self.todo(format!("{name}: profiles {p}: binky starts every service; put it in a [groups] entry and use `binky up NAME --group G` to start a subset"));
                }
                "deploy" => self.todo(format!("{name}: deploy not carried: binky runs one instance (`limits` is not enforced yet)")),
                "extends" => self.todo(format!("{name}: extends not resolved: copy what it inherits into [services.{name}]")),
                "entrypoint" => self.todo(format!("{name}: entrypoint not carried: if what it does matters on the host, put it in front of cmd")),
                "secrets" | "configs" => self.todo(format!("{name}: {key} not carried: hand them over through the environment of `binky up` or an env_file")),
                "networks" | "network_mode" => {}
                _ => generic.push(key),
            }
        }
        if !generic.is_empty() {
            self.todo(format!(
                "{name}: {} not carried (container settings binky has no equivalent for)",
                generic.join(", ")
            ));
        }
    }

    fn top_level(&mut self, root: &Mapping) {
        let mut networks = self.uses_networks;
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
                "volumes" => self.todo(format!("named volumes {} not carried: each world keeps its data in its own slice and runs its processes in its worktree", names.join(", "))),
                "networks" => networks = true,
                "secrets" | "configs" => self.todo(format!("{k} {} not carried: hand them over through the environment of `binky up` or an env_file", names.join(", "))),
                "include" => self.todo(format!("include {} not read: run binky init where those services are, or add them by hand", names.join(", "))),
                _ => self.todo(format!("top-level `{k}` not carried")),
            }
        }
        if networks {
            self.todo("networks not carried: a world's services reach each other on localhost, through tokens such as ${api.url}");
        }
    }

    fn finish(mut self, body: &str) -> Generated {
        let mut head = String::new();
        let file = self
            .file
            .rsplit('/')
            .next()
            .unwrap_or(&self.file)
            .to_owned();
        head.push_str(&format!(
            "# binky.toml, written by `binky init` from {}{}.\n",
            file,
            if self.dotenv.is_empty() {
                ""
            } else {
                " and .env"
            }
        ));
        head.push_str("# A starting point, not a conversion: read it, settle the TODOs, then `binky up NAME`.\n");
        head.push_str("# No credential was copied: they are ${env.NAME} references, read from the environment\n# of `binky up` (or an env_file).\n");
        if !self.to_decide.is_empty() {
            head.push_str("#\n# To decide:\n");
            for t in &self.to_decide {
                head.push_str(&format!("# TODO: {t}\n"));
            }
        }
        let mut text = head.clone();
        let project_part = format!("\n[project]\nname = {}\n\n{}", q(&self.project), body);
        text.push_str(&project_part);

        // Every `${env.NAME}` the file reads (comments read nothing).
        let mut names: Vec<String> = Vec::new();
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
                    names.push(name);
                }
                rest = &after[n..];
            }
        }
        let to_set: Vec<(String, String)> = names
            .into_iter()
            .map(|n| {
                let why = self
                    .reasons
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| "read by the services".to_owned());
                (n, why)
            })
            .collect();
        if !to_set.is_empty() {
            let list: Vec<&str> = to_set.iter().map(|(n, _)| n.as_str()).collect();
            let set_line = format!("#\n# Set before `binky up`: {}\n", list.join(", "));
            let at = head.len();
            text.insert_str(at, &set_line);
        }

        // The last line of defence: a credential seen anywhere never leaves.
        let secrets = std::mem::take(&mut self.secrets);
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
        for s in &self.svcs {
            if let Kind::Adapter(a) = s.kind {
                if !adapters.iter().any(|x| x == a) {
                    adapters.push(a.to_owned());
                }
            }
        }
        Generated {
            toml: scrub(&text),
            mapped: self.mapped.iter().map(|m| scrub(m)).collect(),
            to_decide: self.to_decide.iter().map(|m| scrub(m)).collect(),
            to_set: to_set.into_iter().map(|(n, w)| (n, scrub(&w))).collect(),
            adapters,
        }
    }
}

/// Service keys [`Init::render_process`] maps or that mean nothing on the host.
const PROCESS_KEYS: &[&str] = &[
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
    "init",
    "labels",
    "links",
    "logging",
    "platform",
    "ports",
    "pull_policy",
    "restart",
    "stdin_open",
    "stop_grace_period",
    "stop_signal",
    "tty",
    "working_dir",
];

/// Service keys of an adapter service that a slice makes moot (or that
/// [`Init::render_adapter`] reports itself).
const ADAPTER_KEYS: &[&str] = &[
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
    "volumes",
];

/// `env_file:` as a string, a list of strings, or a list of `{ path, required }`.
fn string_list_env_file(def: &Mapping) -> Vec<String> {
    match def.get("env_file") {
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(|v| match v {
                Value::Mapping(m) => m.get("path").and_then(scalar),
                v => scalar(v),
            })
            .collect(),
        Some(v) => scalar(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// A framework's list of the hosts it answers (Django's `ALLOWED_HOSTS`, as
/// `DJANGO_ALLOWED_HOSTS` or `ALLOWED_HOSTS`, comma-separated) with binky's proxy hosts
/// (`web.<world>.<project>.localhost`) added, or `None` for any other variable.
fn allowed_hosts(key: &str, value: &str, from: &str) -> Option<EnvLine> {
    let k = key.to_ascii_uppercase();
    if !(k == "ALLOWED_HOSTS" || k.ends_with("_ALLOWED_HOSTS")) {
        return None;
    }
    let v = value.trim();
    if v == "*" || v.split(',').any(|h| h.trim() == ".localhost") {
        return None;
    }
    let joined = if v.is_empty() {
        ".localhost,127.0.0.1".to_owned()
    } else {
        format!("{v},.localhost")
    };
    Some(EnvLine {
        key: key.to_owned(),
        value: Some(joined),
        comment: Some(format!(
            "{key}: as {from} has it, and .localhost: the proxy sends Host: <service>.<world>.<project>.localhost"
        )),
    })
}

/// `${i}`-matching brace in `s` (which starts just after a `${`).
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The variable when `raw` is exactly one compose reference (`${VAR}`, `${VAR:-x}`, `$VAR`).
fn single_reference(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let inner = if let Some(b) = raw.strip_prefix("${") {
        let end = matching_brace(b)?;
        if end + 1 != b.len() {
            return None;
        }
        &b[..end]
    } else {
        raw.strip_prefix('$')?
    };
    let n = inner
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let rest = &inner[n..];
    let name = &inner[..n];
    let ok = !name.is_empty()
        && (rest.is_empty() || (raw.starts_with("${") && rest.starts_with([':', '-', '?', '+'])));
    ok.then(|| name.to_owned())
}

/// `NAME` when `v` is exactly `${env.NAME}`.
fn env_reference(v: &str) -> Option<&str> {
    let name = v.strip_prefix("${env.")?.strip_suffix('}')?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then_some(name)
}

/// `DB_PORT` of the `DB` family of a PostgreSQL slice `db` → `${db.port}`.
fn family_member(key: &str, families: &[(String, String)]) -> Option<String> {
    let upper = key.to_ascii_uppercase();
    for (prefix, target) in families {
        let Some(suffix) = upper.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let field = match suffix.trim_start_matches('_') {
            "HOST" => "host",
            "PORT" => "port",
            "USER" | "USERNAME" => "user",
            "PASSWORD" | "PASS" | "PWD" => "password",
            "NAME" | "DB" | "DATABASE" | "DBNAME" => "database",
            _ => continue,
        };
        return Some(format!("${{{target}.{field}}}"));
    }
    None
}

/// `host:port` items of a whole value (`api:8000`, `kafka:9092,kafka2:9092`, `db`); empty
/// when the value is anything else.
fn host_ports(text: &str) -> Vec<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() || text.contains("://") {
        return Vec::new();
    }
    let mut out = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (host, port) = match item.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(p) => (h, Some(p)),
                Err(_) => return Vec::new(),
            },
            None => (item, None),
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Vec::new();
        }
        out.push((host.to_ascii_lowercase(), port));
    }
    out
}

/// A binky service name for a compose one: letters, digits, `_` and `-` (a `.` would
/// break `${svc.port}`), not a token word, not taken.
fn service_name(raw: &str, taken: &BTreeSet<String>) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s = "svc".into();
    }
    if matches!(s.as_str(), "self" | "env" | "worktree") {
        s.push_str("_svc");
    }
    let base = s.clone();
    let mut n = 2;
    while taken.contains(&s) {
        s = format!("{base}_{n}");
        n += 1;
    }
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use binky_controllers::admission::{check_spec, Verdict};

    use super::*;

    fn generate_with(compose: &str, dotenv: Option<&str>) -> Generated {
        generate(compose, "docker-compose.yml", dotenv, "shop")
            .unwrap_or_else(|e| panic!("{e}\n{compose}"))
    }

    /// binky's own parser and admission accept it; the TOML as a table.
    fn valid(g: &Generated) -> toml::Table {
        let loaded = crate::config::parse(&g.toml, Path::new("binky.toml"))
            .unwrap_or_else(|e| panic!("{e}\n---\n{}", g.toml));
        assert_eq!(check_spec(&loaded.spec, None), Verdict::Admit, "{}", g.toml);
        toml::from_str(&g.toml).unwrap()
    }

    fn svc<'t>(t: &'t toml::Table, name: &str) -> &'t toml::Table {
        t["services"][name]
            .as_table()
            .unwrap_or_else(|| panic!("no service {name}"))
    }

    fn string<'t>(t: &'t toml::Table, path: &[&str]) -> &'t str {
        let mut v = &t[path[0]];
        for k in &path[1..] {
            v = &v[*k];
        }
        v.as_str()
            .unwrap_or_else(|| panic!("{path:?} is not a string: {v:?}"))
    }

    fn absent(g: &Generated, secret: &str) {
        assert!(!g.toml.contains(secret), "{secret} in:\n{}", g.toml);
        let notes = format!("{:?}{:?}{:?}", g.mapped, g.to_decide, g.to_set);
        assert!(!notes.contains(secret), "{secret} in the notes: {notes}");
    }

    #[test]
    fn every_image_maps_to_a_built_in_adapter() {
        // init writes no `binky-adapter-<name>` note: an image mapped to an adapter binky
        // does not ship would need one.
        let registry = crate::adapters::Registry::default();
        for (_, adapter) in IMAGE_ADAPTERS {
            assert!(registry.is_builtin(adapter), "{adapter} is not built in");
        }
    }

    #[test]
    fn database_and_broker_images_become_adapter_services() {
        for (image, adapter) in [
            ("postgres:16-alpine", "postgres"),
            ("postgis/postgis:16-3.4", "postgres"),
            ("timescale/timescaledb:latest-pg16", "postgres"),
            ("pgvector/pgvector:pg16", "postgres"),
            ("docker.io/library/postgres@sha256:abc", "postgres"),
            ("mysql:8", "mysql"),
            ("mariadb:11", "mariadb"),
            ("percona:8", "percona"),
            ("redis:7", "redis"),
            ("redis/redis-stack-server", "redis"),
            ("valkey/valkey:8", "valkey"),
            ("eqalpha/keydb", "redis"),
            ("mongo:7", "mongodb"),
            ("bitnami/mongodb", "mongodb"),
            ("clickhouse/clickhouse-server:24", "clickhouse"),
            ("minio/minio", "minio"),
            ("rabbitmq:3-management", "rabbitmq"),
            ("confluentinc/cp-kafka:7.6.0", "kafka"),
            ("redpandadata/redpanda", "redpanda"),
            ("qdrant/qdrant", "qdrant"),
            (
                "docker.elastic.co/elasticsearch/elasticsearch:8.13.0",
                "elasticsearch",
            ),
            ("opensearchproject/opensearch:2", "opensearch"),
        ] {
            assert_eq!(adapter_for_image(image), Some(adapter), "{image}");
        }
        for tool in [
            "rediscommander/redis-commander",
            "redis/redisinsight",
            "provectuslabs/kafka-ui",
            "mongo-express",
            "dpage/pgadmin4",
            "prometheuscommunity/postgres-exporter",
            "opensearchproject/opensearch-dashboards",
            "minio/mc",
            "nginx:alpine",
            "mailhog/mailhog",
        ] {
            assert_eq!(adapter_for_image(tool), None, "{tool}");
        }
    }

    #[test]
    fn adapter_services_read_their_admin_url_from_the_environment() {
        let g = generate_with(
            r#"
services:
  db:
    image: postgres:16
    environment: { POSTGRES_PASSWORD: hunter2-db-Pw }
    ports: ["5433:5432"]
  cache: { image: "valkey/valkey:8" }
"#,
            None,
        );
        let t = valid(&g);
        crate::apply::validate(&g.toml, Path::new("binky.toml"), None)
            .unwrap_or_else(|e| panic!("{e}\n{}", g.toml));
        assert_eq!(string(&t, &["services", "db", "adapter"]), "postgres");
        assert_eq!(
            string(&t, &["services", "db", "admin_url"]),
            "${env.DB_ADMIN_URL}"
        );
        assert_eq!(string(&t, &["services", "cache", "adapter"]), "valkey");
        assert_eq!(
            string(&t, &["services", "cache", "admin_url"]),
            "${env.CACHE_ADMIN_URL}"
        );
        assert!(g.toml.contains("binky can also run PostgreSQL itself"));
        assert!(g.toml.contains("binky can also run Redis itself"));
        // The container's settings are not the slice's.
        absent(&g, "hunter2-db-Pw");
        assert!(!svc(&t, "db").contains_key("env"));
        let (_, why) = g.to_set.iter().find(|(n, _)| n == "DB_ADMIN_URL").unwrap();
        assert!(why.contains("127.0.0.1:5433"), "{why}");
        assert_eq!(g.adapters, ["postgres", "valkey"]);
    }

    #[test]
    fn adapters_without_a_managed_server_say_they_need_an_admin_url() {
        let g = generate_with(
            "services:\n  mysql: { image: 'mysql:8' }\n  search: { image: 'opensearchproject/opensearch:2' }\n",
            None,
        );
        let t = valid(&g);
        assert_eq!(string(&t, &["services", "mysql", "adapter"]), "mysql");
        assert_eq!(
            string(&t, &["services", "search", "admin_url"]),
            "${env.SEARCH_ADMIN_URL}"
        );
        // Both are built in: no external adapter is asked for.
        assert!(!g.toml.contains("binky-adapter-"), "{}", g.toml);
        assert!(
            g.toml.contains("# binky can also run MariaDB itself"),
            "{}",
            g.toml
        );
        assert!(g.toml.contains(
            "# binky runs only PostgreSQL, Redis and MariaDB itself when admin_url is left out."
        ));
    }

    #[test]
    fn a_command_string_or_list_becomes_cmd() {
        let g = generate_with(
            r#"
services:
  api: { build: ., command: "npm run start -- --verbose" }
  job:
    build: .
    command: ["python", "-c", "print('hi there')", "--flag=$$HOME"]
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(
            string(&t, &["services", "api", "cmd"]),
            "npm run start -- --verbose"
        );
        assert_eq!(
            string(&t, &["services", "job", "cmd"]),
            r#"python -c 'print('\''hi there'\'')' '--flag=$HOME'"#
        );
    }

    #[test]
    fn a_reverse_proxy_is_left_out_and_image_flags_or_paths_never_become_a_cmd() {
        let compose = r#"
services:
  traefik:
    image: traefik:v3.1
    command: --api.insecure=true --providers.docker=true --entrypoints.web.address=:80
    ports: ["80:80", "8080:8080"]
  django:
    build: { context: ., dockerfile: ./compose/local/django/Dockerfile }
    command: /start
    ports: ["8000:8000"]
    depends_on: [traefik]
    environment:
      SENTRY_DSN: ${SENTRY_DSN:-}
  celeryworker:
    build: .
    command: /start-celeryworker
"#;
        let g = generate_with(compose, None);
        let t = valid(&g);
        let services = t["services"].as_table().unwrap();
        assert!(!services.contains_key("traefik"), "{}", g.toml);
        assert!(
            g.toml
                .contains("# traefik (Traefik, a reverse proxy) is left out"),
            "{}",
            g.toml
        );
        assert!(g.mapped.iter().any(|m| m.starts_with("traefik: left out")));
        // Nothing depends on what is left out.
        assert!(
            t["services"]["django"].get("depends_on").is_none(),
            "{}",
            g.toml
        );
        for svc in ["django", "celeryworker"] {
            assert!(
                string(&t, &["services", svc, "cmd"]).starts_with("TODO: the command that starts"),
                "{}",
                g.toml
            );
        }
        assert!(
            g.toml
                .contains("compose runs /start, a path inside its image"),
            "{}",
            g.toml
        );
        // An optional credential stays optional.
        assert_eq!(
            string(&t, &["services", "django", "env", "SENTRY_DSN"]),
            "${env.SENTRY_DSN:-}"
        );
        let findings = crate::check::check(&g.toml, std::path::Path::new("binky.toml"));
        let todos: Vec<&str> = findings
            .iter()
            .filter(|f| f.code == "todo")
            .map(|f| f.key.as_str())
            .collect();
        assert_eq!(
            todos,
            vec!["services.celeryworker.cmd", "services.django.cmd"]
        );
    }

    #[test]
    fn a_service_compose_only_builds_gets_a_placeholder_that_fails_and_a_todo() {
        let g = generate_with(
            "services:\n  web:\n    build: { context: ./web }\n    ports: ['3000:3000']\n",
            None,
        );
        let t = valid(&g);
        assert_eq!(
            string(&t, &["services", "web", "cmd"]),
            "TODO: the command that starts web on the host"
        );
        assert!(g.toml.contains("# TODO: the command that starts web"));
        // binky check (and so binky up) refuses it, naming the service.
        let findings = crate::check::check(&g.toml, std::path::Path::new("binky.toml"));
        assert!(
            findings
                .iter()
                .any(|f| f.code == "todo" && f.key == "services.web.cmd"),
            "{findings:?}"
        );
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.starts_with("web: set `cmd`") && l.contains("${self.port}")));
        assert!(g
            .toml
            .lines()
            .any(|l| l.starts_with("# TODO: web: set `cmd`")));
    }

    #[test]
    fn an_http_port_becomes_a_url_and_other_ports_become_labels() {
        let g = generate_with(
            r#"
services:
  web: { build: ., command: "serve -l 80", ports: ["8080:80"] }
  api: { build: ., command: "api --http 8000 --grpc 50051", ports: ["50051:50051", "8000:8000"] }
  metrics: { build: ., command: "exporter --listen :9100", expose: ["9100"] }
  dns: { build: ., command: "dnsd", ports: ["5353:53/udp"] }
  worker: { build: ., command: "work" }
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(svc(&t, "web")["url"].as_bool(), Some(true));
        assert!(!svc(&t, "web").contains_key("ports"));
        assert_eq!(
            string(&t, &["services", "web", "cmd"]),
            "serve -l ${self.port}"
        );
        assert_eq!(string(&t, &["services", "api", "url", "http"]), "api");
        let ports: Vec<&str> = svc(&t, "api")["ports"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(ports, ["http", "grpc"]);
        assert_eq!(
            string(&t, &["services", "api", "cmd"]),
            "api --http ${self.port} --grpc ${self.grpc}"
        );
        assert!(!svc(&t, "metrics").contains_key("url"));
        assert_eq!(svc(&t, "metrics")["ports"][0].as_str(), Some("p9100"));
        assert_eq!(
            string(&t, &["services", "metrics", "cmd"]),
            "exporter --listen :${self.port}"
        );
        assert!(!svc(&t, "worker").contains_key("ports"));
        assert!(!svc(&t, "dns").contains_key("ports"));
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.starts_with("dns: ports 5353:53/udp")));
    }

    #[test]
    fn the_container_port_in_command_and_environment_becomes_self_port() {
        let g = generate_with(
            r#"
services:
  api:
    build: .
    command: gunicorn -b 0.0.0.0:8000 --timeout 80000 app:app
    ports: ["8000"]
    environment:
      PORT: 8000
      PUBLIC_URL: http://localhost:8000/app
      TIMEOUT_MS: 8000
      VERSION: "1.8000"
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(
            string(&t, &["services", "api", "cmd"]),
            "gunicorn -b 0.0.0.0:${self.port} --timeout 80000 app:app"
        );
        let env = |k: &str| string(&t, &["services", "api", "env", k]).to_owned();
        assert_eq!(env("PORT"), "${self.port}");
        assert_eq!(env("PUBLIC_URL"), "http://localhost:${self.port}/app");
        assert_eq!(env("TIMEOUT_MS"), "8000");
        assert_eq!(env("VERSION"), "1.8000");
    }

    #[test]
    fn depends_on_keeps_only_services_in_the_file_in_either_form() {
        let g = generate_with(
            r#"
services:
  db: { image: postgres }
  mail: { image: mailhog/mailhog }
  api:
    build: .
    depends_on:
      db: { condition: service_healthy }
      mail: { condition: service_started }
  web: { build: ., depends_on: [api, mail, db] }
"#,
            None,
        );
        let t = valid(&g);
        let deps = |s: &str| -> Vec<String> {
            svc(&t, s)["depends_on"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(deps("api"), ["db"]);
        assert_eq!(deps("web"), ["api", "db"]);
        assert!(!t["services"].as_table().unwrap().contains_key("mail"));
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.starts_with("mail: runs image mailhog/mailhog")));
        assert!(g
            .mapped
            .iter()
            .any(|l| l.contains("depends_on mail dropped")));
    }

    #[test]
    fn build_context_and_a_mounted_working_dir_become_workdir() {
        let g = generate_with(
            r#"
services:
  api:
    build: { context: ./services/api, dockerfile: Dockerfile.dev }
    command: make run
    env_file: [.env, ./services/api/.env.local, { path: ./shared.env, required: false }]
  web:
    image: node:20
    working_dir: /app/site
    volumes: ["./frontend:/app", "node_modules:/app/node_modules"]
    command: npm run dev
  root: { build: ., command: make }
  outside: { build: ../shared, command: make }
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(string(&t, &["services", "api", "workdir"]), "services/api");
        let files: Vec<&str> = svc(&t, "api")["env_file"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(files, ["../../.env", ".env.local", "../../shared.env"]);
        assert_eq!(string(&t, &["services", "web", "workdir"]), "frontend/site");
        assert!(g.mapped.iter().any(|l| l.contains("not in node:20")));
        assert!(!svc(&t, "root").contains_key("workdir"));
        assert!(!svc(&t, "outside").contains_key("workdir"));
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.starts_with("outside: its code is in ../shared")));
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.starts_with("web: volumes ./frontend:/app")));
    }

    #[test]
    fn addresses_of_compose_services_become_tokens() {
        let g = generate_with(
            r#"
services:
  db:
    image: postgres:16
  cache:
    image: redis:7
  api:
    build: ./api
    command: ./serve --db postgres://app:app@db:5432/app
    expose: [8000]
    environment:
      DATABASE_URL: postgres://app:pw-for-db-1@db:5432/app
      REDIS_URL: redis://cache:6379/0
      REDIS_HOST: cache
  web:
    build: ./web
    command: npm start
    environment:
      API_URL: http://api:8000/v1
      API_WS: ws://api:8000/ws
      API_ADDR: api:8000
      API_HOST: api
      ADMIN_URL: http://admin:9000
  ingest:
    build: .
    command: ingest
    environment:
      PGHOST: db
      PGPORT: "5432"
      PGUSER: app
      PGPASSWORD: pw-for-db-1
      PGDATABASE: app
  admin: { build: ., command: "admin --port 9000" }
"#,
            None,
        );
        let t = valid(&g);
        crate::apply::validate(&g.toml, Path::new("binky.toml"), None).unwrap();
        let env = |s: &str, k: &str| string(&t, &["services", s, "env", k]).to_owned();
        assert_eq!(env("api", "DATABASE_URL"), "${db.url}");
        assert_eq!(env("api", "REDIS_URL"), "${cache.url}");
        assert_eq!(env("api", "REDIS_HOST"), "cache");
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.starts_with("api: env REDIS_HOST") && l.contains("${cache.url}")));
        assert_eq!(
            string(&t, &["services", "api", "cmd"]),
            "./serve --db ${db.url}"
        );
        assert_eq!(env("web", "API_URL"), "${api.url}/v1");
        assert_eq!(env("web", "API_WS"), "ws://localhost:${api.port}/ws");
        assert_eq!(env("web", "API_ADDR"), "localhost:${api.port}");
        assert_eq!(env("web", "API_HOST"), "localhost");
        // Reached on a port it did not publish: the port is its, and HTTP makes it a URL.
        assert_eq!(svc(&t, "admin")["url"].as_bool(), Some(true));
        assert_eq!(env("web", "ADMIN_URL"), "${admin.url}");
        assert_eq!(
            string(&t, &["services", "admin", "cmd"]),
            "admin --port ${self.port}"
        );
        for (k, field) in [
            ("PGHOST", "host"),
            ("PGPORT", "port"),
            ("PGUSER", "user"),
            ("PGPASSWORD", "password"),
            ("PGDATABASE", "database"),
        ] {
            assert_eq!(env("ingest", k), format!("${{db.{field}}}"));
        }
        absent(&g, "pw-for-db-1");
    }

    #[test]
    fn credentials_are_never_written() {
        // Token shapes are made at run time, so that no scanner mistakes this file for a leak.
        let github = format!("ghp_{}", "aB3dE6gH9k".repeat(4));
        let stripe = format!("sk_live_{}", "Zq8Wm2Xr".repeat(3));
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
            "zdWIiOiIxMjM0", "dozjgNryP4J3jVmNHl0w5N"
        );
        let aws = format!("AKIA{}", "QWERTYUIOP123456");
        let compose = format!(
            r#"
services:
  db:
    image: postgres
    environment:
      POSTGRES_PASSWORD: db-Root-pw-777
  api:
    build: .
    command: ./run --admin-password db-Root-pw-777 --token {github} --dsn postgres://ro:Ext3rnal-pw@warehouse.example.com/dw --api-key=Lit3ral-key-1
    environment:
      SECRET_KEY_BASE: a-long-rails-secret-value
      GH: {github}
      PAYMENTS: {stripe}
      AUTH_HEADER: "Bearer {jwt}"
      AWS_ACCESS_KEY_ID: {aws}
      WAREHOUSE_URL: postgres://ro:Ext3rnal-pw@warehouse.example.com/dw
      SMTP_PASS: mail-Pw-5150
      API_TOKEN: ${{API_TOKEN}}
      SESSION_SECRET: ${{SESSION_SECRET:-fallback-Session-9}}
      COPY: db-Root-pw-777
      LOG_LEVEL: info
    healthcheck:
      test: ["CMD-SHELL", "REDIS_PASS=hc-Only-pw-3 check --password mail-Pw-5150"]
"#
        );
        let dotenv = "API_TOKEN=env-Token-31337\nSESSION_SECRET=dotenv-Session-42\n";
        let g = generate_with(&compose, Some(dotenv));
        let t = valid(&g);
        for secret in [
            "db-Root-pw-777",
            github.as_str(),
            stripe.as_str(),
            jwt.as_str(),
            aws.as_str(),
            "Ext3rnal-pw",
            "a-long-rails-secret-value",
            "mail-Pw-5150",
            "env-Token-31337",
            "fallback-Session-9",
            "dotenv-Session-42",
            "Lit3ral-key-1",
            "hc-Only-pw-3",
        ] {
            absent(&g, secret);
        }
        let env = |k: &str| string(&t, &["services", "api", "env", k]).to_owned();
        for (k, var) in [
            ("SECRET_KEY_BASE", "SECRET_KEY_BASE"),
            ("GH", "GH"),
            ("PAYMENTS", "PAYMENTS"),
            ("AUTH_HEADER", "AUTH_HEADER"),
            ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
            ("WAREHOUSE_URL", "WAREHOUSE_URL"),
            ("SMTP_PASS", "SMTP_PASS"),
            ("API_TOKEN", "API_TOKEN"),
            ("SESSION_SECRET", "SESSION_SECRET"),
            ("COPY", "COPY"),
        ] {
            assert_eq!(env(k), format!("${{env.{var}}}"), "{k}");
            assert!(
                g.to_set.iter().any(|(n, _)| n == var),
                "{var} not in to_set"
            );
        }
        assert_eq!(env("LOG_LEVEL"), "info");
        let cmd = string(&t, &["services", "api", "cmd"]);
        assert!(
            cmd.starts_with("./run --admin-password ${env.POSTGRES_PASSWORD} --token ${env."),
            "{cmd}"
        );
        assert!(g.toml.contains("looked like a credential"));
    }

    #[test]
    fn credential_values_that_are_also_names_do_not_break_the_file() {
        let g = generate_with(
            r#"
services:
  rabbitmq:
    image: rabbitmq:3
    environment: { RABBITMQ_DEFAULT_PASS: rabbitmq }
  db:
    image: postgres
    environment: { POSTGRES_PASSWORD: shop }
  backup:
    build: .
    command: pg_dump --no-password --password-file /run/pw backup && sh -c "login --password 'Qu0ted-pw-1'"
    environment: { BACKUP_TOKEN: backup, AMQP: "amqp://u:p4ss-w0rd@rabbitmq:5672" }
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(string(&t, &["project", "name"]), "shop");
        assert_eq!(string(&t, &["services", "rabbitmq", "adapter"]), "rabbitmq");
        assert_eq!(
            string(&t, &["services", "backup", "cmd"]),
            "pg_dump --no-password --password-file /run/pw backup && sh -c \"login --password '${env.BACKUP_PASSWORD}'\""
        );
        absent(&g, "Qu0ted-pw-1");
        assert_eq!(
            string(&t, &["services", "backup", "env", "BACKUP_TOKEN"]),
            "${env.BACKUP_TOKEN}"
        );
        assert_eq!(
            string(&t, &["services", "backup", "env", "AMQP"]),
            "${rabbitmq.url}"
        );
        absent(&g, "p4ss-w0rd");
    }

    #[test]
    fn dotenv_values_are_understood_but_secrets_stay_references() {
        let g = generate_with(
            r#"
services:
  web:
    build: .
    command: next dev -p ${WEB_PORT:-3000}
    ports: ["${WEB_PORT:-3000}:${WEB_PORT:-3000}"]
    environment:
      APP_NAME: ${APP_NAME}
      REGION: ${REGION:-eu}
      FEATURE: ${FEATURE_FLAG}
      DATABASE_URL: postgres://app:${DB_PASSWORD}@db.internal:5432/app
"#,
            Some("WEB_PORT=4000\nAPP_NAME=shop\nDB_PASSWORD=dotenv-Db-pw-8\n"),
        );
        let t = valid(&g);
        assert_eq!(svc(&t, "web")["url"].as_bool(), Some(true));
        assert_eq!(
            string(&t, &["services", "web", "cmd"]),
            "next dev -p ${self.port}"
        );
        let env = |k: &str| string(&t, &["services", "web", "env", k]).to_owned();
        assert_eq!(env("APP_NAME"), "shop");
        assert_eq!(env("REGION"), "eu");
        assert_eq!(env("FEATURE"), "${env.FEATURE_FLAG}");
        assert_eq!(
            env("DATABASE_URL"),
            "postgres://app:${env.DB_PASSWORD}@db.internal:5432/app"
        );
        absent(&g, "dotenv-Db-pw-8");
        let reason = |n: &str| g.to_set.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert!(reason("FEATURE_FLAG").contains(".env does not set it"));
        assert!(reason("DB_PASSWORD").contains("credential"));
        assert!(g.toml.starts_with(
            "# binky.toml, written by `binky init` from docker-compose.yml and .env."
        ));
    }

    #[test]
    fn what_binky_cannot_map_is_listed_to_decide() {
        let g = generate_with(
            r#"
services:
  db:
    image: postgres
    volumes: [pgdata:/var/lib/postgresql/data, ./init.sql:/docker-entrypoint-initdb.d/init.sql]
    command: postgres -c max_connections=500
  api:
    build: .
    command: serve
    entrypoint: /entry.sh
    healthcheck: { test: ["CMD-SHELL", "pg_isready -h db"] }
    volumes: [./src:/app/src]
    networks: [back]
    profiles: [debug]
    deploy: { replicas: 3 }
    extends: { file: common.yml, service: base }
    secrets: [api_key]
    cap_add: [NET_ADMIN]
    privileged: true
volumes: { pgdata: {} }
networks: { back: {} }
secrets: { api_key: { file: ./api_key.txt } }
"#,
            None,
        );
        valid(&g);
        for start in [
            "db: ./init.sql is mounted into /docker-entrypoint-initdb.d/init.sql",
            "db: its `command`",
            "api: entrypoint not carried",
            "api: healthcheck `pg_isready -h db` not translated",
            "api: volumes ./src:/app/src not carried",
            "api: profiles debug",
            "api: deploy not carried",
            "api: extends not resolved",
            "api: secrets not carried",
            "api: cap_add, privileged not carried",
            "named volumes pgdata not carried",
            "secrets api_key not carried",
            "networks not carried",
        ] {
            assert!(
                g.to_decide.iter().any(|l| l.starts_with(start)),
                "no `{start}` in {:#?}",
                g.to_decide
            );
            assert!(
                g.toml.contains(&format!("# TODO: {start}")),
                "no TODO `{start}` at the top:\n{}",
                g.toml
            );
        }
        assert!(g
            .to_decide
            .iter()
            .any(|l| l.contains("psql \\\"$DATABASE_URL\\\"")));
    }

    #[test]
    fn a_curl_healthcheck_becomes_health() {
        let g = generate_with(
            r#"
services:
  api:
    build: .
    command: serve
    healthcheck:
      test: ["CMD", "curl", "-fsS", "http://localhost:8000/healthz"]
      interval: 5s
  web:
    build: .
    command: web
    ports: ["3000:3000"]
    healthcheck: { test: "wget -qO- http://127.0.0.1:3000/ || exit 1" }
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(
            string(&t, &["services", "api", "health"]),
            "http://localhost:${self.port}/healthz"
        );
        assert_eq!(svc(&t, "api")["url"].as_bool(), Some(true));
        assert_eq!(
            string(&t, &["services", "web", "health"]),
            "http://localhost:${self.port}/"
        );
    }

    #[test]
    fn restart_always_and_merge_keys_are_carried() {
        let g = generate_with(
            r#"
x-app: &app
  build: .
  restart: unless-stopped
  environment: { LOG_LEVEL: debug }
services:
  api:
    <<: *app
    command: serve
  once: { build: ., command: migrate, restart: "no" }
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(string(&t, &["services", "api", "restart"]), "always");
        assert_eq!(
            string(&t, &["services", "api", "env", "LOG_LEVEL"]),
            "debug"
        );
        assert!(!svc(&t, "once").contains_key("restart"));
    }

    #[test]
    fn service_names_binky_cannot_use_are_renamed() {
        let g = generate_with(
            r#"
services:
  my.db: { image: postgres }
  self: { build: ., command: run, depends_on: [my.db], ports: ["8000"] }
  web_ui: { build: ., command: ui, ports: ["3000"], environment: { API: "http://self:8000" } }
"#,
            None,
        );
        let t = valid(&g);
        assert_eq!(string(&t, &["services", "my_db", "adapter"]), "postgres");
        assert_eq!(svc(&t, "self_svc")["depends_on"][0].as_str(), Some("my_db"));
        // `web_ui` is no hostname label: the URL gets one.
        assert_eq!(string(&t, &["services", "web_ui", "url"]), "web-ui");
        assert_eq!(
            string(&t, &["services", "web_ui", "env", "API"]),
            "${self_svc.url}"
        );
        assert!(g
            .mapped
            .iter()
            .any(|l| l.starts_with("my_db (renamed from my.db)")));
    }

    #[test]
    fn a_dotenv_the_service_loads_has_its_compose_addresses_overridden() {
        let g = generate_with(
            "services:\n  db: { image: postgres }\n  api: { build: ., command: run, env_file: .env }\n",
            Some("DATABASE_URL=postgres://app:dotenv-Pw-99@db:5432/app\nDEBUG=1\n"),
        );
        let t = valid(&g);
        assert_eq!(
            string(&t, &["services", "api", "env", "DATABASE_URL"]),
            "${db.url}"
        );
        assert!(!svc(&t, "api")["env"]
            .as_table()
            .unwrap()
            .contains_key("DEBUG"));
        assert_eq!(svc(&t, "api")["env_file"][0].as_str(), Some(".env"));
        absent(&g, "dotenv-Pw-99");
    }

    #[test]
    fn project_name_is_the_directory_name_sanitised() {
        assert_eq!(project_name("shop"), "shop");
        assert_eq!(project_name("My Shop_v2.0"), "my-shop-v2-0");
        assert_eq!(project_name("--ünïcode--"), "n-code");
        assert_eq!(project_name("..."), "app");
        assert_eq!(project_name(&"x".repeat(80)).len(), 63);
        let g = generate(
            "services:\n  a: { build: ., command: a }\n",
            "compose.yaml",
            None,
            "Big App!",
        )
        .unwrap();
        assert_eq!(string(&valid(&g), &["project", "name"]), "big-app");
    }

    #[test]
    fn a_file_that_is_not_compose_is_refused_with_its_name() {
        for (text, says) in [
            ("services: [unclosed", "is not valid YAML"),
            ("", "it is empty"),
            ("- a\n- b\n", "its top level is not a mapping"),
            ("version: '3'\n", "it has no `services:`"),
            ("services: {}\n", "has no service"),
            ("services: [a, b]\n", "is not a mapping"),
        ] {
            let e = generate(text, "docker-compose.yml", None, "shop")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("docker-compose.yml "), "{e}");
            assert!(e.contains(says), "{e}");
            assert!(e.contains("fix:"), "{e}");
        }
    }

    #[test]
    fn urls_are_found_with_their_parts() {
        let hits = scan_urls("a postgres://u:${env.P}@db:5432/app?x=1, http://[::1]:80/ b");
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].host, "db");
        assert_eq!(hits[0].port, Some(5432));
        assert_eq!(hits[0].rest, "/app?x=1");
        assert_eq!(hits[1].host, "::1");
        assert!(url_password("postgres://u:${env.P}@db/app").is_none());
        assert!(url_password("redis://:pw12@cache").is_some());
        assert_eq!(rebase(".env", Some("a/b")), "../../.env");
        assert_eq!(rebase("./a/b/.env", Some("a/b")), ".env");
        assert_eq!(rebase("a/x.env", Some("a/b")), "../x.env");
    }
}
