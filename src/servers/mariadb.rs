//! The managed MariaDB server (kind `mysql`, for the `mysql`, `mariadb` and `percona`
//! adapters): `mariadb-install-db` on first start, then `mariadbd` on 127.0.0.1, detached in
//! its own process group, with a generated `root` password.
//!
//! # Guarantees
//! - The binaries are `/usr/sbin/mariadbd` (on Windows, MariaDB's MSI's `MariaDB
//!   <version>\bin`; else `mariadbd` or `mysqld` on `PATH`) and `mariadb-install-db` (else
//!   `mysql_install_db`); without them the error names the `mariadb-server` package (on
//!   Windows, MariaDB's installer).
//! - `mariadb-install-db --no-defaults --auth-root-authentication-method=normal
//!   --skip-test-db --skip-name-resolve` runs into `<data>.init`, renamed into place when it
//!   succeeded, so a data directory with a `mysql` schema is always a whole one; an
//!   interrupted install is simply redone.
//! - **No moment without a password.** The `root` password is set *by the install itself*
//!   (`--extra-file`, SQL run in bootstrap mode before the server ever listens), not through
//!   the socket after a first start: "normal" root accounts are made password-less, and a
//!   server started to set the password would take password-less `root` logins on
//!   127.0.0.1 meanwhile. The same SQL drops the anonymous accounts and every `root` but
//!   `root@localhost` (the socket) and `root@127.0.0.1` (binky's), and `--skip-test-db`
//!   leaves out the `test` database and the grants that let any account into `test_%`.
//!   The file holds the password's hash only (never the password), is mode 0600 and is
//!   removed right after.
//! - The server listens on 127.0.0.1 only (`--bind-address`, `--skip-name-resolve`), plus a
//!   Unix socket `mysqld.sock` in the data directory (mode 0700; in the temp dir when that
//!   path is too long for a socket). `--no-defaults`: no `my.cnf` of the machine applies.
//! - The pid returned is `mariadbd`'s own (it does not fork): binky adopts it by pid and
//!   start time and stops it with SIGTERM (a clean shutdown) to its process group.
//! - `start` returns once an authenticated connection works (60 s at most); a server that
//!   exits or refuses the password meanwhile is stopped and the error quotes its log.
//!
//! # Settings
//! `--character-set-server=utf8mb4` (MariaDB 10.11's compiled-in default is latin1) and
//! `--innodb-flush-log-at-trx-commit=2`: a development server loses at most the last second
//! of commits if the *machine* crashes (not if the server does), and writes much faster.
//!
//! # Running as root
//! `mariadbd` refuses to run as root. When binky's effective uid is 0, the install and the
//! server run as the `mysql` system user (uid and gid set in the spawned process itself, so
//! the recorded pid is the server's), and, as for PostgreSQL ([`super::postgres`]), the data
//! lives under [`ROOT_DATA_BASE`]`/<random>/data` (owned by `mysql`, its parents root's and
//! 0711) with `ctx.data_dir` a symlink to it, because the binky home is 0700. Data whose
//! symlink is gone or points elsewhere is garbage: each start as root removes such
//! directories older than ten minutes whose server is not running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::host::{self, Attempt, Programs, RunAs, MAX_SOCKET_PATH};
use super::{ServerError, StartCtx, Started};

/// Where the data of a root-run managed server lives (see the module doc).
pub const ROOT_DATA_BASE: &str = "/var/lib/binky/mysql";

/// How long `mariadb-install-db` may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(180);

/// What [`host`] needs to know about MariaDB.
pub(super) const SERVER: host::Server = host::Server {
    kind: super::Kind::Mysql.as_str(),
    product: "MariaDB",
    package: "mariadb-server",
    user: "mysql",
    no_user: "a `mysql` system user to run MariaDB as (binky runs as root, and mariadbd \
              refuses to; `useradd --system --home-dir /nonexistent mysql` makes one, or \
              run binky as a normal user)",
    root_data_base: ROOT_DATA_BASE,
    // Named by `--pid-file` (see `spawn`).
    pid_file: "mariadbd.pid",
    installed,
    program: "mariadbd",
    ready_timeout: Duration::from_secs(60),
    stop_within: Duration::from_secs(10),
};

