//! The common request's exchange with its backend, done in the client connection's own task:
//! a request without a body (and no upgrade) is written to a pooled HTTP/1.1 connection and
//! the answer read back right here. hyper's client would hand the request to a task of its own
//! through a channel and the answer (head, then body) back through two more, waking a task at
//! each hop: the largest share of what binky's proxy cost above nginx's per request
//! (benchmarks/README.md, "Where binky's extra CPU goes"). nginx reads its upstream's answer in
//! the worker that holds the client's connection; so does this.
//!
//! Requests with a body, upgrades (WebSocket) and `CONNECT` keep going through hyper's client
//! (`pool.rs`): they are where streaming both ways at once and the `101` hand-over matter.
//!
//! # Guarantees
//! - The answer's length follows RFC 9112 6.3: no body for `HEAD`, `204` and `304`; chunked
//!   when `Transfer-Encoding` ends in `chunked` (any `Content-Length` dropped); to the end of
//!   the connection when another coding ends it or neither header is sent; else exactly
//!   `Content-Length` bytes. `Content-Length` values that differ or are not a number, a
//!   malformed chunk or head, or a `101` that was not asked for are a `502`, never a guess.
//! - `1xx` answers before the final one are skipped.
//! - A connection goes back to the pool only after its answer was read to its exact end, from
//!   an HTTP/1.1 answer without `Connection: close`. Bytes after the end, or any that arrive
//!   while it is idle (or the backend closing it), retire it: a later request never reads an
//!   earlier one's leftovers.
//! - A pooled connection that fails before any byte of the answer arrived (the backend closed
//!   it while idle) is retried once on a new connection, for a method that may be repeated
//!   (RFC 9110 9.2.2) or when the request could not even be written.
//! - The answer's head (`1xx` answers before it included) must come within the limit the
//!   exchange is given, counted from when the request was written; else the exchange fails
//!   with [`PoolError::Timeout`] and the connection is dropped. Its body is not timed: a
//!   stream may take as long as it likes.
//! - What this reader accepts and how it frames a body are checked against hyper's client on
//!   random answers (the property tests below): the same answers are refused, and an answer
//!   both accept has the same status, headers and body.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use hyper::body::{Frame, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::pool::{connect_tcp, PoolError};
use super::{Hop, MAX_HEAD};

/// Most headers an answer may have.
const MAX_HEADERS: usize = 100;

/// Room made in the read buffer before each read.
const READ_SIZE: usize = 16 * 1024;

/// Most connections kept idle per backend.
const MAX_IDLE: usize = 128;

/// Whether `req` takes this path: no body, no upgrade, not `CONNECT`.
pub fn takes<B: hyper::body::Body>(req: &Request<B>, upgrade: bool) -> bool {
    !upgrade && req.body().is_end_stream() && req.method() != Method::CONNECT
}

/// Idle connections to backends by port, each with its read buffer: this worker's own.
///
/// The buffer goes with the connection so that its allocation is used again: once the last
/// answer's pieces were written and dropped, making room in it takes no `malloc` (a 16 KiB
/// allocation a request cost about 1 µs in glibc, which sorts its free lists at each one).
#[derive(Clone, Default)]
pub struct Idle(Arc<Mutex<HashMap<u16, Vec<Kept>>>>);

/// An idle connection and its read buffer.
type Kept = (TcpStream, BytesMut);

