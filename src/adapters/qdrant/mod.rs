//! The `qdrant` adapter: each slice is a collection on a shared Qdrant server, reached over
//! its REST API (default port 6333), with an access token of its own where the server can
//! scope one.
//!
//! # What a slice is
//! - The collection named after the slice (`bk_acme_login_fix_vec`; Qdrant allows
//!   `[a-zA-Z0-9_-]`, 255 bytes, and slice names are `[a-z0-9_]`, 63), plus, by binky 0.1.2's
//!   convention, any collection the world made named `<slice>__<something>`.
//! - With `options.size`, binky creates the collection (`distance` from `options.distance`,
//!   default `Cosine`); without it, provision only checks that the server answers and the
//!   application creates its collections itself.
//! - `${vec.url}` is `http://host:6333/<collection>` (binky 0.1.2's form, no credentials);
//!   tokens: `collection`, `endpoint` (`http://host:6333`, what a Qdrant client takes) and
//!   `api_key` (empty when the server has none).
//!
//! # Options
//! - `api_key`: the server's API key (or put it in admin_url's password,
//!   `http://:KEY@host:6333`). Sent as the `api-key` header, never in a URL.
//! - `size`: the vector size; binky creates the world's collection when it is set.
//! - `distance`: `Cosine` (default), `Euclid`, `Dot` or `Manhattan`.
//!
//! `admin_url` falls back to `$BINKY_QDRANT_URL`, then `http://localhost:6333`.
//!
//! # Which home made a slice
//! A point of binky's catalog collection [`CATALOG`] (payload `{"slice", "home"}`; see
//! [`crate::adapters::Maker`]), written when the home claims the slice (even one without a
//! collection yet) and deleted last at teardown.
//!
//! # Per-world credentials
//! Qdrant 1.9+ with `service.jwt_rbac` on accepts JSON web tokens signed (HS256) with its API
//! key, whose `access` claim lists collections. When an API key is configured, `${vec.api_key}`
//! is such a token, read-write on the world's collection only (`exp` fixed in the year 2100,
//! so the address is stable across resolves). `resolve` tries the token against the server
//! and uses it only when the server accepts it.
//!
//! # What it cannot guarantee
//! - A collection-scoped token cannot create collections (Qdrant grants that only globally):
//!   a world whose application creates its own collections — no `options.size` — gets the
//!   server's **own API key**, and so does a world on a server that refuses the token
//!   (before 1.9, or `jwt_rbac` off: `QDRANT__SERVICE__JWT_RBAC=true` turns it on). Worlds
//!   there are kept apart by collection name only; binky logs a warning saying so.
//! - A token stays valid until 2100 or until the server's API key changes: tearing a world
//!   down deletes its collection, not its token, which then opens only a collection of the
//!   same name (the same world, made again).
//! - Without an API key on the server, nothing is enforced: any client reaches every
//!   collection.
//! - Teardown deletes `<slice>__*` collections too; a slice whose own name is
//!   `<other slice>__…` (possible only with world or service names holding `__`) would be
//!   swept with the other.
//! - Not run against a real Qdrant server (none is installable on the machines binky is
//!   tested on): the unit tests below check names, tokens, the requests sent and the
//!   handling of canned answers from a scripted local HTTP server.

use std::collections::BTreeSet;

use hyper::Method;

use binky_controllers::url::percent_encode;

