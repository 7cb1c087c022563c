//! Tools that change a world: up, down, reload, wait (for it), remove.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use serde_json::{json, Value};

use super::*;
use crate::cli::mcp::errors::{self, ToolError};
use crate::cli::mcp::params::*;
use crate::cli::mcp::runner::{Ended, Limits};
use crate::cli::mcp::{created, schema, Server};
use crate::failure::exit;

#[tool_router(router = world_router, vis = "pub(super)")]
impl Server {
    /// Create (or start) a world and wait until it is ready.
    #[tool(
        title = "Bring a world up",
        description = "Create (or reuse) a world: its git worktree (branch = world name), ports, database slices; start its services and wait until ready (up to 55 s). Answers {world, project, state, summary, urls}. error.code `pending`: not ready yet (call `wait`); `held`: a person must approve new commands first (ask them; never approve yourself). A cancelled `up` that had already made the world leaves it (binky goes on starting it) as yours: `remove` may take it.",
        output_schema = schema::lifecycle(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn up(
        &self,
        Parameters(p): Parameters<UpParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Reply {
        errors::world(&p.world)?;
        errors::opt_name("group", p.group.as_deref())?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let existed = match self.world_status(&ctx, dir.as_deref(), &p.world).await {
            Ok(_) => true,
            Err(e) if e.code == "not_found" => false,
            Err(e) => return Err(e),
        };
        let mut words = args(&["up", "-q", "--timeout", WAIT]);
        if let Some(g) = &p.group {
            words.extend(["--group".to_owned(), g.clone()]);
        }
        words.extend(["--".to_owned(), p.world.clone()]);
        // A `remove` of this name waits until this call has ended (`binky up` gone, its
        // world written or never made). The world it makes is recorded as an agent's with
        // it, by `binky up` itself, even when it is held, not ready yet, or the call was
        // cancelled once the world was written (the daemon makes it all the same).
        let _flight = (!existed).then(|| self.ups.start(&p.world));
        let result = self.act(&ctx, dir.as_deref(), &p.world, words).await;
        let mut v = result?;
        v["created"] = json!(!existed);
        Ok(Answer(v))
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
    ) -> Reply {
        self.simple_act(&ctx, "down", &p).await.map(Answer)
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
    ) -> Reply {
        self.simple_act(&ctx, "reload", &p).await.map(Answer)
    }

    async fn simple_act(
        &self,
        ctx: &RequestContext<RoleServer>,
        verb: &str,
        p: &WorldParams,
    ) -> Result<Value, ToolError> {
        errors::world(&p.world)?;
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
    ) -> Reply {
        errors::world(&p.world)?;
        let secs = errors::within(
            "timeout_seconds",
            p.timeout_seconds,
            WAIT_DEFAULT,
            WAIT_MAX,
            "seconds",
        )?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        let words = args(&[
            "wait",
            "--json",
            "-q",
            "--timeout",
            &format!("{secs}s"),
            "--",
            &p.world,
        ]);
        self.act(&ctx, dir.as_deref(), &p.world, words)
            .await
            .map(Answer)
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
    ) -> Reply {
        errors::world(&p.world)?;
        let dir = self.place(p.project.as_deref(), p.root.as_deref())?;
        // An `up` of this name still running (or cancelled and recording what it made).
        self.ups.settled(&p.world).await;
        let (_, world) = self.find_world(dir.as_deref(), &p.world)?;
        let project = world.project.clone();
        let mine = created::by_agent(&world).unwrap_or(false);
        if !mine && !created::remove_any_allowed().unwrap_or(false) {
            return Err(ToolError::new(
                "refused",
                format!(
                    "world `{}` of project `{project}` was not made by an agent (through `binky mcp` or a process binky started), so removing it (its worktree and data) is the person's decision",
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
                &ctx,
                dir.as_deref(),
                args(&["remove", "-q", "--timeout", WAIT, "--", &p.world]),
                Limits::JSON,
            )
            .await?;
        if run.ended != Ended::Exited(exit::OK) {
            return Err(ToolError::of_run(&run, Some(&p.world)));
        }
        Ok(Answer(
            json!({ "world": p.world, "project": project, "output": run.output() }),
        ))
    }
}
