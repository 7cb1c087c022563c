//! The managed redis server: `redis-server` (or `valkey-server`; Memurai on Windows) from
//! PATH or its installer's folder, on 127.0.0.1,
//! with its data, configuration and users under the data directory.
//!
//! # Files (in the data directory, mode 0700)
//! - `redis.conf` (0600): written at every start from the [`StartCtx`]; the server's only
//!   argument, so nothing secret is on its command line (`ps` shows `redis-server
//!   127.0.0.1:PORT`).
//! - `users.acl` (0600): the `default` user, with the admin password as its SHA-256 (never
//!   the text), rewritten at every start from the context's password; and the slices'
//!   users, which the redis adapter saves with `ACL SAVE`. Worlds' URLs therefore keep
//!   working after a restart.
//! - `dump.rdb`: the data.
//!
//! # Persistence
//! A dev cache should survive a restart of the machine or of `binky servers`, but does not
//! need every write on disk: RDB snapshots with Redis' default save points (after an hour
//! with one change, five minutes with 100, a minute with 10000) and one at shutdown
//! (binky stops the server with SIGTERM, which saves). No AOF: it would double the disk
//! writes of a write-heavy cache for durability a dev cache does not need.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{host, spawn_detached, ServerError, StartCtx, Started};
use binky_platform::proc as procfs;

/// How long the server may take to answer an authenticated `PING` (loading a big
/// snapshot takes a while).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The binaries that can serve, in order of preference: Redis, Valkey, and Memurai (the
/// Redis-compatible server for Windows).
const BINARIES: &[&str] = &["redis-server", "valkey-server", "memurai"];

/// The first of [`BINARIES`] in the installers' folders
/// ([`binky_platform::install::server_dirs`]: none on Debian, Memurai's and Redis' under
/// Program Files on Windows), else on `PATH`.
pub fn find_binary() -> Option<PathBuf> {
    let dirs = binky_platform::install::server_dirs(binky_platform::install::Server::Redis, None);
    BINARIES.iter().find_map(|name| {
        dirs.iter()
            .find_map(|d| binky_platform::install::program_in(d, name))
            .or_else(|| host::on_path(name))
    })
}

/// Start the managed redis server on `ctx.port` with `ctx.password` as the `default`
/// user's password, and wait (bounded) until an authenticated `PING` answers.
pub async fn start(ctx: &StartCtx) -> Result<Started, ServerError> {
    let bin = find_binary().ok_or_else(|| ServerError::Missing {
        what: "redis-server".into(),
        package: "redis-server".into(),
    })?;
    let data_dir = std::path::absolute(&ctx.data_dir).map_err(|e| io(&ctx.data_dir, e))?;
    std::fs::create_dir_all(&data_dir).map_err(|e| io(&data_dir, e))?;
    binky_platform::fs::restrict_dir(&data_dir).map_err(|e| io(&data_dir, e))?;
    let acl_file = data_dir.join("users.acl");
    write_acl_file(&acl_file, &ctx.password)?;
    let conf = data_dir.join("redis.conf");
    write_private(&conf, &config(ctx.port, &data_dir, &acl_file))?;

    let mut cmd = std::process::Command::new(&bin);
    cmd.arg(&conf).current_dir(&data_dir);
    let pid = spawn_detached(&mut cmd, &ctx.log).map_err(|e| ServerError::Start {
        kind: super::Kind::Redis.as_str(),
        detail: format!("{}: {e}", bin.display()),
        log: ctx.log.display().to_string(),
    })?;
    let admin_url = admin_url(ctx);
    match wait_ready(pid, &admin_url, ctx).await {
        Ok(version) => Ok(Started {
            pid,
            admin_url,
            version,
        }),
        Err(err) => {
            // Never leave a half-started server behind: nothing records its pid.
            crate::supervisor::stop_group(pid, Duration::from_secs(2)).await;
            Err(err)
        }
    }
}

/// The configuration file's text.
fn config(port: u16, data_dir: &Path, acl_file: &Path) -> String {
    format!(
        "# Written by binky at every start of its managed server; edits are overwritten.\n\
         port {port}\n\
         bind 127.0.0.1\n\
         protected-mode yes\n\
         daemonize no\n\
         logfile \"\"\n\
         dir {dir}\n\
         pidfile {pidfile}\n\
         aclfile {acl}\n\
         # RDB snapshots (Redis' default save points, and at shutdown); no AOF.\n\
         save 3600 1 300 100 60 10000\n\
         dbfilename dump.rdb\n\
         appendonly no\n",
        dir = quote(&data_dir.to_string_lossy()),
        pidfile = quote(&data_dir.join("redis.pid").to_string_lossy()),
        acl = quote(&acl_file.to_string_lossy()),
    )
}

