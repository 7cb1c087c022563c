//! Listening sockets: what lets several worker threads listen on one port, and what keeps
//! another program from taking a port binky holds.
//!
//! On Unix each proxy worker binds a socket of its own with `SO_REUSEPORT` and the kernel
//! spreads new connections over them (as nginx's `listen … reuseport`); `SO_REUSEADDR` lets a
//! restarted daemon bind again past connections in `TIME_WAIT`. Windows has no
//! `SO_REUSEPORT`, and its `SO_REUSEADDR` lets any program bind over a port already in use,
//! so binky sets neither there: one socket a port, which one worker serves.

use std::io;

use socket2::Socket;

/// Whether several sockets can listen on one port with the system spreading connections over
/// them (`SO_REUSEPORT`): true on Unix, false on Windows.
pub const SPREADS_ACCEPTS: bool = cfg!(unix);

/// Prepares `socket`, before `bind`, to listen on a port: `SO_REUSEADDR` on Unix (a restarted
/// daemon binds past `TIME_WAIT`), and with `shared` also `SO_REUSEPORT` (one of several
/// sockets on the port; only where [`SPREADS_ACCEPTS`]). On Windows neither is set.
pub fn prepare_listener(socket: &Socket, shared: bool) -> io::Result<()> {
    #[cfg(unix)]
    {
        socket.set_reuse_address(true)?;
        if shared {
            socket.set_reuse_port(true)?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (socket, shared);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};
    use std::net::{Ipv4Addr, SocketAddr};

    fn bound(addr: SocketAddr, shared: bool) -> io::Result<Socket> {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        prepare_listener(&s, shared)?;
        s.bind(&addr.into())?;
        s.listen(16)?;
        Ok(s)
    }

    #[test]
    fn shared_listeners_share_a_port_where_the_system_spreads_accepts_and_a_plain_one_is_refused() {
        let first = bound(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), true).unwrap();
        let addr = first.local_addr().unwrap().as_socket().unwrap();
        let second = bound(addr, true);
        assert_eq!(second.is_ok(), SPREADS_ACCEPTS, "{second:?}");
        // A socket that does not share is refused while the port is held, on every system.
        assert!(
            bound(addr, false).is_err(),
            "a plain socket took a held port"
        );
    }
}
