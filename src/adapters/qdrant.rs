//! The `qdrant` adapter: each slice is a collection on a shared Qdrant server, reached over
//! its REST API (default port 6333), with an access token of its own where the server can
//! scope one.
//!
//! # What a slice is
//! - The collection named after the slice (`bk_acme_login_fix_vec`; Qdrant allows
//!   `[a-zA-Z0-9_-]`, 255 bytes, and slice names are `[a-z0-9_]`, 63), plus, by binky 0.1.2's
//!   convention, any collection the world made named `<slice>__<something>`.
//! - With `options.size`, binky creates the collection (`distance` from `options.distance`,
//!   default `Cosine`); without it, provision only checks that the server answers (as 0.1.2
//!   did) and the application creates its collections itself.
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
//! `admin_url` falls back to `$BINKY_QDRANT_URL`, then `http://localhost:6333` (0.1.2's).
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
//!   server's **own API key**, as in 0.1.2, and so does a world on a server that refuses the
//!   token (before 1.9, or `jwt_rbac` off: `QDRANT__SERVICE__JWT_RBAC=true` turns it on).
//!   Worlds there are kept apart by collection name only; binky logs a warning saying so.
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

use std::collections::{BTreeMap, BTreeSet};

use hyper::Method;
use sha2::{Digest, Sha256};

use binky_controllers::url::percent_encode;

use super::http::{Endpoint, Http, Response};
use super::{Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice};

/// Qdrant's REST port.
pub const DEFAULT_PORT: u16 = 6333;
/// Where the admin URL comes from when the service has none (binky 0.1.2's).
pub const ENV_URL: &str = "BINKY_QDRANT_URL";
/// binky 0.1.2's default server.
pub const DEFAULT_URL: &str = "http://localhost:6333";
/// The separator of a world's extra collections (`<slice>__embeddings`), 0.1.2's.
pub const SEP: &str = "__";
/// The expiry of every token binky signs: 2100-01-01T00:00:00Z.
pub const TOKEN_EXP: u64 = 4_102_444_800;
/// Qdrant's collection name limit.
const MAX_NAME: usize = 255;

/// The qdrant adapter.
pub struct Qdrant;

/// The distances Qdrant knows, as its API spells them.
const DISTANCES: &[&str] = &["Cosine", "Euclid", "Dot", "Manhattan"];

/// What `options` ask for.
#[derive(Debug, PartialEq, Eq)]
struct Vectors {
    size: u64,
    distance: &'static str,
}

