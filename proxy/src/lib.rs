//! The local reverse proxy: `<service>.<world>.<domain>` to the world's service, over
//! HTTP/1.1 and HTTPS (h2 or HTTP/1.1 by ALPN), served by a few worker threads with a
//! single-threaded runtime each (like nginx's workers: a request never hops between threads).
//!
//! # Guarantees
//! - The routing table is an immutable snapshot swapped atomically (`ArcSwap`); a route
//!   change never touches a listener.
//! - Requests and responses stream both ways; `Upgrade` requests (WebSocket, a dev
//!   server's hot reload) are passed through as raw bytes after the backend's `101`.
//! - Connections to backends are pooled per backend (host and port): a connection is never
//!   reused for another backend.
//! - A replicated service's requests go to its ready replicas round robin; a replica that
//!   refuses the connection is skipped for the next one, so a replica that dies costs no
//!   request that had not reached it.
//! - `X-Forwarded-For`, `-Proto` and `-Host` are set; the `Host` header is kept as sent, so
//!   backends build their own URLs right.
//! - A malformed request, an oversized header block or a failed handshake ends that one
//!   connection; nothing else is affected.
//! - A request is routed by one host, on every path (the front's and hyper's, HTTP/1.1 and
//!   h2): one `Host` header, or the request target's authority; two `Host` headers, or a
//!   `Host` that differs from the target's authority, get a `400` (RFC 9112 3.2) and reach
//!   no backend.
//! - A backend's answer head is waited for at most the machine setting
//!   `proxy_answer_timeout` (60 s) once the request was sent (its body included); then the
//!   client gets a `504` page naming the service. A backend that refuses the connection is a
//!   `502`.

pub mod body;
mod front;
mod gather;
pub mod listen;
pub mod pages;
pub mod pool;
#[cfg(test)]
mod scripted;
pub mod tls;
pub mod upstream;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use binky_controllers::route::{Route, RouteSink, RouteTable};
use binky_controllers::store::RouteState;
use bytes::Bytes;
use http_body_util::Either;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, HOST, UPGRADE};
use hyper::http::uri::PathAndQuery;
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use body::{full, streamed, Body, Own};
use pages::Page;

/// Largest request head accepted (larger gets `431`).
pub const MAX_HEAD: usize = 64 * 1024;

/// How long a backend's answer head is waited for when the setting says nothing.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The listener a connection came in on: its scheme and its port (the dashboard answers
/// only to its own origin on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Its port.
    pub port: u16,
}

impl Listener {
    /// The port a URL of this scheme means when it names none (80, 443).
    pub fn default_port(&self) -> u16 {
        if self.scheme == "https" {
            443
        } else {
            80
        }
    }
}

/// One routed host, shared by every worker without copying.
pub struct Backend {
    /// The route.
    pub route: Route,
    /// Requests sent to a replicated route so far: the round robin's position, shared by
    /// every worker thread.
    next: AtomicUsize,
}

impl Backend {
    /// The ports to try for one request, in order: the route's one port, or, for a
    /// replicated service, its ready replicas round robin (the next one first, then the
    /// others, in case it refuses).
    fn ports(&self) -> impl Iterator<Item = u16> + '_ {
        let all = &self.route.backends;
        let (n, start) = match all.len() {
            0 => (0, 0),
            n => (n, self.next.fetch_add(1, Ordering::Relaxed) % n),
        };
        let single = (n == 0).then_some(self.route.port);
        single
            .into_iter()
            .chain((0..n).map(move |i| all[(start + i) % n]))
    }
}

/// A routing table compiled for lookups: a hash map by host.
#[derive(Default)]
pub struct Compiled {
    by_host: HashMap<String, Arc<Backend>>,
    /// The table as published (for the listing page).
    pub table: Arc<RouteTable>,
}

