//! The managed MariaDB server (kind `mysql`, for the `mysql`, `mariadb` and `percona`
//! adapters): `mariadb-install-db` on first start, then `mariadbd` on 127.0.0.1, detached in
//! its own process group, with a generated `root` password.
//!
//! # Guarantees
//! - The binaries are `/usr/sbin/mariadbd` (else `mariadbd` or `mysqld` on `PATH`) and
//!   `mariadb-install-db` (else `mysql_install_db`); without them the error names the
//!   `mariadb-server` package.
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
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use mysql_async::prelude::Queryable;

use super::{spawn_detached, ServerError, StartCtx, Started};
use crate::supervisor::procfs;

/// Where the data of a root-run managed server lives (see the module doc).
pub const ROOT_DATA_BASE: &str = "/var/lib/binky/mysql";

const KIND: &str = "mysql";
/// The package with the binaries.
const PACKAGE: &str = "mariadb-server";
/// How long the server may take to accept an authenticated connection.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `mariadb-install-db` may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(180);
/// A relocated data directory younger than this is never collected (it may be being made).
const GC_MIN_AGE: Duration = Duration::from_secs(600);
/// A Unix socket path must fit in `sun_path` (108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 100;
/// The server's pid file, in the data directory.
const PID_FILE: &str = "mariadbd.pid";

/// Start (installing on first use) the managed MariaDB server.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let bins = binaries().ok_or_else(|| ServerError::Missing {
        what: "MariaDB (mariadbd, mariadb-install-db)".into(),
        package: PACKAGE.into(),
    })?;
    let run_as = run_as()?;
    let data = match &run_as {
        Some(_) => relocated_data_dir(ctx)?,
        None => absolute(&ctx.data_dir)?,
    };
    if !installed(&data) {
        install(&bins, &data, ctx, run_as.as_ref()).await?;
    }
    let since = log_len(&ctx.log);
    let pid = spawn(&bins, &data, ctx, run_as.as_ref())?;
    match wait_ready(pid, ctx).await {
        Ok(version) => Ok(Started {
            pid,
            admin_url: admin_url(ctx),
            version,
        }),
        Err(detail) => {
            // Read before stopping it: what it said, not its shutdown.
            let err = start_error(ctx, detail, since);
            // Never leave a half-started server behind: the next attempt starts afresh.
            crate::supervisor::stop_group(pid, Duration::from_secs(10)).await;
            Err(err)
        }
    }
}

/// `mysql://root:<password>@127.0.0.1:<port>`.
fn admin_url(ctx: &StartCtx) -> String {
    format!(
        "mysql://root:{}@127.0.0.1:{}",
        crate::adapters::http::percent_encode(&ctx.password),
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

fn binaries() -> Option<Binaries> {
    // /usr/sbin first: a normal user's PATH often lacks it.
    let find = |names: &[&str], dirs: &[&str]| {
        names.iter().find_map(|n| {
            dirs.iter()
                .map(|d| Path::new(d).join(n))
                .find(|p| is_executable(p))
                .or_else(|| on_path(n))
        })
    };
    Some(Binaries {
        server: find(&["mariadbd", "mysqld"], &["/usr/sbin"])?,
        install_db: find(&["mariadb-install-db", "mysql_install_db"], &["/usr/bin"])?,
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

/// A whole data directory: the install made its `mysql` schema (it is renamed into place
/// only when it finished).
fn installed(data: &Path) -> bool {
    data.join("mysql").is_dir()
}

/// The error for a server that did not come up, with the end of what it logged since the
/// log was `since` bytes long.
fn start_error(ctx: &StartCtx, detail: String, since: u64) -> ServerError {
    let tail = log_tail(&ctx.log, since, 5);
    ServerError::Start {
        kind: KIND,
        detail: if tail.is_empty() {
            detail
        } else {
            format!("{detail}; its log ends: {tail}")
        },
        log: ctx.log.display().to_string(),
    }
}

fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |m| m.len())
}

fn log_tail(log: &Path, since: u64, lines: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        if f.seek(SeekFrom::Start(since)).is_ok() {
            let _ = f.read_to_end(&mut bytes);
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut last: Vec<&str> = text
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(lines)
        .collect();
    last.reverse();
    last.join(" | ")
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> ServerError {
    ServerError::Io(format!("{what} {}: {e}", path.display()))
}

fn absolute(path: &Path) -> Result<PathBuf, ServerError> {
    std::path::absolute(path).map_err(|e| io_error("cannot resolve", path, e))
}

/// The user MariaDB runs as when binky is root.
struct RunAs {
    uid: u32,
    gid: u32,
}

fn run_as() -> Result<Option<RunAs>, ServerError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("mysql") {
        Ok(Some(user)) if !user.uid.is_root() => Ok(Some(RunAs {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        })),
        Ok(_) => Err(ServerError::Missing {
            what: "a `mysql` system user to run MariaDB as (binky runs as root, and mariadbd \
                   refuses to; `useradd --system --home-dir /nonexistent mysql` makes one, or \
                   run binky as a normal user)"
                .into(),
            package: PACKAGE.into(),
        }),
        Err(e) => Err(ServerError::Io(format!(
            "cannot look up the `mysql` user: {e}"
        ))),
    }
}

fn chown(path: &Path, user: Option<&RunAs>) -> Result<(), ServerError> {
    match user {
        Some(u) => std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid))
            .map_err(|e| io_error("cannot hand to the mysql user", path, e)),
        None => Ok(()),
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ServerError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_error("cannot set the mode of", path, e))
}

/// Root only: the data directory outside the binky home, `ctx.data_dir` being a symlink to
/// it (see the module doc). Returns the real path (which may not exist yet).
fn relocated_data_dir(ctx: &StartCtx) -> Result<PathBuf, ServerError> {
    let link = absolute(&ctx.data_dir)?;
    let base = Path::new(ROOT_DATA_BASE);
    collect_garbage(base);
    if let Ok(meta) = std::fs::symlink_metadata(&link) {
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&link)
                .map_err(|e| io_error("cannot read the symlink", &link, e))?;
            // Its directory may have been removed by hand: made again here, the data by the
            // install. A symlink someone pointed elsewhere is used as it is.
            if let Some(entry) = target.parent().filter(|e| e.parent() == Some(base)) {
                make_entry(entry, &link)?;
            }
            return Ok(target);
        }
        if installed(&link) {
            // Installed in place (by a non-root binky): kept there; mariadbd says in its
            // log if the mysql user cannot use it.
            return Ok(link);
        }
        // Made empty by the caller: replaced by the symlink.
        std::fs::remove_dir(&link).map_err(|e| {
            io_error(
                "expected an empty directory or a MariaDB data directory at",
                &link,
                e,
            )
        })?;
    }
    let entry = base.join(binky_controllers::slice::random_secret());
    make_entry(&entry, &link)?;
    let target = entry.join("data");
    std::os::unix::fs::symlink(&target, &link)
        .map_err(|e| io_error("cannot make the symlink", &link, e))?;
    Ok(target)
}

