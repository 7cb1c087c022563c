//! A backend for the proxy's unit tests: it answers each request on each connection as the
//! next step of a script says, counts the connections it accepted and passes on every request
//! head it got.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// What the backend does with the next request.
#[derive(Clone, Copy)]
pub enum Then {
    /// Answer these bytes, keep the connection.
    Answer(&'static [u8]),
    /// Answer these bytes and close the connection.
    AnswerClose(&'static [u8]),
    /// Close the connection without answering (also once the script has run out).
    Close,
    /// Take the request and send nothing, keeping the connection open until the other end
    /// closes it (a backend that hangs).
    Silent,
}

/// A running scripted backend.
pub struct Backend {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Connections it accepted so far.
    pub accepted: Arc<AtomicUsize>,
    /// The request heads it got, in order.
    pub heads: mpsc::UnboundedReceiver<String>,
}

impl Backend {
    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Start a backend following `script`. Answers up to 4 KiB are written byte by byte, so every
/// state of a reader meets a partial buffer; larger ones at once (a reader parses a partial
/// head again at each read, as hyper's does: byte by byte, a 64 KiB head would take minutes).
pub async fn backend(script: Vec<Then>) -> Backend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (tx, heads) = mpsc::unbounded_channel();
    let script = Arc::new(Mutex::new(script.into_iter()));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (script, tx) = (script.clone(), tx.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head: Vec<u8> = buf.drain(..end).collect();
                    let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                    let next = script.lock().unwrap().next().unwrap_or(Then::Close);
                    let (answer, close) = match next {
                        Then::Answer(a) => (a, false),
                        Then::AnswerClose(a) => (a, true),
                        Then::Close => return,
                        Then::Silent => {
                            let mut rest = [0u8; 4096];
                            while matches!(s.read(&mut rest).await, Ok(n) if n > 0) {}
                            return;
                        }
                    };
                    let step = if answer.len() <= 4096 {
                        1
                    } else {
                        answer.len()
                    };
                    for piece in answer.chunks(step) {
                        if s.write_all(piece).await.is_err() {
                            return;
                        }
                    }
                    if close {
                        return;
                    }
                }
            });
        }
    });
    Backend {
        port,
        accepted,
        heads,
    }
}
