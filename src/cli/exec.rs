//! `binky exec NAME [--service SVC] -- CMD…` and `binky verify NAME`: run commands in a
//! world's worktree with the environment its services get (an adapter service: what its
//! `migrate` and `seed` get).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use binky_platform::signal::{self as sig, Heard, Watch};

use crate::supervisor::descendants::Subtree;

use binky_controllers::env::{self, Layout, WorldCommand};
use binky_controllers::store::{self, World};

use super::context::{self, Ctx, Failure, Kind};
use super::exit;

/// The directory and environment `command` (`binky exec`, `binky verify`) runs with in
/// `world`, ready to start: the one function every command of a world gets its environment
/// from ([`env::world_command_env`]: with `-s`, exactly what the daemon gives that service's
/// `cmd` or that adapter service's `migrate`; without, what hooks get), its `${secret:…}`
/// resolved as the daemon resolves them, to be set over the caller's own environment
/// ([`env::CommandEnv::over_callers`]).
pub fn world_env(
    ctx: &Ctx,
    world: &World,
    command: WorldCommand<'_>,
) -> Result<(PathBuf, BTreeMap<String, String>), Failure> {
    let wt = ctx
        .store
        .read(|c| store::worktree(c, world.id))?
        .filter(|w| w.path.is_dir())
        .ok_or_else(|| {
            Failure::failed(format!(
                "world `{}` has no worktree yet (or it was deleted); run `binky up {}`",
                world.name, world.name
            ))
        })?;
    let layout = Layout { worktree: wt.path };
    let snap = env::Snapshot::read(&ctx.store, world)?;
    let service = match command {
        WorldCommand::Exec(Some(name)) => {
            // A name the world has not: the list of those it has.
            context::service(world, name)?;
            Some(name)
        }
        _ => None,
    };
    let ca = ctx.home.ca().join("ca.crt");
    match env::world_command_env(world, &layout, &snap, command, Some(&ca)) {
        Ok(ce) => {
            refuse_unresolved(world, service, &ce.unresolved)?;
            wait_for_paths(ctx, world, &layout, &ce.dir)?;
            let mut vars: BTreeMap<String, String> = ce
                .over_callers(world, |k| std::env::var_os(k).is_some())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            // `${secret:REF}` as the daemon resolves it for a service (secret_command, else
            // BINKY_SECRET_<REF>, here from this command's own environment).
            crate::secrets::Secrets::new(
                ctx.store.clone(),
                ctx.home.root().join("secrets-audit.log"),
            )
            .resolve(world.id, &command.name(), &mut vars)
            .map_err(Failure::failed)?;
            Ok((ce.dir, vars))
        }
        Err(env::EnvError::SliceNotMade { service, .. }) => {
            let slices = ctx.store.read(|c| store::slices_seen_by(c, world))?;
            let why = slices
                .iter()
                .find(|s| s.service == service && !s.message.is_empty())
                .map(|s| format!(" ({})", s.message))
                .unwrap_or_default();
            Err(Failure::failed(
                env::EnvError::SliceNotMade {
                    world: world.name.clone(),
                    service,
                    why,
                }
                .to_string(),
            ))
        }
        Err(e) => Err(Failure::failed(e.to_string())),
    }
}

/// A service's own command is not run with a variable whose tokens resolve to nothing (the
/// daemon holds that service): `binky exec -s` refuses, naming them. A command of the whole
/// world goes without such variables, and says which it left out.
fn refuse_unresolved(
    world: &World,
    service: Option<&str>,
    unresolved: &[env::Unresolved],
) -> Result<(), Failure> {
    if unresolved.is_empty() {
        return Ok(());
    }
    let list = unresolved
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let fix = format!(
        "`binky status {w}` says what the world runs; `binky up {w}` without `--group` makes everything its services name",
        w = world.name
    );
    match service {
        Some(name) => Err(Failure::failed(format!(
            "`{name}` of world `{}` cannot run here: its env names what the world does not have: {list}; {fix}",
            world.name
        ))),
        None => {
            eprintln!("binky: left out what the world does not have: {list}; {fix}");
            Ok(())
        }
    }
}

