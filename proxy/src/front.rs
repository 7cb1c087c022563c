//! The proxy's HTTP/1.1 front for the common request: a request without a body, for a
//! running world's service, is read, forwarded and answered here, in the connection's own
//! task, with no request or header map built for it (`upstream.rs` does the backend's side).
//! That is nginx's shape, and what took binky's proxy to nginx's CPU per request
//! (benchmarks/README.md, "Where binky's extra CPU goes").
//!
//! Everything else — a request with a body (`Content-Length` or `Transfer-Encoding`), an
//! upgrade, `Expect`, HTTP/1.0, a `Connection` naming other headers, a head that does not
//! parse or is too large, the dashboard, an unknown or stopped world — hands the connection
//! to hyper's server for the rest of its life, starting with that request (its bytes are
//! replayed): whatever hyper answers today (a `400`, a `431`, a page, the dashboard, a
//! streamed upload), it still answers. A request taken here ends at its empty line, so where
//! the next one starts is never in doubt.
//!
//! # Guarantees
//! - The backend gets what hyper's client would send it: the request line in origin form,
//!   HTTP/1.1, the headers with lower-case names, hop-by-hop ones left out,
//!   `X-Forwarded-For` (appended to), `-Proto` and `-Host` set.
//! - The client gets the backend's answer with its hop-by-hop headers left out, its body by
//!   `Content-Length` as sent or chunked, a `Date` when the backend sent none, and
//!   `Connection: close` when the client asked for it; each piece of the body is written as
//!   it arrives (server-sent events, streamed pages).
//! - A head must arrive within 30 s of the wait for it starting (as hyper's
//!   `header_read_timeout`); an idle connection is closed after that.
//! - A backend that fails before answering gets the proxy's `502` page, one that sends no
//!   answer head within `proxy_answer_timeout` its `504` page, and the connection is kept;
//!   one that fails in the middle of its body closes the client's connection (the client
//!   sees a body cut short, never a wrong one).
//! - A request with two `Host` headers is never taken here: hyper's path refuses it with a
//!   `400` (`Proxy::handle`), so both paths follow one rule.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::{Backend, Compiled, Hop, Listener, Proxy, MAX_HEAD};

/// How long a request's head may take to arrive.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Most headers a request taken here may have (hyper's limit too).
const MAX_HEADERS: usize = 100;

/// Room made in the read buffer before each read.
const READ_SIZE: usize = 8 * 1024;

/// What to do with the request at the front of the buffer.
enum Decision<'a> {
    /// Forward it (the request for the backend is in the `head` buffer).
    Forward(Forward<'a>),
    /// Its head has not all arrived.
    Partial,
    /// Not one for this front: hyper takes the connection.
    Other,
}

struct Forward<'a> {
    /// Bytes of the client's head.
    consumed: usize,
    backend: &'a Backend,
    method: hyper::Method,
    /// The client asked for the connection to be closed after the answer.
    close: bool,
    /// An error page should be HTML.
    html: bool,
}

/// Serve one client connection (plain or TLS, HTTP/1.1) that came in on `at` until it ends.
pub async fn serve<T>(io: T, proxy: Arc<Proxy>, peer: SocketAddr, at: Listener)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    serve_timed(io, proxy, peer, at, HEAD_TIMEOUT).await
}

