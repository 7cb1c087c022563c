//! The small HTTP client behind the REST adapters (ClickHouse, RabbitMQ, Qdrant,
//! Elasticsearch/OpenSearch): one request at a time, JSON or text bodies, credentials from
//! the admin URL's userinfo sent as a Basic `authorization` header (never in the request
//! line), `http://` and `https://` (ring + the system's roots), a time limit per call.
//!
//! # Guarantees
//! - A refused or timed-out connection is [`AdapterError::Unreachable`] (retried with
//!   backoff); any answer, even 500, is returned to the caller, who decides.
//! - Messages name the server as `scheme://host:port`, never its credentials.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use binky_controllers::url::{host_port, percent_decode, percent_encode, Url};

use super::{redact, AdapterConfig, AdapterError, Result};

/// How long one call may take, connection included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP endpoint from an admin URL: `http://user:pw@host:8123/base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `http` or `https`.
    pub scheme: String,
    /// `host:port` (port filled in from the scheme's default when absent).
    pub authority: String,
    /// The path prefix every request goes under, without a trailing `/` (often empty).
    pub base_path: String,
    /// The user from the userinfo, percent-decoded.
    pub user: Option<String>,
    /// The password from the userinfo, percent-decoded.
    pub password: Option<String>,
    /// `scheme://host:port`: for messages.
    pub server: String,
}

impl Endpoint {
    /// Parse an admin URL; `default_port` fills a missing port.
    pub fn parse(url: &str, default_port: u16) -> Result<Endpoint> {
        let server = redact(url);
        let Some(parts) = Url::parse(url) else {
            return Err(AdapterError::Config(
                "admin_url is not a URL: write it as http://USER:PASSWORD@HOST:PORT".into(),
            ));
        };
        let scheme = parts.scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(AdapterError::Config(format!(
                "admin_url `{server}` must be an http:// or https:// URL"
            )));
        }
        let host = parts.host;
        if host.is_empty() {
            return Err(AdapterError::Config(format!(
                "admin_url `{server}` names no host"
            )));
        }
        // Unbracketed, `fe80::1` ends in part of the address, not in a port.
        let has_port = host_port(host).is_some_and(|(h, p)| {
            p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && !h.ends_with(':')
        });
        let authority = if has_port {
            host.to_owned()
        } else {
            format!("{host}:{default_port}")
        };
        let user = parts.user().map(percent_decode);
        let password = parts.password().map(percent_decode);
        Ok(Endpoint {
            server: format!("{scheme}://{authority}"),
            scheme,
            authority,
            base_path: parts.path().trim_end_matches('/').to_owned(),
            user: user.filter(|u| !u.is_empty()),
            password,
        })
    }

    /// The endpoint of `admin_url` (or of the environment variable `env`), else of
    /// `default_url`.
    pub fn from_config(
        cfg: &AdapterConfig,
        env: &str,
        default_url: &str,
        default_port: u16,
    ) -> Result<Endpoint> {
        let url = cfg
            .admin_url_or_env(env)
            .unwrap_or_else(|| default_url.to_owned());
        Endpoint::parse(&url, default_port)
    }

    /// The same endpoint with other credentials (a slice's own user).
    pub fn with_credentials(&self, user: &str, password: &str) -> Endpoint {
        Endpoint {
            user: Some(user.to_owned()),
            password: Some(password.to_owned()),
            ..self.clone()
        }
    }

    /// `scheme://host:port` plus `path` (which starts with `/`), with no credentials.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}://{}{}{}",
            self.scheme, self.authority, self.base_path, path
        )
    }

    /// `scheme://user:password@host:port` plus `path`: an address for a service.
    pub fn url_with_credentials(&self, path: &str) -> String {
        match &self.user {
            Some(u) => format!(
                "{}://{}:{}@{}{}{}",
                self.scheme,
                percent_encode(u),
                percent_encode(self.password.as_deref().unwrap_or("")),
                self.authority,
                self.base_path,
                path
            ),
            None => self.url(path),
        }
    }

    fn authorization(&self) -> Option<String> {
        use base64::Engine as _;
        let user = self.user.as_deref()?;
        let raw = format!("{user}:{}", self.password.as_deref().unwrap_or(""));
        let encoded = base64::engine::general_purpose::STANDARD.encode(raw.as_bytes());
        Some(format!("Basic {encoded}"))
    }
}

/// An answer.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Bytes,
}

impl Response {
    /// 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text (lossy), at most `max` bytes of it: for messages.
    pub fn text(&self, max: usize) -> String {
        let end = self.body.len().min(max);
        String::from_utf8_lossy(&self.body[..end]).trim().to_owned()
    }

    /// The body as JSON.
    pub fn json(&self, server: &str) -> Result<serde_json::Value> {
        serde_json::from_slice(&self.body).map_err(|e| AdapterError::Server {
            server: server.to_owned(),
            detail: format!(
                "answered with something that is not JSON ({e}): {}",
                self.text(200)
            ),
        })
    }

