//! The validated world spec: a `binky.toml` after parsing, in the form the store keeps.
//!
//! `binky` parses and validates the file (with file, line and key path in every error) and
//! builds these types; the controllers only ever see a spec that passed validation. The
//! spec is stored as JSON in the world's desired record, one generation per change.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default range ports are allocated from when `[project] port_range` is not set.
pub const DEFAULT_PORT_RANGE: (u16, u16) = (4000, 4999);

/// How long a service may take to pass its health check, unless `health.timeout` says.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a service without `health` may take to listen on its port when its world
/// records no command's `--timeout` (the commands' default wait).
pub const DEFAULT_PORT_WAIT: Duration = Duration::from_secs(120);

/// A whole `binky.toml`, validated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// `[project]`
    pub project: Project,
    /// `[services.NAME]`, by name.
    pub services: BTreeMap<String, Service>,
    /// Service names in the order the file lists them (the first URL service is the
    /// world's own host).
    #[serde(default)]
    pub order: Vec<String>,
    /// `[groups]`, with `"*"` expanded to every service.
    pub groups: BTreeMap<String, Vec<String>>,
    /// `[agents]`
    #[serde(default)]
    pub agents: Agents,
    /// `[hooks]`
    #[serde(default)]
    pub hooks: Hooks,
}

/// `[project]`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    /// The project's name: part of every hostname and slice name.
    pub name: String,
    /// Base domain for URLs; `None` means `<name>.localhost`.
    pub domain: Option<String>,
    /// Where this project's ports come from, inclusive.
    pub port_range: Option<(u16, u16)>,
    /// Also serve the project's URLs over HTTPS.
    pub https: bool,
    /// Ignored paths of the main checkout copied into a new world's worktree before any
    /// `setup` (dependency directories: `node_modules`, `.venv`; gitignore patterns,
    /// relative to binky.toml's directory), on top of what `.worktreeinclude` (at the
    /// repository's top) lists. binky only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copy: Vec<String>,
    /// The `copy` paths that say how they are brought (`{ path = "…", mode = "copy" }`);
    /// the others are linked. binky only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub copy_modes: BTreeMap<String, CopyMode>,
}

/// How a bootstrapped path's files reach a new worktree. Either way a file is cloned
/// copy-on-write where the filesystem can (btrfs, XFS, bcachefs, APFS): no data is shared
/// that a write could change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyMode {
    /// Else hard-linked (the default, as pnpm and uv do): no data copied, and a file
    /// edited in place shows in every worktree that links it.
    #[default]
    Link,
    /// Else copied byte by byte: each worktree's files are its own.
    Copy,
}

impl CopyMode {
    /// `link` or `copy`.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyMode::Link => "link",
            CopyMode::Copy => "copy",
        }
    }
}

impl Project {
    /// The base domain: `domain`, else `<name>.localhost`.
    pub fn domain(&self) -> String {
        self.domain
            .clone()
            .unwrap_or_else(|| format!("{}.localhost", self.name))
    }

    /// The inclusive port range this project allocates from.
    pub fn port_range(&self) -> (u16, u16) {
        self.port_range.unwrap_or(DEFAULT_PORT_RANGE)
    }
}

/// One `[services.NAME]` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// Services that must be ready before this one starts.
    pub depends_on: Vec<String>,
    /// One instance for all worlds of the project (see [`crate::shared`]).
    pub shared: bool,
    /// A process (has `cmd`) or a resource (has `adapter`).
    pub kind: ServiceKind,
}

/// A service is either a process or a resource, never both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServiceKind {
    /// A supervised process.
    Process(Process),
    /// A slice of a shared server, served by an adapter.
    Resource(Resource),
}

impl Service {
    /// Every setting of this service that tokens are resolved in, with its key (see
    /// [`Process::token_fields`], [`Resource::token_fields`]): what `${secret:…}` and unset
    /// `${env.…}` references are looked for in.
    pub fn token_fields(&self) -> Vec<(String, &str)> {
        match &self.kind {
            ServiceKind::Process(p) => p.token_fields(),
            ServiceKind::Resource(r) => r.token_fields(),
        }
    }

