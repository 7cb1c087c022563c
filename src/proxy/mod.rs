//! The local reverse proxy: `<service>.<world>.<domain>` to the world's service, over
//! HTTP/1.1, HTTP/2 (h2 over TLS by ALPN, h2c by prior knowledge) and HTTPS.
//!
//! # Guarantees
//! - The routing table is an immutable snapshot swapped atomically (`ArcSwap`); a route
//!   change never touches a listener.
//! - Requests and responses stream both ways; `Upgrade` requests (WebSocket, a dev
//!   server's hot reload) are passed through as raw bytes after the backend's `101`.
//! - Connections to backends are pooled per backend (host and port): a connection is never
//!   reused for another backend.
//! - `X-Forwarded-For`, `-Proto` and `-Host` are set; the `Host` header is kept as sent, so
//!   backends build their own URLs right.
//! - A malformed request, an oversized header block or a failed handshake ends that one
//!   connection; nothing else is affected.

pub mod listen;
pub mod pages;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use binky_controllers::route::{Route, RouteSink, RouteState, RouteTable};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, HOST, UPGRADE};
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use pages::Page;

/// Response bodies: a backend's stream, or one of the proxy's pages.
pub type Body = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// Largest request head accepted (larger gets `431`).
pub const MAX_HEAD: usize = 64 * 1024;

/// The routing table shared by the route controller (writer) and the proxy (reader).
#[derive(Clone, Default)]
pub struct Routes(Arc<ArcSwap<RouteTable>>);

impl Routes {
    /// The current snapshot.
    pub fn load(&self) -> Arc<RouteTable> {
        self.0.load_full()
    }
}

impl RouteSink for Routes {
    fn publish(&self, table: Arc<RouteTable>) {
        self.0.store(table);
    }
}

/// The proxy: routes, a pooled client to backends, and the ports it serves on.
pub struct Proxy {
    routes: Routes,
    client: Client<HttpConnector, Incoming>,
    http_port: AtomicU16,
    https_port: AtomicU16,
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for h in HOP_BY_HOP {
        headers.remove(*h);
    }
}

fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(UPGRADE)
        && headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

fn full(text: impl Into<Bytes>) -> Body {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed()
}

