//! `binky mcp`: an MCP server over stdio for agents without a shell, and `binky mcp install`,
//! which registers it in an MCP client's config (Claude Code, Cursor, Codex).
//!
//! # Guarantees
//! - Every tool runs the binky binary itself (`current_exe()`) as a subprocess, with `--json`
//!   where the command has it: the same code path as the CLI, so the server holds no state
//!   and cannot drift from the commands.
//! - stdout is the protocol channel: subprocess output is always captured, never inherited.
//! - `remove` is deliberately not a tool: destroying a world (and its database) stays a
//!   person's command. The server's instructions say so.
//!
//! # Caveats
//! - `binky mcp install --client codex` rewrites `~/.codex/config.toml` through the `toml`
//!   crate: every table and key is kept, comments are not.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerInfo};
use rmcp::schemars::JsonSchema;
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli::failure::{exit, Failure};

/// How long `up`, `down` and `reload` wait before answering "pending" (the daemon carries
/// on). Kept under the common 60 s tool-call limit of MCP clients.
const WAIT: &str = "55s";

/// What the server tells the model when it connects.
const INSTRUCTIONS: &str = "\
binky gives each git worktree its own isolated world: ports nobody chose by hand, a private \
database slice, its own env and URLs, supervised processes. \
Tools (each takes `world` — or `worktree`, as binky 0.1.2 called it — and `root`, the repository \
to run in, which picks the project when two use one world name): `up` (create or start a world), `status`, `env` \
(the world's URLs and ports), `logs`, `events` (what binky did and why), `verify` (the \
project's [agents] verify commands), `curl` (a request to a service through binky's proxy), \
`reload`, `down` (stop; files, ports and data are kept). \
A result with `pending: true` (exit code 75) means the world is not ready yet or is held at \
the gate (queued behind other worlds, or waiting for a person to approve a new command): \
wait and call `status`; do not retry in a loop, and never approve commands yourself. \
Removing a world is deliberately not a tool: it deletes the world's worktree and database. \
Ask a person to run `binky remove NAME`.";

/// `binky mcp …`
#[derive(Debug, Clone, clap::Subcommand)]
pub enum McpAction {
    /// Register `binky mcp` in an MCP client's config, with binky's absolute path.
    Install {
        /// claude: ./.mcp.json (project scope); cursor: ~/.cursor/mcp.json;
        /// codex: ~/.codex/config.toml.
        #[arg(long, value_enum)]
        client: McpClient,
        /// Print the file and what would be written to it; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// The MCP clients `binky mcp install` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum McpClient {
    /// Claude Code, project scope (`.mcp.json` in the current directory).
    Claude,
    /// Cursor (`~/.cursor/mcp.json`).
    Cursor,
    /// OpenAI Codex (`~/.codex/config.toml`).
    Codex,
}

/// `binky mcp [install …]`.
pub async fn run(action: Option<McpAction>) -> Result<i32, Failure> {
    match action {
        None => serve().await,
        Some(McpAction::Install { client, dry_run }) => install(client, dry_run),
    }
}

fn own_binary() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find binky's own binary: {e}")))
}

/// Serve MCP on stdin/stdout until the client hangs up.
async fn serve() -> Result<i32, Failure> {
    let server = Server::new(own_binary()?);
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Failure::failed(format!("MCP handshake failed: {e}")))?;
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
    tool_router: ToolRouter<Server>,
}

/// One finished subprocess.
struct Run {
    /// Its exit code (-1 when a signal ended it).
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// What it printed, for the model: stderr (progress, errors) then stdout.
    fn output(&self) -> String {
        let mut s = self.stderr.trim_end().to_owned();
        if !self.stdout.trim().is_empty() {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(self.stdout.trim_end());
        }
        s
    }

    /// A failed command's answer: what it said, and its exit code.
    fn failed(&self) -> Value {
        json!({ "error": self.message(), "exit_code": self.code })
    }

    /// The error message without the `binky: ` prefix.
    fn message(&self) -> String {
        let text = self.output();
        let text = text.trim();
        if text.is_empty() {
            return format!("binky exited with code {}", self.code);
        }
        text.strip_prefix("binky: ").unwrap_or(text).to_owned()
    }
}