    /// The `env_file`s the daemon reads for this service (they may set `${env.…}` values).
    pub fn env_files(&self) -> &[String] {
        match &self.kind {
            ServiceKind::Process(p) => &p.env_file,
            ServiceKind::Resource(r) => &r.env_file,
        }
    }

    /// The process part, if this service is a process.
    pub fn process(&self) -> Option<&Process> {
        match &self.kind {
            ServiceKind::Process(p) => Some(p),
            ServiceKind::Resource(_) => None,
        }
    }

    /// The resource part, if this service is an adapter service.
    pub fn resource(&self) -> Option<&Resource> {
        match &self.kind {
            ServiceKind::Resource(r) => Some(r),
            ServiceKind::Process(_) => None,
        }
    }

    /// The port labels this service asks for, in order: its `ports`, else one primary
    /// port (label `""`) when it has a `url`, else none.
    pub fn port_labels(&self) -> Vec<String> {
        match &self.kind {
            ServiceKind::Process(p) => p.port_labels(),
            ServiceKind::Resource(_) => Vec::new(),
        }
    }
}

/// Restart policy of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// Restart when it exits non-zero or is killed by a signal.
    #[default]
    OnFailure,
    /// Restart whenever it exits.
    Always,
    /// Never restart.
    Never,
}

impl Restart {
    /// The spelling used in `binky.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Restart::OnFailure => "on-failure",
            Restart::Always => "always",
            Restart::Never => "never",
        }
    }
}

/// `limits = { cpu = "…", memory = "…" }`, as written; [`Limits::resolve`] reads them
/// (`crate::limits`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU limit, as written.
    pub cpu: Option<String>,
    /// Memory limit, as written.
    pub memory: Option<String>,
}

/// The process part of a service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// The command, run through `sh -c`.
    pub cmd: String,
    /// Runs once per world before the service's first start.
    pub setup: Option<String>,
    /// Working directory relative to the directory holding `binky.toml`.
    pub workdir: String,
    /// Restart policy (defaults applied).
    pub restart: Restart,
    /// Resource limits (defaults applied), enforced by the supervisor.
    pub limits: Option<Limits>,
    /// The URL this service is served under, if any.
    pub url: Option<UrlSpec>,
    /// Named ports, in the order written.
    pub ports: Option<Vec<String>>,
    /// Readiness check.
    pub health: Option<Health>,
    /// Globs that restart the service when matching files change (not supported yet).
    pub watch: Vec<String>,
    /// Extra environment, tokens unresolved.
    pub env: BTreeMap<String, String>,
    /// Dotenv files, relative to the directory holding `binky.toml`.
    pub env_file: Vec<String>,
    /// Number of instances, each with its own ports (see [`crate::replica`]).
    pub replicas: u32,
    /// How it is stopped (`stop_signal`, `stop_grace_period`, `stop_after_dependents`).
    #[serde(default, skip_serializing_if = "Stopping::is_default")]
    pub stop: Stopping,
}

/// How a process service is stopped (`binky down`, `remove`, `reload`, a restart): its
/// `stop_signal` goes to its process group, and SIGKILL follows once its
/// `stop_grace_period` has passed with anything of the group left.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopping {
    /// The signal that asks it to stop, by its name with `SIG` (`SIGQUIT`); none: SIGTERM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// How long it may take to stop before SIGKILL, in milliseconds; none: the daemon's
    /// grace (5 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
    /// `binky down`, `remove` and `reload` stop it only once every service that depends on
    /// it (directly or through others) has stopped; without it, every service of the world
    /// is signalled at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_dependents: bool,
}

/// The signal a service is stopped with unless its `stop_signal` says.
pub const DEFAULT_STOP_SIGNAL: &str = "SIGTERM";

impl Stopping {
    /// Nothing set: SIGTERM, the daemon's grace, every service at once.
    pub fn is_default(&self) -> bool {
        *self == Stopping::default()
    }

