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

/// Development variants of a compose file, in the order `binky init` prefers them when
/// the project has no `compose.yaml` (cookiecutter-django's `docker-compose.local.yml`).
const DEV_VARIANTS: [&str; 4] = ["local", "dev", "development", "develop"];

/// The compose files a project uses, as `docker compose` would read them, and a note on
/// how they were chosen.
fn compose_files(dir: &Path, given: &[PathBuf]) -> Result<(Vec<PathBuf>, Option<String>), Failure> {
    if !given.is_empty() {
        let files: Vec<PathBuf> = given
            .iter()
            .map(|f| {
                if f.is_absolute() {
                    f.clone()
                } else {
                    dir.join(f)
                }
            })
            .collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            return Err(Failure::usage(format!(
                "{} does not exist; name a compose file of the project: binky init -f FILE",
                missing.display()
            )));
        }
        return Ok((files, None));
    }
    // COMPOSE_FILE, from the environment or the project's .env, as compose reads it.
    let from_env = std::env::var("COMPOSE_FILE")
        .ok()
        .map(|v| (v, "the environment"));
    let from_dotenv = || {
        std::fs::read_to_string(dir.join(".env"))
            .ok()
            .and_then(|t| {
                binky_controllers::env::parse_dotenv(&t)
                    .into_iter()
                    .find(|(k, _)| k == "COMPOSE_FILE")
                    .map(|(_, v)| (v, ".env"))
            })
    };
    if let Some((list, whence)) = from_env.or_else(from_dotenv) {
        let sep = std::env::var("COMPOSE_PATH_SEPARATOR").unwrap_or_else(|_| ":".into());
        let files: Vec<PathBuf> = list
            .split(sep.as_str())
            .filter(|f| !f.is_empty())
            .map(|f| dir.join(f))
            .collect();
        if !files.is_empty() && files.iter().all(|f| f.is_file()) {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            return Ok((
                files,
                Some(format!("COMPOSE_FILE in {whence}: {}", names.join(", "))),
            ));
        }
    }
    let found: Vec<PathBuf> = COMPOSE_FILES
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Some(base) = found.first() {
        let mut files = vec![base.clone()];
        let mut note = (found.len() > 1).then(|| {
            format!(
                "several compose files; reading {} (the one `docker compose` prefers)",
                base.display()
            )
        });
        // compose.yaml → compose.override.yaml, docker-compose.yml → docker-compose.override.yml.
        let stem = if base
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("docker-"))
        {
            "docker-compose"
        } else {
            "compose"
        };
        if let Some(over) = ["yaml", "yml"]
            .iter()
            .map(|ext| dir.join(format!("{stem}.override.{ext}")))
            .find(|p| p.is_file())
        {
            note = Some(format!(
                "reading {} with its override {}, as `docker compose` does",
                base.display(),
                over.display()
            ));
            files.push(over);
        }
        return Ok((files, note));
    }
    // No default file: a development variant (docker-compose.local.yml), as projects that
    // keep one per environment have.
    for variant in DEV_VARIANTS {
        for stem in ["docker-compose", "compose"] {
            for ext in ["yml", "yaml"] {
                let p = dir.join(format!("{stem}.{variant}.{ext}"));
                if p.is_file() {
                    let others: Vec<String> = std::fs::read_dir(dir)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| {
                            (n.starts_with("docker-compose.") || n.starts_with("compose."))
                                && (n.ends_with(".yml") || n.ends_with(".yaml"))
                                && Some(n.as_str()) != p.file_name().and_then(|f| f.to_str())
                        })
                        .collect();
                    let note = format!(
                        "no compose.yaml: reading {}, the development file{}; pass -f FILE to read another",
                        p.display(),
                        if others.is_empty() {
                            String::new()
                        } else {
                            format!(" (also here: {})", others.join(", "))
                        }
                    );
                    return Ok((vec![p], Some(note)));
                }
            }
        }
    }
    Err(Failure::usage(format!(
        "no compose file in {}: looked for COMPOSE_FILE, {}, and docker-compose.<{}>.yml\n  fix: name it: `binky init -f docker-compose.prod.yml` (repeat -f to merge several), run `binky init DIR` on the directory that has the project's compose file, or write binky.toml by hand (docs/config.md)",
        dir.display(),
        COMPOSE_FILES.join(", "),
        DEV_VARIANTS.join("|")
    )))
}

