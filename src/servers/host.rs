//! What the managed servers share about running from the machine's own binaries: finding
//! programs on `PATH`, reading their log, and, for the database servers (PostgreSQL,
//! MariaDB), initialising a data directory in one step, starting the server detached,
//! waiting until it answers ([`Server::start`], over the server's [`Programs`]), and, when
//! binky is root, the system user they run as and their data directory outside the binky
//! home. A [`Server`] says what differs between them.
//!
//! # Running as root
//! The database servers refuse to run as root, so when binky is, they run as a system user
//! ([`Server::user`]) and their data lives under [`Server::root_data_base`]`/<random>/data`
//! with `ctx.data_dir` a symlink to it; [`super::postgres`]'s module doc says why, and how
//! data whose binky home is gone is collected.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use binky_controllers::runtime::doubling_delay;

use super::{spawn_detached, ServerError, StartCtx, Started};
use binky_platform::proc as procfs;

/// A relocated data directory younger than this is never collected (it may be being made).
const GC_MIN_AGE: Duration = Duration::from_secs(600);

/// A Unix socket path must fit in `sun_path` (108 bytes with its NUL).
pub(super) const MAX_SOCKET_PATH: usize = 100;

/// What differs between the servers that share this module.
pub(super) struct Server {
    /// Its kind, in errors and log messages (`postgres`, `mysql`).
    pub(super) kind: &'static str,
    /// Its name in errors (`PostgreSQL`, `MariaDB`).
    pub(super) product: &'static str,
    /// The package with its binaries.
    pub(super) package: &'static str,
    /// The system user it runs as when binky is root.
    pub(super) user: &'static str,
    /// What is missing when that user does not exist: why it is needed and how to make it.
    pub(super) no_user: &'static str,
    /// Where its data lives when binky is root (see the module doc).
    pub(super) root_data_base: &'static str,
    /// Its pid file in the data directory (the pid on the first line).
    pub(super) pid_file: &'static str,
    /// Is this a whole data directory (one the initialisation finished)?
    pub(super) installed: fn(&Path) -> bool,
    /// The server program, in the error when it exits while starting.
    pub(super) program: &'static str,
    /// How long it may take to accept an authenticated connection.
    pub(super) ready_timeout: Duration,
    /// How long a server that did not come up has after SIGTERM before SIGKILL.
    pub(super) stop_within: Duration,
}

/// A server's programs, as [`Server::start`] runs them.
pub(super) trait Programs {
    /// Make a whole data directory at `data` (there is none yet).
    async fn initialise(
        &self,
        data: &Path,
        ctx: &StartCtx,
        user: Option<&RunAs>,
    ) -> Result<(), ServerError>;

    /// The command that runs the server on `data`.
    fn server(&self, data: &Path, ctx: &StartCtx) -> std::process::Command;
}

/// One try at an authenticated connection to a starting server.
pub(super) enum Attempt {
    /// It answered: its version, or why it cannot be used (a sentence for the error).
    Answered(Result<String, String>),
    /// No usable answer yet: why (quoted if time runs out).
    NotYet(String),
}

/// The system user a server runs as when binky is root.
pub(super) type RunAs = binky_platform::owner::Account;

/// A staging directory `<data>.init` that the initialisation writes into, renamed to `data`
/// when it succeeded (so a data directory is always a whole one).
pub(super) struct Staging {
    /// The directory holding `data` (and the staging directory).
    pub(super) parent: PathBuf,
    /// `<data>.init`, empty, mode 0700 and the server user's.
    pub(super) dir: PathBuf,
    /// Where it goes.
    data: PathBuf,
}

impl Server {
    /// Start the server on `data` with `programs`: initialise the data directory unless it
    /// is a whole one, spawn the server detached, and wait until `attempt` has its version;
    /// binky's admin reaches it at `admin_url`.
    pub(super) async fn start<F, Fut>(
        &self,
        programs: &impl Programs,
        data: &Path,
        ctx: &StartCtx,
        user: Option<&RunAs>,
        admin_url: String,
        attempt: F,
    ) -> Result<Started, ServerError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Attempt>,
    {
        if !(self.installed)(data) {
            programs.initialise(data, ctx, user).await?;
        }
        let since = log_len(&ctx.log);
        let pid = self.spawn(&mut programs.server(data, ctx), ctx, user)?;
        let version = self.wait_ready(pid, ctx, since, attempt).await?;
        Ok(Started {
            pid,
            admin_url,
            version,
        })
    }

