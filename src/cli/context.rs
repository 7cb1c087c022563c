//! What every command needs: the binky home, the store, the checkout it runs in, and
//! finding a world by name.

use std::path::{Path, PathBuf};

use binky_controllers::spec::Service;
use binky_controllers::store::{self, Store, World};

pub use super::failure::{Failure, Kind};
use crate::paths::Home;

/// The home and its store.
pub struct Ctx {
    /// The binky home.
    pub home: Home,
    /// Its store.
    pub store: Store,
}

impl Ctx {
    /// Open the home's store (creating the home if needed).
    pub fn open() -> Result<Ctx, Failure> {
        let home = Home::from_env().map_err(Failure::usage)?;
        home.ensure()
            .map_err(|e| Failure::failed(format!("cannot use {}: {e}", home.root().display())))?;
        let store = Store::open(&home.db())?;
        Ok(Ctx { home, store })
    }

    /// The project of the checkout the current directory is in (its repository or one of
    /// its worktrees), if that project has worlds.
    pub fn project_here(&self) -> Result<Option<String>, Failure> {
        let all = self.store.read(store::worlds)?;
        let cwd = std::env::current_dir().unwrap_or_default();
        Ok(Checkout::discover(&cwd).ok().and_then(|c| {
            all.iter()
                .find(|w| w.repo_root == c.repo_root)
                .map(|w| w.project.clone())
        }))
    }

    /// Find a world by name: among the worlds of the repository the current directory is in
    /// (never another project's world of the same name), else — outside any repository —
    /// in any project (a name used by two projects must then be disambiguated by `cd`).
    /// Without a name, the world whose worktree contains the current directory. A process
    /// of a world reaches only its own project's and those a person allowed
    /// ([`crate::reach`]).
    pub fn world(&self, name: Option<&str>) -> Result<World, Failure> {
        let world = self.find(name)?;
        crate::reach::refuse_for_a_world(&self.store, &world.project)?;
        Ok(world)
    }

    fn find(&self, name: Option<&str>) -> Result<World, Failure> {
        let cwd = std::env::current_dir().unwrap_or_default();
        if let Some(name) = name {
            return world_named(&self.store, &cwd, name);
        }
        let all = self.store.read(store::worlds)?;
        let here = self.store.read(|c| {
            for w in &all {
                if store::worktree(c, w.id)?.is_some_and(|wt| cwd.starts_with(&wt.path)) {
                    return Ok(Some(w.clone()));
                }
            }
            Ok(None)
        })?;
        here.ok_or_else(|| {
            Failure::usage(format!(
                "name a world (you are not inside a world's worktree); worlds: {}",
                names(&all)
            ))
        })
    }
}

/// [`find_world`] reading only the worlds of that name (every world only to say which
/// exist when none of them is the one).
pub fn world_named(store: &Store, cwd: &Path, name: &str) -> Result<World, Failure> {
    let named = store.read(|c| store::worlds_named(c, name))?;
    match find_world(&named, cwd, name) {
        Ok(w) => Ok(w),
        Err(_) => find_world(&store.read(store::worlds)?, cwd, name),
    }
}

/// The world `name` as seen from `cwd`: among the worlds of the repository `cwd` is in,
/// never another project's world of the same name (a fresh repository beside a project
/// that has one would reach into it); outside any repository, in any project.
pub fn find_world(all: &[World], cwd: &Path, name: &str) -> Result<World, Failure> {
    {
        let here = Checkout::discover(cwd).ok().map(|c| c.repo_root);
        let mine: Vec<World> = all
            .iter()
            .filter(|w| here.as_ref().is_none_or(|r| &w.repo_root == r))
            .cloned()
            .collect();
        let matching: Vec<&World> = mine.iter().filter(|w| w.name == name).collect();
        match matching.as_slice() {
            [w] => Ok((*w).clone()),
            [] => {
                let elsewhere: Vec<&str> = all
                    .iter()
                    .filter(|w| w.name == name)
                    .map(|w| w.project.as_str())
                    .collect();
                let also = if elsewhere.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (project {} has a world `{name}`: run the command in that project's repository)",
                        elsewhere.join(", ")
                    )
                };
                let scope = match &here {
                    Some(r) => format!(" in the repository {}", r.display()),
                    None => String::new(),
                };
                Err(Failure::usage(format!(
                    "no world `{name}`{scope}; worlds: {}{also}",
                    names(&mine)
                ))
                .kind(Kind::NoWorld))
            }
            many => {
                let projects: Vec<String> = many.iter().map(|w| w.project.clone()).collect();
                Err(Failure::usage(format!(
                    "world `{name}` exists in several projects ({}); run the command inside the project's repository",
                    projects.join(", ")
                ))
                .kind(Kind::AmbiguousWorld {
                    world: name.to_owned(),
                    projects,
                }))
            }
        }
    }
}

pub use crate::requests::refuse_shared;

/// Refuse `what` (a person-only action) when binky started this process
/// ([`crate::person::refuse_unless_person`]), as a failure of kind [`Kind::PersonOnly`];
/// the message ends with who may do it (`instead`).
pub fn person(what: &str, instead: &str) -> Result<(), Failure> {
    crate::person::refuse_unless_person(what, instead)
        .map_err(|message| Failure::failed(message).kind(Kind::PersonOnly))
}

/// Refuse `what` unless a person asks at a terminal ([`person`], then
/// [`crate::person::require_terminal`]): of kind [`Kind::PersonOnly`] when binky started
/// this process, of no kind when only the terminal is missing (a person's script).
pub fn person_at_terminal(what: &str, instead: &str) -> Result<(), Failure> {
    person(what, instead)?;
    crate::person::require_terminal(what).map_err(Failure::failed)
}