impl Proxy {
    /// A proxy routing by `routes`.
    pub fn new(routes: Routes) -> Arc<Proxy> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(3)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(64)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Arc::new(Proxy {
            routes,
            client,
            http_port: AtomicU16::new(0),
            https_port: AtomicU16::new(0),
        })
    }

    /// Record the ports served on (for the links on the proxy's pages).
    pub fn set_ports(&self, http: Option<u16>, https: Option<u16>) {
        self.http_port.store(http.unwrap_or(0), Ordering::Relaxed);
        self.https_port.store(https.unwrap_or(0), Ordering::Relaxed);
    }

    fn page(&self, page: Page, req_headers: &HeaderMap) -> Response<Body> {
        let html = req_headers
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
        let (http, https) = (
            self.http_port.load(Ordering::Relaxed),
            self.https_port.load(Ordering::Relaxed),
        );
        let suffix = move |r: &Route| -> String {
            match (r.https, http, https) {
                (true, _, p) if p != 443 && p != 0 => format!(":{p}"),
                (false, p, _) if p != 80 && p != 0 => format!(":{p}"),
                _ => String::new(),
            }
        };
        let (ctype, body) = page.render(html, &suffix);
        let mut resp = Response::new(full(body));
        *resp.status_mut() = StatusCode::from_u16(page.status).unwrap_or(StatusCode::BAD_GATEWAY);
        resp.headers_mut()
            .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(ctype));
        resp.headers_mut().insert(
            hyper::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        resp
    }

    /// Handle one request from `peer` that arrived over `scheme`.
    pub async fn handle(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: SocketAddr,
        scheme: &'static str,
    ) -> Response<Body> {
        let host = req
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| req.uri().authority().map(|a| a.to_string()))
            .unwrap_or_default();
        let table = self.routes.load();
        let Some(route) = table.lookup(&host).cloned() else {
            return self.page(
                Page::unknown_host(binky_controllers::route::strip_port(&host), &table),
                req.headers(),
            );
        };
        if route.state == RouteState::Stopped {
            return self.page(Page::down(&route), req.headers());
        }
        let upgrade = wants_upgrade(req.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        let req_headers = req.headers().clone();

        // Build the request to the backend: HTTP/1.1 to 127.0.0.1:<port>, same path.
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".into());
        let uri = match format!("http://127.0.0.1:{}{path}", route.port).parse() {
            Ok(u) => u,
            Err(_) => {
                return self.page(
                    Page::unreachable(&route, "the request path is not valid"),
                    &req_headers,
                )
            }
        };
        *req.uri_mut() = uri;
        *req.version_mut() = Version::HTTP_11;
        let headers = req.headers_mut();
        let upgrade_value = headers.get(UPGRADE).cloned();
        strip_hop_by_hop(headers);
        if upgrade {
            if let Some(u) = upgrade_value {
                headers.insert(UPGRADE, u);
                headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
            }
        }
        if !headers.contains_key(HOST) {
            if let Ok(v) = HeaderValue::from_str(&host) {
                headers.insert(HOST, v);
            }
        }
        let xff = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prev) => format!("{prev}, {}", peer.ip()),
            None => peer.ip().to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&xff) {
            headers.insert("x-forwarded-for", v);
        }
        headers.insert("x-forwarded-proto", HeaderValue::from_static(scheme));
        if let Ok(v) = HeaderValue::from_str(&host) {
            headers.insert("x-forwarded-host", v);
        }

        let mut resp = match self.client.request(req).await {
            Ok(r) => r,
            Err(err) => {
                let why = if err.is_connect() {
                    "connection refused (is the service listening?)".to_owned()
                } else {
                    let mut s = err.to_string();
                    let mut src = std::error::Error::source(&err);
                    while let Some(e) = src {
                        s = format!("{s}: {e}");
                        src = e.source();
                    }
                    s
                };
                return self.page(Page::unreachable(&route, &why), &req_headers);
            }
        };
        if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
            if let Some(client_upgrade) = client_upgrade {
                let backend_upgrade = hyper::upgrade::on(&mut resp);
                tokio::spawn(async move {
                    let (Ok(c), Ok(b)) = tokio::join!(client_upgrade, backend_upgrade) else {
                        return;
                    };
                    let (mut c, mut b) = (TokioIo::new(c), TokioIo::new(b));
                    let _ = tokio::io::copy_bidirectional(&mut c, &mut b).await;
                });
                return resp.map(|_| full(Bytes::new()));
            }
        }
        strip_hop_by_hop(resp.headers_mut());
        // The client's connection speaks its own version (HTTP/1.1 or h2), not the backend's.
        *resp.version_mut() = Version::HTTP_11;
        resp.map(|b| b.boxed())
    }
}

/// Serve one listener until `stop` turns true. With `tls`, connections are TLS first
/// (h2 or HTTP/1.1 by ALPN); without, HTTP/1.1 or h2c.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let scheme: &'static str = if tls.is_some() { "https" } else { "http" };
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(err) => {
                    tracing::warn!(%err, "proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let proxy = proxy.clone();
                async move { Ok::<_, std::convert::Infallible>(proxy.handle(req, peer, scheme).await) }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .max_buf_size(MAX_HEAD);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_header_list_size(MAX_HEAD as u32);
            let result = match tls {
                Some(acceptor) => {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls_stream)) => {
                            builder
                                .serve_connection_with_upgrades(TokioIo::new(tls_stream), service)
                                .await
                        }
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, %err, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    }
                }
                None => {
                    builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(err) = result {
                tracing::debug!(%peer, %err, "proxy connection ended with an error");
            }
        });
    }
}
