//! `binky up NAME`: write the world's desired state (running) and wait until it is ready.

use std::path::{Path, PathBuf};
use std::time::Instant;

use binky_controllers::admission::{self, Verdict};
use binky_controllers::store::{self, NewWorld};

use super::context::{git, git_bytes, nudge, Checkout, Ctx, Failure};
use super::wait::{self, Goal, Outcome};
use super::{exit, WaitArgs};
use crate::config;

/// Which `binky.toml` a world will run, and its text.
struct Source {
    text: String,
    path: PathBuf,
    /// Read from git: the path inside the worktree binky will create.
    in_new_worktree: Option<String>,
    note: Option<String>,
}

/// What the store holds of world `name` of this repository, when it exists.
struct Known {
    /// Its worktree, once made (a worktree being made is not one yet).
    worktree: Option<PathBuf>,
    /// The `binky.toml` it runs.
    config_path: PathBuf,
    /// That file's directory relative to the worktree root.
    config_rel: String,
}

fn known(ctx: &Ctx, co: &Checkout, name: &str) -> Result<Option<Known>, Failure> {
    Ok(ctx.store.read(|c| {
        let all = store::worlds(c)?;
        let Some(w) = all
            .into_iter()
            .find(|w| w.name == name && w.repo_root == co.repo_root)
        else {
            return Ok(None);
        };
        // A worktree being made (its row is written before git runs) is not one yet.
        let worktree = store::worktree(c, w.id)?
            .filter(|r| r.state != store::WorktreeState::Creating)
            .map(|r| r.path);
        Ok(Some(Known {
            worktree,
            config_path: w.config_path,
            config_rel: w.config_rel,
        }))
    })?)
}

/// The config the world's worktree has (or will have when binky creates it).
fn source(
    co: &Checkout,
    known: Option<&Known>,
    name: &str,
    from: Option<&str>,
) -> Result<Source, Failure> {
    let rel = &co.config_rel;
    let file_rel = if rel.is_empty() {
        config::FILE_NAME.to_owned()
    } else {
        format!("{rel}/{}", config::FILE_NAME)
    };
    // 1. The world's worktree exists: its own file, uncommitted edits included.
    let (existing, recorded) = existing_worktree(co, known, name);
    // A worktree git lists while binky is still making it (the world is known, its worktree
    // not yet finished): its files are being written, so a read may find half a binky.toml.
    // What it will hold is what it is being made from, read below.
    let making = known.is_some() && !recorded;
    if let Some(root) = existing.filter(|_| !making) {
        if let Some(found) = in_worktree(co, known, name, &root, recorded, &file_rel)? {
            return Ok(found);
        }
    }
    // 2. The branch exists or will be made from REF: the file as committed there.
    let branch_exists = git(
        &co.repo_root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{name}"),
        ],
    )
    .is_ok();
    let rev = if branch_exists {
        format!("refs/heads/{name}")
    } else {
        from.unwrap_or("HEAD").to_owned()
    };
    match git_bytes(&co.toplevel, &["show", &format!("{rev}:{file_rel}")]) {
        Ok(bytes) => committed_at(co, name, &rev, branch_exists, file_rel, bytes),
        Err(_) => not_committed_at(co, name, &rev, &file_rel),
    }
}

/// Finds the world's worktree: the one the store records, else the one git lists on branch
/// `name`; and whether the store recorded it.
fn existing_worktree(co: &Checkout, known: Option<&Known>, name: &str) -> (Option<PathBuf>, bool) {
    let mut existing = known
        .and_then(|k| k.worktree.clone())
        .filter(|p| p.is_dir());
    let recorded = existing.is_some();
    if existing.is_none() {
        if let Ok(list) = git(&co.repo_root, &["worktree", "list", "--porcelain"]) {
            existing = crate::git::parse_worktree_list(&list)
                .into_iter()
                .find(|w| w.branch.as_deref() == Some(name) && w.path.is_dir())
                .map(|w| w.path);
        }
    }
    (existing, recorded)
}

