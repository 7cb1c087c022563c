//! The port controller: every service that asks for ports has them before anything starts.
//!
//! # Guarantees
//! - Ports are unique machine-wide: the `ports` table's primary key is the port, and every
//!   allocation is one transaction against it.
//! - A port is handed out only after a bind probe says nobody listens on it; a port held by
//!   a foreign process is skipped.
//! - Assignments are stable across down/up, reload and daemon restarts. The first choice is
//!   derived from a hash of project, world, service and label, so a world that is removed
//!   and made again usually gets the same ports.
//! - A kept port that a foreign process took while its service was not running is moved,
//!   and an event says so: a service never starts into `EADDRINUSE`.
//! - Each replica of a service (`replicas = N`) has its own ports, allocated and kept the
//!   same way under its instance name (`api.1`; replica 0 is `api`).
//! - A shared service (`shared = true`) has its ports once, in its project's shared world;
//!   every world's tokens resolve to them.
//! - Ports are released when the world is removed, after its processes have stopped.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::registry::Kind;
use crate::runtime::{Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::store::owner::Tx;
use crate::store::{self, owner, write, Store, StoreError, World};

/// The condition this controller reports.
const CONDITION: &str = Kind::Port.condition();

/// Says whether a port is free, by binding it.
pub trait PortProbe: Send + Sync + 'static {
    /// True when a server could bind `port` on loopback right now.
    fn is_free(&self, port: u16) -> bool;
    /// Who listens on `port` (`` `nginx` (pid 42) ``), when that can be seen.
    fn holder(&self, port: u16) -> Option<String> {
        let _ = port;
        None
    }
}

/// Why the port controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No free port left in the range.
    #[error("no free port in {low}-{high} for {service}{label}: {ours} are assigned to binky worlds and {foreign} are held by other processes; widen [project] port_range or remove unused worlds")]
    Exhausted {
        /// Range start.
        low: u16,
        /// Range end.
        high: u16,
        /// The service asking.
        service: String,
        /// `.label` or empty.
        label: String,
        /// Ports binky holds in the range.
        ours: usize,
        /// Ports foreign processes hold in the range.
        foreign: usize,
    },
}

impl ReconcileError for PortError {
    fn reason(&self) -> &'static str {
        match self {
            PortError::Store(_) => "StoreFailed",
            PortError::Exhausted { .. } => "PortRangeExhausted",
        }
    }

    fn stalled(&self) -> bool {
        matches!(self, PortError::Exhausted { .. })
    }
}

/// The port controller.
pub struct PortController<P> {
    store: Store,
    probe: P,
}

impl<P: PortProbe> PortController<P> {
    /// A controller over `store`, probing with `probe`.
    pub fn new(store: Store, probe: P) -> Self {
        PortController { store, probe }
    }
}

fn first_choice(world: &World, service: &str, label: &str, low: u16, high: u16) -> u16 {
    let key = format!("{}:{}:{}:{}", world.project, world.name, service, label);
    let digest = Sha256::digest(key.as_bytes());
    let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    let span = u32::from(high - low) + 1;
    low + (n % span) as u16
}

fn describe(service: &str, label: &str) -> String {
    if label.is_empty() {
        service.to_owned()
    } else {
        format!("{service}.{label}")
    }
}

impl<P: PortProbe> PortController<P> {
    /// The first free port of the project's range for `key` (service, label), from its
    /// first choice on; a busy one is noted as foreign. None free: which range, and how
    /// much of it is binky's and how much foreign.
    fn choose(
        &self,
        world: &World,
        key: &(String, String),
        ledger: &mut Ledger,
    ) -> Result<u16, PortError> {
        let (service, label) = key;
        let (low, high) = world.spec.project.port_range();
        let start = first_choice(world, service, label, low, high);
        let span = u32::from(high - low) + 1;
        for i in 0..span {
            let cand = low + ((u32::from(start - low) + i) % span) as u16;
            if ledger.used.contains(&cand) || ledger.foreign.contains(&cand) {
                continue;
            }
            if !self.probe.is_free(cand) {
                ledger.foreign.insert(cand);
                continue;
            }
            return Ok(cand);
        }
        let ours = ledger
            .used
            .iter()
            .filter(|p| (low..=high).contains(*p))
            .count();
        Err(PortError::Exhausted {
            low,
            high,
            service: service.clone(),
            label: if label.is_empty() {
                String::new()
            } else {
                format!(".{label}")
            },
            ours,
            foreign: ledger.foreign.len(),
        })
    }

    /// Assigns `port` to `key` (service, label), moved from `moved_from` when a foreign
    /// process took that one.
    fn assign(
        &self,
        tx: &Tx<'_, owner::Port>,
        world: &World,
        ledger: &mut Ledger,
        key: &(String, String),
        port: u16,
        moved_from: Option<u16>,
    ) -> Result<(), PortError> {
        let (service, label) = key;
        write::port::assign(tx, world.id, service, label, port)?;
        ledger.used.insert(port);
        ledger.mine.insert(key.clone(), port);
        let what = describe(service, label);
        ledger.events.push(match moved_from {
            Some(old) => (
                "port_moved",
                format!(
                    "port {old} of {what} is held by {}; moved {what} to {port}",
                    self.probe
                        .holder(old)
                        .unwrap_or_else(|| "another process".to_owned())
                ),
            ),
            None => ("port_assigned", format!("assigned port {port} to {what}")),
        });
        Ok(())
    }
}

