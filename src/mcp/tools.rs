//! The tools: each checks its arguments, picks the directory a command about its world runs
//! in (`root`, or `project`'s repository, or the server's), runs the binky binary there with
//! every name after `--`, and answers `{ok: true, …}` or the one error shape.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::CallToolResult;
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use serde::Deserialize;
use serde_json::{json, Value};

use super::errors::{self, ToolError};
use super::runner::{self, Ended, Limits, Run};
use super::{created, schema, Server};
use crate::cli::failure::exit;

/// How long `up`, `down`, `reload`, `apply` and `remove` wait before answering "pending"
/// (the daemon carries on). Kept under the common 60 s tool-call limit of MCP clients.
const WAIT: &str = "55s";

/// The default and longest wait of the `wait` tool, in seconds.
const WAIT_DEFAULT: u64 = 55;
const WAIT_MAX: u64 = 600;

/// `exec`'s default and longest run, in seconds, and what it keeps of each stream.
const EXEC_DEFAULT: u64 = 60;
const EXEC_MAX: u64 = 600;
const EXEC_OUTPUT: usize = 16 * 1024;
const EXEC_OUTPUT_MAX: usize = 1 << 20;

/// `logs`' default and largest number of lines.
const LOGS_DEFAULT: u32 = 100;
const LOGS_MAX: u32 = 5000;

/// Parameters naming one world.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct WorldParams {
    /// World name (also its git branch). `worktree`, binky 0.1.2's name for it, is accepted.
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project the world is in (its name, as `list` shows it), when a world name is used
    /// by several projects; default: the project of the server's directory.
    pub project: Option<String>,
    /// The repository (or one of its worktrees) to run in, an absolute path: another way to
    /// pick the project.
    pub root: Option<String>,
}

/// `up`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct UpParams {
    /// World name (also its git branch): letters, digits, `. _ - /`. (`worktree` is accepted.)
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project to make it in (its name); default: the server's directory's.
    pub project: Option<String>,
    /// The repository to make it in (absolute path); default: the server's directory.
    pub root: Option<String>,
    /// Start only this group of services (and what they depend on).
    pub group: Option<String>,
}

/// `list`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only this project's worlds.
    pub project: Option<String>,
    /// Only the worlds of the repository at this absolute path.
    pub root: Option<String>,
}

/// `status`' parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct StatusParams {
    /// One world in detail; none: every world (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: Option<String>,
    /// The project (name) to look in.
    pub project: Option<String>,
    /// The repository to look in (absolute path).
    pub root: Option<String>,
    /// Only the summary and, per world, its state, services' states and URLs.
    pub compact: Option<bool>,
}

/// `logs`' parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// One service; none: every service.
    pub service: Option<String>,
    /// Lines in total (default 100, at most 5000): the newest, shared out evenly between the
    /// services when there are several.
    pub lines: Option<u32>,
}

/// `events`' parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// How many of the newest events (default 50, at most 1000).
    pub lines: Option<u32>,
}

/// `curl`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct CurlParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// Service name (one with a `url`).
    pub service: String,
    /// Path and query, starting with `/`, e.g. `/health`.
    pub path: String,
    /// HTTP method (default GET, or POST with a body).
    pub method: Option<String>,
    /// Request body (sent as application/json), at most 1 MiB.
    pub body: Option<String>,
}

/// `wait`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// Give up after this many seconds (default 55, at most 600).
    pub timeout_seconds: Option<u64>,
}

/// `exec`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ExecParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// The program and its arguments, e.g. ["pytest", "-x"] (no shell: ["sh", "-c", "…"]
    /// for one).
    pub command: Vec<String>,
    /// Exactly this service's environment (its PORT, env_file, env); default: the world's.
    pub service: Option<String>,
    /// Stop it after this many seconds (default 60, at most 600).
    pub timeout_seconds: Option<u64>,
    /// Bytes kept of each of stdout and stderr, the newest (default 16384, at most 1048576).
    pub max_output_bytes: Option<usize>,
}

/// `verify`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct VerifyParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// Stop the commands after this many seconds (default 300, at most 1800).
    pub timeout_seconds: Option<u64>,
}

/// `check`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct CheckParams {
    /// The binky.toml (or its directory) relative to the repository; default: the one at
    /// the repository's top.
    pub path: Option<String>,
    /// The project (name) whose repository to check in.
    pub project: Option<String>,
    /// The repository (or worktree) to check in (absolute path); default: the server's.
    pub root: Option<String>,
}

/// `apply`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ApplyParams {
    /// World name (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The project (name) the world is in.
    pub project: Option<String>,
    /// The repository to run in (absolute path).
    pub root: Option<String>,
    /// Only say what would change; change nothing.
    pub dry_run: Option<bool>,
}

/// `approvals`' parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ApprovalsParams {
    /// Only what this world waits for (`worktree` is accepted).
    #[serde(alias = "worktree")]
    pub world: Option<String>,
    /// Only this project's.
    pub project: Option<String>,
}