/// `up`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct UpParams {
    /// World name (also its git branch): letters, digits, `. _ - /`. (`worktree`, binky
    /// 0.1.2's name for it, is accepted too.)
    #[serde(alias = "worktree")]
    pub world: String,
    /// The repository or worktree to run in (absolute path); default: the server's directory.
    pub root: Option<String>,
    /// Start only this group of services (and what they depend on).
    pub group: Option<String>,
}

/// Parameters naming one world.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct WorldParams {
    /// World name (`worktree`, binky 0.1.2's name for it, is accepted too).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The repository or worktree to run in (absolute path), so a world name two projects
    /// use is found in this one; default: the server's directory.
    pub root: Option<String>,
}

/// `status`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct StatusParams {
    /// One world in detail; none: every world (`worktree` is accepted too).
    #[serde(alias = "worktree")]
    pub world: Option<String>,
    /// The repository or worktree to run in (absolute path), so a world name two projects
    /// use is found in this one; default: the server's directory.
    pub root: Option<String>,
}

/// `logs`' parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct LogsParams {
    /// World name (`worktree` is accepted too).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The repository or worktree to run in (absolute path), so a world name two projects
    /// use is found in this one; default: the server's directory.
    pub root: Option<String>,
    /// One service; none: every service.
    pub service: Option<String>,
    /// Lines of history (default 100).
    pub lines: Option<u32>,
}

/// `curl`'s parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct CurlParams {
    /// World name (`worktree` is accepted too).
    #[serde(alias = "worktree")]
    pub world: String,
    /// The repository or worktree to run in (absolute path), so a world name two projects
    /// use is found in this one; default: the server's directory.
    pub root: Option<String>,
    /// Service name (one with a `url`).
    pub service: String,
    /// Path and query, e.g. `/health`.
    pub path: String,
    /// HTTP method (default GET, or POST with a body).
    pub method: Option<String>,
    /// Request body (sent as application/json).
    pub body: Option<String>,
}

/// The directory a tool runs binky in: `root` when given (it must be a directory).
fn root_dir(root: Option<&str>) -> Result<Option<&Path>, String> {
    match root.map(Path::new) {
        Some(dir) if !dir.is_dir() => Err(format!(
            "root `{}` is not a directory; pass the repository (or a worktree) to run in",
            dir.display()
        )),
        dir => Ok(dir),
    }
}

fn error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": message.into() }))
}

#[tool_router]
impl Server {
    /// A server running this binky binary for every tool.
    pub fn new(exe: PathBuf) -> Server {
        Server {
            exe,
            tool_router: Self::tool_router(),
        }
    }

