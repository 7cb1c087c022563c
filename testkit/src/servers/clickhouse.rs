//! A private `clickhouse-server` on 127.0.0.1: the packaged config with its paths in a temp
//! dir and its ports free ones, and a `default` user with a password.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::Res;

/// The packaged server configuration the fixture starts from.
pub const CONFIG_TEMPLATE: &str = "/etc/clickhouse-server/config.xml";

/// What to say when clickhouse-server is not there.
pub const MISSING: &str = "clickhouse-server is not installed: run ./scripts/test, which \
                           installs it (or `apt-get install clickhouse-server`)";

/// The server binary: `clickhouse-server` on PATH or in /usr/sbin (Debian's).
pub fn clickhouse_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("clickhouse-server"))
        .find(|p| p.is_file())
}

/// Set every `<tag>…</tag>` (commented-out ones too, harmlessly) to `value`.
pub fn set_tag(xml: &str, tag: &str, value: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = start + open.len();
        let Some(len) = rest[after..].find(&close) else {
            break;
        };
        out.push_str(&rest[..after]);
        out.push_str(value);
        rest = &rest[after + len..];
    }
    out.push_str(rest);
    out
}

/// The packaged config made private: paths under `dir`, ports from `ports`, loopback only.
pub fn private_config(template: &str, dir: &Path, ports: &[(&str, u16)]) -> String {
    let mut xml = template
        .replace("/var/lib/clickhouse/", &format!("{}/data/", dir.display()))
        .replace(
            "/var/log/clickhouse-server/",
            &format!("{}/log/", dir.display()),
        );
    for (tag, port) in ports {
        xml = set_tag(&xml, tag, &port.to_string());
    }
    // Loopback only, whatever the package listens on.
    xml = xml
        .lines()
        .filter(|l| !l.contains("<listen_host>"))
        .collect::<Vec<_>>()
        .join("\n");
    xml.replacen(
        "</http_port>",
        "</http_port>\n    <listen_host>127.0.0.1</listen_host>",
        1,
    )
}

/// A users.xml with `default`, whose password is given as its SHA-256 (so it is in no file
/// as text), reachable from loopback only, allowed to manage users where the server has SQL
/// users; and `reader`, the same password with a read-only profile (for error tests). The
/// package's users.xml is not copied: it has a password-less `readonly` user.
pub fn users_xml(password: &str) -> String {
    let hash: String = Sha256::digest(password.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        r#"<?xml version="1.0"?>
<yandex>
    <profiles>
        <default></default>
        <readonly><readonly>1</readonly></readonly>
    </profiles>
    <users>
        <default>
            <password_sha256_hex>{hash}</password_sha256_hex>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
            <access_management>1</access_management>
        </default>
        <reader>
            <password_sha256_hex>{hash}</password_sha256_hex>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>readonly</profile>
            <quota>default</quota>
        </reader>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries><errors>0</errors><result_rows>0</result_rows>
                <read_rows>0</read_rows><execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
"#
    )
}

/// A private clickhouse-server; killed on drop.
pub struct ClickHouseServer {
    /// `http://default:<password>@127.0.0.1:<http port>`.
    pub admin_url: String,
    /// The HTTP interface's port.
    pub port: u16,
    /// The `default` user's password.
    pub password: String,
    /// Its directory (logs under `log/`, data under `data/`).
    pub dir: PathBuf,
    /// The program it runs.
    pub bin: PathBuf,
    child: Child,
    _tmp: tempfile::TempDir,
}

impl ClickHouseServer {
    /// Start one and wait (20 s at most) until `GET /ping` answers `Ok.`.
    pub fn start() -> Res<ClickHouseServer> {
        let bin = clickhouse_binary().ok_or(MISSING)?;
        let template = std::fs::read_to_string(CONFIG_TEMPLATE)
            .map_err(|e| format!("{CONFIG_TEMPLATE}: {e}; {MISSING}"))?;
        let tmp = tempfile::Builder::new()
            .prefix("binky-clickhouse-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let dir = tmp.path().to_owned();
        let io = |e: std::io::Error| format!("clickhouse dir: {e}");
        let password = crate::random_secret();
        std::fs::write(dir.join("users.xml"), users_xml(&password)).map_err(io)?;
        let free = crate::net::free_port;
        // A port taken between the probe and the bind makes the server exit: try others.
        for _ in 0..5 {
            let port = free();
            let ports = [
                ("http_port", port),
                ("tcp_port", free()),
                ("interserver_http_port", free()),
                ("mysql_port", free()),
                ("postgresql_port", free()),
                ("https_port", free()),
                ("tcp_port_secure", free()),
            ];
            std::fs::write(
                dir.join("config.xml"),
                private_config(&template, &dir, &ports),
            )
            .map_err(io)?;
            let out = std::fs::File::create(dir.join("server.out")).map_err(io)?;
            let mut child = Command::new(&bin)
                .arg(format!(
                    "--config-file={}",
                    dir.join("config.xml").display()
                ))
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(out.try_clone().map_err(io)?)
                .stderr(out)
                .spawn()
                .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
            if wait_ping(&mut child, port) {
                return Ok(ClickHouseServer {
                    admin_url: format!("http://default:{password}@127.0.0.1:{port}"),
                    port,
                    password,
                    dir,
                    bin,
                    child,
                    _tmp: tmp,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            crate::stop::check_stop()?;
        }
        Err(format!(
            "clickhouse-server did not start: {}{}",
            std::fs::read_to_string(dir.join("server.out")).unwrap_or_default(),
            std::fs::read_to_string(dir.join("log/clickhouse-server.err.log")).unwrap_or_default()
        ))
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ClickHouseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until `GET /ping` answers `Ok.`, or the child exits.
fn wait_ping(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && crate::stop::check_stop().is_ok() {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        if super::http_answers(port, "/ping", Some("Ok.")) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