    /// The signal's name (`SIGTERM` unless `stop_signal` says).
    pub fn signal(&self) -> &str {
        self.signal.as_deref().unwrap_or(DEFAULT_STOP_SIGNAL)
    }
}

/// The fields of a process service whose change restarts it while it runs, each with a
/// digest of its text, in the order a message names them. The one answer to "does this
/// edit restart the service, and why": `binky apply`'s plan asks it of the old and new
/// spec, the process controller of the key recorded when the service started and today's.
///
/// `ports` is in it: each label is a variable of the service's environment
/// (`PORT_<LABEL>`). Not in it: the health check's `timeout` (the next probe takes it),
/// `url`, `restart`, `watch`, `limits` and the stop keys (used at the next start or stop,
/// not by the running program).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartKey(BTreeMap<String, String>);

/// The fields of a [`RestartKey`], in the order a message names them.
const RESTART_FIELDS: [&str; 7] = [
    "cmd", "env", "env_file", "workdir", "ports", "health", "setup",
];

impl RestartKey {
    /// The key as recorded (JSON).
    pub fn encode(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// A recorded key; `None` when it cannot be read (recorded by another binky).
    pub fn decode(text: &str) -> Option<RestartKey> {
        serde_json::from_str(text).ok().map(RestartKey)
    }

    /// The fields that changed from `self` (what the service started with) to `new`, and so
    /// restart it: `setup` only when `new` has one (it runs again before the service starts
    /// again; a setup removed has nothing left to run).
    pub fn changed(&self, new: &RestartKey) -> Vec<&'static str> {
        RESTART_FIELDS
            .into_iter()
            .filter(|f| self.0.get(*f) != new.0.get(*f))
            .filter(|f| *f != "setup" || new.0.contains_key("setup"))
            .collect()
    }
}

impl Process {
    /// What of this service restarts it when it changes ([`RestartKey`]).
    pub fn restart_key(&self) -> RestartKey {
        fn digest<T: Serialize + ?Sized>(v: &T) -> String {
            use sha2::{Digest, Sha256};
            let d = Sha256::digest(serde_json::to_vec(v).unwrap_or_default());
            d.iter().take(8).map(|b| format!("{b:02x}")).collect()
        }
        let mut key = BTreeMap::new();
        key.insert("cmd".to_owned(), digest(&self.cmd));
        key.insert("env".to_owned(), digest(&self.env));
        key.insert("env_file".to_owned(), digest(&self.env_file));
        key.insert("workdir".to_owned(), digest(&self.workdir));
        key.insert("ports".to_owned(), digest(&self.port_labels()));
        if let Some(h) = &self.health {
            key.insert("health".to_owned(), digest(&h.probe));
        }
        if let Some(setup) = &self.setup {
            key.insert("setup".to_owned(), digest(setup));
        }
        RestartKey(key)
    }

    /// `cmd`, `setup`, `workdir`, `health`, `env.NAME`, with their text.
    pub fn token_fields(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = vec![("cmd".into(), &self.cmd)];
        out.extend(self.setup.as_deref().map(|t| ("setup".to_owned(), t)));
        out.push(("workdir".into(), &self.workdir));
        if let Some(h) = &self.health {
            let (Probe::Http(t) | Probe::Tcp(t) | Probe::Cmd(t)) = &h.probe;
            out.push(("health".into(), t));
        }
        out.extend(
            self.env
                .iter()
                .map(|(k, v)| (format!("env.{k}"), v.as_str())),
        );
        out
    }

    /// See [`Service::port_labels`].
    pub fn port_labels(&self) -> Vec<String> {
        if let Some(ports) = &self.ports {
            return ports.clone();
        }
        if self.url.is_some() {
            return vec![String::new()];
        }
        self.implicit_ports()
    }