    /// Run `binky ARGS` in `dir` (default: here), capturing everything it prints.
    async fn binky(&self, dir: Option<&Path>, args: &[&str]) -> Result<Run, String> {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A cancelled tool call stops its command (the daemon carries on).
            .kill_on_drop(true);
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        let out = cmd
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        Ok(Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// The error for a command about `world` that failed: when no such world exists, say
    /// which do (from `binky status --json`); else what the command said.
    async fn failure(&self, dir: Option<&Path>, world: &str, otherwise: Value) -> CallToolResult {
        if let Ok(status) = self.binky(dir, &["status", "--json"]).await {
            if let Ok(v) = serde_json::from_str::<Value>(&status.stdout) {
                let worlds = v["worlds"].as_array().cloned().unwrap_or_default();
                if !worlds.iter().any(|w| w["name"] == world) {
                    return error(format!("no world `{world}`; worlds: {}", names(&worlds)));
                }
            }
        }
        CallToolResult::structured_error(otherwise)
    }

    /// A command that prints JSON: its JSON, or the failure.
    async fn json(&self, dir: Option<&Path>, world: Option<&str>, args: &[&str]) -> CallToolResult {
        let run = match self.binky(dir, args).await {
            Ok(run) => run,
            Err(e) => return error(e),
        };
        if run.code != exit::OK {
            return match world {
                Some(w) => self.failure(dir, w, run.failed()).await,
                None => error(run.message()),
            };
        }
        match serde_json::from_str::<Value>(&run.stdout) {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => error(format!(
                "binky {} printed no JSON ({e}): {}",
                args.join(" "),
                run.output()
            )),
        }
    }

    /// `up`, `down` or `reload`: they have no `--json`, so the answer is their exit code and
    /// what they printed; `Err` when they failed (pending is not a failure).
    async fn act(&self, world: &str, dir: Option<&Path>, args: &[&str]) -> Result<Value, Value> {
        let run = self
            .binky(dir, args)
            .await
            .map_err(|e| json!({ "ok": false, "exit_code": -1, "output": e }))?;
        let mut v = json!({
            "ok": run.code == exit::OK,
            "exit_code": run.code,
            "output": run.output(),
        });
        match run.code {
            exit::OK => Ok(v),
            exit::PENDING => {
                v["pending"] = json!(true);
                v["hint"] = json!(format!(
                    "not done yet, or held at the gate (queued, or waiting for a person to approve a command); the daemon carries on: call `status` with world `{world}` later, do not retry in a loop"
                ));
                Ok(v)
            }
            _ => Err(v),
        }
    }

    /// Create (or reuse) a world's worktree, allocate its ports, start its services and wait
    /// until they are ready.
    #[tool(
        description = "Create (or reuse) a world: its git worktree (branch = world name), ports, database slices; start its services and wait until ready. Run inside the repository: pass `root`. Returns {ok, exit_code, output, status}; pending=true (exit 75) means not ready yet or held at the gate."
    )]
    async fn up(&self, Parameters(p): Parameters<UpParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let mut args = vec!["up", p.world.as_str(), "-q", "--timeout", WAIT];
        if let Some(g) = p.group.as_deref() {
            args.extend(["--group", g]);
        }
        let mut v = match self.act(&p.world, dir, &args).await {
            Ok(v) => v,
            Err(v) => return CallToolResult::structured_error(v),
        };
        if let Ok(run) = self.binky(dir, &["status", &p.world, "--json"]).await {
            if let Ok(status) = serde_json::from_str::<Value>(&run.stdout) {
                v["status"] = status;
            }
        }
        CallToolResult::structured(v)
    }

