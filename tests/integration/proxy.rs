//! The proxy: hostnames to the right world over HTTP, HTTPS and h2, upgrades, streaming,
//! error pages, and bad clients that must not hurt anyone else.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::*;

fn config(https: bool) -> String {
    format!(
        r#"
[project]
name = "acme"
{{range}}
https = {https}

[services.web]
cmd = "{SERVE}"
url = "web"
depends_on = ["api"]
env = {{ API_URL = "${{api.proxy_url}}" }}

[services.api]
cmd = "{SERVE}"
url = "api"
"#
    )
}

/// One raw HTTP/1.1 request to the proxy; the whole answer (head and body).
fn raw(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(port: u16, host: &str, path: &str, accept: &str) -> String {
    raw(
        port,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
        ),
    )
}

fn status_of(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn body_json(answer: &str) -> serde_json::Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[test]
fn hostnames_reach_the_right_world_and_service() {
    let env = Env::new(&config(false));
    env.ok(&["up", "login-fix"]);
    env.ok(&["up", "feat/login"]);
    let p = env.proxy_port();
    let slug = binky_controllers::route::dns_slug("feat/login");
    assert!(slug.starts_with("feat-login-"), "{slug}");
    for (world, label) in [
        ("login-fix", "login-fix".to_owned()),
        ("feat/login", slug.clone()),
    ] {
        for svc in ["web", "api"] {
            let a = get(p, &format!("{svc}.{label}.acme.localhost"), "/", "*/*");
            assert_eq!(status_of(&a), 200, "{a}");
            let served = body_json(&a);
            assert_eq!(served["BINKY_WORKTREE"], world);
            assert_eq!(
                served["PORT"],
                env.port_of(world, svc).to_string(),
                "{svc} of {world}"
            );
            // Forwarded headers, and the Host kept as sent.
            let head = served["_request"].as_str().unwrap().to_ascii_lowercase();
            assert!(
                head.contains(&format!("host: {svc}.{label}.acme.localhost")),
                "{head}"
            );
            assert!(head.contains("x-forwarded-for: 127.0.0.1"), "{head}");
            assert!(head.contains("x-forwarded-proto: http"), "{head}");
            assert!(
                head.contains(&format!("x-forwarded-host: {svc}.{label}.acme.localhost")),
                "{head}"
            );
        }
        // The world's own host is its first URL service (web, first in the file).
        let a = get(p, &format!("{label}.acme.localhost:{p}"), "/", "*/*");
        assert_eq!(body_json(&a)["PORT"], env.port_of(world, "web").to_string());
    }
    // env and ${api.proxy_url} carry the proxy URL; the web reaches its own api through it.
    let e = env.env_of("login-fix");
    assert_eq!(
        e["WEB_URL"],
        format!("http://web.login-fix.acme.localhost:{p}")
    );
    let web = served_env(env.port_of("login-fix", "web"));
    assert_eq!(
        web["API_URL"],
        format!("http://api.login-fix.acme.localhost:{p}")
    );
    // binky curl: the same, with no DNS.
    let out = env.binky(&["curl", "feat/login", "api", "/x?y=1", "-i"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("\"BINKY_WORKTREE\": \"feat/login\""),
        "{text}"
    );
    assert!(text.contains("GET /x?y=1 HTTP/1.1"), "{text}");
    // Status shows the URLs.
    let status = env.ok(&["status"]);
    assert!(
        status.contains(&format!("http://web.{slug}.acme.localhost:{p}")),
        "{status}"
    );
    env.ok(&["remove", "login-fix"]);
    env.ok(&["remove", "feat/login"]);
    env.assert_nothing_left(&["login-fix", "feat/login"]);
    // Routes go with their worlds.
    assert_eq!(
        status_of(&get(p, "web.login-fix.acme.localhost", "/", "*/*")),
        404
    );
}

#[test]
fn unknown_hosts_list_what_exists_and_stopped_worlds_say_so() {
    let env = Env::new(&config(false));
    env.ok(&["up", "w"]);
    let p = env.proxy_port();
    let a = get(p, "nope.acme.localhost", "/", "text/plain");
    assert_eq!(status_of(&a), 404);
    assert!(a.contains("no world answers to nope.acme.localhost"), "{a}");
    assert!(
        a.contains(&format!("http://web.w.acme.localhost:{p}")),
        "{a}"
    );
    let html = get(p, "nope.acme.localhost", "/", "text/html,*/*");
    assert!(
        html.contains("text/html") && html.contains("<a href=\"http://api.w.acme.localhost"),
        "{html}"
    );

    env.ok(&["down", "w"]);
    let a = get(p, "web.w.acme.localhost", "/", "text/plain");
    assert_eq!(status_of(&a), 503, "{a}");
    assert!(
        a.contains("web of world w (acme) is not running") && a.contains("binky up w"),
        "{a}"
    );
    env.ok(&["up", "w"]);
    assert_eq!(status_of(&get(p, "web.w.acme.localhost", "/", "*/*")), 200);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_backend_that_does_not_answer_gets_a_502_naming_it_and_the_proxy_stays_up() {
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.deaf]
cmd = "sleep 1000"
url = true
health = {{ cmd = "true" }}

[services.web]
cmd = "{SERVE}"
url = true
"#
    ));
    env.ok(&["up", "w"]);
    let p = env.proxy_port();
    let a = get(p, "deaf.w.acme.localhost", "/", "text/plain");
    assert_eq!(status_of(&a), 502, "{a}");
    assert!(a.contains("deaf of world w (acme) did not answer"), "{a}");
    assert!(a.contains("connection refused"), "{a}");
    assert_eq!(status_of(&get(p, "web.w.acme.localhost", "/", "*/*")), 200);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A service that takes connections and requests and never answers.
const HANGS: &str = r#"
import os, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["PORT"]))); s.listen(64)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
"#;