/// A string in redis.conf's double quotes (`\\`, `\"` and `\xHH` escapes).
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Write `users.acl`: the `default` user with `password` (as SHA-256), then the users the
/// file already holds (the slices', kept by `ACL SAVE`).
fn write_acl_file(path: &Path, password: &str) -> Result<(), ServerError> {
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(path, e)),
    };
    let hash: String = Sha256::digest(password.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut text = format!("user default on #{hash} ~* &* +@all\n");
    for line in existing.lines().map(str::trim) {
        if line.starts_with("user ") && !line.starts_with("user default ") {
            text.push_str(line);
            text.push('\n');
        }
    }
    write_private(path, &text)
}

/// Write a file readable by its owner only, through a temporary file and a rename (a crash
/// never leaves half a file).
fn write_private(path: &Path, text: &str) -> Result<(), ServerError> {
    binky_controllers::whole_file::Whole::new()
        .mode(0o600)
        .durable()
        .write(path, text.as_bytes())
        .map_err(|e| io(path, e))
}

fn io(path: &Path, e: std::io::Error) -> ServerError {
    ServerError::Io(format!("{}: {e}", path.display()))
}

/// Wait until the server answers an authenticated `PING`; its version.
/// `redis://default:<password>@127.0.0.1:<port>`: binky's admin is the `default` user.
pub(super) fn admin_url(ctx: &StartCtx) -> String {
    format!(
        "redis://default:{}@127.0.0.1:{}",
        binky_controllers::url::percent_encode(&ctx.password),
        ctx.port
    )
}

async fn wait_ready(pid: u32, admin_url: &str, ctx: &StartCtx) -> Result<String, ServerError> {
    let failed = |detail: String| ServerError::Start {
        kind: super::Kind::Redis.as_str(),
        detail,
        log: ctx.log.display().to_string(),
    };
    let client = redis::Client::open(admin_url).map_err(|e| failed(e.to_string()))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if !matches!(procfs::stat(pid), Some(s) if !matches!(s.state, 'Z' | 'X' | 'x')) {
            return Err(failed(format!("it exited: {}", log_tail(&ctx.log))));
        }
        let last = match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(mut con) => {
                let pong: Result<String, _> = redis::cmd("PING").query_async(&mut con).await;
                match pong {
                    Ok(_) => {
                        let info: String = redis::cmd("INFO")
                            .arg("server")
                            .query_async(&mut con)
                            .await
                            .map_err(|e| failed(format!("INFO server: {e}")))?;
                        return Ok(version_of(&info));
                    }
                    Err(e) => e.to_string(),
                }
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(failed(format!(
                "no authenticated PING within {} s (last: {last})",
                READY_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `7.0.15`, or `valkey 8.0.1` for Valkey (which also reports a compatible
/// `redis_version`).
fn version_of(info: &str) -> String {
    let field = |name: &str| {
        info.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')
                .map(|v| v.trim().to_owned())
        })
    };
    match field("valkey_version") {
        Some(v) => format!("valkey {v}"),
        None => field("redis_version").unwrap_or_default(),
    }
}

/// The last lines of the server's log, for an error message.
fn log_tail(log: &Path) -> String {
    let tail = host::log_tail(log, 0, 3);
    if tail.is_empty() {
        "no output".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_strings_are_quoted_for_redis() {
        assert_eq!(quote("/tmp/a b"), "\"/tmp/a b\"");
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
        let c = config(7000, Path::new("/d"), Path::new("/d/users.acl"));
        assert!(c.contains("port 7000\n") && c.contains("aclfile \"/d/users.acl\"\n"));
        assert!(!c.contains("requirepass"));
    }

    #[test]
    fn the_acl_file_keeps_slice_users_and_renews_the_default_user() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("users.acl");
        std::fs::write(
            &path,
            "user default on #old ~* &* +@all\nuser bk_a on #x ~bk_a:* -@all +get\n",
        )
        .expect("write");
        write_acl_file(&path, "pw").expect("rewrite");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("user default on #"), "{text}");
        assert!(!text.contains("#old") && !text.contains(" pw"), "{text}");
        assert!(
            text.contains("user bk_a on #x ~bk_a:* -@all +get\n"),
            "{text}"
        );
        let mode = binky_platform::fs::mode(&std::fs::metadata(&path).expect("meta"));
        // Windows has no modes: the file takes its folder's access list.
        assert_eq!(mode, cfg!(unix).then_some(0o600));
    }

    #[test]
    fn valkey_reports_its_own_version() {
        assert_eq!(version_of("redis_version:7.0.15\r\n"), "7.0.15");
        assert_eq!(
            version_of("redis_version:7.2.4\r\nvalkey_version:8.0.1\r\n"),
            "valkey 8.0.1"
        );
    }
}