    /// `Ok(self)` when 2xx, else a server error saying what was being done.
    pub fn expect_ok(self, server: &str, doing: &str) -> Result<Response> {
        if self.ok() {
            return Ok(self);
        }
        Err(AdapterError::Server {
            server: server.to_owned(),
            detail: format!("{doing}: HTTP {} {}", self.status, self.text(300)),
        })
    }
}

/// The TLS settings every client shares. Reading the system's root certificates took 4–7 ms,
/// paid by every adapter verb when each built its own (benchmarks/adapters.rs), so it is
/// done once per process. The client itself is not shared: its pooled connections belong to
/// the runtime that made them.
fn tls_config() -> &'static rustls::ClientConfig {
    static CONFIG: std::sync::OnceLock<rustls::ClientConfig> = std::sync::OnceLock::new();
    CONFIG.get_or_init(|| {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        // Unreadable or missing certificates leave an empty store: http:// still works, and
        // https:// fails naming the certificate.
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        // No ALPN here: hyper-rustls sets it from the protocols the connector enables.
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth()
    })
}

/// The client: cheap to clone, one per adapter is plenty.
#[derive(Clone)]
pub struct Http {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Default for Http {
    fn default() -> Self {
        Self::new()
    }
}

impl Http {
    /// A client for http:// and https:// (ring, the system's root certificates; none
    /// found still serves http://).
    pub fn new() -> Http {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config().clone())
            .https_or_http()
            .enable_http1()
            .build();
        Http {
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// One request: `path` under the endpoint's base path, `body` sent as is with
    /// `content_type`, `headers` added. Any answer is `Ok`; no answer is `Unreachable`.
    pub async fn call(
        &self,
        ep: &Endpoint,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        headers: &[(&str, &str)],
    ) -> Result<Response> {
        let mut req = Request::builder().method(method.clone()).uri(ep.url(path));
        if let Some(auth) = ep.authorization() {
            req = req.header("authorization", auth);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let body = match body {
            Some((content_type, bytes)) => {
                req = req.header("content-type", content_type);
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let req = req.body(body).map_err(|e| {
            AdapterError::Config(format!(
                "{}: cannot make a request for `{path}`: {e}",
                ep.server
            ))
        })?;
        let unreachable = |detail: String| AdapterError::Unreachable {
            server: ep.server.clone(),
            detail,
        };
        let fut = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| unreachable(describe(&e)))?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(format!("reading the answer to {method} {path}: {e}")))?
                .to_bytes();
            Ok(Response { status, body })
        };
        match tokio::time::timeout(CALL_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => Err(unreachable(format!(
                "{method} {path}: no answer within {} s",
                CALL_TIMEOUT.as_secs()
            ))),
        }
    }

    /// A JSON request (`body` serialized), expecting 2xx; returns the answer.
    pub async fn json(
        &self,
        ep: &Endpoint,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        doing: &str,
    ) -> Result<Response> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        self.call(ep, method, path, body, &[])
            .await?
            .expect_ok(&ep.server, doing)
    }
}

fn describe(e: &hyper_util::client::legacy::Error) -> String {
    super::error_chain(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_credentials_out_of_the_request_line() {
        let ep = Endpoint::parse("http://admin:p%40ss@127.0.0.1:8123/base/", 80).unwrap();
        assert_eq!(ep.authority, "127.0.0.1:8123");
        assert_eq!(ep.base_path, "/base");
        assert_eq!(ep.user.as_deref(), Some("admin"));
        assert_eq!(ep.password.as_deref(), Some("p@ss"));
        assert_eq!(ep.server, "http://127.0.0.1:8123");
        assert_eq!(ep.url("/x"), "http://127.0.0.1:8123/base/x");
        assert_eq!(ep.authorization().unwrap(), "Basic YWRtaW46cEBzcw==");
        assert_eq!(
            ep.url_with_credentials("/db"),
            "http://admin:p%40ss@127.0.0.1:8123/base/db"
        );
        let bare = Endpoint::parse("https://search.example", 9200).unwrap();
        assert_eq!(bare.authority, "search.example:9200");
        assert_eq!(bare.authorization(), None);
        let v6 = Endpoint::parse("http://[::1]", 15672).unwrap();
        assert_eq!(v6.authority, "[::1]:15672");
        let v6p = Endpoint::parse("http://[::1]:99", 15672).unwrap();
        assert_eq!(v6p.authority, "[::1]:99");
    }

    #[test]
    fn bad_admin_urls_name_the_fix_and_no_password() {
        let e = Endpoint::parse("amqp://u:secretpw@h:5672", 80)
            .unwrap_err()
            .to_string();
        assert!(e.contains("http://") && !e.contains("secretpw"), "{e}");
        let e = Endpoint::parse("u:secretpw@h", 80).unwrap_err().to_string();
        assert!(e.contains("not a URL") && !e.contains("secretpw"), "{e}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_not_a_server_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ep = Endpoint::parse(&format!("http://u:pw@127.0.0.1:{port}"), 80).unwrap();
        let err = Http::new()
            .call(&ep, Method::GET, "/", None, &[])
            .await
            .unwrap_err();
        assert!(err.transient(), "{err}");
        assert!(!err.to_string().contains("pw@"), "{err}");
    }
}
