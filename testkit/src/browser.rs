//! A headless Chromium driven over the DevTools protocol: navigate, evaluate JavaScript in
//! the page, wait for a condition in the DOM, take a screenshot. The protocol's WebSocket is
//! spoken by hand (a client's framing is a few dozen lines; no crate for it is in the tree).
//!
//! The browser runs in its own process group with a private profile; dropping [`Browser`]
//! kills the group and waits for it, so nothing is left behind.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The Chromium binary: `$CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome`
/// on the `PATH`. Panics naming how to install it when there is none (tests never skip).
pub fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("no Chromium found (chromium, chromium-browser or google-chrome on the PATH, or $CHROMIUM): run ./scripts/test, which installs Debian's `chromium`, or `apt-get install chromium`");
}

/// A headless browser with one page.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: TcpStream,
    next_id: u64,
}

impl Browser {
    /// Start Chromium (a `width`×`height` window) and connect to its page.
    pub fn start(width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().expect("a temp dir for the browser's profile");
        let mut cmd = Command::new(chromium());
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-extensions",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            &format!("--window-size={width},{height}"),
            &format!("--user-data-dir={}", profile.path().display()),
            "about:blank",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().expect("start chromium");
        // Its stderr names the DevTools port; it is drained to the end so Chromium never
        // blocks on a full pipe.
        let stderr = child.stderr.take().expect("chromium's stderr");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("DevTools listening on ").nth(1) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(rest.trim().to_owned());
                    }
                }
            }
        });
        let browser_ws = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                kill_group(&mut child);
                panic!("chromium did not say where DevTools listen within 60 s");
            }
        };
        let addr = browser_ws
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        // The page it opened: its own WebSocket.
        let list = http_get(&addr, "/json/list");
        let pages: Value = serde_json::from_str(&list).expect("DevTools' /json/list");
        let page_ws = pages
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["type"] == "page"))
            .and_then(|p| p["webSocketDebuggerUrl"].as_str())
            .map(str::to_owned)
            .expect("a page in DevTools' /json/list");
        let path = page_ws
            .trim_start_matches("ws://")
            .split_once('/')
            .map(|(_, p)| format!("/{p}"))
            .unwrap_or_default();
        let ws = ws_connect(&addr, &path);
        let mut b = Browser {
            child,
            _profile: profile,
            ws,
            next_id: 0,
        };
        b.call("Page.enable", json!({}));
        b.call("Runtime.enable", json!({}));
        b
    }

    /// Call a DevTools method and return its result (events in between are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params) {
            Ok(v) => v,
            Err(err) => panic!("DevTools {method} failed: {err}"),
        }
    }

    /// Call a DevTools method: its result, or the error it answered.
    pub fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        ws_send(&mut self.ws, msg.as_bytes());
        loop {
            let text = ws_read(&mut self.ws);
            let v: Value = serde_json::from_slice(&text).expect("a DevTools message");
            if v["id"].as_u64() == Some(id) {
                if let Some(err) = v.get("error") {
                    return Err(err.clone());
                }
                return Ok(v["result"].clone());
            }
        }
    }

    /// Open `url` and wait until its document has loaded.
    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({"url": url}));
        if let Some(e) = r.get("errorText") {
            panic!("navigating to {url} failed: {e}");
        }
        self.wait_for(
            &format!("the page {url} to load"),
            Duration::from_secs(20),
            "document.readyState === 'complete' && location.href !== 'about:blank'",
        );
    }

    /// Evaluate `expr` in the page (a promise is awaited) and return its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("{expr} threw: {ex}");
        }
        r["result"]["value"].clone()
    }

    /// Wait (checking every 20 ms) until `expr` is truthy in the page; its value. Panics
    /// naming `what` after `limit`.
    pub fn wait_for(&mut self, what: &str, limit: Duration, expr: &str) -> Value {
        let until = Instant::now() + limit;
        loop {
            // While a page navigates, its context may be gone for a moment: look again.
            let r = self
                .try_call(
                    "Runtime.evaluate",
                    json!({"expression": expr, "returnByValue": true}),
                )
                .unwrap_or(Value::Null);
            let v = r["result"]["value"].clone();
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy && r.get("exceptionDetails").is_none() {
                return v;
            }
            if Instant::now() >= until {
                panic!("timed out after {limit:?} waiting for {what} ({expr} is {v})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A PNG of the page as shown, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let data = base64_decode(r["data"].as_str().expect("screenshot data"));
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(path, data).expect("write the screenshot");
    }

    /// The browser's process group id (its processes are found by it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

fn kill_group(child: &mut Child) {
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    // Its other processes (zygote, renderers) are in the group: gone with it, reaped by
    // init once the leader is.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until
        && nix::sys::signal::killpg(pgid, None::<nix::sys::signal::Signal>).is_ok()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to DevTools");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("ask DevTools");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

fn ws_connect(addr: &str, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect to the page's WebSocket");
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    s.set_nodelay(true).ok();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .expect("WebSocket handshake");
    // The answer's head, byte by byte (the first frame may follow it at once).
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b)
            .expect("the WebSocket handshake's answer");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(
        head.starts_with("HTTP/1.1 101"),
        "DevTools refused the WebSocket: {head}"
    );
    s
}

fn ws_send(s: &mut TcpStream, payload: &[u8]) {
    let mut frame = vec![0x81u8]; // FIN, text
    let len = payload.len();
    if len < 126 {
        frame.push(0x80 | len as u8);
    } else if len < 65536 {
        frame.push(0x80 | 126);
        frame.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        frame.push(0x80 | 127);
        frame.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let mask = [0x5a, 0x17, 0xc3, 0x88];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    s.write_all(&frame).expect("send to DevTools");
}

/// One whole message (continuation frames joined).
fn ws_read(s: &mut TcpStream) -> Vec<u8> {
    let mut message = Vec::new();
    loop {
        let mut h = [0u8; 2];
        s.read_exact(&mut h).expect("a frame from DevTools");
        let (fin, opcode) = (h[0] & 0x80 != 0, h[0] & 0x0f);
        let mut len = u64::from(h[1] & 0x7f);
        if len == 126 {
            let mut b = [0u8; 2];
            s.read_exact(&mut b).expect("frame length");
            len = u64::from(u16::from_be_bytes(b));
        } else if len == 127 {
            let mut b = [0u8; 8];
            s.read_exact(&mut b).expect("frame length");
            len = u64::from_be_bytes(b);
        }
        let mask = if h[1] & 0x80 != 0 {
            let mut m = [0u8; 4];
            s.read_exact(&mut m).expect("frame mask");
            Some(m)
        } else {
            None
        };
        let mut payload = vec![0u8; len as usize];
        s.read_exact(&mut payload).expect("frame payload");
        if let Some(m) = mask {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= m[i % 4];
            }
        }
        match opcode {
            0x8 => panic!("DevTools closed the WebSocket"),
            0x9 | 0xA => continue, // ping, pong
            _ => message.extend_from_slice(&payload),
        }
        if fin {
            return message;
        }
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let Some(v) = val(c) else { continue };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64() {
        assert_eq!(super::base64_decode("aGVsbG8="), b"hello");
        assert_eq!(super::base64_decode("aGk="), b"hi");
    }
}
