//! What controllers hand the store to write: their conditions, the routes, a new
//! worktree's planned paths, a golden template's inputs, and where a process was put and
//! what it uses. These live with the store, the layer below the controllers, so that the
//! store's writers need nothing from above.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::limits::Mechanism;
use crate::store::{CondStatus, RouteState};

/// A condition a controller reports about a world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// E.g. `WorktreeReady`.
    pub type_: &'static str,
    /// True, False or Unknown.
    pub status: CondStatus,
    /// CamelCase reason.
    pub reason: String,
    /// A human sentence, naming the fix where there is one.
    pub message: String,
    /// Waiting will not fix it: a person must act (`binky up` stops waiting and fails).
    pub stalled: bool,
}

impl Condition {
    /// The condition holds.
    pub fn ok(type_: &'static str, reason: &str, message: impl Into<String>) -> Condition {
        Condition {
            type_,
            status: CondStatus::True,
            reason: reason.into(),
            message: message.into(),
            stalled: false,
        }
    }

    /// Not yet: waiting fixes it.
    pub fn waiting(type_: &'static str, reason: &str, message: impl Into<String>) -> Condition {
        Condition {
            type_,
            status: CondStatus::False,
            reason: reason.into(),
            message: message.into(),
            stalled: false,
        }
    }

    /// Failed: a person has to act.
    pub fn failed(type_: &'static str, reason: &str, message: impl Into<String>) -> Condition {
        Condition {
            type_,
            status: CondStatus::False,
            reason: reason.into(),
            message: message.into(),
            stalled: true,
        }
    }
}

/// One routed hostname.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    /// The hostname (lower case, no port).
    pub host: String,
    /// Project name.
    pub project: String,
    /// World name.
    pub world: String,
    /// Service name.
    pub service: String,
    /// The backend port on 127.0.0.1 (replica 0's, for a replicated service).
    pub port: u16,
    /// The ports of a replicated service's replicas that answer (ready, or unhealthy and
    /// kept running), which the proxy balances over round robin; empty for a service with
    /// one replica, or none ready (then `port` is the backend).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<u16>,
    /// The project serves HTTPS too.
    pub https: bool,
    /// Whether the backend should answer.
    pub state: RouteState,
    /// Why it is not ready (for the proxy's error pages).
    pub note: String,
}

/// One path a new worktree is to get: where from, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Relative to the worktree's top.
    pub path: String,
    /// The checkout it comes from (the main one, or another world's).
    pub from: PathBuf,
    /// Link (the default) or copy.
    pub mode: crate::spec::CopyMode,
}

/// What a service's golden template is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoldenInputs {
    /// The template's key ([`golden_key`]).
    pub key: String,
    /// The service the template belongs to: a hash of the project, the service, the
    /// adapter, the server, `clone_from`, `migrate` and the workdir. Templates of one
    /// lineage differ only in their files (and `seed`): a later one may grow from an
    /// earlier one.
    pub lineage: String,
    /// `migrate`'s inputs: every key file but those only `seed` reads, path → hash.
    pub migrations: BTreeMap<String, String>,
}

/// Where a spawned process was put: its cgroup, and what enforces its limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The cgroup it runs in, as the supervisor names it (opaque to the controller: it is
    /// recorded and handed back to [`crate::supervisor::Supervisor::usage`] and
    /// [`crate::supervisor::Supervisor::release`]).
    pub cgroup: Option<String>,
    /// What enforces its limits.
    pub mechanism: Mechanism,
    /// Why nothing enforces them, when nothing does (with the fix).
    pub note: String,
}

/// What a service uses, read from its cgroup (or its process group without one; its Job
/// object on Windows): the platform's figures as they are.
pub use binky_platform::limits::Usage;