/// `<base>/<random>` (root, 0711: the mysql user may pass through, not list) with its
/// `owner` file.
fn make_entry(entry: &Path, link: &Path) -> Result<(), ServerError> {
    for dir in [
        Path::new("/var/lib/binky"),
        Path::new(ROOT_DATA_BASE),
        entry,
    ] {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(|e| io_error("cannot create", dir, e))?;
            set_mode(dir, 0o711)?;
        }
    }
    let owner = entry.join("owner");
    if !owner.is_file() {
        std::fs::write(&owner, link.as_os_str().as_encoded_bytes())
            .map_err(|e| io_error("cannot write", &owner, e))?;
    }
    Ok(())
}

/// Remove relocated data directories whose binky home is gone (see the module doc).
fn collect_garbage(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let owner = dir.join("owner");
        let young = std::fs::metadata(&owner)
            .or_else(|_| std::fs::metadata(&dir))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_none_or(|age| age < GC_MIN_AGE);
        if young {
            continue;
        }
        let data = dir.join("data");
        let claimed = std::fs::read(&owner)
            .ok()
            .map(|b| PathBuf::from(String::from_utf8_lossy(&b).into_owned()))
            .and_then(|link| std::fs::read_link(link).ok())
            .is_some_and(|target| target == data);
        if claimed || server_running(&data) {
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "removed managed mysql data whose binky home is gone")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove orphaned managed mysql data")
            }
        }
    }
}

/// Does the pid file name a live process?
fn server_running(data: &Path) -> bool {
    std::fs::read_to_string(data.join(PID_FILE))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .and_then(procfs::stat)
        .is_some_and(|s| s.state != 'Z')
}

/// Removes a file however the install ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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

