//! `binky servers [stop [KIND]]`: the servers binky runs itself.

use std::time::Duration;

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;
use crate::daemon::client::{self, ClientError};
use crate::protocol::Request;
use binky_platform::proc as procfs;

/// `binky servers`.
pub async fn run(stop: bool, kind: Option<String>, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    if let Some(k) = &kind {
        if crate::servers::Kind::parse(k).is_none() {
            return Err(Failure::usage(format!(
                "no managed server kind `{k}`; kinds: {}",
                crate::servers::Kind::choices()
            )));
        }
    }
    if stop {
        match client::request(
            &ctx.home,
            &Request::StopServers { kind: kind.clone() },
            Duration::from_secs(30),
        )
        .await
        {
            Ok(r) => {
                let stopped = r.stopped.unwrap_or_default();
                if stopped.is_empty() {
                    println!("no managed server was running");
                } else {
                    println!(
                        "stopped {} (data kept; a world that needs one starts it again at its next `binky up`)",
                        stopped.join(", ")
                    );
                }
                say_pending_drops(
                    &ctx,
                    "binky starts its server for a moment to finish it, and stops it again",
                )?;
                return Ok(exit::OK);
            }
            Err(ClientError::NotRunning) => {
                // Without a daemon, stop them directly: they are plain process groups.
                let servers = crate::servers::Servers::new(ctx.home.clone(), ctx.store.clone());
                let stopped = servers
                    .stop(kind.as_deref().and_then(crate::servers::Kind::parse))
                    .await
                    .map_err(|e| Failure::failed(e.to_string()))?;
                println!(
                    "stopped {}",
                    if stopped.is_empty() {
                        "nothing".to_owned()
                    } else {
                        stopped.join(", ")
                    }
                );
                say_pending_drops(
                    &ctx,
                    "the daemon finishes it when it next runs, starting its server for it",
                )?;
                return Ok(exit::OK);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let rows = ctx.store.read(store::servers)?;
    if json {
        super::print_json(&rows);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!(
            "no managed servers (binky starts one when a world's adapter service has no admin_url)"
        );
    }
    for r in rows {
        let alive = matches!((r.pid, r.start_time), (Some(p), Some(s)) if procfs::alive(p, s));
        let state = if r.state == store::ServerState::Running && !alive {
            "stopped (died)"
        } else {
            r.state.as_str()
        };
        println!(
            "{:<9} {:<15} 127.0.0.1:{:<6} {}{}  {}",
            r.kind,
            state,
            r.port,
            r.version,
            r.pid
                .filter(|_| alive)
                .map(|p| format!("  pid {p}"))
                .unwrap_or_default(),
            r.data_dir
        );
        if !r.message.is_empty() {
            println!("          {}", r.message);
        }
    }
    Ok(exit::OK)
}

/// Say the drops on binky's own servers that are not done (a golden template `binky golden
/// rm` asked for or one being dropped, a removed world's slices), and `how` they will be.
fn say_pending_drops(ctx: &Ctx, how: &str) -> Result<(), Failure> {
    let (goldens, asked, worlds) = ctx.store.read(|c| {
        Ok((
            store::goldens(c)?,
            store::golden_drops(c)?,
            store::worlds(c)?,
        ))
    })?;
    let managed: Vec<String> = ctx
        .store
        .read(store::servers)?
        .into_iter()
        .map(|r| r.admin_url)
        .collect();
    let on_managed = |url: Option<&str>| url.is_some_and(|u| managed.iter().any(|m| m == u));
    let mut pending: Vec<String> = goldens
        .iter()
        .filter(|g| g.state == store::GoldenState::Dropping || asked.contains(&g.key))
        .filter(|g| on_managed(g.admin_url.as_deref()))
        .map(|g| {
            format!(
                "golden template {} ({})",
                g.name,
                &g.key[..g.key.len().min(12)]
            )
        })
        .collect();
    for w in worlds.iter().filter(|w| w.deleted) {
        let slices = ctx.store.read(|c| store::slices(c, w.id))?;
        let names: Vec<String> = slices
            .into_iter()
            .filter(|s| on_managed(s.admin_url.as_deref()))
            .map(|s| s.name)
            .collect();
        if !names.is_empty() {
            pending.push(format!(
                "{} of removed world `{}`",
                names.join(", "),
                w.name
            ));
        }
    }
    if !pending.is_empty() {
        println!("still to drop: {} ({how})", pending.join("; "));
    }
    Ok(())
}
