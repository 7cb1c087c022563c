//! `binky golden ls | rm KEY`: the golden templates worlds are cloned from.

use std::time::{Duration, Instant};

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::events::clock;
use super::{exit, WaitArgs};

/// `binky golden`.
pub async fn run(
    action: &str,
    key: Option<String>,
    json: bool,
    wait: &WaitArgs,
) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let goldens = ctx.store.read(store::goldens)?;
    match action {
        "ls" => ls(&ctx, &goldens, json),
        "rm" => rm(&ctx, &goldens, key, wait).await,
        other => Err(Failure::usage(format!(
            "`binky golden {other}`: use ls or rm"
        ))),
    }
}

/// `binky golden ls`: each template, the worlds that use it and how long it is kept.
fn ls(ctx: &Ctx, goldens: &[store::GoldenRow], json: bool) -> Result<i32, Failure> {
    let settings = binky_controllers::settings::Settings::read(&ctx.store)?;
    let keep = settings.duration("golden_keep");
    let listed = crate::view::goldens_with_users(&ctx.store)?;
    // When an unused template goes by age (a template in use: never, for now).
    let kept_until = |g: &store::GoldenRow, users: &[String]| {
        (users.is_empty()
            && matches!(
                g.state,
                store::GoldenState::Ready | store::GoldenState::Failed
            ))
        .then(|| g.used_at + keep.as_millis() as i64)
    };
    if json {
        let rows: Vec<serde_json::Value> = listed
            .iter()
            .map(|(g, users)| {
                let mut v = serde_json::to_value(g).unwrap_or_default();
                v["used_by"] = serde_json::json!(users);
                v["kept_until"] = serde_json::json!(kept_until(g, users));
                v
            })
            .collect();
        super::print_json(&rows);
        return Ok(exit::OK);
    }
    if goldens.is_empty() {
        println!(
            "no golden templates (a service with `clone_from` makes one at its first `binky up`)"
        );
    }
    for (g, users) in &listed {
        print_template(g, users, kept_until(g, users), settings.get("golden_keep"));
    }
    Ok(exit::OK)
}

/// One template as `binky golden ls` prints it: its line, how it was made, until when it
/// is kept (`golden_keep`), and a failed one's output.
fn print_template(g: &store::GoldenRow, users: &[String], kept_until: Option<i64>, keep: &str) {
    println!(
        "{}  {:<9} {:<9} {}  built {}{}  used by {}",
        g.key,
        g.adapter,
        g.state,
        g.name,
        clock(g.created_at),
        g.build_ms
            .map(|ms| format!(" in {:.1}s", ms as f64 / 1000.0))
            .unwrap_or_default(),
        if users.is_empty() {
            "no world".to_owned()
        } else {
            users.join(", ")
        }
    );
    if !g.how.is_empty() {
        println!("    {}", g.how);
    }
    if g.state == store::GoldenState::Dropping && !g.output.is_empty() {
        println!("    {}", g.output);
    }
    if let Some(until) = kept_until {
        println!(
            "    kept until {} (golden_keep = {keep}; `binky golden rm {}` drops it now)",
            clock(until),
            &g.key[..g.key.len().min(12)]
        );
    }
    if g.state == store::GoldenState::Failed {
        if g.migrated {
            println!("    its migrated stage is kept: the next `binky up` runs the seed alone");
        }
        for line in g.output.lines() {
            println!("    {line}");
        }
    }
}

