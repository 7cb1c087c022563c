//! Reading compose values: scalars, lists, `environment`, `command`, volumes, paths,
//! `env_file`, references, `host:port` items, service names and env keys a browser reads.

use std::collections::BTreeSet;

use serde_yaml_ng::{Mapping, Value};

/// Which compose service: a handle into the plan's `PerService` tables, in compose order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(in crate::init) struct SvcId(pub(in crate::init) usize);

/// `dir/name`, or `name` at the top (`dir` `None`).
pub(in crate::init) fn path_in(dir: Option<&str>, name: &str) -> String {
    match dir {
        Some(d) if !d.is_empty() && d != "." => format!("{d}/{name}"),
        _ => name.to_owned(),
    }
}

/// A scalar as text (`8000`, `true`, `"x"`); `None` for null and collections.
pub(in crate::init) fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(t) => scalar(&t.value),
        _ => None,
    }
}

/// A string or a list of scalars, as a list.
pub(in crate::init) fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Sequence(items)) => items.iter().filter_map(scalar).collect(),
        Some(v) => scalar(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// `environment:` in its mapping or its `KEY=value` list form; `None` = passed through
/// from the environment compose runs in.
pub(in crate::init) fn env_entries(def: &Mapping) -> Vec<(String, Option<String>)> {
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
pub(in crate::init) enum Command {
    /// The string form (compose splits it like a shell; binky hands it to `sh -c`).
    Shell(String),
    /// The list form: one argument each.
    Words(Vec<String>),
}

pub(in crate::init) fn command_of(def: &Mapping) -> Option<Command> {
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
pub(in crate::init) fn volumes(def: &Mapping) -> Vec<(String, String)> {
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
pub(in crate::init) fn is_project_path(source: &str) -> bool {
    !source.is_empty()
        && !source.starts_with(['/', '~', '$'])
        && (source.starts_with('.') || source.contains('/'))
}

/// Where a relative path leads, from the project directory.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::init) enum Dir {
    /// The project directory itself.
    Here,
    /// A directory below it (`web`, `services/api`).
    Below(String),
    /// Outside it (`../shared`).
    Outside,
}

pub(in crate::init) fn normalise(path: &str) -> Dir {
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
pub(in crate::init) fn rebase(path: &str, workdir: Option<&str>) -> String {
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

/// `env_file:` as a string, a list of strings, or a list of `{ path, required }`.
pub(in crate::init) fn string_list_env_file(def: &Mapping) -> Vec<String> {
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

/// `${i}`-matching brace in `s` (which starts just after a `${`).
pub(in crate::init) fn matching_brace(s: &str) -> Option<usize> {
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
pub(in crate::init) fn single_reference(raw: &str) -> Option<String> {
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
pub(in crate::init) fn env_reference(v: &str) -> Option<&str> {
    let name = v.strip_prefix("${env.")?.strip_suffix('}')?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then_some(name)
}

/// The prefix of a key naming a host (`DB_HOST`, `POSTGRES_SERVER`, `EMAIL_HOSTNAME` →
/// `DB`, `POSTGRES`, `EMAIL`).
pub(in crate::init) fn host_key_prefix(key: &str) -> Option<String> {
    let upper = key.to_ascii_uppercase();
    let prefix = ["HOSTNAME", "HOST", "SERVER"]
        .iter()
        .find_map(|s| upper.strip_suffix(s))?;
    let prefix = prefix.trim_end_matches('_');
    (!prefix.is_empty()).then(|| prefix.to_owned())
}

/// The field a key of a host's family names (`DB_PORT` of family `DB` → `port`), and the
/// family's service (`families`: `(prefix, service)`).
pub(in crate::init) fn family_field(
    key: &str,
    families: &[(String, SvcId)],
) -> Option<(&'static str, SvcId)> {
    let upper = key.to_ascii_uppercase();
    for (prefix, target) in families {
        let Some(suffix) = upper.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let field = match suffix.trim_start_matches('_') {
            "HOST" | "HOSTNAME" | "SERVER" => "host",
            "PORT" => "port",
            "USER" | "USERNAME" => "user",
            "PASSWORD" | "PASS" | "PWD" => "password",
            "NAME" | "DB" | "DATABASE" | "DBNAME" => "database",
            _ => continue,
        };
        return Some((field, *target));
    }
    None
}

/// `host:port` items of a whole value (`api:8000`, `kafka:9092,kafka2:9092`, `db`); empty
/// when the value is anything else.
pub(in crate::init) fn host_ports(text: &str) -> Vec<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() || text.contains("://") {
        return Vec::new();
    }
    let mut out = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (host, port) = match binky_controllers::url::host_port(item) {
            Some((h, None)) => (h, None),
            Some((h, Some(p))) => match p.parse::<u16>() {
                Ok(p) => (h, Some(p)),
                Err(_) => return Vec::new(),
            },
            None => return Vec::new(),
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
pub(in crate::init) fn service_name(raw: &str, taken: &BTreeSet<String>) -> String {
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

/// `KEY=value` list items (compose's list form of `environment` and `labels`) as a mapping.
pub(in crate::init) fn as_named_mapping(v: Value) -> Value {
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

/// Is an env key one whose value a browser reads (bundled into a page by Vite, Next.js,
/// Create React App, Nuxt, SvelteKit, Astro, Expo; or an origin/redirect a browser is sent
/// to)? Such a value gets the proxy URL, which a browser resolves; a server's own calls
/// get the direct address.
pub(in crate::init) fn read_by_browser(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    const PUBLIC: &[&str] = &[
        "VITE_",
        "NEXT_PUBLIC_",
        "REACT_APP_",
        "NUXT_PUBLIC_",
        "PUBLIC_",
        "EXPO_PUBLIC_",
        "GATSBY_",
        "VUE_APP_",
    ];
    const BROWSER: &[&str] = &[
        "ORIGIN",
        "CORS",
        "REDIRECT",
        "CALLBACK",
        "CSRF_TRUSTED",
        "FRONTEND",
        "PUBLIC_URL",
        "SITE_URL",
    ];
    PUBLIC.iter().any(|p| k.starts_with(p)) || BROWSER.iter().any(|w| k.contains(w))
}

/// A command that is not compose's, as compose would write it: `$` doubled, so that
/// compose's interpolation leaves `${self.port}` and the shell's `$VAR` as they are.
pub(in crate::init) fn literal(cmd: &str) -> String {
    cmd.replace('$', "$$")
}