/// `proxy_answer_timeout` bounds the wait for a service's answer: past it the client gets a
/// `504` page naming the world and the service, on the path of requests without a body and
/// on the one with (hyper's client), and the setting applies without restarting anything.
#[test]
fn a_service_that_never_answers_gets_a_504_naming_it_once_the_answer_timeout_passes() {
    let env = python_world("hang", HANGS);
    env.ok(&["settings", "proxy_answer_timeout=1s"]);
    let p = env.proxy_port();
    let host = "hang.w.acme.localhost";
    for request in [
        format!("GET / HTTP/1.1\r\nHost: {host}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"),
        format!("POST /form HTTP/1.1\r\nHost: {host}\r\nAccept: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"),
    ] {
        let started = Instant::now();
        let a = raw(p, &request);
        let took = started.elapsed();
        assert_eq!(status_of(&a), 504, "{a}");
        assert!(
            a.contains("hang of world w (acme) did not answer in 1s")
                && a.contains("proxy_answer_timeout")
                && a.contains("binky logs w hang"),
            "{a}"
        );
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(9),
            "answered after {took:?}"
        );
    }
    // A longer limit: the same request is waited on for longer (the setting was read again).
    env.ok(&["settings", "proxy_answer_timeout=3s"]);
    let started = Instant::now();
    let a = get(p, host, "/", "text/plain");
    assert_eq!(status_of(&a), 504, "{a}");
    assert!(a.contains("did not answer in 3s"), "{a}");
    assert!(started.elapsed() >= Duration::from_secs(3));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// Two `Host` headers are refused on every path with a `400` and reach no service: the
