//! `binky env NAME`: a world's URLs and ports as environment variables.

use std::collections::BTreeMap;

use binky_controllers::store::{self, Store, StoreError, World};
use serde::Serialize;

use super::context::{Ctx, Failure};
use super::exec::shell_quote;
use super::exit;

/// Variables (or URLs) by name.
type Named = BTreeMap<String, String>;

/// What `binky env` and MCP's `env` give of `world`: its variables, each with the value a
/// command run in the world gets ([`binky_controllers::env::handed_out`]), and its services'
/// URLs through the proxy.
pub(crate) fn handed_out(store: &Store, world: &World) -> Result<(Named, Named), StoreError> {
    let snap = binky_controllers::env::Snapshot::read(store, world)?;
    // Where the worktree is (an adopted one may be elsewhere than planned): its services'
    // `env_file`s are read from there, as every command of the world reads them.
    let worktree = store
        .read(|c| store::worktree(c, world.id))?
        .map(|w| w.path)
        .unwrap_or_else(|| world.worktree_path.clone());
    let layout = binky_controllers::env::Layout { worktree };
    Ok((
        binky_controllers::env::handed_out(world, &layout, &snap),
        binky_controllers::env::shown_urls(world, &snap.tokens),
    ))
}

/// `binky env`.
pub fn run(name: Option<String>, shell: bool, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let (vars, _) = handed_out(&ctx.store, &world)?;
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            project: &'a str,
            world: &'a str,
            env: &'a BTreeMap<String, String>,
        }
        let out = Out {
            project: &world.project,
            world: &world.name,
            env: &vars,
        };
        super::print_json(&out);
    } else {
        for (k, v) in &vars {
            if shell {
                println!("export {k}={}", shell_quote(v));
            } else {
                println!("{k}={v}");
            }
        }
    }
    Ok(exit::OK)
}
