//! The managed PostgreSQL server: `initdb` on first start, then `postgres` on 127.0.0.1,
//! detached in its own process group, with a generated superuser password.
//!
//! # Guarantees
//! - The binaries are Debian's newest `/usr/lib/postgresql/<major>/bin` (the data
//!   directory's own major version when it has one, so an upgrade of the package does not
//!   strand the data; on Windows the installer's `PostgreSQL\<major>\bin` alike), else
//!   `initdb` and `postgres` on `PATH`; without them the error names the `postgresql`
//!   package (on Windows, PostgreSQL's installer).
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
use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::host::{self, Attempt, Programs, RunAs, MAX_SOCKET_PATH};
use super::{ServerError, StartCtx, Started};

/// Where the data of a root-run managed server lives (see the module doc).
pub const ROOT_DATA_BASE: &str = "/var/lib/binky/postgres";

/// How long `initdb` may take.
const INITDB_TIMEOUT: Duration = Duration::from_secs(120);

/// What [`host`] needs to know about PostgreSQL.
pub(super) const SERVER: host::Server = host::Server {
    kind: super::Kind::Postgres.as_str(),
    product: "PostgreSQL",
    package: "postgresql",
    user: "postgres",
    no_user: "a `postgres` system user to run PostgreSQL as (binky runs as root, and \
              PostgreSQL refuses to; `useradd --system --home-dir /var/lib/postgresql \
              postgres` makes one, or run binky as a normal user)",
    root_data_base: ROOT_DATA_BASE,
    pid_file: "postmaster.pid",
    installed,
    program: "postgres",
    ready_timeout: Duration::from_secs(30),
    stop_within: Duration::from_secs(5),
};

/// Start (initialising on first use) the managed postgres server.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let run_as = SERVER.run_as()?;
    let data = SERVER.data_dir(ctx, run_as.as_ref())?;
    let bins = binaries(installed_major(&data).as_deref()).ok_or_else(|| ServerError::Missing {
        what: "PostgreSQL (initdb, postgres)".into(),
        package: SERVER.package.into(),
    })?;
    let config = connect_config(ctx);
    SERVER
        .start(&bins, &data, ctx, run_as.as_ref(), admin_url(ctx), || {
            attempt(&config, ctx)
        })
        .await
}

/// `postgresql://postgres:<password>@127.0.0.1:<port>/postgres`: the scheme every client
/// takes (SQLAlchemy refuses `postgres://`), which the slices' URLs keep.
pub(super) fn admin_url(ctx: &StartCtx) -> String {
    format!(
        "postgresql://postgres:{}@127.0.0.1:{}/postgres",
        binky_controllers::url::percent_encode(&ctx.password),
        ctx.port
    )
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

/// The installers' folders ([`binky_platform::install::server_dirs`]: Debian's
/// `/usr/lib/postgresql/<major>/bin`, Windows' `PostgreSQL\<major>\bin`; `want`, else the
/// highest), else `PATH`.
fn binaries(want: Option<&str>) -> Option<Binaries> {
    let in_dir = |dir: &Path| {
        Some(Binaries {
            initdb: binky_platform::install::program_in(dir, "initdb")?,
            postgres: binky_platform::install::program_in(dir, "postgres")?,
        })
    };
    if let Some(b) =
        binky_platform::install::server_dirs(binky_platform::install::Server::Postgres, want)
            .iter()
            .find_map(|dir| in_dir(dir))
    {
        return Some(b);
    }
    // On PATH: take `postgres` from initdb's own directory when it is there (a symlink to
    // another installation's initdb must not be paired with a different postgres).
    let initdb = host::on_path("initdb")?;
    let real_dir = std::fs::canonicalize(&initdb)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    real_dir.as_deref().and_then(in_dir).or_else(|| {
        Some(Binaries {
            initdb,
            postgres: host::on_path("postgres")?,
        })
    })
}

/// The major version that initialised `data` (`PG_VERSION`), if it was.
fn installed_major(data: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data.join("PG_VERSION")).ok()?;
    Some(text.trim().to_owned()).filter(|v| !v.is_empty())
}

/// A whole data directory: `initdb` wrote `PG_VERSION` (it is renamed into place only when
/// it finished).
fn installed(data: &Path) -> bool {
    data.join("PG_VERSION").is_file()
}

impl Programs for Binaries {
    /// `initdb` into `<data>.init`, renamed to `data` when it succeeded.
    async fn initialise(
        &self,
        data: &Path,
        ctx: &StartCtx,
        user: Option<&RunAs>,
    ) -> Result<(), ServerError> {
        let staging = SERVER.staging(
            data,
            user,
            "is not a PostgreSQL data directory (no PG_VERSION); move it away and binky \
             initialises a new one",
            "initdb",
        )?;
        let pwfile = staging.parent.join(".initdb-password");
        let _remove = SERVER.private_file(
            pwfile.clone(),
            format!("{}\n", ctx.password).as_bytes(),
            user,
        )?;
        let mut cmd = tokio::process::Command::new(&self.initdb);
        cmd.arg("-D")
            .arg(&staging.dir)
            .args([
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .arg(format!("--pwfile={}", pwfile.display()));
        SERVER
            .initialise(cmd, "initdb", INITDB_TIMEOUT, staging, ctx, user)
            .await
    }

    /// The postmaster on `data`.
    fn server(&self, data: &Path, ctx: &StartCtx) -> std::process::Command {
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
        let mut cmd = std::process::Command::new(&self.postgres);
        cmd.arg("-D")
            .arg(data)
            .arg("-p")
            .arg(ctx.port.to_string())
            .args(["-c", "listen_addresses=127.0.0.1", "-k"])
            .arg(socket_dir);
        cmd
    }
}

/// How binky's admin connects.
fn connect_config(ctx: &StartCtx) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(ctx.port)
        .user("postgres")
        .password(ctx.password.as_bytes())
        .dbname("postgres")
        .application_name("binky")
        .connect_timeout(Duration::from_secs(2));
    config
}

/// One try at an authenticated connection; when it works, [`prepare`] the server.
async fn attempt(config: &tokio_postgres::Config, ctx: &StartCtx) -> Attempt {
    match tokio::time::timeout(
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
            Attempt::Answered(result.map_err(|e| {
                let said = e
                    .as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.message().to_owned());
                format!("it answered, but preparing it failed: {said}")
            }))
        }
        Ok(Err(e)) => {
            let auth = [
                SqlState::INVALID_PASSWORD,
                SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            ];
            if e.code().is_some_and(|c| auth.contains(c)) {
                return Attempt::Answered(Err(format!(
                    "it refuses binky's admin password for `postgres` (the data \
                     directory {} was initialised with another one; move it away to \
                     start afresh)",
                    ctx.data_dir.display()
                )));
            }
            // Refused while it binds, "the database system is starting up": wait.
            Attempt::NotYet(
                e.as_db_error()
                    .map(|d| d.message().to_owned())
                    .unwrap_or_else(|| {
                        std::error::Error::source(&e)
                            .map_or_else(|| e.to_string(), |s| format!("{e}: {s}"))
                    }),
            )
        }
        Err(_) => Attempt::NotYet("no answer within 3 s".to_owned()),
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
            "postgresql://postgres:ab%2Fc%40d@127.0.0.1:5999/postgres"
        );
    }
}
