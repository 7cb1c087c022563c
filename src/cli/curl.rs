//! `binky curl NAME SVC [PATH]`: a request through the proxy with the right `Host`, no DNS
//! needed (many tools cannot resolve `*.localhost`).

use std::io::Write;

use binky_controllers::store;
use binky_controllers::url::Url;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

use super::context::{service, Ctx, Failure};
use super::exit;
use crate::proxy::tls;

/// What to send.
pub struct CurlArgs {
    /// World.
    pub name: String,
    /// Service.
    pub service: String,
    /// Path (default `/`).
    pub path: Option<String>,
    /// Method.
    pub method: Option<String>,
    /// Body.
    pub data: Option<String>,
    /// Extra headers `K: V`.
    pub headers: Vec<String>,
    /// Print the response headers too.
    pub include: bool,
    /// Exit 22 on a status of 400 or more.
    pub fail: bool,
}

fn err(e: impl std::fmt::Display) -> Failure {
    Failure::failed(e.to_string())
}

/// `binky curl`.
pub async fn run(a: CurlArgs) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(Some(&a.name))?;
    let to = target(&ctx, &world, &a.service)?;
    let path = a.path.clone().unwrap_or_else(|| "/".into());
    let path = if path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    };
    let req = request(&a, &path, &to.authority)?;
    let resp = send(&ctx, &to, req).await?;
    let status = resp.status();
    eprintln!(
        "{:?} {status}  ({}{})",
        resp.version(),
        to.url,
        if path == "/" { "" } else { &path }
    );
    print_response(resp, a.include).await?;
    Ok(if a.fail && status.as_u16() >= 400 {
        22
    } else {
        exit::OK
    })
}

/// Where the proxy serves a service: its URL, and the proxy port and names to reach it by.
struct Target {
    url: String,
    https: bool,
    /// The URL's host and port, the request's `Host`.
    authority: String,
    /// The host alone, the name TLS checks.
    host: String,
    port: u16,
}

/// Where the proxy serves `service` of `world`; a service without `url` it does not route.
fn target(ctx: &Ctx, world: &store::World, service_name: &str) -> Result<Target, Failure> {
    let svc = service(world, service_name)?;
    if svc.process().and_then(|p| p.url.as_ref()).is_none() {
        return Err(Failure::usage(format!(
            "service `{}` has no `url`, so the proxy does not route it; give it url = true, or use its port (`binky env {}`)",
            service_name, world.name
        )));
    }
    let proxy = ctx.store.read(store::proxy_view)?;
    let url = binky_controllers::env::proxy_url(world, service_name, &proxy)
        .ok_or_else(|| Failure::failed("the proxy is not serving; see `binky port`"))?;
    let parts = Url::parse(&url).ok_or_else(|| Failure::failed(format!("`{url}` is not a URL")))?;
    let https = parts.scheme == "https";
    let authority = parts.host.to_owned();
    let host = binky_controllers::route::strip_port(&authority).to_owned();
    let port = if https {
        proxy.https_port
    } else {
        proxy.http_port
    }
    .ok_or_else(|| Failure::failed("the proxy is not serving; see `binky port`"))?;
    Ok(Target {
        url,
        https,
        authority,
        host,
        port,
    })
}

/// The request to send: method, path, `Host`, the headers given, and the body (JSON unless
/// a `Content-Type` says otherwise).
fn request(a: &CurlArgs, path: &str, authority: &str) -> Result<Request<Full<Bytes>>, Failure> {
    let mut req = Request::builder()
        .method(
            a.method
                .as_deref()
                .unwrap_or(if a.data.is_some() { "POST" } else { "GET" }),
        )
        .uri(path)
        .header(hyper::header::HOST, authority)
        .header(
            hyper::header::USER_AGENT,
            concat!("binky/", env!("CARGO_PKG_VERSION")),
        );
    let mut has_ctype = false;
    for h in &a.headers {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| Failure::usage(format!("-H {h:?}: write headers as 'Name: value'")))?;
        has_ctype |= k.trim().eq_ignore_ascii_case("content-type");
        req = req.header(k.trim(), v.trim());
    }
    if a.data.is_some() && !has_ctype {
        req = req.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    req.body(Full::new(Bytes::from(a.data.clone().unwrap_or_default())))
        .map_err(err)
}

/// Sends `req` to the proxy, over TLS (trusting binky's own CA) when the URL is https.
async fn send(
    ctx: &Ctx,
    to: &Target,
    req: Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, Failure> {
    let port = to.port;
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| Failure::failed(format!("cannot reach the proxy on 127.0.0.1:{port}: {e} (is the daemon running? `binky daemon status`)")))?;
    if to.https {
        let ca = tls::LocalCa::load_or_create(&ctx.home.ca()).map_err(err)?;
        let cfg = tls::client_config(ca.cert_der(), &[b"http/1.1"]).map_err(err)?;
        let name = rustls::pki_types::ServerName::try_from(to.host.clone()).map_err(err)?;
        let tls = tokio_rustls::TlsConnector::from(cfg)
            .connect(name, stream)
            .await
            .map_err(err)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(err)?;
        tokio::spawn(conn);
        sender.send_request(req).await.map_err(err)
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(err)?;
        tokio::spawn(conn);
        sender.send_request(req).await.map_err(err)
    }
}

/// Writes the response to stdout: its status line and headers with `-i`, then the body as
/// it comes.
async fn print_response(
    resp: hyper::Response<hyper::body::Incoming>,
    include: bool,
) -> Result<(), Failure> {
    let status = resp.status();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if include {
        let _ = writeln!(out, "{:?} {status}", resp.version());
        for (k, v) in resp.headers() {
            let _ = writeln!(out, "{k}: {}", v.to_str().unwrap_or("<binary>"));
        }
        let _ = writeln!(out);
    }
    let mut body = resp.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(err)?;
        if let Some(data) = frame.data_ref() {
            if out.write_all(data).is_err() {
                break;
            }
        }
    }
    let _ = out.flush();
    Ok(())
}
