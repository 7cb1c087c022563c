//! Every tool's arguments: what a client may pass, as its inputSchema says. Unknown
//! arguments are refused (a misspelt one would otherwise be ignored).

use rmcp::schemars::JsonSchema;
use serde::Deserialize;

/// A tool's parameters, as every tool takes them: read from the call's JSON, described in
/// the tool's inputSchema (through rmcp's schemars), unknown ones refused.
macro_rules! params {
    ($(#[$doc:meta])* pub struct $name:ident { $($body:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize, JsonSchema)]
        #[schemars(crate = "rmcp::schemars")]
        #[serde(deny_unknown_fields)]
        pub struct $name { $($body)* }
    };
}

/// A tool's parameters that name one world: `world` (or `worktree`), `project` and `root`,
/// described alike in every tool's inputSchema, then the tool's own.
macro_rules! world_params {
    ($(#[$doc:meta])* pub struct $name:ident { $($(#[$fdoc:meta])* pub $field:ident: $ty:ty,)* }) => {
        params! {
            $(#[$doc])*
            pub struct $name {
                /// World name (`worktree` is accepted).
                #[serde(alias = "worktree")]
                pub world: String,
                /// The project (name) the world is in.
                pub project: Option<String>,
                /// The repository to run in (absolute path).
                pub root: Option<String>,
                $($(#[$fdoc])* pub $field: $ty,)*
            }
        }
    };
}

params! {
    /// Parameters naming one world.
    pub struct WorldParams {
        /// World name (also its git branch); `worktree` is accepted for it too.
        #[serde(alias = "worktree")]
        pub world: String,
        /// The project the world is in (its name, as `list` shows it), when a world name is used
        /// by several projects; default: the project of the server's directory.
        pub project: Option<String>,
        /// The repository (or one of its worktrees) to run in, an absolute path: another way to
        /// pick the project.
        pub root: Option<String>,
    }
}

params! {
    /// `up`'s parameters.
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
}

params! {
    /// `list`'s parameters.
    pub struct ListParams {
        /// Only this project's worlds.
        pub project: Option<String>,
        /// Only the worlds of the repository at this absolute path.
        pub root: Option<String>,
    }
}

params! {
    /// `status`' parameters.
    pub struct StatusParams {
        /// One world in detail; none: every world (`worktree` is accepted).
        #[serde(alias = "worktree")]
        pub world: Option<String>,
        /// The project (name) to look in.
        pub project: Option<String>,
        /// The repository to look in (absolute path).
        pub root: Option<String>,
        /// Only the summary, state, services' states and URLs: of one world when true (default
        /// false); of every world unless false (default true).
        pub compact: Option<bool>,
    }
}

world_params! {
    /// `logs`' parameters.
    pub struct LogsParams {
        /// One service; none: every service.
        pub service: Option<String>,
        /// Lines in total (default 100, at most 5000): the newest, shared out evenly between the
        /// services when there are several.
        pub lines: Option<u32>,
    }
}

world_params! {
    /// `events`' parameters.
    pub struct EventsParams {
        /// How many of the newest events (default 50, at most 1000).
        pub lines: Option<u32>,
    }
}

world_params! {
    /// `curl`'s parameters.
    pub struct CurlParams {
        /// Service name (one with a `url`).
        pub service: String,
        /// Path and query, starting with `/`, e.g. `/health`.
        pub path: String,
        /// HTTP method (default GET, or POST with a body).
        pub method: Option<String>,
        /// Request body (sent as application/json), at most 1 MiB.
        pub body: Option<String>,
    }
}

world_params! {
    /// `wait`'s parameters.
    pub struct WaitParams {
        /// Give up after this many seconds (default 55, at most 600).
        pub timeout_seconds: Option<u64>,
    }
}

world_params! {
    /// `exec`'s parameters.
    pub struct ExecParams {
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
}

world_params! {
    /// `verify`'s parameters.
    pub struct VerifyParams {
        /// Stop the commands after this many seconds (default 300, at most 1800).
        pub timeout_seconds: Option<u64>,
    }
}

params! {
    /// `check`'s parameters.
    pub struct CheckParams {
        /// The binky.toml (or its directory) relative to the repository; default: the one at
        /// the repository's top.
        pub path: Option<String>,
        /// The project (name) whose repository to check in.
        pub project: Option<String>,
        /// The repository (or worktree) to check in (absolute path); default: the server's.
        pub root: Option<String>,
    }
}

world_params! {
    /// `apply`'s parameters.
    pub struct ApplyParams {
        /// Only say what would change; change nothing.
        pub dry_run: Option<bool>,
    }
}

params! {
    /// `approvals`' parameters.
    pub struct ApprovalsParams {
        /// Only what this world waits for (`worktree` is accepted).
        #[serde(alias = "worktree")]
        pub world: Option<String>,
        /// Only this project's.
        pub project: Option<String>,
        /// Only the project of the repository at this absolute path.
        pub root: Option<String>,
    }
}
