//! `binky status [NAME]`: every world grouped by project, or one in detail.

use std::collections::BTreeMap;
use std::time::Duration;

use binky_controllers::store::{self, CondStatus, ConditionRow, DesiredState, WorktreeRow, World};
use serde::Serialize;

use super::context::{Ctx, Failure};
use super::events::clock;
use super::exit;

/// One service as status shows it (a replicated service: one per replica).
#[derive(Serialize)]
pub(super) struct ServiceView {
    /// The service, or one replica of it (`api.1`; replica 0 is `api`).
    pub(super) name: String,
    /// Of a replicated service: which replica this is (`BINKY_REPLICA`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) replica: Option<u32>,
    /// One instance for all the project's worlds, run by its shared world (`@shared`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) shared: bool,
    pub(super) state: String,
    ready: bool,
    pid: Option<u32>,
    ports: BTreeMap<String, u16>,
    url: Option<String>,
    pub(super) restarts: u32,
    last_exit: Option<String>,
    message: String,
}

/// One world as status shows it.
#[derive(Serialize)]
pub(super) struct WorldView {
    project: String,
    name: String,
    pub(super) state: String,
    desired: DesiredState,
    generation: i64,
    group: Option<String>,
    worktree: Option<WorktreeRow>,
    pub(super) services: Vec<ServiceView>,
    conditions: Vec<ConditionRow>,
}

