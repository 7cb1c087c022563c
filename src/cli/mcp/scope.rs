//! The projects this server acts on ([`crate::reach`]): the project of the repository it was
//! started in, and those a person listed in `agent_projects`. A server started outside any
//! repository has no project of its own: it acts only on listed ones, named in each call.

use std::path::{Path, PathBuf};

use binky_controllers::settings::lists_project;
use binky_controllers::store::{self, World};

use super::created;
use super::errors::ToolError;
use crate::cli::context::Checkout;
use crate::reach::{fix, listed, SETTING};

/// Where the server was started, which makes its own project.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The repository's main checkout (none: started outside any repository).
    repo: Option<PathBuf>,
}

impl Scope {
    /// The scope of a server started in `dir`.
    pub fn at(dir: &Path) -> Scope {
        Scope {
            repo: Checkout::discover(dir).ok().map(|c| c.repo_root),
        }
    }

    /// The person's list, read now (a change applies to a server already running).
    fn listed(&self) -> Result<String, ToolError> {
        listed(created::store().map_err(failed)?).map_err(failed)
    }

    /// Whether `world` is of a project this server acts on.
    pub fn admits(&self, world: &World, listed: &str) -> bool {
        self.repo.as_ref() == Some(&world.repo_root) || lists_project(listed, &world.project)
    }

    /// The worlds of `all` this server acts on.
    pub fn keep(&self, all: &mut Vec<World>) -> Result<(), ToolError> {
        let listed = self.listed()?;
        all.retain(|w| self.admits(w, &listed));
        Ok(())
    }

    /// The projects this server acts on, of `names` (the approvals waiting, by project).
    pub fn admits_project(&self, name: &str) -> Result<bool, ToolError> {
        if lists_project(&self.listed()?, name) {
            return Ok(true);
        }
        let worlds = created::store()
            .map_err(failed)?
            .read(store::worlds)
            .map_err(|e| failed(e.to_string()))?;
        Ok(worlds
            .iter()
            .any(|w| w.project == name && self.repo.as_ref() == Some(&w.repo_root)))
    }

    /// Refuse a call that runs in `dir` when its repository is not this server's and its
    /// project is not listed.
    pub fn check_dir(&self, dir: &Path) -> Result<(), ToolError> {
        let repo = Checkout::discover(dir).ok();
        let repo_root = repo.as_ref().map(|c| c.repo_root.clone());
        if repo_root.is_some() && repo_root == self.repo {
            return Ok(());
        }
        // The project's name: its worlds', else the repository's binky.toml's.
        let worlds = created::store()
            .map_err(failed)?
            .read(store::worlds)
            .map_err(|e| failed(e.to_string()))?;
        let name = worlds
            .iter()
            .find(|w| Some(&w.repo_root) == repo_root.as_ref())
            .map(|w| w.project.clone())
            .or_else(|| repo.as_ref().and_then(Checkout::project_name_or_config));
        let listed = self.listed()?;
        match &name {
            Some(n) if lists_project(&listed, n) => Ok(()),
            Some(n) => Err(self.refusal(&format!("project `{n}`"), n)),
            // A repository that is no project (no world, no binky.toml that reads): there
            // is nothing of anyone's there to act on, and the command says what is missing.
            None => Ok(()),
        }
    }

    /// Refuse a call that names no project from a server started outside any repository,
    /// unless the person let agents act on every project (a world is then found by name in
    /// any, as the CLI finds it there).
    pub fn check_own(&self) -> Result<(), ToolError> {
        if self.repo.is_some() || self.listed()? == "*" {
            return Ok(());
        }
        let listed = self.listed()?;
        Err(ToolError::new(
            "invalid_argument",
            "this MCP server was started outside any repository, so it has no project of its own: name the project of each call",
            format!(
                "pass `project` (or `root`) naming a project the person allowed agents to act on ({}); or ask the person to start the MCP server in the project's repository",
                if listed.is_empty() {
                    "none yet: they allow them with `binky settings agent_projects=NAMES`".to_owned()
                } else {
                    format!("allowed: {listed}")
                }
            ),
        ))
    }

    fn refusal(&self, what: &str, name: &str) -> ToolError {
        let own = match &self.repo {
            Some(r) => format!("the repository {} it was started in", r.display()),
            None => "none: it was started outside any repository".to_owned(),
        };
        ToolError::new(
            "refused",
            format!(
                "{what} is not this MCP server's to act on: it acts on its own project ({own}) and on the projects a person allowed (`{SETTING}`)"
            ),
            fix(name),
        )
    }
}

fn failed(e: String) -> ToolError {
    ToolError::new("failed", e, "check that BINKY_HOME is readable")
}
