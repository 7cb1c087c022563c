//! What binky shows of a world, read from the store: its state, services (state, health,
//! ports, URL, restarts, usage) and conditions. `binky status`, `binky metrics` and the
//! dashboard show the same values, built here once.

use std::collections::BTreeMap;

use binky_controllers::settings::Settings;
use binky_controllers::slice::ServerTrouble;
use binky_controllers::store::{
    self, CondStatus, ConditionRow, DesiredState, Store, StoreError, WorktreeRow, World,
};
use serde::Serialize;
use serde_json::{json, Value};

/// One service as status shows it (a replicated service: one per replica).
#[derive(Serialize)]
pub struct ServiceView {
    /// The service, or one replica of it (`api.1`; replica 0 is `api`).
    pub name: String,
    /// Of a replicated service: which replica this is (`BINKY_REPLICA`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<u32>,
    /// One instance for all the project's worlds, run by its shared world (`@shared`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// `running`, `starting`, `failed`, `stopped`, … (a slice's state for an adapter).
    pub state: String,
    /// Its health check passes (or it has none and runs).
    pub ready: bool,
    /// Its process, while it runs.
    pub pid: Option<u32>,
    /// Its ports by label (`""`: the main one).
    pub ports: BTreeMap<String, u16>,
    /// Its URL (an adapter's address without credentials).
    pub url: Option<String>,
    /// Restarts since it was started.
    pub restarts: u32,
    /// How its last run ended (`exit 1`, `signal 9`).
    pub last_exit: Option<String>,
    /// What the process controller says of it.
    pub message: String,
    /// Its `limits` and what enforces them (only when it has some).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsView>,
    /// What it uses now (only while it runs and once sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
    /// Runs the kernel ended for running out of memory.
    pub oom_kills: u64,
}

/// A service's limits as status shows them.
#[derive(Serialize)]
pub struct LimitsView {
    /// Memory, in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU, in cores (`0.5`).
    pub cpu: Option<f64>,
    /// `memory 512 MiB, cpu 0.5`.
    pub text: String,
    /// `cgroup-v2`, `cgroup-v1`, `systemd-run`, `job-object`, `polled` (binky restarts it
    /// over its memory limit and lowers its priority; nothing caps it), or `none`; absent until it
    /// first started.
    pub mechanism: Option<String>,
    /// They are enforced (`false` until it first started, and where nothing enforces them).
    pub enforced: bool,
    /// Why they are not, when they are not; under binky's polling, what it does instead
    /// and why nothing caps them.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// What a service or a world uses.
#[derive(Serialize, Clone, Copy, Default)]
pub struct UsageView {
    /// Memory in use (working set), in bytes.
    pub memory_bytes: u64,
    /// CPU over the last few seconds, in percent of one core.
    pub cpu_percent: f64,
    /// When it was sampled (ms since the epoch; a world's: its latest service's).
    pub sampled_at: Option<i64>,
}

impl UsageView {
    /// `cpu 3% · mem 41 MiB`.
    pub fn text(&self) -> String {
        format!(
            "cpu {:.0}% · mem {}",
            self.cpu_percent,
            binky_controllers::limits::bytes(self.memory_bytes)
        )
    }
}

/// One world as status shows it.
#[derive(Serialize)]
pub struct WorldView {
    /// Its project.
    pub project: String,
    /// Its name.
    pub name: String,
    /// Its phase: `ready`, `starting`, `failed`, `queued`, `cooled`, `stopped`, ….
    pub state: String,
    /// What was asked of it.
    pub desired: DesiredState,
    /// The generation of its desired state.
    pub generation: i64,
    /// The `--group` it runs, if any.
    pub group: Option<String>,
    /// Its worktree as observed.
    pub worktree: Option<WorktreeRow>,
    /// The paths its worktree got (or is getting) from the main checkout: how each came.
    pub bootstrap: Vec<store::BootstrapRow>,
    /// Its linked files found changed in place (shared with the main checkout or other
    /// worlds: the change is theirs too).
    pub shared_edits: Vec<store::SharedEditRow>,
    /// Where its `binky.toml` is below the repository's top (`[project] copy` paths are
    /// relative to it).
    #[serde(skip)]
    pub config_rel: String,
    /// Its services (one line per replica).
    pub services: Vec<ServiceView>,
    /// What its services use together (while any runs, once sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
    /// Every controller's conditions.
    pub conditions: Vec<ConditionRow>,
}

/// The view of world `w`.
pub fn world(store: &Store, w: &World) -> Result<WorldView, StoreError> {
    store.read(|c| {
        let rows = store::WorldRows::read(c, w.id)?;
        let seen = store::Seen::read(c, w, &rows)?;
        let servers = ManagedServers::read(c)?;
        world_in(w, &rows, seen, &store::proxy_view(c)?, &servers)
    })
}

/// The managed servers as a reader finds them: one recorded running whose process is gone
/// counts as down at once (the daemon's watch records that within a second, and does not
/// while it is not running), so no view shows a slice on it ready.
struct ManagedServers {
    rows: Vec<store::ServerRow>,
    /// The keys of those recorded running whose process is gone.
    dead: std::collections::BTreeSet<String>,
}

impl ManagedServers {
    fn read(c: &rusqlite::Connection) -> Result<ManagedServers, StoreError> {
        let rows = store::servers(c)?;
        let dead = rows
            .iter()
            .filter(|r| r.state == store::ServerState::Running && !crate::servers::Servers::runs(r))
            .map(|r| r.kind.clone())
            .collect();
        Ok(ManagedServers { rows, dead })
    }

