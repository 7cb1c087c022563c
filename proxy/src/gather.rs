//! An h2 connection's writes gathered per wake-up of its task.
//!
//! hyper's h2 server flushes after every DATA frame whose payload it hands over by reference
//! (anything over 256 bytes), so five answers ready at once went out as five TLS records in
//! five `writev`s. Here the connection writes into a buffer, and what one poll of its task
//! wrote is written to the TLS stream once, after that poll: the answers of every stream that
//! was ready by then share a record and a system call.
//!
//! # Guarantees
//! - Bytes leave in the order they were written; nothing written is held past the end of the
//!   poll that wrote it (a streamed body's pieces go out as they come).
//! - At most [`LIMIT`] bytes wait in the buffer: past it a write waits until the TLS stream
//!   takes what is buffered (backpressure as before). A write of [`DIRECT`] bytes or more
//!   (a large DATA frame) goes to the TLS stream itself once the buffer is out, uncopied.
//! - `poll_shutdown` writes out what is buffered first; a failed write to the TLS stream is
//!   the error of the connection's next read or write.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes buffered before a write waits for the TLS stream.
pub const LIMIT: usize = 64 * 1024;

/// Writes at least this long skip the buffer (after what is buffered).
pub const DIRECT: usize = 16 * 1024;

struct Shared<T> {
    io: T,
    out: Vec<u8>,
    /// How much of `out` the stream has taken.
    sent: usize,
    /// Written to the stream since its last flush.
    unflushed: bool,
    /// A write to the stream failed (reported by the next call).
    failed: Option<io::Error>,
}

impl<T> Shared<T> {
    /// The failed write's error, once.
    fn failure(&mut self) -> io::Result<()> {
        self.failed.take().map_or(Ok(()), Err)
    }
}

impl<T: AsyncWrite + Unpin> Shared<T> {
    /// Write what is buffered, then flush the stream.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.failure()?;
        while self.sent < self.out.len() {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &self.out[self.sent..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    self.sent += n;
                    self.unflushed = true;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.out.clear();
        self.sent = 0;
        if self.unflushed {
            ready!(Pin::new(&mut self.io).poll_flush(cx))?;
            self.unflushed = false;
        }
        Poll::Ready(Ok(()))
    }

    fn waiting(&self) -> usize {
        self.out.len() - self.sent
    }

    /// A write of `len` bytes: `Ready(true)` to buffer it, `Ready(false)` to write it to the
    /// stream directly (the buffer is out), `Pending` while the buffer is full.
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        self.failure()?;
        if len >= DIRECT {
            ready!(self.drain(cx))?;
            return Poll::Ready(Ok(false));
        }
        if self.waiting() + len > LIMIT {
            ready!(self.drain(cx))?;
        }
        Poll::Ready(Ok(true))
    }
}

/// The stream handed to hyper: reads pass through, writes are gathered.
pub struct Gathered<T>(Arc<Mutex<Shared<T>>>);

/// What writes the gathered bytes after each poll of the connection (see [`gathered`]).
pub struct WritesAfter<F: Future, T> {
    conn: Pin<Box<F>>,
    shared: Arc<Mutex<Shared<T>>>,
    done: Option<F::Output>,
}

fn lock<T>(m: &Mutex<Shared<T>>) -> MutexGuard<'_, Shared<T>> {
    // One task uses both halves, never at once: a poisoned lock only means a panic elsewhere in
    // that task, and the state is consistent between calls.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `io` for a connection that `serve` drives: `serve(gathered_io)` is the connection's future
/// (hyper's), and the returned future polls it and writes what each poll wrote.
pub fn gathered<T, F>(io: T, serve: impl FnOnce(Gathered<T>) -> F) -> WritesAfter<F, T>
where
    T: AsyncWrite + Unpin,
    F: Future,
{
    let shared = Arc::new(Mutex::new(Shared {
        io,
        out: Vec::new(),
        sent: 0,
        unflushed: false,
        failed: None,
    }));
    WritesAfter {
        conn: Box::pin(serve(Gathered(shared.clone()))),
        shared,
        done: None,
    }
}

