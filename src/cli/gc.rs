//! `binky gc [--yes] [--all-servers]`: find slices that belong to no world (left by a
//! crash, or by a store that was deleted), worlds' own redis servers whose world is gone,
//! and managed-server data directories whose binky
//! home is gone (`/var/lib/binky/<kind>/…`, where binky run as root keeps them), and drop
//! them after confirming.
//!
//! By default only binky's own managed servers are searched: a shared server named by an
//! `admin_url` may hold slices of another binky home (another user, a CI job), which this
//! home's store knows nothing about. `--all-servers` searches those too.
//!
//! # Whose slices go
//! Each slice's server records the home that made it ([`Maker`]). gc drops only the slices
//! this home made that no world of it owns. A slice another home's mark names is listed and
//! left (that home may be using it); one with no home's mark (made before binky marked its
//! slices, by this home or another) is listed and left too. Each list says the explicit
//! way on: `--gone-home ID` for the slices of a home that no longer exists (its store was
//! deleted: a new store is a new home), `--unmarked` for the unmarked ones once the user
//! knows no other home uses them.

use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;
use crate::adapters::{redact, Adapter, AdapterConfig, AdapterKind, Maker, Registry, Slice};
use crate::servers::{Kind, ServerName, Servers};

/// What `binky gc` may drop beyond this home's own orphans.
#[derive(Clone, Debug, Default)]
pub struct Also {
    /// The identities of homes that no longer exist, whose slices go too (`--gone-home`).
    pub gone_homes: Vec<String>,
    /// Slices no home's mark names go too (`--unmarked`).
    pub unmarked: bool,
}

/// A slice gc found on a server that no world of this home owns.
#[derive(Clone, Debug)]
struct Found {
    adapter: String,
    url: String,
    name: String,
    maker: Maker,
}