impl Compiled {
    fn new(table: Arc<RouteTable>) -> Compiled {
        let by_host = table
            .routes
            .iter()
            .map(|(host, route)| {
                (
                    host.clone(),
                    Arc::new(Backend {
                        route: route.clone(),
                        next: AtomicUsize::new(0),
                    }),
                )
            })
            .collect();
        Compiled { by_host, table }
    }

    /// The backend for a `Host` header value (port and trailing dot ignored,
    /// case-insensitive).
    pub fn lookup(&self, host: &str) -> Option<&Arc<Backend>> {
        let host = binky_controllers::route::strip_port(host).trim_end_matches('.');
        if host.bytes().any(|b| b.is_ascii_uppercase()) {
            self.by_host.get(&host.to_ascii_lowercase())
        } else {
            self.by_host.get(host)
        }
    }
}

/// The routing table shared by the route controller (writer) and the proxy (reader).
#[derive(Clone, Default)]
pub struct Routes(Arc<ArcSwap<Compiled>>);

impl Routes {
    /// The current snapshot.
    pub fn load(&self) -> Arc<Compiled> {
        self.0.load_full()
    }
}

impl RouteSink for Routes {
    fn publish(&self, table: Arc<RouteTable>) {
        self.0.store(Arc::new(Compiled::new(table)));
    }
}

/// The proxy: routes, this worker's connections to backends, and the ports it serves on.
pub struct Proxy {
    routes: Routes,
    /// This worker's hold on the current routing table (see [`Proxy::routes_now`]).
    snapshot: std::sync::Mutex<Option<Arc<Snapshot>>>,
    pool: pool::Pool,
    /// This worker's idle connections for requests without a body (`upstream.rs`).
    idle: upstream::Idle,
    ports: Arc<[AtomicU16; 2]>,
    /// How long a backend's answer head is waited for, in milliseconds (0: no limit); set
    /// from the machine setting `proxy_answer_timeout`, shared by every worker.
    answer_timeout: Arc<AtomicU64>,
    /// The dashboard, answering at `binky.localhost`.
    dashboard: Option<Arc<dyn OwnSite>>,
}

/// A site the proxy answers itself, before any world's route: binky's dashboard. The proxy
/// knows it only by this trait — the dashboard is built on the proxy (its listeners, its
/// bodies), not the other way round.
#[async_trait::async_trait]
pub trait OwnSite: Send + Sync {
    /// Whether `host` (a `Host` value) names this site.
    fn serves(&self, host: &str) -> bool;
    /// The answer to `req`, which came in on the listener `at`.
    async fn answer(self: Arc<Self>, req: Request<Incoming>, at: Listener) -> Response<Body>;
}

/// A worker's own reference-counted handle on a routing table: taking it for a request
/// counts references in memory only this worker writes, where cloning the shared table's
/// `Arc` would bounce its counter between the cores of every worker on every request.
struct Snapshot(Arc<Compiled>);

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// How many hop-by-hop names there are.
const HOPS: usize = 9;

/// Headers that belong to one connection, never forwarded (RFC 9110 7.6.1), as names
/// parsed once.
static HOP_BY_HOP: [HeaderName; HOPS] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    hyper::header::PROXY_AUTHENTICATE,
    hyper::header::PROXY_AUTHORIZATION,
    hyper::header::TE,
    hyper::header::TRAILER,
    hyper::header::TRANSFER_ENCODING,
    UPGRADE,
];

/// `Connection` options that name no header: skipped without parsing a name.
const CONNECTION_OPTIONS: [&str; 3] = ["keep-alive", "close", "upgrade"];

/// What the hop-by-hop headers of a message say (RFC 9110 7.6.1): they are not forwarded.
#[derive(Default)]
pub(crate) struct Hop {
    /// `Connection: close`.
    pub close: bool,
    /// `Transfer-Encoding` was sent: whether its last coding is `chunked`.
    pub chunked: Option<bool>,
    /// Other headers `Connection` names (rare).
    pub named: Vec<HeaderName>,
}

