//! Binding the proxy's ports: the asked-for port when it can be had, else a fallback, and
//! a note saying which and why, for `binky status`.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

/// Listeners on one port (127.0.0.1, and ::1 when the machine has IPv6).
pub struct Bound {
    /// The port.
    pub port: u16,
    /// The sockets.
    pub listeners: Vec<TcpListener>,
    /// Why this is not the asked-for port, if it is not.
    pub note: String,
}

fn try_port(port: u16) -> std::io::Result<Vec<TcpListener>> {
    let v4 = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    let mut out = vec![v4];
    if let Ok(v6) = TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
        out.push(v6);
    }
    Ok(out)
}

/// Why `port` could not be bound, in words a person can act on.
pub fn why_not(port: u16, err: &std::io::Error) -> String {
    match err.kind() {
        ErrorKind::PermissionDenied => format!(
            "port {port} needs privileges (ports below 1024: run the daemon as root, give binky CAP_NET_BIND_SERVICE, or lower net.ipv4.ip_unprivileged_port_start)"
        ),
        ErrorKind::AddrInUse => match crate::supervisor::procfs::listener_of(port) {
            Some((pid, comm)) => format!("port {port} is in use by {comm} (pid {pid})"),
            None => format!("port {port} is in use by another process"),
        },
        _ => format!("port {port}: {err}"),
    }
}

/// The fallbacks tried after `wanted`: the next ten ports, then a fixed list.
pub fn fallbacks(wanted: u16, defaults: &[u16]) -> Vec<u16> {
    let mut out: Vec<u16> = (1..=10).filter_map(|i| wanted.checked_add(i)).collect();
    out.extend(defaults.iter().copied().filter(|p| *p != wanted));
    out.dedup();
    out
}

/// Bind `wanted`, else the first free fallback.
pub fn bind(wanted: u16, fallback: &[u16]) -> Result<Bound, String> {
    let first_err = match try_port(wanted) {
        Ok(listeners) => {
            return Ok(Bound {
                port: wanted,
                listeners,
                note: String::new(),
            })
        }
        Err(e) => why_not(wanted, &e),
    };
    for port in fallback {
        if let Ok(listeners) = try_port(*port) {
            return Ok(Bound {
                port: *port,
                listeners,
                note: format!("{first_err}; serving on {port} instead (`binky port` changes it)"),
            });
        }
    }
    Err(format!(
        "{first_err}; no fallback port was free either (`binky port` picks others)"
    ))
}
