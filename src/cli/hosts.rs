//! `binky hosts [--write | --remove]`: `/etc/hosts` lines for every routed hostname, for
//! the tools that cannot resolve `*.localhost` themselves; `--write` puts them in the file
//! and has the daemon keep them current, `--remove` takes them out and stops it.

use binky_controllers::route;

use super::context::{Ctx, Failure};
use super::exit;
use crate::hosts;

/// `binky hosts`.
pub fn run(write: bool, remove: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let table = route::load_table(&ctx.store)?;
    let lines = hosts::lines(&table);
    if !write && !remove {
        for l in &lines {
            println!("{l}");
        }
        if lines.is_empty() {
            eprintln!("binky: no world has a URL yet");
        } else if hosts::kept_file(&ctx.store)?.is_none() {
            // Why a person would want these lines, on this system.
            eprintln!(
                "binky: {}",
                binky_platform::net::localhost_names_on(binky_platform::install::System::current())
            );
        }
        return Ok(exit::OK);
    }
    // The file kept so far (`--remove` takes the block out of it), else this command's.
    let path = match (remove, hosts::kept_file(&ctx.store)?) {
        (true, Some(kept)) => kept,
        _ => std::path::absolute(hosts::default_file())
            .map_err(|e| Failure::failed(format!("cannot tell where the hosts file is: {e}")))?,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Failure::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let put = |text: &str, lines: &[String]| -> Result<(), Failure> {
        let new = hosts::with_block(text, lines);
        if new == text {
            return Ok(());
        }
        hosts::write(&path, &new).map_err(|e| {
            Failure::failed(if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!(
                    "cannot write {} (permission denied): run {}",
                    path.display(),
                    binky_platform::user::as_admin(
                        ctx.home.root(),
                        if write {
                            "hosts --write"
                        } else {
                            "hosts --remove"
                        }
                    )
                )
            } else {
                format!("cannot write {}: {e}", path.display())
            })
        })
    };
    // The file first: a write refused (not root) records nothing, and says how.
    put(&text, if write { &lines } else { &[] })?;
    // The daemon keeps the block current from now on (a route controller's effect), or
    // no more.
    let kept = if write {
        path.to_string_lossy().into_owned()
    } else {
        String::new()
    };
    ctx.store.set_setting(hosts::SETTING, &kept)?;
    if write {
        // A world made or removed between the read above and the setting: the daemon
        // rewrites the block at the next change only, so this command catches up itself.
        let now = hosts::lines(&route::load_table(&ctx.store)?);
        if now != lines {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            put(&text, &now)?;
        }
        println!(
            "{}: {} hostname(s) point at 127.0.0.1; binky keeps the block current as worlds come and go (`binky hosts --remove` takes it out)",
            path.display(),
            lines.len()
        );
        if let Some(note) =
            binky_platform::net::after_hosts_change_on(binky_platform::install::System::current())
        {
            println!("{note}");
        }
    } else {
        println!(
            "{}: binky's block removed; binky no longer keeps it",
            path.display()
        );
    }
    Ok(exit::OK)
}