/// The ports a world wants, as (service, label). Each replica of a service has ports of its
/// own (`api`, `api.1`, … as the service). A shared service's ports are its shared world's,
/// allocated once for every world. A world of a group (`binky up W --group G`) wants none
/// for the services it never starts: a port held for nothing is one fewer for the other
/// worlds, and a token of it (`${worker.port}`) would name a port nobody listens on.
fn wanted_ports(world: &World) -> BTreeSet<(String, String)> {
    let selected = world.spec.selected(world.group.as_deref());
    world
        .spec
        .services
        .iter()
        .filter(|(name, _)| world.runs(name) && selected.contains(*name))
        .flat_map(|(name, svc)| {
            let labels = svc.port_labels();
            world
                .spec
                .instances(name)
                .into_iter()
                .flat_map(move |i| labels.clone().into_iter().map(move |l| (i.clone(), l)))
        })
        .collect()
}

/// A world's port allocation inside its transaction: its ports, every port taken, the
/// ports found held by processes that are not binky's, and the events to record.
struct Ledger {
    mine: BTreeMap<(String, String), u16>,
    used: BTreeSet<u16>,
    foreign: BTreeSet<u16>,
    events: Vec<(&'static str, String)>,
}

/// Whether a world's port stays its own.
enum Keep {
    /// It does (in use by the service, or free).
    Kept,
    /// A foreign process took it: it is released, the service moves.
    Taken(u16),
    /// The service has none yet.
    New,
}

impl Ledger {
    fn read(tx: &Tx<'_, owner::Port>, world: store::WorldId) -> Result<Ledger, PortError> {
        let mine = store::ports_by_key(tx, world)?;
        let used = store::ports_taken(tx)?;
        Ok(Ledger {
            mine,
            used,
            foreign: BTreeSet::new(),
            events: Vec::new(),
        })
    }

    /// Releases the ports of services that are gone from the spec and not running.
    fn release_unwanted(
        &mut self,
        tx: &Tx<'_, owner::Port>,
        wanted: &BTreeSet<(String, String)>,
        holding: &BTreeSet<String>,
    ) -> Result<(), PortError> {
        for (key, port) in self.mine.clone() {
            if !wanted.contains(&key) && !holding.contains(&key.0) {
                write::port::release(tx, port)?;
                self.mine.remove(&key);
                self.used.remove(&port);
                self.events.push((
                    "port_released",
                    format!("released port {port} of {}", describe(&key.0, &key.1)),
                ));
            }
        }
        Ok(())
    }

    /// Whether `key`'s port stays: kept while its service holds it or it is free;
    /// released when a foreign process took it meanwhile.
    fn keep(
        &mut self,
        tx: &Tx<'_, owner::Port>,
        key: &(String, String),
        holding: &BTreeSet<String>,
        probe: &impl PortProbe,
    ) -> Result<Keep, PortError> {
        Ok(match self.mine.get(key) {
            Some(_) if holding.contains(&key.0) => Keep::Kept,
            Some(&port) if probe.is_free(port) => Keep::Kept,
            Some(&port) => {
                write::port::release(tx, port)?;
                self.foreign.insert(port);
                Keep::Taken(port)
            }
            None => Keep::New,
        })
    }
}

impl<P: PortProbe> Controller for PortController<P> {
    type Error = PortError;

    fn kind(&self) -> Kind {
        Kind::Port
    }

    async fn apply(&self, world: &World) -> Result<Applied, PortError> {
        let wanted = wanted_ports(world);
        let holding: BTreeSet<String> = self
            .store
            .read(|c| store::processes(c, world.id))?
            .into_iter()
            .filter(|p| p.state.holds_ports())
            .map(|p| p.service)
            .collect();
        let assigned = self
            .store
            .write_with(owner::Port, |tx| -> Result<_, PortError> {
                let mut ledger = Ledger::read(tx, world.id)?;
                ledger.release_unwanted(tx, &wanted, &holding)?;
                for key in &wanted {
                    let moved_from = match ledger.keep(tx, key, &holding, &self.probe)? {
                        Keep::Kept => continue,
                        Keep::Taken(port) => Some(port),
                        Keep::New => None,
                    };
                    let port = self.choose(world, key, &mut ledger)?;
                    self.assign(tx, world, &mut ledger, key, port, moved_from)?;
                }
                for (kind, msg) in &ledger.events {
                    store::add_event(tx, world.id, kind, msg)?;
                }
                Ok(ledger.mine)
            })?;
        let summary = if assigned.is_empty() {
            "no service asks for a port".to_owned()
        } else {
            assigned
                .iter()
                .map(|((s, l), p)| format!("{}={p}", describe(s, l)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        Ok(Applied::await_change(vec![Condition::ok(
            CONDITION,
            "Allocated",
            summary,
        )]))
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, PortError> {
        self.store.write(owner::Port, |tx| {
            let ports = store::port_numbers(tx, world.id)?;
            if !ports.is_empty() {
                write::port::release_world(tx, world.id)?;
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                store::add_event(
                    tx,
                    world.id,
                    "port_released",
                    &format!("released ports {}", list.join(", ")),
                )?;
            }
            Ok(())
        })?;
        Ok(Cleanup::Done)
    }
}