pub(super) fn view(ctx: &Ctx, w: &World) -> Result<WorldView, Failure> {
    let gens = ctx.store.read(|c| store::observed_generations(c, w.id))?;
    let conds = ctx.store.read(|c| store::conditions(c, w.id))?;
    // A shared service's process is the shared world's.
    let own = ctx.store.read(|c| store::processes(c, w.id))?;
    let mut procs = own.clone();
    procs.retain(|p| w.runs(&p.service));
    procs.extend(ctx.store.read(|c| store::shared_processes(c, w))?);
    let ports = ctx.store.read(|c| store::ports_seen_by(c, w))?;
    let wt = ctx.store.read(|c| store::worktree(c, w.id))?;
    let proxy = ctx.store.read(store::proxy_view)?;
    let slices = ctx.store.read(|c| store::slices_seen_by(c, w))?;
    let tokens = binky_controllers::env::tokens(w, &ports, &proxy, &slices);
    let selected = w.spec.selected(w.group.as_deref());
    // One process service's instance: the service itself, or one of its replicas.
    let instance_view = |name: &str, replica: Option<u32>| {
        let p = procs.iter().find(|p| p.service == name);
        ServiceView {
            name: name.to_owned(),
            replica,
            shared: !w.runs(name),
            state: p
                .map(|p| p.state.as_str().to_owned())
                .unwrap_or_else(|| "pending".into()),
            ready: p.is_some_and(|p| p.is_ready()),
            pid: p.and_then(|p| p.pid),
            ports: ports
                .iter()
                .filter(|r| r.service == name)
                .map(|r| (r.label.clone(), r.port))
                .collect(),
            url: tokens.shown_url(name).cloned(),
            restarts: p.map(|p| p.restarts).unwrap_or(0),
            last_exit: p.and_then(|p| p.last_exit.clone()),
            message: p.map(|p| p.message.clone()).unwrap_or_default(),
        }
    };
    let services = w
        .spec
        .services
        .keys()
        .filter(|n| {
            selected.contains(*n)
                || procs
                    .iter()
                    .any(|p| binky_controllers::replica::service_of(&p.service) == *n)
        })
        .flat_map(|name| {
            if let Some(sl) = slices.iter().find(|s| &s.service == name) {
                // A slice: its state, and its address without the credentials.
                return vec![ServiceView {
                    name: name.clone(),
                    replica: None,
                    shared: !w.runs(name),
                    state: sl.state.as_str().to_owned(),
                    ready: sl.state == store::SliceState::Ready,
                    pid: None,
                    ports: Default::default(),
                    url: sl
                        .address
                        .as_deref()
                        .map(crate::adapters::without_credentials),
                    restarts: 0,
                    last_exit: None,
                    message: sl.message.clone(),
                }];
            }
            // A shared service has the replicas its shared world runs.
            let mut instances = w.spec.instances(name);
            if !w.runs(name) {
                let running: Vec<String> = procs
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
                .map(|(i, name)| instance_view(&name, replicated.then_some(i as u32)))
                .collect()
        })
        .collect();
    let mut state = binky_controllers::phase::phase(w, &gens, &conds, &own)
        .as_str()
        .to_owned();
    // A shared world no running world uses: its services wait for the next one.
    let idle = conds.iter().any(|c| {
        c.type_ == binky_controllers::registry::Kind::Process.condition() && c.reason == "Idle"
    });
    if w.is_shared() && idle && state == "ready" {
        state = "idle".into();
    }
    Ok(WorldView {
        project: w.project.clone(),
        name: w.name.clone(),
        state,
        desired: w.desired,
        generation: w.generation,
        group: w.group.clone(),
        worktree: wt,
        services,
        conditions: conds,
    })
}

fn ports_text(s: &ServiceView) -> String {
    s.ports
        .iter()
        .map(|(l, p)| {
            if l.is_empty() {
                format!(":{p}")
            } else {
                format!("{l}:{p}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_world(v: &WorldView, detail: bool) {
    let path = v
        .worktree
        .as_ref()
        .map(|w| w.path.display().to_string())
        .unwrap_or_default();
    println!("  {:<20} {:<9} {}", v.name, v.state, path);
    for s in &v.services {
        let mut line = format!("    {:<12} {:<8}", s.name, s.state);
        line.push_str(&format!(" {:<14}", ports_text(s)));
        if let Some(pid) = s.pid {
            line.push_str(&format!(" pid {pid:<8}"));
        }
        if let Some(url) = &s.url {
            line.push_str(&format!(" {url}"));
        }
        if s.shared {
            line.push_str("  (shared)");
        }
        if s.restarts > 0 {
            line.push_str(&format!("  restarts {}", s.restarts));
        }
        if let Some(e) = &s.last_exit {
            if s.state != "running" || detail {
                line.push_str(&format!("  last {e}"));
            }
        }
        if !s.message.is_empty() && (s.state != "running" || detail) {
            line.push_str(&format!("  — {}", s.message.lines().next().unwrap_or("")));
        }
        println!("{}", line.trim_end());
    }
    let mut shown_tails: Vec<&str> = Vec::new();
    for c in &v.conditions {
        // In the overview, only what needs attention: a failure, or why a world waits.
        let worth = detail || c.stalled || (c.status != CondStatus::True && v.state == "starting");
        if worth {
            let first = c.message.lines().next().unwrap_or("");
            // The rest of a failure's message (a command's output tail) in the detail
            // view, once even when two conditions carry it.
            let tail = c.message.split_once('\n').map(|(_, t)| t).unwrap_or("");
            let show_tail = detail
                && c.status != CondStatus::True
                && !tail.trim().is_empty()
                && !shown_tails.contains(&tail);
            if show_tail {
                shown_tails.push(tail);
            }
            println!(
                "    {} {} ({}): {first}",
                if c.status == CondStatus::True {
                    "✓"
                } else {
                    "✗"
                },
                c.type_,
                c.reason
            );
            if show_tail {
                for line in tail.lines().take(30) {
                    println!("        {line}");
                }
            }
        }
    }
}

/// `binky status`.
pub async fn run(name: Option<String>, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let daemon = crate::daemon::client::request(
        &ctx.home,
        &crate::daemon::protocol::Request::Ping,
        Duration::from_millis(500),
    )
    .await
    .ok();
    // `binky status .`: the worlds of this directory's project only.
    let only = match name.as_deref() {
        Some(".") => Some(ctx.project_here()?.ok_or_else(|| {
            Failure::usage(
                "`binky status .` shows the project of the current directory, and no project \
                 with worlds has its repository here; run it inside the repository (or one of \
                 its worktrees), or `binky status` for every project",
            )
        })?),
        _ => None,
    };
    let name = name.filter(|n| n != ".");
    if let Some(name) = name {
        let w = ctx.world(Some(&name))?;
        let v = view(&ctx, &w)?;
        if json {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            return Ok(exit::OK);
        }
        println!("{}  {}", v.project, w.repo_root.display());
        print_world(&v, true);
        let evs = ctx
            .store
            .read(|c| store::events(c, &w.project, &w.name, 0, 8))?;
        if !evs.is_empty() {
            println!("  recent events:");
            for e in evs {
                println!(
                    "    {}  {}",
                    clock(e.at),
                    e.message.lines().next().unwrap_or("")
                );
            }
        }
        if daemon.is_none() {
            println!(
                "(the daemon is not running: `binky daemon start` or any `binky up` starts it)"
            );
        }
        return Ok(exit::OK);
    }
    let mut worlds = ctx.store.read(store::worlds)?;
    if let Some(p) = &only {
        worlds.retain(|w| &w.project == p);
    }
    let views = worlds
        .iter()
        .map(|w| view(&ctx, w))
        .collect::<Result<Vec<_>, _>>()?;
    if json {
        #[derive(Serialize)]
        struct All<'a> {
            daemon: Option<&'a crate::daemon::protocol::Response>,
            worlds: &'a [WorldView],
        }
        let all = All {
            daemon: daemon.as_ref(),
            worlds: &views,
        };
        println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
        return Ok(exit::OK);
    }
    if views.is_empty() {
        println!("no worlds yet: `binky up NAME` in a repository with a binky.toml makes one");
    }
    let mut project = String::new();
    for (w, v) in worlds.iter().zip(&views) {
        if w.project != project {
            project = w.project.clone();
            println!("{}  {}", w.project, w.repo_root.display());
        }
        print_world(v, false);
    }
    match daemon {
        Some(d) => {
            if views.is_empty() {
                return Ok(exit::OK);
            }
            println!("daemon: pid {} · up {}s", d.pid.unwrap_or(0), d.uptime_secs.unwrap_or(0));
            print!("{}", super::port::describe(&ctx)?);
        }
        None => println!("daemon: not running (`binky daemon start` or any `binky up` starts it; services keep running without it)"),
    }
    Ok(exit::OK)
}