    /// The user to run the server as: none unless binky is root.
    pub(super) fn run_as(&self) -> Result<Option<RunAs>, ServerError> {
        if !binky_platform::user::is_root() {
            return Ok(None);
        }
        match binky_platform::owner::account(self.user) {
            Ok(Some(user)) if !user.is_root() => Ok(Some(user)),
            Ok(_) => Err(ServerError::Missing {
                what: self.no_user.into(),
                package: self.package.into(),
            }),
            Err(e) => Err(ServerError::Io(format!(
                "cannot look up the `{}` user: {e}",
                self.user
            ))),
        }
    }

    /// Hand `path` to the server's user (when there is one).
    pub(super) fn chown(&self, path: &Path, user: Option<&RunAs>) -> Result<(), ServerError> {
        match user {
            Some(u) => binky_platform::owner::chown(path, *u)
                .map_err(|e| io_error(&format!("cannot hand to the {} user", self.user), path, e)),
            None => Ok(()),
        }
    }

    /// The real data directory: `ctx.data_dir` made absolute, or, when the server runs as
    /// `user` (binky is root), the relocated one `ctx.data_dir` is a symlink to (see the
    /// module doc). It may not exist yet.
    pub(super) fn data_dir(
        &self,
        ctx: &StartCtx,
        user: Option<&RunAs>,
    ) -> Result<PathBuf, ServerError> {
        match user {
            Some(_) => self.relocated_data_dir(ctx),
            None => absolute(&ctx.data_dir),
        }
    }