impl Hop {
    /// Note the header `name: value`; whether it is hop-by-hop.
    pub fn note(&mut self, name: &[u8], value: &[u8]) -> bool {
        if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if !token.is_empty()
                    && !CONNECTION_OPTIONS
                        .iter()
                        .any(|o| o.as_bytes().eq_ignore_ascii_case(token))
                {
                    if let Ok(n) = HeaderName::from_bytes(token) {
                        self.named.push(n);
                    }
                }
            }
            return true;
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|b| *b == b',').next().unwrap_or(b"");
            self.chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            return true;
        }
        HOP_BY_HOP[1..]
            .iter()
            .any(|h| h.as_str().as_bytes().eq_ignore_ascii_case(name))
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers named by `Connection` are hop-by-hop too (rare: a name is parsed only for an
    // option that is not one of the usual ones).
    let mut hop = Hop::default();
    for conn in headers.get_all(CONNECTION) {
        hop.note(b"connection", conn.as_bytes());
    }
    // One pass over the names present (a handful) instead of a lookup per hop-by-hop name.
    let mut present = [false; HOPS];
    for name in headers.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
            present[i] = true;
        }
    }
    for (h, _) in HOP_BY_HOP.iter().zip(present).filter(|(_, p)| *p) {
        headers.remove(h);
    }
    for n in hop.named {
        headers.remove(n);
    }
}

/// The request as its backend gets it: HTTP/1.1, origin-form (path and query only), no
/// hop-by-hop headers but an upgrade it asks for, its `Host`, and the `X-Forwarded-*` ones.
fn to_backend(
    req: &mut Request<Incoming>,
    upgrade: bool,
    host_value: &HeaderValue,
    peer: SocketAddr,
    scheme: &str,
) {
    let path = req
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    *req.uri_mut() = Uri::from(path);
    *req.version_mut() = Version::HTTP_11;
    let headers = req.headers_mut();
    let upgrade_value = if upgrade {
        headers.get(UPGRADE).cloned()
    } else {
        None
    };
    strip_hop_by_hop(headers);
    if let Some(u) = upgrade_value {
        headers.insert(UPGRADE, u);
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    }
    if !headers.contains_key(HOST) {
        headers.insert(HOST, host_value.clone());
    }
    let prev_for = headers.get(&X_FORWARDED_FOR).map(|v| v.as_bytes().to_vec());
    forwarded_headers(
        prev_for.as_deref(),
        peer.ip(),
        scheme,
        host_value.as_bytes(),
        |name, parts| {
            if let Ok(v) = HeaderValue::from_bytes(&parts.concat()) {
                headers.insert(name.clone(), v);
            }
        },
    );
}

/// The `X-Forwarded-*` headers a request goes to its backend with, decided here for both
/// paths (the front's own and hyper's): `for` is the first one the client sent (when it is
/// visible ASCII: other bytes are no address, and a backend's framework may choke on them)
/// followed by the client at `peer`, `proto` and `host` are the scheme and host the proxy
/// was asked on (the client's own are dropped by the caller). Each is handed to `put` as its
/// name and the parts of its value, so the front writes them into its head without building
/// a value.
fn forwarded_headers(
    prev_for: Option<&[u8]>,
    peer: std::net::IpAddr,
    scheme: &str,
    host: &[u8],
    mut put: impl FnMut(&'static HeaderName, &[&[u8]]),
) {
    let client = client_address(peer);
    let visible = |v: &&[u8]| v.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b));
    match prev_for.filter(visible) {
        Some(prev) => put(&X_FORWARDED_FOR, &[prev, b", ", client.as_bytes()]),
        None => put(&X_FORWARDED_FOR, &[client.as_bytes()]),
    }
    put(&X_FORWARDED_PROTO, &[scheme.as_bytes()]);
    put(&X_FORWARDED_HOST, &[host]);
}

