//! `binky settings [KEY=VALUE…]` and `binky config`: the machine's settings (never a
//! repository's): resident limits, approvals, the proxy's ports.

use binky_controllers::settings::{self, validate};
use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;

/// `binky settings`.
pub async fn run(assignments: Vec<String>, json: bool, describe: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    // Validate every assignment before writing any.
    let mut writes = Vec::new();
    for a in &assignments {
        let Some((k, v)) = a.split_once('=') else {
            return Err(Failure::usage(format!(
                "`{a}`: write KEY=VALUE, e.g. `binky settings max_parallel=8`"
            )));
        };
        let value = validate(k.trim(), v).map_err(|e| Failure::usage(e.to_string()))?;
        writes.push((k.trim().to_owned(), value));
    }
    // The machine's settings are a person's, at a terminal (`guard`, before this runs): an
    // agent may not widen what agents may do (`mcp_remove_any`, `approvals`, …).
    for (k, v) in &writes {
        ctx.store.set_setting(k, v)?;
        println!("{k} = {v}");
    }
    if !writes.is_empty() {
        // Worlds look again (a raised limit admits queued ones); no daemon, nothing to do.
        let _ = crate::daemon::client::nudge(&ctx.home, None).await;
        return Ok(exit::OK);
    }
    let mut rows = Vec::new();
    for s in settings::ALL {
        let set = ctx.store.read(|c| store::setting(c, s.key))?;
        rows.push((
            s.key,
            set.clone().unwrap_or_else(|| s.default.to_owned()),
            set.is_none(),
            s.what,
        ));
    }
    if json {
        let v: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, v, _, _)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
            .collect();
        super::print_json(&v);
        return Ok(exit::OK);
    }
    for (k, v, default, what) in rows {
        if describe {
            println!(
                "{k} = {v}{}\n    {what}",
                if default { "  (default)" } else { "" }
            );
        } else {
            println!("{k} = {v}{}", if default { "  (default)" } else { "" });
        }
    }
    Ok(exit::OK)
}

/// `binky reserve` with no flag: the two reserves as they are.
pub fn show_reserves() -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let s = settings::Settings::read(&ctx.store)?;
    println!(
        "ram_reserve_percent = {}\ndisk_reserve_gib = {}",
        s.get("ram_reserve_percent"),
        s.get("disk_reserve_gib")
    );
    Ok(exit::OK)
}