impl<F, T> Future for WritesAfter<F, T>
where
    F: Future,
    F::Output: Unpin,
    T: AsyncWrite + Unpin,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if this.done.is_none() {
            if let Poll::Ready(out) = this.conn.as_mut().poll(cx) {
                this.done = Some(out);
            }
        }
        let drained = lock(&this.shared).drain(cx);
        match drained {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(e)) => {
                if this.done.is_none() {
                    // The connection learns it at its next read or write: poll it again now.
                    lock(&this.shared).failed = Some(e);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            Poll::Ready(Ok(())) => {}
        }
        match this.done.take() {
            Some(out) => Poll::Ready(out),
            None => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Gathered<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut s = lock(&self.0);
        s.failure()?;
        Pin::new(&mut s.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Gathered<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        let mut s = lock(&self.0);
        if ready!(s.poll_room(cx, len))? {
            for b in bufs {
                s.out.extend_from_slice(b);
            }
            return Poll::Ready(Ok(len));
        }
        let n = ready!(Pin::new(&mut s.io).poll_write_vectored(cx, bufs))?;
        s.unflushed = true;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Ready at once: what is buffered is written and flushed when the poll that wrote it ends
    /// ([`WritesAfter`]).
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(lock(&self.0).failure())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = lock(&self.0);
        ready!(s.drain(cx))?;
        Pin::new(&mut s.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::sync::oneshot;

    /// A stream that records the length of every write that reaches it.
    struct Counting {
        io: DuplexStream,
        writes: Arc<Mutex<Vec<usize>>>,
    }

    impl AsyncRead for Counting {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.io).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Counting {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, buf))?;
            self.writes.lock().unwrap().push(n);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.io).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.io).poll_shutdown(cx)
        }
    }

    /// (the stream to gather on, the other end, the lengths of the writes that reached it).
    fn pipe(capacity: usize) -> (Counting, DuplexStream, Arc<Mutex<Vec<usize>>>) {
        let (a, b) = tokio::io::duplex(capacity);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let io = Counting {
            io: a,
            writes: writes.clone(),
        };
        (io, b, writes)
    }

    async fn read_exactly(peer: &mut DuplexStream, n: usize) -> Vec<u8> {
        let mut got = vec![0; n];
        peer.read_exact(&mut got).await.unwrap();
        got
    }

    #[tokio::test]
    async fn what_one_poll_writes_is_one_write_and_nothing_waits_for_the_next_poll() {
        let (io, mut peer, writes) = pipe(1 << 20);
        let (go, wait) = oneshot::channel::<()>();
        let conn = tokio::spawn(gathered(io, |mut g| async move {
            // Three frames and a flush each, as hyper writes them, in one poll.
            for piece in [&b"one "[..], b"two ", b"three "] {
                g.write_all(piece).await.unwrap();
                g.flush().await.unwrap();
            }
            wait.await.unwrap();
            g.write_all(b"four").await.unwrap();
            g.flush().await.unwrap();
            g
        }));
        // The first three arrive while the connection waits (held past no poll)...
        assert_eq!(read_exactly(&mut peer, 14).await, b"one two three ");
        assert_eq!(*writes.lock().unwrap(), vec![14], "one write for one poll");
        // ... and the one written after the next wake-up follows.
        go.send(()).unwrap();
        assert_eq!(read_exactly(&mut peer, 4).await, b"four");
        let g = conn.await.unwrap();
        assert_eq!(*writes.lock().unwrap(), vec![14, 4]);
        drop(g);
    }

    #[tokio::test]
    async fn a_write_waits_while_the_buffer_is_full_and_everything_arrives_in_order() {
        // The other end reads nothing until the connection has written 256 KiB: the stream
        // takes 1 KiB, the buffer LIMIT, and then the writer must wait.
        let (io, mut peer, _writes) = pipe(1024);
        let total = 256 * 1024;
        let data: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let conn = tokio::spawn(gathered(io, move |mut g| async move {
            for piece in sent.chunks(1000) {
                g.write_all(piece).await.unwrap();
                g.flush().await.unwrap();
                let waiting = lock(&g.0).waiting();
                assert!(waiting <= LIMIT, "{waiting} bytes buffered");
            }
            g.shutdown().await.unwrap();
        }));
        // The writer is stuck (it cannot have written everything yet) ...
        tokio::task::yield_now().await;
        assert!(!conn.is_finished());
        // ... and finishes once the bytes are read: all of them, in order, then the end.
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), total);
        assert!(got == data, "bytes out of order");
        conn.await.unwrap();
    }

    #[tokio::test]
    async fn a_large_write_goes_to_the_stream_itself_after_what_is_buffered() {
        let (io, mut peer, writes) = pipe(1 << 20);
        let large = vec![7u8; DIRECT + 1];
        let sent = large.clone();
        let conn = tokio::spawn(gathered(io, move |mut g| async move {
            g.write_all(b"head").await.unwrap();
            g.write_all(&sent).await.unwrap();
            g.write_all(b"tail").await.unwrap();
            g.flush().await.unwrap();
        }));
        let got = read_exactly(&mut peer, DIRECT + 9).await;
        assert_eq!(&got[..4], b"head");
        assert!(got[4..DIRECT + 5] == large[..]);
        assert_eq!(&got[DIRECT + 5..], b"tail");
        conn.await.unwrap();
        assert_eq!(*writes.lock().unwrap(), vec![4, DIRECT + 1, 4]);
    }

    #[tokio::test]
    async fn a_failed_write_is_the_connections_error_and_it_ends() {
        let (io, peer, _writes) = pipe(1 << 20);
        drop(peer);
        let conn = gathered(io, |mut g| async move {
            // The first write is only buffered; its failure reaches the connection at its
            // next call.
            g.write_all(b"lost").await.unwrap();
            g.flush().await.unwrap();
            let mut buf = [0u8; 8];
            loop {
                tokio::task::yield_now().await;
                if let Err(e) = g.read(&mut buf).await {
                    return e.kind();
                }
            }
        });
        let kind = tokio::time::timeout(std::time::Duration::from_secs(30), conn)
            .await
            .expect("the connection did not end");
        assert_eq!(kind, io::ErrorKind::BrokenPipe);
    }
}