    /// The ports a service that declares neither `ports` nor `url` uses anyway: its
    /// `${self.port}` (or `${self.url}`) is a primary port, its `${self.LABEL}` a named one,
    /// in the order its `cmd`, `setup`, `workdir`, `health` and `env` first name them.
    /// Left unresolved, such a token would reach the process as text and it would die on its
    /// own arguments; instead it gets the port it asks for (`binky check` warns, naming where).
    pub fn implicit_ports(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (_, text) in self.token_fields() {
            for label in self_references(text) {
                if !out.contains(&label) {
                    out.push(label);
                }
            }
        }
        // The primary port comes first, as a declared one would.
        if let Some(i) = out.iter().position(String::is_empty) {
            let primary = out.remove(i);
            out.insert(0, primary);
        }
        out
    }
}

/// The port labels `${self.…}` tokens in `text` name: `port`, `url` and `proxy_url` the
/// primary port (label `""`), anything else a named port.
pub fn self_references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${self.") {
        let after = &rest[start + 7..];
        let Some(end) = after.find('}') else { break };
        let attr = &after[..end];
        let label = match attr {
            "port" | "url" | "proxy_url" => String::new(),
            l if !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                l.to_owned()
            }
            _ => {
                rest = &after[end + 1..];
                continue;
            }
        };
        if !out.contains(&label) {
            out.push(label);
        }
        rest = &after[end + 1..];
    }
    out
}

/// `url = true | "label" | { port_label = "subdomain" }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UrlSpec {
    /// `url = true`: the subdomain is the service's name, on its primary port.
    Service,
    /// `url = "web"`: that subdomain, on the primary port.
    Subdomain(String),
    /// `url = { http = "web" }`: subdomain `web` on the port labelled `http`.
    Port {
        /// The port label.
        label: String,
        /// The subdomain.
        subdomain: String,
    },
}

impl UrlSpec {
    /// The subdomain (first DNS label) this URL is served under.
    pub fn subdomain<'a>(&'a self, service: &'a str) -> &'a str {
        match self {
            UrlSpec::Service => service,
            UrlSpec::Subdomain(s) => s,
            UrlSpec::Port { subdomain, .. } => subdomain,
        }
    }

    /// The port label the URL points at (`""` = primary).
    pub fn port_label(&self) -> &str {
        match self {
            UrlSpec::Port { label, .. } => label,
            _ => "",
        }
    }
}

/// A health check: readiness while the service starts, then checked again every `interval`
/// while it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// What to probe.
    pub probe: Probe,
    /// How long the service may take to pass, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// How often a running service is checked again, in milliseconds.
    #[serde(default)]
    pub interval_ms: Option<u64>,
    /// Failed checks in a row that make a running service unhealthy.
    #[serde(default)]
    pub retries: Option<u32>,
    /// What an unhealthy service gets.
    #[serde(default)]
    pub on_unhealthy: OnUnhealthy,
}

/// How often a running service's health is checked unless `interval` says.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// How long a probe of a service without `health` (its port) may take to connect.
pub const PROBE_ANSWER: Duration = Duration::from_secs(2);
/// Failed checks in a row that make a running service unhealthy unless `retries` says.
pub const DEFAULT_HEALTH_RETRIES: u32 = 3;

impl Health {
    /// A check of `probe` with every default.
    pub fn of(probe: Probe) -> Health {
        Health {
            probe,
            timeout_ms: None,
            interval_ms: None,
            retries: None,
            on_unhealthy: OnUnhealthy::default(),
        }
    }

    /// The time allowed to become healthy.
    pub fn timeout(&self) -> Duration {
        self.timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_HEALTH_TIMEOUT)
    }

    /// How often a running service is checked.
    pub fn interval(&self) -> Duration {
        self.interval_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_HEALTH_INTERVAL)
    }

    /// Failed checks in a row that make it unhealthy.
    pub fn retries(&self) -> u32 {
        self.retries.unwrap_or(DEFAULT_HEALTH_RETRIES).max(1)
    }
}

/// What binky does with a service that stays unhealthy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnhealthy {
    /// Stop it and start it again (as its `restart` policy would after a crash).
    #[default]
    Restart,
    /// Leave it running, shown `unhealthy`, and keep checking.
    Keep,
}

