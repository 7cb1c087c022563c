//! Tools that run something in or about a world: exec, verify, curl, check, apply.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use serde_json::{json, Value};

use super::*;
use crate::cli::mcp::errors::{self, ToolError};
use crate::cli::mcp::params::*;
use crate::cli::mcp::runner::{Ended, Limits};
use crate::cli::mcp::view::*;
use crate::cli::mcp::{schema, Server};
use crate::failure::{exit, Kind};
use crate::requests::AskedBy;

#[tool_router(router = run_router, vis = "pub(super)")]
impl Server {
    /// Run the world's `[agents] verify` commands.
    #[tool(
        title = "Verify a world",
        description = "Run the project's [agents] verify commands in the world's worktree with its environment: {world, results: [{command, ok, exit, seconds, output_tail}]}; ok=false (error.code `command_failed`) when one fails. error.code `held` while the world is held for a person's approval, or while its verify commands wait for one (`exec` commands that wait do not hold it).",
        output_schema = schema::verify(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn verify(
        &self,
        Parameters(p): Parameters<VerifyParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        errors::world(&p.world)?;
        let secs = errors::within("timeout_seconds", p.timeout_seconds, 300, 1800, "seconds")?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let status = self.world_status(&ctx, dir.as_deref(), &p.world).await?;
        // Held at the gate, its services do not run: nothing to verify. A command that
        // waits for its own approval (an `exec` answered `held`) holds nothing else.
        if is_held(&status) {
            return Err(self.held(&ctx, &status).await);
        }
        let limits = Limits {
            timeout: Some(Duration::from_secs(secs)),
            max_bytes: Limits::JSON.max_bytes,
        };
        let run = self
            .binky(
                &ctx,
                dir.as_deref(),
                args(&["verify", "--json", "--", &p.world]),
                limits,
            )
            .await?;
        let v = serde_json::from_str::<Value>(&run.stdout).ok();
        match (run.ended, v) {
            (Ended::Exited(exit::OK), Some(v)) => Ok(Answer(v)),
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
            // Its own commands wait for a person (`binky verify` refused them, exit 75).
            (Ended::Exited(exit::PENDING), _) if run.failure == Some(Kind::Held) => {
                Err(self.verify_held(&ctx, &status).await)
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
    ) -> Reply {
        errors::world(&p.world)?;
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
        let run = self
            .binky(&ctx, dir.as_deref(), words, Limits::JSON)
            .await?;
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
        Ok(Answer(
            json!({ "status": status, "body": run.stdout, "json": parsed }),
        ))
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
    ) -> Reply {
        errors::world(&p.world)?;
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
        let secs = errors::within(
            "timeout_seconds",
            p.timeout_seconds,
            EXEC_DEFAULT,
            EXEC_MAX,
            "seconds",
        )?;
        let max = errors::within(
            "max_output_bytes",
            p.max_output_bytes,
            EXEC_OUTPUT,
            EXEC_OUTPUT_MAX,
            "",
        )?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        // The world first, so that binky's own refusal is never read as the command's exit.
        self.json(
            &ctx,
            dir.as_deref(),
            Some(&p.world),
            args(&["env", "--json", "--", &p.world]),
        )
        .await?;
        // Everything the command starts ends with it, or with the call (`binky exec` is the
        // subreaper of its command's processes: a `setsid` or double-forked one too).
        let mut words = args(&["exec", "--leave-nothing"]);
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
        let run = self.binky(&ctx, dir.as_deref(), words, limits).await?;
        let v = json!({
            "exit_code": run.code(),
            "stdout": run.stdout,
            "stderr": run.stderr,
            "truncated": run.truncated,
            "seconds": run.elapsed.as_secs_f64(),
        });
        match run.ended {
            Ended::Exited(0) => Ok(Answer(v)),
            // binky exec refused to run it: approvals are on and no person approved it (its
            // report says so: a command's own exit 75 has none). The agent is told to ask,
            // never how to approve (the CLI's text says that).
            Ended::Exited(exit::PENDING) if run.failure == Some(Kind::Held) => Err(ToolError::new(
                "held",
                format!(
                    "`{}` waits for a person's approval (approvals are on): it did not run",
                    crate::cli::exec::shown_argv(&p.command)
                ),
                "stop and ask the person to review the command (the `approvals` tool says what it is, in words they can act on); do not approve it yourself. Once they have, call `exec` again",
            )
            .with(json!({ "world": p.world, "ran": false }))),
            Ended::Exited(code) => Err(ToolError::new(
                "command_failed",
                format!(
                    "`{}` exited with code {code}",
                    crate::cli::exec::shown_argv(&p.command)
                ),
                "read stdout and stderr; fix the cause and run it again",
            )
            .with(v)),
            _ => Err(ToolError::of_run(&run, Some(&p.world)).with_more(v)),
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
    ) -> Reply {
        if let Some(path) = &p.path {
            errors::relative_path("path", path)?;
        }
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let mut words = args(&["check", "--json"]);
        if let Some(path) = &p.path {
            words.extend(["--".to_owned(), path.clone()]);
        }
        let run = self
            .binky(&ctx, dir.as_deref(), words, Limits::JSON)
            .await?;
        let v = serde_json::from_str::<Value>(&run.stdout).ok();
        match (run.ended, v) {
            (Ended::Exited(exit::OK), Some(v)) => Ok(Answer(v)),
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
    ) -> Reply {
        errors::world(&p.world)?;
        let dry = p.dry_run.unwrap_or(false);
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let mut words = args(&["apply", "--json", "-q", "--timeout", WAIT]);
        if dry {
            words.push("--dry-run".to_owned());
        }
        words.extend(["--".to_owned(), p.world.clone()]);
        let run = self
            .binky(&ctx, dir.as_deref(), words, Limits::JSON)
            .await?;
        let report = serde_json::from_str::<Value>(&run.stdout).ok();
        let invalid = report
            .as_ref()
            .and_then(|r| r.as_array())
            .and_then(|a| a.iter().find(|w| w["state"] == "invalid"))
            .cloned();
        // An edit whose new commands need a person's approval holds the world: `held`, as
        // `up` answers, not the `pending` of a world that is only slow (`binky apply` exits
        // 75 for both). Asked of the world's status also when the file watcher applied the
        // edit first and this apply found the file unchanged.
        if !dry && invalid.is_none() && matches!(run.ended, Ended::Exited(exit::OK | exit::PENDING))
        {
            if let Ok(status) = self.world_status(&ctx, dir.as_deref(), &p.world).await {
                if is_held(&status) {
                    let e = self.held(&ctx, &status).await;
                    return Err(match report {
                        Some(r) => e.with_more(json!({ "worlds": r, "dry_run": dry })),
                        None => e,
                    });
                }
            }
        }
        match (run.ended, report, invalid) {
            (_, Some(r), Some(bad)) => Err(ToolError::new(
                "invalid_config",
                bad["error"].as_str().unwrap_or("the file is invalid").to_owned(),
                "fix binky.toml (`check` shows each finding with its line); the world keeps running its last good config",
            )
            .with(json!({ "worlds": r, "dry_run": dry }))),
            (Ended::Exited(exit::OK), Some(r), None) => Ok(Answer(json!({ "worlds": r, "dry_run": dry }))),
            _ => Err(ToolError::of_run(&run, Some(&p.world))),
        }
    }
}

impl Server {
    /// The error for `verify` of a world whose `[agents] verify` commands wait for a
    /// person's approval: those commands, and nothing else that waits.
    async fn verify_held(&self, ctx: &RequestContext<RoleServer>, status: &Value) -> ToolError {
        let (world, project) = (
            status["name"].as_str().unwrap_or("?"),
            status["project"].as_str(),
        );
        let (waiting, what) = self.held_by(ctx, status, AskedBy::Verify).await;
        ToolError::new(
            "held",
            format!(
                "the verify command{} of world `{world}` wait{} for a person's approval (approvals are on): {}; nothing ran",
                if what.len() == 1 { "" } else { "s" },
                if what.len() == 1 { "s" } else { "" },
                what.join(", ")
            ),
            "stop and ask the person to review these commands (the `approvals` tool says what each one is, in words they can act on); do not approve them yourself. Once they have, call `verify` again",
        )
        .with(json!({ "world": world, "project": project, "waiting": waiting }))
    }
}