/// proxy must not route by one while the service reads the other.
#[test]
fn a_request_with_two_host_headers_is_refused_and_reaches_no_service() {
    let env = Env::new(&config(false));
    env.ok(&["up", "w"]);
    let p = env.proxy_port();
    let (web, api) = ("web.w.acme.localhost", "api.w.acme.localhost");
    for request in [
        format!("GET / HTTP/1.1\r\nHost: {web}\r\nHost: {api}\r\nConnection: close\r\n\r\n"),
        format!("GET / HTTP/1.1\r\nHost: {web}\r\nhost: {web}\r\nConnection: close\r\n\r\n"),
        format!("POST / HTTP/1.1\r\nHost: {web}\r\nHost: {api}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"),
        format!("GET / HTTP/1.1\r\nHost: {web}\r\nUpgrade: websocket\r\nConnection: Upgrade, close\r\nHost: {api}\r\n\r\n"),
        format!("GET http://{api}/ HTTP/1.1\r\nHost: {web}\r\nConnection: close\r\n\r\n"),
    ] {
        let a = raw(p, &request);
        assert_eq!(status_of(&a), 400, "{request:?}: {a}");
        assert!(a.contains("Host header"), "{a}");
        assert!(!a.contains("BINKY_WORKTREE"), "a service answered: {a}");
    }
    // One Host is served.
    let a = get(p, web, "/", "*/*");
    assert_eq!(status_of(&a), 200, "{a}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn bad_clients_are_turned_away_without_hurting_others() {
    let env = Env::new(&config(true));
    env.ok(&["up", "w"]);
    let p = env.proxy_port();
    // Garbage instead of HTTP.
    let a = raw(p, "\x16\x03\x01garbage\r\n\r\n");
    assert!(a.is_empty() || status_of(&a) == 400, "{a:?}");
    // A request line that is not one.
    let a = raw(p, "NOT A REQUEST\r\n\r\n");
    assert!(a.is_empty() || status_of(&a) == 400, "{a:?}");
    // A 100 KiB header.
    let big = "x".repeat(100 * 1024);
    let a = raw(
        p,
        &format!("GET / HTTP/1.1\r\nHost: web.w.acme.localhost\r\nX-Big: {big}\r\n\r\n"),
    );
    assert!(
        a.is_empty() || status_of(&a) == 431,
        "{}",
        &a[..a.len().min(200)]
    );
    // A TLS hello for a name binky does not route: no certificate, handshake refused.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    let err = rt
        .block_on(tls_get(
            env.https_port(),
            "evil.example.com",
            &ca,
            b"http/1.1",
        ))
        .unwrap_err();
    assert!(
        err.contains("alert") || err.contains("handshake") || err.contains("unrecognised"),
        "{err}"
    );
    // Everyone else is still served, over both schemes.
    assert_eq!(status_of(&get(p, "web.w.acme.localhost", "/", "*/*")), 200);
    let (version, body) = rt
        .block_on(tls_get(
            env.https_port(),
            "web.w.acme.localhost",
            &ca,
            b"http/1.1",
        ))
        .unwrap();
    assert_eq!(version, "HTTP/1.1");
    assert!(body.contains("\"BINKY_WORKTREE\": \"w\""));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A TLS connection to the proxy's `port` for `host`, trusting only `ca_pem`, offering `alpn`.
async fn tls_connect(
    port: u16,
    host: &str,
    ca_pem: &str,
    alpn: &[u8],
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let der = binky::proxy::tls::pem_to_der(ca_pem).unwrap();
    let cfg = binky::proxy::tls::client_config(der, &[alpn]).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name =
        rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())
}

/// GET / over TLS (trusting only `ca_pem`), with the given ALPN; (version, body).
async fn tls_get(
    port: u16,
    host: &str,
    ca_pem: &str,
    alpn: &[u8],
) -> Result<(String, String), String> {
    use http_body_util::BodyExt;
    let tls = tls_connect(port, host, ca_pem, alpn).await?;
    let negotiated = tls.get_ref().1.alpn_protocol().map(|p| p.to_vec());
    let io = hyper_util::rt::TokioIo::new(tls);
    let req = hyper::Request::builder()
        .uri(format!("https://{host}/"))
        .header(hyper::header::HOST, host)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = if negotiated.as_deref() == Some(b"h2") {
        let (mut send, conn) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        send.send_request(req).await.map_err(|e| e.to_string())?
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        send.send_request(req).await.map_err(|e| e.to_string())?
    };
    let version = format!("{:?}", resp.version());
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((version, String::from_utf8_lossy(&body).into_owned()))
}

#[test]
fn https_with_the_local_ca_as_the_only_root_and_h2_by_alpn() {
    let env = Env::new(&config(true));
    env.ok(&["up", "w"]);
    let e = env.env_of("w");
    assert_eq!(
        e["WEB_URL"],
        format!("https://web.w.acme.localhost:{}", env.https_port())
    );
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let key_mode = std::fs::metadata(env.home.join("ca/ca.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(key_mode & 0o777, 0o600);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (version, body) = rt
        .block_on(tls_get(
            env.https_port(),
            "api.w.acme.localhost",
            &ca,
            b"h2",
        ))
        .unwrap();
    assert_eq!(version, "HTTP/2.0");
    let served: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(served["PORT"], env.port_of("w", "api").to_string());
    assert!(served["_request"]
        .as_str()
        .unwrap()
        .to_ascii_lowercase()
        .contains("x-forwarded-proto: https"));
    // binky curl speaks TLS to https projects, trusting the same CA.
    let out = env.binky(&["curl", "w", "web", "-f"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"BINKY_WORKTREE\": \"w\""));
    // A project without `https = true` gets no certificate.
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A threaded HTTP/1.1 backend: `/n/I` answers I's own body (sizes from a few bytes to
/// 90 KiB), `/stream?PATH` sends `first`, then `last` only once the file PATH exists, and a POST
/// is answered with the length and SHA-256 of its body.
const H2_BACKEND: &str = r#"
import hashlib, http.server, os, socketserver, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path.startswith("/n/"):
            i = int(self.path[3:])
            self.send((b"%d;" % i) * (i * i * 15 + 1))
        elif self.path.startswith("/stream?"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"5\r\nfirst\r\n"); self.wfile.flush()
            while not os.path.exists(self.path[8:]):
                time.sleep(0.01)
            self.wfile.write(b"4\r\nlast\r\n0\r\n\r\n")
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send(b"%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode()))
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    # (Python's default backlog of 5 drops connections past it: 12 s retransmissions.)
    request_queue_size = 128
S(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"#;

/// Many streams at once on one h2 connection each get their own whole answer (small ones
/// written out together, large ones past the gathering buffer), a streamed answer's first
/// piece arrives while the backend still holds the rest, and an upload arrives intact.
/// `fut`, or a panic naming `what` after 60 s.
async fn within<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing in 60 s"))
}

/// The whole body of `resp`, within 60 s.
async fn body_of(what: &str, resp: hyper::Response<hyper::body::Incoming>) -> bytes::Bytes {
    use http_body_util::BodyExt;
    within(what, resp.into_body().collect())
        .await
        .unwrap()
        .to_bytes()
}

#[test]
fn h2_streams_share_a_connection_and_each_gets_its_own_answer() {
    use http_body_util::BodyExt;
    let env = python_world_over("h2", H2_BACKEND, true);
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    let host = "h2.w.acme.localhost";
    let port = env.https_port();
    let go = env.repo.join("go");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // An h2 connection: what sends requests on it, and its task.
        let connect = || async {
            let tls = tls_connect(port, host, &ca, b"h2").await.unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (send, conn) = hyper::client::conn::http2::handshake(
                hyper_util::rt::TokioExecutor::new(),
                hyper_util::rt::TokioIo::new(tls),
            )
            .await
            .unwrap();
            (send, tokio::spawn(conn))
        };
        let (send, _conn) = connect().await;
        let request = |method: &str, path: &str, body: bytes::Bytes| {
            hyper::Request::builder()
                .method(method)
                .uri(format!("https://{host}{path}"))
                .body(http_body_util::Full::new(body))
                .unwrap()
        };
        // 48 GETs in flight at once.
        let mut asked = tokio::task::JoinSet::new();
        for i in 0..48u32 {
            let mut send = send.clone();
            let req = request("GET", &format!("/n/{i}"), bytes::Bytes::new());
            asked.spawn(async move {
                let resp = send.send_request(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                assert_eq!(resp.version(), hyper::Version::HTTP_2);
                (i, resp.into_body().collect().await.unwrap().to_bytes())
            });
        }
        while let Some(done) = within("the 48 answers", asked.join_next()).await {
            let (i, body) = done.unwrap();
            let want = format!("{i};").repeat((i * i * 15 + 1) as usize);
            assert!(body == want.as_bytes(), "stream {i}: {} bytes", body.len());
        }
        // Streaming: `first` arrives while the backend waits for the file `go`.
        let mut resp = within(
            "the streamed answer's head",
            send.clone().send_request(request(
                "GET",
                &format!("/stream?{}", go.display()),
                bytes::Bytes::new(),
            )),
        )
        .await
        .unwrap();
        let first = within("the streamed answer's first piece", resp.body_mut().frame())
            .await
            .unwrap()
            .unwrap()
            .into_data()
            .unwrap();
        assert_eq!(&first[..], b"first");
        std::fs::write(&go, "").unwrap();
        let rest = body_of("the streamed answer's end", resp).await;
        assert_eq!(&rest[..], b"last");
        // An upload: 3 MiB, intact.
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
        use sha2::Digest;
        let sum: String = sha2::Sha256::digest(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let resp = within(
            "the upload's answer",
            send.clone()
                .send_request(request("POST", "/echo", data.into())),
        )
        .await
        .unwrap();
        let got = body_of("the upload's answer body", resp).await;
        assert_eq!(String::from_utf8_lossy(&got), format!("{} {sum}", 3 << 20));
        // A client that goes away while its answer is still coming costs no one else anything.
        let (mut gone, conn) = connect().await;
        let never = go.with_file_name("never");
        let resp = within(
            "the abandoned answer's head",
            gone.send_request(request(
                "GET",
                &format!("/stream?{}", never.display()),
                bytes::Bytes::new(),
            )),
        )
        .await
        .unwrap();
        conn.abort();
        drop((resp, gone));
        let (mut next, _conn) = connect().await;
        let resp = within(
            "an answer after a client went away",
            next.send_request(request("GET", "/n/3", bytes::Bytes::new())),
        )
        .await
        .unwrap();
        let body = body_of("its body", resp).await;
        assert_eq!(&body[..], "3;".repeat(136).as_bytes());
    });
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn bodies_stream_both_ways() {
    let env = Env::new(&config(false));
    env.ok(&["up", "w"]);
    let p = env.proxy_port();
    // Upload: 8 MiB arrive intact.
    let body: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut s = TcpStream::connect(("127.0.0.1", p)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "POST /echo HTTP/1.1\r\nHost: api.w.acme.localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
    s.write_all(&body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    use sha2::Digest;
    let sum: String = sha2::Sha256::digest(&body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let got = body_json(&out);
    assert_eq!(got["length"], body.len());
    assert_eq!(got["sha256"], sum);
    // Download: the first chunk arrives long before the last is sent.
    let mut s = TcpStream::connect(("127.0.0.1", p)).unwrap();
    s.write_all(b"GET /stream HTTP/1.1\r\nHost: api.w.acme.localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    let mut seen = String::new();
    while !seen.contains("chunk0") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let first = t.elapsed();
    let mut rest = String::new();
    s.read_to_string(&mut rest).unwrap();
    let all = t.elapsed();
    assert!(rest.contains("chunk2"), "{rest}");
    assert!(
        first < Duration::from_millis(300) && all >= Duration::from_millis(700),
        "first {first:?}, all {all:?}: the proxy buffered the body"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// World `w` of project `acme` up, its one service `service` (with a URL) running `source`
/// with python3.
fn python_world(service: &str, source: &str) -> Env {
    python_world_over(service, source, false)
}

/// [`python_world`], with `https = true` when `https`.
fn python_world_over(service: &str, source: &str, https: bool) -> Env {
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}
https = {https}

[services.{service}]
cmd = "exec python3 {service}.py"
url = true
"#
    ));
    std::fs::write(env.repo.join(format!("{service}.py")), source).unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", service]);
    env.ok(&["up", "w"]);
    env
}

const WS_ECHO: &str = r#"
import base64, hashlib, os, socket, sys, threading
port = int(os.environ["PORT"])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(16)
def recv_exact(c, n):
    b = b""
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k: raise EOFError
        b += k
    return b
def serve(c):
    req = b""
    while b"\r\n\r\n" not in req:
        k = c.recv(4096)
        if not k: return
        req += k
    key = [l.split(b":", 1)[1].strip() for l in req.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")]
    if not key:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); c.close(); return
    accept = base64.b64encode(hashlib.sha1(key[0] + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    # A greeting in the same write as the 101, as a hot-reload server says it is connected.
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n\x81\x05ready")
    try:
        while True:
            b0, b1 = recv_exact(c, 2)
            n = b1 & 127
            if n == 126: n = int.from_bytes(recv_exact(c, 2), "big")
            mask = recv_exact(c, 4) if b1 & 128 else b"\0\0\0\0"
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(recv_exact(c, n)))
            if b0 & 15 == 8: c.sendall(b"\x88\x00"); return
            reply = ("echo " + os.environ["BINKY_WORKTREE"] + ": ").encode() + data
            c.sendall(bytes([0x81, len(reply)]) + reply)
    except EOFError:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// A WebSocket session with [`WS_ECHO`] at `host` over `s`: the upgrade, the greeting sent
/// with the 101, two echoes and a close.
fn websocket_session(s: &mut (impl Read + Write), host: &str) {
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    write!(
        s,
        "GET /socket HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    s.flush().unwrap();
    let head = read_head(s);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    let frame_in = |s: &mut dyn Read| {
        let mut hdr = [0u8; 2];
        s.read_exact(&mut hdr).unwrap();
        let mut payload = vec![0u8; (hdr[1] & 127) as usize];
        s.read_exact(&mut payload).unwrap();
        (hdr[0], String::from_utf8_lossy(&payload).into_owned())
    };
    // What the backend sent with its 101 arrives, before anything is asked.
    assert_eq!(frame_in(s), (0x81, "ready".to_owned()));
    for msg in ["hello", "second message"] {
        let mask = [1u8, 2, 3, 4];
        let mut frame = vec![0x81, 0x80 | msg.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(msg.bytes().enumerate().map(|(i, c)| c ^ mask[i % 4]));
        s.write_all(&frame).unwrap();
        s.flush().unwrap();
        assert_eq!(frame_in(s), (0x81, format!("echo w: {msg}")));
    }
    s.write_all(&[0x88, 0x80, 0, 0, 0, 0]).unwrap();
    s.flush().unwrap();
    assert_eq!(frame_in(s).0, 0x88, "the close is answered");
}

#[test]
fn a_websocket_echo_works_through_the_proxy() {
    let env = python_world("ws", WS_ECHO);
    let mut s = TcpStream::connect(("127.0.0.1", env.proxy_port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    websocket_session(&mut s, "ws.w.acme.localhost");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_websocket_echo_works_over_https_through_the_proxy() {
    let env = python_world_over("ws", WS_ECHO, true);
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    let host = "ws.w.acme.localhost";
    let der = binky::proxy::tls::pem_to_der(&ca).unwrap();
    let cfg = binky::proxy::tls::client_config(der, &[b"http/1.1"]).unwrap();
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", env.https_port())).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(rustls::ClientConnection::new(cfg, name).unwrap(), tcp);
    websocket_session(&mut tls, host);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn two_hundred_concurrent_connections_across_ten_worlds_never_cross() {
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.web]
cmd = "{SERVE}"
url = true
"#
    ));
    env.ok(&["daemon", "start"]);
    let worlds: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    std::thread::scope(|s| {
        for w in &worlds {
            s.spawn(|| env.ok(&["up", w, "-q"]));
        }
    });
    let p = env.proxy_port();
    let results: Vec<(String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let world = worlds[(i * 7) % 10].clone();
                s.spawn(move || {
                    let a = get(p, &format!("web.{world}.acme.localhost"), "/", "*/*");
                    (
                        world,
                        body_json(&a)["BINKY_WORKTREE"]
                            .as_str()
                            .unwrap_or("?")
                            .to_owned(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.len(), 200);
    for (asked, got) in &results {
        assert_eq!(asked, got, "a request for {asked} was answered by {got}");
    }
    for w in &worlds {
        env.ok(&["remove", w, "-q"]);
    }
    let refs: Vec<&str> = worlds.iter().map(String::as_str).collect();
    env.assert_nothing_left(&refs);
}

/// The proxy's port is held by someone else (this test): `binky port` says by whom and serves on the next
/// port, which it returns.
fn assert_falls_back(env: &Env) -> u16 {
    let port = env.ok(&["port"]);
    let fallback = env.proxy_port() + 1;
    assert!(
        port.contains(&format!("port {} is in use by", env.proxy_port())),
        "{port}"
    );
    // The daemon names the holder (this test, which binds the port) to the proxy's listener.
    assert!(
        port.contains(&format!("(pid {})", std::process::id())),
        "{port}"
    );
    assert!(
        port.contains(&format!("serving on {fallback} instead")),
        "{port}"
    );
    fallback
}

#[test]
fn a_proxy_port_held_by_another_process_falls_back_and_says_so() {
    let env = Env::new(&config(false));
    let squatter = std::net::TcpListener::bind(("127.0.0.1", env.proxy_port())).unwrap();
    env.ok(&["up", "w"]);
    let fallback = assert_falls_back(&env);
    assert!(env
        .ok(&["status"])
        .contains(&format!("serving on {fallback} instead")));
    // URLs carry the port actually served.
    assert_eq!(
        env.env_of("w")["WEB_URL"],
        format!("http://web.w.acme.localhost:{fallback}")
    );
    assert_eq!(
        status_of(&get(fallback, "web.w.acme.localhost", "/", "*/*")),
        200
    );
    // Moving the proxy: `binky port` rebinds and the services' URLs follow.
    drop(squatter);
    let moved = env.ok(&["port", "--proxy", &env.proxy_port().to_string()]);
    assert!(
        moved.contains(&format!("http 127.0.0.1:{}", env.proxy_port())),
        "{moved}"
    );
    wait_until(
        "web's API_URL follows the proxy",
        Duration::from_secs(15),
        || {
            try_served_env(env.port_of("w", "web")).is_some_and(|e| {
                e["API_URL"] == format!("http://api.w.acme.localhost:{}", env.proxy_port())
            })
        },
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_proxy_port_another_server_holds_with_so_reuseport_is_not_shared() {
    // nginx's `listen … reuseport` (or another daemon) binds with SO_REUSEPORT, which the
    // proxy's own workers use too: the daemon must still see the port as taken.
    let env = Env::new(&config(false));
    let squatter =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    squatter.set_reuse_port(true).unwrap();
    squatter
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], env.proxy_port())).into())
        .unwrap();
    squatter.listen(16).unwrap();
    env.ok(&["up", "w"]);
    let fallback = assert_falls_back(&env);
    assert_eq!(
        status_of(&get(fallback, "web.w.acme.localhost", "/", "*/*")),
        200
    );
    // Nothing of binky's answers on the held port: a connection there reaches only the
    // squatter, which never answers.
    squatter.set_nonblocking(true).unwrap();
    let _client = std::net::TcpStream::connect(("127.0.0.1", env.proxy_port())).unwrap();
    wait_until(
        "the squatter has the connection",
        Duration::from_secs(5),
        || squatter.accept().is_ok(),
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn hosts_lists_every_routed_name_and_manages_its_own_block() {
    let env = Env::new(&config(false));
    env.ok(&["up", "w"]);
    let listed = env.ok(&["hosts"]);
    for h in [
        "web.w.acme.localhost",
        "api.w.acme.localhost",
        "w.acme.localhost",
    ] {
        assert!(
            listed.lines().any(|l| l == format!("127.0.0.1 {h}")),
            "{listed}"
        );
    }
    // Why a person would want the lines on this system, while no file is kept.
    let out = env.binky(&["hosts"]);
    assert!(
        stderr(&out).contains("`binky hosts --write` puts"),
        "{}",
        stderr(&out)
    );
    let file = env.dir.path().join("hosts");
    std::fs::write(&file, "127.0.0.1 localhost\n::1 localhost ip6-localhost\n").unwrap();
    let f = file.to_str().unwrap();
    for _ in 0..2 {
        let out = env.binky_env(&["hosts", "--write"], &[("BINKY_HOSTS_FILE", f)]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("127.0.0.1 localhost\n::1 localhost ip6-localhost\n# binky begin"),
        "{text}"
    );
    assert_eq!(
        text.matches("# binky begin").count(),
        1,
        "the block was written twice: {text}"
    );
    assert!(text.contains("127.0.0.1 web.w.acme.localhost\n"), "{text}");
    let out = env.binky_env(&["hosts", "--remove"], &[("BINKY_HOSTS_FILE", f)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn trust_puts_the_ca_in_the_system_store_and_uninstall_takes_it_out() {
    let env = Env::new(&config(true));
    env.ok(&["up", "w"]);
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root {
        let out = env.binky(&["trust"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("needs root") && stderr(&out).contains("sudo cp"),
            "{}",
            stderr(&out)
        );
        env.ok(&["remove", "w"]);
        return;
    }
    let anchor = format!(
        "/usr/local/share/ca-certificates/binky-{}.crt",
        home_tag(&env.home)
    );
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    let body: String = ca.lines().filter(|l| !l.starts_with("-----")).collect();
    let in_bundle = || {
        std::fs::read_to_string(bundle)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect::<String>()
            .contains(&body)
    };
    let out = env.ok(&["trust"]);
    assert!(
        out.contains("trusted by the system") && out.contains("Firefox"),
        "{out}"
    );
    assert!(std::path::Path::new(&anchor).exists());
    assert!(in_bundle(), "the CA is not in {bundle}");
    // A client that knows only the system store now accepts binky's certificate.
    let url = format!("https://web.w.acme.localhost:{}/", env.https_port());
    let curl = std::process::Command::new("curl")
        .args(["-sS", "--fail", &url])
        .output()
        .unwrap();
    assert!(
        curl.status.success(),
        "{}",
        String::from_utf8_lossy(&curl.stderr)
    );
    assert!(String::from_utf8_lossy(&curl.stdout).contains("\"BINKY_WORKTREE\": \"w\""));
    let out = env.ok(&["trust", "--uninstall"]);
    assert!(out.contains("removed"), "{out}");
    assert!(!std::path::Path::new(&anchor).exists());
    assert!(!in_bundle(), "the CA is still in {bundle}");
    let curl = std::process::Command::new("curl")
        .args(["-sS", "--fail", &url])
        .output()
        .unwrap();
    assert!(!curl.status.success(), "curl still trusts the removed CA");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A client in the world, trusting only the file `NODE_EXTRA_CA_CERTS` names, fetches the
/// world's https URL (Python's ssl here; Node reads the same variable).
const TRUSTING_CLIENT: &str = r#"
import os, socket, ssl, sys
host, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context(cafile=os.environ["NODE_EXTRA_CA_CERTS"])
with socket.create_connection(("127.0.0.1", port)) as raw:
    with ctx.wrap_socket(raw, server_hostname=host) as s:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        print(s.recv(100).decode().split("\r\n")[0])
"#;

#[test]
fn processes_and_exec_get_binkys_ca_as_node_extra_ca_certs_and_it_verifies_the_worlds_https() {
    let env = Env::new(&config(true));
    // The caller already names a CA file (a company's proxy): Node reads one file, so the
    // process gets a bundle of theirs and binky's.
    let company = env.dir.path().join("company-ca.pem");
    std::fs::write(&company, "# company root\n").unwrap();
    let company = company.display().to_string();
    let out = env.binky_env(&["up", "w"], &[("NODE_EXTRA_CA_CERTS", &company)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    let served = served_env(env.port_of("w", "web"));
    let given = served["NODE_EXTRA_CA_CERTS"].as_str().unwrap().to_owned();
    assert!(
        given.starts_with(&env.home.join("ca").display().to_string()),
        "{given}"
    );
    let bundle = std::fs::read_to_string(&given).unwrap();
    assert!(
        bundle.starts_with("# company root\n") && bundle.ends_with(&ca),
        "{bundle}"
    );
    let port = env.https_port().to_string();
    let fetch = |vars: &[(&str, &str)]| {
        env.binky_env(
            &[
                "exec",
                "w",
                "-s",
                "web",
                "--",
                "python3",
                "-c",
                TRUSTING_CLIENT,
                "api.w.acme.localhost",
                &port,
            ],
            vars,
        )
    };
    for vars in [vec![("NODE_EXTRA_CA_CERTS", company.as_str())], vec![]] {
        let out = fetch(&vars);
        assert!(out.status.success(), "{vars:?}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "HTTP/1.1 200 OK", "{}", stderr(&out));
    }
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A backend written on a raw socket, to answer in each of HTTP/1.1's ways of ending a body,
/// telling in `X-Conn` which of its connections carried the request.
const FRAMING: &str = r#"
import os, socket, threading
port = int(os.environ["PORT"])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(16)
count = [0]
def serve(c, n):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            k = c.recv(4096)
            if not k: c.close(); return
            buf += k
        head, buf = buf.split(b"\r\n\r\n", 1)
        line = head.split(b"\r\n")[0].split(b" ")
        path = line[1].decode()
        conn = ("X-Conn: %d\r\n" % n).encode()
        if path == "/length":
            c.sendall(b"HTTP/1.1 200 OK\r\n" + conn + b"Content-Length: 6\r\n\r\nlength")
        elif path == "/chunked":
            c.sendall(b"HTTP/1.1 200 OK\r\n" + conn + b"Transfer-Encoding: chunked\r\n\r\n3\r\nchu\r\n4;x=y\r\nnked\r\n0\r\nX-Trailer: t\r\n\r\n")
        elif path == "/head":
            c.sendall(b"HTTP/1.1 200 OK\r\n" + conn + b"Content-Length: 1000\r\n\r\n")
        elif path == "/close":
            c.sendall(b"HTTP/1.1 200 OK\r\n" + conn + b"\r\nuntil close")
            c.close(); return
while True:
    c, _ = s.accept()
    count[0] += 1
    threading.Thread(target=serve, args=(c, count[0]), daemon=True).start()
"#;

/// Read an answer's head (up to its empty line) and nothing after it.
fn read_head(s: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Read one answer off a kept-alive HTTP/1.1 connection: its head, and its body by
/// `Content-Length` or chunked (none for `HEAD`).
fn read_answer(s: &mut TcpStream, head_only: bool) -> (String, Vec<u8>) {
    let head = read_head(s).to_ascii_lowercase();
    let mut b = [0u8; 1];
    let mut body = Vec::new();
    if head_only {
        return (head, body);
    }
    if let Some(n) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
    {
        body.resize(n.trim().parse().unwrap(), 0);
        s.read_exact(&mut body).unwrap();
    } else {
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        loop {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                s.read_exact(&mut b).unwrap();
                line.push(b[0]);
            }
            let size = usize::from_str_radix(String::from_utf8_lossy(&line).trim(), 16).unwrap();
            let mut chunk = vec![0u8; size + 2];
            s.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    (head, body)
}

#[test]
fn every_way_a_backend_ends_an_answer_reaches_a_kept_alive_client_and_backend_connections_are_reused_only_when_clean(
) {
    let env = python_world("raw", FRAMING);
    let mut s = TcpStream::connect(("127.0.0.1", env.proxy_port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ask = |method: &str, path: &str| {
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: raw.w.acme.localhost\r\n\r\n"
        )
        .unwrap();
        let (head, body) = read_answer(&mut s, method == "HEAD");
        assert!(head.starts_with("http/1.1 200"), "{method} {path}: {head}");
        let conn: u32 = head
            .lines()
            .find_map(|l| l.strip_prefix("x-conn: "))
            .unwrap_or_else(|| panic!("{head}"))
            .trim()
            .parse()
            .unwrap();
        (head, String::from_utf8(body).unwrap(), conn)
    };
    let (_, body, first) = ask("GET", "/length");
    assert_eq!(body, "length");
    let (head, body, conn) = ask("GET", "/chunked");
    assert_eq!((body.as_str(), conn), ("chunked", first), "{head}");
    assert!(!head.contains("x-trailer"), "{head}");
    let (head, body, conn) = ask("HEAD", "/head");
    assert!(head.contains("content-length: 1000"), "{head}");
    assert_eq!((body.as_str(), conn), ("", first));
    let (_, body, conn) = ask("GET", "/close");
    assert_eq!((body.as_str(), conn), ("until close", first));
    // The backend closed that connection: the next request gets a new one, and the
    // client's own connection is still the same.
    let (_, body, conn) = ask("GET", "/length");
    assert_eq!(body, "length");
    assert_ne!(conn, first);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// Two `Host` headers, or a `Host` naming another authority than the target, are refused
/// over TLS too, on HTTP/1.1 and on h2, and reach no service.
#[test]
fn two_hosts_are_refused_over_tls_on_http1_and_h2() {
    use http_body_util::BodyExt;
    let env = Env::new(&config(true));
    env.ok(&["up", "w"]);
    let ca = std::fs::read_to_string(env.home.join("ca/ca.crt")).unwrap();
    let port = env.https_port();
    let (web, api) = ("web.w.acme.localhost", "api.w.acme.localhost");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        for alpn in [&b"http/1.1"[..], b"h2"] {
            for hosts in [vec![web, api], vec![api]] {
                let tls = tls_connect(port, web, &ca, alpn).await.unwrap();
                assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
                let io = hyper_util::rt::TokioIo::new(tls);
                let mut req = hyper::Request::builder()
                    .uri(format!("https://{web}/"))
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                for h in &hosts {
                    req.headers_mut()
                        .append(hyper::header::HOST, h.parse().unwrap());
                }
                let resp = if alpn == b"h2" {
                    let (mut send, conn) = hyper::client::conn::http2::handshake(
                        hyper_util::rt::TokioExecutor::new(),
                        io,
                    )
                    .await
                    .unwrap();
                    tokio::spawn(conn);
                    send.send_request(req).await.unwrap()
                } else {
                    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                    tokio::spawn(conn);
                    send.send_request(req).await.unwrap()
                };
                let status = resp.status();
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                let body = String::from_utf8_lossy(&body);
                let what = format!("{} with Host {hosts:?}", String::from_utf8_lossy(alpn));
                assert_eq!(status, 400, "{what}: {body}");
                assert!(body.contains("Host header"), "{what}: {body}");
                assert!(
                    !body.contains("BINKY_WORKTREE"),
                    "{what}: a service answered"
                );
            }
        }
    });
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
