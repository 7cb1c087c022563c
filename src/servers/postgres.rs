//! The managed PostgreSQL server: `initdb` on first start, then `postgres` on 127.0.0.1,
//! detached in its own process group, with a generated superuser password.
//!
//! # Guarantees
//! - The binaries are Debian's newest `/usr/lib/postgresql/<major>/bin` (the data
//!   directory's own major version when it has one, so an upgrade of the package does not
//!   strand the data), else `initdb` and `postgres` on `PATH`; without them the error names
//!   the `postgresql` package.
//! - `initdb` runs into `<data>.init` and is renamed into place when it succeeded, so a
//!   data directory with `PG_VERSION` is always a whole one; an interrupted `initdb` is
//!   simply redone. The password file it reads is mode 0600 and removed right after.
//! - Authentication is `scram-sha-256` for every connection, local and TCP; the server
//!   listens on 127.0.0.1 only, plus a Unix socket inside the data directory (mode 0700,
//!   so only its owner can use it; left out when that path is too long for a socket).
//! - The pid returned is the postmaster's own (never a wrapper's): binky adopts it by pid
//!   and start time and stops it by its process group.
//! - `start` returns once an authenticated connection works (30 s at most); a server that
//!   exits or refuses the password meanwhile is stopped and the error quotes its log.
//! - Every start revokes `PUBLIC`'s `CONNECT` on the `postgres` and `template1` databases:
//!   on binky's own server a slice role can log in to its slice's database only (the
//!   adapter does not do this on servers given by `admin_url`, which are the user's).
//!
//! # Running as root
//! PostgreSQL refuses to run as root. When binky's effective uid is 0, `initdb` and
//! `postgres` run as the `postgres` system user (uid and gid set in the spawned process
//! itself, so there is no `runuser`/`su` parent whose pid binky would record instead). That
//! user cannot reach a data directory inside the binky home, which is mode 0700 and owned
//! by root (and root's default home, `~/.binky`, sits in `/root`, 0700 too). Opening those
//! up (chmod 0711) would let every local user into what else lives there (service logs are
//! not all 0600), so instead the data lives under [`ROOT_DATA_BASE`]`/<random>/data`
//! (owned by `postgres`, 0700, its parents root's and 0711) and `ctx.data_dir` is a
//! symlink to it, so the home still shows where the data is. `<random>/owner` records that
//! symlink's path. Data whose symlink is gone or points elsewhere (its binky home was
//! deleted, and with it the password needed to use the data) is unreachable garbage: each
//! start as root removes such directories older than ten minutes whose server is not
//! running. (A home moved elsewhere by hand loses its managed data that way; it is a
//! development server.) Without a `postgres` user the error says how to get one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use tokio_postgres::error::SqlState;

use super::{spawn_detached, ServerError, StartCtx, Started};
use crate::supervisor::procfs;

/// Where the data of a root-run managed server lives (see the module doc).
pub const ROOT_DATA_BASE: &str = "/var/lib/binky/postgres";

const KIND: &str = "postgres";
/// How long the server may take to accept an authenticated connection.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `initdb` may take.
const INITDB_TIMEOUT: Duration = Duration::from_secs(120);
/// A relocated data directory younger than this is never collected (it may be being made).
const GC_MIN_AGE: Duration = Duration::from_secs(600);
/// A Unix socket path must fit in `sun_path` (108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 100;

/// Start (initialising on first use) the managed postgres server.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let run_as = run_as()?;
    let data = match &run_as {
        Some(_) => relocated_data_dir(ctx)?,
        None => absolute(&ctx.data_dir)?,
    };
    let bins = binaries(installed_major(&data).as_deref()).ok_or_else(|| ServerError::Missing {
        what: "PostgreSQL (initdb, postgres)".into(),
        package: "postgresql".into(),
    })?;
    if !data.join("PG_VERSION").is_file() {
        init(&bins, &data, ctx, run_as.as_ref()).await?;
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
            crate::supervisor::stop_group(pid, Duration::from_secs(5)).await;
            Err(err)
        }
    }
}

