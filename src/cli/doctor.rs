//! `binky doctor`: is this machine ready to run worlds? Each check prints ok, warn or fail
//! with the fix; any fail exits 1.

use std::time::Duration;

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;
use crate::daemon::client;
use crate::servers::Kind;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(serde::Serialize)]
struct Check {
    check: &'static str,
    level: Level,
    detail: String,
    fix: String,
}

fn check(
    check: &'static str,
    level: Level,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        check,
        level,
        detail: detail.into(),
        fix: fix.into(),
    }
}

/// How the worlds' worktrees got their dependency directories: linked or cloned (no data
/// copied), or copied — and, when copied for want of one filesystem, the fix.
fn bootstrap_check(ctx: &Ctx) -> Check {
    let mut by_how: std::collections::BTreeMap<String, usize> = Default::default();
    let mut far: Vec<String> = Vec::new();
    for w in ctx.store.read(store::worlds).unwrap_or_default() {
        for b in ctx
            .store
            .read(|c| store::bootstrap_paths(c, w.id))
            .unwrap_or_default()
        {
            let how = b.how.clone().unwrap_or_else(|| b.state.as_str().to_owned());
            *by_how
                .entry(format!("{how} ({})", b.mode.as_str()))
                .or_default() += 1;
            if b.message.contains("another filesystem") {
                far.push(format!("{}:{}", w.name, b.path));
            }
        }
    }
    if by_how.is_empty() {
        return check(
            "worktree paths",
            Level::Ok,
            "no world has brought a path yet",
            "",
        );
    }
    let summary: Vec<String> = by_how.iter().map(|(k, n)| format!("{n} {k}")).collect();
    if far.is_empty() {
        check("worktree paths", Level::Ok, summary.join(", "), "")
    } else {
        check(
            "worktree paths",
            Level::Warn,
            format!(
                "{}; copied because the worktree is on another filesystem than its repository: {}",
                summary.join(", "),
                far.join(", ")
            ),
            "put worktrees on the repository's filesystem (unset BINKY_WORKTREE_ROOT, or point it there) so their dependency directories are linked, not copied",
        )
    }
}

/// The inotify watch limit, and how many this user has in use.
fn inotify() -> Option<(u64, u64)> {
    Some((
        binky_platform::fs::watch_limit()?,
        binky_platform::fs::watches_in_use()?,
    ))
}

