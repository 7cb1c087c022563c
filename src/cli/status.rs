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
    pub(super) ready: bool,
    pub(super) pid: Option<u32>,
    pub(super) ports: BTreeMap<String, u16>,
    pub(super) url: Option<String>,
    pub(super) restarts: u32,
    pub(super) last_exit: Option<String>,
    pub(super) message: String,
    /// Its `limits` and what enforces them (only when it has some).
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<LimitsView>,
    /// What it uses now (only while it runs and once sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) usage: Option<UsageView>,
    /// Runs the kernel ended for running out of memory.
    pub(super) oom_kills: u64,
}

/// A service's limits as status shows them.
#[derive(Serialize)]
pub(super) struct LimitsView {
    /// Memory, in bytes.
    memory_bytes: Option<u64>,
    /// CPU, in cores (`0.5`).
    cpu: Option<f64>,
    /// `memory 512 MiB, cpu 0.5`.
    text: String,
    /// `cgroup-v2`, `cgroup-v1`, `systemd-run`, or `none`; absent until it first started.
    mechanism: Option<String>,
    /// They are enforced (`false` until it first started, and where nothing enforces them).
    enforced: bool,
    /// Why they are not, when they are not.
    #[serde(skip_serializing_if = "String::is_empty")]
    note: String,
}

/// What a service or a world uses.
#[derive(Serialize, Clone, Copy, Default)]
pub(super) struct UsageView {
    /// Memory in use (working set), in bytes.
    pub(super) memory_bytes: u64,
    /// CPU over the last few seconds, in percent of one core.
    pub(super) cpu_percent: f64,
    /// When it was sampled (ms since the epoch; a world's: its latest service's).
    pub(super) sampled_at: Option<i64>,
}

impl UsageView {
    fn text(&self) -> String {
        format!(
            "cpu {:.0}% · mem {}",
            self.cpu_percent,
            binky_controllers::limits::bytes(self.memory_bytes)
        )
    }
}

/// One world as status shows it.
#[derive(Serialize)]
pub(super) struct WorldView {
    pub(super) project: String,
    pub(super) name: String,
    pub(super) state: String,
    desired: DesiredState,
    generation: i64,
    group: Option<String>,
    pub(super) worktree: Option<WorktreeRow>,
    pub(super) services: Vec<ServiceView>,
    /// What its services use together (while any runs, once sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) usage: Option<UsageView>,
    pub(super) conditions: Vec<ConditionRow>,
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
    // A world's own cgroups: a shared service's are its shared world's.
    let resources = ctx.store.read(|c| store::resources(c, w.id))?;
    let tokens = binky_controllers::env::tokens(w, &ports, &proxy, &slices);
    let selected = w.spec.selected(w.group.as_deref());
    // One process service's instance: the service itself, or one of its replicas.
    let instance_view = |name: &str, replica: Option<u32>| {
        let p = procs.iter().find(|p| p.service == name);
        let r = resources.iter().find(|r| r.service == name && w.runs(name));
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
            ports: ports
                .iter()
                .filter(|r| r.service == name)
                .map(|r| (r.label.clone(), r.port))
                .collect(),
            url: tokens.shown_url(name).cloned(),
            restarts: p.map(|p| p.restarts).unwrap_or(0),
            last_exit: p.and_then(|p| p.last_exit.clone()),
            message: p.map(|p| p.message.clone()).unwrap_or_default(),
            limits: limits_view(w, binky_controllers::replica::service_of(name), r),
            usage,
            oom_kills: r.map(|r| r.oom_kills).unwrap_or(0),
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
                    limits: None,
                    usage: None,
                    oom_kills: 0,
                }];
            }
            if w.spec.services[name].resource().is_some() {
                return vec![slice_not_made(name, &conds)];
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
        .collect::<Vec<ServiceView>>();
    // What the world's own processes use (a shared service's is its shared world's).
    let used: Vec<UsageView> = services.iter().filter_map(|s| s.usage).collect();
    let usage = (!used.is_empty()).then(|| UsageView {
        memory_bytes: used.iter().map(|u| u.memory_bytes).sum(),
        cpu_percent: used.iter().map(|u| u.cpu_percent).sum(),
        sampled_at: used.iter().filter_map(|u| u.sampled_at).max(),
    });
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
        usage,
        conditions: conds,
    })
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

pub(super) fn ports_text(s: &ServiceView) -> String {
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
    let used = v
        .usage
        .map(|u| format!("  {}", u.text()))
        .unwrap_or_default();
    println!("  {:<20} {:<9} {path}{used}", v.name, v.state);
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
        if detail {
            if let Some(u) = &s.usage {
                line.push_str(&format!("  {}", u.text()));
            }
        }
        if let Some(l) = &s.limits {
            if detail || !l.enforced {
                let how = match l.mechanism.as_deref() {
                    _ if l.enforced => format!("by {}", mechanism_label(l)),
                    Some(_) => "not enforced".to_owned(),
                    None => "not started yet".to_owned(),
                };
                line.push_str(&format!("  limits {} ({how})", l.text));
            }
        }
        if s.oom_kills > 0 {
            line.push_str(&format!("  out of memory {}×", s.oom_kills));
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
        if let Some(l) = s.limits.as_ref().filter(|l| detail && !l.note.is_empty()) {
            println!("      limits not enforced: {}", l.note);
        }
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

fn mechanism_label(l: &LimitsView) -> &'static str {
    binky_controllers::process::Mechanism::parse(l.mechanism.as_deref().unwrap_or("")).label()
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