    /// Why the server the ready slice `sl` of world `w` lives on cannot be used now: its
    /// managed server's state, else what the slice controller last said of its server.
    fn trouble(&self, w: &World, sl: &store::SliceRow) -> Option<ServerTrouble> {
        if sl.state != store::SliceState::Ready {
            return None;
        }
        let managed = sl
            .admin_url
            .as_deref()
            .is_some_and(|u| self.rows.iter().any(|r| r.admin_url == u));
        if managed {
            return binky_controllers::slice::managed_trouble(&self.rows, sl, &w.name, |r| {
                self.dead.contains(&r.kind)
            });
        }
        // A ready slice's row carries a message only while its server does not answer.
        (!sl.message.is_empty()).then(|| ServerTrouble {
            stopped: false,
            message: sl.message.clone(),
        })
    }
}

/// Every world of `worlds` as [`world`] shows it, read in one pass of the store (one query
/// a table, whatever the number of worlds).
pub fn worlds(store: &Store, worlds: &[World]) -> Result<Vec<WorldView>, StoreError> {
    store.read(|c| {
        let proxy = store::proxy_view(c)?;
        let all = store::Observed::read(c)?;
        let servers = ManagedServers::read(c)?;
        worlds
            .iter()
            .map(|w| world_in(w, all.of(w.id), all.seen_by(w), &proxy, &servers))
            .collect()
    })
}

fn world_in(
    w: &World,
    rows: &store::WorldRows,
    seen: store::Seen,
    proxy: &store::ProxyView,
    servers: &ManagedServers,
) -> Result<WorldView, StoreError> {
    let conds = &rows.conditions;
    let lines = Lines::of(w, rows, seen, proxy);
    let troubles: Vec<ServerTrouble> = lines
        .slices
        .iter()
        .filter(|sl| w.spec.resource(&sl.service).is_some())
        .filter_map(|sl| servers.trouble(w, sl))
        .collect();
    let services = lines.services(servers);
    let usage = total_usage(&services);
    let state = world_state(w, rows, &troubles);
    Ok(WorldView {
        project: w.project.clone(),
        name: w.name.clone(),
        state,
        desired: w.desired,
        generation: w.generation,
        group: w.group.clone(),
        worktree: rows.worktree.clone(),
        bootstrap: rows.bootstrap.clone(),
        shared_edits: rows.shared_edits.clone(),
        config_rel: w.config_rel.clone(),
        services,
        usage,
        conditions: conds.clone(),
    })
}

/// What a world's service lines are made of: the processes, ports, slices and cgroups it
/// sees (a shared service's are its shared world's) and the URLs it hands out.
struct Lines<'a> {
    w: &'a World,
    procs: Vec<store::ProcessRow>,
    ports: Vec<store::PortRow>,
    slices: Vec<store::SliceRow>,
    resources: &'a [store::ResourceRow],
    conds: &'a [ConditionRow],
    tokens: binky_controllers::tokens::Tokens,
}

