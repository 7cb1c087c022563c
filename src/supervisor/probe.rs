//! Readiness probes: http (a GET answered below 500 is ready: a 404 or a 401 still means the
//! server is up), tcp, and cmd.
//!
//! An http probe is one HTTP/1.1 exchange over one connection of its own through hyper's
//! connection-level client: no pool, no redirect followed (a 3xx is an answer below 500),
//! nothing read past the status line's head, and the connection closed when the probe
//! ends. It runs for every service every few seconds, so it stays this small.

use std::time::{Duration, Instant};

use binky_controllers::supervisor::{ProbeFailure, ProbeTarget, ProcId};
use binky_controllers::url::{host_port, Url};
use binky_platform::proc;
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Why one probe failed: what the service's `binky status` and `binky up` say.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No connection to the address (the last error, of each address tried).
    #[error("{0}")]
    Connect(std::io::Error),
    /// No connection within the probe's time.
    #[error("timed out")]
    ConnectTimedOut,
    /// The host name had no address to try.
    #[error("no address")]
    NoAddress,
    /// The health URL is not one binky can probe.
    #[error("`{0}` is not an http:// URL")]
    NotHttp(String),
    /// The health URL's port is not a port.
    #[error("bad port in `{0}`")]
    BadPort(String),
    /// The health URL's path cannot go in a request.
    #[error("`{0}` cannot be requested: {1}")]
    BadPath(String, hyper::http::Error),
    /// Connected, and no status line came back in time.
    #[error("no answer within {0:?} (its health timeout)")]
    NoAnswer(Duration),
    /// Reading or writing the connection failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// What came back is not HTTP (or the connection closed before a status line).
    #[error("not an HTTP answer")]
    NotAnHttpAnswer,
    /// The HTTP exchange failed otherwise.
    #[error("{0}")]
    Http(hyper::Error),
    /// An error status (500 and above).
    #[error("HTTP {0}")]
    Status(u16),
    /// The check command could not start.
    #[error("{0}")]
    Spawn(std::io::Error),
    /// The check command failed.
    #[error("`{cmd}` exited with {status}")]
    CmdFailed {
        /// The command.
        cmd: String,
        /// How it exited.
        status: std::process::ExitStatus,
    },
    /// The check command ran over its time.
    #[error("`{0}` took longer than {1:?} (its health timeout)")]
    CmdTimedOut(String, Duration),
    /// The port answers, held by another program.
    #[error(
        "port {port} answers, but it is held by `{comm}` (pid {pid}), not by this service: \
         another program took it. Stop that program; if the service hands its port to \
         a process outside its own (e.g. a container), give it an http or cmd health check"
    )]
    HeldBy {
        /// The port.
        port: u16,
        /// Who holds it.
        pid: u32,
        /// Its command name.
        comm: String,
    },
    /// The port answers, from a process binky cannot see.
    #[error(
        "port {0} answers, but not from a process of this service (one binky cannot \
         inspect: another user's?)"
    )]
    HeldByUnseen(u16),
    /// A tcp check with no port.
    #[error("no port to check")]
    NoPort,
}

impl From<ProbeError> for ProbeFailure {
    fn from(e: ProbeError) -> Self {
        match e {
            ProbeError::HeldBy { .. } | ProbeError::HeldByUnseen(_) => {
                ProbeFailure::Foreign(e.to_string())
            }
            _ => ProbeFailure::NotReady(e.to_string()),
        }
    }
}

async fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, ProbeError> {
    let hosts: Vec<String> = if host == "localhost" {
        vec!["127.0.0.1".into(), "::1".into()]
    } else {
        vec![host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()]
    };
    let mut last = ProbeError::NoAddress;
    for h in hosts {
        match tokio::time::timeout(timeout, TcpStream::connect((h.as_str(), port))).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = ProbeError::Connect(e),
            Err(_) => last = ProbeError::ConnectTimedOut,
        }
    }
    Err(last)
}