/// Wait while the worktree is still getting a path a command in `dir` needs (a world just
/// made: `node_modules` being linked in), saying so once.
fn wait_for_paths(
    ctx: &Ctx,
    world: &World,
    layout: &Layout,
    dir: &std::path::Path,
) -> Result<(), Failure> {
    let rel = dir
        .strip_prefix(&layout.worktree)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let deadline = Instant::now() + std::time::Duration::from_secs(30 * 60);
    let mut said = false;
    loop {
        let waits = ctx
            .store
            .read(|c| store::bootstrap_waits(c, world.id, &rel))?;
        if waits.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Failure::failed(format!(
                "{} still not brought into the worktree of `{}`; see `binky status {}`",
                waits.join(", "),
                world.name,
                world.name
            )));
        }
        if !said {
            eprintln!(
                "binky: waiting for {} to be brought into the worktree…",
                waits.join(", ")
            );
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `binky exec`. With `leave_nothing` (binky mcp's `exec`), what the command started ends
/// with it ([`run_below`]).
pub async fn run(
    name: &str,
    service: Option<String>,
    cmd: Vec<String>,
    leave_nothing: bool,
) -> Result<i32, Failure> {
    if cmd.is_empty() {
        return Err(Failure::usage(
            "name a command: `binky exec NAME -- CMD ARGS…`",
        ));
    }
    let ctx = Ctx::open()?;
    let world = ctx.world(Some(name))?;
    // With approvals on, `exec` runs only what a person approved, like every other command
    // a world runs: the exact command, or a pattern the person set.
    let text = shown_argv(&cmd);
    if !binky_controllers::approval::exec_approved(&ctx.store, &world.project, &text)? {
        let key = binky_controllers::approval::exec_key(&world.project, &text);
        ctx.store
            .request_exec(&key, &world.project, &world.name, &text)?;
        return Err(Failure::pending(format!(
            "`{text}` {} in `{}`; ask a person to run `binky approve {key}` (or to allow a family of commands: `binky approve --exec '{}*'`)",
            crate::requests::EXEC_HELD,
            world.name,
            cmd[0]
        ))
        .kind(Kind::Held));
    }
    let (dir, vars) = world_env(&ctx, &world, WorldCommand::Exec(service.as_deref()))?;
    let mut command = tokio::process::Command::new(&cmd[0]);
    command.envs(&vars).args(&cmd[1..]).current_dir(&dir);
    run_below(command, &cmd[0], ctx.home.lock(), leave_nothing).await
}

/// Run `command` below this process, which is the subreaper of all it starts
/// (`supervisor::descendants`), and answer its exit code (128 + N when signal N ended it).
/// When `binky exec` is stopped (SIGTERM, SIGHUP) or the command is ended by a signal,
/// every process the command started goes with it, whatever session or group it moved to;
/// with `leave_nothing` also when the command exits by itself. SIGINT and SIGQUIT are left
/// to the command (a terminal's reach it too), as a shell waiting for its job does. The
/// daemon of the home whose lock is `daemon_lock` is never ended (`binky up` in the command
/// may have started it).
async fn run_below(
    mut command: tokio::process::Command,
    name: &str,
    daemon_lock: PathBuf,
    leave_nothing: bool,
) -> Result<i32, Failure> {
    let tree = Subtree::adopt(daemon_lock)
        .map_err(|e| Failure::failed(format!("cannot follow what `{name}` starts: {e}")))?;
    let mut heard = Watch::new(&[
        Heard::Terminate,
        Heard::Hangup,
        Heard::Interrupt,
        Heard::Quit,
        Heard::ChildEnded,
    ])
    .map_err(|e| Failure::failed(format!("cannot handle signals: {e}")))?;
    let mut child = command
        .spawn()
        .map_err(|e| Failure::failed(format!("cannot run `{name}`: {e}")))?;
    let pid = child.id();
    let end = |waited: Option<u32>| {
        let patience = Duration::from_secs(5);
        if !tree.end(waited, patience) {
            eprintln!(
                "binky: some of what `{name}` started did not end within {patience:?}: pids {:?}",
                tree.members()
            );
        }
    };
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            what = heard.next() => match what {
                Heard::Terminate | Heard::Hangup => {
                    end(pid);
                    return Ok(128 + sig::number(what.name()).unwrap_or(0));
                }
                // The command has the terminal's too: it decides.
                Heard::Interrupt | Heard::Quit => {}
                // A process the command left, re-parented here, ended.
                Heard::ChildEnded => tree.reap(pid),
            },
        }
    };
    let status = status.map_err(|e| Failure::failed(format!("cannot wait for `{name}`: {e}")))?;
    let code = match (status.code(), binky_platform::process::exit_signal(&status)) {
        (Some(c), _) => c,
        (None, Some(n)) => 128 + n,
        (None, None) => 128 + sig::number("SIGKILL").unwrap_or(9),
    };
    if leave_nothing || status.code().is_none() {
        end(None);
    }
    Ok(code)
}

