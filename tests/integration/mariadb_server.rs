//! A private MariaDB for tests ([`MariaDbServer`]), and the tests of binky's managed MariaDB
//! (`binky::servers::mariadb`).
//!
//! Each [`MariaDbServer`] is its own server in a temp dir on a free loopback port, with a
//! generated `root` password and fast, unsafe settings (no doublewrite, no log flush per
//! commit), run as the `mysql` user when the tests run as root; it is killed and its files
//! removed on drop. `mariadb-install-db` takes seconds, so its result is made once per
//! MariaDB version into a cache directory in the temp dir (under a lock) and copied for
//! each server. Without MariaDB installed the tests fail (never skip), saying how to get it.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use binky::adapters::AdapterConfig;
use binky::servers::ServerError;
use binky_controllers::slice::random_secret;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::harness::{listening, wait_until, Managed};

/// The programs the tests need.
pub struct MariaDbBins {
    pub server: PathBuf,
    pub install_db: PathBuf,
    pub client: PathBuf,
}

/// The MariaDB programs, or a panic saying how to install them.
pub fn require_mariadb() -> MariaDbBins {
    let find = |names: &[&str]| {
        names.iter().find_map(|n| {
            ["/usr/sbin", "/usr/bin"]
                .iter()
                .map(|d| Path::new(d).join(n))
                .find(|p| p.is_file())
                .or_else(|| {
                    std::env::split_paths(&std::env::var_os("PATH")?)
                        .map(|d| d.join(n))
                        .find(|p| p.is_file())
                })
        })
    };
    match (
        find(&["mariadbd", "mysqld"]),
        find(&["mariadb-install-db", "mysql_install_db"]),
        find(&["mariadb", "mysql"]),
    ) {
        (Some(server), Some(install_db), Some(client)) => MariaDbBins {
            server,
            install_db,
            client,
        },
        _ => panic!(
            "MariaDB is not installed (mariadbd, mariadb-install-db and the mariadb client): \
             apt-get install mariadb-server mariadb-client, or run ./scripts/test, which \
             installs them"
        ),
    }
}

/// `(uid, gid)` of the `mysql` user when the tests run as root (mariadbd refuses root).
fn run_as() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let user = nix::unistd::User::from_name("mysql")
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            panic!(
                "tests run as root need a `mysql` system user to run MariaDB: apt-get install \
                 mariadb-server, or run ./scripts/test, which installs it (and the user)"
            )
        });
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `'` → `%27`: for user names, passwords and database names in URLs.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a `mysql://user:password@host:port/db` URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MyUrl {
    pub user: String,
    pub password: String,
    pub host: String,
    pub port: u16,
    pub database: String,
}

/// Parse a slice URL the way a client library would.
pub fn parse_url(url: &str) -> MyUrl {
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.split('?').next().unwrap();
    let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hostport) = authority.rsplit_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let (host, port) = hostport.rsplit_once(':').unwrap();
    MyUrl {
        user: percent_decode(user),
        password: percent_decode(password),
        host: host.to_owned(),
        port: port.parse().unwrap(),
        database: percent_decode(db),
    }
}

/// Run `sql` with the `mariadb` client as `user` on 127.0.0.1:`port` (in `db` when not
/// empty): the rows (fields tab-separated, NULL as "NULL"), or the client's error output.
pub fn mariadb_client(
    port: u16,
    user: &str,
    password: &str,
    db: &str,
    sql: &str,
) -> Result<Vec<Vec<String>>, String> {
    let bins = require_mariadb();
    let mut cmd = Command::new(&bins.client);
    cmd.args([
        "--no-defaults",
        "--protocol=TCP",
        "-h",
        "127.0.0.1",
        "--skip-column-names",
        "--batch",
        // Fields as they are: no `\\` for a backslash.
        "--raw",
    ])
    .arg(format!("--port={port}"))
    .arg(format!("--user={user}"))
    .arg("--connect-timeout=5")
    // The password through the environment: never on a command line.
    .env("MYSQL_PWD", password)
    .stdin(Stdio::null());
    if !db.is_empty() {
        cmd.arg(format!("--database={db}"));
    }
    let out = cmd.arg("-e").arg(sql).output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect())
}

extern "C" {
    fn flock(fd: i32, op: i32) -> i32;
}
const LOCK_EX: i32 = 2;