/// Split `http://host:port/path?query` into the host, the port (80 when none is written)
/// and the request target (`/` when there is no path; a `#fragment` is not sent).
pub fn split_http_url(url: &str) -> Result<(String, u16, String), ProbeError> {
    let parts = Url::parse(url)
        .filter(|u| u.scheme == "http")
        .ok_or_else(|| ProbeError::NotHttp(url.to_owned()))?;
    let (host, port) = host_port(parts.host).ok_or_else(|| ProbeError::BadPort(url.to_owned()))?;
    let port = match port {
        None => 80,
        Some(p) => p.parse().map_err(|_| ProbeError::BadPort(url.to_owned()))?,
    };
    let target = parts.tail.split('#').next().unwrap_or("");
    let target = if target.starts_with('/') {
        target.to_owned()
    } else {
        format!("/{target}")
    };
    Ok((host.to_owned(), port, target))
}

async fn http(url: &str, timeout: Duration) -> Result<(), ProbeError> {
    let (host, port, target) = split_http_url(url)?;
    let req = hyper::Request::get(target.as_str())
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .header(hyper::header::USER_AGENT, "binky-health")
        .header(hyper::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| ProbeError::BadPath(url.to_owned(), e))?;
    let stream = connect(&host, port, timeout).await?;
    let exchange = async {
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            // `Host:`, `User-Agent:` as a hand-written probe sent them (a toy server may care).
            .title_case_headers(true)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(answer_error)?;
        let mut conn = std::pin::pin!(conn);
        let mut answer = std::pin::pin!(sender.send_request(req));
        // The connection is driven only until the answer's head is in: dropped with it,
        // the socket closes and no body is read. When the connection ends first (the
        // server answered and closed), the answer, or why there is none, is waiting.
        tokio::select! {
            biased;
            answer = &mut answer => answer,
            _ = &mut conn => answer.await,
        }
        .map_err(answer_error)
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| ProbeError::NoAnswer(timeout))??;
    let status = answer.status().as_u16();
    if status < 500 {
        Ok(())
    } else {
        Err(ProbeError::Status(status))
    }
}

/// What a failed exchange says: the socket's own error when there is one, as before
/// hyper read it; a connection closed early or bytes that are no HTTP are "not an HTTP
/// answer".
fn answer_error(e: hyper::Error) -> ProbeError {
    if e.is_parse() || e.is_incomplete_message() {
        return ProbeError::NotAnHttpAnswer;
    }
    let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
    match io {
        Some(io) => ProbeError::Io(std::io::Error::new(io.kind(), io.to_string())),
        None => ProbeError::Http(e),
    }
}

/// Is `host` this machine (where binky can see who holds a port)?
fn is_local(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h == "localhost" || h == "::1" || h == "0.0.0.0" || h == "::" || h.starts_with("127.")
}

/// Does a process of the service running as `owner` hold the listening socket of `port`?
/// Its own process group, or a process carrying its spawn token (a child that moved to a
/// group of its own). `Err` names who holds it instead.
fn held_by(port: u16, owner: ProcId) -> Result<(), ProbeError> {
    // The service's own process first (the usual holder), then its group: only when
    // neither holds it is every process of the machine read, to name the holder. The
    // socket table is read once for all three.
    let Some(sockets) = proc::sockets_on(port) else {
        // The system does not say who holds a port: the connection that answered is
        // taken as the service's.
        return Ok(());
    };
    if sockets.is_empty() {
        return Err(ProbeError::HeldByUnseen(port));
    }
    if proc::one_holds(&[owner.pid], &sockets)
        || proc::one_holds(&binky_platform::job::members(owner.pid), &sockets)
    {
        return Ok(());
    }
    let holders = proc::holders(&sockets);
    let token = proc::environ_var(owner.pid, super::TOKEN_VAR);
    let ours = |pid: u32| {
        proc::stat(pid).is_some_and(|s| s.pgrp == owner.pid)
            || (token.is_some() && proc::environ_var(pid, super::TOKEN_VAR) == token)
    };
    if holders.iter().any(|p| ours(*p)) {
        return Ok(());
    }
    Err(match holders.first() {
        Some(pid) => ProbeError::HeldBy {
            port,
            pid: *pid,
            comm: binky_platform::process::name(*pid).unwrap_or_default(),
        },
        None => ProbeError::HeldByUnseen(port),
    })
}

