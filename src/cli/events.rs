//! `binky events NAME`: what happened to a world.

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;

/// Local time of a store timestamp, `2026-12-02 16:12:39`.
pub fn clock(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// `binky events`.
pub fn run(name: Option<String>, lines: usize, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let evs = ctx
        .store
        .read(|c| store::events(c, &world.project, &world.name, 0, lines))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&evs).unwrap_or_default());
        return Ok(exit::OK);
    }
    for e in evs {
        println!(
            "{}  {:<16} {}",
            clock(e.at),
            e.kind,
            e.message
                .replace('\n', "\n                                       ")
        );
    }
    Ok(exit::OK)
}
