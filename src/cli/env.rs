//! `binky env NAME`: a world's URLs and ports as environment variables.

use binky_controllers::store;
use serde::Serialize;

use super::context::{Ctx, Failure};
use super::exit;

fn shell_quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// `binky env`.
pub fn run(name: Option<String>, shell: bool, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let ports = ctx.store.read(|c| store::ports_seen_by(c, &world))?;
    let proxy = ctx.store.read(store::proxy_view)?;
    let slices = ctx.store.read(|c| store::slices_seen_by(c, &world))?;
    let tokens = binky_controllers::env::tokens(&world, &ports, &proxy, &slices);
    let vars = binky_controllers::env::exported(&world, &tokens, &proxy);
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
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
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