/// `binky doctor`.
pub async fn run(json: bool) -> Result<i32, Failure> {
    let mut out = vec![git_check()];
    let ctx = match Ctx::open() {
        Ok(ctx) => {
            out.push(store_check(&ctx));
            Some(ctx)
        }
        Err(f) => {
            out.push(check(
                "state db",
                Level::Fail,
                f.message,
                "set BINKY_HOME to a writable directory",
            ));
            None
        }
    };
    if let Some(ctx) = &ctx {
        out.push(bootstrap_check(ctx));
        out.push(daemon_check(ctx).await);
        out.push(proxy_check(ctx));
    }
    out.extend(server_binary_checks());
    out.push(inotify_check());
    out.extend(memory_check(ctx.as_ref()));
    out.extend(disk_check(ctx.as_ref()));
    print(&out, json);
    let worst = out.iter().map(|c| c.level).max().unwrap_or(Level::Ok);
    Ok(if worst == Level::Fail {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// Is git on `PATH`?
fn git_check() -> Check {
    // (`-C` a directory that is always there: doctor must answer in a deleted one too.)
    match binky_controllers::git::run_blocking(&std::env::temp_dir(), &["--version"], None) {
        Ok(o) if o.status.success() => check("git", Level::Ok, o.text().trim(), ""),
        _ => check(
            "git",
            Level::Fail,
            "git is not on PATH",
            "install git (Debian/Ubuntu: apt-get install git)",
        ),
    }
}

/// Does the store pass SQLite's quick check?
fn store_check(ctx: &Ctx) -> Check {
    let ok: Result<String, _> = ctx.store.read(store::quick_check);
    match ok {
        Ok(s) if s == "ok" => check(
            "state db",
            Level::Ok,
            format!(
                "{} ({} world(s); home {})",
                ctx.home.db().display(),
                ctx.store.read(store::worlds).map(|w| w.len()).unwrap_or(0),
                ctx.store
                    .read(store::home_id)
                    .unwrap_or_else(|e| format!("unknown: {e}"))
            ),
            "",
        ),
        Ok(s) => check(
            "state db",
            Level::Fail,
            format!("{}: {s}", ctx.home.db().display()),
            "stop the daemon and restore the file from a backup (a new store is a new home: `binky gc --gone-home ID` then drops the slices the lost one left on shared servers)",
        ),
        Err(e) => check("state db", Level::Fail, e.to_string(), "check the file's permissions and disk"),
    }
}

/// Is the daemon running, and is it this binky?
async fn daemon_check(ctx: &Ctx) -> Check {
    match client::ping_within(&ctx.home, Duration::from_millis(800)).await {
        Ok(info) => {
            let v = info.version.unwrap_or_default();
            if v == env!("CARGO_PKG_VERSION") {
                check(
                    "daemon",
                    Level::Ok,
                    format!("pid {} · binky {v}", info.pid.unwrap_or(0)),
                    "",
                )
            } else {
                check(
                    "daemon",
                    Level::Warn,
                    format!("the running daemon is binky {v}, this is {}", env!("CARGO_PKG_VERSION")),
                    "`binky daemon stop` (services keep running); the next command starts the new one",
                )
            }
        }
        Err(_) => check(
            "daemon",
            Level::Ok,
            "not running (commands start it when needed)",
            "",
        ),
    }
}

/// The proxy's ports, and what kept it from the ones it wanted.
fn proxy_check(ctx: &Ctx) -> Check {
    let Ok(Some(s)) = ctx.store.read(store::proxy_status) else {
        return check("proxy", Level::Ok, "not started yet", "");
    };
    let notes: Vec<&str> = [s.http_note.as_str(), s.https_note.as_str()]
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect();
    check(
        "proxy",
        if notes.is_empty() {
            Level::Ok
        } else {
            Level::Warn
        },
        format!(
            "http {} · https {}{}",
            s.http_port.map_or("off".into(), |p| p.to_string()),
            s.https_port.map_or("off".into(), |p| p.to_string()),
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            }
        ),
        if notes.is_empty() {
            ""
        } else {
            "`binky port --proxy N --https N` picks ports it can bind"
        },
    )
}

/// The binaries of the managed servers, one check each.
fn server_binary_checks() -> Vec<Check> {
    [
        (
            Kind::Postgres,
            crate::servers::postgres::find_binary(),
            "postgresql",
        ),
        (
            Kind::Redis,
            crate::servers::redis::find_binary(),
            "redis-server",
        ),
        (
            Kind::Mysql,
            crate::servers::mariadb::find_binary(),
            "mariadb-server",
        ),
    ]
    .into_iter()
    .map(|(kind, found, pkg)| (kind.as_str(), found, pkg))
    .map(|(kind, found, pkg)| match found {
        Some(p) => check("server binaries", Level::Ok, format!("{kind}: {}", p.display()), ""),
        None => check(
            "server binaries",
            Level::Warn,
            format!("{kind}: not installed; adapter services without admin_url cannot get a managed {kind}"),
            format!("apt-get install {pkg}, or give the service an admin_url"),
        ),
    })
    .collect()
}

/// Watches left under the inotify limit (Linux); elsewhere, how files are watched.
fn inotify_check() -> Check {
    use binky_platform::fs::Watching;
    match Watching::current() {
        Watching::Inotify => {}
        Watching::Kqueue => {
            return check(
                "file watching",
                Level::Ok,
                "kqueue: an open file for every watched file and folder; the daemon raises its limit of open files at start (to the hard limit, at most kern.maxfilesperproc)",
                "",
            )
        }
        Watching::DirectoryChanges => {
            return check(
                "file watching",
                Level::Ok,
                "ReadDirectoryChangesW: no limit binky can reach",
                "",
            )
        }
    }
    match inotify() {
        Some((max, used)) => {
            let left = max.saturating_sub(used);
            check(
                "inotify",
                if left < 1000 { Level::Warn } else { Level::Ok },
                format!("{used} of {max} watches in use"),
                if left < 1000 {
                    "raise it: sudo sysctl fs.inotify.max_user_watches=524288 (binky polls meanwhile)"
                } else {
                    ""
                },
            )
        }
        None => check(
            "inotify",
            Level::Warn,
            "cannot read the inotify limits",
            "binky watches files by polling",
        ),
    }
}

/// A reserve setting (`ram_reserve_percent`, `disk_reserve_gib`), 0 when unset or
/// unreadable.
fn reserve(ctx: Option<&Ctx>, key: &str) -> f64 {
    ctx.and_then(|c| c.store.read(|x| store::setting(x, key)).ok().flatten())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Available RAM, against the reserve when set; none when it cannot be read.
fn memory_check(ctx: Option<&Ctx>) -> Option<Check> {
    let (avail, total) = binky_platform::machine::memory()?;
    let pct = avail as f64 * 100.0 / total.max(1) as f64;
    // No floor of its own: only the reserve fails it.
    let level = against_reserve(pct, reserve(ctx, "ram_reserve_percent"), 0.0, 10.0);
    Some(check(
        "memory",
        level,
        format!(
            "{:.1} GiB of {:.1} GiB available ({pct:.0}%)",
            avail as f64 / 1048576.0,
            total as f64 / 1048576.0
        ),
        unless_ok(
            level,
            "stop worlds you do not need (`binky down NAME`), or set `binky settings max_parallel=N`",
        ),
    ))
}

/// Free disk under the current directory, against the reserve when set; none when it
/// cannot be read.
fn disk_check(ctx: Option<&Ctx>) -> Option<Check> {
    let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let free = binky_platform::machine::disk_free_bytes(&here)?;
    let gib = free as f64 / (1u64 << 30) as f64;
    let level = against_reserve(gib, reserve(ctx, "disk_reserve_gib"), 1.0, 5.0);
    Some(check(
        "disk",
        level,
        format!("{gib:.1} GiB free under {}", here.display()),
        unless_ok(
            level,
            "free space: `binky remove` worlds you are done with, `binky gc` for leftovers",
        ),
    ))
}

/// How much of a resource is free against the reserve a person set (0: none): under the
/// reserve or under `fail_under` fails, under `warn_under` warns.
fn against_reserve(free: f64, reserve: f64, fail_under: f64, warn_under: f64) -> Level {
    if (reserve > 0.0 && free < reserve) || free < fail_under {
        Level::Fail
    } else if free < warn_under {
        Level::Warn
    } else {
        Level::Ok
    }
}

/// A check's fix, given only when it did not pass.
fn unless_ok(level: Level, fix: &'static str) -> &'static str {
    if level == Level::Ok {
        ""
    } else {
        fix
    }
}

/// The checks as JSON, or a line each with its fix below.
fn print(out: &[Check], json: bool) {
    if json {
        super::print_json(out);
        return;
    }
    for c in out {
        let tag = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        println!("{tag}  {:<16} {}", c.check, c.detail);
        if !c.fix.is_empty() {
            println!("      {:<16} fix: {}", "", c.fix);
        }
    }
}
