//! `binky init [DIR] [--force]`: write a starting `binky.toml` in DIR from the compose file
//! (and `.env`) found there. The mapping itself is [`crate::init`]; this reads, checks and
//! writes.
//!
//! # Guarantees
//! - Nothing is written on error: not when a `binky.toml` exists (without `--force`), not
//!   when there is no compose file or it cannot be read, not when the result would not
//!   parse.
//! - The file appears whole: written beside and renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};

use binky_controllers::admission::{self, Verdict};

use super::context::Failure;
use super::exit;
use crate::config::FILE_NAME;
use crate::init::{self, COMPOSE_FILES};

/// `binky init`.
pub fn run(dir: Option<PathBuf>, force: bool) -> Result<i32, Failure> {
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "{} is not a directory; run `binky init` in the project's directory, or name it: binky init DIR",
            dir.display()
        )));
    }
    let target = dir.join(FILE_NAME);
    if target.exists() && !force {
        return Err(Failure::usage(format!(
            "{} already exists; pass --force to overwrite it (its contents are lost), or edit it by hand",
            target.display()
        )));
    }
    let found: Vec<PathBuf> = COMPOSE_FILES
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    let Some(compose_path) = found.first() else {
        return Err(Failure::usage(format!(
            "no compose file in {}: looked for {}\n  fix: run `binky init DIR` on the directory that has the project's compose file, or write binky.toml by hand (docs/config.md)",
            dir.display(),
            COMPOSE_FILES.join(", ")
        )));
    };
    if found.len() > 1 {
        eprintln!(
            "binky: several compose files; reading {} (the one `docker compose` prefers)",
            compose_path.display()
        );
    }
    let compose = std::fs::read_to_string(compose_path).map_err(|e| {
        Failure::failed(format!(
            "cannot read {}: {e}; make it readable, then run `binky init` again",
            compose_path.display()
        ))
    })?;
    let dotenv_path = dir.join(".env");
    let dotenv = match std::fs::read_to_string(&dotenv_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Failure::failed(format!(
                "cannot read {}: {e}; make it readable (binky init reads it to understand ${{VAR}} in the compose file, never to copy values)",
                dotenv_path.display()
            )))
        }
    };
    let dir_name = std::fs::canonicalize(&dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let generated = init::generate(
        &compose,
        &compose_path.display().to_string(),
        dotenv.as_deref(),
        &dir_name,
    )
    .map_err(|e| Failure::usage(e.to_string()))?;

    // What binky would say at `binky up`: a file binky init writes must never be refused
    // for its form. (Adapters found on PATH or not are a matter of installing them.)
    let loaded = crate::config::parse(&generated.toml, &target).map_err(|e| {
        Failure::failed(format!(
            "binky init made a binky.toml that does not validate (a bug; nothing was written):\n{e}"
        ))
    })?;
    if let Verdict::Deny { reason } = admission::check_spec(&loaded.spec, None) {
        return Err(Failure::usage(format!(
            "{}: {reason}; nothing was written",
            compose_path.display()
        )));
    }

    write_whole(&target, &generated.toml, force).map_err(|e| {
        Failure::failed(format!(
            "cannot write {}: {e}; nothing was written",
            target.display()
        ))
    })?;
    print_summary(&target, compose_path, &generated);
    Ok(exit::OK)
}

/// Write `text` to `path` whole: beside it first, then renamed. Without `force`, a file
/// that appeared meanwhile is not replaced.
fn write_whole(path: &Path, text: &str, force: bool) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!(".{FILE_NAME}.init-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        if force {
            std::fs::rename(&tmp, path)
        } else {
            // A hard link fails when the target exists: no race with another writer.
            std::fs::hard_link(&tmp, path)?;
            std::fs::remove_file(&tmp)
        }
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn print_summary(target: &Path, compose: &Path, g: &init::Generated) {
    let file = compose
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    println!("wrote {} from {file}", target.display());
    println!("mapped:");
    for m in &g.mapped {
        println!("  {m}");
    }
    if !g.to_decide.is_empty() {
        println!("to decide (TODO lines at the top of the file):");
        for t in &g.to_decide {
            println!("  - {t}");
        }
    }
    if !g.to_set.is_empty() {
        println!("set before `binky up` (no credential was copied into the file):");
        for (name, why) in &g.to_set {
            println!("  {name}: {why}");
        }
    }
    println!("next: read {FILE_NAME}, `binky check` it, then `binky up NAME`");
}