impl OnUnhealthy {
    /// The word in `binky.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnhealthy::Restart => "restart",
            OnUnhealthy::Keep => "keep",
        }
    }
}

/// One of the three probe kinds; values are token templates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    /// GET this URL (or path on the primary port); ready on a status below 500.
    Http(String),
    /// Connect to this port (or `host:port`).
    Tcp(String),
    /// Run this shell command; ready when it exits 0.
    Cmd(String),
}

/// `sync` mode of a shared resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// No syncing (the default).
    #[default]
    Off,
    /// Notify.
    Notify,
    /// Change data capture.
    Cdc,
    /// Reactive.
    Reactive,
}

/// The resource part of a service (an adapter slice).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resource {
    /// Adapter name (built-in, or `binky-adapter-<name>` on PATH).
    pub adapter: String,
    /// The shared server's admin address (a token template).
    pub admin_url: Option<String>,
    /// Runs once per slice after provisioning.
    pub migrate: Option<String>,
    /// Runs once per slice after `migrate`.
    pub seed: Option<String>,
    /// Name of the golden template to clone from.
    pub clone_from: Option<String>,
    /// Files (globs, relative to the workdir) whose contents key the golden template, so
    /// a changed migration rebuilds it; none: the files the commands name.
    #[serde(default)]
    pub clone_key_files: Option<Vec<String>>,
    /// Sync mode (needs `shared = true`).
    pub sync: SyncMode,
    /// Buckets to create (object stores).
    pub buckets: Vec<String>,
    /// Free-form adapter options, handed over as they are.
    pub options: BTreeMap<String, String>,
    /// Where `migrate` and `seed` run, relative to the directory holding `binky.toml`.
    #[serde(default = "dot")]
    pub workdir: String,
    /// Extra environment for `migrate` and `seed`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Dotenv files for `migrate` and `seed`.
    #[serde(default)]
    pub env_file: Vec<String>,
}

impl Resource {
    /// `admin_url`, `migrate`, `seed`, `workdir`, `options.NAME`, `env.NAME`, with their text.
    pub fn token_fields(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = Vec::new();
        out.extend(
            self.admin_url
                .as_deref()
                .map(|t| ("admin_url".to_owned(), t)),
        );
        out.extend(self.migrate.as_deref().map(|t| ("migrate".to_owned(), t)));
        out.extend(self.seed.as_deref().map(|t| ("seed".to_owned(), t)));
        out.push(("workdir".into(), &self.workdir));
        out.extend(
            self.options
                .iter()
                .map(|(k, v)| (format!("options.{k}"), v.as_str())),
        );
        out.extend(
            self.env
                .iter()
                .map(|(k, v)| (format!("env.{k}"), v.as_str())),
        );
        out
    }

    /// Is `field` (a key of [`Resource::token_fields`]) one of the server's settings, which
    /// see only the environment of `binky up` (no `env_file`)?
    pub fn is_server_setting(field: &str) -> bool {
        field == "admin_url" || field.starts_with("options.")
    }
}

fn dot() -> String {
    ".".into()
}

/// `[agents]`
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agents {
    /// The agent harness name.
    pub harness: Option<String>,
    /// Services `binky env` hands out (empty: all).
    pub expose: Vec<String>,
    /// Commands `binky verify` runs.
    pub verify: Vec<String>,
}

/// `[hooks]`
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hooks {
    /// Runs in the worktree once the world is up.
    pub post_up: Option<String>,
    /// Runs in the worktree before the world's processes stop.
    pub pre_down: Option<String>,
}

/// A dependency cycle, named in order (`a -> b -> a`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("dependency cycle: {}", .0.join(" -> "))]
pub struct Cycle(pub Vec<String>);