    /// Root only: the data directory outside the binky home, `ctx.data_dir` being a symlink
    /// to it (see the module doc). Returns the real path (which may not exist yet).
    fn relocated_data_dir(&self, ctx: &StartCtx) -> Result<PathBuf, ServerError> {
        let link = absolute(&ctx.data_dir)?;
        let base = Path::new(self.root_data_base);
        self.collect_garbage(base);
        if let Ok(meta) = std::fs::symlink_metadata(&link) {
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&link)
                    .map_err(|e| io_error("cannot read the symlink", &link, e))?;
                // Its directory may have been removed by hand: made again here, the data by
                // the initialisation. A symlink someone pointed elsewhere is used as it is.
                if let Some(entry) = target.parent().filter(|e| e.parent() == Some(base)) {
                    self.make_entry(entry, &link)?;
                }
                return Ok(target);
            }
            if (self.installed)(&link) {
                // Initialised in place (by a non-root binky): kept there; it must already be
                // usable by the server's user, and the server says so in its log if it is not.
                return Ok(link);
            }
            // Made empty by the caller: replaced by the symlink.
            std::fs::remove_dir(&link).map_err(|e| {
                io_error(
                    &format!(
                        "expected an empty directory or a {} data directory at",
                        self.product
                    ),
                    &link,
                    e,
                )
            })?;
        }
        let entry = base.join(
            binky_controllers::adapter::random_secret()
                .map_err(|e| ServerError::Io(e.to_string()))?,
        );
        self.make_entry(&entry, &link)?;
        let target = entry.join("data");
        binky_platform::clone::symlink(&target, &link)
            .map_err(|e| io_error("cannot make the symlink", &link, e))?;
        Ok(target)
    }

    /// `<base>/<random>` (root, 0711: the server's user may pass through, not list) with its
    /// `owner` file; `<base>` and its parent made the same way when they are missing.
    fn make_entry(&self, entry: &Path, link: &Path) -> Result<(), ServerError> {
        let base = Path::new(self.root_data_base);
        for dir in base.parent().into_iter().chain([base, entry]) {
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
    fn collect_garbage(&self, base: &Path) {
        for dir in self.orphans(base) {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "removed managed {} data whose binky home is gone", self.kind)
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot remove orphaned managed {} data", self.kind)
                }
            }
        }
    }

    /// The relocated data directories under `base` whose binky home is gone: no home's
    /// `servers/<kind>/data` link (named in the entry's `owner` file) points at them any
    /// more, no server runs on them, and they are older than [`GC_MIN_AGE`] (a younger one
    /// may be being made).
    pub(super) fn orphans(&self, base: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(base) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let dir = entry.path();
            if !dir.is_dir() {
                continue;
            }
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
            if claimed || self.running(&data) {
                continue;
            }
            out.push(dir);
        }
        out
    }

    /// Does the pid file in `data` name a live process?
    fn running(&self, data: &Path) -> bool {
        live_pid_in(data, self.pid_file).is_some()
    }

    /// The error for a server that did not come up, with the end of what it logged since
    /// the log was `since` bytes long.
    pub(super) fn start_error(&self, ctx: &StartCtx, detail: String, since: u64) -> ServerError {
        let tail = log_tail(&ctx.log, since, 5);
        ServerError::Start {
            kind: self.kind,
            detail: if tail.is_empty() {
                detail
            } else {
                format!("{detail}; its log ends: {tail}")
            },
            log: ctx.log.display().to_string(),
        }
    }

    /// An empty `<data>.init` for the initialisation of `data` (an interrupted one's is
    /// cleared). `data` itself must be missing or empty; else the error is `data`
    /// `exists but {not_data}`. `step` names the initialisation in the error when the
    /// interrupted one cannot be cleared.
    pub(super) fn staging(
        &self,
        data: &Path,
        user: Option<&RunAs>,
        not_data: &str,
        step: &str,
    ) -> Result<Staging, ServerError> {
        let (Some(parent), Some(name)) = (data.parent(), data.file_name()) else {
            return Err(ServerError::Io(format!(
                "{} cannot be a data directory",
                data.display()
            )));
        };
        std::fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
        if data.exists() {
            // Not ours to remove: it is not a (whole) data directory.
            let empty = std::fs::read_dir(data)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if !empty {
                return Err(ServerError::Io(format!(
                    "{} exists but {not_data}",
                    data.display()
                )));
            }
            std::fs::remove_dir(data).map_err(|e| io_error("cannot remove", data, e))?;
        }
        let mut staging = name.to_owned();
        staging.push(".init");
        let staging = parent.join(staging);
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| {
                io_error(
                    &format!("cannot clear an interrupted {step} in"),
                    &staging,
                    e,
                )
            })?;
        }
        std::fs::create_dir(&staging).map_err(|e| io_error("cannot create", &staging, e))?;
        set_mode(&staging, 0o700)?;
        self.chown(&staging, user)?;
        Ok(Staging {
            parent: parent.to_path_buf(),
            dir: staging,
            data: data.to_path_buf(),
        })
    }

    /// A new file at `path` holding `text`, mode 0600 and the server user's; it is removed
    /// when the returned guard drops (and right away if it cannot be made whole).
    pub(super) fn private_file(
        &self,
        path: PathBuf,
        text: &[u8],
        user: Option<&RunAs>,
    ) -> Result<RemoveOnDrop, ServerError> {
        use std::io::Write;
        let _ = std::fs::remove_file(&path);
        let guard = RemoveOnDrop(path);
        let path = &guard.0;
        let mut f = binky_platform::fs::with_mode(
            std::fs::OpenOptions::new().write(true).create_new(true),
            0o600,
        )
        .open(path)
        .map_err(|e| io_error("cannot write", path, e))?;
        f.write_all(text)
            .map_err(|e| io_error("cannot write", path, e))?;
        self.chown(path, user)?;
        Ok(guard)
    }

    /// Run the initialisation `cmd` (named `step` in errors; it writes into `staging.dir`)
    /// as `user`, its output appended to the log, for `timeout` at most; then rename the
    /// staging directory into place, or remove it when the initialisation failed or left
    /// no whole data directory.
    pub(super) async fn initialise(
        &self,
        mut cmd: tokio::process::Command,
        step: &str,
        timeout: Duration,
        staging: Staging,
        ctx: &StartCtx,
        user: Option<&RunAs>,
    ) -> Result<(), ServerError> {
        let program = PathBuf::from(cmd.as_std().get_program());
        let log = open_log(&ctx.log)?;
        let since = log_len(&ctx.log);
        let log_err = log
            .try_clone()
            .map_err(|e| io_error("cannot open", &ctx.log, e))?;
        // A directory every user may enter (the caller's may be root's).
        cmd.current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .kill_on_drop(true);
        if let Some(u) = user {
            binky_platform::owner::run_as_async(&mut cmd, *u);
        }
        let status = match tokio::time::timeout(timeout, cmd.status()).await {
            Err(_) => {
                let _ = std::fs::remove_dir_all(&staging.dir);
                return Err(self.start_error(
                    ctx,
                    format!("{step} took more than {} s", timeout.as_secs()),
                    since,
                ));
            }
            Ok(Err(e)) => {
                return Err(self.start_error(
                    ctx,
                    format!("cannot run {}: {e}", program.display()),
                    since,
                ))
            }
            Ok(Ok(status)) => status,
        };
        if !status.success() || !(self.installed)(&staging.dir) {
            let _ = std::fs::remove_dir_all(&staging.dir);
            return Err(self.start_error(ctx, format!("{step} failed ({status})"), since));
        }
        std::fs::rename(&staging.dir, &staging.data)
            .map_err(|e| io_error("cannot move into place", &staging.data, e))
    }

    /// Wait until `attempt` gets an answer from the server process `pid` (tried again with a
    /// growing pause while that process lives, for [`Server::ready_timeout`] at most); the
    /// server's version. When it does not come up, it is stopped and the error quotes what
    /// it logged since the log was `since` bytes long.
    async fn wait_ready<F, Fut>(
        &self,
        pid: u32,
        ctx: &StartCtx,
        since: u64,
        mut attempt: F,
    ) -> Result<String, ServerError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Attempt>,
    {
        let until = Instant::now() + self.ready_timeout;
        let mut tries = 0;
        let detail = loop {
            if procfs::stat(pid).is_none_or(|s| s.state == 'Z') {
                break format!("{} exited", self.program);
            }
            let last = match attempt().await {
                Attempt::Answered(Ok(version)) => return Ok(version),
                Attempt::Answered(Err(detail)) => break detail,
                Attempt::NotYet(last) => last,
            };
            if Instant::now() >= until {
                break format!(
                    "not ready after {} s ({last})",
                    self.ready_timeout.as_secs()
                );
            }
            tries += 1;
            let pause =
                doubling_delay(Duration::from_millis(20), tries, Duration::from_millis(250));
            tokio::time::sleep(pause).await;
        };
        // Read before stopping it: what it said, not its shutdown.
        let err = self.start_error(ctx, detail, since);
        // Never leave a half-started server behind: the next attempt starts afresh.
        crate::supervisor::stop_group(pid, self.stop_within).await;
        Err(err)
    }

    /// Start the server `cmd` detached, in `/` and as `user`; its pid.
    fn spawn(
        &self,
        cmd: &mut std::process::Command,
        ctx: &StartCtx,
        user: Option<&RunAs>,
    ) -> Result<u32, ServerError> {
        // A directory every user may enter (the caller's may be root's).
        cmd.current_dir("/");
        if let Some(u) = user {
            // Set in the child before exec: the pid we get is the server itself.
            binky_platform::owner::run_as(cmd, *u);
        }
        let program = PathBuf::from(cmd.get_program());
        let since = log_len(&ctx.log);
        spawn_detached(cmd, &ctx.log).map_err(|e| {
            self.start_error(ctx, format!("cannot run {}: {e}", program.display()), since)
        })
    }
}

