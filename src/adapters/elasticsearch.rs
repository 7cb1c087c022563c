//! The `elasticsearch` adapter (also answering to `opensearch`): each slice is an index
//! prefix on a shared cluster, reached over its REST API (default port 9200), with a user
//! and role of its own where the cluster has security turned on.
//!
//! # What a slice is
//! - The prefix is the slice's name (`bk_acme_login_fix_search`: already lower-case, no
//!   leading `-`, `_` or `+`, far below the 255-byte limit). A world's indices are the
//!   prefix itself and `<prefix>-<name>` (binky 0.1.2's convention): the application
//!   writes `bk_acme_login_fix_search-products` instead of `products`.
//! - `options.indices` (a comma list, 0.1.2's) are created empty on provision, as
//!   `<prefix>-<index>`; mappings stay the application's.
//! - With security on, a role and a user named after the slice: the role has every index
//!   privilege on exactly `<prefix>` and `<prefix>-*` (the `-` keeps `bk_a` from matching
//!   `bk_ab-…`), the user has the slice's secret as password (on OpenSearch `Bk_` + secret,
//!   so the common upper/lower/digit/special password rules pass). Elasticsearch's
//!   `/_security/role` and `/_security/user`; OpenSearch's security plugin's
//!   `/_plugins/_security/api/roles`, `/internalusers` and `/rolesmapping`. The flavour is
//!   read from `GET /` (`version.distribution`), not from the adapter's name.
//! - `${search.url}` is `http://<user>:<password>@host:9200/<prefix>`, binky 0.1.2's form
//!   (the server with the prefix as path); tokens: `prefix`, and `endpoint`
//!   (`http://<user>:<password>@host:9200`, what an Elasticsearch/OpenSearch client takes).
//!
//! # Options
//! - `indices`: comma-separated index names created (empty) under the prefix.
//! - `api_key`: an Elasticsearch API key for the admin calls, sent as
//!   `Authorization: ApiKey …` instead of admin_url's user and password.
//!
//! `admin_url` falls back to `$BINKY_ELASTICSEARCH_URL`, then `http://localhost:9200`
//! (0.1.2's); its user (or API key) needs `manage_security` (Elasticsearch) or REST API
//! access to the security plugin (OpenSearch: `all_access`) and the right to create and
//! delete indices.
//!
//! # Guarantees
//! - Idempotent: provisioning again rewrites the role and resets the user's password;
//!   tearing down what is gone succeeds (404 is "already gone").
//! - Teardown removes the user (and OpenSearch's role mapping) first, then the role, then
//!   every index named `<prefix>` or `<prefix>-…`, each **by its exact name** — never a
//!   wildcard delete, which Elasticsearch 8 refuses (`action.destructive_requires_name`).
//! - A server that is down or overloaded (HTTP 429, 502–504), or that refuses admin_url's
//!   credentials (401), gives [`AdapterError::Unreachable`]; the 401 message names
//!   admin_url and `options.api_key`. No message carries a password or key.
//!
//! # What it cannot guarantee
//! - **Without security** (Elasticsearch with `xpack.security.enabled: false`, OpenSearch
//!   without its security plugin) there are no credentials to give: the world's address
//!   carries admin_url's, as in 0.1.2, any client reaches every index, and worlds are kept
//!   apart only by using their prefix. The same holds when admin_url's user may not manage
//!   users. binky logs a warning saying so, once per server; `resolve` decides by trying
//!   the slice's own user.
//! - The world's role has no cluster privileges on Elasticsearch (on OpenSearch only
//!   `cluster_composite_ops`, which bulk and multi-get need): `GET /`, `_cat` and cluster
//!   health are refused to it.
//! - Data streams' backing indices (`.ds-<prefix>-…`) are not matched by the prefix.
//! - Not run against a real Elasticsearch or OpenSearch (neither is installable on the
//!   machines binky is tested on): the unit tests below check names, the requests sent and
//!   the handling of canned answers from a scripted local HTTP server.

use std::collections::{BTreeMap, BTreeSet};

use hyper::Method;
use serde_json::json;

use binky_controllers::url::percent_encode;