impl<'a> Lines<'a> {
    /// Gathers what world `w` sees from its rows, its shared world's and the proxy.
    fn of(
        w: &'a World,
        rows: &'a store::WorldRows,
        seen: store::Seen,
        proxy: &store::ProxyView,
    ) -> Self {
        // A shared service's process is the shared world's.
        let mut procs = rows.processes.clone();
        procs.retain(|p| w.runs(&p.service));
        procs.extend(seen.shared_processes);
        let ports = seen.ports;
        let slices = seen.slices;
        let tokens = binky_controllers::env::tokens(w, &ports, proxy, &slices);
        Lines {
            w,
            procs,
            ports,
            slices,
            // A world's own cgroups: a shared service's are its shared world's.
            resources: &rows.resources,
            conds: &rows.conditions,
            tokens,
        }
    }

    /// A line for each service the world's group selects or that has a process, in the
    /// config's order.
    fn services(&self, servers: &ManagedServers) -> Vec<ServiceView> {
        let w = self.w;
        let selected = w.spec.selected(w.group.as_deref());
        w.spec
            .services
            .keys()
            .filter(|n| {
                selected.contains(*n)
                    || self
                        .procs
                        .iter()
                        .any(|p| binky_controllers::replica::service_of(&p.service) == *n)
            })
            .flat_map(|name| self.service(name, servers))
            .collect()
    }

    /// The lines of service `name`: its slice's, or one for each of its instances.
    fn service(&self, name: &str, servers: &ManagedServers) -> Vec<ServiceView> {
        let w = self.w;
        if let Some(sl) = self.slices.iter().find(|s| s.service == name) {
            return vec![slice_view(w, name, sl, servers.trouble(w, sl))];
        }
        if w.spec.services[name].resource().is_some() {
            return vec![slice_not_made(name, self.conds)];
        }
        // A shared service has the replicas its shared world runs.
        let mut instances = w.spec.instances(name);
        if !w.runs(name) {
            let running: Vec<String> = self
                .procs
                .iter()
                .filter(|p| binky_controllers::replica::service_of(&p.service) == name)
                .map(|p| p.service.clone())
                .collect();
            if !running.is_empty() {
                instances = running;
            }
        }
        let replicated = instances.len() > 1;
        instances
            .into_iter()
            .enumerate()
            .map(|(i, name)| self.instance(&name, replicated.then_some(i as u32)))
            .collect()
    }

    /// One process service's instance: the service itself, or one of its replicas.
    fn instance(&self, name: &str, replica: Option<u32>) -> ServiceView {
        let w = self.w;
        let p = self.procs.iter().find(|p| p.service == name);
        let r = self
            .resources
            .iter()
            .find(|r| r.service == name && w.runs(name));
        let usage = r
            .filter(|_| p.is_some_and(|p| p.pid.is_some()))
            .and_then(|r| {
                Some(UsageView {
                    memory_bytes: r.memory_bytes?,
                    cpu_percent: r.cpu_percent.unwrap_or(0.0),
                    sampled_at: r.sampled_at,
                })
            });
        ServiceView {
            name: name.to_owned(),
            replica,
            shared: !w.runs(name),
            state: p
                .map(|p| p.state.as_str().to_owned())
                .unwrap_or_else(|| "pending".into()),
            ready: p.is_some_and(|p| p.is_ready()),
            pid: p.and_then(|p| p.pid),
            ports: self
                .ports
                .iter()
                .filter(|r| r.service == name)
                .map(|r| (r.label.clone(), r.port))
                .collect(),
            url: self.tokens.shown_url(name).cloned(),
            restarts: p.map(|p| p.restarts).unwrap_or(0),
            last_exit: p.and_then(|p| p.last_exit.clone()),
            message: p.map(|p| p.message.clone()).unwrap_or_default(),
            limits: limits_view(w, binky_controllers::replica::service_of(name), r),
            usage,
            oom_kills: r.map(|r| r.oom_kills).unwrap_or(0),
        }
    }
}

