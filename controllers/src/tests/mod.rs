//! Controller tests: the real store and runtime functions, fake effects.

mod port;
mod process;
mod worktree;