/// Reads the config of the world's existing worktree at `root`; `None` when the worktree is
/// one still being made and the branch's committed file says what it will hold.
fn in_worktree(
    co: &Checkout,
    known: Option<&Known>,
    name: &str,
    root: &Path,
    recorded: bool,
    file_rel: &str,
) -> Result<Option<Source>, Failure> {
    let rel = &co.config_rel;
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let path = dir.join(config::FILE_NAME);
    match config::read_text(&path) {
        Ok(text) => Ok(Some(Source {
            text,
            path,
            in_new_worktree: None,
            note: None,
        })),
        // Listed by git but not binky's finished worktree: one a daemon is making (or
        // was making when it died). The branch's committed file says what it will hold.
        Err(config::ReadError::Io(e)) if !recorded && e.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        // Made while binky.toml was not committed (the first `up` said so): the world
        // runs the file it was given outside its worktree, and goes on running it.
        Err(config::ReadError::Io(e))
            if e.kind() == std::io::ErrorKind::NotFound
                && known.is_some_and(|k| {
                    !k.config_path.starts_with(root) && k.config_path.is_file()
                }) =>
        {
            let runs = known.map(|k| k.config_path.clone()).unwrap_or_default();
            let text = config::read_text(&runs)
                .map_err(|e| Failure::usage(format!("{}: {e}", runs.display())))?;
            Ok(Some(Source {
                text,
                note: Some(format!(
                    "the worktree of `{name}` has no {file_rel} (it was not committed when the worktree was made), so `{name}` runs {} as before (commit {file_rel} and merge it into branch `{name}` so the worktree carries its own)",
                    runs.display()
                )),
                path: runs,
                in_new_worktree: None,
            }))
        }
        Err(config::ReadError::Io(e)) => Err(Failure::usage(format!(
            "{}: cannot read it ({e}); the world's worktree at {} has no binky.toml in {}",
            path.display(),
            root.display(),
            if rel.is_empty() { "its root" } else { rel }
        ))),
        Err(e) => Err(Failure::usage(format!("{}: {e}", path.display()))),
    }
}

/// The config as committed at `rev` (the world's branch, or the REF a new one is made
/// from), named by this checkout's file when that holds the same text.
fn committed_at(
    co: &Checkout,
    name: &str,
    rev: &str,
    branch_exists: bool,
    file_rel: String,
    bytes: Vec<u8>,
) -> Result<Source, Failure> {
    let text = config::text_of(bytes)
        .map_err(|e| Failure::usage(format!("{file_rel} (as committed at {rev}): {e}")))?;
    // Messages point at the file a person can open: this checkout's, when it holds
    // the same text; else name the commit.
    let local = co
        .config_path
        .as_ref()
        .and_then(|p| config::read_text(p).ok());
    let short: String = rev
        .trim_start_matches("refs/heads/")
        .chars()
        .take(12)
        .collect();
    let same = local.as_deref().map(|l| l.trim_end() == text.trim_end());
    let path = match (same, &co.config_path) {
        (Some(true), Some(p)) => p.clone(),
        _ => PathBuf::from(format!("{file_rel} (at {short})")),
    };
    // "Not committed" means this checkout's file differs from its own HEAD's (with
    // `--from`, the commit checked out may simply have another version).
    let uncommitted = same == Some(false)
        && match (&local, rev == "HEAD") {
            (_, true) => true,
            (Some(l), false) => git_bytes(&co.toplevel, &["show", &format!("HEAD:{file_rel}")])
                .ok()
                .and_then(|b| config::text_of(b).ok())
                .is_none_or(|head| head.trim_end() != l.trim_end()),
            (None, false) => false,
        };
    let note = (uncommitted && !branch_exists).then(|| {
        format!(
            "your {file_rel} has changes that are not committed; the new worktree of `{name}` checks out {short} and runs the committed version (commit the changes to use them)"
        )
    });
    Ok(Source {
        text,
        path,
        in_new_worktree: Some(file_rel),
        note,
    })
}