/// `v` in single quotes, as a POSIX shell reads it back.
pub fn shell_quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// `argv` as a shell would read it back: words with anything but `[A-Za-z0-9_./=:@%+,-]`
/// in single quotes (what an approval names).
pub fn shown_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./=:@%+,-".contains(c));
            if plain {
                a.clone()
            } else {
                shell_quote(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `binky verify`.
pub fn verify(name: Option<String>, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let cmds = world.spec.agents.verify.clone();
    if cmds.is_empty() {
        return Err(Failure::usage(format!(
            "world `{}` has no verify commands; add them to binky.toml: [agents] verify = [\"make test\"]",
            world.name
        )));
    }
    // With approvals on, `verify` runs only what a person approved, like everything else a
    // world runs.
    let waiting = binky_controllers::approval::unapproved_verify(&ctx.store, &world)?;
    if !waiting.is_empty() {
        let list: Vec<String> = waiting
            .iter()
            .map(|c| format!("  {}  {}", c.key, c.text))
            .collect();
        return Err(Failure::pending(format!(
            "{} verify command(s) of `{}` wait for a person's approval (approvals are on):\n{}\nask a person to run `binky approve` (or `binky approve KEY`)",
            waiting.len(),
            world.name,
            list.join("\n")
        ))
        .kind(Kind::Held));
    }
    let (dir, vars) = world_env(&ctx, &world, WorldCommand::Verify)?;
    let mut results = Vec::new();
    let mut failed = 0;
    for cmd in &cmds {
        let started = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(&dir)
            .envs(&vars)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Failure::failed(format!("cannot run sh: {e}")))?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        let ok = out.status.success();
        if !ok {
            failed += 1;
        }
        let secs = started.elapsed().as_secs_f64();
        if !json {
            println!(
                "{} {cmd}  ({}, {secs:.1}s)",
                if ok { "ok  " } else { "FAIL" },
                match out.status.code() {
                    Some(c) => format!("exit {c}"),
                    None => "killed".into(),
                }
            );
            if !ok || !tail.is_empty() {
                for l in tail.lines() {
                    println!("    {l}");
                }
            }
        }
        results.push(serde_json::json!({
            "command": cmd, "ok": ok, "exit": out.status.code(),
            "seconds": secs, "output_tail": tail,
        }));
    }
    if json {
        let v = serde_json::json!({"world": world.name, "ok": failed == 0, "results": results});
        super::print_json(&v);
    } else {
        println!(
            "{}: {} of {} verify command(s) passed",
            world.name,
            cmds.len() - failed,
            cmds.len()
        );
    }
    Ok(if failed == 0 { exit::OK } else { exit::FAILED })
}
