//! `${...}` token interpolation, exactly as `binky.toml` specifies it.
//!
//! | token | value |
//! | --- | --- |
//! | `${self.port}` | this service's primary port (label `""`, else its first) |
//! | `${self.LABEL}` | this service's named port |
//! | `${SVC.port}`, `${SVC.LABEL}` | another service's ports |
//! | `${SVC.url}` | an adapter's slice address; a process service's direct address (`http://localhost:<port>`, binky 0.1.2's meaning) |
//! | `${SVC.proxy_url}` | the URL a browser opens: `http(s)://<sub>.<world>.<domain>` through binky's proxy (a service with `url`); else what `${SVC.url}` gives |
//! | `${worktree}` | the world's name (`worktree`: binky 0.1.2's name for a world) |
//! | `${worktree.path}` | the absolute path of the world's worktree |
//! | `${env.NAME}` | the variable from the environment (and `env_file`) |
//! | `${env.NAME:-default}` | the variable, or `default` when it is unset or empty (as in the shell and compose) |
//! | `${env.NAME-default}` | the variable, or `default` when it is unset |
//! | `${env.NAME:?message}`, `${env.NAME?message}` | the variable; unset (or empty, with `:`), the service does not start and `message` says why |
//!
//! An unknown token is left as it is, never blanked: a literal `${x.y}` in a command is
//! easy to spot in a log, an empty string is not. An `${env.…}` that resolves to nothing is
//! listed by [`Tokens::unset_env`], so that no process ever gets it as text.

use std::collections::BTreeMap;

/// Everything a token can resolve to, for one world.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    /// The world's name (`${worktree}`).
    pub world: String,
    /// The world's worktree (`${worktree.path}`), when known.
    pub worktree_path: Option<String>,
    /// `(service, label) → port`; label `""` is a primary port.
    pub ports: BTreeMap<(String, String), u16>,
    /// Primary label of each service that has ports.
    pub primary: BTreeMap<String, String>,
    /// `service → URL` for `${SVC.url}`: slice addresses of adapters, direct addresses
    /// (`http://localhost:<port>`) of process services.
    pub urls: BTreeMap<String, String>,
    /// `service → URL` through binky's proxy (`${SVC.proxy_url}`), for services with `url`.
    pub proxy_urls: BTreeMap<String, String>,
    /// Environment for `${env.NAME}`.
    pub env: BTreeMap<String, String>,
    /// Other named values of a service (`${cache.prefix}`): `(service, name) → value`.
    pub extra: BTreeMap<(String, String), String>,
}

impl Tokens {
    /// The primary port of `service`, if it has one.
    pub fn primary_port(&self, service: &str) -> Option<u16> {
        let label = self.primary.get(service)?;
        self.ports
            .get(&(service.to_owned(), label.clone()))
            .copied()
    }

    /// The URL to show a person for `service` (`binky env`, `status`, `up`): its proxy URL
    /// when it has one, else its `${SVC.url}`.
    pub fn shown_url(&self, service: &str) -> Option<&String> {
        self.proxy_urls
            .get(service)
            .or_else(|| self.urls.get(service))
    }