/// How `X-Forwarded-For` names the client at `ip` (the usual loopback one without formatting).
fn client_address(ip: std::net::IpAddr) -> std::borrow::Cow<'static, str> {
    match ip {
        std::net::IpAddr::V4(v4) if v4 == std::net::Ipv4Addr::LOCALHOST => "127.0.0.1".into(),
        ip => ip.to_string().into(),
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

impl Proxy {
    /// A proxy routing by `routes`.
    pub fn new(routes: Routes) -> Arc<Proxy> {
        Self::with_dashboard(routes, None)
    }

    /// A proxy routing by `routes` that serves `dashboard` at its host (`binky.localhost`).
    pub fn with_dashboard(routes: Routes, dashboard: Option<Arc<dyn OwnSite>>) -> Arc<Proxy> {
        Arc::new(Proxy {
            routes,
            snapshot: Default::default(),
            pool: pool::Pool::default(),
            idle: upstream::Idle::default(),
            ports: Arc::new([AtomicU16::new(0), AtomicU16::new(0)]),
            answer_timeout: Arc::new(AtomicU64::new(ANSWER_TIMEOUT.as_millis() as u64)),
            dashboard,
        })
    }

    /// Another instance for another thread: same routes and ports, its own pool of
    /// connections to backends (each worker thread keeps its connections to itself).
    pub fn worker(&self) -> Arc<Proxy> {
        Arc::new(Proxy {
            routes: self.routes.clone(),
            snapshot: Default::default(),
            pool: pool::Pool::default(),
            idle: upstream::Idle::default(),
            ports: self.ports.clone(),
            answer_timeout: self.answer_timeout.clone(),
            dashboard: self.dashboard.clone(),
        })
    }

    /// The routing table as published now, through this worker's own handle (renewed when
    /// the route controller publishes another table).
    fn routes_now(&self) -> Arc<Snapshot> {
        let current = self.routes.0.load();
        let mut mine = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        match &*mine {
            Some(s) if Arc::ptr_eq(&s.0, &current) => s.clone(),
            _ => {
                let s = Arc::new(Snapshot(Arc::clone(&current)));
                *mine = Some(s.clone());
                s
            }
        }
    }

    /// Record the ports served on (for the links on the proxy's pages).
    pub fn set_ports(&self, http: Option<u16>, https: Option<u16>) {
        self.ports[0].store(http.unwrap_or(0), Ordering::Relaxed);
        self.ports[1].store(https.unwrap_or(0), Ordering::Relaxed);
    }

    /// Wait at most `limit` for a backend's answer head (`None`: as long as it takes).
    pub fn set_answer_timeout(&self, limit: Option<Duration>) {
        let ms = limit.map_or(0, |l| (l.as_millis() as u64).max(1));
        self.answer_timeout.store(ms, Ordering::Relaxed);
    }

    /// How long a backend's answer head is waited for now.
    fn answer_timeout(&self) -> Option<Duration> {
        match self.answer_timeout.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    fn page(&self, page: Page, html: bool) -> Response<Body> {
        let (http, https) = (
            self.ports[0].load(Ordering::Relaxed),
            self.ports[1].load(Ordering::Relaxed),
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

    /// Handle one request from `peer` that arrived on `at`.
    pub async fn handle(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: SocketAddr,
        at: Listener,
    ) -> Response<Body> {
        let scheme = at.scheme;
        // Whether a page of the proxy's own (an error) should be HTML.
        let html = req
            .headers()
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
        let host_value = match request_host(&req) {
            Ok(h) => h,
            Err(why) => return self.page(Page::bad_request(&why), html),
        };
        let host = host_value.to_str().unwrap_or("");
        // binky's own host: no project's host can be it (`[project] domain` may not be
        // `localhost`), and it is looked at before the routes.
        if let Some(dashboard) = self.dashboard.as_ref().filter(|d| d.serves(host)) {
            // Boxed (by the trait): its state machine is large, and every request would
            // carry it.
            return dashboard.clone().answer(req, at).await;
        }
        let routes = self.routes_now();
        let Some(backend) = routes.0.lookup(host) else {
            return self.page(
                Page::unknown_host(binky_controllers::route::strip_port(host), &routes.0.table),
                html,
            );
        };
        let route = &backend.route;
        if route.state == RouteState::Stopped {
            return self.page(Page::down(route), html);
        }
        let upgrade = wants_upgrade(req.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));

        to_backend(&mut req, upgrade, &host_value, peer, scheme);

        // The common request (no body, no upgrade) is answered in this task; a replica that
        // refuses the connection (it just died) costs the request nothing: the next one is
        // tried, until the route table drops it.
        if upstream::takes(&req, upgrade) {
            return match self
                .idle
                .exchange(backend.ports(), &req, self.answer_timeout())
                .await
            {
                Ok(mut resp) => {
                    // (Its hop-by-hop headers were left out as it was read.)
                    *resp.version_mut() = Version::HTTP_11;
                    resp.map(|b| Either::Left(Either::Left(b)))
                }
                Err(err) => self.unreachable(route, &err, html),
            };
        }
        self.through_pool(backend, req, client_upgrade, html).await
    }

    /// A request with a body or an upgrade, through the pool: the first replica that takes
    /// the connection gets it; an upgrade the backend agrees to is spliced to the client.
    async fn through_pool(
        &self,
        backend: &Backend,
        req: Request<Incoming>,
        client_upgrade: Option<hyper::upgrade::OnUpgrade>,
        html: bool,
    ) -> Response<Body> {
        let route = &backend.route;
        let upgrade = client_upgrade.is_some();
        let mut conn = Err(pool::PoolError::Connect(
            std::io::ErrorKind::NotFound.into(),
        ));
        for port in backend.ports() {
            conn = self.pool.connection(port, upgrade).await;
            if conn.is_ok() {
                break;
            }
        }
        let sent = match conn {
            Ok(conn) => self.pool.send_on(conn, req, self.answer_timeout()).await,
            Err(err) => Err(err),
        };
        let mut resp = match sent {
            Ok(r) => r,
            Err(err) => return self.unreachable(route, &err, html),
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
        resp.map(|b| Either::Left(Either::Right(b)))
    }

    /// The page for a request that did not get its backend's answer.
    fn unreachable(&self, route: &Route, err: &pool::PoolError, html: bool) -> Response<Body> {
        if let pool::PoolError::Timeout(limit) = err {
            return self.page(Page::timed_out(route, *limit), html);
        }
        let why = match err {
            pool::PoolError::Connect(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                "connection refused (is the service listening?)".to_owned()
            }
            other => other.to_string(),
        };
        self.page(Page::unreachable(route, &why), html)
    }
}

/// The host a request is for: its one `Host` header, or its target's authority (h2's
/// `:authority`, an absolute-form target) when it has none. Two `Host` headers, or a `Host`
/// naming another authority than the target, are refused (why, for the `400` page): a
/// request must not be routed by one of them and read by the backend by another.
fn request_host<B>(req: &Request<B>) -> Result<HeaderValue, String> {
    let mut hosts = req.headers().get_all(HOST).iter();
    let header = hosts.next();
    if let Some(second) = hosts.next() {
        return Err(format!(
            "the request has more than one Host header (`{}`, `{}`); HTTP/1.1 allows one (RFC 9112 3.2)",
            String::from_utf8_lossy(header.map_or(&b""[..], |h| h.as_bytes())),
            String::from_utf8_lossy(second.as_bytes())
        ));
    }
    let authority = req.uri().authority();
    match (header, authority) {
        (Some(h), Some(a)) if !h.as_bytes().eq_ignore_ascii_case(a.as_str().as_bytes()) => {
            Err(format!(
                "the request's Host header (`{}`) names another host than its target (`{a}`)",
                String::from_utf8_lossy(h.as_bytes())
            ))
        }
        (Some(h), _) => Ok(h.clone()),
        (None, Some(a)) => {
            Ok(HeaderValue::from_str(a.as_str()).unwrap_or_else(|_| HeaderValue::from_static("")))
        }
        (None, None) => Ok(HeaderValue::from_static("")),
    }
}

/// Serve one listener until `stop` turns true. With `tls`, connections are TLS first
/// (h2 or HTTP/1.1 by ALPN); without, HTTP/1.1.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let at = Listener {
        scheme: if tls.is_some() { "https" } else { "http" },
        port: listener.local_addr().map_or(0, |a| a.port()),
    };
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
            match tls {
                // Over TLS, h2 or HTTP/1.1 as ALPN chose.
                Some(acceptor) => {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls_stream)) => {
                            if tls_stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                                serve_h2(tls_stream, proxy, peer, at).await
                            } else {
                                front::serve(tls_stream, proxy, peer, at).await
                            }
                        }
                        Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake failed"),
                        Err(_) => {}
                    }
                }
                None => front::serve(stream, proxy, peer, at).await,
            }
        });
    }
}