/// The TCP ports the service running as `owner` listens on, looked at once a second at
/// most per service (a starting service is probed every few milliseconds, and the look
/// reads every process of the machine), off the async workers.
async fn own_listening_ports_lately(owner: ProcId) -> Vec<u16> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Seen = HashMap<u32, (Instant, Vec<u16>)>;
    static SEEN: Mutex<Option<Seen>> = Mutex::new(None);
    let now = Instant::now();
    {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        let map = seen.get_or_insert_with(HashMap::new);
        if map.len() > 4096 {
            map.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(60));
        }
        if let Some((t, ports)) = map.get(&owner.pid) {
            if now.duration_since(*t) < Duration::from_secs(1) {
                return ports.clone();
            }
        }
    }
    let ports = tokio::task::spawn_blocking(move || own_listening_ports(owner))
        .await
        .unwrap_or_default();
    SEEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(owner.pid, (now, ports.clone()));
    ports
}

/// The TCP ports the service running as `owner` listens on: its process group's, else
/// those of the processes carrying its spawn token (a child that moved to a group of its
/// own).
fn own_listening_ports(owner: ProcId) -> Vec<u16> {
    let ports = proc::listening_ports(&binky_platform::job::members(owner.pid));
    if !ports.is_empty() {
        return ports;
    }
    let Some(token) = proc::environ_var(owner.pid, super::TOKEN_VAR) else {
        return ports;
    };
    let carriers: Vec<u32> = proc::pids()
        .into_iter()
        .filter(|p| proc::environ_var(*p, super::TOKEN_VAR).as_deref() == Some(&token))
        .collect();
    proc::listening_ports(&carriers)
}

/// Run one probe of the service running as `owner`, answered within `timeout` (a health
/// check's `timeout`; a port's default).
pub async fn probe(
    target: &ProbeTarget,
    owner: ProcId,
    timeout: Duration,
) -> Result<(), ProbeFailure> {
    match target {
        ProbeTarget::Tcp(host, port) => {
            if *port == 0 {
                return Err(ProbeError::NoPort.into());
            }
            if let Err(e) = connect(host, *port, timeout).await {
                // Nothing on its port: does the service listen somewhere else?
                if is_local(host) {
                    let listening = own_listening_ports_lately(owner).await;
                    if !listening.is_empty() && !listening.contains(port) {
                        return Err(ProbeFailure::OtherPort {
                            port: *port,
                            listening,
                        });
                    }
                }
                return Err(e.into());
            }
            if is_local(host) {
                let port = *port;
                tokio::task::spawn_blocking(move || held_by(port, owner))
                    .await
                    .unwrap_or(Ok(()))?;
            }
            Ok(())
        }
        ProbeTarget::Http(url) => Ok(http(url, timeout).await?),
        ProbeTarget::Cmd {
            cmd, workdir, env, ..
        } => Ok(command(cmd, workdir, env, timeout).await?),
    }
}

