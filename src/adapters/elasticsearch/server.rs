//! The cluster as binky talks to it: its flavour, security, and the index, role and user calls.

use super::*;

/// The cluster, from `admin_url` and `options.api_key`.
pub(super) struct Server {
    pub(super) ep: Endpoint,
    /// `ApiKey …`, when options.api_key is set.
    pub(super) authorization: Option<String>,
    pub(super) http: Http,
    /// Strings no message may carry.
    pub(super) secrets: Vec<String>,
}

impl Server {
    pub(super) fn from_config(cfg: &AdapterConfig) -> Result<Server> {
        let mut ep = Endpoint::from_config(cfg, ENV_URL, DEFAULT_URL, DEFAULT_PORT)?;
        let api_key = cfg.option("api_key").map(str::to_owned);
        let mut secrets: Vec<String> = ep.password.iter().cloned().collect();
        secrets.extend(api_key.iter().cloned());
        secrets.retain(|s| !s.is_empty());
        if api_key.is_some() {
            // A request carries one authorization header: the key, given on purpose, wins
            // over admin_url's user and password.
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

    pub(super) fn scrub(&self, text: &str, extra: &[&str]) -> String {
        crate::adapters::scrub_with(text, &self.secrets, extra)
    }

    /// One admin request.
    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response> {
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
    pub(super) async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        doing: &str,
        extra: &[&str],
    ) -> Result<Response> {
        let gone_ok = method == Method::DELETE;
        let resp = self.call(method, path, body).await?;
        if resp.ok() || (gone_ok && resp.status == 404) {
            return Ok(resp);
        }
        Err(self.error(doing, &resp, extra))
    }

    pub(super) fn error(&self, doing: &str, resp: &Response, extra: &[&str]) -> AdapterError {
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
    pub(super) async fn flavour(&self) -> Result<Flavour> {
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
    pub(super) fn whoami(flavour: Flavour) -> &'static str {
        match flavour {
            Flavour::Elasticsearch => "/_security/_authenticate",
            Flavour::OpenSearch => "/_plugins/_security/authinfo",
        }
    }

    /// Is security on? (Off, Elasticsearch answers 500 "Security must be explicitly
    /// enabled" and OpenSearch 400/404 "no handler found".)
    pub(super) async fn security(&self, flavour: Flavour) -> Result<bool> {
        let resp = self.call(Method::GET, Self::whoami(flavour), None).await?;
        match resp.status {
            200..=299 => Ok(true),
            401 | 429 | 502..=504 => Err(self.error("checking security", &resp, &[])),
            _ => Ok(false),
        }
    }

    /// The slice's role and user (made or rewritten); `Ok(false)` when admin_url's user may
    /// not manage them.
    pub(super) async fn ensure_user(
        &self,
        flavour: Flavour,
        slice: &Slice,
        prefix: &str,
    ) -> Result<bool> {
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
                SHARED.warn(
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
    pub(super) async fn remove_user(&self, flavour: Flavour, slice: &Slice) -> Result<()> {
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
    pub(super) async fn indices(&self, pattern_prefix: &str) -> Result<Vec<String>> {
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

    /// The home binky's catalog records for the slice `name` (`GET`, 404: none).
    pub(super) async fn marked_home(&self, name: &str) -> Result<Option<String>> {
        let resp = self.call(Method::GET, &catalog_doc(name), None).await?;
        if resp.status == 404 {
            return Ok(None);
        }
        if !resp.ok() {
            return Err(self.error("reading binky's catalog", &resp, &[]));
        }
        let doc = resp.json(&self.ep.server)?;
        Ok(doc["_source"]["home"].as_str().map(str::to_owned))
    }

    /// Records `home` as the slice `name`'s maker unless a home is recorded already
    /// (`_create`: of two homes claiming at once, one makes the document, the other gets a
    /// conflict). The catalog index is made first when it is missing.
    pub(super) async fn claim(&self, name: &str, home: &str) -> Result<()> {
        let resp = self
            .call(Method::PUT, &format!("/{CATALOG}"), Some(&json!({})))
            .await?;
        let there =
            resp.status == 400 && resp.text(400).contains("resource_already_exists_exception");
        if !resp.ok() && !there {
            return Err(self.error("making binky's catalog", &resp, &[]));
        }
        let path = format!("/{CATALOG}/_create/{}?refresh=true", percent_encode(name));
        let resp = self
            .call(Method::PUT, &path, Some(&json!({ "home": home })))
            .await?;
        if resp.ok() || resp.status == 409 {
            return Ok(());
        }
        Err(self.error("claiming the slice in binky's catalog", &resp, &[]))
    }

    /// Forgets the slice `name` in binky's catalog (its mark goes last at teardown).
    pub(super) async fn forget(&self, name: &str) -> Result<()> {
        self.expect(
            Method::DELETE,
            &catalog_doc(name),
            None,
            "removing the slice from binky's catalog",
            &[],
        )
        .await
        .map(|_| ())
    }

    /// The prefix's indices, exactly.
    pub(super) async fn owned(&self, prefix: &str) -> Result<Vec<String>> {
        let mut all = self.indices(prefix).await?;
        all.retain(|i| owned(prefix, i));
        all.sort();
        Ok(all)
    }
}

/// binky's catalog on the cluster: an index whose documents, one per slice (its name the
/// document's id), record the home that made it (`{"home": "<id>"}`). Not `bk_…`, so no
/// slice's prefix matches it.
pub(super) const CATALOG: &str = "binky_catalog";

/// The catalog document of the slice `name`.
pub(super) fn catalog_doc(name: &str) -> String {
    format!("/{CATALOG}/_doc/{}", percent_encode(name))
}
