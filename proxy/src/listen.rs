//! Binding the proxy's ports: the asked-for port when it can be had, else a fallback, and
//! a note saying which and why, for `binky status`.
//!
//! Each worker thread gets sockets of its own on the port (`SO_REUSEPORT`, as nginx's
//! `listen ... reuseport`): the kernel spreads new connections over the workers, where one
//! shared socket lets whichever worker is awake take them all. A port is only taken when no
//! one holds it: a plain socket is bound first (which fails while any other socket, reuseport
//! or not, is bound there) and closed just before the workers' sockets are bound. Where the
//! system cannot spread connections over sockets (Windows: `binky_platform::net`), a port gets
//! one socket, which one worker serves.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Listeners on one port (127.0.0.1, and ::1 when the machine has IPv6), for each worker.
pub struct Bound {
    /// The port.
    pub port: u16,
    /// For each worker, its sockets (one per address).
    pub workers: Vec<Vec<TcpListener>>,
    /// Why this is not the asked-for port, if it is not.
    pub note: String,
}

/// Connections waiting to be accepted, per socket (nginx's `backlog` on Linux is 511; the
/// kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

fn socket(addr: SocketAddr, reuse_port: bool) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    binky_platform::net::prepare_listener(&s, reuse_port)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// `workers` listening sockets on `addr`, after checking that no one else holds it.
fn group(addr: SocketAddr, workers: usize) -> std::io::Result<Vec<TcpListener>> {
    // Bound without SO_REUSEPORT, this fails while anyone holds the address (it has to be
    // closed again before the group can bind, which leaves a window of microseconds).
    let probe = socket(addr, false)?;
    let addr = match probe.local_addr()?.as_socket() {
        Some(a) => a,
        None => addr,
    };
    if !binky_platform::net::SPREADS_ACCEPTS {
        // The probe is the port's one socket.
        probe.listen(BACKLOG)?;
        probe.set_nonblocking(true)?;
        return Ok(vec![probe.into()]);
    }
    drop(probe);
    (0..workers.max(1))
        .map(|_| {
            let s = socket(addr, true)?;
            s.listen(BACKLOG)?;
            s.set_nonblocking(true)?;
            Ok(s.into())
        })
        .collect()
}

fn try_port(port: u16, workers: usize) -> std::io::Result<Vec<Vec<TcpListener>>> {
    let v4 = group(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), workers)?;
    let port = v4[0].local_addr()?.port();
    let v6 = group(SocketAddr::from((Ipv6Addr::LOCALHOST, port)), workers).ok();
    let mut out: Vec<Vec<TcpListener>> = v4.into_iter().map(|l| vec![l]).collect();
    if let Some(v6) = v6 {
        for (sockets, l) in out.iter_mut().zip(v6) {
            sockets.push(l);
        }
    }
    Ok(out)
}

/// Who listens on a port, as `(pid, command name)`, when that can be seen: the daemon
/// reads it from `/proc`.
pub type Holder = fn(u16) -> Option<(u32, String)>;

/// Why `port` could not be bound, in words a person can act on (`holder` names who has it).
pub fn why_not(port: u16, err: &std::io::Error, holder: Holder) -> String {
    match err.kind() {
        ErrorKind::PermissionDenied => format!(
            "port {port} needs privileges (ports below 1024: run the daemon as root, give binky CAP_NET_BIND_SERVICE, or lower net.ipv4.ip_unprivileged_port_start)"
        ),
        ErrorKind::AddrInUse => match holder(port) {
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

/// Bind `wanted`, else the first free fallback, with sockets for `workers` workers;
/// `holder` names who has a port that is taken.
pub fn bind(
    wanted: u16,
    fallback: &[u16],
    workers: usize,
    holder: Holder,
) -> Result<Bound, String> {
    let first_err = match try_port(wanted, workers) {
        Ok(sockets) => {
            return Ok(Bound {
                port: wanted,
                workers: sockets,
                note: String::new(),
            })
        }
        Err(e) => why_not(wanted, &e, holder),
    };
    for port in fallback {
        if let Ok(sockets) = try_port(*port, workers) {
            return Ok(Bound {
                port: *port,
                workers: sockets,
                note: format!("{first_err}; serving on {port} instead (`binky port` changes it)"),
            });
        }
    }
    Err(format!(
        "{first_err}; no fallback port was free either (`binky port` picks others)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_holder(_: u16) -> Option<(u32, String)> {
        None
    }

    #[test]
    fn each_worker_gets_its_own_socket_and_the_port_is_then_taken() {
        let b = bind(0, &[], 3, no_holder).expect("an ephemeral port binds");
        let workers = if binky_platform::net::SPREADS_ACCEPTS {
            3
        } else {
            1
        };
        assert_eq!(b.workers.len(), workers);
        let port = b.workers[0][0].local_addr().unwrap().port();
        assert_ne!(port, 0);
        for sockets in &b.workers {
            assert_eq!(sockets[0].local_addr().unwrap().port(), port);
        }
        // Another binder (another daemon) is refused although the workers use SO_REUSEPORT.
        let err = try_port(port, 1).expect_err("a held port cannot be bound again");
        assert_eq!(err.kind(), ErrorKind::AddrInUse);
        let plain = std::net::TcpListener::bind(("127.0.0.1", port));
        assert!(plain.is_err(), "a plain bind on a held port must fail");
    }

    #[test]
    fn the_kernel_spreads_connections_over_the_workers_sockets() {
        let b = bind(0, &[], 2, no_holder).expect("an ephemeral port binds");
        if !binky_platform::net::SPREADS_ACCEPTS {
            assert_eq!(
                b.workers.len(),
                1,
                "one socket a port where accepts are not spread"
            );
            return;
        }
        let port = b.workers[0][0].local_addr().unwrap().port();
        // Hashed by the client's address and port: 64 connections all on one of two sockets
        // would happen once in 2^63 runs.
        let clients: Vec<_> = (0..64)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let mut accepted = [0usize; 2];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while accepted.iter().sum::<usize>() < clients.len() && std::time::Instant::now() < deadline
        {
            for (i, sockets) in b.workers.iter().enumerate() {
                while sockets[0].accept().is_ok() {
                    accepted[i] += 1;
                }
            }
            std::thread::yield_now();
        }
        assert_eq!(accepted[0] + accepted[1], clients.len(), "{accepted:?}");
        assert!(accepted.iter().all(|n| *n > 0), "{accepted:?}");
    }

    #[test]
    fn a_port_someone_holds_is_refused_and_the_fallback_taken() {
        let other = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let held = other.local_addr().unwrap().port();
        let free = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let fallback = free.local_addr().unwrap().port();
        drop(free);
        let b = bind(held, &[fallback], 2, no_holder).expect("the fallback binds");
        assert_eq!(b.port, fallback);
        assert!(
            b.note.contains(&format!("port {held} is in use")),
            "{}",
            b.note
        );
    }
}