/// [`serve`], a head having to arrive within `head_timeout`.
async fn serve_timed<T>(
    mut io: T,
    proxy: Arc<Proxy>,
    peer: SocketAddr,
    at: Listener,
    head_timeout: Duration,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    // The backend's request, written anew for each request into the same buffer.
    let mut head: Vec<u8> = Vec::with_capacity(1024);
    // The wait for the current head started at `waiting`; the timer is moved only when it
    // fires early (it is set once, not per request).
    let mut waiting = Instant::now();
    let timer = tokio::time::sleep_until((waiting + head_timeout).into());
    tokio::pin!(timer);
    let mut routes;
    loop {
        let forward = loop {
            if !buf.is_empty() {
                // The routing table as it is now that the head is here (not when the wait for
                // it began: a world may have come up in between).
                routes = proxy.routes_now();
                match decide(&proxy, &routes.0, &buf, peer, at.scheme, &mut head) {
                    Decision::Forward(f) => break f,
                    Decision::Partial => {}
                    Decision::Other => return handover(io, buf, proxy, peer, at).await,
                }
            }
            buf.reserve(READ_SIZE);
            tokio::select! {
                biased;
                read = io.read_buf(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
                () = &mut timer => {
                    let deadline = waiting + head_timeout;
                    if Instant::now() >= deadline {
                        return;
                    }
                    timer.as_mut().reset(deadline.into());
                }
            }
        };
        buf.advance(forward.consumed);
        let answer = proxy
            .idle
            .exchange_head(
                forward.backend.ports(),
                &head,
                &forward.method,
                proxy.answer_timeout(),
            )
            .await;
        out.clear();
        let written = match answer {
            Ok((head, body)) => {
                write_answer(&mut io, &mut out, Head::Raw(&head), body, &forward).await
            }
            Err(err) => {
                let page = proxy.unreachable(&forward.backend.route, &err, forward.html);
                let (parts, body) = page.into_parts();
                write_answer(&mut io, &mut out, Head::Parts(&parts), body, &forward).await
            }
        };
        if written.is_err() || forward.close {
            let _ = io.shutdown().await;
            return;
        }
        waiting = Instant::now();
    }
}

/// Hand the connection to hyper's server, the bytes read so far first.
async fn handover<T>(io: T, buf: BytesMut, proxy: Arc<Proxy>, peer: SocketAddr, at: Listener)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = Prefixed {
        prefix: buf.freeze(),
        io,
    };
    super::serve_h1(io, proxy, peer, at).await
}