fn names(all: &[World]) -> String {
    if all.is_empty() {
        return "none yet (`binky up NAME` makes one)".into();
    }
    let mut projects: Vec<&str> = all.iter().map(|w| w.project.as_str()).collect();
    projects.dedup();
    all.iter()
        .map(|w| {
            if projects.len() > 1 {
                format!("{}/{}", w.project, w.name)
            } else {
                w.name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The service `name` of `world`, or a usage failure that lists its services.
pub fn service<'w>(world: &'w World, name: &str) -> Result<&'w Service, Failure> {
    world.spec.services.get(name).ok_or_else(|| {
        Failure::usage(format!(
            "world `{}` has no service `{name}`; services: {}",
            world.name,
            world
                .spec
                .services
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .kind(Kind::NoService)
    })
}

pub use crate::git::{bytes as git_bytes, text as git};

/// The git checkout a command runs in, and its `binky.toml`.
#[derive(Clone, Debug)]
pub struct Checkout {
    /// The top of this worktree.
    pub toplevel: PathBuf,
    /// The repository's main checkout (the project's identity).
    pub repo_root: PathBuf,
    /// The nearest `binky.toml` at or above the current directory, within the worktree.
    pub config_path: Option<PathBuf>,
    /// Its directory relative to the worktree top (`""` at the top).
    pub config_rel: String,
    /// The commit checked out (none in a repository without commits).
    pub head: Option<String>,
}

impl Checkout {
    /// Look around `cwd`.
    pub fn discover(cwd: &Path) -> Result<Checkout, Failure> {
        // One git process for the three facts (HEAD fails in a repository without commits:
        // ask again without it).
        let args = [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
        ];
        let (out, head) = match git(cwd, &[&args[..], &["HEAD"]].concat()) {
            Ok(out) => (out, true),
            Err(_) => (
                git(cwd, &args).map_err(|e| {
                    Failure::usage(format!(
                        "{} is not inside a git repository ({e}); binky gives each git worktree its own world: run it inside a repository",
                        cwd.display()
                    ))
                    .kind(Kind::NotInRepository)
                })?,
                false,
            ),
        };
        let mut lines = out.lines();
        let toplevel = PathBuf::from(lines.next().unwrap_or_default());
        let common = PathBuf::from(lines.next().unwrap_or_default());
        let head = if head {
            lines.next().map(str::to_owned)
        } else {
            None
        };
        let repo_root = if common.file_name().is_some_and(|n| n == ".git") {
            common.parent().map(Path::to_path_buf).unwrap_or(common)
        } else {
            common
        };
        let mut config_path = None;
        let mut config_rel = String::new();
        let mut dir = Some(cwd);
        while let Some(d) = dir {
            let candidate = d.join(crate::config::FILE_NAME);
            if candidate.is_file() {
                config_rel = d
                    .strip_prefix(&toplevel)
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_default();
                config_path = Some(candidate);
                break;
            }
            if d == toplevel {
                break;
            }
            dir = d.parent();
        }
        Ok(Checkout {
            toplevel,
            repo_root,
            config_path,
            config_rel,
            head,
        })
    }

    /// The project this checkout's `binky.toml` names (when it reads).
    pub fn project_name_or_config(&self) -> Option<String> {
        let path = self.config_path.as_ref()?;
        let text = crate::config::read_text(path).ok()?;
        crate::config::parse(&text, path)
            .ok()
            .map(|l| l.spec.project.name)
    }
}

/// Wake the daemon (starting it if needed) about a world.
pub async fn nudge(ctx: &Ctx, world: i64) -> Result<(), Failure> {
    use crate::daemon::client;
    // The desired state is written already: a daemon that cannot be reached must not read as
    // "nothing happened". A second try covers a daemon killed right after it started.
    // A daemon busy with hundreds of worlds at once may take longer than a nudge's 3 s to
    // answer: while it runs, ask again (up to NUDGE_PATIENCE) rather than give up.
    const NUDGE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);
    let started = std::time::Instant::now();
    let mut last = None;
    let mut tries = 0;
    while tries < 2 || (started.elapsed() < NUDGE_PATIENCE && busy_daemon(&last)) {
        tries += 1;
        let info = match client::ensure(&ctx.home).await {
            Ok(info) => info,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        match client::nudge(&ctx.home, Some(world)).await {
            Ok(()) => {
                warn_if_other_version(&info);
                return Ok(());
            }
            Err(e) => last = Some(e),
        }
    }
    let name = ctx
        .store
        .read(|c| store::world(c, world))
        .ok()
        .flatten()
        .map(|w| format!("world `{}`", w.name))
        .unwrap_or_else(|| "the world".to_owned());
    let why = last.map(|e| e.to_string()).unwrap_or_default();
    Err(Failure::pending(format!(
        "the change to {name} is recorded, but the binky daemon that carries it out is not running ({why}); start it with `binky daemon start` (any binky command that needs it starts it too) and it finishes the change"
    )))
}

/// Whether the last try ran out of time against a daemon that runs (busy, not gone).
fn busy_daemon(last: &Option<crate::daemon::client::ClientError>) -> bool {
    matches!(last, Some(crate::daemon::client::ClientError::Timeout(..)))
}

fn warn_if_other_version(info: &crate::protocol::Response) {
    if let Some(v) = info
        .version
        .as_deref()
        .filter(|v| *v != env!("CARGO_PKG_VERSION"))
    {
        eprintln!(
            "binky: warning: the running daemon is binky {v}, this is binky {}; `binky daemon stop` (services keep running) and the next command starts the new one",
            env!("CARGO_PKG_VERSION")
        );
    }
}
