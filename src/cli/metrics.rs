//! `binky metrics`: a point-in-time JSON snapshot of the home — a superset of binky 0.1.2's
//! (`worktrees`, `ports_allocated`, `slices`, `admission`), plus the daemon, worlds and
//! services by state (each replica counted), what each world uses (CPU and memory, from its
//! cgroups), limits and out-of-memory kills, projects' shared services, managed servers and
//! golden templates. Read from the store, so it answers with the daemon down too
//! (`daemon.running: false`).

use std::collections::BTreeMap;
use std::time::Duration;

use binky_controllers::settings::Settings;
use binky_controllers::store;
use serde_json::{json, Value};

use super::context::{Ctx, Failure};
use super::exit;
use super::status::view;

/// `binky metrics`.
pub async fn run() -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let daemon = crate::daemon::client::request(
        &ctx.home,
        &crate::daemon::protocol::Request::Ping,
        Duration::from_millis(500),
    )
    .await
    .ok();
    // A project's shared world is not a worktree of the user's: its services are counted,
    // the world is listed under `shared`.
    let (shared_worlds, worlds): (Vec<_>, Vec<_>) = ctx
        .store
        .read(store::worlds)?
        .into_iter()
        .partition(|w| w.is_shared());
    let mut shared = Vec::new();
    for w in &shared_worlds {
        let v = view(&ctx, w)?;
        let services: BTreeMap<&str, &str> = v
            .services
            .iter()
            .map(|s| (s.name.as_str(), s.state.as_str()))
            .collect();
        shared.push(json!({ "project": w.project, "state": v.state, "services": services }));
    }
    let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
    let mut services: BTreeMap<String, u64> = BTreeMap::new();
    let (mut service_total, mut restarts, mut slices) = (0u64, 0u64, 0u64);
    let (mut memory, mut cpu, mut oom_kills) = (0u64, 0f64, 0u64);
    let mut usage: Vec<Value> = Vec::new();
    // Replicas beyond the first of replicated services (each is counted as a service too).
    let mut replicas = 0u64;
    for w in worlds.iter().chain(&shared_worlds) {
        let v = view(&ctx, w)?;
        if !w.is_shared() {
            *by_state.entry(v.state.clone()).or_default() += 1;
        }
        // A shared service is counted once, with its shared world.
        for s in v.services.iter().filter(|s| w.is_shared() || !s.shared) {
            service_total += 1;
            restarts += u64::from(s.restarts);
            oom_kills += s.oom_kills;
            *services.entry(s.state.clone()).or_default() += 1;
            if s.replica.is_some_and(|r| r > 0) {
                replicas += 1;
            }
        }
        if let Some(u) = v.usage {
            memory += u.memory_bytes;
            cpu += u.cpu_percent;
            usage.push(json!({
                "project": w.project,
                "world": w.name,
                "memory_bytes": u.memory_bytes,
                "cpu_percent": (u.cpu_percent * 10.0).round() / 10.0,
            }));
        }
        slices += ctx.store.read(|c| store::slices(c, w.id))?.len() as u64;
    }
    let count = |k: &str| by_state.get(k).copied().unwrap_or(0);
    let settings = Settings::read(&ctx.store)?;
    let servers: Vec<Value> = ctx
        .store
        .read(store::servers)?
        .iter()
        .map(|s| json!({ "kind": s.kind, "state": s.state, "port": s.port, "version": s.version }))
        .collect();
    let goldens: Vec<Value> = ctx
        .store
        .read(store::goldens)?
        .iter()
        .map(|g| json!({ "name": g.name, "adapter": g.adapter, "state": g.state, "build_ms": g.build_ms }))
        .collect();
    let stopped = count("stopped");
    let out = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "daemon": {
            "running": daemon.is_some(),
            "pid": daemon.as_ref().and_then(|d| d.pid),
            "uptime_secs": daemon.as_ref().and_then(|d| d.uptime_secs),
            "rss_bytes": daemon.as_ref().and_then(|d| d.rss_bytes),
        },
        // binky 0.1.2's names.
        "worktrees": {
            "total": worlds.len(),
            "running": (worlds.len() as u64).saturating_sub(stopped),
            "ready": count("ready"),
            "stopped": stopped,
            "provisioning": count("starting"),
        },
        "worlds": { "total": worlds.len(), "by_state": by_state },
        "services": {
            "total": service_total,
            "by_state": services,
            "restarts": restarts,
            "replicas": replicas,
            "oom_kills": oom_kills,
        },
        // Sampled by the daemon every few seconds: CPU in percent of one core.
        "usage": {
            "memory_bytes": memory,
            "cpu_percent": (cpu * 10.0).round() / 10.0,
            "worlds": usage,
        },
        "ports_allocated": ctx.store.read(store::all_ports)?.len(),
        "slices": slices,
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
        "shared": shared,
        "servers": servers,
        "golden_templates": goldens,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    Ok(exit::OK)
}
