//! Which projects an agent acts on: its own — the project of the repository `binky mcp` was
//! started in, or of the world a process binky started runs in — and those a person listed
//! in the machine setting `agent_projects` (`*`: every project), which no agent can write
//! (`binky settings` is a person's, `crate::cli::guard`).
//!
//! # Guarantees
//! - `binky mcp` refuses a call about another project's worlds (named by `project` or
//!   `root`, or found by name from a server started outside any repository) unless the
//!   person listed it (`crate::cli::mcp`'s `place`); `list`, `status` and `approvals` show only
//!   the projects it may act on.
//! - A command run by a process of a world (`binky down`, `exec`, `env`, … of a world, or
//!   `binky up`) refuses another project's world unless the person listed that project
//!   ([`refuse_for_a_world`]); a process of a world whose mark it dropped is held to the
//!   listed projects alone.
//! - The setting is read at each call: a person's change applies to servers already
//!   running.

use binky_controllers::settings::{lists_project, Settings};
use binky_controllers::store::Store;

use crate::failure::{Failure, Kind};
use crate::person::Origin;

/// The setting that lists them.
pub const SETTING: &str = "agent_projects";

/// The person's list of projects agents may act on besides their own (as the setting holds
/// it: `a,b`, `*`, or empty).
pub fn listed(store: &Store) -> Result<String, String> {
    Settings::read(store)
        .map(|s| s.get(SETTING).to_owned())
        .map_err(|e| e.to_string())
}

/// Whether the person let agents act on project `name` besides their own.
pub fn allowed(store: &Store, name: &str) -> Result<bool, String> {
    Ok(lists_project(&listed(store)?, name))
}

/// What a person does to let an agent act on project `name` too.
pub fn fix(name: &str) -> String {
    format!(
        "ask a person to allow it in their own terminal (`binky settings {SETTING}=NAMES` listing `{name}` with the projects already allowed, or `*` for every project), or to do it themselves"
    )
}

/// Refuse acting on a world of project `project` when this process is one of another
/// project's world (or one of a world it cannot name) and the person did not list
/// `project`; a person's process and `binky mcp`'s own commands are not held here (the MCP
/// server checks its calls itself).
pub fn refuse_for_a_world(store: &Store, project: &str) -> Result<(), Failure> {
    let origin = crate::person::origin();
    let Origin::World { why, .. } = &origin else {
        return Ok(());
    };
    if origin.project() == Some(project) || allowed(store, project).map_err(Failure::failed)? {
        return Ok(());
    }
    let own = match origin.project() {
        Some(p) => format!("project `{p}`'s"),
        None => "a world's (one binky cannot name)".to_owned(),
    };
    Err(Failure::failed(format!(
        "project `{project}` is not this agent's to act on: this was asked by a process of {own} ({why}), and an agent acts on its own project's worlds and on those a person allowed; {}",
        fix(project)
    ))
    .kind(Kind::PersonOnly))
}