    /// Stop a world's processes; its worktree, files, ports and data are kept.
    #[tool(
        description = "Stop a world's processes; its worktree, files, ports and data are kept (`up` starts it again on the same ports). Returns {ok, exit_code, output}."
    )]
    async fn down(&self, Parameters(p): Parameters<WorldParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let args = ["down", p.world.as_str(), "-q", "--timeout", WAIT];
        match self.act(&p.world, dir, &args).await {
            Ok(v) => CallToolResult::structured(v),
            Err(v) => self.failure(dir, &p.world, v).await,
        }
    }

    /// Stop and start a world's processes in place, on the same ports.
    #[tool(
        description = "Stop and start a world's processes in place, on the same ports. Returns {ok, exit_code, output}."
    )]
    async fn reload(&self, Parameters(p): Parameters<WorldParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let args = ["reload", p.world.as_str(), "-q", "--timeout", WAIT];
        match self.act(&p.world, dir, &args).await {
            Ok(v) => CallToolResult::structured(v),
            Err(v) => self.failure(dir, &p.world, v).await,
        }
    }

    /// Every world (or one in detail): state, services, pids, ports, URLs, conditions.
    #[tool(
        description = "Every world grouped by project ({daemon, worlds}), or one world in detail: state, services (state, ready, pid, ports, url), conditions."
    )]
    async fn status(&self, Parameters(p): Parameters<StatusParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        match p.world.as_deref() {
            Some(w) => self.json(dir, Some(w), &["status", w, "--json"]).await,
            None => self.json(dir, None, &["status", "--json"]).await,
        }
    }

    /// A world's URLs and ports as environment variables.
    #[tool(
        description = "A world's environment: <SVC>_URL, <SVC>_PORT, <SVC>_PORT_<LABEL> for each service. Use these; never another world's."
    )]
    async fn env(&self, Parameters(p): Parameters<WorldParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        self.json(dir, Some(&p.world), &["env", &p.world, "--json"])
            .await
    }

    /// A world's captured output.
    #[tool(
        description = "A world's captured stdout and stderr, one service or all: {lines: [{service, line}]}, oldest first."
    )]
    async fn logs(&self, Parameters(p): Parameters<LogsParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let lines = p.lines.unwrap_or(100).to_string();
        let mut args = vec!["logs", p.world.as_str()];
        if let Some(s) = p.service.as_deref() {
            args.push(s);
        }
        args.extend(["-n", &lines, "--json"]);
        let run = match self.binky(dir, &args).await {
            Ok(run) => run,
            Err(e) => return error(e),
        };
        if run.code != exit::OK {
            return self.failure(dir, &p.world, run.failed()).await;
        }
        let lines: Vec<Value> = run
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!({ "line": l })))
            .collect();
        CallToolResult::structured(json!({ "lines": lines }))
    }

    /// What binky did to a world and why.
    #[tool(
        description = "What binky did to a world and why, oldest first (the newest 50): {events: [...]}."
    )]
    async fn events(&self, Parameters(p): Parameters<WorldParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let result = self
            .json(dir, Some(&p.world), &["events", &p.world, "--json"])
            .await;
        // Structured content must be an object; the CLI prints a list.
        match result.structured_content {
            Some(list) if result.is_error != Some(true) => {
                CallToolResult::structured(json!({ "events": list }))
            }
            _ => result,
        }
    }

    /// Run the world's `[agents] verify` commands.
    #[tool(
        description = "Run the project's [agents] verify commands in the world's worktree with its environment: {world, ok, results: [{command, ok, exit, seconds, output_tail}]}. ok=false when one fails."
    )]
    async fn verify(&self, Parameters(p): Parameters<WorldParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let run = match self.binky(dir, &["verify", &p.world, "--json"]).await {
            Ok(run) => run,
            Err(e) => return error(e),
        };
        // A failing verify command is a result (ok=false), not a failure of the tool.
        match serde_json::from_str::<Value>(&run.stdout) {
            Ok(v) if run.code == exit::OK || run.code == exit::FAILED => {
                CallToolResult::structured(v)
            }
            _ => self.failure(dir, &p.world, run.failed()).await,
        }
    }

    /// A request to a world's service through binky's proxy.
    #[tool(
        description = "An HTTP request to a world's service through binky's proxy (Host filled in): {status, body, json}. `json` is the body parsed, when it is JSON."
    )]
    async fn curl(&self, Parameters(p): Parameters<CurlParams>) -> CallToolResult {
        let dir = match root_dir(p.root.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return error(e),
        };
        let mut args = vec![
            "curl",
            p.world.as_str(),
            p.service.as_str(),
            p.path.as_str(),
        ];
        if let Some(m) = p.method.as_deref() {
            args.extend(["-X", m]);
        }
        if let Some(b) = p.body.as_deref() {
            args.extend(["-d", b]);
        }
        let run = match self.binky(dir, &args).await {
            Ok(run) => run,
            Err(e) => return error(e),
        };
        if run.code != exit::OK {
            return self.failure(dir, &p.world, run.failed()).await;
        }
        // binky curl reports `HTTP/1.1 200 OK  (url)` on stderr.
        let status = run
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("HTTP/"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok());
        let parsed = serde_json::from_str::<Value>(&run.stdout).unwrap_or(Value::Null);
        CallToolResult::structured(json!({
            "status": status,
            "body": run.stdout,
            "json": parsed,
        }))
    }
}

