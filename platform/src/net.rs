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

/// Which programs on `system` find `<name>.localhost` (binky's URLs) without a line in the
/// hosts file, and what a person does for the others, in words for `binky hosts`.
pub fn localhost_names_on(system: crate::install::System) -> &'static str {
    use crate::install::System;
    match system {
        System::Debian => "on Linux, systemd's `myhostname` NSS module and systemd-resolved answer `<name>.localhost` for every program that asks the system; where neither is there (musl, a minimal container), programs need these lines in /etc/hosts: `binky hosts --write` puts them there (as root) and keeps them current",
        System::Windows => "on Windows, browsers and curl resolve `<name>.localhost` themselves; a program that asks Windows may not find it: `binky hosts --write` puts these lines in the hosts file (as an administrator) and keeps them current",
        System::MacOs => "on macOS, curl, Chrome and Firefox resolve `<name>.localhost` themselves, but macOS answers only `localhost` itself: programs that ask the system (Node, Python, Go, Ruby, Java, through getaddrinfo) find no `<name>.localhost`; `binky hosts --write` puts these lines in /etc/hosts (with sudo) and keeps them current",
    }
}

/// What a person is told on `system` after binky changed its hosts file: macOS' resolver
/// may answer from its cache a name it failed to find before the change.
pub fn after_hosts_change_on(system: crate::install::System) -> Option<&'static str> {
    match system {
        crate::install::System::MacOs => Some("macOS may keep answering \"not found\" from its cache for a name looked up before: `sudo killall -HUP mDNSResponder` makes it forget"),
        _ => None,
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
    fn each_system_says_who_finds_localhost_names_and_macos_says_most_programs_do_not() {
        use crate::install::System;
        let mac = localhost_names_on(System::MacOs);
        for part in [
            "on macOS",
            "getaddrinfo",
            "Node",
            "/etc/hosts",
            "sudo",
            "binky hosts --write",
        ] {
            assert!(mac.contains(part), "{part:?} not in {mac}");
        }
        assert!(localhost_names_on(System::Debian).contains("on Linux"));
        assert!(localhost_names_on(System::Windows).contains("administrator"));
        assert!(after_hosts_change_on(System::MacOs).is_some_and(|t| t.contains("mDNSResponder")));
        assert_eq!(after_hosts_change_on(System::Debian), None);
        assert_eq!(after_hosts_change_on(System::Windows), None);
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