impl Idle {
    /// An idle connection to `port` with nothing waiting to be read on it.
    fn checkout(&self, port: u16) -> Option<(TcpStream, BytesMut)> {
        loop {
            let (stream, buf) = {
                let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
                idle.get_mut(&port)?.pop()?
            };
            // Nothing may be readable on an idle connection: an end of file is the backend
            // having closed it, bytes are an answer nobody asked for. (No system call when
            // tokio has seen no readiness since the last read.)
            if matches!(stream.try_read(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            {
                return Some((stream, buf));
            }
        }
    }

    fn keep(&self, port: u16, stream: TcpStream, buf: BytesMut) {
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(port).or_default();
        if list.len() < MAX_IDLE {
            list.push((stream, buf));
        }
    }

    /// Send `req` (its head: it has no body) to the first of `ports` that takes a connection,
    /// and read the answer's head, waiting at most `limit` for it; its body is read as the
    /// client's connection asks for it.
    pub async fn exchange<B>(
        &self,
        ports: impl Iterator<Item = u16>,
        req: &Request<B>,
        limit: Option<Duration>,
    ) -> Result<Response<Answer>, PoolError> {
        let (head, answer) = self
            .exchange_head(ports, &request_head(req), req.method(), limit)
            .await?;
        let parts = head.into_parts().map_err(PoolError::Answer)?;
        Ok(Response::from_parts(parts, answer))
    }

    /// [`Idle::exchange`] for a request already written out: `head` (request line, headers,
    /// empty line) of a `method` request. The answer's head comes as the backend sent it
    /// (the front writes it out from its bytes; no header map is made).
    pub async fn exchange_head(
        &self,
        ports: impl Iterator<Item = u16>,
        head: &[u8],
        method: &Method,
        limit: Option<Duration>,
    ) -> Result<(RawHead, Answer), PoolError> {
        let head_only = method == Method::HEAD;
        let mut refused = io::Error::from(io::ErrorKind::NotFound);
        for port in ports {
            let (stream, pooled) = match self.checkout(port) {
                Some(c) => (c, true),
                // Boxed: connecting is rare next to reusing, and its state machine would
                // otherwise make every request's larger.
                None => match Box::pin(connect_tcp(port)).await {
                    Ok(s) => ((s, BytesMut::new()), false),
                    Err(e) => {
                        refused = e;
                        continue;
                    }
                },
            };
            return match self.send(port, stream, head, head_only, limit).await {
                Err(Failed::Early { wrote, .. })
                    if pooled && (!wrote || method.is_idempotent()) =>
                {
                    let stream = Box::pin(connect_tcp(port))
                        .await
                        .map_err(PoolError::Connect)?;
                    self.send(port, (stream, BytesMut::new()), head, head_only, limit)
                        .await
                        .map_err(Failed::into_error)
                }
                other => other.map_err(Failed::into_error),
            };
        }
        Err(PoolError::Connect(refused))
    }

    async fn send(
        &self,
        port: u16,
        (mut stream, mut buf): (TcpStream, BytesMut),
        head: &[u8],
        head_only: bool,
        limit: Option<Duration>,
    ) -> Result<(RawHead, Answer), Failed> {
        if let Err(error) = stream.write_all(head).await {
            return Err(Failed::Early {
                wrote: false,
                error,
            });
        }
        // (A timer is registered only by a read that has to wait.)
        let deadline = limit.map(|l| (tokio::time::Instant::now() + l, l));
        buf.clear();
        let mut read_any = false;
        loop {
            if !buf.is_empty() {
                if let Some((head, length, reuse)) = parse_head(&mut buf, head_only)? {
                    let mut answer = Answer {
                        conn: Some(stream),
                        port,
                        buf,
                        length,
                        reuse,
                        idle: self.clone(),
                    };
                    if answer.length.is_done() {
                        answer.finish();
                    }
                    return Ok((head, answer));
                }
            }
            buf.reserve(READ_SIZE);
            let read = match deadline {
                None => stream.read_buf(&mut buf).await,
                Some((at, limit)) => {
                    match tokio::time::timeout_at(at, stream.read_buf(&mut buf)).await {
                        Ok(read) => read,
                        Err(_) => return Err(Failed::Timeout(limit)),
                    }
                }
            };
            match read {
                Ok(0) if !read_any => {
                    return Err(Failed::Early {
                        wrote: true,
                        error: io::ErrorKind::UnexpectedEof.into(),
                    })
                }
                Ok(0) => {
                    return Err(Failed::Late(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the backend closed the connection in the middle of its answer's head",
                    )))
                }
                Ok(_) => read_any = true,
                Err(error) if !read_any => return Err(Failed::Early { wrote: true, error }),
                Err(e) => return Err(Failed::Late(e)),
            }
        }
    }
}

/// How an exchange failed: before any byte of the answer (`wrote`: after the request was
/// written), or later.
enum Failed {
    Early {
        wrote: bool,
        error: io::Error,
    },
    Late(io::Error),
    /// No answer head within this long.
    Timeout(Duration),
}

impl Failed {
    fn into_error(self) -> PoolError {
        match self {
            Failed::Timeout(limit) => PoolError::Timeout(limit),
            Failed::Early { error, .. } if error.kind() == io::ErrorKind::UnexpectedEof => {
                PoolError::Answer(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the backend closed the connection without answering",
                ))
            }
            Failed::Early { error, .. } | Failed::Late(error) => PoolError::Answer(error),
        }
    }
}

impl From<io::Error> for Failed {
    fn from(e: io::Error) -> Failed {
        Failed::Late(e)
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_owned())
}

/// `METHOD path HTTP/1.1`, the headers as they are (names lower case, as hyper writes them),
/// and the empty line. The values were checked when the client's request was parsed: no line
/// breaks can be in them.
fn request_head<B>(req: &Request<B>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + req.headers().len() * 32);
    out.extend_from_slice(req.method().as_str().as_bytes());
    out.push(b' ');
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in req.headers() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The answer's head from the front of `buf` (taken off it), with how its body ends and
/// whether the connection may be reused after it; `None` while the head is incomplete. `1xx`
/// answers before it are taken off and skipped.
fn parse_head(
    buf: &mut BytesMut,
    head_only: bool,
) -> Result<Option<(RawHead, Length, bool)>, Failed> {
    loop {
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut []);
        let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut parsed,
            buf,
            &mut headers,
        ) {
            // The limit holds however the head arrived: whole in one read, or in pieces.
            Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
            Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Ok(None),
            Ok(_) => return Err(invalid("its answer's head is too large").into()),
            Err(e) => {
                return Err(Failed::Late(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("its answer's head is malformed ({e})"),
                )))
            }
        };
        let code = parsed.code.unwrap_or(0);
        let status =
            StatusCode::from_u16(code).map_err(|_| invalid("its answer's status is not valid"))?;
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return Err(invalid("it switched protocols although no upgrade was asked for").into());
        }
        if status.is_informational() {
            buf.advance(n);
            continue;
        }
        let version = if parsed.version == Some(1) {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        };
        // The headers are kept as ranges of the head's bytes, not copied. Hop-by-hop headers
        // are left out here (what they say about the connection and the body's length is
        // noted).
        let base = buf.as_ptr() as usize;
        let mut kept = Vec::with_capacity(parsed.headers.len());
        let mut hop = Hop::default();
        for h in parsed.headers.iter() {
            if hop.note(h.name.as_bytes(), h.value) {
                continue;
            }
            // (A head is at most MAX_HEAD bytes: the offsets fit.)
            let name = (h.name.as_ptr() as usize - base) as u32;
            let value = (h.value.as_ptr() as usize - base) as u32;
            kept.push([
                name,
                name + h.name.len() as u32,
                value,
                value + h.value.len() as u32,
            ]);
        }
        let mut head = RawHead {
            status,
            version,
            head: buf.split_to(n).freeze(),
            kept,
        };
        if !hop.named.is_empty() {
            head.remove(|name| {
                hop.named
                    .iter()
                    .any(|h| h.as_str().as_bytes().eq_ignore_ascii_case(name))
            });
        }
        let length = length_of(status, version, head_only, hop.chunked, &mut head)?;
        let reuse = version == Version::HTTP_11 && !hop.close && !matches!(length, Length::Close);
        return Ok(Some((head, length, reuse)));
    }
}

