//! `${...}` token interpolation, exactly as `binky.toml` specifies it.
//!
//! | token | value |
//! | --- | --- |
//! | `${self.port}` | this service's primary port (label `""`, else its first) |
//! | `${self.LABEL}` | this service's named port |
//! | `${SVC.port}`, `${SVC.LABEL}` | another service's ports |
//! | `${SVC.url}` | an adapter's slice address, else the service's URL |
//! | `${worktree}` | the world's name |
//! | `${env.NAME}` | the variable from the environment (and `env_file`) |
//!
//! An unknown token is left as it is, never blanked: a literal `${x.y}` in a command is
//! easy to spot in a log, an empty string is not.

use std::collections::BTreeMap;

/// Everything a token can resolve to, for one world.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    /// The world's name (`${worktree}`).
    pub world: String,
    /// `(service, label) → port`; label `""` is a primary port.
    pub ports: BTreeMap<(String, String), u16>,
    /// Primary label of each service that has ports.
    pub primary: BTreeMap<String, String>,
    /// `service → URL`: slice addresses of adapters, URLs of process services.
    pub urls: BTreeMap<String, String>,
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

    fn lookup(&self, expr: &str, service: &str) -> Option<String> {
        if expr == "worktree" {
            return Some(self.world.clone());
        }
        let (obj, attr) = expr.split_once('.')?;
        if obj == "env" {
            return self.env.get(attr).cloned();
        }
        let target = if obj == "self" { service } else { obj };
        match attr {
            "url" => self.urls.get(target).cloned(),
            "port" => self.primary_port(target).map(|p| p.to_string()),
            label => self
                .ports
                .get(&(target.to_owned(), label.to_owned()))
                .map(|p| p.to_string())
                .or_else(|| {
                    self.extra
                        .get(&(target.to_owned(), label.to_owned()))
                        .cloned()
                }),
        }
    }

    /// Names of the services a text refers to with `${SVC.…}` (not `self`, `env`).
    pub fn referenced_services(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            if let Some((obj, _)) = after[..end].split_once('.') {
                if obj != "self" && obj != "env" && !out.iter().any(|o| o == obj) {
                    out.push(obj.to_owned());
                }
            }
            rest = &after[end + 1..];
        }
        out
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
        assert_eq!(t.resolve("w=${worktree}", "api"), "w=login-fix");
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
    fn references_are_listed_once_without_self_and_env() {
        assert_eq!(
            Tokens::referenced_services("${api.port} ${self.port} ${env.X} ${db.url} ${api.url}"),
            vec!["api", "db"]
        );
    }
}