use super::http::{Endpoint, Http, Response};
use super::{Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice};

/// The REST port.
pub const DEFAULT_PORT: u16 = 9200;
/// Where the admin URL comes from when the service has none (binky 0.1.2's).
pub const ENV_URL: &str = "BINKY_ELASTICSEARCH_URL";
/// binky 0.1.2's default server.
pub const DEFAULT_URL: &str = "http://localhost:9200";
/// Between the prefix and an index's own name (0.1.2's).
pub const SEP: &str = "-";
/// Index names are at most this many bytes.
const MAX_INDEX: usize = 255;
/// Slice names binky gives are at most this long.
const MAX_PREFIX: usize = 63;

/// The elasticsearch and opensearch adapter.
pub struct Elasticsearch;

/// Which REST API the security calls go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    Elasticsearch,
    OpenSearch,
}

/// The slice's index prefix: its name, checked against the index name rules.
pub fn prefix(slice: &Slice) -> Result<String, AdapterError> {
    let name = &slice.name;
    // `bk_` also keeps teardown away from every index binky did not name.
    let ok = name.starts_with("bk_")
        && name.len() <= MAX_PREFIX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(name.clone())
    } else {
        Err(AdapterError::Config(format!(
            "`{name}` cannot be an index prefix: `bk_` then [a-z0-9_], at most {MAX_PREFIX} \
             bytes"
        )))
    }
}

/// `options.indices` as full index names under `prefix`.
fn declared_indices(cfg: &AdapterConfig, prefix: &str) -> Result<Vec<String>, AdapterError> {
    let Some(list) = cfg.options.get("indices") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for index in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let full = format!("{prefix}{SEP}{index}");
        let bad_char = index.chars().find(|c| {
            c.is_ascii_uppercase()
                || c.is_whitespace()
                || matches!(
                    c,
                    '\\' | '/' | '*' | '?' | '"' | '<' | '>' | '|' | ',' | '#' | ':'
                )
        });
        if let Some(c) = bad_char {
            return Err(AdapterError::Config(format!(
                "options.indices: `{index}` cannot be part of an index name (`{c}`): use \
                 lower-case letters, digits, `-`, `_` and `.`"
            )));
        }
        if full.len() > MAX_INDEX {
            return Err(AdapterError::Config(format!(
                "options.indices: `{full}` is longer than the {MAX_INDEX} bytes an index name \
                 may have; shorten `{index}`"
            )));
        }
        out.push(full);
    }
    Ok(out)
}

/// Is `index` one of the prefix's?
fn owned(prefix: &str, index: &str) -> bool {
    index == prefix
        || index
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(SEP))
}

/// The password of the slice's user.
fn password(flavour: Flavour, slice: &Slice) -> String {
    match flavour {
        Flavour::Elasticsearch => slice.secret.clone(),
        // OpenSearch's usual `password_validation_regex` wants an upper-case letter and a
        // special character; the secret is lower-case hex.
        Flavour::OpenSearch => format!("Bk_{}", slice.secret),
    }
}

/// The cluster, from `admin_url` and `options.api_key`.
struct Server {
    ep: Endpoint,
    /// `ApiKey …`, when options.api_key is set.
    authorization: Option<String>,
    http: Http,
    /// Strings no message may carry.
    secrets: Vec<String>,
}

impl Server {
    fn from_config(cfg: &AdapterConfig) -> Result<Server, AdapterError> {
        let url = cfg
            .admin_url
            .clone()
            .filter(|u| !u.is_empty())
            .or_else(|| std::env::var(ENV_URL).ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        let mut ep = Endpoint::parse(&url, DEFAULT_PORT)?;
        let api_key = cfg
            .options
            .get("api_key")
            .filter(|k| !k.is_empty())
            .cloned();
        let mut secrets: Vec<String> = ep.password.iter().cloned().collect();
        secrets.extend(api_key.iter().cloned());
        secrets.retain(|s| !s.is_empty());
        if api_key.is_some() {
            // One authorization header: the key's, as in 0.1.2.
            ep.user = None;
            ep.password = None;
        }
        Ok(Server {
            ep,
            authorization: api_key.map(|k| format!("ApiKey {k}")),
            http: Http::new(),
            secrets,
        })
    }

    fn scrub(&self, text: &str, extra: &[&str]) -> String {
        super::scrub(
            text,
            self.secrets
                .iter()
                .map(String::as_str)
                .chain(extra.iter().copied()),
        )
    }

    /// One admin request.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response, AdapterError> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        let headers: Vec<(&str, &str)> = self
            .authorization
            .as_deref()
            .map(|a| ("authorization", a))
            .into_iter()
            .collect();
        self.http.call(&self.ep, method, path, body, &headers).await
    }