/// An answer's head as its backend sent it, hop-by-hop headers left out: the status and the
/// headers as ranges of the head's bytes. The front writes it to the client from these bytes;
/// hyper's paths take it as a header map ([`RawHead::into_parts`]).
#[derive(Debug)]
pub struct RawHead {
    status: StatusCode,
    version: Version,
    head: Bytes,
    /// Name and value of each header kept, in the order sent, as `[name start, name end,
    /// value start, value end]` in `head`.
    kept: Vec<[u32; 4]>,
}

impl RawHead {
    /// The answer's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers kept, as `(name, value)` in the order the backend sent them (names as
    /// sent: case is not changed here).
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.kept.iter().map(|&[ns, ne, vs, ve]| {
            (
                &self.head[ns as usize..ne as usize],
                &self.head[vs as usize..ve as usize],
            )
        })
    }

    /// Leave out the headers whose name `drop` says.
    fn remove(&mut self, drop: impl Fn(&[u8]) -> bool) {
        let head = &self.head;
        self.kept
            .retain(|&[ns, ne, _, _]| !drop(&head[ns as usize..ne as usize]));
    }

    /// The head as hyper's response parts (the values are slices of the head's bytes).
    fn into_parts(self) -> io::Result<hyper::http::response::Parts> {
        let mut map = HeaderMap::with_capacity(self.kept.len());
        for &[ns, ne, vs, ve] in &self.kept {
            let (ns, ne, vs, ve) = (ns as usize, ne as usize, vs as usize, ve as usize);
            let name = HeaderName::from_bytes(&self.head[ns..ne])
                .map_err(|_| invalid("a header name in its answer is not valid"))?;
            let value = HeaderValue::from_maybe_shared(self.head.slice(vs..ve))
                .map_err(|_| invalid("a header value in its answer is not valid"))?;
            map.append(name, value);
        }
        let (mut parts, ()) = Response::new(()).into_parts();
        parts.status = self.status;
        parts.version = self.version;
        parts.headers = map;
        Ok(parts)
    }
}

/// How the body of an answer with `status` and `head` ends (RFC 9112 6.3); `chunked` is
/// what its `Transfer-Encoding` said, if it had one. A `Content-Length` beside a
/// `Transfer-Encoding` is removed: it does not describe the body.
fn length_of(
    status: StatusCode,
    version: Version,
    head_only: bool,
    chunked: Option<bool>,
    head: &mut RawHead,
) -> io::Result<Length> {
    let content_length = |name: &[u8]| name.eq_ignore_ascii_case(b"content-length");
    // (Also in an answer without a body: a HEAD's `Content-Length` beside a
    // `Transfer-Encoding` describes no body either.)
    if chunked.is_some() {
        head.remove(content_length);
    }
    if head_only || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Ok(Length::Exact(0));
    }
    if let Some(chunked) = chunked {
        // RFC 9112 6.1: an HTTP/1.0 message with a Transfer-Encoding has faulty framing (an
        // HTTP/1.0 recipient does not know the header: the two ends would frame the body
        // differently).
        if version == Version::HTTP_10 {
            return Err(invalid("its HTTP/1.0 answer has a Transfer-Encoding"));
        }
        return Ok(if chunked {
            Length::Chunked(Chunk::Size)
        } else {
            Length::Close
        });
    }
    let mut length: Option<u64> = None;
    for (_, value) in head.headers().filter(|(name, _)| content_length(name)) {
        for part in value.split(|b| *b == b',') {
            let part = part.trim_ascii();
            let n = decimal(part)
                .ok_or_else(|| invalid("its answer's Content-Length is not a number"))?;
            if length.is_some_and(|l| l != n) {
                return Err(invalid(
                    "its answer has two different Content-Length values",
                ));
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(n) => Length::Exact(n),
        None => Length::Close,
    })
}

/// `digits` as a number: one digit or more (leading zeros allowed, as RFC 9110 8.6's
/// `1*DIGIT` does), no sign, no space, at most `u64::MAX`.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Where an answer's body ends.
#[derive(Debug)]
enum Length {
    /// After this many more bytes.
    Exact(u64),
    /// At the last chunk (and its trailers).
    Chunked(Chunk),
    /// When the backend closes the connection.
    Close,
    /// It has ended.
    Done,
}

impl Length {
    fn is_done(&self) -> bool {
        matches!(self, Length::Done | Length::Exact(0))
    }
}

/// Where a chunked body's reader is.
#[derive(Debug, PartialEq)]
enum Chunk {
    /// Before a chunk's size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data, before its line break.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one.
    Trailers,
}

/// What a step of the chunked reader found.
#[derive(Debug, PartialEq)]
enum Step {
    Data(Bytes),
    More,
    End,
}

/// The line at the front of `buf`: the index of the `\r` that ends it, which must be followed
/// by `\n` (a bare `\r` is an error); `None` while it has not come. As hyper's reader, a line
/// ends at its first `\r`; a `\n` before it is an error unless `lf_inside` (a trailer: a head's
/// parser takes a bare `\n` as a line end).
fn crlf_line(buf: &[u8], limit: usize, lf_inside: bool) -> io::Result<Option<usize>> {
    let end = buf
        .iter()
        .position(|b| *b == b'\r' || (!lf_inside && *b == b'\n'));
    match end {
        Some(i) if buf[i] == b'\n' => {
            Err(invalid("a line of its chunked body does not end in CRLF"))
        }
        Some(i) if i > limit => Err(invalid("a line of its chunked body is too long")),
        Some(i) => match buf.get(i + 1) {
            Some(b'\n') => Ok(Some(i)),
            Some(_) => Err(invalid("a line of its chunked body does not end in CRLF")),
            None => Ok(None),
        },
        None if buf.len() > limit => Err(invalid("a line of its chunked body is too long")),
        None => Ok(None),
    }
}

/// A chunk's size line (without its line end): hex digits (at most `u64::MAX`), then maybe
/// spaces or tabs, then nothing or an extension (`;…`, ignored).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count()..];
    if !rest.is_empty() && rest[0] != b';' {
        return None;
    }
    line[..digits].iter().try_fold(0u64, |n, d| {
        let d = (*d as char).to_digit(16)?;
        n.checked_mul(16)?.checked_add(u64::from(d))
    })
}