/// Start (installing on first use) the managed MariaDB server.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let bins = binaries().ok_or_else(|| ServerError::Missing {
        what: "MariaDB (mariadbd, mariadb-install-db)".into(),
        package: SERVER.package.into(),
    })?;
    let run_as = SERVER.run_as()?;
    let data = SERVER.data_dir(ctx, run_as.as_ref())?;
    let opts = connect_opts(ctx);
    SERVER
        .start(&bins, &data, ctx, run_as.as_ref(), admin_url(ctx), || {
            attempt(opts.clone(), ctx)
        })
        .await
}

/// `mysql://root:<password>@127.0.0.1:<port>`.
pub(super) fn admin_url(ctx: &StartCtx) -> String {
    format!(
        "mysql://root:{}@127.0.0.1:{}",
        binky_controllers::url::percent_encode(&ctx.password),
        ctx.port
    )
}

/// The `mariadbd` binky would run a managed server with, if the machine has one.
pub fn find_binary() -> Option<PathBuf> {
    binaries().map(|b| b.server)
}

/// The MariaDB programs.
struct Binaries {
    server: PathBuf,
    install_db: PathBuf,
}

/// The installers' folders first ([`binky_platform::install::server_dirs`]: Debian's
/// `/usr/sbin` and `/usr/bin`, a normal user's `PATH` often lacking the first; Windows'
/// `MariaDB <version>\bin`), then `PATH`.
fn binaries() -> Option<Binaries> {
    let dirs = binky_platform::install::server_dirs(binky_platform::install::Server::MariaDb, None);
    let find = |names: &[&str]| {
        names.iter().find_map(|n| {
            dirs.iter()
                .find_map(|d| binky_platform::install::program_in(d, n))
                .or_else(|| host::on_path(n))
        })
    };
    Some(Binaries {
        server: find(&["mariadbd", "mysqld"])?,
        install_db: find(&["mariadb-install-db", "mysql_install_db"])?,
    })
}

/// A whole data directory: the install made its `mysql` schema (it is renamed into place
/// only when it finished).
fn installed(data: &Path) -> bool {
    data.join("mysql").is_dir()
}

/// `'text'` for the install's SQL (`\` and `'` escaped).
fn sql_literal(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The SQL the install runs after its own (bootstrap mode: grant tables by hand). It holds
/// the password's `mysql_native_password` hash, not the password.
fn install_sql(password: &str) -> String {
    format!(
        "DELETE FROM mysql.global_priv WHERE User = '';\n\
         DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN ('localhost', '127.0.0.1');\n\
         DELETE FROM mysql.proxies_priv WHERE Host NOT IN ('localhost', '127.0.0.1');\n\
         UPDATE mysql.global_priv SET Priv = JSON_SET(Priv, '$.plugin', 'mysql_native_password', \
         '$.authentication_string', {}) WHERE User = 'root';\n",
        sql_literal(&crate::adapters::mysql::native_password_hash(password))
    )
}

impl Programs for Binaries {
    /// `mariadb-install-db` into `<data>.init`, renamed to `data` when it succeeded.
    async fn initialise(
        &self,
        data: &Path,
        ctx: &StartCtx,
        user: Option<&RunAs>,
    ) -> Result<(), ServerError> {
        let staging = SERVER.staging(
            data,
            user,
            "is not a MariaDB data directory (no `mysql` schema in it); move it away and binky \
             installs a new one",
            "install",
        )?;
        let sql_file = staging.parent.join(".install-db.sql");
        let _remove = SERVER.private_file(
            sql_file.clone(),
            install_sql(&ctx.password).as_bytes(),
            user,
        )?;
        let mut cmd = tokio::process::Command::new(&self.install_db);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", staging.dir.display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ])
            .arg(format!("--extra-file={}", sql_file.display()));
        if let Some(server_dir) = self.server.parent() {
            // The install runs `mariadbd --bootstrap`: the same one binky starts.
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![server_dir.to_path_buf()];
            dirs.extend(std::env::split_paths(&path));
            if let Ok(joined) = std::env::join_paths(dirs) {
                cmd.env("PATH", joined);
            }
        }
        SERVER
            .initialise(
                cmd,
                "mariadb-install-db",
                INSTALL_TIMEOUT,
                staging,
                ctx,
                user,
            )
            .await
    }

    /// `mariadbd` on `data`.
    fn server(&self, data: &Path, ctx: &StartCtx) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.server);
        // `--no-defaults` must come first.
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={}", ctx.port))
            .arg(format!("--socket={}", socket_path(data).display()))
            .arg(format!(
                "--pid-file={}",
                data.join(SERVER.pid_file).display()
            ))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--character-set-server=utf8mb4",
                "--innodb-flush-log-at-trx-commit=2",
            ]);
        cmd
    }
}

