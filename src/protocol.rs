//! The daemon's control socket protocol, one JSON object per line each way: what the
//! daemon answers and what its clients (the commands, `binky status`'s and `binky metrics`'
//! views) read, below both so neither imports the other for it.

use serde::{Deserialize, Serialize};

/// A request to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Are you there? (answers pid, version, uptime)
    Ping,
    /// Reconcile this world (or every world) now.
    Nudge {
        /// The world's id; none means all.
        #[serde(default)]
        world: Option<i64>,
    },
    /// Stop the daemon (services keep running).
    Shutdown,
    /// Re-read the machine settings (the proxy's ports) and apply them.
    Reconfigure,
    /// A one-time token that signs a browser in to the dashboard (`binky dashboard`).
    DashboardToken,
    /// Stop managed servers (all, or one kind); their data is kept.
    StopServers {
        /// `postgres`, `redis`; none: all.
        #[serde(default)]
        kind: Option<String>,
    },
}

impl Request {
    /// What this request does that is a person's to do, and who may do it instead: the
    /// daemon refuses it to a caller binky started, as the command that sends it does.
    pub fn persons(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Request::Shutdown => Some((
                "stopping the binky daemon (which runs every world)",
                "ask a person to run `binky daemon stop` in their own terminal",
            )),
            Request::StopServers { .. } => Some((
                "stopping binky's managed servers (every world's databases on them)",
                "ask a person to run `binky servers stop` in their own terminal",
            )),
            Request::DashboardToken => Some((
                "signing a browser in to the dashboard",
                crate::person::IN_A_TERMINAL_OR_THE_DASHBOARD,
            )),
            Request::Ping | Request::Nudge { .. } | Request::Reconfigure => None,
        }
    }
}

/// The daemon's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request was done.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The daemon's pid (ping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its version (ping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Seconds since it started (ping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_secs: Option<u64>,
    /// Its resident memory (ping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// The home it serves (ping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// The dashboard's one-time sign-in token (dashboard_token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Servers stopped (stop_servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Vec<String>>,
    /// What each controller's work has cost since the daemon started (ping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controllers: Option<std::collections::BTreeMap<String, binky_controllers::runtime::Timing>>,
}

impl Response {
    /// Done.
    pub fn ok() -> Response {
        Response {
            ok: true,
            ..Response::default()
        }
    }

    /// Not done, because.
    pub fn error(msg: String) -> Response {
        Response {
            ok: false,
            error: Some(msg),
            ..Response::default()
        }
    }
}