/// A slice: its state (`down` or `stopped` while a ready slice's server cannot be used:
/// `trouble`), and its address without the credentials.
fn slice_view(
    w: &World,
    name: &str,
    sl: &store::SliceRow,
    trouble: Option<ServerTrouble>,
) -> ServiceView {
    let (state, message) = match &trouble {
        Some(t) => (t.shown_state().to_owned(), t.message.clone()),
        None => (sl.state.as_str().to_owned(), sl.message.clone()),
    };
    ServiceView {
        name: name.to_owned(),
        replica: None,
        shared: !w.runs(name),
        state,
        ready: sl.state == store::SliceState::Ready && trouble.is_none(),
        pid: None,
        ports: Default::default(),
        url: sl
            .address
            .as_deref()
            .map(crate::adapters::without_credentials),
        restarts: 0,
        last_exit: None,
        message,
        limits: None,
        usage: None,
        oom_kills: 0,
    }
}

/// What the world's own processes use (a shared service's is its shared world's).
fn total_usage(services: &[ServiceView]) -> Option<UsageView> {
    let used: Vec<UsageView> = services.iter().filter_map(|s| s.usage).collect();
    (!used.is_empty()).then(|| UsageView {
        memory_bytes: used.iter().map(|u| u.memory_bytes).sum(),
        cpu_percent: used.iter().map(|u| u.cpu_percent).sum(),
        sampled_at: used.iter().filter_map(|u| u.sampled_at).max(),
    })
}

/// The world's phase, shown as `idle` for a ready shared world no running world uses. A
/// world whose slices' server cannot be used (`troubles`) is never shown ready, even before
/// the daemon has said so: `failed` when a person stopped the server (a person starts it
/// again), else `starting`.
fn world_state(w: &World, rows: &store::WorldRows, troubles: &[ServerTrouble]) -> String {
    use binky_controllers::phase::Phase;
    let conds = &rows.conditions;
    let mut phase = binky_controllers::phase::phase(w, &rows.generations, conds, &rows.processes);
    if !troubles.is_empty() && matches!(phase, Phase::Ready | Phase::Starting) {
        phase = if troubles.iter().any(|t| t.stopped) {
            Phase::Failed
        } else {
            Phase::Starting
        };
    }
    let mut state = phase.as_str().to_owned();
    // A shared world no running world uses: its services wait for the next one.
    let idle = conds.iter().any(|c| {
        c.type_ == binky_controllers::registry::Kind::Process.condition() && c.reason == "Idle"
    });
    if w.is_shared() && idle && state == "ready" {
        state = "idle".into();
    }
    state
}

