//! Records as they are read from the store, and the queries that read them, by who wrote
//! them.

mod admissions;
mod batch;
mod daemon;
mod file;
mod home;
mod observed;
mod resources;
mod routes;
mod runtime;
mod shared;
mod table;
mod worlds;

pub use admissions::*;
pub use batch::*;
pub use daemon::*;
pub use file::*;
pub use home::*;
pub use observed::*;
pub use resources::*;
pub use routes::*;
pub use runtime::*;
pub use shared::*;
pub use worlds::*;

/// The first column of every row `sql` answers for `params`, collected (a list, a set).
pub(crate) fn column<T, C>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<C, super::StoreError>
where
    T: rusqlite::types::FromSql,
    C: FromIterator<T>,
{
    let mut stmt = conn.prepare_cached(sql)?;
    let out = stmt
        .query_map(params, |r| r.get(0))?
        .collect::<Result<C, _>>()?;
    Ok(out)
}
