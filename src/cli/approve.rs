//! `binky approve`: the commands worlds may run when approvals are on
//! (`binky settings approvals=true`).

use binky_controllers::store;

use super::context::{Ctx, Failure, Kind};
use super::exit;

/// What `binky approve` is asked to do: its arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The command's key (or its start), from `--list`.
    pub key: Option<String>,
    /// List commands and whether they are approved.
    #[arg(long)]
    pub list: bool,
    /// Approve every command of this world.
    #[arg(long, value_name = "NAME", conflicts_with = "key")]
    pub all: Option<String>,
    /// Withdraw an approval.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["key", "all"])]
    pub revoke: Option<String>,
    /// Let `binky exec` run every command matching this pattern (`*` any run of
    /// characters, `?` one) in the worlds of the current directory's project.
    #[arg(long, value_name = "PATTERN", conflicts_with_all = ["key", "all", "revoke"])]
    pub exec: Option<String>,
    /// Accepted and ignored: approving always needs a person at a terminal (scripts of
    /// older binky passed it to approve without one).
    #[arg(long, hide = true)]
    pub yes: bool,
    /// Machine-readable list.
    #[arg(long)]
    pub json: bool,
}

/// `binky approve`.
pub async fn run(a: Args) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let worlds = ctx.store.read(store::worlds)?;
    let cmds = crate::requests::approvals(&ctx.store)?;
    if let Some(key) = &a.revoke {
        return revoke(&ctx, key).await;
    }
    if let Some(pattern) = &a.exec {
        return approve_pattern(&ctx, pattern);
    }
    if a.list || (a.key.is_none() && a.all.is_none()) {
        return list(&ctx, &cmds, a.json);
    }
    // Approving is a person's, at a terminal (`guard`): never a process binky started for a
    // world (an agent's `exec` of `binky approve … --yes`) nor an agent's own shell,
    // whatever it passes. `--yes` only spares the person the question.
    crate::requests::refuse_while_off(&ctx.store)?;
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
                ))
                .kind(Kind::NoWorld));
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

/// `binky approve --revoke KEY`: withdraw an approval; worlds that run it wait again.
async fn revoke(ctx: &Ctx, key: &str) -> Result<i32, Failure> {
    if !ctx.store.revoke_approval(key)? {
        return Err(Failure::usage(format!(
            "no approval `{key}`; see `binky approve --list`"
        )));
    }
    println!("revoked {key}: worlds that run it wait for approval again");
    let _ = crate::daemon::client::nudge(&ctx.home, None).await;
    Ok(exit::OK)
}

/// `binky approve --exec PATTERN`: let `binky exec` run the commands matching PATTERN in
/// the worlds of the current directory's project.
fn approve_pattern(ctx: &Ctx, pattern: &str) -> Result<i32, Failure> {
    crate::requests::refuse_while_off(&ctx.store)?;
    let project = match ctx.world(None) {
        Ok(w) => w.project,
        Err(_) => crate::cli::context::Checkout::discover(&std::env::current_dir().unwrap_or_default())
            .map_err(|_| Failure::usage("run `binky approve --exec` inside the project's repository: the pattern is the project's"))?
            .project_name_or_config()
            .ok_or_else(|| Failure::usage("no binky.toml here: run `binky approve --exec` inside the project's repository"))?,
    };
    if pattern.trim().is_empty() || pattern.trim() == "*" {
        return Err(Failure::usage(
            "a pattern of one `*` lets every command run: turn approvals off instead (`binky settings approvals=false`), or name the commands (`npm test*`)",
        ));
    }
    let key = format!(
        "pattern:{}",
        binky_controllers::approval::command_key(&project, pattern)
    );
    ctx.store.approve(&key, &project, pattern)?;
    println!(
        "approved for `binky exec` in {project}'s worlds: commands matching `{pattern}` ({key})"
    );
    Ok(exit::OK)
}

/// `binky approve --list` (and `binky approve` alone): every command and whether it is
/// approved.
fn list(ctx: &Ctx, cmds: &[crate::requests::Approval], json: bool) -> Result<i32, Failure> {
    // Off, nothing waits for a person: none is shown as pending.
    if !crate::requests::approvals_on(&ctx.store)? {
        if json {
            println!("[]");
        } else {
            println!("{}", crate::requests::APPROVALS_OFF);
        }
        return Ok(exit::OK);
    }
    if json {
        super::print_json(cmds);
        return Ok(exit::OK);
    }
    if cmds.is_empty() {
        println!("no commands: no world exists");
    }
    for c in cmds {
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
    Ok(exit::OK)
}
