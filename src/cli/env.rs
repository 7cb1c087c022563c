//! `binky env NAME`: a world's URLs and ports as environment variables.

use serde::Serialize;

use super::context::{Ctx, Failure};
use super::exec::shell_quote;
use super::exit;

/// `binky env`.
pub fn run(name: Option<String>, shell: bool, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let snap = binky_controllers::env::Snapshot::read(&ctx.store, &world)?;
    let vars = binky_controllers::env::exported(&world, &snap.tokens, &snap.proxy);
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            project: &'a str,
            world: &'a str,
            env: &'a std::collections::BTreeMap<String, String>,
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