/// `postgres://postgres:<password>@127.0.0.1:<port>/postgres`.
fn admin_url(ctx: &StartCtx) -> String {
    let password: String = ctx
        .password
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!(
        "postgres://postgres:{password}@127.0.0.1:{}/postgres",
        ctx.port
    )
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

/// The PostgreSQL programs of one installation.
struct Binaries {
    initdb: PathBuf,
    postgres: PathBuf,
}

/// The `postgres` binary binky would run a managed server with, if the machine has one.
pub fn find_binary() -> Option<PathBuf> {
    binaries(None).map(|b| b.postgres)
}

/// Debian's `/usr/lib/postgresql/<major>/bin` (`want`, else the highest), else `PATH`.
fn binaries(want: Option<&str>) -> Option<Binaries> {
    let in_dir = |dir: &Path| {
        let b = Binaries {
            initdb: dir.join("initdb"),
            postgres: dir.join("postgres"),
        };
        (b.initdb.is_file() && b.postgres.is_file()).then_some(b)
    };
    let root = Path::new("/usr/lib/postgresql");
    let mut majors: Vec<(Vec<u32>, String)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let key = name
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((key, name))
        })
        .collect();
    majors.sort();
    if let Some(b) = want
        .and_then(|w| majors.iter().find(|(_, name)| name == w))
        .and_then(|(_, name)| in_dir(&root.join(name).join("bin")))
    {
        return Some(b);
    }
    if let Some(b) = majors
        .iter()
        .rev()
        .find_map(|(_, name)| in_dir(&root.join(name).join("bin")))
    {
        return Some(b);
    }
    // On PATH: take `postgres` from initdb's own directory when it is there (a symlink to
    // another installation's initdb must not be paired with a different postgres).
    let initdb = on_path("initdb")?;
    let real_dir = std::fs::canonicalize(&initdb)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    real_dir.as_deref().and_then(in_dir).or_else(|| {
        Some(Binaries {
            initdb,
            postgres: on_path("postgres")?,
        })
    })
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The major version that initialised `data` (`PG_VERSION`), if it was.
fn installed_major(data: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data.join("PG_VERSION")).ok()?;
    Some(text.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The user PostgreSQL runs as when binky is root.
struct RunAs {
    uid: u32,
    gid: u32,
}

fn run_as() -> Result<Option<RunAs>, ServerError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("postgres") {
        Ok(Some(user)) if !user.uid.is_root() => Ok(Some(RunAs {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        })),
        Ok(_) => Err(ServerError::Missing {
            what: "a `postgres` system user to run PostgreSQL as (binky runs as root, and \
                   PostgreSQL refuses to; `useradd --system --home-dir /var/lib/postgresql \
                   postgres` makes one, or run binky as a normal user)"
                .into(),
            package: "postgresql".into(),
        }),
        Err(e) => Err(ServerError::Io(format!(
            "cannot look up the `postgres` user: {e}"
        ))),
    }
}

fn chown(path: &Path, user: Option<&RunAs>) -> Result<(), ServerError> {
    match user {
        Some(u) => std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid))
            .map_err(|e| io_error("cannot hand to the postgres user", path, e)),
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
            // Its directory may have been removed by hand: made again here, the data by
            // initdb. A symlink someone pointed elsewhere is used as it is.
            if let Some(entry) = target.parent().filter(|e| e.parent() == Some(base)) {
                make_entry(entry, &link)?;
            }
            return Ok(target);
        }
        if link.join("PG_VERSION").is_file() {
            // Initialised in place (by a non-root binky): keep it there; it must already
            // be usable by its owner, and postgres says so in its log if it is not.
            return Ok(link);
        }
        // Made empty by the caller: replaced by the symlink.
        std::fs::remove_dir(&link).map_err(|e| {
            io_error(
                "expected an empty directory or a PostgreSQL data directory at",
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

/// `<base>/<random>` (root, 0711: the postgres user may pass through, not list) with its
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
        if claimed || postmaster_running(&data) {
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "removed managed postgres data whose binky home is gone")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove orphaned managed postgres data")
            }
        }
    }
}