    /// Resolve every token in `text`, as seen from `service` (for `${self.…}`).
    pub fn resolve(&self, text: &str, service: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after.find('}') {
                Some(end) => {
                    let expr = &after[..end];
                    match self.lookup(expr, service) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("${");
                            out.push_str(expr);
                            out.push('}');
                        }
                    }
                    rest = &after[end + 1..];
                }
                None => {
                    out.push_str(&rest[start..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The `${env.…}` references in `text` that resolve to nothing here: an unset variable
    /// with no default (in order, once each).
    pub fn unset_env(&self, text: &str) -> Vec<UnsetEnv> {
        let mut out: Vec<UnsetEnv> = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${env.") {
            let after = &rest[start + 6..];
            let Some(end) = after.find('}') else { break };
            let r = EnvRef::parse(&after[..end]);
            if self.env_value(&r).is_none() && !out.iter().any(|u| u.name == r.name) {
                out.push(UnsetEnv {
                    name: r.name.to_owned(),
                    message: r.required.filter(|m| !m.is_empty()).map(str::to_owned),
                });
            }
            rest = &after[end + 1..];
        }
        out
    }

    fn env_value(&self, r: &EnvRef<'_>) -> Option<String> {
        let value = self.env.get(r.name);
        let present = |v: &&String| !(r.empty_is_unset && v.is_empty());
        match (value.filter(present), r.default) {
            (Some(v), _) => Some(v.clone()),
            (None, Some(d)) => Some(d.to_owned()),
            (None, None) => None,
        }
    }

    fn lookup(&self, expr: &str, service: &str) -> Option<String> {
        if expr == "worktree" {
            return Some(self.world.clone());
        }
        if expr == "worktree.path" {
            return self.worktree_path.clone();
        }
        let (obj, attr) = expr.split_once('.')?;
        if obj == "env" {
            return self.env_value(&EnvRef::parse(attr));
        }
        let target = if obj == "self" { service } else { obj };
        match attr {
            "url" => self.urls.get(target).cloned(),
            "proxy_url" => self.shown_url(target).cloned(),
            // A process service's primary port; an adapter service's server port (its
            // slice's `port` token).
            "port" => self
                .primary_port(target)
                .map(|p| p.to_string())
                .or_else(|| self.extra_of(target, "port")),
            label => self
                .ports
                .get(&(target.to_owned(), label.to_owned()))
                .map(|p| p.to_string())
                .or_else(|| self.extra_of(target, label)),
        }
    }

    /// The attributes of `service` that resolve here (`url`, `port`, `host`, …), sorted.
    pub fn offered(&self, service: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if self.urls.contains_key(service) {
            out.push("url".into());
        }
        if self.shown_url(service).is_some() {
            out.push("proxy_url".into());
        }
        if self.primary_port(service).is_some() {
            out.push("port".into());
        }
        let own = |(s, name): &(String, String)| (s == service).then(|| name.clone());
        out.extend(self.ports.keys().filter_map(own).filter(|l| !l.is_empty()));
        out.extend(self.extra.keys().filter_map(own));
        out.sort();
        out.dedup();
        out
    }

    /// Why `token` (as written, `${db.nope}`) resolves to nothing as seen from `service`,
    /// and what does: for a service's message.
    pub fn explain(&self, token: &str, service: &str) -> String {
        let expr = token.trim_start_matches("${").trim_end_matches('}');
        let Some((obj, attr)) = expr.split_once('.') else {
            return format!("`{token}` is not a token binky knows");
        };
        if obj == "worktree" {
            return "the world's tokens are ${worktree} (its name) and ${worktree.path}".into();
        }
        let target = if obj == "self" { service } else { obj };
        let offered = self.offered(target);
        if offered.is_empty() {
            return format!("no service `{target}` gives tokens in this world (not in binky.toml, not in the world's group, or it has no port); fix the name, or start it with the world");
        }
        let list: Vec<String> = offered.iter().map(|a| format!("${{{obj}.{a}}}")).collect();
        format!("`{target}` has no `{attr}`; it gives {}", list.join(", "))
    }

    fn extra_of(&self, service: &str, name: &str) -> Option<String> {
        self.extra
            .get(&(service.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The binky tokens in `text` that resolve to nothing here (`${db.port}` of a slice not
    /// made, `${api.nolabel}`), as written, in order, once each. `${env.…}` is
    /// [`Tokens::unset_env`]'s; `${secret:…}` is resolved later; a name without a dot
    /// (`${HOME}`, `${PORT:-8000}`) is the shell's and passes through.
    pub fn unresolved(&self, text: &str, service: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for expr in token_exprs(text) {
            if !is_binky_token(expr) || self.lookup(expr, service).is_some() {
                continue;
            }
            let written = format!("${{{expr}}}");
            if !out.contains(&written) {
                out.push(written);
            }
        }
        out
    }

    /// Names of the services a text refers to with `${SVC.…}` (not `self`, `env`).
    pub fn referenced_services(text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for expr in token_exprs(text).filter(|e| is_binky_token(e)) {
            if let Some((obj, _)) = expr.split_once('.') {
                if obj != "self" && obj != "worktree" && !out.iter().any(|o| o == obj) {
                    out.push(obj.to_owned());
                }
            }
        }
        out
    }
}

/// The text inside each `${…}` of `text`, in order (an unclosed `${` ends the list).
pub fn token_exprs(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find("${")?;
        let after = &rest[start + 2..];
        let end = after.find('}')?;
        rest = &after[end + 1..];
        Some(&after[..end])
    })
}

/// Is `expr` (the text inside `${…}`) one of binky's tokens rather than the shell's?
/// `worktree`, and every `OBJ.ATTR` but `env.…` (resolved on its own terms) and
/// `secret:…`; `${HOME}`, `${PORT:-8000}` are left to the shell.
pub fn is_binky_token(expr: &str) -> bool {
    if expr == "worktree" {
        return true;
    }
    if expr.starts_with("secret:") || expr.starts_with("env.") {
        return false;
    }
    // `${VAR:-a.b}`: a shell default that holds a dot is the shell's.
    match expr.split_once('.') {
        Some((obj, _)) => {
            !obj.is_empty()
                && obj
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        None => false,
    }
}

/// An `${env.…}` reference that resolves to nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsetEnv {
    /// The variable.
    pub name: String,
    /// The `?message` written with it, if any.
    pub message: Option<String>,
}

/// `NAME`, `NAME:-default`, `NAME-default`, `NAME:?message`, `NAME?message`.
struct EnvRef<'a> {
    name: &'a str,
    default: Option<&'a str>,
    required: Option<&'a str>,
    /// `:` forms: an empty value counts as unset.
    empty_is_unset: bool,
}

impl<'a> EnvRef<'a> {
    fn parse(attr: &'a str) -> EnvRef<'a> {
        let end = attr
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(attr.len());
        let (name, op) = attr.split_at(end);
        let mut r = EnvRef {
            name,
            default: None,
            required: None,
            empty_is_unset: false,
        };
        if let Some(d) = op.strip_prefix(":-") {
            r.default = Some(d);
            r.empty_is_unset = true;
        } else if let Some(d) = op.strip_prefix('-') {
            r.default = Some(d);
        } else if let Some(m) = op.strip_prefix(":?") {
            r.required = Some(m);
            r.empty_is_unset = true;
        } else if let Some(m) = op.strip_prefix('?') {
            r.required = Some(m);
        } else if !op.is_empty() {
            // Not a form binky knows: the whole text names the variable (never found).
            r.name = attr;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        let mut t = Tokens {
            world: "login-fix".into(),
            ..Tokens::default()
        };
        t.ports.insert(("web".into(), "".into()), 4001);
        t.ports.insert(("api".into(), "http".into()), 4002);
        t.ports.insert(("api".into(), "grpc".into()), 4003);
        t.primary.insert("web".into(), "".into());
        t.primary.insert("api".into(), "http".into());
        t.urls
            .insert("db".into(), "postgres://u:p@127.0.0.1:5432/x".into());
        t.urls.insert("web".into(), "http://localhost:4001".into());
        t.proxy_urls
            .insert("web".into(), "http://web.login-fix.acme.localhost".into());
        t.env.insert("HOME".into(), "/home/me".into());
        t
    }

    #[test]
    fn every_token_kind_resolves() {
        let t = tokens();
        assert_eq!(t.resolve("--port ${self.port}", "web"), "--port 4001");
        assert_eq!(t.resolve("${self.grpc}", "api"), "4003");
        assert_eq!(t.resolve("${api.port}", "web"), "4002");
        assert_eq!(t.resolve("${api.http}", "web"), "4002");
        assert_eq!(
            t.resolve("${db.url}", "web"),
            "postgres://u:p@127.0.0.1:5432/x"
        );
        assert_eq!(t.resolve("${web.url}/x", "api"), "http://localhost:4001/x");
        assert_eq!(
            t.resolve("${web.proxy_url}/x", "api"),
            "http://web.login-fix.acme.localhost/x"
        );
        // A service without a proxy URL: its proxy_url is what its url is.
        assert_eq!(
            t.resolve("${db.proxy_url}", "web"),
            "postgres://u:p@127.0.0.1:5432/x"
        );
        assert_eq!(t.resolve("w=${worktree}", "api"), "w=login-fix");
        assert_eq!(t.resolve("${worktree.path}", "api"), "${worktree.path}");
        let t = Tokens {
            worktree_path: Some("/src/acme.worktrees/login-fix".into()),
            ..t
        };
        assert_eq!(
            t.resolve("cd ${worktree.path}/api", "api"),
            "cd /src/acme.worktrees/login-fix/api"
        );
        assert_eq!(t.resolve("${env.HOME}/x", "api"), "/home/me/x");
    }

    #[test]
    fn unknown_tokens_are_left_as_they_are() {
        let t = tokens();
        for text in [
            "${nope.port}",
            "${env.NOT_SET}",
            "${self.port}",
            "${weird}",
            "${web.nolabel}",
            "a ${ b",
            "$HOME ${",
        ] {
            let service = if text == "${self.port}" {
                "worker"
            } else {
                "web"
            };
            assert_eq!(t.resolve(text, service), text);
        }
    }

    #[test]
    fn an_adapter_services_port_and_other_fields_resolve_and_what_cannot_is_listed() {
        let mut t = tokens();
        for (k, v) in [("host", "127.0.0.1"), ("port", "5433"), ("name", "bk_x")] {
            t.extra.insert(("db".into(), k.into()), v.into());
        }
        assert_eq!(
            t.resolve("${db.host}:${db.port}/${db.name}", "web"),
            "127.0.0.1:5433/bk_x"
        );
        // A process service's own port still wins over anything else.
        t.extra.insert(("web".into(), "port".into()), "1".into());
        assert_eq!(t.resolve("${web.port}", "api"), "4001");
        assert!(t
            .unresolved("${db.port} ${web.url} ${worktree}", "api")
            .is_empty());
        assert_eq!(
            t.unresolved(
                "${db.nope} ${cache.url} $HOME ${HOME} ${PORT:-8000} ${X:-a.b} ${env.UNSET} ${secret:a.b} ${db.nope} ${worktree.x} ${self.port}",
                "worker"
            ),
            vec!["${db.nope}", "${cache.url}", "${worktree.x}", "${self.port}"]
        );
        let why = t.explain("${db.nope}", "web");
        assert!(
            why.contains("${db.port}") && why.contains("${db.url}"),
            "{why}"
        );
        let why = t.explain("${cache.url}", "web");
        assert!(why.contains("no service `cache`"), "{why}");
    }

    #[test]
    fn references_are_listed_once_without_self_and_env() {
        assert_eq!(
            Tokens::referenced_services(
                "${api.port} ${self.port} ${env.X} ${db.url} ${api.url} ${secret:a.b} ${worktree.path} ${X:-c.d}"
            ),
            vec!["api", "db"]
        );
    }
}

#[cfg(test)]
mod env_defaults {
    use super::*;

    fn t() -> Tokens {
        let mut t = Tokens::default();
        t.env.insert("SET".into(), "v".into());
        t.env.insert("EMPTY".into(), String::new());
        t
    }

    #[test]
    fn defaults_and_required_variables_work_as_in_the_shell() {
        let t = t();
        for (text, want) in [
            ("${env.SET:-d}", "v"),
            ("${env.UNSET:-d}", "d"),
            ("${env.EMPTY:-d}", "d"),
            ("${env.EMPTY-d}", ""),
            ("${env.UNSET-d}", "d"),
            ("${env.UNSET:-}", ""),
            ("${env.UNSET:-http://x:1/a}", "http://x:1/a"),
            ("${env.SET:?needed}", "v"),
            ("${env.EMPTY?needed}", ""),
        ] {
            assert_eq!(t.resolve(text, "s"), want, "{text}");
        }
    }

    #[test]
    fn an_unset_variable_without_a_default_is_listed_with_its_message() {
        let t = t();
        let text = "a ${env.SET} ${env.UNSET} ${env.NEEDED:?ask the team} ${env.EMPTY:?} ${env.UNSET} ${env.OK:-x}";
        assert_eq!(
            t.unset_env(text),
            vec![
                UnsetEnv {
                    name: "UNSET".into(),
                    message: None
                },
                UnsetEnv {
                    name: "NEEDED".into(),
                    message: Some("ask the team".into())
                },
                UnsetEnv {
                    name: "EMPTY".into(),
                    message: None
                },
            ]
        );
        // Left as text by resolve (never blanked), but listed, so no process gets it.
        assert_eq!(t.resolve("${env.UNSET}", "s"), "${env.UNSET}");
    }
}