/// `binky init`.
pub fn run(dir: Option<PathBuf>, force: bool, given: Vec<PathBuf>) -> Result<i32, Failure> {
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
    let (paths, note) = compose_files(&dir, &given)?;
    if let Some(note) = note {
        eprintln!("binky: {note}");
    }
    let mut texts = Vec::new();
    for p in &paths {
        let text = std::fs::read_to_string(p).map_err(|e| {
            Failure::failed(format!(
                "cannot read {}: {e}; make it readable, then run `binky init` again",
                p.display()
            ))
        })?;
        texts.push((p.display().to_string(), text));
    }
    let compose_path = &paths[0];
    let compose = if texts.len() == 1 {
        texts[0].1.clone()
    } else {
        init::merge_compose(&texts).map_err(|e| Failure::usage(e.to_string()))?
    };
    let compose_name = texts
        .iter()
        .map(|(n, _)| {
            Path::new(n)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" + ");
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
    // The env_files services name: their addresses of compose services become binky's.
    let env_files = env_file_texts(&dir, &compose);
    let generated = init::generate_with_files(
        &compose,
        &compose_name,
        dotenv.as_deref(),
        &dir_name,
        &env_files,
    )
    .map_err(|e| Failure::usage(e.to_string()))?;
    let mut generated = generated;
    let hints = host_header_hints(&dir, &generated.toml);
    if !hints.is_empty() {
        let notes: String = hints.iter().map(|h| format!("# NOTE: {h}\n")).collect();
        generated.toml =
            generated
                .toml
                .replacen("\n[project]\n", &format!("\n{notes}\n[project]\n"), 1);
        generated.to_decide.extend(hints);
    }

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
    print_summary(&target, &compose_name, &generated);
    Ok(exit::OK)
}

/// Frameworks in `dir` that refuse a request whose `Host` is not one they know: the
/// proxy sends `<service>.<world>.<project>.localhost`. What to change, for each found.
fn host_header_hints(dir: &Path, toml: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if path.is_dir() {
                if depth < 3
                    && !matches!(
                        name.as_str(),
                        ".git" | "node_modules" | ".venv" | "venv" | "vendor" | "target"
                    )
                {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            let hint = if name == "manage.py" && !toml.contains("ALLOWED_HOSTS") {
                Some(format!("Django ({rel}) refuses unknown hosts: add \".localhost\" to ALLOWED_HOSTS in the settings it runs with (or read them from an env variable and set it in [services.*.env])"))
            } else if rel.ends_with("config/application.rb") {
                Some(format!("Rails ({rel}) refuses unknown hosts in development: add `config.hosts << \".localhost\"` to config/environments/development.rb"))
            } else if name.starts_with("vite.config.") {
                Some(format!("Vite ({rel}) refuses unknown hosts: set `server: {{ allowedHosts: [\".localhost\"] }}` in {rel}"))
            } else {
                None
            };
            if let Some(h) = hint {
                if !found.contains(&h) {
                    found.push(h);
                }
            }
        }
    }
    found.sort();
    found
}

/// The texts of the `env_file`s (other than `.env`) the compose text's services name,
/// relative to `dir`; unreadable ones are left out (binky.toml keeps naming them).
fn env_file_texts(dir: &Path, compose: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for f in init::env_file_paths(compose) {
        let rel = f.trim_start_matches("./");
        if rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(dir.join(rel)) {
            out.insert(f, text);
        }
    }
    out
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

fn print_summary(target: &Path, file: &str, g: &init::Generated) {
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
