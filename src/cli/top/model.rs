//! What `binky top` shows: every world and its services exactly as `binky status` reads them
//! ([`crate::view::world`]), laid out as the lines of one table.

use std::path::PathBuf;

use binky_controllers::store::{self, CondStatus, World};

use super::super::context::{Ctx, Failure};
use super::super::status;
use super::text;
use crate::view::{UsageView, WorldView};

/// What a line of the table stands for: a world, or one service (replica) of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    /// The world's project.
    pub project: String,
    /// The world.
    pub world: String,
    /// The service (or replica: `api.1`), on a service's line.
    pub service: Option<String>,
}

/// A world's line.
pub(super) struct WorldLine {
    pub target: Target,
    /// `ready`, `failed`, `queued`, `cooled`, … as `binky status` says.
    pub state: String,
    /// What its own processes use together.
    pub usage: Option<UsageView>,
    /// Restarts of its services, added up.
    pub restarts: u32,
    /// Why it is held or failing (a condition), or its age and worktree.
    pub info: String,
    /// `info` is a condition that needs looking at.
    pub attention: bool,
    /// The directory its commands (`binky up`, `down`, `reload`) run in: the one holding its
    /// `binky.toml`, so the command finds the world and its config as from a shell there.
    pub dir: PathBuf,
    /// Its `--group`, which `binky up` from here keeps.
    pub group: Option<String>,
}

/// A service's line (one a replica).
pub(super) struct ServiceLine {
    pub target: Target,
    /// Its state; `unhealthy` while its health check fails.
    pub state: String,
    /// One instance for all the project's worlds.
    pub shared: bool,
    pub usage: Option<UsageView>,
    /// `:8080`, `http:8080 grpc:8081`.
    pub ports: String,
    pub pid: Option<u32>,
    pub restarts: u32,
    /// Its URL while it runs; how it ended and why otherwise.
    pub info: String,
    /// Its captured output (a process service's; an adapter's slice has none).
    pub log: Option<PathBuf>,
}

/// One line of the table.
pub(super) enum Line {
    /// A project heading: its name and repository (not selectable).
    Project {
        name: String,
        repo: PathBuf,
    },
    World(WorldLine),
    Service(ServiceLine),
}

impl Line {
    /// What the line stands for (a project heading: nothing).
    pub fn target(&self) -> Option<&Target> {
        match self {
            Line::Project { .. } => None,
            Line::World(w) => Some(&w.target),
            Line::Service(s) => Some(&s.target),
        }
    }
}

/// Every world at one moment.
#[derive(Default)]
pub(super) struct Board {
    pub lines: Vec<Line>,
    /// How many worlds are in each state (`ready` → 3), in the order first seen.
    pub counts: Vec<(String, usize)>,
    /// Worlds in all.
    pub worlds: usize,
}