/// A cmd probe: `cmd` exits 0 within `timeout`.
async fn command(
    cmd: &str,
    workdir: &std::path::Path,
    env: &std::collections::BTreeMap<String, String>,
    timeout: Duration,
) -> Result<(), ProbeError> {
    let mut c = binky_platform::process::shell_command(cmd);
    c.current_dir(workdir)
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    binky_platform::process::in_new_group_async(&mut c);
    let mut child = c.spawn().map_err(ProbeError::Spawn)?;
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(s)) if s.success() => Ok(()),
        Ok(Ok(status)) => Err(ProbeError::CmdFailed {
            cmd: cmd.to_owned(),
            status,
        }),
        Ok(Err(e)) => Err(ProbeError::Io(e)),
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = binky_platform::job::kill_group(pid);
            }
            Err(ProbeError::CmdTimedOut(cmd.to_owned(), timeout))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_split() {
        for (url, host, port, target) in [
            (
                "http://localhost:4000/health?x=1",
                "localhost",
                4000,
                "/health?x=1",
            ),
            ("http://127.0.0.1:8080", "127.0.0.1", 8080, "/"),
            ("http://[::1]/up#top", "[::1]", 80, "/up"),
            ("http://[::1]:9000?ready", "[::1]", 9000, "/?ready"),
            ("http://u:p@h:81/x", "h", 81, "/x"),
        ] {
            assert_eq!(
                split_http_url(url).unwrap(),
                (host.into(), port, target.into()),
                "{url}"
            );
        }
        assert_eq!(split_http_url("http://example").unwrap().1, 80);
        assert_eq!(
            split_http_url("https://x").unwrap_err().to_string(),
            "`https://x` is not an http:// URL"
        );
        assert_eq!(
            split_http_url("http://x:99999/").unwrap_err().to_string(),
            "bad port in `http://x:99999/`"
        );
    }

    /// A server on a free loopback port that reads one request head, hands it to `answer`,
    /// and writes what that returns (then keeps the connection as `answer`'s future does).
    async fn server<F, Fut>(answer: F) -> (u16, tokio::task::JoinHandle<String>)
    where
        F: FnOnce(String, TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            answer(head.clone(), s).await;
            head
        });
        (port, task)
    }

    /// A server that answers its one request with `bytes`.
    async fn replying(bytes: &'static [u8]) -> (u16, tokio::task::JoinHandle<String>) {
        server(move |_, mut s| async move {
            use tokio::io::AsyncWriteExt;
            let _ = s.write_all(bytes).await;
        })
        .await
    }

    const SECOND: Duration = Duration::from_secs(1);

    /// Why the HTTP probe of the server at `port` is not ready.
    async fn refusal(port: u16) -> String {
        http(&format!("http://127.0.0.1:{port}/"), SECOND)
            .await
            .unwrap_err()
            .to_string()
    }

    #[tokio::test]
    async fn a_redirect_is_an_answer_below_500_and_is_not_followed() {
        let (port, task) = replying(
            b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
        let url = format!("http://localhost:{port}/health?x=1#top");
        http(&url, SECOND).await.unwrap();
        let head = task.await.unwrap();
        assert!(head.starts_with("GET /health?x=1 HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("Host: localhost:{port}\r\n")),
            "{head}"
        );
        assert!(head.contains("User-Agent: binky-health\r\n"), "{head}");
    }

    #[tokio::test]
    async fn a_server_error_is_not_ready_with_its_status() {
        let (port, _task) =
            replying(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n").await;
        assert_eq!(refusal(port).await, "HTTP 503");
    }

    #[tokio::test]
    async fn bytes_that_are_not_http_or_no_bytes_are_not_an_http_answer() {
        let (port, _task) = replying(b"SSH-2.0-OpenSSH\r\n\r\n").await;
        assert_eq!(refusal(port).await, "not an HTTP answer");
        let (port, _task) = server(|_, s| async move { drop(s) }).await;
        assert_eq!(refusal(port).await, "not an HTTP answer");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_runs_out_of_the_health_timeout() {
        let (port, _task) = server(|_, s| async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(s);
        })
        .await;
        let limit = Duration::from_millis(200);
        let started = Instant::now();
        let e = http(&format!("http://127.0.0.1:{port}/"), limit)
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "no answer within 200ms (its health timeout)");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn an_endless_body_is_not_read_and_the_connection_closes() {
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
        let (port, _task) = server(|_, mut s| async move {
            use tokio::io::AsyncWriteExt;
            let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
            let mut result = s.write_all(head).await;
            while result.is_ok() {
                result = s.write_all(b"400\r\n").await;
                if result.is_ok() {
                    result = s.write_all(&[b'x'; 0x400]).await;
                }
                if result.is_ok() {
                    result = s.write_all(b"\r\n").await;
                }
            }
            let _ = closed_tx.send(());
        })
        .await;
        http(&format!("http://127.0.0.1:{port}/"), SECOND)
            .await
            .unwrap();
        // The server's writes fail once the probe has closed its end.
        tokio::time::timeout(Duration::from_secs(10), closed_rx)
            .await
            .expect("the probe's connection stays open")
            .unwrap();
    }

    #[test]
    fn a_port_held_by_another_program_is_foreign_and_the_rest_not_ready_yet() {
        let held = ProbeError::HeldBy {
            port: 4000,
            pid: 7,
            comm: "nc".into(),
        };
        match ProbeFailure::from(held) {
            ProbeFailure::Foreign(m) => assert!(m.contains("held by `nc` (pid 7)"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ProbeFailure::from(ProbeError::HeldByUnseen(4000)),
            ProbeFailure::Foreign(_)
        ));
        assert_eq!(
            ProbeFailure::from(ProbeError::Status(502)),
            ProbeFailure::NotReady("HTTP 502".into())
        );
        assert_eq!(
            ProbeFailure::from(ProbeError::NoPort),
            ProbeFailure::NotReady("no port to check".into())
        );
    }
}
