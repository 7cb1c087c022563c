//! A private RabbitMQ node with the management plugin on 127.0.0.1, under a guardian shell.
//!
//! The guardian holds the node's process group (epmd included, on a private port) and kills
//! it when its stdin closes, that is when this process exits for any reason, even SIGKILL:
//! nothing is left running.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::net::free_port;
use crate::Res;

/// What to say when rabbitmq-server is not there.
pub const MISSING: &str = "rabbitmq-server is not installed: run ./scripts/test, which installs \
                           it (or `apt-get install rabbitmq-server`)";

/// Where Debian's rabbitmq-server package puts the node's scripts.
pub const RABBITMQ_BIN: &str = "/usr/lib/rabbitmq/bin";

/// A private RabbitMQ node with the management plugin, on 127.0.0.1.
pub struct RabbitNode {
    /// `http://admin:<password>@127.0.0.1:<mgmt_port>`.
    pub admin_url: String,
    /// The admin user's password.
    pub password: String,
    /// The management API's port.
    pub mgmt_port: u16,
    /// The AMQP port.
    pub amqp_port: u16,
    /// The node's directory (`server.log`, `log/`); removed by the guardian.
    pub dir: PathBuf,
    /// The guardian's stdin: closing it stops the node.
    stdin: Mutex<Option<ChildStdin>>,
    guardian: Mutex<Child>,
}

/// The guardian: starts epmd and the node in a session of their own, waits for EOF on
/// stdin, then kills that whole session's process group and removes the directory.
const GUARDIAN: &str = r#"
setsid sh -c '
  epmd -port "$ERL_EPMD_PORT" &
  until epmd -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1; do sleep 0.05; done
  exec "$BK_RABBITMQ_BIN/rabbitmq-server"
' >"$BK_DIR/server.log" 2>&1 </dev/null &
node=$!
read _ignored || true
kill -9 -"$node" 2>/dev/null
wait "$node" 2>/dev/null
rm -rf "$BK_DIR"
"#;

impl RabbitNode {
    /// Start a node and wait (120 s at most) until its management API and AMQP port
    /// answer. Its four ports are picked free and handed to a broker that takes seconds to
    /// bind them, so a parallel test can take one meanwhile: a boot that fails on
    /// `eaddrinuse` is tried again on new ports (three times at most).
    pub fn start() -> Res<RabbitNode> {
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::start_once() {
                Err(e) if tries < 3 && e.contains("eaddrinuse") => {
                    eprintln!(
                        "rabbitmq: a port was taken while the node booted; again on new ports"
                    );
                }
                other => return other,
            }
        }
    }

    fn start_once() -> Res<RabbitNode> {
        let server = PathBuf::from(RABBITMQ_BIN).join("rabbitmq-server");
        if !server.is_file() {
            return Err(MISSING.into());
        }
        let dir = tempfile::Builder::new()
            .prefix("binky-rabbitmq-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?
            .keep();
        let io = |e: std::io::Error| format!("rabbitmq dir: {e}");
        for sub in ["mnesia", "log", "home"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(io)?;
        }
        let password = crate::random_secret();
        let (amqp_port, mgmt_port, dist_port, epmd_port) =
            (free_port(), free_port(), free_port(), free_port());
        std::fs::write(dir.join("enabled_plugins"), "[rabbitmq_management].\n").map_err(io)?;
        std::fs::write(dir.join("env.conf"), "").map_err(io)?;
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!(
                "listeners.tcp.default = {amqp_port}\n\
                 management.tcp.port = {mgmt_port}\n\
                 management.tcp.ip = 127.0.0.1\n\
                 loopback_users = none\n\
                 default_user = admin\n\
                 default_pass = {password}\n\
                 default_user_tags.administrator = true\n\
                 default_permissions.configure = .*\n\
                 default_permissions.read = .*\n\
                 default_permissions.write = .*\n\
                 log.file.level = warning\n"
            ),
        )
        .map_err(io)?;
        let node_name = format!("rabbit-bk{}@localhost", &password[..8]);
        let mut guardian = Command::new("sh")
            .arg("-c")
            .arg(GUARDIAN)
            .env("BK_DIR", &dir)
            .env("BK_RABBITMQ_BIN", RABBITMQ_BIN)
            .env("HOME", dir.join("home"))
            .env("RABBITMQ_NODENAME", &node_name)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env("ERL_EPMD_PORT", epmd_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
            .env("RABBITMQ_CONF_ENV_FILE", dir.join("env.conf"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the rabbitmq guardian (sh): {e}"))?;
        let stdin = guardian.stdin.take();
        let node = RabbitNode {
            admin_url: format!("http://admin:{password}@127.0.0.1:{mgmt_port}"),
            password,
            mgmt_port,
            amqp_port,
            dir,
            stdin: Mutex::new(stdin),
            guardian: Mutex::new(guardian),
        };
        let started = Instant::now();
        let deadline = started + Duration::from_secs(120);
        while Instant::now() < deadline {
            let exited = node
                .guardian
                .lock()
                .map(|mut g| matches!(g.try_wait(), Ok(Some(_))))
                .unwrap_or(true);
            let log = std::fs::read_to_string(node.dir.join("server.log")).unwrap_or_default();
            if exited || log.contains("BOOT FAILED") || log.contains("ERROR: ") {
                node.stop();
                return Err(format!("rabbitmq-server did not start:\n{log}"));
            }
            if node.api_status("admin", &node.password, "/api/overview") == Some(200)
                && TcpStream::connect(("127.0.0.1", amqp_port)).is_ok()
            {
                eprintln!("rabbitmq node up in {:?}", started.elapsed());
                return Ok(node);
            }
            if crate::stop::pause(Duration::from_millis(200)).is_err() {
                node.stop();
                return Err("interrupted".into());
            }
        }
        let log = std::fs::read_to_string(node.dir.join("server.log")).unwrap_or_default();
        node.stop();
        Err(format!(
            "rabbitmq-server did not answer within 120 s:\n{log}"
        ))
    }

    /// Stop the node (the guardian kills its process group) and wait for that.
    pub fn stop(&self) {
        if let Ok(mut stdin) = self.stdin.lock() {
            stdin.take();
        }
        if let Ok(mut g) = self.guardian.lock() {
            let _ = g.wait();
        }
    }

    /// The guardian shell's pid (the node runs below it).
    pub fn guardian_pid(&self) -> Option<u32> {
        self.guardian.lock().ok().map(|g| g.id())
    }

    /// The status of an authenticated `GET path` on the management API (`None`: no answer).
    pub fn api_status(&self, user: &str, password: &str, path: &str) -> Option<u16> {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect(("127.0.0.1", self.mgmt_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let auth = base64(format!("{user}:{password}").as_bytes());
        let req = format!(
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Basic {auth}\r\n\r\n"
        );
        s.write_all(req.as_bytes()).ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }
}

impl Drop for RabbitNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Standard base64 with padding (for HTTP basic authentication).
fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