/// A pristine data directory (and its `root` password), installed once per MariaDB version.
fn template(bins: &MariaDbBins, user: Option<(u32, u32)>) -> (PathBuf, String) {
    let version = Command::new(&bins.server)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let key: u32 = version
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let root = std::env::temp_dir().join(format!(
        "binky-test-mariadb-{}-{key:08x}",
        nix::unistd::geteuid()
    ));
    let ready = root.join("ready");
    let lock_path = std::env::temp_dir().join(format!(
        "binky-test-mariadb-{}-{key:08x}.lock",
        nix::unistd::geteuid()
    ));
    let lock = std::fs::File::create(&lock_path).unwrap();
    // Held until `lock` is dropped: one process installs, the others wait and reuse it.
    assert_eq!(
        unsafe { flock(std::os::fd::AsRawFd::as_raw_fd(&lock), LOCK_EX) },
        0,
        "cannot lock {}",
        lock_path.display()
    );
    if !ready.is_file() {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
        let data = root.join("data");
        std::fs::create_dir(&data).unwrap();
        let password = random_secret();
        let sql = root.join("extra.sql");
        std::fs::write(
            &sql,
            format!(
                "DELETE FROM mysql.global_priv WHERE User = '';\n\
                 DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN ('localhost', '127.0.0.1');\n\
                 UPDATE mysql.global_priv SET Priv = JSON_SET(Priv, '$.plugin', \
                 'mysql_native_password', '$.authentication_string', \
                 PASSWORD('{password}')) WHERE User = 'root';\n"
            ),
        )
        .unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).unwrap();
            std::os::unix::fs::chown(&sql, Some(uid), Some(gid)).unwrap();
        }
        let log = root.join("install.log");
        let log_file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(&bins.install_db);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ])
            .arg(format!("--extra-file={}", sql.display()))
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        if let Some((uid, gid)) = user {
            cmd.uid(uid).gid(gid);
        }
        let status = cmd.status().unwrap();
        std::fs::remove_file(&sql).unwrap();
        assert!(
            status.success(),
            "mariadb-install-db failed ({status}): {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::fs::write(root.join("password"), &password).unwrap();
        std::fs::write(&ready, "").unwrap();
    }
    drop(lock);
    let password = std::fs::read_to_string(root.join("password")).unwrap();
    (root.join("data"), password)
}

/// A private MariaDB server for one test.
pub struct MariaDbServer {
    /// `mysql://root:<password>@127.0.0.1:<port>`.
    pub admin_url: String,
    /// Its loopback port.
    pub port: u16,
    /// `root`'s password.
    pub password: String,
    /// mariadbd's pid.
    pub pid: u32,
    child: Child,
    /// Data and logs; removed on drop.
    pub dir: tempfile::TempDir,
}

impl MariaDbServer {
    /// Start a private server and wait until it takes authenticated connections.
    pub fn start() -> MariaDbServer {
        let bins = require_mariadb();
        let user = run_as();
        let (template, password) = template(&bins, user);
        let dir = tempfile::Builder::new()
            .prefix("binky-mariadb-")
            .tempdir()
            .unwrap();
        // The mysql user must be able to pass through to its data directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let data = dir.path().join("data");
        let status = Command::new("cp")
            .arg("-a")
            .arg(&template)
            .arg(&data)
            .status()
            .unwrap();
        assert!(status.success(), "cp -a {}: {status}", template.display());
        let log_path = dir.path().join("mariadbd.log");
        for _attempt in 0..5 {
            let port = free_port();
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .unwrap();
            let mut cmd = Command::new(&bins.server);
            cmd.arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--port={port}"))
                .arg(format!("--socket={}", data.join("mysqld.sock").display()))
                .arg(format!(
                    "--pid-file={}",
                    data.join("mariadbd.pid").display()
                ))
                .args([
                    "--bind-address=127.0.0.1",
                    "--skip-name-resolve",
                    "--character-set-server=utf8mb4",
                    "--innodb-flush-log-at-trx-commit=0",
                    "--innodb-doublewrite=0",
                    "--innodb-buffer-pool-size=32M",
                ])
                .current_dir("/")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .process_group(0);
            if let Some((uid, gid)) = user {
                cmd.uid(uid).gid(gid);
            }
            let mut child = cmd.spawn().unwrap();
            let admin_url = format!("mysql://root:{password}@127.0.0.1:{port}");
            let until = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
                    if text.contains("Bind on TCP/IP port") || text.contains("already in use") {
                        break; // Someone took the port meanwhile: another one.
                    }
                    panic!("mariadbd exited ({status}):\n{text}");
                }
                if listening(port)
                    && mariadb_client(port, "root", &password, "", "SELECT 1").is_ok()
                {
                    return MariaDbServer {
                        admin_url,
                        port,
                        password,
                        pid: child.id(),
                        child,
                        dir,
                    };
                }
                if Instant::now() > until {
                    let _ = child.kill();
                    panic!(
                        "mariadbd not ready after 60 s:\n{}",
                        std::fs::read_to_string(&log_path).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("no free port for mariadbd after 5 attempts");
    }

    /// `mysql://<user>:<password>@127.0.0.1:<port>/<database>`, encoded.
    pub fn url(&self, user: &str, password: &str, database: &str) -> String {
        format!(
            "mysql://{}:{}@127.0.0.1:{}/{}",
            percent_encode(user),
            percent_encode(password),
            self.port,
            percent_encode(database)
        )
    }

    /// An adapter configuration with this server's admin URL.
    pub fn cfg(&self) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        }
    }

