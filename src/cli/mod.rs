//! The command line: one file per command. Commands validate, run admission, write desired
//! state, nudge the daemon, and wait; they never start a process themselves.

mod apply;
mod approve;
mod check;
pub(crate) mod context;
mod curl;
mod daemon;
mod dashboard;
mod doctor;
mod down;
pub(crate) mod env;
pub mod events;
pub(crate) mod exec;
pub use crate::failure;
mod gc;
mod golden;
mod guard;
mod hosts;
mod init;
pub mod logs;
pub mod mcp;
mod metrics;
mod port;
mod reload;
mod remove;
mod servers;
mod settings;
mod status;
mod top;
mod trust;
mod up;
mod wait;

use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

pub use failure::{exit, Failure};

/// binky: an isolated local world for every git worktree.
#[derive(Debug, Parser)]
#[command(name = "binky", bin_name = "binky", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How long commands wait by default.
const DEFAULT_TIMEOUT: &str = "120s";

/// Flags shared by commands that wait for the daemon.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// Return as soon as the desired state is written.
    #[arg(long)]
    pub no_wait: bool,
    /// Give up waiting after this long (exit 75; the daemon carries on).
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Print no progress.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    crate::config::parse_duration(s)
}

/// A command's `--json` answer: pretty JSON on stdout (an empty line should it not
/// serialise).
fn print_json<T: serde::Serialize + ?Sized>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create (or reuse) the world's worktree, allocate its ports and start its services.
    Up {
        /// World name (also its branch): letters, digits, `. _ - /`.
        name: String,
        /// Start only this group of services (and what they depend on).
        #[arg(long, short)]
        group: Option<String>,
        /// Create the branch from this commit-ish when it does not exist (default: HEAD).
        #[arg(long)]
        from: Option<String>,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Wait until a world is ready (exit 0), or held or out of time (75), or failed (1).
    Wait {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// Print the ready world's status as JSON (as `binky status NAME --json`).
        #[arg(long)]
        json: bool,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop a world's processes; its files and ports are kept.
    Down {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Show or set machine settings: resident limits, approvals (`binky settings max_parallel=8`).
    Settings {
        /// KEY=VALUE assignments; none: show every setting.
        assignments: Vec<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Keep RAM and disk free: a world does not start while less is (the same as
    /// `binky settings ram_reserve_percent=… disk_reserve_gib=…`).
    Reserve {
        /// Percent of memory kept available (0 to 90; 0: off).
        #[arg(long, value_name = "PCT")]
        ram: Option<String>,
        /// GiB kept free on the worktrees' filesystem (0: off).
        #[arg(long, value_name = "GIB")]
        disk: Option<String>,
    },
    /// The web dashboard (at binky.localhost on the proxy's port): print the link that
    /// signs a browser in, and open it.
    Dashboard {
        /// Print the link only (for agents, or a browser elsewhere).
        #[arg(long)]
        no_open: bool,
        /// Machine-readable output.
        #[arg(long, conflicts_with = "tui")]
        json: bool,
        /// The terminal view instead (`binky top`): worlds, services, logs, in this terminal.
        #[arg(long, conflicts_with = "no_open")]
        tui: bool,
    },
    /// A point-in-time JSON snapshot: daemon, worlds and services by state, ports, slices,
    /// admission, managed servers, golden templates (works with the daemon down).
    Metrics,
    /// Print binky's version (also `binky --version`).
    Version {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List every machine setting with its default and what it does.
    Config {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Approve the commands worlds may run (when `approvals` is on).
    Approve(approve::Args),
    /// Run a command in a world's worktree with the environment its services get.
    Exec {
        /// World name.
        name: String,
        /// Exactly this service's environment (its PORT, env_file, env).
        #[arg(long, short)]
        service: Option<String>,
        /// The command and its arguments (after `--`).
        #[arg(last = true)]
        cmd: Vec<String>,
        /// When the command exits, end everything it started too (background jobs,
        /// daemons): what `binky mcp`'s `exec` runs.
        #[arg(long, hide = true)]
        leave_nothing: bool,
    },
    /// Run the world's `[agents] verify` commands; exit 1 if any fails.
    Verify {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check this machine: git, the state DB, the daemon, the proxy, server binaries,
    /// inotify, memory and disk (exit 1 on a failure).
    Doctor {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Validate a binky.toml and flag its footguns (exit 1 on errors).
    Check {
        /// The file or its directory (default: the binky.toml here or above).
        path: Option<std::path::PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Re-read a world's binky.toml now, print the plan, and apply it (saving the file does
    /// the same by itself).
    Apply {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// Every world.
        #[arg(long, conflicts_with = "name")]
        all: bool,
        /// Print the plan only.
        #[arg(long)]
        dry_run: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop and start a world's processes in place, on the same ports.
    Reload {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// Restart only this group's services (`[groups]` in binky.toml).
        #[arg(long, short = 'g')]
        group: Option<String>,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop a world, release its ports and remove its worktree.
    Remove {
        /// World name.
        name: String,
        /// Remove the worktree even with uncommitted changes (they are lost).
        #[arg(long, short)]
        force: bool,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Every world, grouped by project (or one world in detail).
    Status {
        /// One world in detail (`.`: every world of the current directory's project).
        name: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Every world and its services in the terminal, live: a log pane for the selected
    /// service, keys for up, down and reload (`?` lists them).
    Top,
    /// A world's URLs and ports as environment variables.
    Env {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// `KEY=value` lines (the default).
        #[arg(long, group = "format")]
        dotenv: bool,
        /// `export KEY='value'` lines for `eval`.
        #[arg(long, group = "format")]
        shell: bool,
        /// JSON.
        #[arg(long, group = "format")]
        json: bool,
    },
    /// A world's captured output (stdout and stderr), per service.
    Logs {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// One service (default: all, each line prefixed with its service).
        service: Option<String>,
        /// Keep printing new output.
        #[arg(long, short)]
        follow: bool,
        /// Lines of history to print first.
        #[arg(long, short = 'n', default_value_t = 100)]
        lines: usize,
        /// JSON lines: {"service", "line"}.
        #[arg(long)]
        json: bool,
    },
    /// What happened to a world, oldest first.
    Events {
        /// World name (default: the world whose worktree you are in).
        name: Option<String>,
        /// How many of the newest events.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// A request to a world's service through the proxy, `Host` filled in (no DNS needed).
    Curl {
        /// World name.
        name: String,
        /// Service name (one with a `url`).
        service: String,
        /// Path and query (default `/`).
        path: Option<String>,
        /// Method (default GET, or POST with --data).
        #[arg(long, short = 'X')]
        request: Option<String>,
        /// Request body (Content-Type: application/json unless -H says otherwise).
        #[arg(long, short)]
        data: Option<String>,
        /// Extra header, 'Name: value' (repeatable).
        #[arg(long, short = 'H')]
        header: Vec<String>,
        /// Print the response's status line and headers too.
        #[arg(long, short)]
        include: bool,
        /// Exit 22 on an HTTP status of 400 or more.
        #[arg(long, short)]
        fail: bool,
    },
    /// Where the proxy listens (no flags: show it).
    Port {
        /// HTTP port of the proxy (0 turns HTTP off).
        #[arg(long)]
        proxy: Option<u16>,
        /// HTTPS port of the proxy (0 turns HTTPS off).
        #[arg(long)]
        https: Option<u16>,
    },
    /// `/etc/hosts` lines for every routed hostname (for tools that cannot resolve *.localhost).
    Hosts {
        /// Write them into /etc/hosts (a managed block binky keeps current as worlds come and
        /// go; needs write access to the file).
        #[arg(long, conflicts_with = "remove")]
        write: bool,
        /// Remove binky's block from /etc/hosts (binky no longer keeps it).
        #[arg(long)]
        remove: bool,
    },
    /// Install binky's local CA in the system trust store (and say how for browsers).
    Trust {
        /// Remove it instead.
        #[arg(long)]
        uninstall: bool,
    },
    /// The servers binky runs itself for adapter services without `admin_url`.
    Servers {
        /// `stop` stops them (their data is kept).
        #[arg(value_parser = ["stop"])]
        action: Option<String>,
        /// Only this kind (postgres, redis).
        kind: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The golden templates worlds are cloned from (`ls`, `rm KEY`).
    Golden {
        /// `ls` or `rm`.
        #[arg(value_parser = ["ls", "rm"], default_value = "ls")]
        action: String,
        /// The template's key (or its start), for `rm`.
        key: Option<String>,
        /// Machine-readable output (`ls`).
        #[arg(long)]
        json: bool,
        /// How `rm` waits for the drop.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Find slices that belong to no world and drop them after confirming.
    Gc {
        /// Drop them without asking.
        #[arg(long, short)]
        yes: bool,
        /// Also search shared servers named by `admin_url` (they may hold other binky homes' slices).
        #[arg(long)]
        all_servers: bool,
        /// Also drop the slices of the binky home ID, which no longer exists (its store was deleted); repeatable.
        #[arg(long, value_name = "ID")]
        gone_home: Vec<String>,
        /// Also drop slices no home's mark names (made before binky marked its slices), once no other home uses them.
        #[arg(long)]
        unmarked: bool,
    },
    /// Write a starting binky.toml from the docker-compose file (and .env) in DIR.
    Init {
        /// The project's directory (default: the current one).
        dir: Option<std::path::PathBuf>,
        /// Overwrite an existing binky.toml.
        #[arg(long)]
        force: bool,
        /// The compose file(s) to read, as `docker compose -f` (repeat to merge several;
        /// default: COMPOSE_FILE, else compose.yaml and its override, else a
        /// docker-compose.<local|dev>.yml).
        #[arg(long = "file", short = 'f')]
        files: Vec<std::path::PathBuf>,
    },
    /// An MCP server over stdio for agents without a shell (`install` registers it in a client).
    Mcp {
        /// `install --client claude|cursor|codex`; none: serve MCP on stdin/stdout.
        #[command(subcommand)]
        action: Option<mcp::McpAction>,
    },
    /// Copy stdin to LOG with credentials scrubbed (started by the daemon per service).
    #[command(name = "__scrub", hide = true)]
    Scrub {
        /// The log file to append to.
        log: std::path::PathBuf,
    },
    /// The background daemon that runs every world.
    Daemon {
        /// start, stop, status or run (in the foreground).
        action: DaemonAction,
    },
}

/// `binky daemon …`
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DaemonAction {
    /// Start it in the background (commands also start it on demand).
    Start,
    /// Stop it; services keep running and are adopted by the next daemon.
    Stop,
    /// Stop it and start a new one (a new binky binary takes over); services keep running.
    Restart,
    /// Is it running? (exit 1 when not)
    Status,
    /// Run it in the foreground.
    Run,
}

/// Run a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    if let Command::Daemon {
        action: DaemonAction::Run,
    } = cli.command
    {
        return daemon::run_foreground();
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("binky: cannot start: {e}");
            return exit::FAILED;
        }
    };
    let result = rt.block_on(dispatch(cli.command));
    match result {
        Ok(code) => code,
        Err(f) => {
            crate::failure::report::print(&f);
            f.code
        }
    }
}

/// Runs `command`: one arm a command, each handing its arguments to its module.
async fn dispatch(command: Command) -> Result<i32, Failure> {
    // A person's command line is refused from a process binky started before it begins.
    guard::refuse(&command)?;
    match command {
        Command::Up {
            name,
            group,
            from,
            wait,
        } => up::run(&name, group, from, &wait).await,
        Command::Down { name, wait } => down::run(name, &wait).await,
        Command::Wait { name, json, wait } => wait::run(name, json, &wait).await,
        Command::Check { path, json } => check::run(path, json),
        Command::Doctor { json } => doctor::run(json).await,
        Command::Exec {
            name,
            service,
            cmd,
            leave_nothing,
        } => exec::run(&name, service, cmd, leave_nothing).await,
        Command::Verify { name, json } => exec::verify(name, json),
        Command::Settings { assignments, json } => settings::run(assignments, json, false).await,
        Command::Config { json } => settings::run(Vec::new(), json, true).await,
        Command::Reserve { ram, disk } => reserve(ram, disk).await,
        Command::Metrics => metrics::run().await,
        Command::Dashboard { tui: true, .. } => top::run().await,
        Command::Dashboard { no_open, json, .. } => dashboard::run(no_open, json).await,
        Command::Version { json } => version(json),
        Command::Approve(args) => approve::run(args).await,
        Command::Apply {
            name,
            all,
            dry_run,
            json,
            wait,
        } => apply::run(name, all, dry_run, json, &wait).await,
        Command::Reload { name, group, wait } => reload::run(name, group, &wait).await,
        Command::Remove { name, force, wait } => remove::run(&name, force, &wait).await,
        Command::Status { name, json } => status::run(name, json).await,
        Command::Top => top::run().await,
        Command::Env {
            name, shell, json, ..
        } => env::run(name, shell, json),
        Command::Logs {
            name,
            service,
            follow,
            lines,
            json,
        } => logs::run(name, service, follow, lines, json).await,
        Command::Events { name, lines, json } => events::run(name, lines, json),
        Command::Curl {
            name,
            service,
            path,
            request,
            data,
            header,
            include,
            fail,
        } => {
            curl::run(curl::CurlArgs {
                name,
                service,
                path,
                method: request,
                data,
                headers: header,
                include,
                fail,
            })
            .await
        }
        Command::Port { proxy, https } => port::run(proxy, https).await,
        Command::Trust { uninstall } => trust::run_trust(uninstall),
        Command::Hosts { write, remove } => hosts::run(write, remove),
        Command::Servers { action, kind, json } => servers::run(action.is_some(), kind, json).await,
        Command::Gc {
            yes,
            all_servers,
            gone_home,
            unmarked,
        } => {
            let also = gc::Also {
                gone_homes: gone_home,
                unmarked,
            };
            gc::run(yes, all_servers, also).await
        }
        Command::Golden {
            action,
            key,
            json,
            wait,
        } => golden::run(&action, key, json, &wait).await,
        Command::Init { dir, force, files } => init::run(dir, force, files),
        Command::Mcp { action } => mcp::run(action).await,
        Command::Scrub { log } => Ok(crate::scrub::run_shim(&log)),
        Command::Daemon { action } => daemon::run(action).await,
    }
}

/// `binky reserve`: sets the reserves given, or shows them when none is.
async fn reserve(ram: Option<String>, disk: Option<String>) -> Result<i32, Failure> {
    let mut set: Vec<String> = Vec::new();
    set.extend(ram.map(|v| format!("ram_reserve_percent={v}")));
    set.extend(disk.map(|v| format!("disk_reserve_gib={v}")));
    if set.is_empty() {
        settings::show_reserves()
    } else {
        settings::run(set, false, false).await
    }
}

/// `binky version`: this binary's version, as text or JSON.
fn version(json: bool) -> Result<i32, Failure> {
    let version = env!("CARGO_PKG_VERSION");
    if json {
        println!("{}", serde_json::json!({ "version": version }));
    } else {
        println!("binky {version}");
    }
    Ok(exit::OK)
}
