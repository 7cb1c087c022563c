//! What each service's cgroup holds: the limits on it, how they are enforced, and what it
//! uses (written by the process controller, `process::resources`).

use rusqlite::{Connection, Row};
use serde::Serialize;

use super::table::Table;
use crate::limits::Mechanism;
use crate::store::{StoreError, WorldId};

/// One service's resources.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResourceRow {
    /// Service name.
    pub service: String,
    /// The cgroup its current (or last) run is in, as the supervisor names it; `None` once
    /// removed, or when it runs in none of binky's.
    #[serde(skip)]
    pub cgroup: Option<String>,
    /// What enforces its limits.
    #[serde(serialize_with = "mechanism_str")]
    pub mechanism: Mechanism,
    /// Why nothing enforces them, when nothing does.
    pub note: String,
    /// Its memory limit, in bytes.
    pub memory_limit: Option<u64>,
    /// Its CPU limit, in thousandths of a core.
    pub cpu_limit: Option<u32>,
    /// Memory in use at the last sample, in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU over the last sampling interval, in percent of one core.
    pub cpu_percent: Option<f64>,
    /// CPU time used by its current run, in microseconds (for the next interval's percent).
    #[serde(skip)]
    pub cpu_usec: Option<u64>,
    /// Periods its CPU limit held it back, in its current run.
    pub throttled: Option<u64>,
    /// Runs the kernel ended for running out of memory.
    pub oom_kills: u64,
    /// When it was last sampled (ms).
    pub sampled_at: Option<i64>,
}

fn mechanism_str<S: serde::Serializer>(m: &Mechanism, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.as_str())
}

const COLUMNS: &str = "service, cgroup, mechanism, note, memory_limit, cpu_limit, memory_bytes,
    cpu_percent, cpu_usec, throttled, oom_kills, sampled_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<ResourceRow> {
    Ok(ResourceRow {
        service: r.get(0)?,
        cgroup: r.get(1)?,
        mechanism: Mechanism::parse(&r.get::<_, String>(2)?),
        note: r.get(3)?,
        memory_limit: r.get::<_, Option<i64>>(4)?.map(|v| v as u64),
        cpu_limit: r.get(5)?,
        memory_bytes: r.get::<_, Option<i64>>(6)?.map(|v| v as u64),
        cpu_percent: r.get(7)?,
        cpu_usec: r.get::<_, Option<i64>>(8)?.map(|v| v as u64),
        throttled: r.get::<_, Option<i64>>(9)?.map(|v| v as u64),
        oom_kills: r.get::<_, i64>(10)? as u64,
        sampled_at: r.get(11)?,
    })
}

/// How `process_resources` is read.
pub(crate) const RESOURCES: Table<ResourceRow> = Table {
    name: "process_resources",
    columns: COLUMNS,
    order: "service",
    row: from_row,
};

/// A world's services' resources, by service.
pub fn resources(conn: &Connection, world: WorldId) -> Result<Vec<ResourceRow>, StoreError> {
    RESOURCES.of_world(conn, world)
}

/// Every world's services' resources (for the sampler).
pub fn all_resources(conn: &Connection) -> Result<Vec<(WorldId, ResourceRow)>, StoreError> {
    RESOURCES.all(conn)
}
