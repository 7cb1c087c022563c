//! Readiness probes: http (a GET below 500 is ready, as in binky 0.1.2), tcp, and cmd.

use std::time::Duration;

use binky_controllers::process::{ProbeFailure, ProbeTarget, ProcId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

async fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let hosts: Vec<String> = if host == "localhost" {
        vec!["127.0.0.1".into(), "::1".into()]
    } else {
        vec![host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()]
    };
    let mut last = String::from("no address");
    for h in hosts {
        match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect((h.as_str(), port))).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "timed out".into(),
        }
    }
    Err(last)
}

/// Split `http://host:port/path` into its parts.
pub fn split_http_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
            h.to_owned(),
            p.parse::<u16>()
                .map_err(|_| format!("bad port in `{url}`"))?,
        ),
        _ => (authority.to_owned(), 80),
    };
    Ok((host, port, path.to_owned()))
}

async fn http(url: &str) -> Result<(), String> {
    let (host, port, path) = split_http_url(url)?;
    let mut stream = connect(&host, port).await?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: binky-health\r\nConnection: close\r\n\r\n"
    );
    let io = async {
        stream.write_all(req.as_bytes()).await?;
        let mut buf = vec![0u8; 256];
        let mut n = 0;
        while n < buf.len() {
            let k = stream.read(&mut buf[n..]).await?;
            if k == 0 || buf[..n + k].contains(&b'\n') {
                n += k;
                break;
            }
            n += k;
        }
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    let head = tokio::time::timeout(PROBE_TIMEOUT, io)
        .await
        .map_err(|_| "no answer within 2 s".to_owned())?
        .map_err(|e| e.to_string())?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "not an HTTP answer".to_owned())?;
    if status < 500 {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// Is `host` this machine (where binky can see who holds a port)?
fn is_local(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h == "localhost" || h == "::1" || h == "0.0.0.0" || h == "::" || h.starts_with("127.")
}

/// Does a process of the service running as `owner` hold the listening socket of `port`?
/// Its own process group, or a process carrying its spawn token (a child that moved to a
/// group of its own). `Err` names who holds it instead.
fn held_by(port: u16, owner: ProcId) -> Result<(), String> {
    let holders = super::procfs::listeners_of(port);
    let token = super::procfs::environ_var(owner.pid, super::TOKEN_VAR);
    let ours = |pid: u32| {
        super::procfs::stat(pid).is_some_and(|s| s.pgrp == owner.pid)
            || (token.is_some() && super::procfs::environ_var(pid, super::TOKEN_VAR) == token)
    };
    if holders.iter().any(|p| ours(*p)) {
        return Ok(());
    }
    Err(match holders.first() {
        Some(pid) => {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!(
                "port {port} answers, but it is held by `{}` (pid {pid}), not by this service: \
                 another program took it. Stop that program; if the service hands its port to \
                 a process outside its own (e.g. a container), give it an http or cmd health check",
                comm.trim()
            )
        }
        None => format!(
            "port {port} answers, but not from a process of this service (one binky cannot \
             inspect: another user's?)"
        ),
    })
}

/// Run one probe of the service running as `owner`.
pub async fn probe(target: &ProbeTarget, owner: ProcId) -> Result<(), ProbeFailure> {
    match target {
        ProbeTarget::Tcp(host, port) => {
            if *port == 0 {
                return Err(ProbeFailure::NotReady("no port to check".into()));
            }
            connect(host, *port).await.map(drop)?;
            if is_local(host) {
                held_by(*port, owner).map_err(ProbeFailure::Foreign)?;
            }
            Ok(())
        }
        ProbeTarget::Http(url) => http(url).await.map_err(ProbeFailure::NotReady),
        ProbeTarget::Cmd { cmd, workdir, env } => command(cmd, workdir, env)
            .await
            .map_err(ProbeFailure::NotReady),
    }
}

/// A cmd probe: `cmd` exits 0 within 10 s.
async fn command(
    cmd: &str,
    workdir: &std::path::Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let mut c = tokio::process::Command::new("/bin/sh");
    c.arg("-c")
        .arg(cmd)
        .current_dir(workdir)
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = c.spawn().map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
        Ok(Ok(s)) if s.success() => Ok(()),
        Ok(Ok(s)) => Err(format!("`{cmd}` exited with {s}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Err(format!("`{cmd}` took longer than 10 s"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_split() {
        assert_eq!(
            split_http_url("http://localhost:4000/health?x=1").unwrap(),
            ("localhost".into(), 4000, "/health?x=1".into())
        );
        assert_eq!(
            split_http_url("http://127.0.0.1:8080").unwrap(),
            ("127.0.0.1".into(), 8080, "/".into())
        );
        assert_eq!(split_http_url("http://example").unwrap().1, 80);
        assert!(split_http_url("https://x").is_err());
    }
}
