//! `binky approve`: the commands worlds may run when approvals are on
//! (`binky settings approvals=true`).

use std::io::IsTerminal;

use binky_controllers::store;

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

/// `binky approve`.
pub async fn run(a: Args) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let worlds = ctx.store.read(store::worlds)?;
    let cmds = crate::requests::approvals(&ctx.store)?;
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
        // Off, nothing waits for a person: none is shown as pending.
        if !crate::requests::approvals_on(&ctx.store)? {
            if a.json {
                println!("[]");
            } else {
                println!("{}", crate::requests::APPROVALS_OFF);
            }
            return Ok(exit::OK);
        }
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&cmds).unwrap_or_default()
            );
            return Ok(exit::OK);
        }
        if cmds.is_empty() {
            println!("no commands: no world exists");
        }
        for c in &cmds {
            println!(
                "{}  {:<9} {}: {} (worlds: {})\n    {}",
                c.key,
                if c.approved { "approved" } else { "pending" },
                c.project,
                c.what,
                c.worlds.join(", "),
                c.command
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
    let chosen: Vec<&crate::requests::Approval> = match (&a.key, &a.all) {
        (Some(k), _) => {
            let c = crate::requests::approve(&ctx.store, k)?;
            println!(
                "approved {}  {}: {}\n    {}",
                c.key, c.project, c.what, c.command
            );
            let _ = crate::daemon::client::nudge(&ctx.home, None).await;
            return Ok(exit::OK);
        }
        (None, Some(name)) => {
            let found: Vec<_> = cmds.iter().filter(|c| c.worlds.contains(name)).collect();
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
    for c in &chosen {
        ctx.store.approve(&c.key, &c.project, &c.command)?;
        println!(
            "approved {}  {}: {}\n    {}",
            c.key, c.project, c.what, c.command
        );
    }
    let _ = crate::daemon::client::nudge(&ctx.home, None).await;
    Ok(exit::OK)
}
