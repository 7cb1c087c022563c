//! Why the server a ready slice lives on cannot be used now (a managed server that died or
//! was stopped, a server binky.toml names that does not answer): said once here for the
//! world's condition, the slice's row and `binky status`.

use super::{SliceController, SliceError};
use crate::adapter::SliceEffects;
use crate::spec::Resource;
use crate::store::{self, ServerState, SliceRow, SliceState, World};
use crate::supervisor::Supervisor;

/// Why the server a ready slice lives on cannot be used now: what `binky status` shows on
/// the slice's line and the slice controller says in the world's condition, written once
/// here for both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTrouble {
    /// A person stopped it (`binky servers stop`): nothing starts it again but the next
    /// `binky up` of a world on it, so the world needs a person.
    pub stopped: bool,
    /// Which server, what is wrong and the fix, without the service's name.
    pub message: String,
}

impl ServerTrouble {
    /// The state a slice with this trouble is shown in.
    pub fn shown_state(&self) -> &'static str {
        if self.stopped {
            "stopped"
        } else {
            "down"
        }
    }
}

/// The trouble of the managed server the slice `slice` of world `world` lives on (the row
/// of `servers` with the slice's admin address), if it has one: its recorded state, and
/// `dead` for a server recorded running (the daemon's watch records a death within a
/// second; a reader that cannot wait for it looks at the process).
pub fn managed_trouble(
    servers: &[store::ServerRow],
    slice: &SliceRow,
    world: &str,
    dead: impl Fn(&store::ServerRow) -> bool,
) -> Option<ServerTrouble> {
    let url = slice.admin_url.as_deref()?;
    let server = servers.iter().find(|s| s.admin_url == url)?;
    // `redis/<slice>`: the world's own server.
    let which = match server.kind.split_once('/') {
        Some((kind, _)) => format!("its own {kind} server"),
        None => format!(
            "the managed {} server it lives on (127.0.0.1:{})",
            server.kind, server.port
        ),
    };
    let detail = |m: &str| {
        if m.is_empty() {
            String::new()
        } else {
            format!(" ({m})")
        }
    };
    let (stopped, message) = match server.state {
        ServerState::Running if !dead(server) => return None,
        // Its record says how, and what binky does about it.
        ServerState::Down if !server.message.is_empty() => {
            (false, format!("{which} {}", server.message))
        }
        ServerState::Running | ServerState::Down => (
            false,
            format!("{which} stopped running; binky is starting it again"),
        ),
        ServerState::Starting => (false, format!("{which} is starting")),
        ServerState::Failed => (
            false,
            format!(
                "{which} is not running: binky could not start it{}; it tries again, and `binky servers` shows it",
                detail(&server.message)
            ),
        ),
        ServerState::Stopped => (
            true,
            format!("`binky servers stop` stopped {which}; `binky up {world}` starts it again"),
        ),
    };
    Some(ServerTrouble { stopped, message })
}

/// What is said of a slice whose server at `admin_url` (its `adapter`'s, named by
/// binky.toml or the environment) did not answer, `why`.
pub fn unanswered_message(adapter: &str, admin_url: &str, why: &str) -> String {
    format!(
        "its {adapter} server {} does not answer ({why}); the world is ready again once it does: start that server, or point `admin_url` at one that runs",
        crate::url::redact_server(admin_url)
    )
}

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// The ready `wanted` slices of `world` whose server cannot be used now: (service, its
    /// trouble, whether the server is a managed one). Each such slice's row carries the
    /// trouble's message while it lasts (what `binky status` shows on the slice's line) and
    /// loses it once the server is back; a row already saying so is not written again.
    pub(super) fn server_troubles(
        &self,
        world: &World,
        wanted: &[(String, Resource)],
    ) -> Result<Vec<(String, ServerTrouble, bool)>, SliceError> {
        let (servers, rows) = self
            .store
            .read(|c| Ok((store::servers(c)?, store::slices(c, world.id)?)))?;
        let mut out = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.state == SliceState::Ready && wanted.iter().any(|(s, _)| *s == r.service))
        {
            let Some(url) = row.admin_url.as_deref() else {
                continue;
            };
            let managed = servers.iter().any(|s| s.admin_url == url);
            let trouble = if managed {
                // The server watch records a death within a second: its record is trusted.
                managed_trouble(&servers, row, &world.name, |_| false)
            } else {
                self.effects().unanswered(url).map(|why| ServerTrouble {
                    stopped: false,
                    message: unanswered_message(&row.adapter, url, &why),
                })
            };
            let said = trouble.as_ref().map_or("", |t| t.message.as_str());
            if row.message != said {
                let mut changed = row.clone();
                changed.message = said.to_owned();
                self.save(world, &changed)?;
            }
            if let Some(t) = trouble {
                out.push((row.service.clone(), t, managed));
            }
        }
        Ok(out)
    }
}