/// `binky golden rm KEY`: ask the daemon to drop the one template KEY begins the key of,
/// in whatever state it is, and wait until it is gone (`--timeout`; `--no-wait`: not at
/// all), saying what was dropped or what holds it.
async fn rm(
    ctx: &Ctx,
    goldens: &[store::GoldenRow],
    key: Option<String>,
    wait: &WaitArgs,
) -> Result<i32, Failure> {
    let Some(key) = key else {
        return Err(Failure::usage(
            "name the template: `binky golden rm KEY` (keys: `binky golden ls`)",
        ));
    };
    let matches: Vec<_> = goldens.iter().filter(|g| g.key.starts_with(&key)).collect();
    let g = match matches.as_slice() {
        [g] => *g,
        [] => {
            return Err(Failure::usage(format!(
                "no golden template `{key}`; templates: {} (see `binky golden ls`)",
                if goldens.is_empty() {
                    "none".to_owned()
                } else {
                    goldens
                        .iter()
                        .map(|g| g.key.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )))
        }
        _ => {
            return Err(Failure::usage(format!(
                "`{key}` names several templates; give more of the key"
            )))
        }
    };
    let other = other_home(ctx, g).await?;
    ctx.store.request_golden_drop(&g.key)?;
    crate::daemon::client::ensure(&ctx.home).await?;
    crate::daemon::client::nudge(&ctx.home, None).await?;
    let what = format!("golden template {} ({}, {})", g.key, g.name, g.state);
    if wait.no_wait {
        println!(
            "dropping {what}; worlds keep their copies (`binky golden ls` shows when it is gone)"
        );
        return Ok(exit::OK);
    }
    // The daemon forgets the request once the template is gone (a world may build one
    // of the same key again at once: the request, not the row, says it was dropped).
    let started = Instant::now();
    loop {
        let asked = ctx.store.read(store::golden_drops)?.contains(&g.key);
        if !asked {
            match &other {
                Some(home) => println!(
                    "{what} belongs to another binky home ({home}), which uses it: this home forgot it and left it on its server"
                ),
                None => println!(
                    "dropped {what}: {} on its server; worlds keep their copies, and a world that clones from it again gets a fresh one",
                    g.slices().join(" and ")
                ),
            }
            return Ok(exit::OK);
        }
        if started.elapsed() >= wait.timeout {
            let why = held_by(ctx, &g.key)?;
            return Err(Failure::pending(format!(
                "{what} is not dropped yet after {}s: {why}; the daemon drops it as soon as it can (`binky golden ls` shows it)",
                wait.timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Why the template `key` is not dropped yet, as its row and the worlds say.
fn held_by(ctx: &Ctx, key: &str) -> Result<String, Failure> {
    let Some(g) = ctx.store.read(|c| store::golden(c, key))? else {
        return Ok("it is being dropped".into());
    };
    let worlds = ctx.store.read(store::worlds)?;
    let name_of = |id: i64| {
        worlds
            .iter()
            .find(|w| w.id == id)
            .map(|w| w.name.clone())
            .unwrap_or_else(|| format!("#{id}"))
    };
    let waited = ctx.store.read(store::goldens_waited_for)?;
    let copied_by: Vec<String> = ctx
        .store
        .read(store::goldens)?
        .into_iter()
        .filter(|b| b.state == store::GoldenState::Building && b.base.as_deref() == Some(key))
        .map(|b| b.name)
        .collect();
    Ok(match g.state {
        store::GoldenState::Dropping if !g.output.is_empty() => g.output,
        store::GoldenState::Dropping => "its databases are being dropped".into(),
        _ if !copied_by.is_empty() => {
            format!("{} is being built on a copy of it", copied_by.join(", "))
        }
        store::GoldenState::Building => format!(
            "its build runs{}; it is dropped when that build ends",
            g.owner_world
                .map(|w| format!(" in world `{}`", name_of(w)))
                .unwrap_or_default()
        ),
        _ if waited.contains(key) => {
            "a world is being cloned from it; it is dropped once that world has its copy".into()
        }
        _ => "the daemon has not come to it yet".into(),
    })
}

/// The other binky home `g`'s server records as the template's maker (a template two homes
/// named alike before homes had an identity, which that home adopted); `None` when it is
/// this home's, unmarked, or its server cannot say now (the daemon's drop asks again).
async fn other_home(ctx: &Ctx, g: &store::GoldenRow) -> Result<Option<String>, Failure> {
    let home = ctx.store.read(store::home_id)?;
    let Some(url) = g.admin_url.clone() else {
        return Ok(None);
    };
    let Ok(adapter) = crate::adapters::Registry::default().get(&g.adapter) else {
        return Ok(None);
    };
    let cfg = crate::adapters::AdapterConfig {
        admin_url: Some(url),
        ..Default::default()
    };
    let slice = crate::adapters::Slice {
        name: g.name.clone(),
        secret: g.secret.clone(),
    };
    Ok(match adapter.maker(&slice, &cfg).await {
        Ok(maker) => maker.other_than(&home).map(str::to_owned),
        Err(_) => None,
    })
}