/// Whether `line` (without its line end) is a header field, `name: value`, as a head's
/// parser reads one. Trailers are not passed on, but one that is not a field means the body
/// is not what the backend meant to send.
fn is_field_line(line: &[u8]) -> bool {
    let mut field = Vec::with_capacity(line.len() + 4);
    field.extend_from_slice(line);
    field.extend_from_slice(b"\r\n\r\n");
    let mut headers = [httparse::EMPTY_HEADER; 1];
    match httparse::parse_headers(&field, &mut headers) {
        Ok(httparse::Status::Complete((_, [h]))) => {
            HeaderName::from_bytes(h.name.as_bytes()).is_ok()
                && HeaderValue::from_bytes(h.value).is_ok()
        }
        _ => false,
    }
}

impl Chunk {
    /// Take what it can off the front of `buf`.
    fn step(&mut self, buf: &mut BytesMut) -> io::Result<Step> {
        loop {
            match self {
                Chunk::Size => {
                    let Some(i) = crlf_line(buf, 1024, false)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&buf[..i])
                        .ok_or_else(|| invalid("a chunk size in its chunked body is not valid"))?;
                    buf.advance(i + 2);
                    *self = if size == 0 {
                        Chunk::Trailers
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let take = (*left).min(buf.len() as u64) as usize;
                    let data = buf.split_to(take).freeze();
                    *left -= take as u64;
                    if *left == 0 {
                        *self = Chunk::DataEnd;
                    }
                    return Ok(Step::Data(data));
                }
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(Step::More);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(invalid(
                            "a chunk in its chunked body is longer than its size",
                        ));
                    }
                    buf.advance(2);
                    *self = Chunk::Size;
                }
                Chunk::Trailers => {
                    let Some(i) = crlf_line(buf, MAX_HEAD, true)? else {
                        return Ok(Step::More);
                    };
                    if i > 0 && !is_field_line(&buf[..i]) {
                        return Err(invalid(
                            "a trailer of its chunked body is not a header field",
                        ));
                    }
                    buf.advance(i + 2);
                    if i == 0 {
                        return Ok(Step::End);
                    }
                }
            }
        }
    }
}

/// An answer's body, read from the backend's connection as the client's connection asks for
/// it; the connection goes back to the pool at its end.
pub struct Answer {
    conn: Option<TcpStream>,
    port: u16,
    buf: BytesMut,
    length: Length,
    reuse: bool,
    idle: Idle,
}

impl Answer {
    /// The body has ended: the connection goes back to the pool if it may be reused and
    /// nothing was sent after the answer.
    fn finish(&mut self) {
        self.length = Length::Done;
        if let Some(stream) = self.conn.take() {
            if self.reuse && self.buf.is_empty() {
                self.idle
                    .keep(self.port, stream, std::mem::take(&mut self.buf));
            }
        }
    }

