//! A scripted HTTP server for the REST adapters' unit tests: it listens on 127.0.0.1,
//! records every request (method, path, headers, body) and answers each with what the
//! test's responder returns.
//!
//! It is a fake: it proves which requests an adapter sends and how it reads canned answers,
//! never that a real server accepts them. Tests that use it say so in their names or docs,
//! and nothing built on it counts as a real-server test.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, `PUT`, …
    pub method: String,
    /// The request target: path and query.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `METHOD path` and the body as JSON (`Null` when empty, a string when not JSON): for
    /// comparing request sequences without depending on the order of an object's keys.
    pub fn call(&self) -> (String, serde_json::Value) {
        let body = if self.body.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&self.body)
                .unwrap_or_else(|_| serde_json::Value::String(self.body.clone()))
        };
        (format!("{} {}", self.method, self.path), body)
    }

    /// `METHOD path` and, when there is one, ` body`: for comparing request sequences.
    pub fn line(&self) -> String {
        if self.body.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {} {}", self.method, self.path, self.body)
        }
    }
}

type Responder = dyn Fn(&Recorded) -> (u16, String) + Send + Sync;

/// The fake server; stops when dropped.
pub struct FakeServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// Start one; `respond` gives each request's status and body.
    pub async fn start(
        respond: impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static,
    ) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let respond: Arc<Responder> = Arc::new(respond);
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (seen, respond) = (seen.clone(), respond.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, &seen, &*respond).await;
                });
            }
        });
        FakeServer {
            url: format!("http://127.0.0.1:{port}"),
            requests,
            task,
        }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    /// [`Recorded::call`] of every request so far.
    pub fn calls(&self) -> Vec<(String, serde_json::Value)> {
        self.requests().iter().map(Recorded::call).collect()
    }

    /// [`Recorded::line`] of every request so far.
    pub fn lines(&self) -> Vec<String> {
        self.requests().iter().map(Recorded::line).collect()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Requests on one connection until the client closes it.
async fn serve(
    mut stream: TcpStream,
    seen: &Mutex<Vec<Recorded>>,
    respond: &Responder,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_owned();
        let path = first.next().unwrap_or("").to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let body_start = head_end + 4;
        while buf.len() < body_start + length {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = String::from_utf8_lossy(&buf[body_start..body_start + length]).into_owned();
        buf.drain(..body_start + length);
        let req = Recorded {
            method,
            path,
            headers,
            body,
        };
        let (status, answer) = respond(&req);
        seen.lock().expect("lock").push(req);
        let out = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        stream.write_all(out.as_bytes()).await?;
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// An adapter configuration with `url` as `admin_url` and `options`, for the unit tests.
pub fn cfg(url: &str, options: &[(&str, &str)]) -> crate::adapters::AdapterConfig {
    crate::adapters::AdapterConfig {
        admin_url: Some(url.into()),
        options: options
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..crate::adapters::AdapterConfig::default()
    }
}
