//! `binky check [PATH] [--json]`: validate a `binky.toml` and flag its footguns.

use std::path::PathBuf;

use super::context::Failure;
use super::exit;
use crate::check::{self, Level};
use crate::config;

/// `binky check`.
pub fn run(path: Option<PathBuf>, json: bool) -> Result<i32, Failure> {
    let cwd = std::env::current_dir().map_err(|e| Failure::failed(e.to_string()))?;
    let file = match path {
        Some(p) if p.is_dir() => p.join(config::FILE_NAME),
        Some(p) => p,
        None => cwd
            .ancestors()
            .map(|d| d.join(config::FILE_NAME))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                Failure::usage(format!(
                    "no binky.toml in {} or any directory above it; name one: `binky check PATH`",
                    cwd.display()
                ))
            })?,
    };
    let text =
        config::read_text(&file).map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    let mut findings = check::check(&text, &file);
    // What this shell leaves unset, `binky up` from it refuses.
    if let Ok(loaded) = config::parse(&text, &file) {
        let here = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        findings.extend(check::env_findings(&text, &loaded, &here));
        let dir = file.parent().unwrap_or(std::path::Path::new("."));
        findings.extend(check::golden_findings(&text, &loaded, dir));
        if let Ok(prefix) = crate::git::text(dir, &["rev-parse", "--show-prefix"]) {
            let prefix = std::path::Path::new(&prefix);
            let top = prefix
                .components()
                .fold(dir.to_path_buf(), |d, _| d.join(".."));
            findings.extend(check::copy_findings(&text, &loaded, &top, prefix));
        }
        findings.extend(check::limits_findings(&text, &loaded, || {
            crate::supervisor::resources::look("check")
        }));
        findings.extend(check::shared_findings(
            &text,
            &loaded,
            running_shared(&loaded.spec.project.name).as_ref(),
        ));
    }
    let errors = findings.iter().filter(|f| f.level == Level::Error).count();
    let warnings = findings.len() - errors;
    if json {
        let v = serde_json::json!({
            "file": file.display().to_string(),
            "ok": errors == 0,
            "errors": errors,
            "warnings": warnings,
            "findings": findings,
        });
        super::print_json(&v);
    } else {
        for f in &findings {
            println!("{}", f.render(&file));
        }
        if findings.is_empty() {
            println!("{}: ok", file.display());
        } else {
            println!("{errors} error(s), {warnings} warning(s)");
        }
    }
    Ok(if errors > 0 { exit::FAILED } else { exit::OK })
}

/// The shared services the worlds of `project` run now (its shared world's spec), when this
/// home has a store and the project a shared world: read only, nothing is made for it.
fn running_shared(project: &str) -> Option<binky_controllers::spec::Spec> {
    let home = crate::paths::Home::from_env().ok()?;
    if !home.db().is_file() {
        return None;
    }
    let store = binky_controllers::store::Store::open(&home.db()).ok()?;
    store
        .read(|c| {
            binky_controllers::store::world_by_name(c, project, binky_controllers::shared::WORLD)
        })
        .ok()
        .flatten()
        .map(|w| w.spec)
}
