//! The tools: each checks its arguments, picks the directory a command about its world runs
//! in (`root`, or `project`'s repository, or the server's), runs the binky binary there with
//! every name after `--`, and answers `{ok: true, …}` or the one error shape. The tools are
//! in three routers: `world` (up, down, reload, wait, remove), `inspect` (list, status, env,
//! logs, events, approvals) and `run` (exec, verify, curl, check, apply).

mod inspect;
mod run;
mod world;

use std::path::{Path, PathBuf};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};

use super::errors::{self, ToolError};
use super::runner::{self, Ended, Limits, Run};
use super::view::{about, for_an_agent, is_held, summary};
use super::{created, Server};
use crate::failure::{exit, Kind};
use crate::requests::AskedBy;

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

/// What a tool answers: `{ok: true, …}` or the one error shape, turned into the call's
/// result by rmcp (through the two conversions below).
type Reply = Result<Answer, ToolError>;

/// A tool's answer when it succeeded: an object that gets `ok: true`.
struct Answer(Value);

// Every string in a tool's answer is for an agent: no advice to approve commands itself.
impl IntoCallToolResult for Answer {
    fn into_call_tool_result(self) -> Result<CallToolResult, rmcp::ErrorData> {
        let Answer(mut v) = self;
        if let Value::Object(o) = &mut v {
            o.insert("ok".into(), json!(true));
        }
        for_an_agent(&mut v);
        Ok(CallToolResult::structured(v))
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResult, rmcp::ErrorData> {
        let mut v = self.value();
        for_an_agent(&mut v);
        Ok(CallToolResult::structured_error(v))
    }
}

/// `--flag VALUE` pairs and words, as owned strings.
fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| (*s).to_owned()).collect()
}

