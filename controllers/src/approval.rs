//! Approvals of the commands a world would run: what they are, their keys, and which a
//! person has approved. The admission controller holds a world until its commands are
//! approved; `binky approve`, `binky exec` and `binky verify` read the same answers.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::settings::Settings;
use crate::spec::{Probe, ServiceKind, Spec};
use crate::store::{self, Store, StoreError, World};

/// A command a world would run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Command {
    /// Approval key: a hash of project and text.
    pub key: String,
    /// Where it comes from (`cmd of api`, `seed of db`, `hooks.post_up`).
    pub what: String,
    /// The command text, as written.
    pub text: String,
    /// Run only when asked (`[agents] verify`, by `binky verify`), never by `binky up`: it
    /// does not hold the world at the gate, `binky verify` refuses it until approved.
    pub on_demand: bool,
}

/// The approval key of a command of `project`.
pub fn command_key(project: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(project.as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    h.finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every command the selected services of `spec` would run, once per text.
pub fn commands(spec: &Spec, group: Option<&str>) -> Vec<Command> {
    let project = &spec.project.name;
    let mut out: Vec<Command> = Vec::new();
    let mut add = |what: String, text: &str, on_demand: bool| {
        if text.trim().is_empty() || out.iter().any(|c| c.text == text) {
            return;
        }
        out.push(Command {
            key: command_key(project, text),
            what,
            text: text.to_owned(),
            on_demand,
        });
    };
    let mut push = |what: String, text: &str| add(what, text, false);
    for name in spec.selected(group) {
        match &spec.services[&name].kind {
            ServiceKind::Process(p) => {
                push(format!("cmd of {name}"), &p.cmd);
                if let Some(s) = &p.setup {
                    push(format!("setup of {name}"), s);
                }
                if let Some(Probe::Cmd(c)) = p.health.as_ref().map(|h| &h.probe) {
                    push(format!("health check of {name}"), c);
                }
            }
            ServiceKind::Resource(r) => {
                if let Some(m) = &r.migrate {
                    push(format!("migrate of {name}"), m);
                }
                if let Some(s) = &r.seed {
                    push(format!("seed of {name}"), s);
                }
            }
        }
    }
    if let Some(h) = &spec.hooks.post_up {
        push("hooks.post_up".into(), h);
    }
    if let Some(h) = &spec.hooks.pre_down {
        push("hooks.pre_down".into(), h);
    }
    for v in &spec.agents.verify {
        add("[agents] verify".into(), v, true);
    }
    out
}

/// Approved keys.
pub fn approved(store: &Store) -> Result<BTreeSet<String>, StoreError> {
    store.read(store::approved_keys)
}

/// The commands of `world` that wait for approval (none when `approvals` is off).
pub(crate) fn unapproved(
    store: &Store,
    approvals: bool,
    world: &World,
) -> Result<Vec<Command>, StoreError> {
    if !approvals {
        return Ok(Vec::new());
    }
    let ok = approved(store)?;
    Ok(commands(&world.spec, world.group.as_deref())
        .into_iter()
        .filter(|c| !c.on_demand && !ok.contains(&c.key))
        .collect())
}

/// The `[agents] verify` commands of `world` that `binky verify` may not run yet: approvals
/// are on and a person has not approved them (none when approvals are off).
pub fn unapproved_verify(store: &Store, world: &World) -> Result<Vec<Command>, StoreError> {
    if !Settings::read(store)?.flag("approvals") {
        return Ok(Vec::new());
    }
    let ok = approved(store)?;
    Ok(commands(&world.spec, world.group.as_deref())
        .into_iter()
        .filter(|c| c.on_demand && !ok.contains(&c.key))
        .collect())
}

/// The approval key of `binky exec`'s `command` (its arguments quoted as a shell reads
/// them) in a world of `project`.
pub fn exec_key(project: &str, command: &str) -> String {
    command_key(project, &format!("exec {command}"))
}

/// May `binky exec` run `command` in a world of `project`? Yes while approvals are off;
/// else when a person approved that exact command or a pattern it matches.
pub fn exec_approved(store: &Store, project: &str, command: &str) -> Result<bool, StoreError> {
    if !Settings::read(store)?.flag("approvals") {
        return Ok(true);
    }
    if approved(store)?.contains(&exec_key(project, command)) {
        return Ok(true);
    }
    let patterns = store.read(|c| store::exec_patterns(c, project))?;
    Ok(patterns.iter().any(|p| crate::glob::text_match(p, command)))
}

/// What a world waits for while `missing` commands are not approved, if any are.
pub(crate) fn awaiting_approval(world: &World, missing: &[Command]) -> Option<String> {
    let first = missing.first()?;
    Some(format!(
        "waiting for approval of {} command(s), first the {}: `{}`; run `binky approve {}` (or `binky approve --all {}` after reading `binky approve --list`)",
        missing.len(),
        first.what,
        first.text,
        first.key,
        world.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_keyed_by_project_and_text_once_each() {
        let mut spec = crate::testing::spec(vec![
            ("api", crate::testing::web("serve", &[])),
            ("web", crate::testing::web("serve", &[])),
        ]);
        spec.project.name = "p".into();
        let a = command_key("p", "make seed");
        assert_eq!(a, command_key("p", "make seed"));
        assert_ne!(a, command_key("q", "make seed"));
        assert_ne!(a, command_key("p", "make seed "));
        assert_eq!(a.len(), 12);
        spec.hooks.post_up = Some("make seed".into());
        spec.hooks.pre_down = Some("make seed".into());
        let cmds = commands(&spec, None);
        // Two services with one command text, and two hooks with another: two commands.
        assert_eq!(cmds.len(), 2, "{cmds:?}");
        assert_eq!(cmds[0].what, "cmd of api");
        assert_eq!(cmds[1].what, "hooks.post_up");
    }
}