/// Removes a file however the step that needed it ends.
pub(super) struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How long the log is: what a server logs from now on starts there.
pub(super) fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |m| m.len())
}

/// The last `lines` non-blank lines logged after the first `since` bytes, joined by ` | `
/// (empty when there are none).
pub(super) fn log_tail(log: &Path, since: u64, lines: usize) -> String {
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

/// Open `log` for appending, making it and its directory when missing.
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

/// `{what} {path}: {e}`.
fn io_error(what: &str, path: &Path, e: std::io::Error) -> ServerError {
    ServerError::Io(format!("{what} {}: {e}", path.display()))
}

fn absolute(path: &Path) -> Result<PathBuf, ServerError> {
    std::path::absolute(path).map_err(|e| io_error("cannot resolve", path, e))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ServerError> {
    binky_platform::fs::set_mode(path, mode)
        .map(|_| ())
        .map_err(|e| io_error("cannot set the mode of", path, e))
}

/// The program `program` in the first directory of `PATH` that has it (with `.exe` on
/// Windows).
pub(super) fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .find_map(|dir| binky_platform::install::program_in(&dir, program))
}

/// The live (not zombie) process the pid file `file` in `data` names (the pid on its first
/// line, as PostgreSQL, MariaDB and Redis write it).
pub(super) fn live_pid_in(data: &Path, file: &str) -> Option<u32> {
    let pid = std::fs::read_to_string(data.join(file))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse::<u32>()
        .ok()?;
    (procfs::stat(pid)?.state != 'Z').then_some(pid)
}

// Their commands (sh, true) and what they test (root's relocated data) are Unix's.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    // Data is relocated only when binky is root, which only Unix tells apart.
    #[test]
    fn garbage_collection_keeps_claimed_and_young_data() {
        let server = Server {
            kind: "test",
            product: "Test",
            package: "test",
            user: "test",
            no_user: "a `test` user",
            root_data_base: "/nonexistent",
            pid_file: "test.pid",
            installed: |_| false,
            program: "test",
            ready_timeout: Duration::ZERO,
            stop_within: Duration::ZERO,
        };
        let base = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let claimed = base.path().join("a");
        let orphan = base.path().join("b");
        let young = base.path().join("c");
        for d in [&claimed, &orphan, &young] {
            std::fs::create_dir_all(d.join("data")).unwrap();
        }
        let link = home.path().join("data");
        binky_platform::clone::symlink(&claimed.join("data"), &link).unwrap();
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
        server.collect_garbage(base.path());
        assert!(claimed.exists());
        assert!(!orphan.exists());
        assert!(young.exists());
    }
}