use super::http::{Endpoint, Http, Response};
use super::{Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

mod token;
pub use token::*;

/// Qdrant's REST port.
pub const DEFAULT_PORT: u16 = 6333;
/// Where the admin URL comes from when the service has none (binky 0.1.2's).
pub const ENV_URL: &str = super::AdapterKind::Qdrant.env_var();
/// The server when neither `admin_url` nor [`ENV_URL`] names one: the usual port here.
pub const DEFAULT_URL: &str = "http://localhost:6333";
/// The separator of a world's extra collections (`<slice>__embeddings`), binky 0.1.2's.
pub const SEP: &str = "__";
/// The expiry of every token binky signs: 2100-01-01T00:00:00Z.
pub const TOKEN_EXP: u64 = 4_102_444_800;
/// Qdrant's collection name limit.
const MAX_NAME: usize = 255;

/// The qdrant adapter.
pub struct Qdrant;

/// The distances Qdrant knows, as its API spells them.
const DISTANCES: &[&str] = &["Cosine", "Euclid", "Dot", "Manhattan"];
/// Logged once per server and reason when its worlds share the server's API key.
const SHARED: super::SharedWarning = super::SharedWarning {
    adapter: "qdrant",
    consequence: "worlds on this server get the server's own API key and are kept apart by collection name only",
};

/// What `options` ask for.
#[derive(Debug, PartialEq, Eq)]
struct Vectors {
    size: u64,
    distance: &'static str,
}

/// `options.size` and `options.distance`; `None` without a size.
fn vectors(cfg: &AdapterConfig) -> Result<Option<Vectors>> {
    let distance = match cfg.options.get("distance").map(|d| d.trim()) {
        None | Some("") => "Cosine",
        Some(d) => DISTANCES
            .iter()
            .copied()
            .find(|known| known.eq_ignore_ascii_case(d))
            .ok_or_else(|| {
                AdapterError::Config(format!(
                    "options.distance `{d}` is not one of {}",
                    DISTANCES.join(", ")
                ))
            })?,
    };
    let Some(size) = cfg
        .options
        .get("size")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    else {
        return Ok(None);
    };
    match size.parse::<u64>() {
        Ok(n) if n > 0 => Ok(Some(Vectors { size: n, distance })),
        _ => Err(AdapterError::Config(format!(
            "options.size `{size}` is not a vector size: write a positive whole number, e.g. \
             size = \"384\""
        ))),
    }
}

/// The slice's collection: its name, checked against Qdrant's rules and binky's `bk_`
/// (so teardown never deletes a collection binky did not name).
pub fn collection(slice: &Slice) -> Result<String> {
    let ok = slice.name.starts_with("bk_")
        && slice.name.len() <= MAX_NAME
        && slice
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(slice.name.clone())
    } else {
        Err(AdapterError::Config(format!(
            "`{}` cannot name a Qdrant collection: `bk_` then [a-zA-Z0-9_-], at most \
             {MAX_NAME} bytes",
            slice.name
        )))
    }
}

/// The shared server.
struct Server {
    /// The server, without credentials (the API key goes in a header).
    ep: Endpoint,
    api_key: Option<String>,
    http: Http,
}

impl Server {
    fn from_config(cfg: &AdapterConfig) -> Result<Server> {
        let mut ep = Endpoint::from_config(cfg, ENV_URL, DEFAULT_URL, DEFAULT_PORT)?;
        let api_key = cfg
            .options
            .get("api_key")
            .cloned()
            .or_else(|| ep.password.clone())
            .filter(|k| !k.is_empty());
        // Qdrant reads the key from `api-key`; a Basic header would only confuse it.
        ep.user = None;
        ep.password = None;
        Ok(Server {
            ep,
            api_key,
            http: Http::new(),
        })
    }