/// Whether the request at the front of `buf` is one for this front; if it is, `head` holds
/// what to send the backend.
fn decide<'a>(
    proxy: &Proxy,
    routes: &'a Compiled,
    buf: &[u8],
    peer: SocketAddr,
    scheme: &'static str,
    head: &mut Vec<u8>,
) -> Decision<'a> {
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let consumed = match req.parse_with_uninit_headers(buf, &mut headers) {
        // A head over the limit, whole or not yet, is hyper's to answer (its 431).
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Decision::Partial,
        _ => return Decision::Other,
    };
    let (Some(method), Some(path), Some(1)) = (req.method, req.path, req.version) else {
        return Decision::Other;
    };
    let Ok(method) = hyper::Method::from_bytes(method.as_bytes()) else {
        return Decision::Other;
    };
    if !path.starts_with('/') || method == hyper::Method::CONNECT {
        return Decision::Other;
    }
    let mut host: Option<&[u8]> = None;
    let mut forwarded_for: Option<&[u8]> = None;
    let mut html = false;
    let mut hop = Hop::default();
    head.clear();
    head.extend_from_slice(method.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(path.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\n");
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        if is("content-length") || is("upgrade") || is("expect") {
            return Decision::Other;
        }
        if hop.note(name, h.value) {
            continue;
        }
        if is("host") {
            if host.is_some() {
                return Decision::Other;
            }
            host = Some(h.value);
        } else if is("x-forwarded-for") {
            forwarded_for = forwarded_for.or(Some(h.value));
            continue;
        } else if is("x-forwarded-proto") || is("x-forwarded-host") {
            continue;
        } else if is("accept") {
            html = h.value.windows(9).any(|w| w == b"text/html");
        }
        head.extend(name.iter().map(u8::to_ascii_lowercase));
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    if hop.chunked.is_some() || !hop.named.is_empty() {
        return Decision::Other;
    }
    let Some(host) = host.and_then(|h| std::str::from_utf8(h).ok()) else {
        return Decision::Other;
    };
    if proxy.dashboard.as_ref().is_some_and(|d| d.serves(host)) {
        return Decision::Other;
    }
    let Some(backend) = routes.lookup(host) else {
        return Decision::Other;
    };
    if backend.route.state == binky_controllers::store::RouteState::Stopped {
        return Decision::Other;
    }
    super::forwarded_headers(
        forwarded_for,
        peer.ip(),
        scheme,
        host.as_bytes(),
        |name, parts| {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            parts.iter().for_each(|p| head.extend_from_slice(p));
            head.extend_from_slice(b"\r\n");
        },
    );
    head.extend_from_slice(b"\r\n");
    Decision::Forward(Forward {
        consumed,
        backend,
        method,
        close: hop.close,
        html,
    })
}

/// Write `resp` to the client: its head, then its body as it comes, by `Content-Length`
/// when it has one (or no body), else chunked.
async fn write_answer<T, B>(
    io: &mut T,
    out: &mut Vec<u8>,
    head: Head<'_>,
    mut body: B,
    forward: &Forward<'_>,
) -> std::io::Result<()>
where
    T: AsyncWrite + Unpin,
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    let status = head.status();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
    let exact = body.size_hint().exact();
    let bodiless = status == hyper::StatusCode::NO_CONTENT
        || status == hyper::StatusCode::NOT_MODIFIED
        || status.is_informational();
    let (has_date, has_length) = head.write_headers(out);
    if !has_date {
        out.extend_from_slice(b"date: ");
        date(out);
        out.extend_from_slice(b"\r\n");
    }
    let chunked = exact.is_none() && !bodiless;
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    } else if !has_length && !bodiless && forward.method != hyper::Method::HEAD {
        // A body of a known length without the header (the proxy's own pages).
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(exact.unwrap_or(0).to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if forward.close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    while !body.is_end_stream() {
        let Some(frame) = body.frame().await else {
            break;
        };
        let Ok(data) = frame
            .map_err(|_| std::io::Error::other("the backend's answer broke off"))?
            .into_data()
        else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        if chunked {
            use std::io::Write as _;
            let _ = write!(out, "{:x}\r\n", data.len());
        }
        write_with(io, out, data).await?;
        if chunked {
            out.extend_from_slice(b"\r\n");
        }
    }
    if chunked {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    if !out.is_empty() {
        io.write_all(out).await?;
        out.clear();
    }
    io.flush().await
}

/// An answer's head: a backend's as it sent it, or one the proxy made (its pages).
enum Head<'a> {
    Raw(&'a super::upstream::RawHead),
    Parts(&'a hyper::http::response::Parts),
}

impl Head<'_> {
    fn status(&self) -> hyper::StatusCode {
        match self {
            Head::Raw(h) => h.status(),
            Head::Parts(p) => p.status,
        }
    }

    /// Write the header lines (names in lower case, as hyper writes them); whether a `Date`
    /// and a `Content-Length` were among them.
    fn write_headers(&self, out: &mut Vec<u8>) -> (bool, bool) {
        let line = |out: &mut Vec<u8>, name: &[u8], value: &[u8]| {
            let at = out.len();
            out.extend_from_slice(name);
            out[at..].make_ascii_lowercase();
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        };
        match self {
            Head::Raw(h) => {
                let (mut date, mut length) = (false, false);
                for (name, value) in h.headers() {
                    date |= name.eq_ignore_ascii_case(b"date");
                    length |= name.eq_ignore_ascii_case(b"content-length");
                    line(out, name, value);
                }
                (date, length)
            }
            Head::Parts(p) => {
                for (name, value) in &p.headers {
                    line(out, name.as_str().as_bytes(), value.as_bytes());
                }
                (
                    p.headers.contains_key(hyper::header::DATE),
                    p.headers.contains_key(hyper::header::CONTENT_LENGTH),
                )
            }
        }
    }
}

/// Write what `out` holds and then `data`, in one system call when they are small; `out` is
/// left empty.
async fn write_with<T: AsyncWrite + Unpin>(
    io: &mut T,
    out: &mut Vec<u8>,
    mut data: Bytes,
) -> std::io::Result<()> {
    if out.len() + data.len() <= 16 * 1024 {
        out.extend_from_slice(&data);
        io.write_all(out).await?;
    } else {
        let mut sent = 0;
        while sent < out.len() || data.has_remaining() {
            let bufs = [
                std::io::IoSlice::new(&out[sent.min(out.len())..]),
                std::io::IoSlice::new(&data),
            ];
            let n = io.write_vectored(&bufs).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let from_out = n.min(out.len() - sent.min(out.len()));
            sent += from_out;
            data.advance(n - from_out);
        }
    }
    out.clear();
    io.flush().await
}

/// Today's `Date` value (RFC 9110 5.6.7), formatted once a second per thread.
fn date(out: &mut Vec<u8>) {
    thread_local! {
        static CACHE: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((0, String::new())) };
    }
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs || c.1.is_empty() {
            *c = (secs, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(c.1.as_bytes());
    });
}

/// A connection whose first bytes were already read: they are read again first.
struct Prefixed<T> {
    prefix: Bytes,
    io: T,
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.prefix.is_empty() {
            return Pin::new(&mut self.io).poll_read(cx, buf);
        }
        let n = self.prefix.len().min(buf.remaining());
        buf.put_slice(&self.prefix[..n]);
        self.prefix.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use binky_controllers::route::{Route, RouteSink, RouteTable};
    use binky_controllers::store::RouteState;
    use tokio::net::{TcpListener, TcpStream};

    /// A backend that answers each request with the next of `answers`, closing the connection
    /// after the last one; its port, and the request heads it got.
    async fn backend(
        answers: Vec<&'static [u8]>,
    ) -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
        use crate::scripted::Then;
        let n = answers.len();
        let script = answers
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                if i + 1 == n {
                    Then::AnswerClose(a)
                } else {
                    Then::Answer(a)
                }
            })
            .collect();
        let b = crate::scripted::backend(script).await;
        (b.port, b.heads)
    }

    fn route(host: &str, port: u16, state: RouteState) -> Route {
        Route {
            host: host.into(),
            project: "p".into(),
            world: "w".into(),
            service: "web".into(),
            port,
            backends: vec![],
            https: false,
            state,
            note: String::new(),
        }
    }

    fn publish(routes: &super::super::Routes, list: Vec<Route>) {
        let mut table = RouteTable::default();
        for r in list {
            table.routes.insert(r.host.clone(), r);
        }
        routes.publish(Arc::new(table));
    }

    /// A proxy routing `web.w.p.localhost` to `port`, serving one connection through the
    /// front; the client's end of it.
    async fn front(port: u16) -> (TcpStream, super::super::Routes) {
        front_timed(port, HEAD_TIMEOUT).await
    }

    async fn front_timed(port: u16, head_timeout: Duration) -> (TcpStream, super::super::Routes) {
        let (c, routes, _) = front_proxy(port, head_timeout).await;
        (c, routes)
    }

    /// [`front_timed`], and the proxy (its settings may be changed while it serves).
    async fn front_proxy(
        port: u16,
        head_timeout: Duration,
    ) -> (TcpStream, super::super::Routes, Arc<Proxy>) {
        let routes = super::super::Routes::default();
        publish(
            &routes,
            vec![route("web.w.p.localhost", port, RouteState::Ready)],
        );
        let proxy = Proxy::new(routes.clone());
        let mine = proxy.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, peer) = listener.accept().await.unwrap();
            let at = Listener {
                scheme: "http",
                port: addr.port(),
            };
            serve_timed(s, proxy, peer, at, head_timeout).await;
        });
        (TcpStream::connect(addr).await.unwrap(), routes, mine)
    }

    /// Read one answer: its head (lower case) and body, by Content-Length or chunked.
    /// Everything the front sends until it closes the connection.
    /// The plain request most tests send: `GET /` of the `web` route, no body.
    const GET_WEB: &[u8] = b"GET / HTTP/1.1\r\nHost: web.w.p.localhost\r\n\r\n";

    /// A client connection that has sent [`GET_WEB`] through the front to a backend that
    /// answers it with `answer` and closes.
    async fn web_answering(answer: &'static [u8]) -> TcpStream {
        let (port, _heads) = backend(vec![answer]).await;
        let (mut c, _) = front(port).await;
        c.write_all(GET_WEB).await.unwrap();
        c
    }

    async fn until_closed(s: &mut TcpStream) -> String {
        let mut all = Vec::new();
        s.read_to_end(&mut all).await.unwrap();
        String::from_utf8_lossy(&all).into_owned()
    }

    /// An answer's head as it came, up to and with its empty line.
    async fn raw_head(s: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut b).await.unwrap();
            head.push(b[0]);
        }
        String::from_utf8(head).unwrap()
    }

    async fn answer(s: &mut TcpStream, head_only: bool) -> (String, String) {
        let head = raw_head(s).await.to_ascii_lowercase();
        let mut b = [0u8; 1];
        let mut body = Vec::new();
        if head_only {
            return (head, String::new());
        }
        if let Some(n) = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
        {
            body.resize(n.trim().parse().unwrap(), 0);
            s.read_exact(&mut body).await.unwrap();
        } else {
            loop {
                let mut line = Vec::new();
                while !line.ends_with(b"\r\n") {
                    s.read_exact(&mut b).await.unwrap();
                    line.push(b[0]);
                }
                let n =
                    usize::from_str_radix(std::str::from_utf8(&line).unwrap().trim(), 16).unwrap();
                let mut chunk = vec![0u8; n + 2];
                s.read_exact(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        (head, String::from_utf8(body).unwrap())
    }

    #[tokio::test]
    async fn the_backend_gets_origin_form_lower_case_names_no_hop_by_hop_and_forwarded_headers() {
        let (port, mut heads) =
            backend(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]).await;
        let (mut c, _) = front(port).await;
        c.write_all(b"GET /a?b=c HTTP/1.1\r\nHost: Web.W.P.localhost:8080\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nTE: trailers\r\nProxy-Authorization: x\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: gopher\r\nX-Forwarded-Host: evil\r\nAccept: */*\r\nX-Custom: Keep Case\r\n\r\n").await.unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        assert_eq!(body, "ok");
        assert_eq!(
            heads.recv().await.unwrap(),
            "GET /a?b=c HTTP/1.1\r\nhost: Web.W.P.localhost:8080\r\naccept: */*\r\nx-custom: Keep Case\r\nx-forwarded-for: 10.0.0.1, 127.0.0.1\r\nx-forwarded-proto: http\r\nx-forwarded-host: Web.W.P.localhost:8080\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn the_client_gets_the_backends_headers_in_order_in_lower_case_without_hop_by_hop_ones() {
        let mut c = web_answering(
            b"HTTP/1.1 201 Created\r\nX-Secret: s\r\nSet-Cookie: a=1\r\nContent-Type: text/plain\r\nConnection: X-Secret, keep-alive\r\nKeep-Alive: timeout=5\r\nSet-Cookie: b=2\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\nUpgrade: h2c\r\nProxy-Authenticate: Basic\r\nETag: \"V1\"\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        )
        .await;
        let head = raw_head(&mut c).await;
        let lines: Vec<&str> = head.split("\r\n").collect();
        assert!(
            lines.iter().filter(|l| l.starts_with("date: ")).count() == 1,
            "a Date is added: {head}"
        );
        // The headers the connection named, hop-by-hop ones and a Content-Length beside a
        // Transfer-Encoding are gone; the rest keep their order (the two cookies too), names
        // in lower case and values as sent; the body is chunked as it came.
        let kept: Vec<&str> = lines
            .into_iter()
            .filter(|l| !l.starts_with("date: "))
            .collect();
        assert_eq!(
            kept.join("\r\n"),
            "HTTP/1.1 201 Created\r\nset-cookie: a=1\r\ncontent-type: text/plain\r\nset-cookie: b=2\r\netag: \"V1\"\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let mut rest = vec![0u8; b"2\r\nok\r\n0\r\n\r\n".len()];
        c.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, b"2\r\nok\r\n0\r\n\r\n");
    }

    #[tokio::test]
    async fn pipelined_and_byte_by_byte_requests_are_answered_in_order_on_one_connection() {
        let (port, _heads) = backend(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\ntwo",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n5\r\nthree\r\n0\r\n\r\n",
        ])
        .await;
        let (mut c, _) = front(port).await;
        let get = "GET / HTTP/1.1\r\nHost: web.w.p.localhost\r\n\r\n";
        c.write_all(format!("{get}{get}").as_bytes()).await.unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert_eq!(body, "one");
        assert!(head.contains("\r\ndate: "), "a Date is added: {head}");
        let (head, body) = answer(&mut c, false).await;
        assert_eq!(body, "two");
        assert!(
            head.contains("date: mon, 01 jan 2024"),
            "the backend's Date is kept: {head}"
        );
        for b in get.bytes() {
            c.write_all(&[b]).await.unwrap();
        }
        let (head, body) = answer(&mut c, false).await;
        assert_eq!(body, "three");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        assert!(!head.contains("keep-alive"), "{head}");
    }

    #[tokio::test]
    async fn connection_close_is_answered_and_honoured() {
        let (port, _heads) = backend(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]).await;
        let (mut c, _) = front(port).await;
        c.write_all(b"GET / HTTP/1.1\r\nHost: web.w.p.localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert!(head.contains("connection: close"), "{head}");
        assert_eq!(body, "ok");
        assert_eq!(until_closed(&mut c).await, "");
    }

    #[tokio::test]
    async fn head_keeps_its_content_length_without_a_body_and_the_connection_goes_on() {
        let (port, _heads) = backend(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ])
        .await;
        let (mut c, _) = front(port).await;
        c.write_all(b"HEAD / HTTP/1.1\r\nHost: web.w.p.localhost\r\n\r\n")
            .await
            .unwrap();
        let (head, _) = answer(&mut c, true).await;
        assert!(head.contains("content-length: 1000"), "{head}");
        c.write_all(GET_WEB).await.unwrap();
        assert_eq!(answer(&mut c, false).await.1, "ok");
    }

    #[tokio::test]
    async fn a_request_with_a_body_hands_the_connection_to_hyper_which_answers_it_and_the_rest() {
        let (port, mut heads) = backend(vec![
            b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter",
        ])
        .await;
        let (mut c, _) = front(port).await;
        c.write_all(b"POST /x HTTP/1.1\r\nHost: web.w.p.localhost\r\nContent-Length: 5\r\n\r\nhelloGET /y HTTP/1.1\r\nHost: web.w.p.localhost\r\n\r\n").await.unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert!(head.starts_with("http/1.1 201"), "{head}");
        assert_eq!(body, "made");
        assert!(heads
            .recv()
            .await
            .unwrap()
            .starts_with("POST /x HTTP/1.1\r\n"));
        assert_eq!(answer(&mut c, false).await.1, "after");
        assert!(heads
            .recv()
            .await
            .unwrap()
            .starts_with("GET /y HTTP/1.1\r\n"));
    }

    #[tokio::test]
    async fn a_malformed_head_and_an_unknown_host_get_hypers_answers() {
        let (port, _heads) = backend(vec![]).await;
        let (mut c, _) = front(port).await;
        c.write_all(b"GET / HTTP/1.1\r\nHost: nowhere.localhost\r\nAccept: text/plain\r\n\r\n")
            .await
            .unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert!(head.starts_with("http/1.1 404"), "{head}");
        assert!(body.contains("nowhere.localhost"), "{body}");
        let (mut c, _) = front(port).await;
        c.write_all(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
            .await
            .unwrap();
        let all = until_closed(&mut c).await;
        assert!(all.starts_with("HTTP/1.1 400"), "{all}");
    }

    #[tokio::test]
    async fn a_backend_that_is_down_gets_a_502_page_and_the_connection_is_kept() {
        let (port, _heads) = backend(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]).await;
        // A port nothing listens on.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let down = closed.local_addr().unwrap().port();
        drop(closed);
        let (mut c, routes) = front(down).await;
        c.write_all(b"GET / HTTP/1.1\r\nHost: web.w.p.localhost\r\nAccept: text/html\r\n\r\n")
            .await
            .unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert!(head.starts_with("http/1.1 502"), "{head}");
        assert!(head.contains("content-type: text/html"), "{head}");
        assert!(body.contains("connection refused"), "{body}");
        // The route changes while the connection is idle: the next request goes by the new table.
        publish(
            &routes,
            vec![route("web.w.p.localhost", port, RouteState::Ready)],
        );
        c.write_all(GET_WEB).await.unwrap();
        assert_eq!(answer(&mut c, false).await.1, "ok");
    }

    #[tokio::test]
    async fn a_backend_that_breaks_off_its_body_closes_the_clients_connection() {
        let mut c = web_answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this").await;
        let all = until_closed(&mut c).await;
        assert!(all.contains("content-length: 100\r\n"), "{all}");
        assert!(all.ends_with("\r\n\r\nonly this"), "{all}");
    }

    #[tokio::test]
    async fn a_connection_without_a_whole_head_in_time_is_closed() {
        let (port, _heads) = backend(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]).await;
        // Idle from the start, and a head that stops half way: both closed by the front.
        for sent in [&b""[..], b"GET / HTTP/1.1\r\nHost: web.w"] {
            let (mut c, _) = front_timed(port, Duration::from_millis(200)).await;
            c.write_all(sent).await.unwrap();
            let mut rest = Vec::new();
            let closed = tokio::time::timeout(Duration::from_secs(30), c.read_to_end(&mut rest))
                .await
                .expect("the connection is closed");
            assert_eq!(closed.unwrap(), 0, "{:?}", String::from_utf8_lossy(&rest));
        }
    }

    #[tokio::test]
    async fn an_http10_request_is_answered_by_hyper_after_the_handover() {
        let (port, mut heads) =
            backend(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]).await;
        let (mut c, _) = front(port).await;
        c.write_all(b"GET /old HTTP/1.0\r\nHost: web.w.p.localhost\r\n\r\n")
            .await
            .unwrap();
        let all = until_closed(&mut c).await;
        assert!(
            all.starts_with("HTTP/1.0 200") || all.starts_with("HTTP/1.1 200"),
            "{all}"
        );
        assert!(all.ends_with("\r\n\r\nok"), "{all}");
        // hyper's client sent it on as HTTP/1.1.
        assert!(heads
            .recv()
            .await
            .unwrap()
            .starts_with("GET /old HTTP/1.1\r\n"));
    }

    #[tokio::test]
    async fn two_host_headers_or_a_host_beside_another_target_are_refused_on_every_path() {
        let (port, mut heads) =
            backend(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]).await;
        for request in [
            // No body: the front's own kind of request.
            &b"GET / HTTP/1.1\r\nHost: web.w.p.localhost\r\nHost: evil.localhost\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: evil.localhost\r\nHost: web.w.p.localhost\r\n\r\n",
            // A body: hyper's server and client.
            b"POST / HTTP/1.1\r\nHost: web.w.p.localhost\r\nHost: evil.localhost\r\nContent-Length: 2\r\n\r\nhi",
            b"POST / HTTP/1.1\r\nHost: web.w.p.localhost\r\nTransfer-Encoding: chunked\r\nhost: web.w.p.localhost\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
            // An absolute target naming another host than its Host header.
            b"GET http://evil.localhost/ HTTP/1.1\r\nHost: web.w.p.localhost\r\n\r\n",
        ] {
            let (mut c, _) = front(port).await;
            c.write_all(request).await.unwrap();
            let (head, body) = answer(&mut c, false).await;
            let shown = String::from_utf8_lossy(request);
            assert!(head.starts_with("http/1.1 400"), "{shown}: {head}{body}");
            assert!(body.contains("Host header"), "{shown}: {body}");
        }
        // One Host reaches the backend; none of the refused requests did.
        let (mut c, _) = front(port).await;
        c.write_all(b"GET /one HTTP/1.1\r\nHost: web.w.p.localhost\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(answer(&mut c, false).await.1, "ok");
        let first = heads.recv().await.unwrap();
        assert!(
            first.starts_with("GET /one "),
            "a refused request reached the backend: {first}"
        );
    }

    #[tokio::test]
    async fn a_backend_that_sends_nothing_gets_a_504_naming_it_on_every_path() {
        use crate::scripted::Then;
        let silent = crate::scripted::backend(vec![Then::Silent, Then::Silent]).await;
        let (mut c, _, proxy) = front_proxy(silent.port, HEAD_TIMEOUT).await;
        proxy.set_answer_timeout(Some(Duration::from_millis(300)));
        for request in [
            // The front's request, then one with a body (hyper's client), on one connection.
            GET_WEB,
            b"POST / HTTP/1.1\r\nHost: web.w.p.localhost\r\nContent-Length: 2\r\n\r\nhi",
        ] {
            let started = Instant::now();
            c.write_all(request).await.unwrap();
            let (head, body) = answer(&mut c, false).await;
            assert!(head.starts_with("http/1.1 504"), "{head}{body}");
            assert!(
                body.contains("web of world w (p) did not answer in 300ms")
                    && body.contains("proxy_answer_timeout"),
                "{body}"
            );
            assert!(started.elapsed() >= Duration::from_millis(300));
        }
        assert_eq!(silent.connections(), 2, "each path took its own connection");
    }

    /// The wait for an answer starts once the request's body was sent: an upload slower than
    /// the limit is not the backend's delay.
    #[tokio::test]
    async fn the_wait_for_an_answer_starts_when_the_upload_ends() {
        // A backend that answers once it has the whole body.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut b = [0u8; 1024];
            while !got.ends_with(b"0\r\n\r\n") {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&b[..n]),
                }
            }
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nuploaded")
                .await;
            let _ = s.read(&mut b).await;
        });
        let (mut c, _, proxy) = front_proxy(port, HEAD_TIMEOUT).await;
        let limit = Duration::from_millis(500);
        proxy.set_answer_timeout(Some(limit));
        c.write_all(b"POST / HTTP/1.1\r\nHost: web.w.p.localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nslow \r\n")
            .await
            .unwrap();
        // The client takes three times the limit to send the rest (a slow upload, not a
        // wait for something to happen).
        tokio::time::sleep(limit * 3).await;
        c.write_all(b"6\r\nupload\r\n0\r\n\r\n").await.unwrap();
        let (head, body) = answer(&mut c, false).await;
        assert!(head.starts_with("http/1.1 200"), "{head}{body}");
        assert_eq!(body, "uploaded");
    }
}
