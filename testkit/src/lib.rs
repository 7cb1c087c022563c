//! binky's test and benchmark kit: what `tests/integration` and every benchmark under
//! `benchmarks/` share, so that each is written once.
//!
//! - [`servers`]: private PostgreSQL, MariaDB, Redis, ClickHouse, RabbitMQ, moto (S3) and
//!   tansu (Kafka) instances on loopback, found the way the tests always found them and
//!   stopped on drop.
//! - [`procs`]: is a pid alive, the processes of a sandbox (by environment or working
//!   directory), process trees.
//! - [`git`]: repositories with commits.
//! - [`browser`]: a headless Chromium driven over the DevTools protocol.
//! - [`load`]: a CPU hog, to show a claim holds on a loaded machine.
//! - [`net`], [`wait`], [`run`]: free ports, waiting for a condition, running a command
//!   with a timeout and capturing its output.
//! - [`stats`], [`table`], [`stop`], [`args`], [`sandbox`], [`tool`]: what the benchmarks
//!   report, how they take Ctrl-C and parse their flags, the sandbox each tool runs in and
//!   the tool (binky or binky 0.1.2) run there.
//!
//! A dev-only crate: the `binky` binary never links it, and it links nothing of binky.
//!
//! On Windows only what needs no Unix call builds (args, load, net, sandbox, table, wait):
//! enough for tests/everywhere, the tests that also run there.

pub mod args;
#[cfg(unix)]
pub mod browser;
#[cfg(unix)]
pub mod git;
pub mod load;
pub mod net;
#[cfg(unix)]
pub mod procs;
#[cfg(unix)]
pub mod run;
pub mod sandbox;
#[cfg(unix)]
pub mod servers;
#[cfg(unix)]
pub mod stats;
#[cfg(unix)]
pub mod stop;
pub mod table;
#[cfg(unix)]
pub mod terminal;
#[cfg(unix)]
pub mod tool;
pub mod wait;

/// `impl Deref for $outer` to its field `$field` (a `$target`): a bench's wrapper of a kit
/// server or tool, with the bench's own fields beside it, reads as the thing it wraps.
#[macro_export]
macro_rules! deref_to {
    ($outer:ty, $field:ident: $target:ty) => {
        impl std::ops::Deref for $outer {
            type Target = $target;
            fn deref(&self) -> &$target {
                &self.$field
            }
        }
    };
}

/// The benchmarks' result type: errors are messages for the terminal.
pub type Res<T> = Result<T, String>;

/// A random hex secret (36 characters) from the kernel (`getrandom`); a test cannot run
/// without one.
pub fn random_secret() -> String {
    let mut buf = [0u8; 18];
    if let Err(e) = getrandom::fill(&mut buf) {
        panic!("no random bytes from the kernel: {e}");
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// `'` → `%27`: for user names, passwords and database names in URLs.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The inverse of [`percent_encode`] (a `%` not followed by two hex digits stays).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
