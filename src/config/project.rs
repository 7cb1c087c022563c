//! `[project]`: `name`, `domain`, `port_range`, `https`, `copy`.

use std::ops::Range;

use binky_controllers::spec::{CopyMode, Project};
use toml::de::DeValue;

use super::{Cx, Table};

const PROJECT_KEYS: &[&str] = &["name", "domain", "port_range", "https", "copy"];

impl Cx<'_> {
    /// The `[project]` table of `root` (an error when it is missing).
    pub(super) fn project_table(
        &mut self,
        root: &Table<'_>,
        span: Range<usize>,
    ) -> Option<Project> {
        match Self::get(root, "project") {
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
        }
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
        let name = name.and_then(|n| {
            if project_name_ok(&n) {
                return Some(n);
            }
            let span = Self::span_of(t, "name", span.clone());
            match slug(&n) {
                // A project named `My App` runs (existing files have such names), under a name
                // that fits hostnames and database names, and says which.
                Some(s) => {
                    self.warn_at(span, "project.name", format!("`{n}` cannot be part of hostnames and database names as written: binky calls the project `{s}` (URLs `*.{s}.localhost`); write name = \"{s}\" to say so"));
                    Some(s)
                }
                None => {
                    self.error(span, "project.name", format!("invalid project name `{n}`: it becomes part of hostnames and database names"), Some("use letters, digits, `-`, `_` or `.`, at most 63 characters, e.g. \"acme\"".to_owned()));
                    None
                }
            }
        });
        let domain = self.string(t, "project", "domain");
        if let Some(why) = domain.as_deref().and_then(dns_name_problem) {
            let d = domain.as_deref().unwrap_or("");
            self.key_error(
                t,
                "project",
                "domain",
                span.clone(),
                format!("`{d}` is not a DNS name: {why}"),
                Some("use dot-separated labels of letters, digits and `-` (each 1-63 characters, not starting or ending with `-`), e.g. domain = \"acme.test\"; write an international name in its punycode form (xn--…)".to_owned()),
            );
        }
        // `binky.localhost` is the dashboard's: a world `binky` of domain `localhost` would
        // be shadowed by it.
        if domain
            .as_deref()
            .is_some_and(|d| d.trim_end_matches('.').eq_ignore_ascii_case("localhost"))
        {
            self.key_error(
                t,
                "project",
                "domain",
                span.clone(),
                "domain `localhost` would give worlds the hosts of binky's own pages (`binky.localhost` is the dashboard)".to_owned(),
                Some("use a name of your project's under it, e.g. domain = \"acme.localhost\" (the default is `<project>.localhost`)".to_owned()),
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
        let (copy, copy_modes) = self.copy_paths(t);
        Some(Project {
            name: name?,
            domain,
            port_range,
            https,
            copy,
            copy_modes,
        })
    }
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

/// A project name usable as it is: letters, digits, `-`, `_`, `.`, at most 63, not starting
/// or ending with `-` or `.`.
fn project_name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !n.starts_with(['-', '.'])
        && !n.ends_with(['-', '.'])
}

/// `My App` → `my-app`: lower case, each run of other characters one `-`, at most 63; `None`
/// when nothing usable is left (a name of only punctuation or non-ASCII letters).
fn slug(n: &str) -> Option<String> {
    let mut out = String::new();
    for c in n.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(63).collect();
    let out = out.trim_end_matches('-').to_owned();
    project_name_ok(&out).then_some(out)
}

impl Cx<'_> {
    /// `[project] copy`: paths (`"node_modules"`) or tables (`{ path = "…", mode = "copy" }`),
    /// each inside the repository; the paths, and the modes other than the default.
    fn copy_paths(
        &mut self,
        t: &Table<'_>,
    ) -> (Vec<String>, std::collections::BTreeMap<String, CopyMode>) {
        const FIX: &str = "name paths relative to the directory of binky.toml, e.g. copy = [\"node_modules\", \"web/node_modules\", { path = \".venv\", mode = \"copy\" }]";
        let mut copy = Vec::new();
        let mut modes = std::collections::BTreeMap::new();
        let Some(v) = Self::get(t, "copy") else {
            return (copy, modes);
        };
        let DeValue::Array(items) = v.get_ref() else {
            self.error(
                v.span(),
                "project.copy",
                "expected a list of paths".to_owned(),
                Some(FIX.to_owned()),
            );
            return (copy, modes);
        };
        for (i, item) in items.iter().enumerate() {
            let key = format!("project.copy[{i}]");
            let (p, mode) = match item.get_ref() {
                DeValue::String(s) => (s.to_string(), CopyMode::Link),
                DeValue::Table(entry) => {
                    self.unknown_keys(entry, &key, &["path", "mode"]);
                    let Some(p) = self.string(entry, &key, "path") else {
                        self.error(
                            item.span(),
                            &key,
                            "a table in copy needs its `path`".to_owned(),
                            Some(FIX.to_owned()),
                        );
                        continue;
                    };
                    let mode = match self.string(entry, &key, "mode").as_deref() {
                        None | Some("link") => CopyMode::Link,
                        Some("copy") => CopyMode::Copy,
                        Some(other) => {
                            self.key_error(
                                entry,
                                &key,
                                "mode",
                                item.span(),
                                format!("unknown mode `{other}`"),
                                Some("use mode = \"link\" (the default: clone, else hard-link, else copy) or mode = \"copy\" (clone, else copy: never shared)".to_owned()),
                            );
                            continue;
                        }
                    };
                    (p, mode)
                }
                _ => {
                    self.wrong_type::<()>(
                        item,
                        &key,
                        "a path or { path = \"…\", mode = \"…\" }",
                        FIX.to_owned(),
                    );
                    continue;
                }
            };
            let parts: Vec<&str> = p.trim_end_matches('/').split('/').collect();
            if p.is_empty()
                || p.starts_with('/')
                || parts
                    .iter()
                    .any(|s| *s == ".." || s.is_empty() && parts.len() > 1)
            {
                self.error(
                    item.span(),
                    "project.copy",
                    format!("`{p}` is not a path inside the repository"),
                    Some(FIX.to_owned()),
                );
                continue;
            }
            if mode != CopyMode::Link {
                modes.insert(p.clone(), mode);
            }
            copy.push(p);
        }
        (copy, modes)
    }
}