    /// One request with `key` (the admin's, or a world's token) as `api-key`.
    async fn call_as(
        &self,
        key: Option<&str>,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        let headers: Vec<(&str, &str)> = key.map(|k| ("api-key", k)).into_iter().collect();
        self.http.call(&self.ep, method, path, body, &headers).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response> {
        self.call_as(self.api_key.as_deref(), method, path, body)
            .await
    }

    /// A non-2xx answer as an adapter error.
    fn error(&self, doing: &str, resp: &Response) -> AdapterError {
        let server = self.ep.server.clone();
        let text = scrub(&resp.text(300), self.api_key.as_deref());
        match resp.status {
            401 | 403 => AdapterError::Unreachable {
                server,
                detail: format!(
                    "{doing}: the server refused the API key (HTTP {}: {text}); set the \
                     server's key as options.api_key or in admin_url \
                     (http://:KEY@HOST:{DEFAULT_PORT})",
                    resp.status
                ),
            },
            502..=504 => AdapterError::Unreachable {
                server,
                detail: format!("{doing}: HTTP {} {text}", resp.status),
            },
            _ => AdapterError::Server {
                server,
                detail: format!("{doing}: HTTP {} {text}", resp.status),
            },
        }
    }

    /// Every collection's name.
    async fn collections(&self) -> Result<Vec<String>> {
        let resp = self.call(Method::GET, "/collections", None).await?;
        if !resp.ok() {
            return Err(self.error("listing collections", &resp));
        }
        let doc = resp.json(&self.ep.server)?;
        Ok(doc["result"]["collections"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// binky's catalog on the server: a collection whose points, one per slice, record the
/// home that made it (payload `{"slice": …, "home": …}`; a one-dimensional vector, as
/// every point needs one). Not `bk_…`, so no slice's collections match it. Qdrant has no
/// conditional write: two homes claiming one slice at once (each adopting one made before
/// homes had an identity) — the last write wins, and the loser reads it back.
pub const CATALOG: &str = "binky_catalog";

/// The catalog point's id of the slice `name`: a UUID made of its name's SHA-256.
pub fn catalog_point(name: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("binky slice {name}").as_bytes());
    let hex: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

impl Server {
    /// The home the catalog records for the slice `name`.
    async fn marked_home(&self, name: &str) -> Result<Option<String>> {
        let path = format!("{}/points/{}", path_of(CATALOG), catalog_point(name));
        let resp = self.call(Method::GET, &path, None).await?;
        if resp.status == 404 {
            return Ok(None);
        }
        if !resp.ok() {
            return Err(self.error("reading binky's catalog", &resp));
        }
        let doc = resp.json(&self.ep.server)?;
        Ok(doc["result"]["payload"]["home"].as_str().map(str::to_owned))
    }

    /// Records `home` as the slice `name`'s maker (the catalog made when missing).
    async fn mark(&self, name: &str, home: &str) -> Result<()> {
        let body = serde_json::json!({ "vectors": { "size": 1, "distance": "Dot" } });
        let resp = self
            .call(Method::PUT, &path_of(CATALOG), Some(&body))
            .await?;
        let there = resp.status == 409 || resp.text(300).contains("already exists");
        if !resp.ok() && !there {
            return Err(self.error("making binky's catalog", &resp));
        }
        let body = serde_json::json!({ "points": [{
            "id": catalog_point(name),
            "vector": [1.0],
            "payload": { "slice": name, "home": home },
        }] });
        let path = format!("{}/points?wait=true", path_of(CATALOG));
        let resp = self.call(Method::PUT, &path, Some(&body)).await?;
        if !resp.ok() {
            return Err(self.error("claiming the slice in binky's catalog", &resp));
        }
        Ok(())
    }

    /// Forgets the slice `name` in the catalog (404, no catalog: nothing to forget).
    async fn forget(&self, name: &str) -> Result<()> {
        let body = serde_json::json!({ "points": [catalog_point(name)] });
        let path = format!("{}/points/delete?wait=true", path_of(CATALOG));
        let resp = self.call(Method::POST, &path, Some(&body)).await?;
        if resp.ok() || resp.status == 404 {
            return Ok(());
        }
        Err(self.error("removing the slice from binky's catalog", &resp))
    }
}

fn scrub(text: &str, key: Option<&str>) -> String {
    super::scrub(text, key)
}

fn path_of(collection: &str) -> String {
    format!("/collections/{}", percent_encode(collection))
}

/// Is `name` the slice's collection or one of its `<slice>__*` ones?
fn owned(slice_collection: &str, name: &str) -> bool {
    name == slice_collection
        || name
            .strip_prefix(slice_collection)
            .is_some_and(|rest| rest.starts_with(SEP))
}

#[async_trait::async_trait]
impl Adapter for Qdrant {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Qdrant)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let name = collection(slice)?;
        let wanted = vectors(cfg)?;
        let server = Server::from_config(cfg)?;
        let Some(v) = wanted else {
            // The application owns its collections' schema: only check the server.
            server.collections().await?;
            return Ok(());
        };
        let path = path_of(&name);
        let resp = server.call(Method::GET, &path, None).await?;
        if resp.ok() {
            return Ok(());
        }
        if resp.status != 404 {
            return Err(server.error(&format!("looking for collection {name}"), &resp));
        }
        let body = serde_json::json!({
            "vectors": { "size": v.size, "distance": v.distance }
        });
        let resp = server.call(Method::PUT, &path, Some(&body)).await?;
        // Someone made it between the two calls: fine.
        let raced = resp.status == 409 || resp.text(300).contains("already exists");
        if resp.ok() || raced {
            return Ok(());
        }
        Err(server.error(&format!("creating collection {name}"), &resp))
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        let name = collection(slice)?;
        let server = Server::from_config(cfg)?;
        let path = path_of(&name);
        let api_key = match server.api_key.as_deref() {
            None => String::new(),
            Some(admin_key) => {
                let token = collection_token(admin_key, &name, TOKEN_EXP);
                let resp = server
                    .call_as(Some(&token), Method::GET, &path, None)
                    .await?;
                match resp.status {
                    200..=299 => token,
                    404 => {
                        SHARED.warn(
                            &server.ep.server,
                            "binky creates a world's collection only with options.size, \
                             and a per-world token cannot create collections",
                        );
                        admin_key.to_owned()
                    }
                    401 | 403 => {
                        SHARED.warn(
                            &server.ep.server,
                            "the server refused a per-world token (Qdrant before 1.9, or \
                             service.jwt_rbac off: QDRANT__SERVICE__JWT_RBAC=true turns \
                             it on)",
                        );
                        admin_key.to_owned()
                    }
                    _ => return Err(server.error(&format!("trying the token for {name}"), &resp)),
                }
            }
        };
        Ok(Address::new(
            server.ep.url(&format!("/{}", percent_encode(&name))),
            [
                ("collection", name),
                ("endpoint", server.ep.url("")),
                ("api_key", api_key),
            ],
        ))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let name = collection(slice)?;
        let server = Server::from_config(cfg)?;
        for doomed in server
            .collections()
            .await?
            .into_iter()
            .filter(|c| owned(&name, c))
        {
            let resp = server.call(Method::DELETE, &path_of(&doomed), None).await?;
            // 404: already gone.
            if !resp.ok() && resp.status != 404 {
                return Err(server.error(&format!("deleting collection {doomed}"), &resp));
            }
        }
        // Its mark last: a teardown cut short before this is still its home's to finish.
        server.forget(&name).await
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        let name = collection(slice)?;
        let server = Server::from_config(cfg)?;
        if let Some(home) = server.marked_home(&name).await? {
            return Ok(Maker::Home(home));
        }
        let any = server.collections().await?.iter().any(|c| owned(&name, c));
        Ok(if any { Maker::Unmarked } else { Maker::Absent })
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        let name = collection(slice)?;
        super::check_home(home)?;
        let server = Server::from_config(cfg)?;
        if let Some(found) = server.marked_home(&name).await? {
            return Ok(Maker::Home(found));
        }
        // A slice without a collection yet is marked too: its name is its all the same.
        server.mark(&name, home).await?;
        Ok(match server.marked_home(&name).await? {
            Some(h) => Maker::Home(h),
            None => Maker::Unmarked,
        })
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let server = Server::from_config(cfg)?;
        let all: BTreeSet<String> = server
            .collections()
            .await?
            .into_iter()
            .filter(|c| c.starts_with("bk_"))
            .collect();
        // A world's `<slice>__*` collections belong to the slice, not beside it.
        Ok(all
            .iter()
            .filter(|c| !all.iter().any(|other| *c != other && owned(other, c)))
            .cloned()
            .collect())
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        let name = collection(slice)?;
        // Without a size the application makes the collection when it likes: its
        // absence says nothing.
        if vectors(cfg)?.is_none() {
            return Ok(None);
        }
        let server = Server::from_config(cfg)?;
        let resp = server.call(Method::GET, &path_of(&name), None).await?;
        match resp.status {
            200..=299 => Ok(Some(true)),
            404 => Ok(Some(false)),
            _ => Err(server.error(&format!("looking for collection {name}"), &resp)),
        }
    }
}

#[cfg(test)]
mod tests;
