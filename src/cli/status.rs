//! `binky status [NAME]`: every world grouped by project, or one in detail.

use std::time::Duration;

use binky_controllers::store::{self, CondStatus};
use serde::Serialize;

use super::context::{Ctx, Failure};
use super::events::clock;
use super::exit;
use crate::view::{LimitsView, ServiceView, WorldView};
use binky_controllers::process::Mechanism;

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

/// Prints one world: its line, a line a service, the paths its worktree got, and its conditions.
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
        println!("{}", service_line(s, detail).trim_end());
        if let Some(l) = s.limits.as_ref().filter(|l| detail && !l.note.is_empty()) {
            println!("{}", limits_note(l));
        }
    }
    print_bootstrap(v, detail);
    for said in shared_edits(&v.shared_edits, &v.config_rel) {
        println!("    ! {}", said.replace('\n', "\n      "));
    }
    print_conditions(v, detail);
}

/// What a world's linked files found changed in place say, a sentence a path: the files,
/// their holders, who may have changed them, and the fix (see
/// [`binky_controllers::inplace`]).
pub(super) fn shared_edits(rows: &[store::SharedEditRow], config_rel: &str) -> Vec<String> {
    binky_controllers::inplace::describe(
        rows,
        |p| binky_controllers::inplace::copy_path(config_rel, p),
        |ms| format!("at {} UTC", clock(ms)),
    )
}

/// One service's line: state, ports, pid, URL, and what is worth saying of it.
fn service_line(s: &ServiceView, detail: bool) -> String {
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
        // Limits nothing caps are said on every line, as limits nothing enforces are.
        let polled = l.mechanism.as_deref() == Some(Mechanism::Polled.as_str());
        if detail || !l.enforced || polled {
            let how = match l.mechanism.as_deref() {
                _ if polled => mechanism_label(l).to_owned(),
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
    line
}

/// The paths the worktree got: how each came (in the detail view, or while one comes).
fn print_bootstrap(v: &WorldView, detail: bool) {
    for b in &v.bootstrap {
        let pending = b.state == binky_controllers::store::BootstrapState::Pending;
        if !detail && !pending {
            continue;
        }
        let how = match (&b.how, b.state) {
            (Some(how), _) => format!(
                "{how} ({} files, {} MB, {:.1} s{})",
                b.files,
                b.bytes / 1_000_000,
                b.took_ms as f64 / 1000.0,
                if b.message.is_empty() {
                    String::new()
                } else {
                    format!("; {}", b.message)
                }
            ),
            (None, state) => format!(
                "{}{}",
                state.as_str(),
                if b.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", b.message)
                }
            ),
        };
        println!("    path {:<24} mode {:<4} {how}", b.path, b.mode.as_str());
    }
}

/// The world's conditions: in the overview only those that need attention; in the detail
/// view all, with a failure's output tail.
fn print_conditions(v: &WorldView, detail: bool) {
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
    Mechanism::parse(l.mechanism.as_deref().unwrap_or("")).label()
}

/// The detail line under a service whose limits carry a note: what binky's polling does
/// with them and why nothing caps them, or why nothing enforces them.
fn limits_note(l: &LimitsView) -> String {
    if Mechanism::parse(l.mechanism.as_deref().unwrap_or("")) == Mechanism::Polled {
        format!("      limits: {}", l.note)
    } else {
        format!("      limits not enforced: {}", l.note)
    }
}

/// `binky status`.
pub async fn run(name: Option<String>, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let daemon = crate::daemon::client::ping_within(&ctx.home, Duration::from_millis(500))
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
        return one_world(&ctx, &name, json, daemon.is_some());
    }
    every_world(&ctx, only.as_ref(), json, daemon)
}

/// `binky status NAME`: the world in detail, with its recent events.
fn one_world(ctx: &Ctx, name: &str, json: bool, daemon_running: bool) -> Result<i32, Failure> {
    let w = ctx.world(Some(name))?;
    let v = crate::view::world(&ctx.store, &w)?;
    if json {
        super::print_json(&v);
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
    if !daemon_running {
        println!("(the daemon is not running: `binky daemon start` or any `binky up` starts it)");
    }
    Ok(exit::OK)
}

/// `binky status` (or `binky status .`): every world (of the project `only`), by project,
/// and the daemon.
fn every_world(
    ctx: &Ctx,
    only: Option<&String>,
    json: bool,
    daemon: Option<crate::protocol::Response>,
) -> Result<i32, Failure> {
    let mut worlds = ctx.store.read(store::worlds)?;
    if let Some(p) = only {
        worlds.retain(|w| &w.project == p);
    }
    let views = crate::view::worlds(&ctx.store, &worlds)?;
    if json {
        #[derive(Serialize)]
        struct All<'a> {
            daemon: Option<&'a crate::protocol::Response>,
            worlds: &'a [WorldView],
        }
        let all = All {
            daemon: daemon.as_ref(),
            worlds: &views,
        };
        super::print_json(&all);
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
    if let Some(behind) = crate::hosts::behind(&ctx.store, ctx.home.root()) {
        println!("hosts: {behind}");
    }
    match daemon {
        Some(d) => {
            if views.is_empty() {
                return Ok(exit::OK);
            }
            println!("daemon: pid {} · up {}s", d.pid.unwrap_or(0), d.uptime_secs.unwrap_or(0));
            print!("{}", super::port::describe(ctx)?);
        }
        None => println!("daemon: not running (`binky daemon start` or any `binky up` starts it; services keep running without it)"),
    }
    Ok(exit::OK)
}