/// An adapter service whose slice is not made yet: what the slice and golden controllers say
/// of it (`db: golden template … failed: …`), so its line is never a silent `pending`.
fn slice_not_made(name: &str, conds: &[ConditionRow]) -> ServiceView {
    use binky_controllers::registry::Kind;
    let prefix = format!("{name}: ");
    let said = [Kind::Golden, Kind::Slice].iter().find_map(|k| {
        conds.iter().find(|c| {
            c.type_ == k.condition()
                && c.status != CondStatus::True
                && c.message.starts_with(&prefix)
        })
    });
    let failed = said.is_some_and(|c| c.reason.ends_with("Failed"));
    ServiceView {
        name: name.to_owned(),
        replica: None,
        shared: false,
        state: if failed { "failed" } else { "pending" }.to_owned(),
        ready: false,
        pid: None,
        ports: Default::default(),
        url: None,
        restarts: 0,
        last_exit: None,
        message: said
            .map(|c| {
                c.message[prefix.len()..]
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .unwrap_or_default(),
        limits: None,
        usage: None,
        oom_kills: 0,
    }
}

/// A process service's limits as written (read), and what its last start found enforces them.
fn limits_view(w: &World, name: &str, r: Option<&store::ResourceRow>) -> Option<LimitsView> {
    let limits = w.spec.services.get(name)?.process()?.limits.as_ref()?;
    let read = limits.resolve().unwrap_or_default();
    let mechanism = r.map(|r| r.mechanism);
    Some(LimitsView {
        memory_bytes: read.memory,
        cpu: read.cpu_millis.map(|m| f64::from(m) / 1000.0),
        text: read.to_string(),
        mechanism: mechanism.map(|m| m.as_str().to_owned()),
        enforced: mechanism.is_some_and(|m| m.enforces()),
        note: r.map(|r| r.note.clone()).unwrap_or_default(),
    })
}

/// The `binky metrics` snapshot: the daemon (as its ping answered, `None`: not running),
/// worlds and services by state, usage, admission, shared services, servers, templates.
pub fn metrics(
    store: &Store,
    daemon: Option<&crate::protocol::Response>,
) -> Result<Value, StoreError> {
    // A project's shared world is not a worktree of the user's: its services are counted,
    // the world is listed under `shared`.
    let (shared_worlds, worlds): (Vec<_>, Vec<_>) = store
        .read(store::worlds)?
        .into_iter()
        .partition(|w| w.is_shared());
    let t = Tally::of(store, &worlds, &shared_worlds)?;
    let count = |k: &str| t.by_state.get(k).copied().unwrap_or(0);
    let settings = Settings::read(store)?;
    let servers: Vec<Value> = store
        .read(store::servers)?
        .iter()
        .map(|s| json!({ "kind": s.kind, "state": s.state, "port": s.port, "version": s.version }))
        .collect();
    let goldens: Vec<Value> = store
        .read(store::goldens)?
        .iter()
        .map(|g| json!({ "name": g.name, "adapter": g.adapter, "state": g.state, "build_ms": g.build_ms }))
        .collect();
    let stopped = count("stopped");
    Ok(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "daemon": {
            "running": daemon.is_some(),
            "pid": daemon.as_ref().and_then(|d| d.pid),
            "uptime_secs": daemon.as_ref().and_then(|d| d.uptime_secs),
            "rss_bytes": daemon.as_ref().and_then(|d| d.rss_bytes),
            // Each controller's reconciles and housekeeping since the daemon started: how
            // many, and their time together and the longest (µs).
            "controllers": daemon.as_ref().and_then(|d| d.controllers.clone()),
        },
        // binky 0.1.2's names.
        "worktrees": {
            "total": worlds.len(),
            "running": (worlds.len() as u64).saturating_sub(stopped),
            "ready": count("ready"),
            "stopped": stopped,
            "provisioning": count("starting"),
        },
        "worlds": { "total": worlds.len(), "by_state": t.by_state },
        "services": {
            "total": t.service_total,
            "by_state": t.services,
            "restarts": t.restarts,
            "replicas": t.replicas,
            "oom_kills": t.oom_kills,
        },
        // Sampled by the daemon every few seconds: CPU in percent of one core.
        "usage": {
            "memory_bytes": t.memory,
            "cpu_percent": (t.cpu * 10.0).round() / 10.0,
            "worlds": t.usage,
        },
        "ports_allocated": store.read(store::all_ports)?.len(),
        "slices": t.slices,
        "admission": {
            "capacity": settings.number::<u64>("max_parallel"),
            "in_use": (worlds.len() as u64).saturating_sub(
                stopped + count("queued") + count("approval") + count("cooled")
            ),
            "queued": count("queued"),
            "cooled": count("cooled"),
            "awaiting_approval": count("approval"),
            "ram_reserve_percent": settings.get("ram_reserve_percent"),
            "disk_reserve_gib": settings.get("disk_reserve_gib"),
            "cool_under_pressure": settings.flag("cool_under_pressure"),
        },
        "shared": t.shared,
        "servers": servers,
        "golden_templates": goldens,
    }))
}

/// What [`metrics`] counts over the worlds: states, services, restarts, usage, slices.
#[derive(Default)]
struct Tally {
    shared: Vec<Value>,
    by_state: BTreeMap<String, u64>,
    services: BTreeMap<String, u64>,
    service_total: u64,
    restarts: u64,
    slices: u64,
    memory: u64,
    cpu: f64,
    oom_kills: u64,
    usage: Vec<Value>,
    /// Replicas beyond the first of replicated services (each is counted as a service too).
    replicas: u64,
}