/// The worlds of `binky status --json`, as the CLI names them.
fn names(worlds: &[Value]) -> String {
    if worlds.is_empty() {
        return "none yet (`up` makes one)".into();
    }
    let mut projects: Vec<&str> = worlds
        .iter()
        .filter_map(|w| w["project"].as_str())
        .collect();
    projects.sort_unstable();
    projects.dedup();
    worlds
        .iter()
        .map(|w| {
            let name = w["name"].as_str().unwrap_or("?");
            match w["project"].as_str() {
                Some(p) if projects.len() > 1 => format!("{p}/{name}"),
                _ => name.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("binky", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// `binky mcp install --client C [--dry-run]`.
fn install(client: McpClient, dry_run: bool) -> Result<i32, Failure> {
    let exe = own_binary()?;
    let exe = exe.to_string_lossy().into_owned();
    let path = config_path(client)?;
    let existing = match std::fs::read_to_string(&path) {
        Ok(s) => Some(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Failure::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let merged = match client {
        McpClient::Claude | McpClient::Cursor => merge_json(existing.as_deref(), &exe),
        McpClient::Codex => merge_toml(existing.as_deref(), &exe),
    }
    .map_err(|e| {
        Failure::usage(format!(
            "{} is not valid ({e}); fix it or move it away, then run this again (nothing was written)",
            path.display()
        ))
    })?;
    if dry_run {
        println!("would write {}:", path.display());
        print!("{merged}");
        return Ok(exit::OK);
    }
    write_atomically(&path, &merged)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))?;
    println!(
        "wrote {}: server `binky` runs `{exe} mcp`; restart the client to pick it up",
        path.display()
    );
    Ok(exit::OK)
}

/// The config file `client` reads MCP servers from.
fn config_path(client: McpClient) -> Result<PathBuf, Failure> {
    if client == McpClient::Claude {
        let cwd = std::env::current_dir()
            .map_err(|e| Failure::failed(format!("cannot read the current directory: {e}")))?;
        return Ok(cwd.join(".mcp.json"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Failure::usage("HOME is not set; set it to your home directory"))?;
    Ok(match client {
        McpClient::Cursor => home.join(".cursor").join("mcp.json"),
        _ => home.join(".codex").join("config.toml"),
    })
}

/// `{"mcpServers": {"binky": {"command": EXE, "args": ["mcp"]}}}` merged into `existing`
/// (other keys and servers kept).
fn merge_json(existing: Option<&str>, exe: &str) -> Result<String, String> {
    let mut doc = match existing.filter(|s| !s.trim().is_empty()) {
        Some(s) => serde_json::from_str::<Value>(s).map_err(|e| e.to_string())?,
        None => json!({}),
    };
    let root = doc
        .as_object_mut()
        .ok_or("its top level is not a JSON object")?;
    let servers = root
        .entry("mcpServers")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("`mcpServers` is not an object")?;
    servers.insert("binky".into(), json!({ "command": exe, "args": ["mcp"] }));
    let mut out = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    out.push('\n');
    Ok(out)
}

/// A `[mcp_servers.binky]` table (`command = EXE`, `args = ["mcp"]`) merged into
/// `existing` (other tables and servers kept).
fn merge_toml(existing: Option<&str>, exe: &str) -> Result<String, String> {
    let mut doc: toml::Table = match existing {
        Some(s) => toml::from_str(s).map_err(|e| e.to_string())?,
        None => toml::Table::new(),
    };
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or("`mcp_servers` is not a table")?;
    let mut binky = toml::Table::new();
    binky.insert("command".into(), toml::Value::String(exe.to_owned()));
    binky.insert(
        "args".into(),
        toml::Value::Array(vec![toml::Value::String("mcp".into())]),
    );
    servers.insert("binky".into(), toml::Value::Table(binky));
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// Write through a temp file and a rename, so a crash never leaves half a config.
fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".binky-tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, content)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_json_merge_keeps_other_servers_and_keys() {
        let before = r#"{"theme": "dark", "mcpServers": {"other": {"command": "x"}}}"#;
        let out = merge_json(Some(before), "/bin/binky").unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert_eq!(v["mcpServers"]["binky"]["command"], "/bin/binky");
        assert_eq!(v["mcpServers"]["binky"]["args"], json!(["mcp"]));
        // Idempotent.
        assert_eq!(merge_json(Some(&out), "/bin/binky").unwrap(), out);
        assert!(merge_json(Some("[1]"), "/bin/binky").is_err());
        assert!(merge_json(Some("{"), "/bin/binky").is_err());
    }

    #[test]
    fn mcp_toml_merge_keeps_other_tables() {
        let before = "model = \"o3\"\n\n[mcp_servers.other]\ncommand = \"y\"\n";
        let out = merge_toml(Some(before), "/bin/binky").unwrap();
        let v: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(v["model"].as_str(), Some("o3"));
        assert_eq!(v["mcp_servers"]["other"]["command"].as_str(), Some("y"));
        assert_eq!(
            v["mcp_servers"]["binky"]["command"].as_str(),
            Some("/bin/binky")
        );
        assert!(out.contains("[mcp_servers.binky]"), "{out}");
        assert!(merge_toml(Some("mcp_servers = 3"), "/bin/binky").is_err());
    }
}