/// A tool's answer from its outcome: `{ok: true, …}` or the error shape.
/// Every string in it is for an agent: no advice to approve commands itself.
fn done(r: Result<Value, ToolError>) -> CallToolResult {
    match r {
        Ok(mut v) => {
            if let Value::Object(o) = &mut v {
                o.insert("ok".into(), json!(true));
            }
            for_an_agent(&mut v);
            CallToolResult::structured(v)
        }
        Err(e) => {
            let mut v = e.value();
            for_an_agent(&mut v);
            CallToolResult::structured_error(v)
        }
    }
}

/// `--flag VALUE` pairs and words, as owned strings.
fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| (*s).to_owned()).collect()
}

/// A world as `list` shows it: name, project, state, services' states, URLs.
pub fn compact(v: &Value) -> Value {
    let mut urls = serde_json::Map::new();
    let mut services = serde_json::Map::new();
    for s in v["services"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or("?");
        services.insert(name.into(), s["state"].clone());
        if let Some(u) = s["url"].as_str() {
            urls.insert(name.into(), json!(u));
        }
    }
    json!({
        "world": v["name"],
        "project": v["project"],
        "state": v["state"],
        "urls": urls,
        "services": services,
        "worktree": v["worktree"]["path"],
    })
}

/// One line about a world: its state, what is not running, where it answers.
pub fn summary(v: &Value) -> String {
    let name = v["name"].as_str().unwrap_or("?");
    let project = v["project"].as_str().unwrap_or("?");
    let state = v["state"].as_str().unwrap_or("?");
    let services = v["services"].as_array().cloned().unwrap_or_default();
    let running = services.iter().filter(|s| s["state"] == "running").count();
    let mut out = format!(
        "{name} ({project}): {state}, {running}/{} services running",
        services.len()
    );
    let others: Vec<String> = services
        .iter()
        .filter(|s| s["state"] != "running")
        .map(|s| {
            format!(
                "{} {}",
                s["name"].as_str().unwrap_or("?"),
                s["state"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if !others.is_empty() {
        out.push_str(&format!(" ({})", others.join(", ")));
    }
    let urls: Vec<String> = services
        .iter()
        .filter_map(|s| Some(format!("{} {}", s["name"].as_str()?, s["url"].as_str()?)))
        .collect();
    if !urls.is_empty() {
        out.push_str(&format!("; {}", urls.join(", ")));
    }
    let stuck: Vec<&str> = v["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] != "True" && c["status"] != "true")
        .filter_map(|c| c["message"].as_str())
        .filter_map(|m| m.lines().next())
        .filter(|m| !m.is_empty())
        .take(2)
        .collect();
    if state != "ready" && state != "stopped" && !stuck.is_empty() {
        out.push_str(&format!("; waiting on: {}", stuck.join("; ")));
    }
    out
}

/// Whether a world waits for a person to approve its commands (its status).
pub fn is_held(status: &Value) -> bool {
    status["state"] == "approval"
        || status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["reason"] == "AwaitingApproval" && c["status"] != "True")
        })
}

/// `text` with the CLI's advice to run `binky approve` (meant for a person at a terminal)
/// replaced by advice for an agent: ask the person.
pub fn no_self_approval(text: &str) -> String {
    if !text.contains("binky approve") {
        return text.to_owned();
    }
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.find("binky approve") {
            None => l.to_owned(),
            Some(i) => {
                let head = l[..i].trim_end_matches('`').trim_end();
                let head = head.strip_suffix("run").unwrap_or(head).trim_end();
                let head = head.trim_end_matches([';', ',', '(', ':', '.']).trim_end();
                format!("{head}; a person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself")
            }
        })
        .collect();
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Every string of `v` through [`no_self_approval`], but the lines meant for the person.
pub fn for_an_agent(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("binky approve") => *s = no_self_approval(s),
        Value::Array(a) => a.iter_mut().for_each(for_an_agent),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k != "for_the_person" {
                    for_an_agent(x);
                }
            }
        }
        _ => {}
    }
}

/// The answer about a world after a command: name, project, state, summary, URLs.
fn about(status: &Value) -> Value {
    let c = compact(status);
    json!({
        "world": status["name"],
        "project": status["project"],
        "state": status["state"],
        "summary": summary(status),
        "urls": c["urls"],
    })
}

