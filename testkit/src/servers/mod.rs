//! Private servers on loopback for tests and benchmarks: each is its own instance in a temp
//! dir on free ports, with a generated admin password, found the way `./scripts/test`
//! installs it, and stopped (its files removed) on drop.
//!
//! `start` returns an error saying what to install when a program is missing; the tests
//! panic on it (they fail, never skip: CI runs them with everything installed), the
//! benchmarks print it.

pub mod clickhouse;
pub mod mariadb;
pub mod moto;
pub mod postgres;
pub mod rabbitmq;
pub mod redis;
pub mod tansu;

use crate::Res;

/// `(uid, gid)` of the system user `name` when we run as root (PostgreSQL and MariaDB
/// refuse root); `None` otherwise.
pub fn run_as(name: &str, package: &str) -> Res<Option<(u32, u32)>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let user = nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .ok_or_else(|| {
            format!(
                "running as root needs a `{name}` system user: run ./scripts/test, which \
                 installs {package} (and with it the user), or apt-get install {package}"
            )
        })?;
    Ok(Some((user.uid.as_raw(), user.gid.as_raw())))
}

/// Does `GET path` on the loopback `port` answer with a body that, trimmed, is `body`
/// (`None`: any HTTP answer)?
pub fn http_answers(port: u16, path: &str, body: Option<&str>) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    match body {
        None => {
            let mut head = [0u8; 12];
            s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
        }
        Some(want) => {
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out.split("\r\n\r\n").nth(1).map(str::trim) == Some(want)
        }
    }
}