impl Tally {
    /// Counts the worlds, then the projects' shared worlds.
    fn of(store: &Store, worlds: &[World], shared_worlds: &[World]) -> Result<Tally, StoreError> {
        let mut t = Tally::default();
        let all: Vec<World> = worlds.iter().chain(shared_worlds).cloned().collect();
        for (w, v) in all.iter().zip(self::worlds(store, &all)?) {
            t.add(w, &v);
            t.slices += store.read(|c| store::slices(c, w.id))?.len() as u64;
        }
        Ok(t)
    }

    /// Counts one world as `v` shows it.
    fn add(&mut self, w: &World, v: &WorldView) {
        if w.is_shared() {
            let states: BTreeMap<&str, &str> = v
                .services
                .iter()
                .map(|s| (s.name.as_str(), s.state.as_str()))
                .collect();
            self.shared
                .push(json!({ "project": w.project, "state": v.state, "services": states }));
        } else {
            *self.by_state.entry(v.state.clone()).or_default() += 1;
        }
        // A shared service is counted once, with its shared world.
        for s in v.services.iter().filter(|s| w.is_shared() || !s.shared) {
            self.service_total += 1;
            self.restarts += u64::from(s.restarts);
            self.oom_kills += s.oom_kills;
            *self.services.entry(s.state.clone()).or_default() += 1;
            if s.replica.is_some_and(|r| r > 0) {
                self.replicas += 1;
            }
        }
        if let Some(u) = v.usage {
            self.memory += u.memory_bytes;
            self.cpu += u.cpu_percent;
            self.usage.push(json!({
                "project": w.project,
                "world": w.name,
                "memory_bytes": u.memory_bytes,
                "cpu_percent": (u.cpu_percent * 10.0).round() / 10.0,
            }));
        }
    }
}

/// A world's log files, in the order `binky logs` shows them: each process service's (each
/// replica's: `api`, `api.1`), then `hooks`; a shared service's are its shared world's.
/// Files not written yet are listed too.
pub fn log_sources(
    store: &Store,
    logs_dir: &std::path::Path,
    world: &World,
) -> Result<Vec<(String, std::path::PathBuf)>, StoreError> {
    let shared = if world.is_shared() {
        None
    } else {
        store.read(|c| store::shared_world(c, world.project_id))?
    };
    let owner = |svc: &str| match &shared {
        Some(s) if !world.runs(svc) => s,
        _ => world,
    };
    let path = |svc: &str| {
        binky_controllers::supervisor::log_path(
            logs_dir,
            owner(binky_controllers::replica::service_of(svc)),
            svc,
        )
    };
    let mut out: Vec<(String, std::path::PathBuf)> = world
        .spec
        .services
        .iter()
        .filter(|(_, s)| s.process().is_some())
        .flat_map(|(n, _)| owner(n).spec.instances(n))
        .map(|n| {
            let p = path(&n);
            (n, p)
        })
        .collect();
    out.push(("hooks".into(), path("hooks")));
    Ok(out)
}

/// The last `lines` lines of a log file (a line still being written, a prompt, included),
/// and its length.
pub fn log_tail(path: &std::path::Path, lines: usize) -> (Vec<String>, u64) {
    let t = Tail::read(path, lines);
    let mut all = t.whole;
    all.extend(t.unfinished);
    let start = all.len().saturating_sub(lines);
    (all.split_off(start), t.len)
}

/// The last `lines` whole lines of a log file, and where following it goes on: the start of
/// a line still being written, which then comes whole with the rest of it (shown now in
/// part, it would be cut in two, and a reader looking for its text would never find it).
pub fn log_tail_to_follow(path: &std::path::Path, lines: usize) -> (Vec<String>, u64) {
    let t = Tail::read(path, lines);
    let mut all = t.whole;
    let start = all.len().saturating_sub(lines);
    let unfinished = t.unfinished.map_or(0, |u| u.len() as u64);
    (all.split_off(start), t.len - unfinished.min(t.len))
}

/// The end of a log file as read once: its whole lines, the unfinished last one, and the
/// length read up to (what is written meanwhile is the follower's, never read twice).
struct Tail {
    whole: Vec<String>,
    unfinished: Option<String>,
    len: u64,
}

