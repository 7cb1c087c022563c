//! Connections to backends, per worker thread: HTTP/1.1 connections kept per backend port
//! and reused only for that port.
//!
//! hyper-util's pooled client costs a few microseconds a request more (pool keys, a lazy
//! connector, a race between checkout and connect); a worker thread needs none of that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// Why a request did not reach its backend.
#[derive(Debug)]
pub enum PoolError {
    /// No connection could be made.
    Connect(std::io::Error),
    /// The connection failed during the exchange.
    Http(hyper::Error),
    /// The backend's answer could not be read (`upstream.rs`).
    Answer(std::io::Error),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Connect(e) | PoolError::Answer(e) => write!(f, "{e}"),
            PoolError::Http(e) => {
                write!(f, "{e}")?;
                let mut src = std::error::Error::source(e);
                while let Some(s) = src {
                    write!(f, ": {s}")?;
                    src = s.source();
                }
                Ok(())
            }
        }
    }
}

/// Idle (or busy, skipped until ready) connections by backend port.
#[derive(Default)]
pub struct Pool {
    conns: Mutex<HashMap<u16, Vec<SendRequest<Incoming>>>>,
}

/// Most connections kept per backend.
const MAX_PER_BACKEND: usize = 128;

impl Pool {
    fn checkout(&self, port: u16) -> Option<SendRequest<Incoming>> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let list = conns.get_mut(&port)?;
        list.retain(|s| !s.is_closed());
        let i = list.iter().position(|s| s.is_ready())?;
        Some(list.swap_remove(i))
    }

    fn keep(&self, port: u16, sender: SendRequest<Incoming>) {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let list = conns.entry(port).or_default();
        if list.len() < MAX_PER_BACKEND {
            list.push(sender);
        }
    }

    async fn connect(port: u16) -> Result<SendRequest<Incoming>, PoolError> {
        let stream = connect_tcp(port).await.map_err(PoolError::Connect)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(PoolError::Http)?;
        tokio::spawn(async move {
            let _ = conn.with_upgrades().await;
        });
        Ok(sender)
    }

    /// A connection to 127.0.0.1:`port`, pooled or new (an upgrade request's is always
    /// new). Nothing is sent yet: a backend that refuses costs the request nothing, so
    /// the caller may try another replica with it.
    pub async fn connection(&self, port: u16, upgrade: bool) -> Result<Conn, PoolError> {
        let sender = match (upgrade, self.checkout(port)) {
            (false, Some(s)) => s,
            // Boxed: connecting is rare next to reusing, and its state machine would
            // otherwise make every request's larger.
            _ => Box::pin(Self::connect(port)).await?,
        };
        Ok(Conn {
            port,
            upgrade,
            sender,
        })
    }

    /// Send `req` on `conn`, which goes back to the pool after (unless it is upgraded).
    ///
    /// The request is handed to the connection before the returned future is first polled,
    /// so that future holds only the answer's receiver: it is part of every request's state
    /// machine (and of every h2 stream's task), which stays smaller for it.
    pub fn send_on(
        &self,
        conn: Conn,
        req: Request<Incoming>,
    ) -> impl std::future::Future<Output = Result<Response<Incoming>, PoolError>> + '_ {
        let Conn {
            port,
            upgrade,
            mut sender,
        } = conn;
        let answer = sender.send_request(req);
        async move {
            let resp = answer.await.map_err(PoolError::Http)?;
            if !upgrade {
                self.keep(port, sender);
            }
            Ok(resp)
        }
    }
}

/// A new connection to the backend at 127.0.0.1:`port` (given up after 3 s).
pub async fn connect_tcp(port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let stream = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A connection to one backend, taken from the pool or just made.
pub struct Conn {
    port: u16,
    upgrade: bool,
    sender: SendRequest<Incoming>,
}