/// The service hyper's server calls for each request.
fn service(
    proxy: Arc<Proxy>,
    peer: SocketAddr,
    at: Listener,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = std::convert::Infallible,
    Future = impl std::future::Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req| {
        let proxy = proxy.clone();
        async move { Ok::<_, std::convert::Infallible>(proxy.handle(req, peer, at).await) }
    })
}

/// Serve an HTTP/1.1 connection with hyper's server (what `front.rs` does not take).
pub(crate) async fn serve_h1<I>(io: I, proxy: Arc<Proxy>, peer: SocketAddr, at: Listener)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut h1 = hyper::server::conn::http1::Builder::new();
    h1.timer(TokioTimer::new())
        .header_read_timeout(front::HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .max_header_size(MAX_HEAD);
    let served = h1
        .serve_connection(TokioIo::new(io), service(proxy, peer, at))
        .with_upgrades()
        .await;
    if let Err(err) = served {
        tracing::debug!(%peer, %err, "proxy connection ended with an error");
    }
}

/// Serve an h2 connection with hyper's server.
async fn serve_h2<I>(io: I, proxy: Arc<Proxy>, peer: SocketAddr, at: Listener)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD as u32);
    // What one poll of the connection writes (the answers of every stream ready by then)
    // leaves as one write: hyper flushes after each DATA frame.
    let served = gather::gathered(io, |io| {
        h2.serve_connection(TokioIo::new(io), service(proxy, peer, at))
    })
    .await;
    if let Err(err) = served {
        tracing::debug!(%peer, %err, "proxy connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `forwarded_headers` hands over, as (name, value) pairs.
    fn forwarded(prev: Option<&[u8]>) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        forwarded_headers(
            prev,
            std::net::IpAddr::from([10, 0, 0, 7]),
            "https",
            b"web.main.shop.localhost",
            |name, parts| out.push((name.as_str().to_owned(), parts.concat())),
        );
        out
    }

    #[test]
    fn a_clients_forwarded_for_goes_on_before_the_client_only_when_it_is_visible_ascii() {
        let with = forwarded(Some(b"203.0.113.9,\t198.51.100.2"));
        assert_eq!(
            with[0],
            (
                "x-forwarded-for".to_owned(),
                b"203.0.113.9,\t198.51.100.2, 10.0.0.7".to_vec()
            )
        );
        assert_eq!(with[1], ("x-forwarded-proto".to_owned(), b"https".to_vec()));
        assert_eq!(
            with[2],
            (
                "x-forwarded-host".to_owned(),
                b"web.main.shop.localhost".to_vec()
            )
        );
        // Bytes no address has are not carried on, on either path: the client alone.
        for junk in [&b"203.0.113.9\x80"[..], b"a\x01b", "é".as_bytes()] {
            assert_eq!(
                forwarded(Some(junk))[0],
                ("x-forwarded-for".to_owned(), b"10.0.0.7".to_vec()),
                "{junk:?}"
            );
        }
        assert_eq!(
            forwarded(None)[0],
            ("x-forwarded-for".to_owned(), b"10.0.0.7".to_vec())
        );
    }
}