/// `options.size` and `options.distance`; `None` without a size.
fn vectors(cfg: &AdapterConfig) -> Result<Option<Vectors>, AdapterError> {
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
pub fn collection(slice: &Slice) -> Result<String, AdapterError> {
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
    ) -> Result<Response, AdapterError> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        let headers: Vec<(&str, &str)> = key.map(|k| ("api-key", k)).into_iter().collect();
        self.http.call(&self.ep, method, path, body, &headers).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response, AdapterError> {
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
    async fn collections(&self) -> Result<Vec<String>, AdapterError> {
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

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Base64url without padding (RFC 7515's encoding for JWTs).
fn base64url(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A JWT for Qdrant's RBAC, signed HS256 with the server's API key: read-write on
/// `collection` only, expiring at `exp` (seconds since the epoch).
pub fn collection_token(api_key: &str, collection: &str, exp: u64) -> String {
    let header = r#"{"alg":"HS256","typ":"JWT"}"#;
    // Written by hand so the bytes (and so the token) never depend on a map's order.
    let claims = format!(
        r#"{{"access":[{{"collection":{},"access":"rw"}}],"exp":{exp}}}"#,
        serde_json::Value::String(collection.to_owned())
    );
    let signing_input = format!(
        "{}.{}",
        base64url(header.as_bytes()),
        base64url(claims.as_bytes())
    );
    let signature = hmac_sha256(api_key.as_bytes(), signing_input.as_bytes());
    format!("{signing_input}.{}", base64url(&signature))
}

/// Warn once per server and reason that its worlds share the server's API key.
fn warn_shared(server: &str, why: &str) {
    super::warn_shared_once(
        "qdrant",
        server,
        why,
        "worlds on this server get the server's own API key and are kept apart by collection name only",
    );
}

impl Adapter for Qdrant {
    fn names(&self) -> &'static [&'static str] {
        &["qdrant"]
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
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
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
                            warn_shared(
                                &server.ep.server,
                                "binky creates a world's collection only with options.size, \
                                 and a per-world token cannot create collections",
                            );
                            admin_key.to_owned()
                        }
                        401 | 403 => {
                            warn_shared(
                                &server.ep.server,
                                "the server refused a per-world token (Qdrant before 1.9, or \
                                 service.jwt_rbac off: QDRANT__SERVICE__JWT_RBAC=true turns \
                                 it on)",
                            );
                            admin_key.to_owned()
                        }
                        _ => {
                            return Err(server.error(&format!("trying the token for {name}"), &resp))
                        }
                    }
                }
            };
            Ok(Address {
                url: server.ep.url(&format!("/{}", percent_encode(&name))),
                tokens: BTreeMap::from([
                    ("collection".to_owned(), name),
                    ("endpoint".to_owned(), server.ep.url("")),
                    ("api_key".to_owned(), api_key),
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
            Ok(())
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
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
        })
    }

    fn exists<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Option<bool>, AdapterError>> {
        Box::pin(async move {
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
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::http_fake::{cfg, FakeServer, Recorded};
    use super::*;

    fn slice() -> Slice {
        Slice {
            name: "bk_acme_login_fix_vec".into(),
            secret: "0123abcd".into(),
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let cases: [(Vec<u8>, Vec<u8>, &str); 6] = [
            (
                vec![0x0b; 20],
                b"Hi There".to_vec(),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe".to_vec(),
                b"what do ya want for nothing?".to_vec(),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                vec![0xaa; 20],
                vec![0xdd; 50],
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            ),
            (
                (1..=25).collect(),
                vec![0xcd; 50],
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            ),
            (
                vec![0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
            (
                vec![0xaa; 131],
                b"This is a test using a larger than block-size key and a larger than \
                  block-size data. The key needs to be hashed before being used by the \
                  HMAC algorithm."
                    .to_vec(),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
            ),
        ];
        for (key, data, mac) in cases {
            assert_eq!(hex(&hmac_sha256(&key, &data)), mac);
        }
    }

    #[test]
    fn base64url_has_no_padding_and_url_safe_letters() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn the_token_is_an_hs256_jwt_scoped_to_the_collection() {
        let token = collection_token("server-key", "bk_acme_login_fix_vec", TOKEN_EXP);
        // Computed independently with Python's hmac and base64 modules.
        assert_eq!(
            token,
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
             eyJhY2Nlc3MiOlt7ImNvbGxlY3Rpb24iOiJia19hY21lX2xvZ2luX2ZpeF92ZWMiLCJhY2Nlc3MiOiJydyJ9XSwiZXhwIjo0MTAyNDQ0ODAwfQ.\
             TI1Vv0BaWzM0fj2JhsoQuk2-VUoLBu-HY3AYj8b5Yb0"
        );
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], base64url(br#"{"alg":"HS256","typ":"JWT"}"#));
        assert_eq!(
            parts[1],
            base64url(
                br#"{"access":[{"collection":"bk_acme_login_fix_vec","access":"rw"}],"exp":4102444800}"#
            )
        );
        let mac = hmac_sha256(
            b"server-key",
            format!("{}.{}", parts[0], parts[1]).as_bytes(),
        );
        assert_eq!(parts[2], base64url(&mac));
        // Stable: resolving twice gives the same address.
        assert_eq!(
            token,
            collection_token("server-key", "bk_acme_login_fix_vec", TOKEN_EXP)
        );
        assert_ne!(
            token,
            collection_token("server-key", "bk_acme_checkout_vec", TOKEN_EXP)
        );
    }

    #[test]
    fn collection_names_and_options_are_checked() {
        assert_eq!(
            collection(&slice()).expect("valid"),
            "bk_acme_login_fix_vec"
        );
        for bad in ["bk a", "bk/a", "", "products", &"bk_".repeat(86)] {
            let s = Slice {
                name: bad.into(),
                secret: String::new(),
            };
            assert!(collection(&s).is_err(), "{bad}");
        }
        let c = |o: &[(&str, &str)]| vectors(&cfg("http://h", o));
        assert_eq!(c(&[]).expect("ok"), None);
        assert_eq!(
            c(&[("size", "384")]).expect("ok"),
            Some(Vectors {
                size: 384,
                distance: "Cosine"
            })
        );
        assert_eq!(
            c(&[("size", "3"), ("distance", "dot")]).expect("ok"),
            Some(Vectors {
                size: 3,
                distance: "Dot"
            })
        );
        for bad in [
            &[("size", "0")][..],
            &[("size", "x")],
            &[("distance", "cosin")],
        ] {
            let err = c(bad).expect_err("bad option").to_string();
            assert!(err.contains("options."), "{err}");
        }
        assert!(owned("bk_a", "bk_a"));
        assert!(owned("bk_a", "bk_a__emb"));
        assert!(!owned("bk_a", "bk_ab"));
        assert!(!owned("bk_a", "bk_a_b"));
    }

    /// A scripted stand-in for Qdrant (not Qdrant): collections in a set, answers shaped
    /// like Qdrant's documented REST API.
    fn scripted(
        admin_key: &'static str,
        rbac: bool,
    ) -> impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static {
        let existing = Arc::new(Mutex::new(BTreeSet::from([
            "bk_acme_login_fix_vec__emb".to_owned(),
            "bk_acme_checkout_vec".to_owned(),
        ])));
        move |req: &Recorded| {
            let key = req.header("api-key").unwrap_or("");
            let token_ok = rbac && key.starts_with("eyJ");
            if key != admin_key && !token_ok {
                return (403, r#"{"status":{"error":"Invalid api-key"}}"#.into());
            }
            let mut set = existing.lock().expect("lock");
            let name = req.path.strip_prefix("/collections/").map(str::to_owned);
            match (req.method.as_str(), name) {
                ("GET", None) => {
                    let list: Vec<String> =
                        set.iter().map(|n| format!(r#"{{"name":"{n}"}}"#)).collect();
                    (
                        200,
                        format!(r#"{{"result":{{"collections":[{}]}}}}"#, list.join(",")),
                    )
                }
                ("GET", Some(n)) if set.contains(&n) => (200, r#"{"result":{}}"#.into()),
                ("GET", Some(_)) => (404, r#"{"status":{"error":"Not found"}}"#.into()),
                ("PUT", Some(n)) => {
                    set.insert(n);
                    (200, r#"{"result":true}"#.into())
                }
                ("DELETE", Some(n)) if set.remove(&n) => (200, r#"{"result":true}"#.into()),
                ("DELETE", Some(_)) => (404, r#"{"status":{"error":"Not found"}}"#.into()),
                _ => (400, "{}".into()),
            }
        }
    }

    #[tokio::test]
    async fn provision_and_teardown_send_exactly_these_requests_scripted_server() {
        let fake = FakeServer::start(scripted("k3y", true)).await;
        let c = cfg(
            &fake.url,
            &[("api_key", "k3y"), ("size", "384"), ("distance", "dot")],
        );
        Qdrant.provision(&slice(), &c).await.expect("provision");
        Qdrant
            .provision(&slice(), &c)
            .await
            .expect("provision again");
        let addr = Qdrant.resolve(&slice(), &c).await.expect("resolve");
        assert_eq!(
            Qdrant.exists(&slice(), &c).await.expect("exists"),
            Some(true)
        );
        Qdrant.teardown(&slice(), &c).await.expect("teardown");
        Qdrant.teardown(&slice(), &c).await.expect("teardown again");
        let none = serde_json::Value::Null;
        let call = |line: &str, body: &serde_json::Value| (line.to_owned(), body.clone());
        assert_eq!(
            fake.calls(),
            [
                call("GET /collections/bk_acme_login_fix_vec", &none),
                call(
                    "PUT /collections/bk_acme_login_fix_vec",
                    &serde_json::json!({"vectors": {"size": 384, "distance": "Dot"}})
                ),
                call("GET /collections/bk_acme_login_fix_vec", &none),
                call("GET /collections/bk_acme_login_fix_vec", &none),
                call("GET /collections/bk_acme_login_fix_vec", &none),
                call("GET /collections", &none),
                call("DELETE /collections/bk_acme_login_fix_vec", &none),
                call("DELETE /collections/bk_acme_login_fix_vec__emb", &none),
                call("GET /collections", &none),
            ]
        );
        let reqs = fake.requests();
        // The admin key on admin calls, the world's token on the probe; never Basic auth.
        assert_eq!(reqs[0].header("api-key"), Some("k3y"));
        let token = collection_token("k3y", "bk_acme_login_fix_vec", TOKEN_EXP);
        assert_eq!(reqs[3].header("api-key"), Some(token.as_str()));
        assert!(reqs.iter().all(|r| r.header("authorization").is_none()));
        let port = fake.url.rsplit(':').next().expect("port");
        assert_eq!(
            addr.url,
            format!("http://127.0.0.1:{port}/bk_acme_login_fix_vec")
        );
        assert_eq!(addr.tokens["collection"], "bk_acme_login_fix_vec");
        assert_eq!(addr.tokens["endpoint"], format!("http://127.0.0.1:{port}"));
        assert_eq!(addr.tokens["api_key"], token);
        // The other world's collection is left alone.
        assert_eq!(
            Qdrant.list(&c).await.expect("list"),
            ["bk_acme_checkout_vec"]
        );
    }

    #[tokio::test]
    async fn without_a_size_or_rbac_the_world_gets_the_servers_key_scripted_server() {
        let fake = FakeServer::start(scripted("k3y", false)).await;
        // The key in admin_url's password works as options.api_key does.
        let url = fake.url.replace("http://", "http://:k3y@");
        let sized = cfg(&url, &[("size", "8")]);
        Qdrant.provision(&slice(), &sized).await.expect("provision");
        let addr = Qdrant.resolve(&slice(), &sized).await.expect("resolve");
        assert_eq!(addr.tokens["api_key"], "k3y", "rbac off: the server's key");
        assert!(!addr.url.contains("k3y"), "{}", addr.url);

        let fake = FakeServer::start(scripted("k3y", true)).await;
        let unsized_cfg = cfg(&fake.url, &[("api_key", "k3y")]);
        Qdrant
            .provision(&slice(), &unsized_cfg)
            .await
            .expect("provision");
        let addr = Qdrant
            .resolve(&slice(), &unsized_cfg)
            .await
            .expect("resolve");
        assert_eq!(
            addr.tokens["api_key"], "k3y",
            "no collection: the server's key"
        );
        assert_eq!(
            fake.lines()[0],
            "GET /collections",
            "only a reachability check"
        );
        assert_eq!(
            Qdrant.exists(&slice(), &unsized_cfg).await.expect("exists"),
            None
        );

        let fake_open = FakeServer::start(scripted("", false)).await;
        let open = cfg(&fake_open.url, &[]);
        let addr = Qdrant.resolve(&slice(), &open).await.expect("resolve");
        assert_eq!(
            addr.tokens["api_key"], "",
            "no key on the server, none to give"
        );
    }

    #[tokio::test]
    async fn a_refused_key_names_the_setting_and_a_closed_port_is_unreachable() {
        let fake = FakeServer::start(scripted("right-key", false)).await;
        let c = cfg(&fake.url, &[("api_key", "wrong-key")]);
        let err = Qdrant.provision(&slice(), &c).await.expect_err("403");
        let text = err.to_string();
        assert!(err.transient(), "{text}");
        assert!(
            text.contains("options.api_key") && text.contains("admin_url"),
            "{text}"
        );
        assert!(!text.contains("wrong-key"), "{text}");

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let closed = cfg(&format!("http://127.0.0.1:{port}"), &[("api_key", "k")]);
        for err in [
            Qdrant
                .provision(&slice(), &closed)
                .await
                .expect_err("closed"),
            Qdrant
                .teardown(&slice(), &closed)
                .await
                .expect_err("closed"),
        ] {
            assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
        }
    }

    #[tokio::test]
    async fn a_server_error_is_permanent_with_the_servers_words_scripted_server() {
        let fake = FakeServer::start(|req: &Recorded| match req.method.as_str() {
            "GET" if req.path == "/collections" => (
                200,
                r#"{"result":{"collections":[{"name":"bk_acme_login_fix_vec"}]}}"#.into(),
            ),
            _ => (
                500,
                r#"{"status":{"error":"Service internal error: disk full"}}"#.into(),
            ),
        })
        .await;
        let c = cfg(&fake.url, &[]);
        let err = Qdrant.teardown(&slice(), &c).await.expect_err("500");
        assert!(matches!(err, AdapterError::Server { .. }), "{err}");
        assert!(err.to_string().contains("disk full"), "{err}");
    }
}
