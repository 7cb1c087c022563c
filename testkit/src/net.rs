//! Loopback ports: a free one, is one listening, can one be bound.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A port nothing listens on right now (the kernel's choice).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Does something accept connections on this loopback port?
pub fn listening(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(300)).is_ok()
}

/// Is the port free to bind?
pub fn bindable(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}
