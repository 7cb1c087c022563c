//! The real port probe: can a server bind this port on loopback right now?

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use binky_controllers::port::PortProbe;

/// Can a server bind `port` on loopback right now?
pub fn is_free(port: u16) -> bool {
    BindProbe.is_free(port)
}

/// Probes by binding, the way a dev server binds (with `SO_REUSEADDR`, as Rust's std does
/// on Unix): a port in TIME_WAIT reads free, an active listener on 127.0.0.1 or 0.0.0.0
/// reads taken.
#[derive(Clone, Debug, Default)]
pub struct BindProbe;

impl PortProbe for BindProbe {
    fn is_free(&self, port: u16) -> bool {
        let loopback = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        if loopback.is_err() {
            return false;
        }
        drop(loopback);
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).is_ok()
    }

    fn holder(&self, port: u16) -> Option<String> {
        let pid = *binky_platform::proc::listeners_of(port).first()?;
        let name = binky_platform::process::name(pid).unwrap_or_default();
        Some(format!("`{name}` (pid {pid})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_port_is_taken_and_a_closed_one_free() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!BindProbe.is_free(port));
        drop(l);
        assert!(BindProbe.is_free(port));
    }

    #[test]
    fn the_holder_of_a_listening_port_is_named_with_its_pid() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let who = BindProbe.holder(port).expect("this process listens");
        assert!(
            who.ends_with(&format!("(pid {})", std::process::id())),
            "{who}"
        );
        drop(l);
        assert_eq!(BindProbe.holder(port), None);
    }
}