impl Board {
    /// Read every world from the store.
    pub fn read(ctx: &Ctx, now_ms: i64) -> Result<Board, Failure> {
        let worlds = ctx.store.read(store::worlds)?;
        let logs_dir = ctx.home.logs();
        let mut board = Board {
            worlds: worlds.len(),
            ..Board::default()
        };
        let mut project = None::<String>;
        let views = crate::view::worlds(&ctx.store, &worlds)?;
        for (w, v) in worlds.iter().zip(views) {
            if project.as_deref() != Some(&w.project) {
                project = Some(w.project.clone());
                board.lines.push(Line::Project {
                    name: w.project.clone(),
                    repo: w.repo_root.clone(),
                });
            }
            match board.counts.iter_mut().find(|(s, _)| *s == v.state) {
                Some((_, n)) => *n += 1,
                None => board.counts.push((v.state.clone(), 1)),
            }
            // A shared service's process and log are its project's shared world's.
            let shared_world = if w.is_shared() || v.services.iter().all(|s| !s.shared) {
                None
            } else {
                ctx.store.read(|c| store::shared_world(c, w.project_id))?
            };
            board.lines.push(Line::World(world_line(w, &v, now_ms)));
            for s in &v.services {
                let owner = match &shared_world {
                    Some(sw) if s.shared => sw,
                    _ => w,
                };
                let is_process = w
                    .spec
                    .services
                    .get(binky_controllers::replica::service_of(&s.name))
                    .is_some_and(|svc| svc.process().is_some());
                let info = if let Some(url) = s.url.as_ref().filter(|_| s.state == "running") {
                    url.clone()
                } else {
                    let mut parts = Vec::new();
                    if let Some(e) = &s.last_exit {
                        parts.push(format!("last {e}"));
                    }
                    if let Some(m) = s.message.lines().next().filter(|m| !m.is_empty()) {
                        parts.push(m.to_owned());
                    }
                    if parts.is_empty() {
                        s.url.clone().unwrap_or_default()
                    } else {
                        parts.join(" — ")
                    }
                };
                let info = if s.oom_kills > 0 {
                    format!("out of memory {}× · {info}", s.oom_kills)
                } else {
                    info
                };
                board.lines.push(Line::Service(ServiceLine {
                    target: Target {
                        project: w.project.clone(),
                        world: w.name.clone(),
                        service: Some(s.name.clone()),
                    },
                    state: s.state.clone(),
                    shared: s.shared,
                    usage: s.usage,
                    ports: status::ports_text(s),
                    pid: s.pid,
                    restarts: s.restarts,
                    info: text::clean(&info),
                    log: is_process.then(|| {
                        binky_controllers::supervisor::log_path(&logs_dir, owner, &s.name)
                    }),
                }));
            }
        }
        Ok(board)
    }

    /// The index of the line standing for `target`.
    pub fn index_of(&self, target: &Target) -> Option<usize> {
        self.lines.iter().position(|l| l.target() == Some(target))
    }
}

fn world_line(w: &World, v: &WorldView, now_ms: i64) -> WorldLine {
    // What needs looking at: a condition a person has to act on, or why the world waits
    // (queued, cooled, awaiting approval, starting), as `binky status` shows it.
    let waiting = !matches!(v.state.as_str(), "ready" | "stopped" | "idle");
    let why = v
        .conditions
        .iter()
        .filter(|c| c.status != CondStatus::True && (c.stalled || waiting))
        .max_by_key(|c| c.stalled);
    // A service in trouble while the world's conditions hold (a health check that has just
    // started failing, a crash being restarted): said on the world's line too.
    let troubled = v
        .services
        .iter()
        .find(|s| matches!(s.state.as_str(), "unhealthy" | "backoff" | "failed"));
    let (info, attention) = match (why, troubled) {
        (None, Some(s)) => (
            format!(
                "{} {}: {}",
                s.name,
                s.state,
                s.message.lines().next().unwrap_or("")
            ),
            true,
        ),
        (why, _) => match why {
            Some(c) => (
                format!(
                    "{} ({}): {}",
                    c.type_,
                    c.reason,
                    c.message.lines().next().unwrap_or("")
                ),
                true,
            ),
            None => {
                let path = v
                    .worktree
                    .as_ref()
                    .map(|t| t.path.display().to_string())
                    .unwrap_or_default();
                let branch = if !w.branch.is_empty() && w.branch != w.name {
                    format!("branch {} · ", w.branch)
                } else {
                    String::new()
                };
                (
                    format!(
                        "{branch}age {} · {path}",
                        text::age(now_ms.saturating_sub(w.created_at))
                    ),
                    false,
                )
            }
        },
    };
    let dir = w
        .config_path
        .parent()
        .filter(|d| d.is_dir())
        .map(PathBuf::from)
        .unwrap_or_else(|| w.repo_root.join(&w.config_rel));
    WorldLine {
        target: Target {
            project: w.project.clone(),
            world: w.name.clone(),
            service: None,
        },
        state: v.state.clone(),
        usage: v.usage,
        restarts: v.services.iter().map(|s| s.restarts).sum(),
        info: text::clean(&info),
        attention,
        dir,
        group: w.group.clone(),
    }
}
