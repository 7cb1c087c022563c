//! The bodies the proxy answers with, kept apart from the proxy so that what writes them
//! (the proxy's pages, the dashboard) depends on this module and not on the proxy.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;

/// Response bodies: a backend's answer, or one of the proxy's pages, or a stream the
/// dashboard writes (server-sent events); no boxing on the hot path.
pub type Body = http_body_util::Either<FromBackend, Own>;

/// A backend's answer: read in the client connection's task (`upstream.rs`), or through
/// hyper's client (requests with a body, upgrades).
pub type FromBackend = http_body_util::Either<super::upstream::Answer, Incoming>;

/// The proxy's own bodies: a page, or a stream written by a task through a channel.
pub type Own = http_body_util::Either<Full<Bytes>, http_body_util::channel::Channel<Bytes>>;

/// A body of these bytes.
pub fn full(text: impl Into<Bytes>) -> Body {
    http_body_util::Either::Right(http_body_util::Either::Left(Full::new(text.into())))
}

/// A body streamed through a channel: what its sender sends, until it is dropped.
pub fn streamed(channel: http_body_util::channel::Channel<Bytes>) -> Body {
    http_body_util::Either::Right(http_body_util::Either::Right(channel))
}
