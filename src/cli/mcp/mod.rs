//! `binky mcp`: an MCP server over stdio for agents without a shell, and `binky mcp install`,
//! which registers it in an MCP client's config (Claude Code, Cursor, Codex).
//!
//! # Guarantees
//! - Every tool runs the binky binary itself (`current_exe()`) as a subprocess, with `--json`
//!   where the command has it: the same code path as the CLI, so the server holds no state
//!   of its own and cannot drift from the commands. A world its `up` makes is recorded as
//!   an agent's by `binky up`, in the store, as it is made.
//! - Names and paths from a client are checked (`errors`) and passed after `--`: never read
//!   as options. Every tool takes `project` (or `root`) and runs its command in that
//!   project's repository, so a world name two projects use is reached in either.
//! - It acts on the project of the repository it was started in, and on other projects
//!   only where a person allowed them (`agent_projects`, `scope`): a call about another
//!   project's world is refused, and `list`, `status` and `approvals` show only these.
//! - A cancelled call (`notifications/cancelled`) kills the process group of what it
//!   started (`runner`); so does the server stopping.
//! - Every tool answers `{ok: true, …}` or `{ok: false, error: {code, message, fix}}`, also
//!   for arguments that do not parse, and declares that shape as its `outputSchema`.
//! - stdout is the protocol channel: subprocess output is always captured, never inherited.
//! - `remove` removes only worlds an agent made (unless the person sets
//!   `mcp_remove_any`), and never a worktree with uncommitted changes. No tool approves
//!   commands: approving stays a person's.

// A tool's error is made once per call at most and answered at once: boxing it would buy
// nothing measurable.
#![allow(clippy::result_large_err)]

mod created;
mod errors;
mod install;
mod params;
mod runner;
mod schema;
mod scope;
mod tools;
mod transport;
mod view;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerInfo, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::failure::{exit, Failure};
use errors::ToolError;

pub use install::McpClient;

/// What the server tells the model when it connects.
const INSTRUCTIONS: &str = "\
binky gives each git worktree its own isolated world: ports nobody chose by hand, a private \
database slice, its own env and URLs, supervised processes. \
Start with `list`. `up` makes or starts a world (its name is also its git branch) and `wait` \
waits until it is ready, without polling; `status` (with a one-line summary), `env` (the \
world's URLs and ports: use them, never another world's), `logs`, `events` (what binky did \
and why), `exec` (a command in the world's worktree with its environment), `verify` (the \
project's [agents] verify commands), `curl` (a request through binky's proxy), `check` and \
`apply` (binky.toml), `reload`, `down` (stop; files, ports and data are kept). \
Every tool that acts on a world takes `world`, and `project` (or `root`, the repository's \
path) when a world name is used by several projects. \
Every failure is {ok: false, error: {code, message, fix}}: do what `fix` says. \
`pending`: not ready yet: call `wait`, do not retry in a loop. `held`: a person must approve \
new commands first: stop and ask them (`approvals` says what waits, in words they can act \
on); never approve commands yourself. \
`remove` deletes a world's worktree and data: only worlds you made with `up`, with your work \
committed; otherwise ask a person to run `binky remove NAME`.";

/// `binky mcp …`
#[derive(Debug, Clone, clap::Subcommand)]
pub enum McpAction {
    /// Register `binky mcp` in an MCP client's config, with binky's absolute path (and
    /// BINKY_HOME when it is not the default).
    Install {
        /// claude: .mcp.json at the top of the main checkout (project scope); cursor:
        /// ~/.cursor/mcp.json; codex: ~/.codex/config.toml.
        #[arg(long, value_enum)]
        client: McpClient,
        /// Print the file and what would be written to it; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also write a short block telling agents how to use their world into the
        /// repository's CLAUDE.md (claude) or AGENTS.md (cursor, codex); run again, it is
        /// replaced, not repeated.
        #[arg(long)]
        rules: bool,
    },
}

/// `binky mcp [install …]`.
pub async fn run(action: Option<McpAction>) -> Result<i32, Failure> {
    match action {
        None => serve().await,
        Some(McpAction::Install {
            client,
            dry_run,
            rules,
        }) => install::install(client, dry_run, rules),
    }
}

fn own_binary() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find binky's own binary: {e}")))
}

