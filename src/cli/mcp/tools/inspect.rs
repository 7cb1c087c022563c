//! Tools that read: list, status, env, logs, events, approvals.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use serde_json::{json, Value};

use super::*;
use crate::cli::mcp::errors::{self, ToolError};
use crate::cli::mcp::params::*;
use crate::cli::mcp::view::*;
use crate::cli::mcp::{created, schema, Server};

#[tool_router(router = inspect_router, vis = "pub(super)")]
impl Server {
    /// Every world in a compact form: world, project, state, URLs.
    #[tool(
        title = "List worlds",
        description = "Every world in a compact form: {worlds: [{world, project, state, urls, services}], summary}. `project` or `root` keeps one project's. Start here.",
        output_schema = schema::list(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn list(
        &self,
        Parameters(p): Parameters<ListParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let worlds = self
            .all_worlds(&ctx, p.project.as_deref(), p.root.as_deref())
            .await?;
        let compact: Vec<Value> = worlds.iter().map(compact).collect();
        Ok(Answer(
            json!({ "summary": worlds_summary(&worlds), "worlds": compact }),
        ))
    }

    /// The worlds as `binky status --json` shows them, only `project`'s (or `root`'s
    /// project's) when given: read from the store in this process, not by running the CLI.
    async fn all_worlds(
        &self,
        _ctx: &RequestContext<RoleServer>,
        project: Option<&str>,
        root: Option<&str>,
    ) -> Result<Vec<Value>, ToolError> {
        errors::opt_name("project", project)?;
        let dir = match (project, root) {
            (_, Some(_)) => self.place(None, root)?,
            // Refused when it is not this server's to act on; not found without worlds.
            (Some(_), None) => self.place(project, None).map(|_| None)?,
            (None, None) => None,
        };
        let worlds = world_views(&self.scope, dir.as_deref(), project)?;
        if let Some(p) = project {
            if worlds.is_empty() {
                return Err(ToolError::new(
                    "not_found",
                    format!(
                        "no project `{p}` with worlds; projects: {}",
                        created::projects().unwrap_or_default().join(", ")
                    ),
                    "call `list` without `project` to see every project",
                ));
            }
        }
        Ok(worlds)
    }

    /// One world in detail, or every world, each with a summary.
    #[tool(
        title = "World status",
        description = "One world in detail (state, services with state/ready/pid/ports/url, conditions, and a one-line `summary`; `compact: true`: only the summary, states and URLs), or every world ({summary, worlds}: each compact with its summary; `compact: false`: each in detail).",
        output_schema = schema::status(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn status(
        &self,
        Parameters(p): Parameters<StatusParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        let Some(world) = p.world.as_deref() else {
            let worlds = self
                .all_worlds(&ctx, p.project.as_deref(), p.root.as_deref())
                .await?;
            let all = worlds_summary(&worlds);
            // Every world in detail is some 3 KB each: compact unless asked.
            if p.compact != Some(false) {
                let c: Vec<Value> = worlds
                    .iter()
                    .map(|w| {
                        let mut c = compact(w);
                        c["summary"] = json!(summary(w));
                        c
                    })
                    .collect();
                return Ok(Answer(json!({ "summary": all, "worlds": c })));
            }
            let worlds: Vec<Value> = worlds
                .into_iter()
                .map(|mut w| {
                    w["summary"] = json!(summary(&w));
                    w
                })
                .collect();
            return Ok(Answer(json!({ "summary": all, "worlds": worlds })));
        };
        errors::world(world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let v = self.world_status(&ctx, dir.as_deref(), world).await?;
        if p.compact == Some(true) {
            let mut c = compact(&v);
            c["summary"] = json!(summary(&v));
            return Ok(Answer(c));
        }
        let mut out = v.clone();
        out["summary"] = json!(summary(&v));
        out["world"] = v["name"].clone();
        Ok(Answer(out))
    }

    /// A world's URLs and ports as environment variables.
    #[tool(
        title = "World environment",
        description = "A world's environment: <SVC>_URL, <SVC>_PORT, <SVC>_PORT_<LABEL> for each service, BINKY_URL, BINKY_WORKTREE, BINKY_PROJECT, each with the value `exec`, `verify` and the services' commands get (<SVC>_URL is the service's URL through binky's proxy unless a service's env sets that name itself, e.g. to the direct http://localhost:PORT): {env, urls}; `urls`: each service's URL through the proxy (for a browser, or `curl`). Use these; never another world's.",
        output_schema = schema::env(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn env(&self, Parameters(p): Parameters<WorldParams>) -> Reply {
        errors::world(&p.world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        // From the store in this process, as `binky env --json` prints it.
        let (store, w) = self.find_world(dir.as_deref(), &p.world)?;
        let (vars, urls) =
            crate::cli::env::handed_out(store, &w).map_err(|e| store_failed(e.to_string()))?;
        Ok(Answer(
            json!({ "project": w.project, "world": w.name, "env": vars, "urls": urls }),
        ))
    }

    /// A world's captured output.
    #[tool(
        title = "World logs",
        description = "A world's captured stdout and stderr, one service or all: {lines: [{service, line}], returned, limit, note}. `lines` is the total (default 100): the newest, shared out evenly between services; each service's lines in order.",
        output_schema = schema::logs(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn logs(&self, Parameters(p): Parameters<LogsParams>) -> Reply {
        errors::world(&p.world)?;
        errors::opt_name("service", p.service.as_deref())?;
        let limit = errors::within("lines", p.lines, LOGS_DEFAULT, LOGS_MAX, "lines")?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        // From the log files in this process, as `binky logs --json` prints them.
        let (store, w) = self.find_world(dir.as_deref(), &p.world)?;
        let logs_dir = crate::paths::Home::from_env().map_err(store_failed)?.logs();
        let (chosen, _) = crate::cli::logs::chosen(store, &logs_dir, &w, p.service.as_deref())
            .map_err(|f| ToolError::of_failure(f, &p.world))?;
        let mut all: Vec<Value> = Vec::new();
        for (service, path) in &chosen {
            let (lines, _) = crate::view::log_tail(path, limit as usize);
            all.extend(
                lines
                    .into_iter()
                    .map(|l| json!({ "service": service, "line": l })),
            );
        }
        let lines = newest(all, limit as usize);
        Ok(Answer(json!({
            "returned": lines.len(),
            "limit": limit,
            "note": format!("at most {limit} lines in total: the newest, shared out evenly between the services; each service's lines are in order"),
            "lines": lines,
        })))
    }

    /// What binky did to a world and why.
    #[tool(
        title = "World events",
        description = "What binky did to a world and why, oldest first (the newest `lines`, default 50): {project, removed, events: [...]}; a removed world's events stay readable.",
        output_schema = schema::events(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn events(&self, Parameters(p): Parameters<EventsParams>) -> Reply {
        errors::world(&p.world)?;
        let n = errors::within("lines", p.lines, 50, 1000, "")?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        // From the store in this process, as `binky events --json` prints them.
        let store = created::store().map_err(store_failed)?;
        let cwd = match dir {
            Some(d) => d,
            None => std::env::current_dir().unwrap_or_default(),
        };
        let h = crate::cli::events::history(store, &cwd, &p.world, n as usize)
            .map_err(|f| ToolError::of_failure(f, &p.world))?;
        Ok(Answer(
            json!({ "project": h.project, "removed": h.removed, "events": h.events }),
        ))
    }

    /// What waits for a person.
    #[tool(
        title = "Pending approvals",
        description = "What waits for a person's approval (when the machine has approvals on): {approvals_on, waiting: [{project, worlds, what, command, for_the_person}], message}. Show `for_the_person` to the person and let them decide; an agent never approves commands itself.",
        output_schema = schema::approvals(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn approvals(
        &self,
        Parameters(p): Parameters<ApprovalsParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        errors::opt_world(p.world.as_deref())?;
        errors::opt_name("project", p.project.as_deref())?;
        if p.project.is_some() && p.root.is_some() {
            self.place(p.project.as_deref(), p.root.as_deref())?;
        }
        // `root`: its project, as `list` finds it (no world there: no project, nothing waits).
        let project = match p.root.as_deref() {
            Some(root) => Some(
                self.all_worlds(&ctx, None, Some(root))
                    .await?
                    .first()
                    .and_then(|w| w["project"].as_str().map(str::to_owned))
                    .unwrap_or_default(),
            ),
            None => p.project.clone(),
        };
        // A world that is not there has nothing waiting, and saying so would read as "go
        // ahead": it is not found, as every other tool says.
        if let Some(world) = p.world.as_deref() {
            let store = created::store().map_err(store_failed)?;
            let mut worlds = store
                .read(binky_controllers::store::worlds)
                .map_err(|e| store_failed(e.to_string()))?;
            // Only the projects this server acts on are looked in, and named.
            self.scope.keep(&mut worlds)?;
            let names: Vec<&str> = worlds
                .iter()
                .filter(|w| !w.deleted && project.as_deref().is_none_or(|p| w.project == p))
                .map(|w| w.name.as_str())
                .collect();
            if !names.contains(&world) {
                return Err(ToolError::new(
                    "not_found",
                    format!(
                        "no world `{world}`{}; worlds: {}",
                        project
                            .as_deref()
                            .map(|p| format!(" in project `{p}`"))
                            .unwrap_or_default(),
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                    "call `list` to see the worlds there are",
                ));
            }
        }
        let (on, mut waiting) = self
            .waiting(&ctx, project.as_deref(), p.world.as_deref(), None)
            .await?;
        // Only the projects this server acts on.
        let mut kept = Vec::with_capacity(waiting.len());
        for c in waiting {
            if self
                .scope
                .admits_project(c["project"].as_str().unwrap_or(""))?
            {
                kept.push(c);
            }
        }
        waiting = kept;
        let message = if !on {
            "approvals are off on this machine: nothing waits for a person".to_owned()
        } else if waiting.is_empty() {
            "nothing waits for a person's approval".to_owned()
        } else {
            format!(
                "{} command{} wait{} for a person's approval. Show the person each `for_the_person` line and let them decide in their own terminal; do not approve anything yourself, and call `wait` once they have",
                waiting.len(),
                if waiting.len() == 1 { "" } else { "s" },
                if waiting.len() == 1 { "s" } else { "" },
            )
        };
        Ok(Answer(
            json!({ "approvals_on": on, "waiting": waiting, "message": message }),
        ))
    }
}

/// Every world as `binky status --json` shows it; with `dir`, only the worlds of the
/// repository `dir` is in (none when it is in no repository with worlds); with `project`,
/// only that project's. Only the worlds kept are viewed.
fn world_views(
    scope: &crate::cli::mcp::scope::Scope,
    dir: Option<&std::path::Path>,
    project: Option<&str>,
) -> Result<Vec<Value>, ToolError> {
    let failed = store_failed;
    let store = created::store().map_err(failed)?;
    let mut worlds = store
        .read(binky_controllers::store::worlds)
        .map_err(|e| failed(e.to_string()))?;
    if let Some(dir) = dir {
        let repo = crate::cli::context::Checkout::discover(dir)
            .ok()
            .map(|c| c.repo_root);
        worlds.retain(|w| repo.as_ref() == Some(&w.repo_root));
    }
    worlds.retain(|w| project.is_none_or(|p| w.project == p));
    // Only the projects this server acts on: another's is not there for it.
    scope.keep(&mut worlds)?;
    let views = crate::view::worlds(store, &worlds).map_err(|e| failed(e.to_string()))?;
    Ok(views
        .iter()
        .map(|v| serde_json::to_value(v).unwrap_or(Value::Null))
        .collect())
}
