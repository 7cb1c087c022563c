//! `binky approve`: the commands worlds may run when approvals are on
//! (`binky settings approvals=true`).

use std::io::IsTerminal;

use binky_controllers::gate::{self, Command};
use binky_controllers::store::{self, World};

use super::context::{Ctx, Failure};
use super::exit;

/// What to do.
pub struct Args {
    /// Approve this key.
    pub key: Option<String>,
    /// List commands and their state.
    pub list: bool,
    /// Approve every command of this world.
    pub all: Option<String>,
    /// Withdraw this approval.
    pub revoke: Option<String>,
    /// Approve without a terminal.
    pub yes: bool,
    /// Machine-readable list.
    pub json: bool,
}

fn every_command(worlds: &[World]) -> Vec<(Command, String, Vec<String>)> {
    let mut out: Vec<(Command, String, Vec<String>)> = Vec::new();
    for w in worlds.iter().filter(|w| !w.deleted) {
        for c in gate::commands(&w.spec, w.group.as_deref()) {
            match out.iter_mut().find(|(x, _, _)| x.key == c.key) {
                Some((_, _, ws)) => ws.push(w.name.clone()),
                None => out.push((c, w.project.clone(), vec![w.name.clone()])),
            }
        }
    }
    out
}

/// `binky approve`.
pub async fn run(a: Args) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let worlds = ctx.store.read(store::worlds)?;
    let approved = gate::approved(&ctx.store)?;
    let cmds = every_command(&worlds);
    if let Some(key) = &a.revoke {
        if !ctx.store.revoke_approval(key)? {
            return Err(Failure::usage(format!(
                "no approval `{key}`; see `binky approve --list`"
            )));
        }
        println!("revoked {key}: worlds that run it wait for approval again");
        let _ = crate::daemon::client::nudge(&ctx.home, None).await;
        return Ok(exit::OK);
    }
    if a.list || (a.key.is_none() && a.all.is_none()) {
        if a.json {
            let v: Vec<serde_json::Value> = cmds
                .iter()
                .map(|(c, p, ws)| {
                    serde_json::json!({"key": c.key, "project": p, "what": c.what,
                        "command": c.text, "worlds": ws, "approved": approved.contains(&c.key)})
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            return Ok(exit::OK);
        }
        if cmds.is_empty() {
            println!("no commands: no world exists");
        }
        for (c, p, ws) in &cmds {
            println!(
                "{}  {:<9} {p}: {} (worlds: {})\n    {}",
                c.key,
                if approved.contains(&c.key) {
                    "approved"
                } else {
                    "pending"
                },
                c.what,
                ws.join(", "),
                c.text
            );
        }
        return Ok(exit::OK);
    }
    // Approving: a person must see what they approve.
    if !a.yes && !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "approving needs a person at a terminal: run it yourself, or pass --yes if you have read the commands (`binky approve --list`)",
        ));
    }
    let chosen: Vec<&(Command, String, Vec<String>)> = match (&a.key, &a.all) {
        (Some(k), _) => {
            let found: Vec<_> = cmds
                .iter()
                .filter(|(c, _, _)| c.key.starts_with(k.as_str()))
                .collect();
            match found.len() {
                1 => found,
                0 => {
                    return Err(Failure::usage(format!(
                        "no command `{k}`; see `binky approve --list`"
                    )))
                }
                _ => {
                    return Err(Failure::usage(format!(
                        "`{k}` names several commands; give more of the key"
                    )))
                }
            }
        }
        (None, Some(name)) => {
            let found: Vec<_> = cmds.iter().filter(|(_, _, ws)| ws.contains(name)).collect();
            if found.is_empty() {
                let names: Vec<&str> = worlds.iter().map(|w| w.name.as_str()).collect();
                return Err(Failure::usage(format!(
                    "no world `{name}`; worlds: {}",
                    names.join(", ")
                )));
            }
            found
        }
        (None, None) => unreachable!("handled by the listing above"),
    };
    for (c, p, _) in &chosen {
        ctx.store.approve(&c.key, p, &c.text)?;
        println!("approved {}  {p}: {}\n    {}", c.key, c.what, c.text);
    }
    let _ = crate::daemon::client::nudge(&ctx.home, None).await;
    Ok(exit::OK)
}