/// A count of worlds by state: `3 worlds: 2 ready, 1 stopped`.
fn worlds_summary(worlds: &[Value]) -> String {
    if worlds.is_empty() {
        return "no worlds yet (`up` makes one)".into();
    }
    let mut states: Vec<(String, usize)> = Vec::new();
    for w in worlds {
        let s = w["state"].as_str().unwrap_or("?").to_owned();
        match states.iter_mut().find(|(x, _)| *x == s) {
            Some((_, n)) => *n += 1,
            None => states.push((s, 1)),
        }
    }
    format!(
        "{} world{}: {}",
        worlds.len(),
        if worlds.len() == 1 { "" } else { "s" },
        states
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The newest `limit` lines of several services' logs in total, shared out evenly (a
/// service with fewer leaves its share to the others); each service's lines in order.
pub fn newest(lines: Vec<Value>, limit: usize) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut per: Vec<Vec<Value>> = Vec::new();
    for l in lines {
        let s = l["service"].as_str().unwrap_or("").to_owned();
        match order.iter().position(|x| *x == s) {
            Some(i) => per[i].push(l),
            None => {
                order.push(s);
                per.push(vec![l]);
            }
        }
    }
    let mut take = vec![0usize; per.len()];
    let mut left = limit;
    while left > 0 {
        let mut moved = false;
        for (i, p) in per.iter().enumerate() {
            if left > 0 && take[i] < p.len() {
                take[i] += 1;
                left -= 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    per.into_iter()
        .zip(take)
        .flat_map(|(p, n)| {
            let skip = p.len() - n;
            p.into_iter().skip(skip)
        })
        .collect()
}

#[tool_router(vis = "pub(super)")]
impl Server {
    /// The router of every tool.
    pub(super) fn router() -> ToolRouter<Server> {
        Self::tool_router()
    }

    /// Run `binky ARGS` in `dir`, as JSON commands run (no timeout of their own), killed
    /// with everything it started when the call is cancelled.
    async fn binky(
        &self,
        ctx: &RequestContext<RoleServer>,
        dir: Option<&Path>,
        args: Vec<String>,
        limits: Limits,
    ) -> Result<Run, ToolError> {
        runner::run(&self.exe, dir, &args, limits, ctx.ct.cancelled())
            .await
            .map_err(|e| {
                ToolError::new("failed", e, "check that binky's binary is still installed")
            })
    }

    /// A command that prints JSON: its JSON, or its failure.
    async fn json(
        &self,
        ctx: &RequestContext<RoleServer>,
        dir: Option<&Path>,
        world: Option<&str>,
        args: Vec<String>,
    ) -> Result<Value, ToolError> {
        let run = self.binky(ctx, dir, args.clone(), Limits::JSON).await?;
        if run.ended != Ended::Exited(exit::OK) {
            return Err(ToolError::of_run(&run, world));
        }
        serde_json::from_str(&run.stdout).map_err(|e| {
            ToolError::new(
                "failed",
                format!(
                    "binky {} printed no JSON ({e}): {}",
                    args.join(" "),
                    run.output()
                ),
                "report this as a bug in binky",
            )
        })
    }

    /// The directory to run a command in: `root` (an existing absolute directory), or the
    /// repository of `project`, or none (the server's own).
    fn place(
        &self,
        project: Option<&str>,
        root: Option<&str>,
    ) -> Result<Option<PathBuf>, ToolError> {
        errors::opt_name("project", project)?;
        match (project, root) {
            (Some(_), Some(_)) => Err(ToolError::invalid(
                "both `project` and `root` are given",
                "pass one of them: `project` (a name from `list`) or `root` (a repository's path)",
            )),
            (None, Some(root)) => {
                errors::bounded("root", root, 4096)?;
                let dir = Path::new(root);
                if !dir.is_absolute() || !dir.is_dir() {
                    return Err(ToolError::invalid(
                        format!("root {} is not an absolute path to a directory", errors::shown(root)),
                        "pass the absolute path of the repository (or one of its worktrees) to run in",
                    ));
                }
                Ok(Some(dir.to_path_buf()))
            }
            (Some(project), None) => match created::project_dir(project) {
                Ok(Some(dir)) => Ok(Some(dir)),
                Ok(None) => Err(ToolError::new(
                    "not_found",
                    format!(
                        "no project `{project}` with worlds; projects: {}",
                        created::projects().unwrap_or_default().join(", ")
                    ),
                    "call `list` for the projects there are; to make a project's first world, pass `root` (its repository's path) to `up`",
                )),
                Err(e) => Err(ToolError::new("failed", e, "check that BINKY_HOME is readable")),
            },
            (None, None) => Ok(self.dir.clone()),
        }
    }

    /// `binky status --json -- WORLD`.
    async fn world_status(
        &self,
        ctx: &RequestContext<RoleServer>,
        dir: Option<&Path>,
        world: &str,
    ) -> Result<Value, ToolError> {
        self.json(
            ctx,
            dir,
            Some(world),
            args(&["status", "--json", "--", world]),
        )
        .await
    }

    /// Which commands wait for a person's approval (none while `approvals` is off).
    async fn waiting(
        &self,
        ctx: &RequestContext<RoleServer>,
        project: Option<&str>,
        world: Option<&str>,
    ) -> Result<(bool, Vec<Value>), ToolError> {
        let settings = self
            .json(ctx, None, None, args(&["settings", "--json"]))
            .await?;
        let on = settings["approvals"] == "true";
        if !on {
            return Ok((false, Vec::new()));
        }
        let list = self
            .json(ctx, None, None, args(&["approve", "--list", "--json"]))
            .await?;
        let items = list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["approved"] != true)
            .filter(|c| project.is_none_or(|p| c["project"] == p))
            .filter(|c| {
                world.is_none_or(|w| {
                    c["worlds"]
                        .as_array()
                        .is_some_and(|ws| ws.iter().any(|x| x == w))
                })
            })
            .map(|c| {
                let key = c["key"].as_str().unwrap_or("");
                json!({
                    "project": c["project"],
                    "worlds": c["worlds"],
                    "what": c["what"],
                    "command": c["command"],
                    "key": key,
                    "for_the_person": format!(
                        "{} wants to run `{}` ({}); if that is fine, run `binky approve {key}` in a terminal",
                        c["worlds"].as_array().map(|w| w.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default(),
                        c["command"].as_str().unwrap_or(""),
                        c["what"].as_str().unwrap_or(""),
                    ),
                })
            })
            .collect();
        Ok((true, items))
    }

    /// The error for a world held until a person approves its new commands.
    async fn held(&self, ctx: &RequestContext<RoleServer>, status: &Value) -> ToolError {
        let world = status["name"].as_str().unwrap_or("?");
        let project = status["project"].as_str();
        let waiting = self
            .waiting(ctx, project, Some(world))
            .await
            .map(|(_, w)| w)
            .unwrap_or_default();
        let what: Vec<String> = waiting
            .iter()
            .map(|c| format!("`{}`", c["command"].as_str().unwrap_or("")))
            .collect();
        ToolError::new(
            "held",
            format!(
                "world `{world}` waits for a person: {} new command{} must be approved before {} run{}: {}",
                what.len(),
                if what.len() == 1 { "" } else { "s" },
                if what.len() == 1 { "it" } else { "they" },
                if what.len() == 1 { "s" } else { "" },
                what.join(", ")
            ),
            "stop and ask the person to review these commands (the `approvals` tool says what each one is, in words they can act on); do not approve them yourself. Once they have, call `wait`",
        )
        .with(json!({ "world": world, "project": project, "state": status["state"], "summary": summary(status), "waiting": waiting }))
    }

    /// `up`, `down`, `reload`: run, then the world's status.
    async fn act(
        &self,
        ctx: &RequestContext<RoleServer>,
        dir: Option<&Path>,
        world: &str,
        words: Vec<String>,
    ) -> Result<Value, ToolError> {
        let run = self.binky(ctx, dir, words, Limits::JSON).await?;
        let status = self.world_status(ctx, dir, world).await.ok();
        match (run.ended, &status) {
            (Ended::Exited(exit::OK), Some(s)) => {
                let mut v = about(s);
                v["output"] = json!(run.output());
                Ok(v)
            }
            (Ended::Exited(exit::PENDING), Some(s))
                if is_held(s) || run.output().contains("waiting for approval") =>
            {
                Err(self.held(ctx, s).await)
            }
            _ => {
                let mut e = ToolError::of_run(&run, Some(world));
                if let Some(s) = &status {
                    e = e.with(about(s));
                }
                Err(e)
            }
        }
    }

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
    ) -> CallToolResult {
        done(
            self.list_worlds(&ctx, p.project.as_deref(), p.root.as_deref())
                .await,
        )
    }

    async fn list_worlds(
        &self,
        ctx: &RequestContext<RoleServer>,
        project: Option<&str>,
        root: Option<&str>,
    ) -> Result<Value, ToolError> {
        let worlds = self.all_worlds(ctx, project, root).await?;
        let compact: Vec<Value> = worlds.iter().map(compact).collect();
        Ok(json!({ "summary": worlds_summary(&worlds), "worlds": compact }))
    }

    /// `binky status --json`'s worlds, only `project`'s (or `root`'s project's) when given.
    async fn all_worlds(
        &self,
        ctx: &RequestContext<RoleServer>,
        project: Option<&str>,
        root: Option<&str>,
    ) -> Result<Vec<Value>, ToolError> {
        errors::opt_name("project", project)?;
        let v = match root {
            Some(_) => {
                let dir = self.place(None, root)?;
                match self
                    .json(
                        ctx,
                        dir.as_deref(),
                        None,
                        args(&["status", "--json", "--", "."]),
                    )
                    .await
                {
                    Ok(v) => v,
                    // A repository without worlds yet.
                    Err(e) if e.code == "invalid_argument" => json!({ "worlds": [] }),
                    Err(e) => return Err(e),
                }
            }
            None => {
                self.json(ctx, None, None, args(&["status", "--json"]))
                    .await?
            }
        };
        let worlds: Vec<Value> = v["worlds"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|w| project.is_none_or(|p| w["project"] == p))
            .collect();
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
        description = "One world in detail (state, services with state/ready/pid/ports/url, conditions, and a one-line `summary`), or every world ({summary, worlds, daemon}). `compact: true` keeps only the summary, states and URLs.",
        output_schema = schema::status(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn status(
        &self,
        Parameters(p): Parameters<StatusParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.status_of(&ctx, p).await)
    }

    async fn status_of(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: StatusParams,
    ) -> Result<Value, ToolError> {
        let compact_only = p.compact.unwrap_or(false);
        let Some(world) = p.world.as_deref() else {
            let worlds = self
                .all_worlds(ctx, p.project.as_deref(), p.root.as_deref())
                .await?;
            let all = worlds_summary(&worlds);
            if compact_only {
                let c: Vec<Value> = worlds.iter().map(compact).collect();
                return Ok(json!({ "summary": all, "worlds": c }));
            }
            let worlds: Vec<Value> = worlds
                .into_iter()
                .map(|mut w| {
                    w["summary"] = json!(summary(&w));
                    w
                })
                .collect();
            return Ok(json!({ "summary": all, "worlds": worlds }));
        };
        errors::name("world", world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let v = self.world_status(ctx, dir.as_deref(), world).await?;
        if compact_only {
            let mut c = compact(&v);
            c["summary"] = json!(summary(&v));
            return Ok(c);
        }
        let mut out = v.clone();
        out["summary"] = json!(summary(&v));
        out["world"] = v["name"].clone();
        Ok(out)
    }

    /// Create (or start) a world and wait until it is ready.
    #[tool(
        title = "Bring a world up",
        description = "Create (or reuse) a world: its git worktree (branch = world name), ports, database slices; start its services and wait until ready (up to 55 s). Answers {world, project, state, summary, urls}. error.code `pending`: not ready yet (call `wait`); `held`: a person must approve new commands first (ask them; never approve yourself).",
        output_schema = schema::lifecycle(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn up(
        &self,
        Parameters(p): Parameters<UpParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.up_world(&ctx, p).await)
    }

    async fn up_world(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: UpParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        errors::opt_name("group", p.group.as_deref())?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let existed = match self.world_status(ctx, dir.as_deref(), &p.world).await {
            Ok(_) => true,
            Err(e) if e.code == "not_found" => false,
            Err(e) => return Err(e),
        };
        let mut words = args(&["up", "-q", "--timeout", WAIT]);
        if let Some(g) = &p.group {
            words.extend(["--group".to_owned(), g.clone()]);
        }
        words.extend(["--".to_owned(), p.world.clone()]);
        let result = self.act(ctx, dir.as_deref(), &p.world, words).await;
        if !existed {
            // Made through MCP, even when it is held or not ready yet: `remove` may take it.
            if let Ok(s) = self.world_status(ctx, dir.as_deref(), &p.world).await {
                if let Some(project) = s["project"].as_str() {
                    let _ = created::record(project, &p.world);
                }
            }
        }
        let mut v = result?;
        v["created"] = json!(!existed);
        Ok(v)
    }

    /// Stop a world's processes.
    #[tool(
        title = "Stop a world",
        description = "Stop a world's processes; its worktree, files, ports and data are kept (`up` starts it again on the same ports). Answers {world, state, summary}.",
        output_schema = schema::lifecycle(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn down(
        &self,
        Parameters(p): Parameters<WorldParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.simple_act(&ctx, "down", &p).await)
    }

    /// Restart a world's processes in place.
    #[tool(
        title = "Restart a world",
        description = "Stop and start a world's processes in place, on the same ports, and wait until ready. Answers {world, state, summary, urls}.",
        output_schema = schema::lifecycle(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn reload(
        &self,
        Parameters(p): Parameters<WorldParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.simple_act(&ctx, "reload", &p).await)
    }

    async fn simple_act(
        &self,
        ctx: &RequestContext<RoleServer>,
        verb: &str,
        p: &WorldParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let words = args(&[verb, "-q", "--timeout", WAIT, "--", &p.world]);
        self.act(ctx, dir.as_deref(), &p.world, words).await
    }

    /// Wait until a world is ready.
    #[tool(
        title = "Wait for a world",
        description = "Wait (in the server, no polling needed) until a world is ready, up to `timeout_seconds` (default 55). Answers {world, state: ready, summary, urls}; error.code `pending` when time ran out, `held` when a person must approve commands, `failed` when a service cannot start, `stopped` when the world is down.",
        output_schema = schema::lifecycle(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn wait(
        &self,
        Parameters(p): Parameters<WaitParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.wait_for(&ctx, p).await)
    }

    async fn wait_for(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: WaitParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let secs = p.timeout_seconds.unwrap_or(WAIT_DEFAULT);
        if secs == 0 || secs > WAIT_MAX {
            return Err(ToolError::invalid(
                format!("timeout_seconds {secs} is out of range"),
                format!("give 1 to {WAIT_MAX} seconds"),
            ));
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let words = args(&[
            "wait",
            "-q",
            "--timeout",
            &format!("{secs}s"),
            "--",
            &p.world,
        ]);
        self.act(ctx, dir.as_deref(), &p.world, words).await
    }

    /// A world's URLs and ports as environment variables.
    #[tool(
        title = "World environment",
        description = "A world's environment: <SVC>_URL, <SVC>_PORT, <SVC>_PORT_<LABEL> for each service, and what its services declare: {env}. Use these; never another world's.",
        output_schema = schema::env(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn env(
        &self,
        Parameters(p): Parameters<WorldParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.env_of(&ctx, p).await)
    }

    async fn env_of(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: WorldParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        self.json(
            ctx,
            dir.as_deref(),
            Some(&p.world),
            args(&["env", "--json", "--", &p.world]),
        )
        .await
    }

    /// A world's captured output.
    #[tool(
        title = "World logs",
        description = "A world's captured stdout and stderr, one service or all: {lines: [{service, line}], returned, limit, note}. `lines` is the total (default 100): the newest, shared out evenly between services; each service's lines in order.",
        output_schema = schema::logs(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn logs(
        &self,
        Parameters(p): Parameters<LogsParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.logs_of(&ctx, p).await)
    }

    async fn logs_of(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: LogsParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        errors::opt_name("service", p.service.as_deref())?;
        let limit = p.lines.unwrap_or(LOGS_DEFAULT);
        if limit == 0 || limit > LOGS_MAX {
            return Err(ToolError::invalid(
                format!("lines {limit} is out of range"),
                format!("give 1 to {LOGS_MAX} lines"),
            ));
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let n = limit.to_string();
        let mut words = args(&["logs", "-n", &n, "--json", "--", &p.world]);
        words.extend(p.service.clone());
        let run = self.binky(ctx, dir.as_deref(), words, Limits::JSON).await?;
        if run.ended != Ended::Exited(exit::OK) {
            return Err(ToolError::of_run(&run, Some(&p.world)));
        }
        let all: Vec<Value> = run
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!({ "line": l })))
            .collect();
        let lines = newest(all, limit as usize);
        Ok(json!({
            "returned": lines.len(),
            "limit": limit,
            "note": format!("at most {limit} lines in total: the newest, shared out evenly between the services; each service's lines are in order"),
            "lines": lines,
        }))
    }

    /// What binky did to a world and why.
    #[tool(
        title = "World events",
        description = "What binky did to a world and why, oldest first (the newest `lines`, default 50): {events: [...]}.",
        output_schema = schema::events(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn events(
        &self,
        Parameters(p): Parameters<EventsParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.events_of(&ctx, p).await)
    }

    async fn events_of(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: EventsParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let n = p.lines.unwrap_or(50);
        if n == 0 || n > 1000 {
            return Err(ToolError::invalid(
                format!("lines {n} is out of range"),
                "give 1 to 1000",
            ));
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let list = self
            .json(
                ctx,
                dir.as_deref(),
                Some(&p.world),
                args(&["events", "--json", "-n", &n.to_string(), "--", &p.world]),
            )
            .await?;
        Ok(json!({ "events": list }))
    }

    /// Run the world's `[agents] verify` commands.
    #[tool(
        title = "Verify a world",
        description = "Run the project's [agents] verify commands in the world's worktree with its environment: {world, results: [{command, ok, exit, seconds, output_tail}]}; ok=false (error.code `command_failed`) when one fails. Refused while the world is held for a person's approval.",
        output_schema = schema::verify(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn verify(
        &self,
        Parameters(p): Parameters<VerifyParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.verify_world(&ctx, p).await)
    }

    async fn verify_world(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: VerifyParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let secs = p.timeout_seconds.unwrap_or(300);
        if secs == 0 || secs > 1800 {
            return Err(ToolError::invalid(
                format!("timeout_seconds {secs} is out of range"),
                "give 1 to 1800 seconds",
            ));
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let status = self.world_status(ctx, dir.as_deref(), &p.world).await?;
        let project = status["project"].as_str();
        let unapproved = self.waiting(ctx, project, Some(&p.world)).await?.1;
        if is_held(&status) || !unapproved.is_empty() {
            return Err(self.held(ctx, &status).await);
        }
        let limits = Limits {
            timeout: Some(Duration::from_secs(secs)),
            max_bytes: Limits::JSON.max_bytes,
        };
        let run = self
            .binky(
                ctx,
                dir.as_deref(),
                args(&["verify", "--json", "--", &p.world]),
                limits,
            )
            .await?;
        let v = serde_json::from_str::<Value>(&run.stdout).ok();
        match (run.ended, v) {
            (Ended::Exited(exit::OK), Some(v)) => Ok(v),
            (Ended::Exited(exit::FAILED), Some(v)) => {
                let failed: Vec<String> = v["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["ok"] != true)
                    .filter_map(|r| r["command"].as_str().map(|c| format!("`{c}`")))
                    .collect();
                Err(ToolError::new(
                    "command_failed",
                    format!("verify failed: {}", failed.join(", ")),
                    "read each result's output_tail, fix the code, then call `verify` again",
                )
                .with(v))
            }
            _ => Err(ToolError::of_run(&run, Some(&p.world))),
        }
    }

    /// A request to a world's service through binky's proxy.
    #[tool(
        title = "HTTP request to a world",
        description = "An HTTP request to a world's service through binky's proxy (Host filled in): {status, body, json}. `json` is the body parsed, when it is JSON.",
        output_schema = schema::curl(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn curl(
        &self,
        Parameters(p): Parameters<CurlParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.curl_world(&ctx, p).await)
    }

    async fn curl_world(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: CurlParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        errors::name("service", &p.service)?;
        errors::url_path(&p.path)?;
        if let Some(m) = &p.method {
            errors::method(m)?;
        }
        if let Some(b) = &p.body {
            errors::bounded("body", b, 1 << 20)?;
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let mut words = args(&["curl"]);
        if let Some(m) = &p.method {
            words.extend(["-X".to_owned(), m.clone()]);
        }
        if let Some(b) = &p.body {
            words.extend(["-d".to_owned(), b.clone()]);
        }
        words.extend([
            "--".to_owned(),
            p.world.clone(),
            p.service.clone(),
            p.path.clone(),
        ]);
        let run = self.binky(ctx, dir.as_deref(), words, Limits::JSON).await?;
        if run.ended != Ended::Exited(exit::OK) {
            return Err(ToolError::of_run(&run, Some(&p.world)));
        }
        // binky curl reports `HTTP/1.1 200 OK  (url)` on stderr.
        let status = run
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("HTTP/"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok());
        let parsed = serde_json::from_str::<Value>(&run.stdout).unwrap_or(Value::Null);
        Ok(json!({ "status": status, "body": run.stdout, "json": parsed }))
    }

    /// A command in the world's worktree with its environment.
    #[tool(
        title = "Run a command in a world",
        description = "Run a command (argv, no shell) in the world's worktree with the environment its services get (or one service's), bounded in time (timeout_seconds, default 60) and output (the newest max_output_bytes of each stream): {exit_code, stdout, stderr, truncated, seconds}. A non-zero exit is error.code `command_failed` with the same fields.",
        output_schema = schema::exec(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    async fn exec(
        &self,
        Parameters(p): Parameters<ExecParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.exec_in(&ctx, p).await)
    }

    async fn exec_in(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: ExecParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        errors::opt_name("service", p.service.as_deref())?;
        if p.command.is_empty() || p.command[0].is_empty() {
            return Err(ToolError::invalid(
                "command is empty",
                "give the program and its arguments, e.g. [\"pytest\", \"-x\"] (or [\"sh\", \"-c\", \"…\"] for a shell line)",
            ));
        }
        let total: usize = p.command.iter().map(String::len).sum();
        if total > 256 * 1024 || p.command.iter().any(|w| w.contains('\0')) {
            return Err(ToolError::invalid(
                "command is longer than 256 KiB or has a NUL byte",
                "shorten it: put long input in a file of the worktree and name the file",
            ));
        }
        let secs = p.timeout_seconds.unwrap_or(EXEC_DEFAULT);
        if secs == 0 || secs > EXEC_MAX {
            return Err(ToolError::invalid(
                format!("timeout_seconds {secs} is out of range"),
                format!("give 1 to {EXEC_MAX} seconds"),
            ));
        }
        let max = p.max_output_bytes.unwrap_or(EXEC_OUTPUT);
        if max == 0 || max > EXEC_OUTPUT_MAX {
            return Err(ToolError::invalid(
                format!("max_output_bytes {max} is out of range"),
                format!("give 1 to {EXEC_OUTPUT_MAX}"),
            ));
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        // The world first, so that binky's own refusal is never read as the command's exit.
        self.json(
            ctx,
            dir.as_deref(),
            Some(&p.world),
            args(&["env", "--json", "--", &p.world]),
        )
        .await?;
        let mut words = args(&["exec"]);
        if let Some(s) = &p.service {
            words.extend(["--service".to_owned(), s.clone()]);
        }
        words.push(p.world.clone());
        words.push("--".to_owned());
        words.extend(p.command.iter().cloned());
        let limits = Limits {
            timeout: Some(Duration::from_secs(secs)),
            max_bytes: max,
        };
        let run = self.binky(ctx, dir.as_deref(), words, limits).await?;
        let v = json!({
            "exit_code": run.code(),
            "stdout": run.stdout,
            "stderr": run.stderr,
            "truncated": run.truncated,
            "seconds": run.elapsed.as_secs_f64(),
        });
        match run.ended {
            Ended::Exited(0) => Ok(v),
            Ended::Exited(code) => Err(ToolError::new(
                "command_failed",
                format!("`{}` exited with code {code}", p.command.join(" ")),
                "read stdout and stderr; fix the cause and run it again",
            )
            .with(v)),
            _ => Err(ToolError::of_run(&run, Some(&p.world)).with(v)),
        }
    }

    /// Validate a binky.toml.
    #[tool(
        title = "Check binky.toml",
        description = "Validate the repository's binky.toml (or `path`) and flag its footguns: {file, errors, warnings, findings: [{level, key, line, message}]}; error.code `invalid_config` when it has errors.",
        output_schema = schema::check(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn check(
        &self,
        Parameters(p): Parameters<CheckParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.check_file(&ctx, p).await)
    }

    async fn check_file(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: CheckParams,
    ) -> Result<Value, ToolError> {
        if let Some(path) = &p.path {
            errors::relative_path("path", path)?;
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let mut words = args(&["check", "--json"]);
        if let Some(path) = &p.path {
            words.extend(["--".to_owned(), path.clone()]);
        }
        let run = self.binky(ctx, dir.as_deref(), words, Limits::JSON).await?;
        let v = serde_json::from_str::<Value>(&run.stdout).ok();
        match (run.ended, v) {
            (Ended::Exited(exit::OK), Some(v)) => Ok(v),
            (Ended::Exited(exit::FAILED), Some(v)) => Err(ToolError::new(
                "invalid_config",
                format!(
                    "{} has {} error(s)",
                    v["file"].as_str().unwrap_or("binky.toml"),
                    v["errors"]
                ),
                "fix each finding of level error at its line, then call `check` again",
            )
            .with(v)),
            _ => Err(ToolError::of_run(&run, None)),
        }
    }

    /// Re-read a world's binky.toml and apply it.
    #[tool(
        title = "Apply binky.toml",
        description = "Re-read a world's binky.toml now and apply it (saving the file does the same by itself); `dry_run: true` only says what would change: {worlds: [{world, state, plan}], dry_run}. error.code `invalid_config` when the file is invalid (the world keeps its last good config).",
        output_schema = schema::apply(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn apply(
        &self,
        Parameters(p): Parameters<ApplyParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.apply_world(&ctx, p).await)
    }

    async fn apply_world(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: ApplyParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let dry = p.dry_run.unwrap_or(false);
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let mut words = args(&["apply", "--json", "-q", "--timeout", WAIT]);
        if dry {
            words.push("--dry-run".to_owned());
        }
        words.extend(["--".to_owned(), p.world.clone()]);
        let run = self.binky(ctx, dir.as_deref(), words, Limits::JSON).await?;
        let report = serde_json::from_str::<Value>(&run.stdout).ok();
        let invalid = report
            .as_ref()
            .and_then(|r| r.as_array())
            .and_then(|a| a.iter().find(|w| w["state"] == "invalid"))
            .cloned();
        match (run.ended, report, invalid) {
            (_, Some(r), Some(bad)) => Err(ToolError::new(
                "invalid_config",
                bad["error"].as_str().unwrap_or("the file is invalid").to_owned(),
                "fix binky.toml (`check` shows each finding with its line); the world keeps running its last good config",
            )
            .with(json!({ "worlds": r, "dry_run": dry }))),
            (Ended::Exited(exit::OK), Some(r), None) => Ok(json!({ "worlds": r, "dry_run": dry })),
            _ => Err(ToolError::of_run(&run, Some(&p.world))),
        }
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
    ) -> CallToolResult {
        done(self.approvals_of(&ctx, p).await)
    }

    async fn approvals_of(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: ApprovalsParams,
    ) -> Result<Value, ToolError> {
        errors::opt_name("world", p.world.as_deref())?;
        errors::opt_name("project", p.project.as_deref())?;
        let (on, waiting) = self
            .waiting(ctx, p.project.as_deref(), p.world.as_deref())
            .await?;
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
        Ok(json!({ "approvals_on": on, "waiting": waiting, "message": message }))
    }

    /// Remove a world an agent made.
    #[tool(
        title = "Remove a world",
        description = "Remove a world: stop it, release its ports, delete its worktree and its database slices. Only a world made through this server's `up` (unless the person allowed more with a machine setting), and never one whose worktree has uncommitted changes (error.code `dirty`; commit them first). A refusal (error.code `refused`) means: ask the person.",
        output_schema = schema::remove(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn remove(
        &self,
        Parameters(p): Parameters<WorldParams>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(self.remove_world(&ctx, p).await)
    }

    async fn remove_world(
        &self,
        ctx: &RequestContext<RoleServer>,
        p: WorldParams,
    ) -> Result<Value, ToolError> {
        errors::name("world", &p.world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let status = self.world_status(ctx, dir.as_deref(), &p.world).await?;
        let project = status["project"].as_str().unwrap_or_default().to_owned();
        let mine = created::by_agent(&project, &p.world).unwrap_or(false);
        if !mine && !created::remove_any_allowed().unwrap_or(false) {
            return Err(ToolError::new(
                "refused",
                format!(
                    "world `{}` of project `{project}` was not made by an agent through this MCP server, so removing it (its worktree and data) is the person's decision",
                    p.world
                ),
                format!(
                    "ask the person to run `binky remove {}` themselves (they may also allow agents to remove any world with `binky settings mcp_remove_any=true`); `down` stops it and keeps everything",
                    p.world
                ),
            ));
        }
        let run = self
            .binky(
                ctx,
                dir.as_deref(),
                args(&["remove", "-q", "--timeout", WAIT, "--", &p.world]),
                Limits::JSON,
            )
            .await?;
        if run.ended != Ended::Exited(exit::OK) {
            return Err(ToolError::of_run(&run, Some(&p.world)));
        }
        let _ = created::forget(&project, &p.world);
        Ok(json!({ "world": p.world, "project": project, "output": run.output() }))
    }
}
