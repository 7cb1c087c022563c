//! Integration tests: the real `binky` binary, real git repositories in temp dirs, real
//! processes, an isolated `BINKY_HOME` each. Every test cleans up and most assert that
//! nothing is left behind.

mod daemon;
mod faults;
mod harness;
mod lifecycle;
mod proxy;
