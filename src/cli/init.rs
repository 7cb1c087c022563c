//! `binky init [DIR] [--force]`: write a starting `binky.toml` in DIR from the compose file
//! (and `.env`) found there, or without one from what the project's files say runs (a
//! `Procfile`, `package.json`, `manage.py`, `alembic.ini`). The mapping itself is
//! [`crate::init`], which reads only the [`init::Repo`] this fills; this reads, checks and
//! writes.
//!
//! # Guarantees
//! - Nothing is written on error: not when a `binky.toml` exists (without `--force`), not
//!   when there is neither a compose file nor anything else that says what runs, not when
//!   a file cannot be read, not when the result would not parse.
//! - The file appears whole: written beside and renamed into place.

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
/// No compose file at all is `Ok` with no files: init then reads what else says what runs.
fn compose_files(dir: &Path, given: &[PathBuf]) -> Result<Chosen, Failure> {
    if !given.is_empty() {
        return given_files(dir, given);
    }
    Ok(compose_file_var(dir)
        .or_else(|| default_files(dir))
        .or_else(|| dev_variant(dir))
        .unwrap_or_default())
}

/// Compose files and a note on how they were chosen.
type Chosen = (Vec<PathBuf>, Option<String>);

/// The files named with `-f`, each of which must exist.
fn given_files(dir: &Path, given: &[PathBuf]) -> Result<Chosen, Failure> {
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
    Ok((files, None))
}

/// COMPOSE_FILE, from the environment or the project's .env, as compose reads it.
fn compose_file_var(dir: &Path) -> Option<Chosen> {
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
            return Some((
                files,
                Some(format!("COMPOSE_FILE in {whence}: {}", names.join(", "))),
            ));
        }
    }
    None
}

/// The file `docker compose` prefers, with its override when there is one.
fn default_files(dir: &Path) -> Option<Chosen> {
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
        return Some((files, note));
    }
    None
}

/// No default file: a development variant (docker-compose.local.yml), as projects that
/// keep one per environment have.
fn dev_variant(dir: &Path) -> Option<Chosen> {
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
                    return Some((vec![p], Some(note)));
                }
            }
        }
    }
    None
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
    let repo = read_repo(&dir, &paths)?;
    let compose_path = paths.first().cloned().unwrap_or_else(|| dir.clone());
    let generated = init::generate(&repo).map_err(|e| match e {
        init::InitError::NothingToRead { compose, .. } => Failure::usage(
            init::InitError::NothingToRead {
                dir: dir.display().to_string(),
                compose,
            }
            .to_string(),
        ),
        e => Failure::usage(e.to_string()),
    })?;

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
    print_summary(&target, &generated.source, &generated);
    Ok(exit::OK)
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

/// What init reads: the compose files (merged), `.env`, the env_files services name, the
/// files [`init::wanted_file`] accepts (no deeper than [`init::MAX_DEPTH`], not in
/// [`init::SKIP_DIRS`]) and those they name, and which [`init::TOOLS`] are on `PATH`.
fn read_repo(dir: &Path, paths: &[PathBuf]) -> Result<init::Repo, Failure> {
    let mut texts = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| {
            Failure::failed(format!(
                "cannot read {}: {e}; make it readable, then run `binky init` again",
                p.display()
            ))
        })?;
        texts.push((p.display().to_string(), text));
    }
    let compose = match texts.len() {
        0 => None,
        1 => Some(texts[0].1.clone()),
        _ => Some(init::merge_compose(&texts).map_err(|e| Failure::usage(e.to_string()))?),
    };
    let compose = compose.map(|text| init::ComposeSource {
        name: texts
            .iter()
            .map(|(n, _)| {
                Path::new(n)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(" + "),
        text,
    });
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
    let dir_name = std::fs::canonicalize(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let dir_name = init::repository_name(
        git_out(dir, &["remote", "get-url", "origin"]).as_deref(),
        git_out(dir, &["rev-parse", "--show-toplevel"]).as_deref(),
        &dir_name,
    );
    let env_files = compose
        .as_ref()
        .map(|c| env_file_texts(dir, &c.text))
        .unwrap_or_default();
    let (files, venv_dirs) = project_files(dir);
    let mut repo = init::Repo {
        dir_name,
        compose,
        dotenv_tracked: dotenv.is_some()
            && git_ok(dir, &["ls-files", "--error-unmatch", "--", ".env"]),
        dotenv,
        env_files,
        venvs: venv_dirs
            .into_iter()
            .filter(|(rel, _)| git_ok(dir, &["check-ignore", "-q", "--", rel]))
            .collect(),
        files,
        installed: init::TOOLS
            .iter()
            .filter(|t| on_path(t))
            .map(|t| t.to_string())
            .collect(),
    };
    // The Dockerfiles compose names, then the scripts those name.
    for _ in 0..2 {
        for rel in init::referenced_files(&repo) {
            if let std::collections::btree_map::Entry::Vacant(e) = repo.files.entry(rel) {
                if let Some(text) = read_small(&dir.join(e.key())) {
                    e.insert(text);
                }
            }
        }
    }
    Ok(repo)
}

/// What `git ARGS` prints in `dir`, trimmed; `None` when it fails (no git, not a
/// repository, no such remote) or prints nothing.
fn git_out(dir: &Path, args: &[&str]) -> Option<String> {
    crate::git::text(dir, args)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Does `git ARGS` succeed in `dir`? No git, or not a repository, is no.
fn git_ok(dir: &Path, args: &[&str]) -> bool {
    crate::git::text(dir, args).is_ok()
}

/// The programs in a virtualenv's `bin/`, when `path` is one (`pyvenv.cfg` and
/// `bin/python`).
fn venv_programs(path: &Path) -> Option<std::collections::BTreeSet<String>> {
    if !path.join("pyvenv.cfg").is_file() || !path.join("bin/python").exists() {
        return None;
    }
    let entries = std::fs::read_dir(path.join("bin")).ok()?;
    Some(
        entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    )
}

/// Relative paths of virtualenvs → the programs of their `bin/`.
type Venvs = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// The files of `dir` init reads, by relative path, and the virtualenvs found on the way
/// (`.venv` or `venv` directories, which are not read into).
fn project_files(dir: &Path) -> (std::collections::BTreeMap<String, String>, Venvs) {
    let mut out = std::collections::BTreeMap::new();
    let mut venvs = Venvs::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            let Ok(kind) = e.file_type() else { continue };
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            if kind.is_dir() {
                if matches!(name.as_str(), ".venv" | "venv") {
                    if let Some(programs) = venv_programs(&path) {
                        venvs.insert(rel, programs);
                    }
                } else if depth < init::MAX_DEPTH && !init::SKIP_DIRS.contains(&name.as_str()) {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            if init::wanted_file(&rel) {
                if let Some(text) = read_small(&path) {
                    out.insert(rel, text);
                }
            }
        }
    }
    (out, venvs)
}

/// A file's text: at most 256 KiB of it is read (a larger file, such as a lock file, is
/// there but empty); `None` when it cannot be read as text.
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.len() > 256 * 1024 {
        return Some(String::new());
    }
    std::fs::read_to_string(path).ok()
}

/// Is `program` an executable on `PATH`?
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| binky_platform::fs::executable_in(&d, program))
    })
}

/// Write `text` to `path` whole (beside it first, then renamed) and durably. Without
/// `force`, a file that appeared meanwhile is not replaced.
fn write_whole(path: &Path, text: &str, force: bool) -> std::io::Result<()> {
    let how = binky_controllers::whole_file::Whole::new().durable();
    let how = if force { how } else { how.no_clobber() };
    how.write(path, text.as_bytes())
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
