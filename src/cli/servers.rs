//! `binky servers [stop [KIND]]`: the servers binky runs itself.

use std::time::Duration;

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;
use crate::daemon::client::{self, ClientError};
use crate::daemon::protocol::Request;
use crate::supervisor::procfs;

/// `binky servers`.
pub async fn run(stop: bool, kind: Option<String>, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    if let Some(k) = &kind {
        if crate::servers::Kind::parse(k).is_none() {
            return Err(Failure::usage(format!(
                "no managed server kind `{k}`; kinds: postgres, redis, mysql (also mariadb, percona)"
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
