//! `binky gc [--yes] [--all-servers]`: find slices that belong to no world (left by a
//! crash, or by a store that was deleted), worlds' own redis servers whose world is gone,
//! and managed-server data directories whose binky
//! home is gone (`/var/lib/binky/<kind>/…`, where binky run as root keeps them), and drop
//! them after confirming.
//!
//! By default only binky's own managed servers are searched: a shared server named by an
//! `admin_url` may hold slices of another binky home (another user, a CI job), which this
//! home's store knows nothing about. `--all-servers` searches those too.

use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;
use crate::adapters::{redact, Adapter, AdapterConfig, Registry, Slice};
use crate::servers::{Kind, ServerName, Servers};

/// The adapter named `adapter`, and its config for the server at `url`.
fn server(
    registry: &Registry,
    adapter: &str,
    url: &str,
) -> Result<(Arc<dyn Adapter>, AdapterConfig), Failure> {
    let a = registry
        .get(adapter)
        .map_err(|e| Failure::failed(e.to_string()))?;
    let cfg = AdapterConfig {
        admin_url: Some(url.to_owned()),
        ..AdapterConfig::default()
    };
    Ok((a, cfg))
}

/// A server to search: (adapter name, admin URL).
type Target = (String, String);

/// `binky gc`.
pub async fn run(yes: bool, all_servers: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let registry = Registry::default();
    let (targets, mut known) = targets(&ctx, &registry, all_servers)?;
    let mut orphans = orphaned_slices(&registry, &targets, &known).await?;
    // gc acts in this process, beside a daemon that may be provisioning right now: a slice
    // or template made while the servers were listed is in the store by now (controllers
    // record before they create), so read the names again and keep anything either read knows.
    known.extend(known_names(&ctx)?);
    orphans.retain(|(_, _, n)| !known.contains(n));
    // Servers of a world's own (redis) whose world is gone: recorded, or files a lost
    // store left.
    let servers = Servers::new(ctx.home.clone(), ctx.store.clone());
    let own: Vec<String> = servers
        .world_servers(Kind::Redis)?
        .into_iter()
        .filter(|n| !known.contains(n))
        .collect();
    let data = crate::servers::orphaned_data();
    if orphans.is_empty() && data.is_empty() && own.is_empty() {
        println!(
            "no orphaned slices ({} server(s) searched) and no managed-server data of a removed binky home",
            targets.len()
        );
        return Ok(exit::OK);
    }
    print_found(&orphans, &own, &data);
    if !yes && !confirmed() {
        return Ok(exit::OK);
    }
    let mut failed = 0;
    for d in &data {
        match std::fs::remove_dir_all(&d.dir) {
            Ok(()) => println!("removed {}", d.dir.display()),
            Err(e) => {
                failed += 1;
                eprintln!("binky: cannot remove {}: {e}", d.dir.display());
            }
        }
    }
    for name in &own {
        match servers.remove_world(Kind::Redis, name).await {
            Ok(_) => println!("removed the own server of {name}"),
            Err(e) => {
                failed += 1;
                eprintln!("binky: cannot remove the own server of {name}: {e}");
            }
        }
    }
    failed += drop_slices(&registry, &orphans).await?;
    Ok(if failed > 0 { exit::FAILED } else { exit::OK })
}

/// The servers to search, and the slice and template names
/// this home knows.
fn targets(
    ctx: &Ctx,
    registry: &Registry,
    all_servers: bool,
) -> Result<(BTreeSet<Target>, BTreeSet<String>), Failure> {
    // The shared ones: a world's own server holds that world's slice alone (below).
    let mut targets: BTreeSet<Target> = ctx
        .store
        .read(store::servers)?
        .into_iter()
        .filter(|s| s.state == store::ServerState::Running)
        .filter_map(|s| {
            let name = ServerName::parse(&s.kind).filter(|n| n.slice.is_none())?;
            Some((name.kind.as_str().to_owned(), s.admin_url))
        })
        .collect();
    let known = known_names(ctx)?;
    for w in ctx.store.read(store::worlds)? {
        for s in ctx.store.read(|c| store::slices(c, w.id))? {
            if all_servers && registry.is_builtin(&s.adapter) {
                if let Some(u) = s.admin_url {
                    targets.insert((s.adapter, u));
                }
            }
        }
    }
    Ok((targets, known))
}

