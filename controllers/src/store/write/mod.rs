//! The statements that write the store, one module per owner (see [`super::owner`]): each
//! function takes the owner's transaction (`&Tx<'_, owner::X>`), so the compiler refuses to
//! run it in another owner's. Commands' writes are the store's own methods (`store/desired.rs`,
//! [`Store::put_world`](super::Store::put_world) …); what a writer reads inside its
//! transaction is in `store/read/`, like every other read.

pub(crate) mod gate;
pub(crate) mod golden;
pub(crate) mod port;
pub(crate) mod process;
pub mod proxy;
pub(crate) mod route;
pub(crate) mod runtime;
pub mod servers;
pub(crate) mod slice;
pub(crate) mod worktree;