impl Found {
    /// Does it go, for this home (`home`) and what the user allowed (`also`)?
    fn goes(&self, home: &str, also: &Also) -> bool {
        match &self.maker {
            Maker::Home(h) => h == home || also.gone_homes.contains(h),
            Maker::Unmarked | Maker::Untold => also.unmarked,
            Maker::Absent => false,
        }
    }
}

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
pub async fn run(yes: bool, all_servers: bool, also: Also) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let home = ctx.store.read(store::home_id)?;
    if let Some(bad) = also
        .gone_homes
        .iter()
        .find(|h| !crate::adapters::mark::is_home_id(h))
    {
        return Err(Failure::usage(format!(
            "`--gone-home {bad}` is not a home's identity (eight characters of a-z and 2-7, as gc lists them)"
        )));
    }
    if also.gone_homes.contains(&home) {
        return Err(Failure::usage(format!(
            "`--gone-home {home}` is this home; its own orphaned slices are dropped without it"
        )));
    }
    let registry = Registry::default();
    let (targets, mut known) = targets(&ctx, all_servers)?;
    let mut found = unowned_slices(&registry, &targets, &known).await?;
    // gc acts in this process, beside a daemon that may be provisioning right now: a slice
    // or template made while the servers were listed is in the store by now (controllers
    // record before they create), so read the names again and keep anything either read knows.
    known.extend(known_names(&ctx)?);
    found.retain(|f| !known.contains(&f.name) && f.maker != Maker::Absent);
    let (orphans, left): (Vec<Found>, Vec<Found>) =
        found.into_iter().partition(|f| f.goes(&home, &also));
    // Servers of a world's own (redis) whose world is gone: recorded, or files a lost
    // store left.
    let servers = Servers::new(ctx.home.clone(), ctx.store.clone());
    let own: Vec<String> = servers
        .world_servers(Kind::Redis)?
        .into_iter()
        .filter(|n| !known.contains(n))
        .collect();
    let data = crate::servers::orphaned_data();
    print_left(&home, &left);
    if orphans.is_empty() && data.is_empty() && own.is_empty() {
        println!(
            "no orphaned slices of this home ({home}; {} server(s) searched) and no managed-server data of a removed binky home",
            targets.len()
        );
        return Ok(exit::OK);
    }
    print_found(&home, &orphans, &own, &data);
    if !yes && !confirmed()? {
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

/// The servers to search, and the slice and template names this home knows. A server is
/// searched once, under its adapter's canonical name, whichever of the adapter's names (and
/// versions) its worlds gave.
fn targets(ctx: &Ctx, all_servers: bool) -> Result<(BTreeSet<Target>, BTreeSet<String>), Failure> {
    // The shared ones: a world's own server holds that world's slice alone (below).
    let mut targets: BTreeSet<Target> = ctx
        .store
        .read(store::servers)?
        .into_iter()
        .filter(|s| s.state == store::ServerState::Running)
        .filter_map(|s| {
            let name = ServerName::parse(&s.kind).filter(|n| n.slice.is_none())?;
            Some((name.kind.adapter().name().to_owned(), s.admin_url))
        })
        .collect();
    let known = known_names(ctx)?;
    if all_servers {
        for w in ctx.store.read(store::worlds)? {
            for s in ctx.store.read(|c| store::slices(c, w.id))? {
                if let (Some(kind), Some(u)) = (AdapterKind::of(&s.adapter), s.admin_url) {
                    targets.insert((kind.name().to_owned(), u));
                }
            }
        }
    }
    Ok((targets, known))
}

/// Lists every target server's slices that no name in `known` accounts for, with the home
/// their server says made them; a server that cannot be listed (or asked) is skipped, and
/// said so.
async fn unowned_slices(
    registry: &Registry,
    targets: &BTreeSet<Target>,
    known: &BTreeSet<String>,
) -> Result<Vec<Found>, Failure> {
    let mut found = Vec::new();
    for (adapter, url) in targets {
        let (a, cfg) = server(registry, adapter, url)?;
        let names = match a.list(&cfg).await {
            Ok(names) => names,
            Err(e) => {
                eprintln!("binky: skipped {}: {e}", redact(url));
                continue;
            }
        };
        for name in names.into_iter().filter(|n| !known.contains(n)) {
            let slice = Slice {
                name: name.clone(),
                secret: String::new(),
            };
            match a.maker(&slice, &cfg).await {
                Ok(maker) => found.push(Found {
                    adapter: adapter.clone(),
                    url: url.clone(),
                    name,
                    maker,
                }),
                Err(e) => eprintln!("binky: skipped {name} on {}: {e}", redact(url)),
            }
        }
    }
    Ok(found)
}

/// Prints the slices gc leaves: other homes' and unmarked ones, each with the explicit way
/// to drop them.
fn print_left(home: &str, left: &[Found]) {
    let (others, unmarked): (Vec<&Found>, Vec<&Found>) =
        left.iter().partition(|f| matches!(f.maker, Maker::Home(_)));
    if !others.is_empty() {
        println!("slices that belong to another binky home (left: that home may be using them):");
        for f in &others {
            let Maker::Home(h) = &f.maker else { continue };
            println!(
                "  {:<9} {}  on {}  belongs to another binky home ({h})",
                f.adapter,
                f.name,
                redact(&f.url)
            );
        }
        println!("  (this home is {home}; if a home above no longer exists — its store was deleted — `binky gc --gone-home ID` drops its slices)");
    }
    if !unmarked.is_empty() {
        println!("slices no home's mark names (left: made before binky marked its slices, by this home or another):");
        for f in &unmarked {
            println!("  {:<9} {}  on {}", f.adapter, f.name, redact(&f.url));
        }
        println!("  (once no other binky home uses these servers, or those slices, `binky gc --unmarked` drops them)");
    }
}

/// Prints what gc found: orphaned slices, own servers of gone worlds, and data of gone homes.
fn print_found(home: &str, orphans: &[Found], own: &[String], data: &[crate::servers::OrphanData]) {
    if !orphans.is_empty() {
        println!("slices that belong to no world of this home ({home}):");
        for f in orphans {
            let whose = match &f.maker {
                Maker::Home(h) if h != home => format!("  (of gone home {h})"),
                Maker::Unmarked | Maker::Untold => "  (no home's mark)".to_owned(),
                _ => String::new(),
            };
            println!(
                "  {:<9} {}  on {}{whose}",
                f.adapter,
                f.name,
                redact(&f.url)
            );
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
fn confirmed() -> Result<bool, Failure> {
    if !std::io::stdin().is_terminal() {
        println!("run `binky gc --yes` to drop them");
        return Ok(false);
    }
    // `--yes` is a person's (`guard`); so is answering the question, which a process binky
    // started could do at a terminal of its own (`script`).
    super::context::person(
        "dropping orphaned slices and servers' data (which may be another home's)",
        "ask a person to run `binky gc` in their own terminal",
    )?;
    print!("drop them? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        println!("nothing dropped");
        return Ok(false);
    }
    Ok(true)
}

/// Drops the orphaned slices from their servers; how many could not be dropped. Each
/// slice's maker is asked again right before: one another home adopted since the listing
/// is left.
async fn drop_slices(registry: &Registry, orphans: &[Found]) -> Result<usize, Failure> {
    let mut failed = 0;
    for f in orphans {
        let (a, cfg) = server(registry, &f.adapter, &f.url)?;
        let slice = Slice {
            name: f.name.clone(),
            secret: String::new(),
        };
        match a.maker(&slice, &cfg).await {
            Ok(now) if now == f.maker => {}
            Ok(Maker::Absent) => continue,
            Ok(now) => {
                eprintln!(
                    "binky: left {}: its mark changed since it was listed ({now:?})",
                    f.name
                );
                continue;
            }
            Err(e) => {
                failed += 1;
                eprintln!("binky: cannot drop {}: {e}", f.name);
                continue;
            }
        }
        match a.teardown(&slice, &cfg).await {
            Ok(()) => println!("dropped {}", f.name),
            Err(e) => {
                failed += 1;
                eprintln!("binky: cannot drop {}: {e}", f.name);
            }
        }
    }
    Ok(failed)
}

/// Every slice and template name this home knows: the recorded slices, the names every
/// world's resource services get (recorded or not yet), and the golden templates.
fn known_names(ctx: &Ctx) -> Result<BTreeSet<String>, Failure> {
    let mut known = BTreeSet::new();
    let home = ctx.store.read(store::home_id)?;
    for w in ctx.store.read(store::worlds)? {
        for s in ctx.store.read(|c| store::slices(c, w.id))? {
            known.insert(s.name);
        }
        for (name, svc) in &w.spec.services {
            if matches!(svc.kind, binky_controllers::spec::ServiceKind::Resource(_)) {
                known.insert(binky_controllers::adapter::slice_name(
                    &home, &w.project, &w.name, name,
                ));
            }
        }
    }
    for g in ctx.store.read(store::goldens)? {
        known.extend(g.slices());
    }
    Ok(known)
}