/// Not committed at `rev`: the world runs this checkout's file, and the note says so.
fn not_committed_at(
    co: &Checkout,
    name: &str,
    rev: &str,
    file_rel: &str,
) -> Result<Source, Failure> {
    let rev: String = rev
        .trim_start_matches("refs/heads/")
        .chars()
        .take(12)
        .collect();
    // Not committed there: run the file of this checkout, and say so.
    let path = co.config_path.clone().ok_or_else(|| {
        Failure::usage(format!(
            "no binky.toml in {} or above",
            co.toplevel.display()
        ))
    })?;
    let text =
        config::read_text(&path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    Ok(Source {
        in_new_worktree: None,
        note: Some(format!(
            "{file_rel} is not committed at {rev}, so the new worktree will not have it; world `{name}` runs {} instead (commit it so every worktree carries its own)",
            path.display()
        )),
        text,
        path,
    })
}

/// `binky up`.
pub async fn run(
    name: &str,
    group: Option<String>,
    from: Option<String>,
    args: &WaitArgs,
) -> Result<i32, Failure> {
    let started = Instant::now();
    if let Verdict::Deny { reason } = admission::check_world_name(name) {
        return Err(Failure::usage(reason));
    }
    let ctx = Ctx::open()?;
    let (co, src, from_commit) = config_of(&ctx, name, from.as_deref())?;
    // The same checks as `binky apply` and the config watcher; an adapter binky cannot find
    // is refused now, not discovered by the daemon later.
    let loaded = crate::apply::validate(&src.text, &src.path, group.as_deref())
        .map_err(|e| Failure::usage(e.to_string()))?;
    // A process of a world makes or starts worlds of its own project (and those a person
    // allowed): `crate::reach`.
    crate::reach::refuse_for_a_world(&ctx.store, &loaded.spec.project.name)?;
    // What of the caller's environment the world keeps: crate::caller_env says why.
    let (env, not_utf8) = crate::caller_env::world_env(std::env::vars_os());
    for k in not_utf8 {
        eprintln!("binky: warning: the environment variable {k} is not UTF-8; the world's services do not get it");
    }
    refuse_unset_env(&loaded, group.as_deref(), &env, &src, name)?;
    let config_file = match &src.in_new_worktree {
        Some(rel) => co.toplevel.join(rel),
        None => src.path.clone(),
    };
    say_before(&ctx, &co, &src, &loaded, group.as_deref(), &config_file);
    let project = loaded.spec.project.name.clone();
    let worktree_path = crate::paths::worktree_path(&co.repo_root, &project, name);
    let config_path = match &src.in_new_worktree {
        Some(rel) => worktree_path.join(rel),
        None => src.path.clone(),
    };
    let new = NewWorld {
        project: project.clone(),
        repo_root: co.repo_root.clone(),
        name: name.to_owned(),
        branch: name.to_owned(),
        from_ref: from_commit,
        worktree_path,
        config_rel: co.config_rel.clone(),
        config_path,
        spec: loaded.spec,
        env,
        group,
        wait: Some(args.timeout),
        // A world a process binky started makes (an agent's MCP `up`, `binky up` under
        // `binky exec`) is recorded as the agent's when it is made: `remove` from there may
        // take it, and only it.
        made_by: crate::person::started_by_binky(),
    };
    let since = ctx.store.read(store::last_event_id)?;
    let world = write(&ctx, &new, &src.path, args).await?;
    if args.no_wait {
        println!("{name}: up requested (generation {})", world.generation);
        return Ok(exit::OK);
    }
    if !args.quiet {
        eprintln!("binky: bringing up {name} ({project})");
    }
    let outcome = wait::wait(&ctx, &world, world.generation, Goal::Ready, args, since).await?;
    if let Err(mut f) = wait::report(name, "come up", &outcome, args.timeout) {
        if !args.quiet {
            f.message.push_str(&format!("\n  (`binky logs {name}` shows the services' output, `binky events {name}` what binky did)"));
        }
        return Err(f);
    }
    let Outcome::Done(Some(world)) = outcome else {
        return Ok(exit::FAILED);
    };
    print_ready(&ctx, &world, started)?;
    Ok(exit::OK)
}

/// The checkout `binky up` runs in, the `binky.toml` world `name` will run (made from
/// `from`, else this checkout's HEAD), and that commit.
fn config_of(
    ctx: &Ctx,
    name: &str,
    from: Option<&str>,
) -> Result<(Checkout, Source, Option<String>), Failure> {
    let cwd = std::env::current_dir().map_err(|e| Failure::failed(e.to_string()))?;
    let mut co = Checkout::discover(&cwd)?;
    let known = known(ctx, &co, name)?;
    match (&co.config_path, &known) {
        (Some(_), _) => {}
        // Inside a world's worktree that has no binky.toml: the world's own file decides.
        (None, Some(k)) => co.config_rel = k.config_rel.clone(),
        (None, None) => {
            return Err(Failure::usage(format!(
                "no binky.toml in {} or any directory above it up to {}; write one (see README: Quickstart)",
                cwd.display(),
                co.toplevel.display()
            )))
        }
    }
    let from_commit = match from {
        Some(r) => Some(
            git(
                &co.toplevel,
                &["rev-parse", "--verify", &format!("{r}^{{commit}}")],
            )
            .map_err(|e| {
                Failure::usage(format!("--from {r}: not a commit in this repository ({e})"))
            })?,
        ),
        None => co.head.clone(),
    };
    let src = source(&co, known.as_ref(), name, from_commit.as_deref())?;
    Ok((co, src, from_commit))
}

/// An `${env.NAME}` the caller's environment `env` leaves without a value would reach a
/// process (or an adapter) as its own text: refused, naming it.
fn refuse_unset_env(
    loaded: &crate::config::Loaded,
    group: Option<&str>,
    env: &std::collections::BTreeMap<String, String>,
    src: &Source,
    name: &str,
) -> Result<(), Failure> {
    let selected = loaded.spec.selected(group);
    let Some(u) = crate::check::unset_env_refs(&loaded.spec, &selected, env)
        .into_iter()
        .next()
    else {
        return Ok(());
    };
    Err(Failure::usage(format!(
        "{}: services.{}.{} uses ${{env.{}}}, which is not set{}: set it in the environment of `binky up` (e.g. `{}=… binky up {name}`), or give a default in binky.toml: ${{env.{}:-value}}",
        src.path.display(),
        u.service,
        u.field,
        u.var.name,
        u.var.message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default(),
        u.var.name,
        u.var.name
    )))
}

/// What is said before anything runs: the source's note and the file's warnings, limits
/// this machine cannot enforce, a golden template whose key would miss a new migration, a
/// `copy` path binky will not take (with its fix). `config_file` is the file as this
/// checkout has it (a world still to be made is looked at here, which it is made from).
fn say_before(
    ctx: &Ctx,
    co: &Checkout,
    src: &Source,
    loaded: &crate::config::Loaded,
    group: Option<&str>,
    config_file: &std::path::Path,
) {
    if let Some(note) = &src.note {
        eprintln!("binky: note: {note}");
    }
    for w in &loaded.warnings {
        eprintln!("binky: warning: {}: {}", w.key, w.message);
    }
    // The daemon says it again in the world's events, from where it runs.
    let limited: Vec<String> = loaded
        .spec
        .selected(group)
        .into_iter()
        .filter(|n| {
            loaded.spec.services[n]
                .process()
                .is_some_and(|p| p.limits.is_some())
        })
        .collect();
    if !limited.is_empty() {
        let (mechanism, why) = crate::supervisor::resources::look(&ctx.home.tag());
        if !mechanism.enforces() {
            eprintln!(
                "binky: warning: the limits of {} are not enforced on this machine: {why}\n  fix: {}",
                limited.join(", "),
                crate::supervisor::resources::fix()
            );
        } else if !mechanism.caps() {
            eprintln!(
                "binky: warning: the limits of {} are not capped on this machine: {}\n  fix: {}",
                limited.join(", "),
                crate::supervisor::resources::polled_summary(&why),
                crate::supervisor::resources::fix()
            );
        }
    }
    if let Some(dir) = config_file.parent() {
        for f in crate::check::golden_findings(&src.text, loaded, dir) {
            eprintln!(
                "binky: warning: {}: {}\n    fix: {}",
                f.key, f.message, f.fix
            );
        }
    }
    let prefix = config_file
        .parent()
        .and_then(|d| d.strip_prefix(&co.toplevel).ok())
        .unwrap_or(std::path::Path::new(""));
    for r in crate::bootstrap::refused(&co.repo_root, prefix, &loaded.spec.project.copy) {
        eprintln!(
            "binky: warning: project.copy: {} not copied: {}\n    fix: {}",
            r.path, r.why, r.fix
        );
    }
}

/// Write the world (`path`: the file it was read from, valid) and nudge the daemon: the
/// world as written.
async fn write(
    ctx: &Ctx,
    new: &NewWorld,
    path: &std::path::Path,
    args: &WaitArgs,
) -> Result<store::World, Failure> {
    let put = match ctx.store.put_world(new) {
        // The project's last world went a moment ago and its shared services with it:
        // they are made again for this one once they are gone.
        Err(store::StoreError::SharedBeingRemoved(_)) => {
            wait_for_shared_removal(ctx, &new.project, args).await?;
            ctx.store.put_world(new)?
        }
        // An earlier world of the name was removed a moment ago and its slices are still
        // being dropped: the new world is made once they are gone, never on their data.
        Err(store::StoreError::BeingRemoved(_)) => {
            wait_for_world_removal(ctx, &new.project, &new.name, args).await?;
            ctx.store.put_world(new)?
        }
        other => other?,
    };
    binky_controllers::runtime::set_condition(
        &ctx.store,
        &put.world,
        binky_controllers::runtime::Reporter::Config,
        binky_controllers::runtime::Condition::ok(
            crate::apply::CONDITION,
            "Valid",
            format!("{} is valid", path.display()),
        ),
    )?;
    nudge(ctx, put.world.id).await?;
    Ok(put.world)
}

/// `NAME is up in …`, its worktree and each service's URL (credentials left out: `binky
/// env` hands them out).
fn print_ready(ctx: &Ctx, world: &store::World, started: Instant) -> Result<(), Failure> {
    let snap = binky_controllers::env::Snapshot::read(&ctx.store, world)?;
    let tokens = &snap.tokens;
    let wt = ctx.store.read(|c| store::worktree(c, world.id))?;
    println!(
        "{} is up in {:.2}s",
        world.name,
        started.elapsed().as_secs_f64()
    );
    if let Some(wt) = wt {
        println!("  worktree  {}", wt.path.display());
    }
    for svc in world.spec.selected(world.group.as_deref()) {
        match tokens.shown_url(&svc) {
            Some(url) => println!("  {svc:<9} {}", crate::adapters::without_credentials(url)),
            None => println!("  {svc:<9} running"),
        }
    }
    Ok(())
}

/// Wait (nudging the daemon, which finishes it) until world `name` of `project`, being
/// removed, is gone: what `binky remove` leaves to the daemon (dropping its slices) is done.
async fn wait_for_world_removal(
    ctx: &Ctx,
    project: &str,
    name: &str,
    args: &WaitArgs,
) -> Result<(), Failure> {
    let find = || ctx.store.read(|c| store::world_by_name(c, project, name));
    let Some(old) = find()? else {
        return Ok(());
    };
    if !args.quiet {
        let slices: Vec<String> = ctx
            .store
            .read(|c| store::slices(c, old.id))?
            .into_iter()
            .map(|s| s.name)
            .collect();
        eprintln!(
            "binky: waiting for the removed world {name} to be gone first (dropping {})",
            if slices.is_empty() {
                "what is left of it".to_owned()
            } else {
                slices.join(", ")
            }
        );
    }
    nudge(ctx, old.id).await?;
    let started = Instant::now();
    while find()?.is_some() {
        if started.elapsed() >= args.timeout {
            return Err(store::StoreError::BeingRemoved(name.to_owned()).into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Wait (nudging the daemon, which finishes it) until the shared world of `project`, being
/// removed, is gone.
async fn wait_for_shared_removal(ctx: &Ctx, project: &str, args: &WaitArgs) -> Result<(), Failure> {
    let find = || {
        ctx.store
            .read(|c| store::world_by_name(c, project, binky_controllers::shared::WORLD))
    };
    let Some(shared) = find()? else {
        return Ok(());
    };
    if !args.quiet {
        eprintln!("binky: waiting for the shared services of {project} to be removed first (the last world that used them was removed)");
    }
    nudge(ctx, shared.id).await?;
    let started = Instant::now();
    while find()?.is_some() {
        if started.elapsed() >= args.timeout {
            return Err(store::StoreError::SharedBeingRemoved(project.to_owned()).into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}