impl Tail {
    fn read(path: &std::path::Path, lines: usize) -> Tail {
        use std::io::{Read, Seek, SeekFrom};
        let none = Tail {
            whole: Vec::new(),
            unfinished: None,
            len: 0,
        };
        let Ok(mut f) = std::fs::File::open(path) else {
            return none;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        // Enough of the end for `lines` lines (about 512 bytes a line at most), and the byte
        // before it, which says whether the first line read is whole.
        let want = (lines as u64).saturating_mul(512).max(64 * 1024).min(len);
        let from = (len - want).saturating_sub(1);
        if f.seek(SeekFrom::Start(from)).is_err() {
            return none;
        }
        let mut buf = Vec::new();
        if (&mut f).take(len - from).read_to_end(&mut buf).is_err() {
            return none;
        }
        let mut rest: &[u8] = &buf;
        if from < len - want {
            // Whole from here when the byte before is a line's end; else the first line read
            // is a part of one.
            rest = match rest.split_first() {
                Some((b'\n', after)) => after,
                _ => rest
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(&[][..], |nl| &rest[nl + 1..]),
            };
        }
        let (done, unfinished) = match rest.iter().rposition(|b| *b == b'\n') {
            Some(nl) => (&rest[..=nl], &rest[nl + 1..]),
            None => (&[][..], rest),
        };
        let whole = String::from_utf8_lossy(done)
            .lines()
            .map(str::to_owned)
            .collect();
        Tail {
            whole,
            unfinished: (!unfinished.is_empty())
                .then(|| String::from_utf8_lossy(unfinished).into_owned()),
            len,
        }
    }
}

/// The golden templates, each with the worlds and services cloned from it
/// (`world/service`), as `binky golden ls` and the dashboard show them.
pub fn goldens_with_users(
    store: &Store,
) -> Result<Vec<(store::GoldenRow, Vec<String>)>, StoreError> {
    let goldens = store.read(store::goldens)?;
    let refs = store.read(store::golden_refs)?;
    let worlds = store.read(store::worlds)?;
    Ok(goldens
        .into_iter()
        .map(|g| {
            let users = refs
                .iter()
                .filter(|r| r.2 == g.key)
                .filter_map(|r| {
                    worlds
                        .iter()
                        .find(|w| w.id == r.0)
                        .map(|w| format!("{}/{}", w.name, r.1))
                })
                .collect();
            (g, users)
        })
        .collect())
}

#[cfg(test)]
mod tail_tests {
    use super::*;

    #[test]
    fn a_line_still_being_written_is_left_for_the_follower_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.log");
        std::fs::write(&path, "one\ntwo\nsaid hel").unwrap();
        let (lines, offset) = log_tail_to_follow(&path, 10);
        assert_eq!(lines, ["one", "two"]);
        assert_eq!(offset, "one\ntwo\n".len() as u64);
        // Shown whole to whoever just reads the end.
        let (lines, len) = log_tail(&path, 10);
        assert_eq!(lines, ["one", "two", "said hel"]);
        assert_eq!(len, "one\ntwo\nsaid hel".len() as u64);
        assert_eq!(log_tail(&path, 2).0, ["two", "said hel"]);
    }

    #[test]
    fn a_long_file_is_read_from_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.log");
        // Lines of 1,000 bytes: the 64 KiB read of the end starts inside one, which is left
        // out rather than shown cut.
        let line = "x".repeat(999);
        let text: String = (0..200).map(|_| format!("{line}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let (lines, offset) = log_tail_to_follow(&path, 100);
        assert_eq!(lines.len(), 65);
        assert!(lines.iter().all(|l| *l == line));
        assert_eq!(offset, text.len() as u64);
        // Lines of 1,024 bytes: the read starts exactly at a line's start, which is whole
        // and kept (64 lines, not 63).
        let line = "y".repeat(1023);
        let text: String = (0..200).map(|_| format!("{line}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let (lines, _) = log_tail(&path, 100);
        assert_eq!(lines.len(), 64);
        assert!(lines.iter().all(|l| *l == line));
    }
}
