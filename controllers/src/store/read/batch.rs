//! Every world's observed rows read at once — one query per table, not one per table and
//! world — for views of many worlds (`binky status`, the dashboard, MCP `list`).

use std::collections::{BTreeMap, HashMap};

use rusqlite::Connection;

use super::shared::{provider, seen, uses_shared};
use super::WORKTREES;
use super::{
    BootstrapRow, ConditionRow, PortRow, ProcessRow, ResourceRow, SharedEditRow, SliceRow,
    WorktreeRow, World,
};
use super::{
    BOOTSTRAP_PATHS, CONDITIONS, GENERATIONS, PORTS, PROCESSES, RESOURCES, SHARED_EDITS, SLICES,
};
use crate::store::{StoreError, WorldId};

/// One world's observed rows.
#[derive(Default)]
pub struct WorldRows {
    /// `controller → observed_generation`.
    pub generations: BTreeMap<String, i64>,
    /// Its conditions, by type.
    pub conditions: Vec<ConditionRow>,
    /// Its own processes, by service.
    pub processes: Vec<ProcessRow>,
    /// Its own ports, by service and label.
    pub ports: Vec<PortRow>,
    /// Its worktree.
    pub worktree: Option<WorktreeRow>,
    /// Its own slices, by service.
    pub slices: Vec<SliceRow>,
    /// Its services' cgroups, by service.
    pub resources: Vec<ResourceRow>,
    /// The paths its worktree got from the main checkout, by path.
    pub bootstrap: Vec<BootstrapRow>,
    /// Its linked files found edited in place, by path and file.
    pub shared_edits: Vec<SharedEditRow>,
}

impl WorldRows {
    /// The rows of one world.
    pub fn read(conn: &Connection, world: WorldId) -> Result<WorldRows, StoreError> {
        Ok(WorldRows {
            generations: super::observed_generations(conn, world)?,
            conditions: super::conditions(conn, world)?,
            processes: super::processes(conn, world)?,
            ports: super::ports(conn, world)?,
            worktree: super::worktree(conn, world)?,
            slices: super::slices(conn, world)?,
            resources: super::resources(conn, world)?,
            bootstrap: super::bootstrap_paths(conn, world)?,
            shared_edits: super::shared_edits(conn, world)?,
        })
    }
}

/// What a world sees of its project's shared world, beside its own rows (as
/// [`super::ports_seen_by`], [`super::slices_seen_by`] and [`super::shared_processes`]).
pub struct Seen {
    /// Its ports and the shared world's of the services it shares.
    pub ports: Vec<PortRow>,
    /// Its slices and the shared world's of the services it shares.
    pub slices: Vec<SliceRow>,
    /// The shared world's processes of the services it shares.
    pub shared_processes: Vec<ProcessRow>,
}

impl Seen {
    /// What `world` sees, given its own rows and, when it uses one, its shared world's.
    fn of(world: &World, own: &WorldRows, shared: Option<&WorldRows>) -> Seen {
        Seen {
            ports: seen(
                world,
                own.ports.clone(),
                shared.map(|s| s.ports.clone()),
                |p| &p.service,
            ),
            slices: seen(
                world,
                own.slices.clone(),
                shared.map(|s| s.slices.clone()),
                |s| &s.service,
            ),
            shared_processes: seen(
                world,
                Vec::new(),
                shared.map(|s| s.processes.clone()),
                |p| &p.service,
            ),
        }
    }

    /// What `world`, whose own rows are `own`, sees: its shared world's rows are read only
    /// when it uses one.
    pub fn read(conn: &Connection, world: &World, own: &WorldRows) -> Result<Seen, StoreError> {
        let shared = match provider(conn, world)? {
            Some(id) => Some(WorldRows {
                ports: super::ports(conn, id)?,
                slices: super::slices(conn, id)?,
                processes: super::processes(conn, id)?,
                ..WorldRows::default()
            }),
            None => None,
        };
        Ok(Seen::of(world, own, shared.as_ref()))
    }
}

/// Every world's observed rows, read in one pass.
pub struct Observed {
    worlds: HashMap<WorldId, WorldRows>,
    /// Each project's shared world.
    shared: HashMap<i64, WorldId>,
    none: WorldRows,
}

impl Observed {
    /// Read every world's rows (call inside one [`crate::store::Store::read`], so they are
    /// one snapshot).
    pub fn read(conn: &Connection) -> Result<Observed, StoreError> {
        let mut worlds: HashMap<WorldId, WorldRows> = HashMap::new();
        macro_rules! fill {
            ($table:expr, $field:ident) => {
                for (id, rows) in $table.by_world(conn)? {
                    worlds.entry(id).or_default().$field = rows.into_iter().collect();
                }
            };
            ($table:expr, $field:ident, one) => {
                for (id, row) in $table.all(conn)? {
                    worlds.entry(id).or_default().$field = Some(row);
                }
            };
        }
        fill!(GENERATIONS, generations);
        fill!(CONDITIONS, conditions);
        fill!(PROCESSES, processes);
        fill!(PORTS, ports);
        fill!(WORKTREES, worktree, one);
        fill!(SLICES, slices);
        fill!(RESOURCES, resources);
        fill!(BOOTSTRAP_PATHS, bootstrap);
        fill!(SHARED_EDITS, shared_edits);
        let mut stmt = conn.prepare_cached("SELECT project_id, id FROM worlds WHERE name = ?1")?;
        let shared = stmt
            .query_map([crate::shared::WORLD], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(Observed {
            worlds,
            shared,
            none: WorldRows::default(),
        })
    }

    /// The rows of world `id` (none when it has none yet).
    pub fn of(&self, id: WorldId) -> &WorldRows {
        self.worlds.get(&id).unwrap_or(&self.none)
    }

    /// What `world` sees of its project's shared world.
    pub fn seen_by(&self, world: &World) -> Seen {
        let shared = uses_shared(world)
            .then(|| self.shared.get(&world.project_id))
            .flatten()
            .map(|id| self.of(*id));
        Seen::of(world, self.of(world.id), shared)
    }
}