    /// Rows of `sql` run at a slice URL, or the client's error.
    pub fn try_query(&self, url: &str, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let u = parse_url(url);
        assert_eq!(u.port, self.port, "{url} is not on this server");
        mariadb_client(u.port, &u.user, &u.password, &u.database, sql)
    }

    /// Rows of `sql` run at a slice URL; panics with the server's error.
    pub fn query(&self, url: &str, sql: &str) -> Vec<Vec<String>> {
        self.try_query(url, sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Rows of `sql` run as root.
    pub fn admin(&self, sql: &str) -> Vec<Vec<String>> {
        mariadb_client(self.port, "root", &self.password, "", sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn column(&self, sql: &str) -> Vec<String> {
        self.admin(sql)
            .into_iter()
            .map(|mut r| r.swap_remove(0))
            .collect()
    }

    /// Databases named like binky slices (`bk_…`).
    pub fn slice_databases(&self) -> Vec<String> {
        self.column(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
             WHERE SCHEMA_NAME LIKE 'bk\\_%' ORDER BY 1",
        )
    }

    /// Accounts named like binky slices, as `user@host`.
    pub fn slice_users(&self) -> Vec<String> {
        self.column(
            "SELECT CONCAT(User, '@', Host) FROM mysql.user WHERE User LIKE 'bk\\_%' ORDER BY 1",
        )
    }

    /// Grants given to slice accounts at the database level (`mysql.db`).
    pub fn slice_grants(&self) -> Vec<String> {
        self.column(
            "SELECT CONCAT(User, ' ', Db) FROM mysql.db WHERE User LIKE 'bk\\_%' ORDER BY 1",
        )
    }

    /// Assert no slice database, user or grant is left.
    pub fn assert_no_slices(&self) {
        assert_eq!(
            self.slice_databases(),
            Vec::<String>::new(),
            "databases left"
        );
        assert_eq!(self.slice_users(), Vec::<String>::new(), "users left");
        assert_eq!(self.slice_grants(), Vec::<String>::new(), "grants left");
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        // Its data goes with it: no need for a clean shutdown.
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// The managed server.

#[test]
fn the_managed_mariadb_installs_with_a_password_and_keeps_its_data_across_a_restart() {
    require_mariadb();
    let rt = runtime();
    let mut m = Managed::new("mysql");
    let began = Instant::now();
    let started = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "managed mariadb: installed and started in {:?}",
        began.elapsed()
    );
    m.pid = Some(started.pid);
    assert_eq!(
        started.admin_url,
        format!("mysql://root:{}@127.0.0.1:{}", m.ctx.password, m.ctx.port)
    );
    assert!(started.version.contains("MariaDB"), "{}", started.version);
    // The recorded pid is mariadbd itself, leader of its own process group.
    let pidfile = std::fs::read_to_string(m.data().join("mariadbd.pid")).unwrap();
    assert_eq!(pidfile.trim(), started.pid.to_string());
    let stat = binky::supervisor::procfs::stat(started.pid).unwrap();
    assert_eq!(stat.pgrp, started.pid);
    if nix::unistd::geteuid().is_root() {
        // It runs as `mysql`, its data outside the 0700 home, which stays so.
        let meta = std::fs::symlink_metadata(&m.ctx.data_dir).unwrap();
        assert!(meta.file_type().is_symlink());
        assert!(m
            .data()
            .starts_with(binky::servers::mariadb::ROOT_DATA_BASE));
        let home_mode = std::fs::metadata(m.home.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(home_mode & 0o777, 0o700);
        let status = std::fs::read_to_string(format!("/proc/{}/status", started.pid)).unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let mysql_uid = nix::unistd::User::from_name("mysql").unwrap().unwrap().uid;
        assert_eq!(
            uid_line.split_whitespace().nth(1),
            Some(mysql_uid.to_string().as_str()),
            "{uid_line}"
        );
    }
    let port = m.ctx.port;
    let pw = m.ctx.password.clone();
    let admin = |sql: &str| mariadb_client(port, "root", &pw, "", sql).unwrap();
    // Loopback only; no password-less, anonymous or remote root account; no `test`.
    assert_eq!(
        admin("SELECT @@bind_address, @@skip_name_resolve, @@character_set_server"),
        [["127.0.0.1", "1", "utf8mb4"]]
    );
    assert_eq!(
        admin("SELECT CONCAT(User, '@', Host), authentication_string <> '' FROM mysql.user WHERE User <> 'mariadb.sys' ORDER BY 1"),
        [["root@127.0.0.1", "1"], ["root@localhost", "1"]]
    );
    assert_eq!(
        admin("SELECT COUNT(*) FROM mysql.db"),
        [["0"]],
        "database-level grants left by the install"
    );
    assert!(!admin("SHOW DATABASES").iter().any(|r| r[0] == "test"));
    let err = mariadb_client(port, "root", "", "", "SELECT 1").unwrap_err();
    assert!(err.contains("Access denied"), "{err}");
    let err = mariadb_client(port, "", "", "", "SELECT 1").unwrap_err();
    assert!(err.contains("Access denied"), "{err}");
    // The password file the install read is gone.
    let leftovers: Vec<String> = std::fs::read_dir(m.data().parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sql"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let log = std::fs::read_to_string(&m.ctx.log).unwrap();
    assert!(
        !log.contains(&m.ctx.password),
        "the password reached the log"
    );

    admin("CREATE DATABASE kept; CREATE TABLE kept.t (v TEXT); INSERT INTO kept.t VALUES ('x')");
    m.stop(&rt);
    wait_until("port released", Duration::from_secs(10), || {
        !listening(port)
    });

    let again = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(again.pid);
    assert_ne!(again.pid, started.pid);
    assert_eq!(again.admin_url, started.admin_url);
    assert_eq!(admin("SELECT v FROM kept.t"), [["x"]]);
    m.stop(&rt);
}

#[test]
fn the_managed_mariadb_with_another_password_fails_fast_and_leaves_no_process() {
    require_mariadb();
    let rt = runtime();
    let mut m = Managed::new("mysql");
    let started = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    m.stop(&rt);

    let mut wrong = m.ctx.clone();
    wrong.password = random_secret();
    let began = Instant::now();
    let err = rt
        .block_on(binky::servers::mariadb::start(&wrong))
        .unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    let text = err.to_string();
    assert!(matches!(err, ServerError::Start { .. }), "{err:?}");
    assert!(text.contains("refuses binky's admin password"), "{text}");
    assert!(
        !text.contains(&wrong.password) && !text.contains(&m.ctx.password),
        "{text}"
    );
    wait_until("no server left", Duration::from_secs(10), || {
        !listening(m.ctx.port)
    });
    // The data is untouched: the right password still works.
    let again = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(again.pid);
    m.stop(&rt);
}

#[test]
fn the_managed_mariadb_on_a_taken_port_fails_quoting_its_log_and_leaves_no_process() {
    require_mariadb();
    let rt = runtime();
    let mut m = Managed::new("mysql");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    m.ctx.port = taken.local_addr().unwrap().port();
    let err = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ServerError::Start { .. }), "{err:?}");
    assert!(text.contains("mariadbd exited"), "{text}");
    assert!(text.contains("Bind on TCP/IP port"), "{text}");
    assert!(text.contains(&m.ctx.log.display().to_string()), "{text}");
    assert!(!text.contains(&m.ctx.password), "{text}");
    // Installed all the same: the next start on a free port uses the data as it is.
    assert!(m.data().join("mysql").is_dir());
    drop(taken);
    m.ctx.port = free_port();
    let started = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    m.stop(&rt);
}
