//! What commands ask of a world, written as desired state: shared by the CLI commands
//! (`binky down`, `reload`, `remove`, `approve`) and the dashboard's buttons, so a button
//! does exactly what its command does. None of these acts on reality: the caller nudges the
//! daemon, and the controllers converge.

use binky_controllers::approval::{self, Command};
use binky_controllers::store::{self, DesiredState, Store, World};

use crate::failure::Failure;

/// What `binky exec` says (exiting 75) of a command it did not run because no person
/// approved it (its failure's kind, `Held`, is what `binky mcp` answers `held` on).
pub const EXEC_HELD: &str =
    "waits for a person's approval (approvals are on) before `binky exec` runs it";

/// A command that changes a user world's desired state refuses a project's shared world:
/// its users decide whether it runs, and it goes with the last of them.
pub fn refuse_shared(world: &World, command: &str) -> Result<(), Failure> {
    if !world.is_shared() {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "`{}` runs the shared services of project `{}`: they run while a world that uses them runs and go with the last of those worlds, so `binky {command}` that world instead (`binky reload {}` restarts them)",
        world.name, world.project, world.name
    )))
}

/// `binky down`: the world's processes stop (files and ports kept). Its new generation.
pub fn down(store: &Store, world: &World) -> Result<i64, Failure> {
    refuse_shared(world, "down")?;
    Ok(store.set_desired_state(world.id, DesiredState::Stopped)?)
}

/// Start a stopped world again with the spec and environment it has (what `binky up NAME`
/// does for a world whose `binky.toml` did not change). Its new generation.
pub fn start(store: &Store, world: &World) -> Result<i64, Failure> {
    refuse_shared(world, "up")?;
    Ok(store.set_desired_state(world.id, DesiredState::Running)?)
}

/// `binky reload` without `--group`: every process restarts in place. Its new generation.
/// `wait`: how long the caller waits (`--timeout`), as long as a service without `health`
/// may take to listen on its port (none: the one recorded stays).
pub fn reload(
    store: &Store,
    world: &World,
    wait: Option<std::time::Duration>,
) -> Result<i64, Failure> {
    Ok(store.reload_world(world.id, wait)?)
}

/// The uncommitted changes that keep `binky remove` (without `--force`) from removing the
/// world's worktree, one line each (`M src/app.py`); empty when there are none.
pub async fn uncommitted(store: &Store, world: &World) -> Result<Vec<String>, Failure> {
    let Some(wt) = store.read(|c| store::worktree(c, world.id))? else {
        return Ok(Vec::new());
    };
    // The same check as the worktree controller's, asked before anything is written.
    let changes = async {
        binky_controllers::dirty::changed_paths(&wt.path)
            .await
            .map_err(|e| {
                Failure::failed(format!(
                    "cannot check {} for uncommitted changes: {e}",
                    wt.path.display()
                ))
            })
    };
    binky_controllers::dirty::users_uncommitted(store, world.id, &wt, changes).await
}

/// `binky remove`: refused while the worktree has uncommitted changes unless `force`;
/// then the world is marked deleted. Its new generation.
pub async fn remove(store: &Store, world: &World, force: bool) -> Result<i64, Failure> {
    refuse_shared(world, "remove")?;
    if !force {
        let users = uncommitted(store, world).await?;
        if !users.is_empty() {
            let mut shown = users
                .iter()
                .take(5)
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n");
            if users.len() > 5 {
                shown.push_str(&format!("\n    … and {} more", users.len() - 5));
            }
            let path = store
                .read(|c| store::worktree(c, world.id))?
                .map(|w| w.path.display().to_string())
                .unwrap_or_default();
            return Err(Failure::failed(format!(
                "worktree {path} has uncommitted changes:\n{shown}\ncommit or stash them, or run `binky remove {} --force` to discard them; nothing was changed",
                world.name
            ))
            .kind(crate::failure::Kind::Dirty));
        }
    }
    Ok(store.mark_deleted(world.id, force)?)
}

