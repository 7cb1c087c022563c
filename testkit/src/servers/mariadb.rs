//! A private MariaDB: its own server in a temp dir on a free loopback port, with a generated
//! `root` password and fast, unsafe settings (no doublewrite, no log flush per commit), run
//! as the `mysql` user when we are root. `mariadb-install-db` takes seconds, so its result
//! is made once per MariaDB version into a cache directory in the temp dir (under a lock)
//! and copied for each server.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::Res;

/// What to say when MariaDB is not there.
pub const MISSING: &str = "MariaDB is not installed (mariadbd, mariadb-install-db and the mariadb \
                           client): apt-get install mariadb-server mariadb-client, or run \
                           ./scripts/test, which installs them";

/// The programs the tests need.
pub struct MariaDbBins {
    /// mariadbd.
    pub server: PathBuf,
    /// mariadb-install-db.
    pub install_db: PathBuf,
    /// The mariadb client.
    pub client: PathBuf,
}

/// The MariaDB programs, or what to install.
pub fn mariadb_bins() -> Res<MariaDbBins> {
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
        (Some(server), Some(install_db), Some(client)) => Ok(MariaDbBins {
            server,
            install_db,
            client,
        }),
        _ => Err(MISSING.into()),
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
    let bins = mariadb_bins()?;
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
    let out = cmd
        .arg("-e")
        .arg(sql)
        .output()
        .map_err(|e| format!("{}: {e}", bins.client.display()))?;
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
fn template(bins: &MariaDbBins, user: Option<(u32, u32)>) -> Res<(PathBuf, String)> {
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
    let io = |e: std::io::Error| format!("mariadb template: {e}");
    let lock = std::fs::File::create(&lock_path).map_err(io)?;
    // Held until `lock` is dropped: one process installs, the others wait and reuse it.
    // SAFETY: flock on a descriptor we own.
    if unsafe { flock(std::os::fd::AsRawFd::as_raw_fd(&lock), LOCK_EX) } != 0 {
        return Err(format!("cannot lock {}", lock_path.display()));
    }
    if !ready.is_file() {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).map_err(io)?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).map_err(io)?;
        let data = root.join("data");
        std::fs::create_dir(&data).map_err(io)?;
        let password = crate::random_secret();
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
        .map_err(io)?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).map_err(io)?;
            std::os::unix::fs::chown(&sql, Some(uid), Some(gid)).map_err(io)?;
        }
        let log = root.join("install.log");
        let log_file = std::fs::File::create(&log).map_err(io)?;
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
        let status = cmd.status().map_err(io)?;
        std::fs::remove_file(&sql).map_err(io)?;
        if !status.success() {
            return Err(format!(
                "mariadb-install-db failed ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            ));
        }
        std::fs::write(root.join("password"), &password).map_err(io)?;
        std::fs::write(&ready, "").map_err(io)?;
    }
    drop(lock);
    let password = std::fs::read_to_string(root.join("password")).map_err(io)?;
    Ok((root.join("data"), password))
}

/// A private MariaDB server; killed (its data goes with it) on drop.
pub struct MariaDbServer {
    /// `mysql://root:<password>@127.0.0.1:<port>`.
    pub admin_url: String,
    /// Its loopback port.
    pub port: u16,
    /// `root`'s password.
    pub password: String,
    /// mariadbd's pid.
    pub pid: u32,
    /// The programs.
    pub bins: MariaDbBins,
    child: Child,
    /// Data and logs; removed on drop.
    pub dir: tempfile::TempDir,
}

impl MariaDbServer {
    /// [`MariaDbServer::start_with`] a 32 MiB buffer pool.
    pub fn start() -> Res<MariaDbServer> {
        MariaDbServer::start_with("32M")
    }

    /// Start a private server with `buffer_pool` for InnoDB and wait (60 s at most) until
    /// it takes authenticated connections.
    pub fn start_with(buffer_pool: &str) -> Res<MariaDbServer> {
        let bins = mariadb_bins()?;
        let user = super::run_as("mysql", "mariadb-server")?;
        let (template, password) = template(&bins, user)?;
        let dir = tempfile::Builder::new()
            .prefix("binky-mariadb-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let io = |e: std::io::Error| format!("mariadb dir: {e}");
        // The mysql user must be able to pass through to its data directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).map_err(io)?;
        let data = dir.path().join("data");
        let status = Command::new("cp")
            .arg("-a")
            .arg(&template)
            .arg(&data)
            .status()
            .map_err(io)?;
        if !status.success() {
            return Err(format!("cp -a {}: {status}", template.display()));
        }
        let log_path = dir.path().join("mariadbd.log");
        for _attempt in 0..5 {
            let port = crate::net::free_port();
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(io)?;
            // Its temporary tables in a directory of its own, not the shared /tmp where
            // other tests' cleanups run (CI once saw "Error on delete of
            // '/tmp/#sql-temptable-…'" mid-query).
            let tmp = dir.path().join("tmp");
            std::fs::create_dir_all(&tmp).map_err(io)?;
            if let Some((uid, gid)) = user {
                std::os::unix::fs::chown(&tmp, Some(uid), Some(gid)).map_err(io)?;
            }
            let mut cmd = Command::new(&bins.server);
            cmd.arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--tmpdir={}", tmp.display()))
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
                ])
                .arg(format!("--innodb-buffer-pool-size={buffer_pool}"))
                .current_dir("/")
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(io)?)
                .stderr(log)
                .process_group(0);
            if let Some((uid, gid)) = user {
                cmd.uid(uid).gid(gid);
            }
            let mut child = cmd.spawn().map_err(|e| format!("spawn mariadbd: {e}"))?;
            let admin_url = format!("mysql://root:{password}@127.0.0.1:{port}");
            let until = Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
                    if text.contains("Bind on TCP/IP port") || text.contains("already in use") {
                        break; // Someone took the port meanwhile: another one.
                    }
                    return Err(format!("mariadbd exited ({status}):\n{text}"));
                }
                if crate::net::listening(port)
                    && mariadb_client(port, "root", &password, "", "SELECT 1").is_ok()
                {
                    return Ok(MariaDbServer {
                        admin_url,
                        port,
                        password,
                        pid: child.id(),
                        bins,
                        child,
                        dir,
                    });
                }
                if Instant::now() > until || crate::stop::check_stop().is_err() {
                    let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                    let _ = child.wait();
                    return Err(format!(
                        "mariadbd not ready after 60 s:\n{}",
                        std::fs::read_to_string(&log_path).unwrap_or_default()
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Err("no free port for mariadbd after 5 attempts".into())
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        // Its data goes with it: no need for a clean shutdown.
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}