    /// Read more of the answer into the buffer (`0` at the end of the connection).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Some(stream) = &self.conn else {
            return Poll::Ready(Ok(0));
        };
        self.buf.reserve(READ_SIZE);
        loop {
            ready!(stream.poll_read_ready(cx))?;
            match stream.try_read_buf(&mut self.buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return Poll::Ready(other),
            }
        }
    }
}

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        loop {
            match &mut this.length {
                Length::Done => return Poll::Ready(None),
                Length::Exact(0) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Length::Exact(left) => {
                    if !this.buf.is_empty() {
                        let take = (*left).min(this.buf.len() as u64) as usize;
                        let data = this.buf.split_to(take).freeze();
                        *left -= take as u64;
                        if *left == 0 {
                            this.finish();
                        }
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Length::Close => {
                    if !this.buf.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(this.buf.split().freeze()))));
                    }
                }
                Length::Chunked(chunk) => match chunk.step(&mut this.buf) {
                    Ok(Step::Data(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Ok(Step::End) => {
                        this.finish();
                        return Poll::Ready(None);
                    }
                    Ok(Step::More) => {}
                    Err(e) => {
                        this.conn = None;
                        this.length = Length::Done;
                        return Poll::Ready(Some(Err(e)));
                    }
                },
            }
            match ready!(this.poll_fill(cx)) {
                Ok(0) if matches!(this.length, Length::Close) => {
                    this.conn = None;
                    this.length = Length::Done;
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    this.conn = None;
                    this.length = Length::Done;
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the backend closed the connection before the end of its answer",
                    ))));
                }
                Ok(_) => {}
                Err(e) => {
                    this.conn = None;
                    this.length = Length::Done;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.length.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.length {
            Length::Exact(n) => SizeHint::with_exact(n),
            Length::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::header::CONTENT_LENGTH;

    use crate::scripted::Then::{self, Answer as A, AnswerClose, Close};

    async fn backend(script: Vec<Then>) -> (u16, crate::scripted::Backend) {
        let b = crate::scripted::backend(script).await;
        (b.port, b)
    }

    fn get(method: Method) -> Request<http_body_util::Empty<Bytes>> {
        Request::builder()
            .method(method)
            .uri("/x?y=1")
            .header("host", "web.w.p.localhost")
            .body(http_body_util::Empty::new())
            .unwrap()
    }

    async fn fetch(
        idle: &Idle,
        port: u16,
        method: Method,
    ) -> Result<(Response<()>, Bytes), String> {
        let resp = idle
            .exchange([port].into_iter(), &get(method), None)
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((Response::from_parts(parts, ()), body))
    }

    #[test]
    fn the_request_head_is_origin_form_http11_with_the_headers_as_they_are() {
        let head = request_head(&get(Method::GET));
        assert_eq!(
            std::str::from_utf8(&head).unwrap(),
            "GET /x?y=1 HTTP/1.1\r\nhost: web.w.p.localhost\r\n\r\n"
        );
    }

    #[test]
    fn only_requests_without_a_body_or_upgrade_take_this_path() {
        assert!(takes(&get(Method::GET), false));
        assert!(!takes(&get(Method::GET), true));
        assert!(!takes(&get(Method::CONNECT), false));
        let with_body = Request::new(http_body_util::Full::new(Bytes::from_static(b"x")));
        assert!(!takes(&with_body, false));
    }

    #[tokio::test]
    async fn a_content_length_answer_is_read_exactly_and_its_connection_reused() {
        let (port, accepted) = backend(vec![
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello"),
            A(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno"),
        ])
        .await;
        let idle = Idle::default();
        let (resp, body) = fetch(&idle, port, Method::GET).await.unwrap();
        assert_eq!((resp.status(), &body[..]), (StatusCode::OK, &b"hello"[..]));
        assert_eq!(resp.headers()["x-a"], "1");
        let (resp, body) = fetch(&idle, port, Method::GET).await.unwrap();
        assert_eq!(
            (resp.status(), &body[..]),
            (StatusCode::NOT_FOUND, &b"no"[..])
        );
        assert_eq!(accepted.connections(), 1, "the connection was reused");
    }

    #[tokio::test]
    async fn a_chunked_answer_is_decoded_with_extensions_and_trailers_and_reused() {
        let (port, accepted) = backend(vec![
            A(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n5;ext=1\r\nhello\r\nA \r\n, world!!!\r\n0\r\nX-Trailer: t\r\n\r\n"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        .await;
        let idle = Idle::default();
        let (resp, body) = fetch(&idle, port, Method::GET).await.unwrap();
        assert_eq!(&body[..], b"hello, world!!!");
        assert!(
            resp.headers().get(CONTENT_LENGTH).is_none(),
            "a Content-Length beside Transfer-Encoding is dropped"
        );
        assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, "ok");
        assert_eq!(accepted.connections(), 1);
    }

    #[tokio::test]
    async fn an_answer_without_a_length_ends_with_its_connection_which_is_not_reused() {
        let (port, accepted) = backend(vec![
            AnswerClose(b"HTTP/1.1 200 OK\r\nX: y\r\n\r\nuntil the end"),
            AnswerClose(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nnot gzip at all"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        .await;
        let idle = Idle::default();
        assert_eq!(
            fetch(&idle, port, Method::GET).await.unwrap().1,
            "until the end"
        );
        // A coding other than chunked last: read to the end too, its Content-Length ignored.
        assert_eq!(
            fetch(&idle, port, Method::GET).await.unwrap().1,
            "not gzip at all"
        );
        assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, "ok");
        assert_eq!(accepted.connections(), 3);
    }

    #[tokio::test]
    async fn head_204_and_304_have_no_body_and_1xx_answers_are_skipped() {
        let (port, accepted) = backend(vec![
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"),
            A(b"HTTP/1.1 204 No Content\r\n\r\n"),
            A(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        .await;
        let idle = Idle::default();
        let (resp, body) = fetch(&idle, port, Method::HEAD).await.unwrap();
        assert_eq!(resp.headers()[CONTENT_LENGTH], "100");
        assert!(body.is_empty());
        let (resp, body) = fetch(&idle, port, Method::GET).await.unwrap();
        assert_eq!((resp.status(), body.len()), (StatusCode::NO_CONTENT, 0));
        let (resp, body) = fetch(&idle, port, Method::GET).await.unwrap();
        assert_eq!((resp.status(), body.len()), (StatusCode::NOT_MODIFIED, 0));
        assert!(resp.headers().get("link").is_none());
        assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, "ok");
        assert_eq!(accepted.connections(), 1);
    }

    /// An answer with more headers than are read.
    fn too_many_headers() -> &'static [u8] {
        let mut a = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..=MAX_HEADERS {
            a.push_str(&format!("X-{i}: v\r\n"));
        }
        a.push_str("\r\n");
        a.leak().as_bytes()
    }

    /// An answer whose head is longer than MAX_HEAD.
    fn too_large() -> &'static [u8] {
        let a = format!(
            "HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n",
            "x".repeat(MAX_HEAD + 1)
        );
        a.leak().as_bytes()
    }

    #[tokio::test]
    async fn bad_framing_is_an_error_never_a_guess() {
        for (answer, why) in [
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"[..],
                "two different Content-Length",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
                "not a number",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                "chunk size",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
                "longer than its size",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
                "CRLF",
            ),
            (
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
                "switched protocols",
            ),
            (b"HTTP/1.1 2000 OK\r\n\r\n", "malformed"),
            (too_many_headers(), "malformed (too many headers)"),
            (too_large(), "too large"),
            (b"SSH-2.0-OpenSSH\r\n\r\n", "malformed"),
        ] {
            let (port, _) = backend(vec![A(answer)]).await;
            let err = fetch(&Idle::default(), port, Method::GET)
                .await
                .unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
    }

    #[tokio::test]
    async fn a_body_cut_short_is_an_error_and_its_connection_is_dropped() {
        let (port, accepted) = backend(vec![
            AnswerClose(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort"),
            AnswerClose(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nshort"),
            AnswerClose(b"HTTP/1.1 200 OK\r\nContent-Length: 2"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        .await;
        let idle = Idle::default();
        for _ in 0..2 {
            let err = fetch(&idle, port, Method::GET).await.unwrap_err();
            assert!(err.contains("before the end of its answer"), "{err}");
        }
        let err = fetch(&idle, port, Method::GET).await.unwrap_err();
        assert!(err.contains("in the middle of its answer's head"), "{err}");
        assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, "ok");
        assert_eq!(accepted.connections(), 4);
    }

    #[tokio::test]
    async fn a_new_connection_closed_without_an_answer_is_not_retried() {
        let (port, accepted) = backend(vec![Close]).await;
        let err = fetch(&Idle::default(), port, Method::GET)
            .await
            .unwrap_err();
        assert!(err.contains("without answering"), "{err}");
        assert_eq!(accepted.connections(), 1);
    }

    #[tokio::test]
    async fn bytes_after_an_answer_retire_its_connection() {
        let (port, accepted) = backend(vec![
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh"),
        ])
        .await;
        let idle = Idle::default();
        assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, "ok");
        assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, "fresh");
        assert_eq!(accepted.connections(), 2);
    }

    #[tokio::test]
    async fn a_pooled_connection_closed_without_an_answer_is_retried_for_get_not_for_post() {
        for (method, retried) in [(Method::GET, true), (Method::POST, false)] {
            let (port, accepted) = backend(vec![
                A(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
                Close,
                A(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nretry"),
            ])
            .await;
            let idle = Idle::default();
            assert_eq!(fetch(&idle, port, method.clone()).await.unwrap().1, "ok");
            let second = fetch(&idle, port, method.clone()).await;
            if retried {
                assert_eq!(second.unwrap().1, "retry");
                assert_eq!(accepted.connections(), 2);
            } else {
                let err = second.unwrap_err();
                assert!(err.contains("without answering"), "{err}");
                assert_eq!(accepted.connections(), 1);
            }
        }
    }

    #[tokio::test]
    async fn a_connection_the_backend_closed_while_idle_is_not_used() {
        let (port, accepted) = backend(vec![
            AnswerClose(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew"),
        ])
        .await;
        let idle = Idle::default();
        assert_eq!(fetch(&idle, port, Method::POST).await.unwrap().1, "ok");
        // Wait until the backend's end of file reached the pooled connection (what checkout
        // looks at).
        loop {
            let eof = {
                let all = idle.0.lock().unwrap();
                matches!(all[&port][0].0.try_read(&mut [0u8; 1]), Ok(0))
            };
            if eof {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // A POST is not retried: it works only because the closed connection was not used.
        assert_eq!(fetch(&idle, port, Method::POST).await.unwrap().1, "new");
        assert_eq!(accepted.connections(), 2);
    }

    #[tokio::test]
    async fn connection_close_and_http10_answers_do_not_leave_their_connection_pooled() {
        let (port, accepted) = backend(vec![
            A(b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, close\r\nContent-Length: 1\r\n\r\n1"),
            A(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n2"),
            A(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n3"),
        ])
        .await;
        let idle = Idle::default();
        for want in ["1", "2", "3"] {
            assert_eq!(fetch(&idle, port, Method::GET).await.unwrap().1, want);
        }
        assert_eq!(accepted.connections(), 3);
    }

    #[test]
    fn chunk_sizes_that_overflow_or_carry_spaces_in_front_are_refused() {
        for line in [
            &b"10000000000000000\r\n"[..],
            b" 5\r\n",
            b"\r\n",
            b"-1\r\n",
            b"5\n",
            b"5 x\r\n",
            b"5\x0c\r\n",
            b"1;\rx\r\n",
            b"1;a\nb\r\n",
        ] {
            let mut buf = BytesMut::from(line);
            assert!(Chunk::Size.step(&mut buf).is_err(), "{line:?}");
        }
        for (line, size) in [
            (&b"ffffffffffffffff\r\n"[..], u64::MAX),
            (b"00000000000000000000001\r\n", 1),
            (b"A \t;ext=\"q\"\r\n", 10),
        ] {
            let mut buf = BytesMut::from(line);
            let mut c = Chunk::Size;
            assert_eq!(c.step(&mut buf).unwrap(), Step::More, "{line:?}");
            assert_eq!(c, Chunk::Data(size), "{line:?}");
        }
    }
}

/// The hand-written reader against hyper's client, on random answers: for every answer, both
/// refuse it, or both accept it with the same status, headers (hop-by-hop ones and a
/// `Content-Length` beside a `Transfer-Encoding` left out, as this reader does) and body.
///
/// The answers are built to land near the edges (lengths one off, chunk sizes with zeros and
/// cases, extensions, trailers, bare line feeds, `1xx` before the answer, `HTTP/1.0` with a
/// `Transfer-Encoding`), then sometimes damaged a byte at a time, and sent in random pieces
/// over a real connection, so every state of both readers meets a partial read. Heads stay
/// under 64 KiB and chunk extensions under 1 KiB (the limits differ: this reader's are
/// smaller, on purpose, and tested above).
#[cfg(test)]
mod against_hyper {
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper::{HeaderMap, Method, Request, StatusCode};
    use hyper_util::rt::TokioIo;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::Idle;

    /// What a reader made of an answer: status, headers (lower-case names, in order) and body;
    /// or that it refused it.
    type Outcome = Result<(u16, Vec<(String, Vec<u8>)>, Vec<u8>), String>;

    /// The longest either reader may take on one answer (it never should: every answer ends
    /// with its connection).
    const PATIENCE: Duration = Duration::from_secs(10);

    /// A backend that answers one request with `answer`, written in the pieces `cuts` make,
    /// then closes the connection.
    async fn backend(answer: Vec<u8>, cuts: Vec<usize>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let _ = s.set_nodelay(true);
            let mut req = Vec::new();
            let mut b = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&b[..n]),
                }
            }
            let mut at = 0;
            for cut in cuts.into_iter().chain([answer.len()]) {
                let cut = cut.clamp(at, answer.len());
                if s.write_all(&answer[at..cut]).await.is_err() {
                    return;
                }
                at = cut;
                tokio::task::yield_now().await;
            }
            let _ = s.shutdown().await;
            // Until the reader is done: a close with unread bytes would be a reset.
            let _ = s.read(&mut b).await;
        });
        port
    }

    fn request(method: &Method) -> Request<Empty<Bytes>> {
        Request::builder()
            .method(method.clone())
            .uri("/")
            .header("host", "web.w.p.localhost")
            .body(Empty::new())
            .unwrap()
    }

    /// The headers by name (a stable sort: the values of one name stay in their order;
    /// between names a `HeaderMap` keeps no order once one was removed).
    fn headers_of(map: &HeaderMap) -> Vec<(String, Vec<u8>)> {
        let mut headers: Vec<_> = map
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect();
        headers.sort_by(|a, b| a.0.cmp(&b.0));
        headers
    }

    async fn ours(answer: &[u8], cuts: &[usize], method: &Method) -> Outcome {
        let port = backend(answer.to_vec(), cuts.to_vec()).await;
        let resp = Idle::default()
            .exchange([port].into_iter(), &request(method), Some(PATIENCE))
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((
            parts.status.as_u16(),
            headers_of(&parts.headers),
            body.to_vec(),
        ))
    }

    async fn hypers(answer: &[u8], cuts: &[usize], method: &Method) -> Outcome {
        let port = backend(answer.to_vec(), cuts.to_vec()).await;
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.with_upgrades().await;
        });
        let resp = sender
            .send_request(request(method))
            .await
            .map_err(|e| e.to_string())?;
        let (mut parts, body) = resp.into_parts();
        if parts.status == StatusCode::SWITCHING_PROTOCOLS {
            // hyper hands a 101 over as an upgrade; this reader asked for none and refuses it.
            return Err("101".into());
        }
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        // What this reader leaves out of a head: hop-by-hop headers, and a Content-Length
        // beside a Transfer-Encoding.
        if parts.headers.contains_key(hyper::header::TRANSFER_ENCODING) {
            parts.headers.remove(hyper::header::CONTENT_LENGTH);
        }
        super::super::strip_hop_by_hop(&mut parts.headers);
        Ok((
            parts.status.as_u16(),
            headers_of(&parts.headers),
            body.to_vec(),
        ))
    }

    /// Both readers on one answer; what each made of it.
    fn both(answer: &[u8], cuts: &[usize], method: &Method) -> (Outcome, Outcome) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mine = tokio::time::timeout(PATIENCE, ours(answer, cuts, method))
                .await
                .unwrap_or_else(|_| Err("this reader hung".into()));
            let theirs = tokio::time::timeout(PATIENCE, hypers(answer, cuts, method))
                .await
                .unwrap_or_else(|_| Err("hyper hung".into()));
            (mine, theirs)
        })
    }

    fn agree(answer: &[u8], cuts: &[usize], method: &Method) -> Result<(), TestCaseError> {
        let (mine, theirs) = both(answer, cuts, method);
        let shown = String::from_utf8_lossy(answer);
        match (&mine, &theirs) {
            (Err(_), Err(_)) => Ok(()),
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a, b, "{} {:?}", method, shown);
                Ok(())
            }
            _ => Err(TestCaseError::fail(format!(
                "{method} {shown:?} in pieces at {cuts:?}: this reader {mine:?}, hyper {theirs:?}"
            ))),
        }
    }

    /// A status line, mostly well formed.
    fn status_line() -> impl Strategy<Value = String> {
        let version = prop_oneof![
            8 => Just("HTTP/1.1"),
            3 => Just("HTTP/1.0"),
            1 => Just("HTTP/2.0"),
            1 => Just("http/1.1"),
            1 => Just("HTTP/1.1 "),
        ];
        let code = prop_oneof![
            6 => Just("200".to_owned()),
            2 => prop::sample::select(vec!["204", "304", "404", "500", "101", "100", "103", "199", "099", "1000", "20", "2x0"])
                .prop_map(str::to_owned),
            2 => (100u16..1000).prop_map(|c| c.to_string()),
        ];
        let reason = prop_oneof![
            4 => Just("OK".to_owned()),
            1 => Just(String::new()),
            1 => "[ -~]{0,12}",
        ];
        (version, code, reason).prop_map(|(v, c, r)| format!("{v} {c} {r}"))
    }

    /// A `Content-Length` value near `len`.
    fn content_length(len: usize) -> impl Strategy<Value = String> {
        prop_oneof![
            6 => Just(len.to_string()),
            2 => (0..=len + 2).prop_map(|n| n.to_string()),
            1 => Just(format!("0000000000000000000{len}")),
            1 => Just(format!("+{len}")),
            1 => Just(format!("{len}, {len}")),
            1 => Just(format!("{len},{}", len + 1)),
            1 => Just(format!(" {len} ")),
            1 => Just(String::new()),
            1 => Just("18446744073709551615".to_owned()),
            1 => Just("99999999999999999999".to_owned()),
            1 => Just(format!("{len}x")),
        ]
    }

    /// One header line (without its line end), for a body of `len` bytes.
    fn header(len: usize) -> impl Strategy<Value = String> {
        prop_oneof![
            3 => content_length(len).prop_map(|v| format!("Content-Length: {v}")),
            3 => prop::sample::select(vec!["chunked", "Chunked", "gzip", "gzip, chunked", "chunked, gzip", "identity", "", " chunked", "chunked,"])
                .prop_map(|v| format!("Transfer-Encoding: {v}")),
            1 => prop::sample::select(vec!["close", "keep-alive", "Keep-Alive, close", "x-named", "upgrade"])
                .prop_map(|v| format!("Connection: {v}")),
            1 => Just("X-Named: dropped if named".to_owned()),
            1 => Just("Keep-Alive: timeout=5".to_owned()),
            3 => ("[A-Za-z][A-Za-z0-9-]{0,8}", "[ -~\t]{0,16}").prop_map(|(n, v)| format!("{n}: {v}")),
            1 => ("[ -~]{0,12}", "[ -~]{0,12}").prop_map(|(n, v)| format!("{n}:{v}")),
            1 => Just("X-Folded: a\r\n b".to_owned()),
            1 => Just("X-Space : v".to_owned()),
            1 => Just("X-Bytes: \u{80}\u{ff}".to_owned()),
        ]
    }

    /// A chunked body carrying `data`: chunk sizes as written (cases, zeros, sizes one off),
    /// extensions, line ends, the last chunk and trailers, each sometimes wrong.
    fn chunked() -> impl Strategy<Value = Vec<u8>> {
        let chunk = (
            vec(any::<u8>(), 1..20),
            prop_oneof![8 => Just(0i8), 1 => Just(1i8), 1 => Just(-1i8)],
            prop::sample::select(vec!["", "", "", "00", "0000000000000000"]),
            any::<bool>(),
            prop::sample::select(vec![
                "", "", "", ";a=b", "; x", ";a=\"q\"", " ", "\t;e", ";\rx", ";\nx", " x",
            ]),
            prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\n", "\r", ""]),
            prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\n", "xx", ""]),
        );
        let trailer = prop::sample::select(vec![
            "X-T: v\r\n",
            "Server-Timing: a;dur=1\r\n",
            "garbage\r\n",
            "X-T: v\n",
            "X T: v\r\n",
            " folded\r\n",
            "X-T:\r\n",
        ]);
        (
            vec(chunk, 0..5),
            prop::sample::select(vec!["0", "0", "0", "000", "0;end", "0 ", " 0", ""]),
            prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\n"]),
            vec(trailer, 0..3),
            prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\n", "", "\r\nextra"]),
        )
            .prop_map(|(chunks, last, last_end, trailers, end)| {
                let mut b = Vec::new();
                for (data, off, zeros, upper, ext, size_end, data_end) in chunks {
                    let size = (data.len() as i64 + off as i64).max(0) as usize;
                    let digits = if upper {
                        format!("{size:X}")
                    } else {
                        format!("{size:x}")
                    };
                    b.extend_from_slice(format!("{zeros}{digits}{ext}{size_end}").as_bytes());
                    b.extend_from_slice(&data);
                    b.extend_from_slice(data_end.as_bytes());
                }
                b.extend_from_slice(format!("{last}{last_end}").as_bytes());
                for t in trailers {
                    b.extend_from_slice(t.as_bytes());
                }
                b.extend_from_slice(end.as_bytes());
                b
            })
    }

    /// A whole answer: maybe a `1xx` first, a status line, headers, a body.
    fn answer() -> impl Strategy<Value = Vec<u8>> {
        let body = prop_oneof![
            2 => vec(any::<u8>(), 0..40),
            3 => chunked(),
        ];
        (
            prop::sample::select(vec![
                "",
                "",
                "",
                "",
                "HTTP/1.1 100 Continue\r\n\r\n",
                "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
            ]),
            status_line(),
            body,
            prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\n"]),
        )
            .prop_flat_map(|(informational, status, body, eol)| {
                (
                    Just(informational),
                    Just(status),
                    vec(header(body.len()), 0..6),
                    Just(body),
                    Just(eol),
                )
            })
            .prop_map(|(informational, status, headers, body, eol)| {
                let mut a = Vec::from(informational.as_bytes());
                a.extend_from_slice(status.as_bytes());
                a.extend_from_slice(eol.as_bytes());
                for h in headers {
                    a.extend_from_slice(h.as_bytes());
                    a.extend_from_slice(eol.as_bytes());
                }
                a.extend_from_slice(eol.as_bytes());
                a.extend_from_slice(&body);
                a
            })
    }

    /// An answer, sometimes damaged: a byte changed, inserted or removed, or cut short.
    fn damaged() -> impl Strategy<Value = Vec<u8>> {
        let edit = (
            0u8..5,
            any::<prop::sample::Index>(),
            prop::sample::select(vec![
                b'\r', b'\n', b' ', b'\t', b':', b';', b'0', b'a', b'F', 0u8, 0x7f, 0x80, b',',
            ]),
        );
        (answer(), vec(edit, 0..3)).prop_map(|(mut a, edits)| {
            for (kind, at, byte) in edits {
                if a.is_empty() {
                    break;
                }
                let i = at.index(a.len());
                match kind {
                    0 => a[i] = byte,
                    1 => a.insert(i, byte),
                    2 => {
                        a.remove(i);
                    }
                    3 => a.truncate(i),
                    _ => {}
                }
            }
            a
        })
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            // Some 600 exchanges over loopback in a few seconds; a failure prints the smallest
            // answer it shrank to (kept below as a test of its own when it was a bug).
            cases: 300,
            max_shrink_iters: 4000,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn the_answer_reader_agrees_with_hypers_client(
            answer in damaged(),
            cuts in vec(0usize..200, 0..6),
            head in prop::bool::weighted(0.15),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let method = if head { Method::HEAD } else { Method::GET };
            agree(&answer, &cuts, &method)?;
        }

        #[test]
        fn any_bytes_are_refused_or_read_as_hyper_reads_them(
            answer in vec(any::<u8>(), 0..120),
            cuts in vec(0usize..120, 0..4),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            agree(&answer, &cuts, &Method::GET)?;
        }
    }

    /// Answers the property tests found the two readers disagreeing on, each fixed in this
    /// reader: kept so they stay fixed.
    #[test]
    fn answers_the_readers_once_disagreed_on() {
        for (method, answer) in [
            // A Content-Length beside a Transfer-Encoding is left out of a HEAD's answer too.
            (
                Method::HEAD,
                &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n"[..],
            ),
            // A length written with more than 19 digits (leading zeros) is a length.
            (
                Method::GET,
                b"HTTP/1.1 200 OK\r\nContent-Length: 00000000000000000002\r\n\r\nok",
            ),
            (
                Method::GET,
                b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\nok",
            ),
            // HTTP/1.0 with a Transfer-Encoding: refused when it frames a body…
            (
                Method::GET,
                b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nTransfer-Encoding: gzip\r\n\r\n",
            ),
            // … not when there is none.
            (
                Method::HEAD,
                b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            ),
            // A trailer that is not a header field.
            (
                Method::GET,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\ngarbage\r\n\r\n",
            ),
            // A chunk size written with more than 15 digits (leading zeros).
            (
                Method::GET,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000001\r\nx\r\n0\r\n\r\n",
            ),
            // A size line ends at its first CR, which LF must follow.
            (
                Method::GET,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;\rx\r\nx\r\n0\r\n\r\n",
            ),
        ] {
            agree(answer, &[], &method).unwrap();
        }
    }
}