/// `mariadb-install-db` into `<data>.init`, renamed to `data` when it succeeded.
async fn install(
    bins: &Binaries,
    data: &Path,
    ctx: &StartCtx,
    user: Option<&RunAs>,
) -> Result<(), ServerError> {
    let (Some(parent), Some(name)) = (data.parent(), data.file_name()) else {
        return Err(ServerError::Io(format!(
            "{} cannot be a data directory",
            data.display()
        )));
    };
    std::fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
    if data.exists() {
        // Not ours to remove: it has no `mysql` schema, so it is no data directory.
        let empty = std::fs::read_dir(data)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            return Err(ServerError::Io(format!(
                "{} exists but is not a MariaDB data directory (no `mysql` schema in it); \
                 move it away and binky installs a new one",
                data.display()
            )));
        }
        std::fs::remove_dir(data).map_err(|e| io_error("cannot remove", data, e))?;
    }
    let mut staging = name.to_owned();
    staging.push(".init");
    let staging = parent.join(staging);
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .map_err(|e| io_error("cannot clear an interrupted install in", &staging, e))?;
    }
    std::fs::create_dir(&staging).map_err(|e| io_error("cannot create", &staging, e))?;
    set_mode(&staging, 0o700)?;
    chown(&staging, user)?;

    let sql_file = parent.join(".install-db.sql");
    let _remove = RemoveOnDrop(sql_file.clone());
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&sql_file);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&sql_file)
            .map_err(|e| io_error("cannot write", &sql_file, e))?;
        f.write_all(install_sql(&ctx.password).as_bytes())
            .map_err(|e| io_error("cannot write", &sql_file, e))?;
    }
    chown(&sql_file, user)?;

    let log = open_log(&ctx.log)?;
    let since = log_len(&ctx.log);
    let log_err = log
        .try_clone()
        .map_err(|e| io_error("cannot open", &ctx.log, e))?;
    let mut cmd = tokio::process::Command::new(&bins.install_db);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", staging.display()))
        .args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ])
        .arg(format!("--extra-file={}", sql_file.display()))
        // A directory every user may enter (the caller's may be root's).
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(true);
    if let Some(server_dir) = bins.server.parent() {
        // The install runs `mariadbd --bootstrap`: the same one binky starts.
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![server_dir.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
    }
    if let Some(u) = user {
        cmd.uid(u.uid).gid(u.gid);
    }
    let status = match tokio::time::timeout(INSTALL_TIMEOUT, cmd.status()).await {
        Err(_) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(start_error(
                ctx,
                format!(
                    "mariadb-install-db took more than {} s",
                    INSTALL_TIMEOUT.as_secs()
                ),
                since,
            ));
        }
        Ok(Err(e)) => {
            return Err(start_error(
                ctx,
                format!("cannot run {}: {e}", bins.install_db.display()),
                since,
            ))
        }
        Ok(Ok(status)) => status,
    };
    if !status.success() || !installed(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(start_error(
            ctx,
            format!("mariadb-install-db failed ({status})"),
            since,
        ));
    }
    std::fs::rename(&staging, data).map_err(|e| io_error("cannot move into place", data, e))
}

fn open_log(log: &Path) -> Result<std::fs::File, ServerError> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_error("cannot create", dir, e))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| io_error("cannot open", log, e))
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

/// Start `mariadbd` detached; its pid.
fn spawn(
    bins: &Binaries,
    data: &Path,
    ctx: &StartCtx,
    user: Option<&RunAs>,
) -> Result<u32, ServerError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(&bins.server);
    // `--no-defaults` must come first.
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--port={}", ctx.port))
        .arg(format!("--socket={}", socket_path(data).display()))
        .arg(format!("--pid-file={}", data.join(PID_FILE).display()))
        .args([
            "--bind-address=127.0.0.1",
            "--skip-name-resolve",
            "--character-set-server=utf8mb4",
            "--innodb-flush-log-at-trx-commit=2",
        ])
        .current_dir("/");
    if let Some(u) = user {
        // Set in the child before exec: the pid we get is mariadbd itself.
        cmd.uid(u.uid).gid(u.gid);
    }
    let since = log_len(&ctx.log);
    spawn_detached(&mut cmd, &ctx.log).map_err(|e| {
        start_error(
            ctx,
            format!("cannot run {}: {e}", bins.server.display()),
            since,
        )
    })
}

/// Wait until an authenticated connection works; the server's version (`10.11.14-MariaDB`).
/// The error is a sentence for [`start_error`].
async fn wait_ready(pid: u32, ctx: &StartCtx) -> Result<String, String> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(ctx.port)
        .user(Some("root"))
        .pass(Some(ctx.password.clone()))
        .prefer_socket(false);
    let until = Instant::now() + READY_TIMEOUT;
    let mut pause = Duration::from_millis(20);
    loop {
        if procfs::stat(pid).is_none_or(|s| s.state == 'Z') {
            return Err("mariadbd exited".into());
        }
        let last = match tokio::time::timeout(
            Duration::from_secs(3),
            mysql_async::Conn::new(opts.clone()),
        )
        .await
        {
            Ok(Ok(mut conn)) => {
                let version = conn.query_first::<String, _>("SELECT VERSION()").await;
                let _ = conn.disconnect().await;
                return match version {
                    Ok(v) => Ok(short_version(&v.unwrap_or_default())),
                    Err(e) => Err(format!("it answered, but `SELECT VERSION()` failed: {e}")),
                };
            }
            Ok(Err(mysql_async::Error::Server(e))) if e.code == 1045 => {
                return Err(format!(
                    "it refuses binky's admin password for `root` (the data directory {} was \
                     installed with another one; move it away to start afresh)",
                    ctx.data_dir.display()
                ));
            }
            // Refused while it starts: wait.
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 3 s".to_owned(),
        };
        if Instant::now() >= until {
            return Err(format!(
                "not ready after {} s ({last})",
                READY_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
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
