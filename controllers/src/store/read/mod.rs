//! Records as they are read from the store, and the queries that read them, by who wrote
//! them.

mod admissions;
mod batch;
mod daemon;
mod file;
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
pub use observed::*;
pub use resources::*;
pub use routes::*;
pub use runtime::*;
pub use shared::*;
pub use worlds::*;