/// Lists every target server's slices and keeps those no name in `known` accounts for, as
/// (adapter, admin URL, slice name); a server that cannot be listed is skipped, and said so.
async fn orphaned_slices(
    registry: &Registry,
    targets: &BTreeSet<Target>,
    known: &BTreeSet<String>,
) -> Result<Vec<(String, String, String)>, Failure> {
    let mut orphans: Vec<(String, String, String)> = Vec::new();
    for (adapter, url) in targets {
        let (a, cfg) = server(registry, adapter, url)?;
        match a.list(&cfg).await {
            Ok(names) => {
                for n in names.into_iter().filter(|n| !known.contains(n)) {
                    orphans.push((adapter.clone(), url.clone(), n));
                }
            }
            Err(e) => eprintln!("binky: skipped {}: {e}", redact(url)),
        }
    }
    Ok(orphans)
}

/// Prints what gc found: orphaned slices, own servers of gone worlds, and data of gone homes.
fn print_found(
    orphans: &[(String, String, String)],
    own: &[String],
    data: &[crate::servers::OrphanData],
) {
    if !orphans.is_empty() {
        println!("slices that belong to no world:");
        for (adapter, url, name) in orphans {
            println!("  {adapter:<9} {name}  on {}", redact(url));
        }
    }
    if !own.is_empty() {
        println!("servers of a world's own whose world is gone (data and all):");
        for name in own {
            println!("  redis     {name}  in servers/redis/worlds/{name}");
        }
    }
    if !data.is_empty() {
        println!("managed-server data of binky homes that no longer exist:");
        for d in data {
            let home = d
                .home
                .as_ref()
                .map(|h| format!(" (home {})", h.display()))
                .unwrap_or_default();
            println!(
                "  {:<9} {}  {:.1} MiB{home}",
                d.kind,
                d.dir.display(),
                d.bytes as f64 / (1024.0 * 1024.0)
            );
        }
    }
}

/// Asks on a terminal whether to drop what was found; off a terminal, says how to.
fn confirmed() -> bool {
    if !std::io::stdin().is_terminal() {
        println!("run `binky gc --yes` to drop them");
        return false;
    }
    print!("drop them? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        println!("nothing dropped");
        return false;
    }
    true
}

/// Drops the orphaned slices from their servers; how many could not be dropped.
async fn drop_slices(
    registry: &Registry,
    orphans: &[(String, String, String)],
) -> Result<usize, Failure> {
    let mut failed = 0;
    for (adapter, url, name) in orphans {
        let (a, cfg) = server(registry, adapter, url)?;
        let slice = Slice {
            name: name.clone(),
            secret: String::new(),
        };
        match a.teardown(&slice, &cfg).await {
            Ok(()) => println!("dropped {name}"),
            Err(e) => {
                failed += 1;
                eprintln!("binky: cannot drop {name}: {e}");
            }
        }
    }
    Ok(failed)
}

/// Every slice and template name this home knows: the recorded slices, the names every
/// world's resource services get (recorded or not yet), and the golden templates.
fn known_names(ctx: &Ctx) -> Result<BTreeSet<String>, Failure> {
    let mut known = BTreeSet::new();
    for w in ctx.store.read(store::worlds)? {
        for s in ctx.store.read(|c| store::slices(c, w.id))? {
            known.insert(s.name);
        }
        for (name, svc) in &w.spec.services {
            if matches!(svc.kind, binky_controllers::spec::ServiceKind::Resource(_)) {
                known.insert(binky_controllers::adapter::slice_name(
                    &w.project, &w.name, name,
                ));
            }
        }
    }
    for g in ctx.store.read(store::goldens)? {
        known.extend(g.slices());
    }
    Ok(known)
}