/// Does `postmaster.pid` name a live process?
fn postmaster_running(data: &Path) -> bool {
    std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()
        .and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
        .and_then(procfs::stat)
        .is_some_and(|s| s.state != 'Z')
}

/// Removes the password file however `init` ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `initdb` into `<data>.init`, renamed to `data` when it succeeded.
async fn init(
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
        // Not ours to remove: PG_VERSION is missing, so it is not a data directory.
        let empty = std::fs::read_dir(data)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            return Err(ServerError::Io(format!(
                "{} exists but is not a PostgreSQL data directory (no PG_VERSION); move it \
                 away and binky initialises a new one",
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
            .map_err(|e| io_error("cannot clear an interrupted initdb in", &staging, e))?;
    }
    std::fs::create_dir(&staging).map_err(|e| io_error("cannot create", &staging, e))?;
    set_mode(&staging, 0o700)?;
    chown(&staging, user)?;

    let pwfile = parent.join(".initdb-password");
    let _remove = RemoveOnDrop(pwfile.clone());
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&pwfile);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&pwfile)
            .map_err(|e| io_error("cannot write", &pwfile, e))?;
        f.write_all(ctx.password.as_bytes())
            .and_then(|()| f.write_all(b"\n"))
            .map_err(|e| io_error("cannot write", &pwfile, e))?;
    }
    chown(&pwfile, user)?;

    let log = open_log(&ctx.log)?;
    let since = log_len(&ctx.log);
    let log_err = log
        .try_clone()
        .map_err(|e| io_error("cannot open", &ctx.log, e))?;
    let mut cmd = tokio::process::Command::new(&bins.initdb);
    cmd.arg("-D")
        .arg(&staging)
        .args([
            "-U",
            "postgres",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        // A directory every user may enter (the caller's may be root's).
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(true);
    if let Some(u) = user {
        cmd.uid(u.uid).gid(u.gid);
    }
    let status = match tokio::time::timeout(INITDB_TIMEOUT, cmd.status()).await {
        Err(_) => {
            return Err(start_error(
                ctx,
                format!("initdb took more than {} s", INITDB_TIMEOUT.as_secs()),
                since,
            ))
        }
        Ok(Err(e)) => {
            return Err(start_error(
                ctx,
                format!("cannot run {}: {e}", bins.initdb.display()),
                since,
            ))
        }
        Ok(Ok(status)) => status,
    };
    if !status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(start_error(ctx, format!("initdb failed ({status})"), since));
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

/// Start the postmaster detached; its pid.
fn spawn(
    bins: &Binaries,
    data: &Path,
    ctx: &StartCtx,
    user: Option<&RunAs>,
) -> Result<u32, ServerError> {
    use std::os::unix::process::CommandExt;
    let socket_dir = if data
        .join(format!(".s.PGSQL.{}", ctx.port))
        .as_os_str()
        .len()
        <= MAX_SOCKET_PATH
    {
        data.as_os_str().to_owned()
    } else {
        // Too long for a Unix socket: TCP only (binky itself always uses TCP).
        std::ffi::OsString::new()
    };
    let mut cmd = std::process::Command::new(&bins.postgres);
    cmd.arg("-D")
        .arg(data)
        .arg("-p")
        .arg(ctx.port.to_string())
        .args(["-c", "listen_addresses=127.0.0.1", "-k"])
        .arg(socket_dir)
        .current_dir("/");
    if let Some(u) = user {
        // Set in the child before exec: the pid we get is the postmaster itself.
        cmd.uid(u.uid).gid(u.gid);
    }
    let since = log_len(&ctx.log);
    spawn_detached(&mut cmd, &ctx.log).map_err(|e| {
        start_error(
            ctx,
            format!("cannot run {}: {e}", bins.postgres.display()),
            since,
        )
    })
}

/// Wait until an authenticated connection works; the server's version. The error is a
/// sentence for [`start_error`].
async fn wait_ready(pid: u32, ctx: &StartCtx) -> Result<String, String> {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(ctx.port)
        .user("postgres")
        .password(ctx.password.as_bytes())
        .dbname("postgres")
        .application_name("binky")
        .connect_timeout(Duration::from_secs(2));
    let until = Instant::now() + READY_TIMEOUT;
    let mut pause = Duration::from_millis(20);
    loop {
        if procfs::stat(pid).is_none_or(|s| s.state == 'Z') {
            return Err("postgres exited".into());
        }
        let last = match tokio::time::timeout(
            Duration::from_secs(3),
            config.connect(tokio_postgres::NoTls),
        )
        .await
        {
            Ok(Ok((client, connection))) => {
                let conn = tokio::spawn(connection);
                let result = prepare(&client).await;
                drop(client);
                let _ = conn.await;
                return result.map_err(|e| {
                    let said = e
                        .as_db_error()
                        .map_or_else(|| e.to_string(), |d| d.message().to_owned());
                    format!("it answered, but preparing it failed: {said}")
                });
            }
            Ok(Err(e)) => {
                let auth = [
                    SqlState::INVALID_PASSWORD,
                    SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
                ];
                if e.code().is_some_and(|c| auth.contains(c)) {
                    return Err(format!(
                        "it refuses binky's admin password for `postgres` (the data \
                         directory {} was initialised with another one; move it away to \
                         start afresh)",
                        ctx.data_dir.display()
                    ));
                }
                // Refused while it binds, "the database system is starting up": wait.
                e.as_db_error()
                    .map(|d| d.message().to_owned())
                    .unwrap_or_else(|| {
                        std::error::Error::source(&e)
                            .map_or_else(|| e.to_string(), |s| format!("{e}: {s}"))
                    })
            }
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

/// Close the shared databases to slice roles; the server's version (`15.14`).
async fn prepare(client: &tokio_postgres::Client) -> Result<String, tokio_postgres::Error> {
    client
        .batch_execute(
            "REVOKE CONNECT ON DATABASE postgres FROM PUBLIC; \
             REVOKE CONNECT ON DATABASE template1 FROM PUBLIC;",
        )
        .await?;
    let row = client
        .query_one("SELECT current_setting('server_version')", &[])
        .await?;
    let full: String = row.try_get(0)?;
    Ok(full.split_whitespace().next().unwrap_or(&full).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_url_encodes_the_password() {
        let ctx = StartCtx {
            data_dir: PathBuf::from("/x"),
            port: 5999,
            password: "ab/c@d".into(),
            log: PathBuf::from("/x.log"),
        };
        assert_eq!(
            admin_url(&ctx),
            "postgres://postgres:ab%2Fc%40d@127.0.0.1:5999/postgres"
        );
    }

    #[test]
    fn garbage_collection_keeps_claimed_and_young_data() {
        let base = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let claimed = base.path().join("a");
        let orphan = base.path().join("b");
        let young = base.path().join("c");
        for d in [&claimed, &orphan, &young] {
            std::fs::create_dir_all(d.join("data")).unwrap();
        }
        let link = home.path().join("data");
        std::os::unix::fs::symlink(claimed.join("data"), &link).unwrap();
        std::fs::write(claimed.join("owner"), link.to_str().unwrap()).unwrap();
        std::fs::write(orphan.join("owner"), "/nonexistent/data").unwrap();
        std::fs::write(young.join("owner"), "/nonexistent/data").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        for d in [&claimed, &orphan] {
            std::fs::File::options()
                .write(true)
                .open(d.join("owner"))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        collect_garbage(base.path());
        assert!(claimed.exists());
        assert!(!orphan.exists());
        assert!(young.exists());
    }
}