impl Spec {
    /// The adapter part of service `name`, when it is an adapter service.
    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.services.get(name).and_then(Service::resource)
    }

    /// The services of a world that runs `group` (`None`: every service): the group's
    /// members and everything they depend on, transitively.
    pub fn selected(&self, group: Option<&str>) -> BTreeSet<String> {
        let roots: Vec<String> = match group.and_then(|g| self.groups.get(g)) {
            Some(members) => members.clone(),
            None => self.services.keys().cloned().collect(),
        };
        let mut out = BTreeSet::new();
        let mut stack = roots;
        while let Some(name) = stack.pop() {
            if !out.insert(name.clone()) {
                continue;
            }
            if let Some(svc) = self.services.get(&name) {
                stack.extend(svc.depends_on.iter().cloned());
            }
        }
        out.retain(|n| self.services.contains_key(n));
        out
    }

    /// Services in dependency order (dependencies first), or the cycle that prevents it.
    pub fn start_order(&self) -> Result<Vec<String>, Cycle> {
        use petgraph::graphmap::DiGraphMap;
        let mut graph: DiGraphMap<&str, ()> = DiGraphMap::new();
        for (name, svc) in &self.services {
            graph.add_node(name.as_str());
            for dep in &svc.depends_on {
                if self.services.contains_key(dep) {
                    graph.add_edge(dep.as_str(), name.as_str(), ());
                }
            }
        }
        match petgraph::algo::toposort(&graph, None) {
            Ok(order) => Ok(order.into_iter().map(str::to_owned).collect()),
            Err(cycle) => Err(Cycle(self.cycle_through(cycle.node_id()))),
        }
    }

    /// A readable cycle that passes through `start` (`start -> … -> start`).
    fn cycle_through(&self, start: &str) -> Vec<String> {
        // Depth-first search over depends_on edges until we come back to `start`.
        fn dfs(
            spec: &Spec,
            node: &str,
            start: &str,
            path: &mut Vec<String>,
            seen: &mut BTreeSet<String>,
        ) -> bool {
            let Some(svc) = spec.services.get(node) else {
                return false;
            };
            for dep in &svc.depends_on {
                if dep == start {
                    path.push(dep.clone());
                    return true;
                }
                if seen.insert(dep.clone()) {
                    path.push(dep.clone());
                    if dfs(spec, dep, start, path, seen) {
                        return true;
                    }
                    path.pop();
                }
            }
            false
        }
        let mut path = vec![start.to_owned()];
        let mut seen = BTreeSet::new();
        if !dfs(self, start, start, &mut path, &mut seen) {
            return vec![start.to_owned(), start.to_owned()];
        }
        // `path` runs dependent -> dependency; name it from its smallest member so the
        // same cycle always reads the same.
        path.pop();
        let min = path
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.cmp(b.1))
            .map_or(0, |(i, _)| i);
        path.rotate_left(min);
        path.push(path[0].clone());
        path
    }

    /// Service names in file order (every service exactly once).
    pub fn order(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .order
            .iter()
            .filter(|n| self.services.contains_key(*n))
            .cloned()
            .collect();
        for name in self.services.keys() {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
        out
    }

    /// The primary port label of a service: `""` if it has one, else its first label.
    pub fn primary_label(&self, service: &str) -> Option<String> {
        let labels = self.services.get(service)?.port_labels();
        if labels.iter().any(|l| l.is_empty()) {
            return Some(String::new());
        }
        labels.into_iter().next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(cmd: &str, deps: &[&str]) -> Service {
        Service {
            depends_on: deps.iter().map(|s| s.to_string()).collect(),
            shared: false,
            kind: ServiceKind::Process(Process {
                cmd: cmd.into(),
                setup: None,
                workdir: ".".into(),
                restart: Restart::OnFailure,
                limits: None,
                url: None,
                ports: None,
                health: None,
                watch: vec![],
                env: BTreeMap::new(),
                env_file: vec![],
                replicas: 1,
                stop: Stopping::default(),
            }),
        }
    }

    #[test]
    fn the_restart_key_names_what_restarts_a_running_service() {
        let base = process("serve", &[]).process().unwrap().clone();
        let key = base.restart_key();
        let changed = |edit: &dyn Fn(&mut Process)| {
            let mut p = base.clone();
            edit(&mut p);
            key.changed(&p.restart_key())
        };
        assert!(changed(&|_| {}).is_empty());
        assert_eq!(changed(&|p| p.cmd = "serve2".into()), ["cmd"]);
        assert_eq!(
            changed(&|p| {
                p.env.insert("A".into(), "1".into());
                p.workdir = "sub".into();
            }),
            ["env", "workdir"]
        );
        assert_eq!(
            changed(&|p| p.ports = Some(vec!["admin".into()])),
            ["ports"]
        );
        assert_eq!(changed(&|p| p.setup = Some("npm ci".into())), ["setup"]);
        // Neither restarts it: taken at the next start, stop or probe.
        assert!(changed(&|p| p.watch = vec!["*.py".into()]).is_empty());
        assert!(changed(&|p| p.stop.signal = Some("SIGQUIT".into())).is_empty());
        // A setup removed has nothing left to run.
        let mut with_setup = base.clone();
        with_setup.setup = Some("npm ci".into());
        assert!(with_setup.restart_key().changed(&key).is_empty());
        // As recorded, and read back.
        assert_eq!(RestartKey::decode(&key.encode()), Some(key));
    }

    fn spec(services: &[(&str, &[&str])]) -> Spec {
        Spec {
            project: Project {
                name: "p".into(),
                domain: None,
                port_range: None,
                https: false,
                copy: Vec::new(),
                copy_modes: Default::default(),
            },
            services: services
                .iter()
                .map(|(n, d)| (n.to_string(), process("true", d)))
                .collect(),
            groups: BTreeMap::new(),
            agents: Agents::default(),
            hooks: Hooks::default(),
            order: vec![],
        }
    }

    #[test]
    fn start_order_puts_dependencies_first() {
        let s = spec(&[("web", &["api"]), ("api", &["db"]), ("db", &[])]);
        assert_eq!(s.start_order().unwrap(), vec!["db", "api", "web"]);
    }

    #[test]
    fn a_cycle_is_named_from_end_to_end() {
        let s = spec(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]);
        let cycle = s.start_order().unwrap_err();
        assert_eq!(cycle.0.first(), cycle.0.last());
        assert_eq!(cycle.0.len(), 4, "{cycle}");
    }

    #[test]
    fn a_service_without_ports_or_url_gets_the_ports_its_tokens_name() {
        let mut svc = process("run --grpc ${self.grpc}", &[]);
        let ServiceKind::Process(p) = &mut svc.kind else {
            unreachable!()
        };
        assert_eq!(p.port_labels(), vec!["grpc"]);
        p.env
            .insert("SELF".into(), "http://localhost:${self.port}".into());
        // The primary port first, then the named ones in the order they appear.
        assert_eq!(p.port_labels(), vec!["", "grpc"]);
        // Declared ports win: the tokens ask for nothing more.
        p.ports = Some(vec!["http".into()]);
        assert_eq!(p.port_labels(), vec!["http"]);
        p.ports = None;
        p.url = Some(UrlSpec::Service);
        assert_eq!(p.port_labels(), vec![""]);
        // `${self.url}` asks for the primary port; `${worktree}` and `${env.X}` for none.
        let svc = process(
            "serve ${self.url} ${worktree} ${env.X} ${self.} ${self.a b}",
            &[],
        );
        assert_eq!(svc.port_labels(), vec![""]);
        assert!(process("worker ${worktree}", &[]).port_labels().is_empty());
    }

    #[test]
    fn a_group_selects_its_members_and_their_dependencies() {
        let mut s = spec(&[("web", &["api"]), ("api", &[]), ("worker", &[])]);
        s.groups.insert("front".into(), vec!["web".into()]);
        let sel: Vec<_> = s.selected(Some("front")).into_iter().collect();
        assert_eq!(sel, vec!["api", "web"]);
        assert_eq!(s.selected(None).len(), 3);
    }
}
