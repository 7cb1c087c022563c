//! Controller tests: the real store and runtime functions, fake effects.

mod gate;
mod golden;
mod port;
mod process;
mod replica;
mod shared;
mod slice;
mod worktree;