/// The server's Unix socket: in the data directory, else (too long a path for a socket) in
/// the temp dir under a name derived from the data directory.
fn socket_path(data: &Path) -> PathBuf {
    let inside = data.join("mysqld.sock");
    if inside.as_os_str().len() <= MAX_SOCKET_PATH {
        return inside;
    }
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(data.as_os_str().as_encoded_bytes());
    let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    std::env::temp_dir().join(format!("binky-mysqld-{hash}.sock"))
}

/// How binky's admin connects.
fn connect_opts(ctx: &StartCtx) -> mysql_async::OptsBuilder {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(ctx.port)
        .user(Some("root"))
        .pass(Some(ctx.password.clone()))
        .prefer_socket(false)
}

/// One try at an authenticated connection; the server's version (`10.11.14-MariaDB`) when
/// it works.
async fn attempt(opts: mysql_async::OptsBuilder, ctx: &StartCtx) -> Attempt {
    match tokio::time::timeout(Duration::from_secs(3), mysql_async::Conn::new(opts)).await {
        Ok(Ok(mut conn)) => {
            let version = conn.query_first::<String, _>("SELECT VERSION()").await;
            let _ = conn.disconnect().await;
            Attempt::Answered(match version {
                Ok(v) => Ok(short_version(&v.unwrap_or_default())),
                Err(e) => Err(format!("it answered, but `SELECT VERSION()` failed: {e}")),
            })
        }
        Ok(Err(mysql_async::Error::Server(e))) if e.code == 1045 => {
            Attempt::Answered(Err(format!(
                "it refuses binky's admin password for `root` (the data directory {} was \
                 installed with another one; move it away to start afresh)",
                ctx.data_dir.display()
            )))
        }
        // Refused while it starts: wait.
        Ok(Err(e)) => Attempt::NotYet(e.to_string()),
        Err(_) => Attempt::NotYet("no answer within 3 s".to_owned()),
    }
}

/// `10.11.14-MariaDB-0+deb12u2` → `10.11.14-MariaDB`; `8.0.36` stays.
fn short_version(full: &str) -> String {
    let mut parts = full.split('-');
    let first = parts.next().unwrap_or(full);
    match parts.next() {
        Some(second) if second.eq_ignore_ascii_case("mariadb") => format!("{first}-{second}"),
        _ => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_url_encodes_the_password() {
        let ctx = StartCtx {
            data_dir: PathBuf::from("/x"),
            port: 3999,
            password: "ab/c@d".into(),
            log: PathBuf::from("/x.log"),
        };
        assert_eq!(admin_url(&ctx), "mysql://root:ab%2Fc%40d@127.0.0.1:3999");
    }

    #[test]
    fn the_install_sql_holds_the_passwords_hash_not_the_password() {
        let sql = install_sql("pw-x");
        assert!(
            sql.contains("'*59E479B0285D34ED6888EA8E73D8B0F3D09D70E4'"),
            "{sql}"
        );
        assert!(!sql.contains("pw-x"), "{sql}");
        assert!(sql.contains("WHERE User = ''"), "{sql}");
        assert_eq!(sql_literal(r"it's\x"), r"'it\'s\\x'");
    }

    #[test]
    fn versions_are_shortened() {
        assert_eq!(
            short_version("10.11.14-MariaDB-0+deb12u2"),
            "10.11.14-MariaDB"
        );
        assert_eq!(short_version("8.0.36"), "8.0.36");
        assert_eq!(short_version("8.0.36-28"), "8.0.36");
    }

    #[test]
    fn long_data_paths_get_a_socket_in_the_temp_dir() {
        assert_eq!(
            socket_path(Path::new("/var/lib/binky/mysql/x/data")),
            PathBuf::from("/var/lib/binky/mysql/x/data/mysqld.sock")
        );
        let long = PathBuf::from(format!("/home/{}/data", "d".repeat(120)));
        let s = socket_path(&long);
        assert!(s.starts_with(std::env::temp_dir()), "{}", s.display());
        assert!(s.as_os_str().len() <= MAX_SOCKET_PATH);
        assert_eq!(s, socket_path(&long));
    }
}