    /// One admin request that must succeed (404 too, for `DELETE`s: already gone).
    async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        doing: &str,
        extra: &[&str],
    ) -> Result<Response, AdapterError> {
        let gone_ok = method == Method::DELETE;
        let resp = self.call(method, path, body).await?;
        if resp.ok() || (gone_ok && resp.status == 404) {
            return Ok(resp);
        }
        Err(self.error(doing, &resp, extra))
    }

    fn error(&self, doing: &str, resp: &Response, extra: &[&str]) -> AdapterError {
        let server = self.ep.server.clone();
        let text = self.scrub(&resp.text(400), extra);
        match resp.status {
            401 => AdapterError::Unreachable {
                server,
                detail: format!(
                    "{doing}: the server refused the admin credentials (HTTP 401: {text}); \
                     check the user and password in admin_url, or options.api_key"
                ),
            },
            429 | 502..=504 => AdapterError::Unreachable {
                server,
                detail: format!("{doing}: HTTP {} {text}", resp.status),
            },
            403 => AdapterError::Server {
                server,
                detail: format!(
                    "{doing}: HTTP 403 {text}; admin_url's user (or options.api_key) needs the \
                     right to manage indices and, with security on, users and roles"
                ),
            },
            _ => AdapterError::Server {
                server,
                detail: format!("{doing}: HTTP {} {text}", resp.status),
            },
        }
    }

    /// Which cluster this is (`GET /`, which also proves it answers).
    async fn flavour(&self) -> Result<Flavour, AdapterError> {
        let resp = self
            .expect(Method::GET, "/", None, "asking the cluster", &[])
            .await?;
        let doc = resp.json(&self.ep.server)?;
        Ok(
            if doc["version"]["distribution"].as_str() == Some("opensearch") {
                Flavour::OpenSearch
            } else {
                Flavour::Elasticsearch
            },
        )
    }

    /// Where a user learns who it is: answers 2xx only with security on.
    fn whoami(flavour: Flavour) -> &'static str {
        match flavour {
            Flavour::Elasticsearch => "/_security/_authenticate",
            Flavour::OpenSearch => "/_plugins/_security/authinfo",
        }
    }

    /// Is security on? (Off, Elasticsearch answers 500 "Security must be explicitly
    /// enabled" and OpenSearch 400/404 "no handler found".)
    async fn security(&self, flavour: Flavour) -> Result<bool, AdapterError> {
        let resp = self.call(Method::GET, Self::whoami(flavour), None).await?;
        match resp.status {
            200..=299 => Ok(true),
            401 | 429 | 502..=504 => Err(self.error("checking security", &resp, &[])),
            _ => Ok(false),
        }
    }

    /// The slice's role and user (made or rewritten); `Ok(false)` when admin_url's user may
    /// not manage them.
    async fn ensure_user(
        &self,
        flavour: Flavour,
        slice: &Slice,
        prefix: &str,
    ) -> Result<bool, AdapterError> {
        let name = percent_encode(&slice.name);
        let patterns = json!([prefix, format!("{prefix}{SEP}*")]);
        let pw = password(flavour, slice);
        let steps: Vec<(String, serde_json::Value)> = match flavour {
            Flavour::Elasticsearch => vec![
                (
                    format!("/_security/role/{name}"),
                    json!({
                        "cluster": [],
                        "indices": [{ "names": patterns, "privileges": ["all"] }],
                        "metadata": { "binky": "slice" },
                    }),
                ),
                (
                    format!("/_security/user/{name}"),
                    json!({
                        "password": pw,
                        "roles": [slice.name],
                        "metadata": { "binky": "slice" },
                    }),
                ),
            ],
            Flavour::OpenSearch => vec![
                (
                    format!("/_plugins/_security/api/roles/{name}"),
                    json!({
                        "cluster_permissions": ["cluster_composite_ops"],
                        "index_permissions": [{
                            "index_patterns": patterns,
                            "allowed_actions": ["indices_all"],
                        }],
                    }),
                ),
                (
                    format!("/_plugins/_security/api/internalusers/{name}"),
                    json!({ "password": pw, "attributes": { "binky": "slice" } }),
                ),
                (
                    format!("/_plugins/_security/api/rolesmapping/{name}"),
                    json!({ "users": [slice.name] }),
                ),
            ],
        };
        for (path, body) in steps {
            let resp = self.call(Method::PUT, &path, Some(&body)).await?;
            if resp.status == 403 {
                warn_shared(
                    &self.ep.server,
                    &format!(
                        "admin_url's user may not manage users and roles ({}); give it \
                         manage_security (Elasticsearch) or security REST API access \
                         (OpenSearch) to give each world a user of its own",
                        self.scrub(&resp.text(200), &[&pw, &slice.secret])
                    ),
                );
                return Ok(false);
            }
            if !resp.ok() {
                return Err(self.error(
                    &format!("creating the role and user {}", slice.name),
                    &resp,
                    &[&pw, &slice.secret],
                ));
            }
        }
        Ok(true)
    }

    /// Remove the slice's user, role mapping and role (what is missing is fine).
    async fn remove_user(&self, flavour: Flavour, slice: &Slice) -> Result<(), AdapterError> {
        let name = percent_encode(&slice.name);
        let paths = match flavour {
            Flavour::Elasticsearch => vec![
                format!("/_security/user/{name}"),
                format!("/_security/role/{name}"),
            ],
            Flavour::OpenSearch => vec![
                format!("/_plugins/_security/api/internalusers/{name}"),
                format!("/_plugins/_security/api/rolesmapping/{name}"),
                format!("/_plugins/_security/api/roles/{name}"),
            ],
        };
        for path in paths {
            let resp = self.call(Method::DELETE, &path, None).await?;
            // 404: gone; 403: this admin could not have made it.
            if !resp.ok() && !matches!(resp.status, 403 | 404) {
                return Err(self.error(&format!("removing {path}"), &resp, &[]));
            }
        }
        Ok(())
    }

    /// Indices whose names start with `pattern_prefix` (listing by pattern is fine; only
    /// deletes go by exact name).
    async fn indices(&self, pattern_prefix: &str) -> Result<Vec<String>, AdapterError> {
        let path = format!(
            "/_cat/indices/{}*?format=json&h=index",
            percent_encode(pattern_prefix)
        );
        let resp = self
            .expect(Method::GET, &path, None, "listing indices", &[])
            .await?;
        let doc = resp.json(&self.ep.server)?;
        Ok(doc
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r["index"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The prefix's indices, exactly.
    async fn owned(&self, prefix: &str) -> Result<Vec<String>, AdapterError> {
        let mut all = self.indices(prefix).await?;
        all.retain(|i| owned(prefix, i));
        all.sort();
        Ok(all)
    }
}

/// Warn once per server and reason that its worlds share admin_url's credentials.
fn warn_shared(server: &str, why: &str) {
    super::warn_shared_once(
        "elasticsearch",
        server,
        why,
        "every world's address on this server carries admin_url's credentials and worlds are kept apart by index prefix only",
    );
}

impl Adapter for Elasticsearch {
    fn names(&self) -> &'static [&'static str] {
        &["elasticsearch", "opensearch"]
    }

    fn capabilities<'a>(
        &'a self,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Capabilities, AdapterError>> {
        Box::pin(async { Ok(Capabilities { clone: false }) })
    }

    fn provision<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            let prefix = prefix(slice)?;
            let wanted = declared_indices(cfg, &prefix)?;
            let server = Server::from_config(cfg)?;
            let flavour = server.flavour().await?;
            if server.security(flavour).await? {
                server.ensure_user(flavour, slice, &prefix).await?;
            } else {
                warn_shared(&server.ep.server, "security is off on this cluster");
            }
            if wanted.is_empty() {
                return Ok(());
            }
            let existing: BTreeSet<String> = server.owned(&prefix).await?.into_iter().collect();
            for index in wanted.iter().filter(|i| !existing.contains(*i)) {
                let resp = server
                    .call(
                        Method::PUT,
                        &format!("/{}", percent_encode(index)),
                        Some(&json!({})),
                    )
                    .await?;
                let raced = resp.status == 400
                    && resp.text(400).contains("resource_already_exists_exception");
                if !resp.ok() && !raced {
                    return Err(server.error(&format!("creating index {index}"), &resp, &[]));
                }
            }
            Ok(())
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            let prefix = prefix(slice)?;
            let server = Server::from_config(cfg)?;
            let flavour = server.flavour().await?;
            // The slice's own user, if the cluster knows it (Basic auth, no API key).
            let own = Endpoint {
                user: Some(slice.name.clone()),
                password: Some(password(flavour, slice)),
                ..server.ep.clone()
            };
            let probe = server
                .http
                .call(&own, Method::GET, Server::whoami(flavour), None, &[])
                .await?;
            if matches!(probe.status, 429 | 502..=504) {
                return Err(server.error("trying the slice's user", &probe, &[]));
            }
            let ep = if probe.ok() { &own } else { &server.ep };
            let path = format!("/{}", percent_encode(&prefix));
            Ok(Address {
                url: ep.url_with_credentials(&path),
                tokens: BTreeMap::from([
                    ("prefix".to_owned(), prefix),
                    ("endpoint".to_owned(), ep.url_with_credentials("")),
                ]),
            })
        })
    }

    fn teardown<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            let prefix = prefix(slice)?;
            let server = Server::from_config(cfg)?;
            let flavour = server.flavour().await?;
            // The user first: the world stops writing before its indices go.
            if server.security(flavour).await? {
                server.remove_user(flavour, slice).await?;
            }
            for index in server.owned(&prefix).await? {
                server
                    .expect(
                        Method::DELETE,
                        &format!("/{}", percent_encode(&index)),
                        None,
                        &format!("deleting index {index}"),
                        &[],
                    )
                    .await?;
            }
            Ok(())
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
            let server = Server::from_config(cfg)?;
            // A prefix holds no `-`: an index's prefix is what comes before its first one.
            let prefixes: BTreeSet<String> = server
                .indices("bk_")
                .await?
                .iter()
                .map(|i| i.split(SEP).next().unwrap_or(i).to_owned())
                .collect();
            Ok(prefixes.into_iter().collect())
        })
    }

    fn exists<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Option<bool>, AdapterError>> {
        Box::pin(async move {
            let prefix = prefix(slice)?;
            let wanted = declared_indices(cfg, &prefix)?;
            // Without declared indices a slice may hold none at all: nothing to look for.
            if wanted.is_empty() {
                return Ok(None);
            }
            let server = Server::from_config(cfg)?;
            let have: BTreeSet<String> = server.owned(&prefix).await?.into_iter().collect();
            Ok(Some(wanted.iter().all(|i| have.contains(i))))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::Value;

    use super::super::http_fake::{cfg, FakeServer, Recorded};
    use super::*;

    fn slice() -> Slice {
        Slice {
            name: "bk_acme_login_fix_search".into(),
            secret: "0123abcd".into(),
        }
    }

    fn call(line: &str, body: Value) -> (String, Value) {
        (line.to_owned(), body)
    }

    #[test]
    fn prefixes_and_index_names_follow_the_index_rules() {
        assert_eq!(prefix(&slice()).expect("ok"), "bk_acme_login_fix_search");
        for bad in [
            "_bk",
            "bk-a",
            "bk_A",
            "bk a",
            "",
            "products",
            &"bk_".repeat(22),
        ] {
            let s = Slice {
                name: bad.into(),
                secret: String::new(),
            };
            assert!(prefix(&s).is_err(), "{bad}");
        }
        let c = |v: &str| declared_indices(&cfg("http://h", &[("indices", v)]), "bk_p");
        assert_eq!(
            c(" products, orders ,").expect("ok"),
            ["bk_p-products", "bk_p-orders"]
        );
        for bad in ["Products", "a b", "a*", "a,b/c", "x#"] {
            assert!(c(bad).is_err(), "{bad}");
        }
        assert!(c(&"x".repeat(251)).is_err(), "too long");
        assert!(owned("bk_a", "bk_a"));
        assert!(owned("bk_a", "bk_a-x"));
        assert!(!owned("bk_a", "bk_ab-x"));
        assert!(!owned("bk_a", "bk_a_b-x"));
    }

    /// A scripted stand-in for a cluster (not Elasticsearch or OpenSearch): indices in a
    /// set, answers shaped like the documented REST API.
    fn scripted(
        distribution: Option<&'static str>,
        security: bool,
    ) -> impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static {
        let indices = Arc::new(Mutex::new(BTreeSet::from([
            "bk_acme_login_fix_search-old".to_owned(),
            "bk_acme_login_fix_search_other-x".to_owned(),
            "bk_acme_checkout_search-products".to_owned(),
        ])));
        move |req: &Recorded| {
            let mut set = indices.lock().expect("lock");
            let path = req.path.split('?').next().unwrap_or("");
            let whoami =
                path == "/_security/_authenticate" || path == "/_plugins/_security/authinfo";
            match (req.method.as_str(), path) {
                ("GET", "/") => {
                    let version = match distribution {
                        Some(d) => format!(r#"{{"number":"2.15.0","distribution":"{d}"}}"#),
                        None => r#"{"number":"8.15.0"}"#.to_owned(),
                    };
                    (200, format!(r#"{{"version":{version}}}"#))
                }
                ("GET", _) if whoami && security => (200, r#"{"username":"x"}"#.into()),
                ("GET", _) if whoami => (
                    500,
                    r#"{"error":{"reason":"Security must be explicitly enabled"}}"#.into(),
                ),
                ("GET", p) if p.starts_with("/_cat/indices/") => {
                    let pattern = p["/_cat/indices/".len()..].trim_end_matches('*');
                    let rows: Vec<String> = set
                        .iter()
                        .filter(|i| i.starts_with(pattern))
                        .map(|i| format!(r#"{{"index":"{i}"}}"#))
                        .collect();
                    (200, format!("[{}]", rows.join(",")))
                }
                ("PUT", p) if p.starts_with("/_") => (200, r#"{"created":true}"#.into()),
                ("DELETE", p) if p.starts_with("/_") => (404, r#"{"found":false}"#.into()),
                ("PUT", p) => {
                    set.insert(p[1..].to_owned());
                    (200, r#"{"acknowledged":true}"#.into())
                }
                ("DELETE", p) if set.remove(&p[1..]) => (200, r#"{"acknowledged":true}"#.into()),
                ("DELETE", _) => (
                    404,
                    r#"{"error":{"type":"index_not_found_exception"}}"#.into(),
                ),
                _ => (400, "{}".into()),
            }
        }
    }

    #[tokio::test]
    async fn provision_and_teardown_on_secured_elasticsearch_scripted_server() {
        let fake = FakeServer::start(scripted(None, true)).await;
        let url = fake.url.replace("http://", "http://elastic:pw@");
        let c = cfg(&url, &[("indices", "products,old")]);
        Elasticsearch
            .provision(&slice(), &c)
            .await
            .expect("provision");
        let addr = Elasticsearch.resolve(&slice(), &c).await.expect("resolve");
        assert_eq!(
            Elasticsearch.exists(&slice(), &c).await.expect("exists"),
            Some(true)
        );
        Elasticsearch
            .teardown(&slice(), &c)
            .await
            .expect("teardown");
        let p = "bk_acme_login_fix_search";
        let list = format!("GET /_cat/indices/{p}*?format=json&h=index");
        assert_eq!(
            fake.calls(),
            [
                call("GET /", Value::Null),
                call("GET /_security/_authenticate", Value::Null),
                call(
                    &format!("PUT /_security/role/{p}"),
                    json!({
                        "cluster": [],
                        "indices": [{"names": [p, format!("{p}-*")], "privileges": ["all"]}],
                        "metadata": {"binky": "slice"},
                    })
                ),
                call(
                    &format!("PUT /_security/user/{p}"),
                    json!({"password": "0123abcd", "roles": [p], "metadata": {"binky": "slice"}})
                ),
                call(&list, Value::Null),
                call(&format!("PUT /{p}-products"), json!({})),
                // resolve
                call("GET /", Value::Null),
                call("GET /_security/_authenticate", Value::Null),
                // exists
                call(&list, Value::Null),
                // teardown: user, role, then each index by its exact name
                call("GET /", Value::Null),
                call("GET /_security/_authenticate", Value::Null),
                call(&format!("DELETE /_security/user/{p}"), Value::Null),
                call(&format!("DELETE /_security/role/{p}"), Value::Null),
                call(&list, Value::Null),
                call(&format!("DELETE /{p}-old"), Value::Null),
                call(&format!("DELETE /{p}-products"), Value::Null),
            ]
        );
        let reqs = fake.requests();
        // The probe goes as the slice's user, everything else as admin.
        assert_eq!(
            reqs[0].header("authorization"),
            Some("Basic ZWxhc3RpYzpwdw==")
        );
        assert_ne!(
            reqs[7].header("authorization"),
            reqs[0].header("authorization")
        );
        let port = fake.url.rsplit(':').next().expect("port");
        assert_eq!(
            addr.url,
            format!("http://{p}:0123abcd@127.0.0.1:{port}/{p}")
        );
        assert_eq!(addr.tokens["prefix"], p);
        assert_eq!(
            addr.tokens["endpoint"],
            format!("http://{p}:0123abcd@127.0.0.1:{port}")
        );
        // The neighbours with a longer name were never touched.
        assert_eq!(
            Elasticsearch.list(&c).await.expect("list"),
            ["bk_acme_checkout_search", "bk_acme_login_fix_search_other"]
        );
    }

    #[tokio::test]
    async fn opensearch_uses_its_security_plugins_api_scripted_server() {
        let fake = FakeServer::start(scripted(Some("opensearch"), true)).await;
        let c = cfg(&fake.url.replace("http://", "http://admin:pw@"), &[]);
        Elasticsearch
            .provision(&slice(), &c)
            .await
            .expect("provision");
        Elasticsearch
            .teardown(&slice(), &c)
            .await
            .expect("teardown");
        let p = "bk_acme_login_fix_search";
        let api = "/_plugins/_security/api";
        assert_eq!(
            fake.calls(),
            [
                call("GET /", Value::Null),
                call("GET /_plugins/_security/authinfo", Value::Null),
                call(
                    &format!("PUT {api}/roles/{p}"),
                    json!({
                        "cluster_permissions": ["cluster_composite_ops"],
                        "index_permissions": [{
                            "index_patterns": [p, format!("{p}-*")],
                            "allowed_actions": ["indices_all"],
                        }],
                    })
                ),
                call(
                    &format!("PUT {api}/internalusers/{p}"),
                    json!({"password": "Bk_0123abcd", "attributes": {"binky": "slice"}})
                ),
                call(
                    &format!("PUT {api}/rolesmapping/{p}"),
                    json!({"users": [p]})
                ),
                call("GET /", Value::Null),
                call("GET /_plugins/_security/authinfo", Value::Null),
                call(&format!("DELETE {api}/internalusers/{p}"), Value::Null),
                call(&format!("DELETE {api}/rolesmapping/{p}"), Value::Null),
                call(&format!("DELETE {api}/roles/{p}"), Value::Null),
                call(
                    &format!("GET /_cat/indices/{p}*?format=json&h=index"),
                    Value::Null
                ),
                call(&format!("DELETE /{p}-old"), Value::Null),
            ]
        );
    }

    #[tokio::test]
    async fn without_security_the_world_gets_admin_urls_address_scripted_server() {
        let fake = FakeServer::start(scripted(None, false)).await;
        let c = cfg(&fake.url, &[]);
        Elasticsearch
            .provision(&slice(), &c)
            .await
            .expect("provision");
        let addr = Elasticsearch.resolve(&slice(), &c).await.expect("resolve");
        let port = fake.url.rsplit(':').next().expect("port");
        assert_eq!(
            addr.url,
            format!("http://127.0.0.1:{port}/bk_acme_login_fix_search")
        );
        assert!(!fake.lines().iter().any(|l| l.contains("/_security/role")));
        // An API key replaces admin_url's user and password.
        let keyed = cfg(
            &fake.url.replace("http://", "http://u:pw@"),
            &[("api_key", "k3y")],
        );
        Elasticsearch
            .provision(&slice(), &keyed)
            .await
            .expect("provision");
        let last = fake.requests().pop().expect("a request");
        assert_eq!(last.header("authorization"), Some("ApiKey k3y"));
    }

    #[tokio::test]
    async fn a_deleted_index_that_is_already_gone_is_fine() {
        // The listing still shows an index that a DELETE then finds gone (404).
        let fake = FakeServer::start(|req: &Recorded| match req.method.as_str() {
            "GET" if req.path == "/" => (200, r#"{"version":{"number":"7.17.0"}}"#.into()),
            "GET" if req.path.starts_with("/_cat/") => {
                (200, r#"[{"index":"bk_acme_login_fix_search-a"}]"#.into())
            }
            "GET" => (500, "{}".into()),
            _ => (
                404,
                r#"{"error":{"type":"index_not_found_exception"}}"#.into(),
            ),
        })
        .await;
        Elasticsearch
            .teardown(&slice(), &cfg(&fake.url, &[]))
            .await
            .expect("404 on delete is already gone");
    }

    #[tokio::test]
    async fn refused_credentials_name_the_settings_and_a_closed_port_is_unreachable() {
        let fake = FakeServer::start(|_: &Recorded| {
            (401, r#"{"error":{"type":"security_exception"}}"#.into())
        })
        .await;
        let c = cfg(&fake.url.replace("http://", "http://elastic:wrongpw@"), &[]);
        let err = Elasticsearch
            .provision(&slice(), &c)
            .await
            .expect_err("401");
        let text = err.to_string();
        assert!(err.transient(), "{text}");
        assert!(
            text.contains("admin_url") && text.contains("options.api_key"),
            "{text}"
        );
        assert!(!text.contains("wrongpw"), "{text}");

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let closed = cfg(&format!("http://127.0.0.1:{port}"), &[]);
        for err in [
            Elasticsearch
                .provision(&slice(), &closed)
                .await
                .expect_err("closed"),
            Elasticsearch
                .teardown(&slice(), &closed)
                .await
                .expect_err("closed"),
            Elasticsearch
                .resolve(&slice(), &closed)
                .await
                .expect_err("closed"),
        ] {
            assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
        }
    }

    #[tokio::test]
    async fn an_admin_without_security_rights_shares_its_credentials_scripted_server() {
        let fake = FakeServer::start(|req: &Recorded| match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/") => (200, r#"{"version":{"number":"8.15.0"}}"#.into()),
            // The admin authenticates; the slice's user does not exist.
            ("GET", "/_security/_authenticate")
                if req.header("authorization") == Some("Basic dTpwdw==") =>
            {
                (200, "{}".into())
            }
            ("GET", "/_security/_authenticate") => (401, "{}".into()),
            ("PUT", _) => (
                403,
                r#"{"error":{"type":"security_exception","reason":"action [cluster:admin/xpack/security/role/put] is unauthorized"}}"#.into(),
            ),
            _ => (200, "[]".into()),
        })
        .await;
        let c = cfg(&fake.url.replace("http://", "http://u:pw@"), &[]);
        Elasticsearch
            .provision(&slice(), &c)
            .await
            .expect("provision");
        let addr = Elasticsearch.resolve(&slice(), &c).await.expect("resolve");
        assert!(addr.url.starts_with("http://u:pw@"), "{}", addr.url);
    }
}