/// A command worlds may run, as `binky approve --list` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Approval {
    /// Its approval key.
    pub key: String,
    /// Its project.
    pub project: String,
    /// Where it comes from (`cmd of api`).
    pub what: String,
    /// The exact command.
    pub command: String,
    /// The worlds that run it.
    pub worlds: Vec<String>,
    /// Approved already.
    pub approved: bool,
    /// What runs it, and so what waits for it while it is not approved.
    pub asked_by: AskedBy,
}

/// What runs a command that needs an approval, and so what waits for it: only a world's own
/// commands hold the world at the gate; a verify or exec command holds only itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskedBy {
    /// `binky up`: a service's `cmd`, `setup` or health check, `migrate`, `seed`, a hook.
    Up,
    /// `binky verify`: an `[agents] verify` command.
    Verify,
    /// One `binky exec` asked for.
    Exec,
}

/// Whether the machine has approvals on (`binky settings approvals=true`): only then does a
/// command wait for a person, and only then do `binky approve --list` and the dashboard show
/// what waits.
pub fn approvals_on(store: &Store) -> Result<bool, store::StoreError> {
    Ok(binky_controllers::settings::Settings::read(store)?.flag("approvals"))
}

/// What `binky approve --list` and the dashboard say while approvals are off.
pub const APPROVALS_OFF: &str = "approvals are off on this machine: no command waits for a person's approval (`binky settings approvals=true` holds every new command until a person approves it)";

/// Every command of every world, each once, and whether it is approved.
pub fn approvals(store: &Store) -> Result<Vec<Approval>, store::StoreError> {
    let worlds = store.read(store::worlds)?;
    let approved = approval::approved(store)?;
    let mut out: Vec<(Command, String, Vec<String>)> = Vec::new();
    for w in worlds.iter().filter(|w| !w.deleted) {
        for c in approval::commands(&w.spec, w.group.as_deref()) {
            match out.iter_mut().find(|(x, _, _)| x.key == c.key) {
                Some((_, _, ws)) => ws.push(w.name.clone()),
                None => out.push((c, w.project.clone(), vec![w.name.clone()])),
            }
        }
    }
    let mut all: Vec<Approval> = out
        .into_iter()
        .map(|(c, project, worlds)| Approval {
            approved: approved.contains(&c.key),
            asked_by: if c.on_demand {
                AskedBy::Verify
            } else {
                AskedBy::Up
            },
            key: c.key,
            project,
            what: c.what,
            command: c.text,
            worlds,
        })
        .collect();
    // What `binky exec` was asked to run without an approval, for a person to approve.
    for r in store.read(store::exec_requests)? {
        if all.iter().any(|a| a.key == r.key) {
            continue;
        }
        all.push(Approval {
            approved: approved.contains(&r.key),
            key: r.key,
            project: r.project,
            what: format!("binky exec in {}", r.world),
            command: r.command,
            worlds: vec![r.world],
            asked_by: AskedBy::Exec,
        });
    }
    Ok(all)
}

/// Approving is refused while approvals are off: nothing waits for a person, so an approval
/// would only be a record that silently lets a command run once they are turned on, and
/// neither `binky approve --list` nor the dashboard shows what it would approve. Said the
/// same way wherever one is asked for (`binky approve`, the dashboard's button).
pub fn refuse_while_off(store: &Store) -> Result<(), Failure> {
    if approvals_on(store)? {
        return Ok(());
    }
    Err(Failure::failed(format!(
        "nothing to approve: {APPROVALS_OFF}; nothing was approved"
    )))
}

/// `binky approve KEY`: approve the one command whose key is (or starts with) `key`; the
/// approval it wrote. Refused while approvals are off ([`refuse_while_off`]).
pub fn approve(store: &Store, key: &str) -> Result<Approval, Failure> {
    refuse_while_off(store)?;
    let all = approvals(store)?;
    let found: Vec<&Approval> = all.iter().filter(|a| a.key.starts_with(key)).collect();
    match found.as_slice() {
        [a] => {
            store.approve(&a.key, &a.project, &a.command)?;
            Ok((*a).clone())
        }
        [] => Err(Failure::usage(format!(
            "no command `{key}`; see `binky approve --list`"
        ))),
        _ => Err(Failure::usage(format!(
            "`{key}` names several commands; give more of the key"
        ))),
    }
}