/// Serve MCP on stdin/stdout until the client hangs up.
///
/// rmcp's own handshake ends the server when the first request is not `initialize`; here
/// every message goes to the handler from the first one, `initialize` included (rmcp's
/// default answers it), and the handler refuses what comes before it (`not_initialized`).
async fn serve() -> Result<i32, Failure> {
    let server = Server::new(own_binary()?, None);
    let lines = transport::Lines::new(tokio::io::stdin(), tokio::io::stdout());
    let running = rmcp::service::serve_directly(server, lines, None);
    running
        .waiting()
        .await
        .map_err(|e| Failure::failed(format!("the MCP server stopped: {e}")))?;
    Ok(exit::OK)
}

/// The MCP server: a router of tools over the binky binary.
#[derive(Debug, Clone)]
pub struct Server {
    exe: PathBuf,
    /// Where commands run without `project` or `root` (none: the server's directory).
    dir: Option<PathBuf>,
    tool_router: ToolRouter<Server>,
    /// The `up` calls making a world now.
    ups: Arc<Ups>,
    /// The projects it acts on: its repository's, and those a person allowed.
    scope: scope::Scope,
}

impl Server {
    /// A server running this binky binary for every tool, in `dir` by default.
    pub fn new(exe: PathBuf, dir: Option<PathBuf>) -> Server {
        let start = dir
            .clone()
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
        Server {
            exe,
            dir,
            tool_router: Self::router(),
            ups: Arc::default(),
            scope: scope::Scope::at(&start),
        }
    }
}

/// The `up` calls in flight that make a world, by world name: a `remove` of that name waits
/// for them, so it finds the world an agent's `up` made (even one it cancelled), never a
/// world still being written.
#[derive(Debug, Default)]
struct Ups {
    names: std::sync::Mutex<HashMap<String, usize>>,
    done: tokio::sync::Notify,
}

/// One `up` in flight; its end is told when dropped.
struct Flight {
    ups: Arc<Ups>,
    name: String,
}

impl Ups {
    fn start(self: &Arc<Self>, name: &str) -> Flight {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        *names.entry(name.to_owned()).or_default() += 1;
        Flight {
            ups: self.clone(),
            name: name.to_owned(),
        }
    }

    /// Wait until no `up` of `name` is in flight.
    async fn settled(&self, name: &str) {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            let busy = self
                .names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(name);
            if !busy {
                return;
            }
            done.await;
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut names = self.ups.names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = names.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                names.remove(&self.name);
            }
        }
        drop(names);
        self.ups.done.notify_waiters();
    }
}

/// A request before `initialize` (the session has not begun): answered, never fatal.
fn not_initialized(what: &str) -> ToolError {
    ToolError::new(
        "refused",
        format!("{what} came before `initialize`: the MCP session has not begun, so nothing ran"),
        "send `initialize` first (an MCP client does when it connects), then this request again",
    )
}

/// A tool this server does not have.
fn unknown_tool(tool: &str, tools: &[Tool]) -> ToolError {
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    ToolError::new(
        "not_found",
        format!(
            "no tool {}; the tools are: {}",
            errors::shown(tool),
            names.join(", ")
        ),
        "call one of these tools (tools/list describes each with its arguments); start with `list`",
    )
}

/// A tool's arguments that did not parse (a missing or mistyped one) as the one error
/// shape; rmcp answers them with plain text.
fn arguments_error(tool: &str, result: CallToolResult) -> CallToolResult {
    if result.is_error != Some(true) || result.structured_content.is_some() {
        return result;
    }
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let detail = text
        .strip_prefix("failed to deserialize parameters: ")
        .unwrap_or(&text);
    ToolError::invalid(
        format!("the arguments of `{tool}` do not fit: {detail}"),
        format!("pass the arguments `{tool}`'s inputSchema lists, with their types (tools/list shows it)"),
    )
    .result()
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("binky", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let tool = request.name.to_string();
        if context.peer.peer_info().is_none() {
            return Ok(
                not_initialized(&format!("tools/call of {}", errors::shown(&tool))).result(),
            );
        }
        if !self.tool_router.has_route(&tool) {
            return Ok(unknown_tool(&tool, &self.tool_router.list_all()).result());
        }
        let tcc = ToolCallContext::new(self, request, context);
        let result = self.tool_router.call(tcc).await?;
        Ok(arguments_error(&tool, result))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if context.peer.peer_info().is_none() {
            let e = not_initialized("tools/list");
            return Err(ErrorData::invalid_request(
                format!("{} ({})", e.message, e.fix),
                None,
            ));
        }
        Ok(ListToolsResult {
            tools: self.tool_router.list_all(),
            meta: None,
            next_cursor: None,
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }
}
