//! Connections to backends, per worker thread: HTTP/1.1 connections kept per backend port
//! and reused only for that port.
//!
//! hyper-util's pooled client costs a few microseconds a request more (pool keys, a lazy
//! connector, a race between checkout and connect); a worker thread needs none of that.
//!
//! # Guarantees
//! - An answer head is waited for at most the limit [`Pool::send_on`] is given, counted from
//!   when the request's body was all sent (a slow upload is the client's time, not the
//!   backend's); past it the exchange fails with [`PoolError::Timeout`] and its connection
//!   is not kept.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use hyper::body::{Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// Why a request did not reach its backend.
#[derive(Debug)]
pub enum PoolError {
    /// No connection could be made.
    Connect(std::io::Error),
    /// The connection failed during the exchange.
    Http(hyper::Error),
    /// The backend's answer could not be read (`upstream.rs`).
    Answer(std::io::Error),
    /// The backend took the request and sent no answer head within this long.
    Timeout(Duration),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Connect(e) | PoolError::Answer(e) => write!(f, "{e}"),
            PoolError::Timeout(limit) => {
                write!(f, "no answer within {}", humantime::format_duration(*limit))
            }
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
    conns: Mutex<HashMap<u16, Vec<SendRequest<Sent>>>>,
}

/// Most connections kept per backend.
const MAX_PER_BACKEND: usize = 128;

impl Pool {
    fn checkout(&self, port: u16) -> Option<SendRequest<Sent>> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let list = conns.get_mut(&port)?;
        list.retain(|s| !s.is_closed());
        let i = list.iter().position(|s| s.is_ready())?;
        Some(list.swap_remove(i))
    }

    fn keep(&self, port: u16, sender: SendRequest<Sent>) {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let list = conns.entry(port).or_default();
        if list.len() < MAX_PER_BACKEND {
            list.push(sender);
        }
    }

    async fn connect(port: u16) -> Result<SendRequest<Sent>, PoolError> {
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

    /// Send `req` on `conn`, which goes back to the pool after (unless it is upgraded),
    /// waiting at most `limit` for the answer's head once the request's body was sent.
    ///
    /// The request is handed to the connection before the returned future is first polled,
    /// so that future holds only what waits for the answer: it is part of every request's
    /// state machine (and of every h2 stream's task), which stays smaller for it.
    pub fn send_on(
        &self,
        conn: Conn,
        req: Request<Incoming>,
        limit: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<Response<Incoming>, PoolError>> + '_ {
        let Conn {
            port,
            upgrade,
            mut sender,
        } = conn;
        let (done, sent) = oneshot::channel();
        let answer = sender.send_request(req.map(|body| Sent {
            body,
            done: Some(done),
        }));
        async move {
            let resp = match limit {
                None => answer.await,
                Some(limit) => {
                    tokio::pin!(answer);
                    // The clock starts once the body is all sent (or hyper dropped it: the
                    // connection failed, or the backend answered early).
                    let early = tokio::select! {
                        biased;
                        resp = &mut answer => Some(resp),
                        _ = sent => None,
                    };
                    match early {
                        Some(resp) => resp,
                        None => tokio::time::timeout(limit, answer)
                            .await
                            .map_err(|_| PoolError::Timeout(limit))?,
                    }
                }
            }
            .map_err(PoolError::Http)?;
            if !upgrade {
                self.keep(port, sender);
            }
            Ok(resp)
        }
    }
}

/// A request's body on its way to the backend, saying when it has all been sent (or was
/// dropped): the wait for the answer's head starts then.
pub struct Sent {
    body: Incoming,
    done: Option<oneshot::Sender<()>>,
}

impl hyper::body::Body for Sent {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        if frame.is_none() || self.body.is_end_stream() {
            if let Some(done) = self.done.take() {
                let _ = done.send(());
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
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
    sender: SendRequest<Sent>,
}