impl Server {
    /// The router of every tool.
    pub(in crate::cli::mcp) fn router() -> ToolRouter<Server> {
        Self::world_router() + Self::inspect_router() + Self::run_router()
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

    /// The directory to run a command in, as [`Server::place_anywhere`] finds it, refused
    /// when its project is not one this server acts on (`scope`).
    fn place(
        &self,
        project: Option<&str>,
        root: Option<&str>,
    ) -> Result<Option<PathBuf>, ToolError> {
        let dir = self.place_anywhere(project, root)?;
        match &dir {
            Some(d) => self.scope.check_dir(d)?,
            None => self.scope.check_own()?,
        }
        Ok(dir)
    }

    /// The directory to run a command in: `root` (an existing absolute directory), or the
    /// repository of `project`, or none (the server's own).
    fn place_anywhere(
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
                // A directory outside every repository would run the command as the
                // server's own directory never would: refused, not read as "no worlds".
                if let Err(e) = crate::git::text(dir, &["rev-parse", "--show-toplevel"]) {
                    return Err(ToolError::invalid(
                        format!(
                            "root {} is not a git repository (nor inside one): {}",
                            errors::shown(root),
                            e.lines().next().unwrap_or("").trim()
                        ),
                        "pass the absolute path of the project's repository (or of one of its worktrees); `list` shows each world's worktree, or pass `project` (a name from `list`) instead",
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

    /// The world `world` as `binky status --json -- WORLD` shows it, found as the CLI finds
    /// it from `dir` (the server's directory without one), read from the store in this
    /// process.
    async fn world_status(
        &self,
        _ctx: &RequestContext<RoleServer>,
        dir: Option<&Path>,
        world: &str,
    ) -> Result<Value, ToolError> {
        let (store, w) = self.find_world(dir, world)?;
        let v = crate::view::world(store, &w).map_err(|e| store_failed(e.to_string()))?;
        serde_json::to_value(&v).map_err(|e| store_failed(e.to_string()))
    }

    /// The world `world` as the CLI finds it from `dir` (the server's directory without
    /// one), from the store this server keeps open.
    fn find_world(
        &self,
        dir: Option<&Path>,
        world: &str,
    ) -> Result<
        (
            &'static binky_controllers::store::Store,
            binky_controllers::store::World,
        ),
        ToolError,
    > {
        let store = created::store().map_err(store_failed)?;
        let cwd = match dir {
            Some(d) => d.to_path_buf(),
            None => std::env::current_dir().unwrap_or_default(),
        };
        let w = crate::cli::context::world_named(store, &cwd, world)
            .map_err(|f| ToolError::of_failure(f, world))?;
        Ok((store, w))
    }

    /// Which commands wait for a person's approval (none while `approvals` is off): of
    /// `project` and `world` when given, and only those `asked_by` runs when given.
    async fn waiting(
        &self,
        _ctx: &RequestContext<RoleServer>,
        project: Option<&str>,
        world: Option<&str>,
        asked_by: Option<AskedBy>,
    ) -> Result<(bool, Vec<Value>), ToolError> {
        // From the store in this process, as `binky approve --list --json` lists them.
        let store = created::store().map_err(store_failed)?;
        let on = crate::requests::approvals_on(store).map_err(|e| store_failed(e.to_string()))?;
        if !on {
            return Ok((false, Vec::new()));
        }
        let list = crate::requests::approvals(store).map_err(|e| store_failed(e.to_string()))?;
        let items = list
            .into_iter()
            .filter(|c| !c.approved)
            .filter(|c| project.is_none_or(|p| c.project == p))
            .filter(|c| world.is_none_or(|w| c.worlds.iter().any(|x| x == w)))
            .filter(|c| asked_by.is_none_or(|a| c.asked_by == a))
            .map(|c| {
                json!({
                    "for_the_person": format!(
                        "{} wants to run `{}` ({}); if that is fine, run `binky approve {}` in a terminal",
                        c.worlds.join(", "),
                        c.command,
                        c.what,
                        c.key,
                    ),
                    "project": c.project,
                    "worlds": c.worlds,
                    "what": c.what,
                    "command": c.command,
                    "key": c.key,
                    "asked_by": c.asked_by,
                })
            })
            .collect();
        Ok((true, items))
    }

    /// The commands of the world `status` describes that wait for a person's approval, asked
    /// by `asked_by`: as the store has them, and each quoted whole for a message.
    async fn held_by(
        &self,
        ctx: &RequestContext<RoleServer>,
        status: &Value,
        asked_by: AskedBy,
    ) -> (Vec<Value>, Vec<String>) {
        let world = status["name"].as_str().unwrap_or("?");
        let waiting = self
            .waiting(ctx, status["project"].as_str(), Some(world), Some(asked_by))
            .await
            .map(|(_, w)| w)
            .unwrap_or_default();
        let what = waiting
            .iter()
            .map(|c| format!("`{}`", c["command"].as_str().unwrap_or("")))
            .collect();
        (waiting, what)
    }

    /// The error for a world held until a person approves its new commands: those that
    /// hold it (what `binky up` runs), never a verify or exec command, which holds only
    /// itself.
    async fn held(&self, ctx: &RequestContext<RoleServer>, status: &Value) -> ToolError {
        let (world, project) = (
            status["name"].as_str().unwrap_or("?"),
            status["project"].as_str(),
        );
        let (waiting, what) = self.held_by(ctx, status, AskedBy::Up).await;
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
        if run.ended == Ended::Cancelled {
            return Err(ToolError::of_run(&run, Some(world)));
        }
        // `binky wait --json` answers with the world's status: no second command.
        let printed = serde_json::from_str::<Value>(&run.stdout)
            .ok()
            .filter(|v| run.ended == Ended::Exited(exit::OK) && v["name"] == world);
        let status = match printed {
            Some(v) => Some(v),
            None => self.world_status(ctx, dir, world).await.ok(),
        };
        match (run.ended, &status) {
            (Ended::Exited(exit::OK), Some(s)) => {
                let mut v = about(s);
                v["output"] = json!(run.output());
                Ok(v)
            }
            (Ended::Exited(exit::PENDING), Some(s))
                if is_held(s) || run.failure == Some(Kind::Held) =>
            {
                Err(self.held(ctx, s).await)
            }
            _ => {
                let mut e = ToolError::of_run(&run, Some(world));
                if let Some(s) = &status {
                    e = e.with_more(about(s));
                }
                Err(e)
            }
        }
    }
}

/// The store could not be read.
fn store_failed(e: String) -> ToolError {
    ToolError::new("failed", e, "check that BINKY_HOME is readable")
}
